/* consul_http.h: the transport under the Consul endpoints (consul_http.c), for consul.c only:
 * the client's state and one request. Callers outside lib/ use consul.h. */
#ifndef SK_CONSUL_HTTP_H
#define SK_CONSUL_HTTP_H

#include <curl/curl.h>

#include "consul.h"

struct consul {
	CURLM *multi;
	CURL *easy;
	char *base; /* scheme://host[:port][/prefix], no trailing slash */
	char *unix_path;
	char *dc;
	char *token_header; /* "X-Consul-Token: ..." (a secret) */
	struct consul_login *login; /* borrowed: its token replaces token_header (consul_set_login) */
	char *userpwd; /* basic auth (a secret) */
	struct curl_slist *connect_to;
	int cancel_fd;
	char *proxy_shown; /* the proxy requests go through (consul_proxy_for), redacted; NULL: direct */
	sk_buf body;
	bool body_overflow;
	size_t error_bytes; /* of a listing's error answer, for the cap */
	struct consul_listing *listing; /* set while a listing is read: 200 answers stream into it */
	bool index_seen;
	struct consul_meta meta;
	char curl_err[CURL_ERROR_SIZE];
};

/* One request: `method` ("GET", "PUT", "POST", "DELETE"); `path` already escaped, perhaps with a
 * query (the client's ?dc= is added); `what` names it in errors ("METHOD PATH"); a body of `len`
 * bytes of `content_type` (NULL: none); the deadline that bounds it all. */
struct consul_call {
	const char *method, *path, *what;
	const char *content_type;
	const void *body;
	size_t len;
	const deadline_t *dl;
};

/* Send one request. Returns 0 when an answer arrived: it is in c->body and c->meta (any status;
 * the caller judges it). Returns -1 when none did (or the answer was refused unread: the size
 * cap, a listing that went bad), with err set and c->meta.reason saying why. While c->listing is
 * set, a 200 answer streams into it instead of c->body. */
int consul_http_request(struct consul *c, const struct consul_call *call, char *err, size_t errlen) SK_MUST_CHECK;

/* consul_http_request with `token` (NULL: none) instead of the client's own token. */
int consul_http_request_as(struct consul *c, const char *token, const struct consul_call *call, char *err,
			   size_t errlen) SK_MUST_CHECK;

/* The answer is 403 "ACL not found": Consul does not know the token sent (revoked, expired). */
bool consul_http_acl_not_found(const struct consul *c);

/* The first line of the answer's body, printable (at most 200 characters), for error messages. */
void consul_http_body_line(const struct consul *c, char *out, size_t len);

/* Fail with a reason: c->meta.reason = r, err formatted. Returns -1. */
int consul_http_fail(struct consul *c, enum consul_reason r, char *err, size_t errlen, const char *fmt, ...)
	SK_PRINTF(5, 6);

/* Refuse a call before anything is sent (a bad key or ID, a path too long): the last answer's
 * meta is forgotten and the reason is CONSUL_CLIENT_ERROR. Returns -1. */
int consul_http_refuse(struct consul *c, char *err, size_t errlen, const char *fmt, ...) SK_PRINTF(4, 5);

/* A listing of a large prefix grows the answer buffer to megabytes; once the entries are copied
 * out, give that memory back (wiped: KV values are user passwords) instead of keeping it between
 * wake-ups. */
void consul_http_release_body(struct consul *c);

/* Append `s` percent-encoded for a URL path (keep_slash) or a query value. False past the
 * buffer's cap. */
bool consul_http_escape(sk_buf *b, const char *s, bool keep_slash) SK_MUST_CHECK;

#endif
