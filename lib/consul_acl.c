/* consul_acl.c: the ACL rule each Consul endpoint the project calls needs, so that a 403 answer is
 * logged with what to add to the token's policy. */
#include "consul_acl.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util.h"

/* One endpoint: the method (NULL: any other than those listed before it for the same path), the
 * path or, ending in '/', its prefix, and the rule: `before`, then the rest of the path after the
 * prefix when `named` (a key, a service's name), then `after`. */
struct acl_endpoint {
	const char *method, *path;
	const char *before;
	bool named;
	const char *after;
};

static const struct acl_endpoint endpoints[] = {
	{ "GET", "/v1/kv/", "key_prefix \"", true, "\" read" },
	{ NULL, "/v1/kv/", "key_prefix \"", true, "\" write" },
	{ "PUT", "/v1/session/create", "session_prefix \"\" write", false, "" },
	{ "PUT", "/v1/session/renew/", "session_prefix \"\" write", false, "" },
	{ "PUT", "/v1/session/destroy/", "session_prefix \"\" write", false, "" },
	{ "GET", "/v1/session/", "session_prefix \"\" read", false, "" },
	{ "GET", "/v1/agent/self", "agent_prefix \"\" read", false, "" },
	{ "PUT", "/v1/agent/service/register", "service \"<the service's name>\" write", false, "" },
	{ "PUT", "/v1/agent/service/deregister/", "service \"<the service's name>\" write", false, "" },
	{ "PUT", "/v1/agent/check/", "service \"<the service's name>\" write (the check's service)", false, "" },
	{ "GET", "/v1/health/service/", "service \"", true, "\" read and node_prefix \"\" read" },
	{ "GET", "/v1/catalog/service/", "service \"", true, "\" read and node_prefix \"\" read" },
	{ "GET", "/v1/status/", "no rule (this endpoint answers without a token)", false, "" },
};

/* `path` (up to `n` bytes) is the endpoint's path, or starts with its prefix. */
static bool path_matches(const struct acl_endpoint *e, const char *path, size_t n)
{
	size_t plen = strlen(e->path);

	if (e->path[plen - 1] == '/')
		return n >= plen && strncmp(path, e->path, plen) == 0;
	return n == plen && strncmp(path, e->path, plen) == 0;
}

const char *consul_acl_rule(const char *method, const char *path, char *out, size_t len)
{
	size_t n = strcspn(path, "?");

	for (size_t i = 0; i < SK_ARRAY_LEN(endpoints); i++) {
		const struct acl_endpoint *e = &endpoints[i];

		if (!path_matches(e, path, n) || (e->method && strcmp(e->method, method) != 0))
			continue;
		if (e->named) {
			size_t plen = strlen(e->path);

			snprintf(out, len, "%s%.*s%s", e->before, (int)(n - plen), path + plen, e->after);
		} else {
			snprintf(out, len, "%s%s", e->before, e->after);
		}
		return out;
	}
	snprintf(out, len, "a rule that allows %s %.*s", method, (int)n, path);
	return out;
}
