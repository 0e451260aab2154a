/* consul_acl.h: the ACL rule each Consul endpoint the project calls needs (consul_acl.c), for the
 * line a 403 answer is logged as. */
#ifndef SK_CONSUL_ACL_H
#define SK_CONSUL_ACL_H

#include <stddef.h>

/* The ACL rule a token needs for one endpoint the project calls, in Consul's policy language
 * (`session_prefix "" write`, `key_prefix "mysql/master" read`), for the line a 403 answer is logged
 * as: `method` "GET", "PUT", "DELETE"; `path` as in the request, with or without its query
 * ("/v1/kv/mysql/master?recurse"). An endpoint it does not know gets a general sentence. Writes at
 * most len bytes into out and returns out. Pure. */
const char *consul_acl_rule(const char *method, const char *path, char *out, size_t len);

#endif
