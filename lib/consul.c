/* consul.c: the Consul HTTP API's endpoints: KV listings and writes, health-checked services,
 * sessions, the local agent's self, services and checks, the leader; each builds its path, runs one
 * request (consul_http.c) and reads the answer (listings: consul_listing.c). */
#include "consul.h"

#include <cJSON.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consul_acl.h"
#include "consul_http.h"
#include "consul_login.h"
#include "log.h"

#define WAIT_MARGIN_MS 3000
#define CONSUL_DEFAULT_WAIT_MS 300000 /* what Consul waits when a blocking query gives no wait */

/* A 403 in one line: the endpoint (`what`: "METHOD PATH"), and either the rule the token lacks
 * (consul_acl_rule) or, for "ACL not found", that Consul does not know the token at all. */
static int denied(struct consul *c, const char *what, const char *line, char *err, size_t errlen)
{
	char method[16], rule[300];
	size_t m = strcspn(what, " ");

	if (strstr(line, "ACL not found"))
		return consul_http_fail(c, CONSUL_FORBIDDEN, err, errlen,
					"%s denied: Consul does not know the token (ACL not found: unknown, revoked or "
					"expired) (see docs/consul-acl.md)",
					what);
	snprintf(method, sizeof(method), "%.*s", (int)(m < sizeof(method) ? m : sizeof(method) - 1), what);
	consul_acl_rule(method, what[m] ? what + m + 1 : "", rule, sizeof(rule));
	return consul_http_fail(c, CONSUL_FORBIDDEN, err, errlen,
				"%s denied: the token needs %s (see docs/consul-acl.md)", what, rule);
}

/* An answer with another status than the one expected: the reason by its status, err with the
 * first line of its body (a 403: what the token lacks). */
static int status_error(struct consul *c, const char *what, char *err, size_t errlen)
{
	enum consul_reason r = c->meta.http_status == 403   ? CONSUL_FORBIDDEN
			       : c->meta.http_status == 404 ? CONSUL_NOT_FOUND
							    : CONSUL_HTTP_ERROR;
	char line[256];

	consul_http_body_line(c, line, sizeof(line));
	if (r == CONSUL_FORBIDDEN)
		return denied(c, what, line, err, errlen);
	if (*line)
		return consul_http_fail(c, r, err, errlen, "%s: HTTP %ld: %s", what, c->meta.http_status, line);
	return consul_http_fail(c, r, err, errlen, "%s: HTTP %ld", what, c->meta.http_status);
}

/* One request with the client's token: with a login (consul_set_login), its current token,
 * logging in first when needed; an answer 403 "ACL not found" (Consul no longer knows the token)
 * logs in again and sends the request once more. */
static int request(struct consul *c, const struct consul_call *call, char *err, size_t errlen)
{
	struct consul_login_secret secret;
	int rc;

	if (!c->login)
		return consul_http_request(c, call, err, errlen);
	for (int attempt = 0;; attempt++) {
		if (consul_login_token(c->login, c, call->dl, &secret, err, errlen) < 0)
			return -1;
		rc = consul_http_request_as(c, secret.token, call, err, errlen);
		sk_wipe(secret.token, sizeof(secret.token));
		if (rc < 0 || attempt > 0 || !consul_http_acl_not_found(c))
			return rc;
		consul_login_lost(c->login, secret.gen);
	}
}

void consul_set_login(struct consul *c, struct consul_login *l)
{
	c->login = l;
}

int consul_logout(struct consul *c, const deadline_t *dl, char *err, size_t errlen)
{
	const char *what = "POST /v1/acl/logout";
	char secret[CONSUL_LOGIN_SECRET_MAX];
	int rc;

	if (!c->login || !consul_login_take(c->login, secret, sizeof(secret)))
		return 0;
	rc = consul_http_request_as(
		c, secret, &(struct consul_call){ .method = "POST", .path = "/v1/acl/logout", .what = what, .dl = dl },
		err, errlen);
	log_forget_secret(secret);
	sk_wipe(secret, sizeof(secret));
	if (rc < 0)
		return -1;
	return c->meta.http_status == 200 ? 0 : status_error(c, what, err, errlen);
}

const char *consul_consistency_str(enum consul_consistency mode)
{
	switch (mode) {
	case CONSUL_STALE: return "stale";
	case CONSUL_CONSISTENT: return "consistent";
	case CONSUL_DEFAULT: break;
	}
	return "default";
}

bool consul_consistency_parse(const char *s, enum consul_consistency *out)
{
	static const enum consul_consistency all[] = { CONSUL_DEFAULT, CONSUL_STALE, CONSUL_CONSISTENT };

	for (size_t i = 0; i < SK_ARRAY_LEN(all); i++) {
		if (sk_streq_ci(s, consul_consistency_str(all[i]))) {
			*out = all[i];
			return true;
		}
	}
	return false;
}

const char *consul_agent_mode_str(enum consul_agent_mode mode)
{
	switch (mode) {
	case CONSUL_AGENT_LOCAL: return "local";
	case CONSUL_AGENT_NONE: return "none";
	case CONSUL_AGENT_AUTO: break;
	}
	return "auto";
}

bool consul_agent_mode_parse(const char *s, enum consul_agent_mode *out)
{
	static const enum consul_agent_mode all[] = { CONSUL_AGENT_AUTO, CONSUL_AGENT_LOCAL, CONSUL_AGENT_NONE };

	for (size_t i = 0; i < SK_ARRAY_LEN(all); i++) {
		if (strcmp(s, consul_agent_mode_str(all[i])) == 0) {
			*out = all[i];
			return true;
		}
	}
	return false;
}

/* A key (or prefix) we are willing to put in a URL: no leading '/', no "." or ".." segment
 * (which URL normalisation would resolve to another key), no control characters. */
static int check_key(struct consul *c, const char *key, bool allow_empty, char *err, size_t errlen)
{
	const char *seg = key;

	if (!*key && !allow_empty)
		return consul_http_refuse(c, err, errlen, "empty consul key");
	if (*key == '/')
		return consul_http_refuse(c, err, errlen, "consul key '%.200s' starts with '/'", key);
	if (sk_has_ctl(key))
		return consul_http_refuse(c, err, errlen, "consul key contains a control character");
	for (;;) {
		size_t n = strcspn(seg, "/");

		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return consul_http_refuse(c, err, errlen, "consul key '%.200s' has a '.' or '..' segment", key);
		if (!seg[n])
			break;
		seg += n + 1;
	}
	return 0;
}

/* A "true"/"false" answer (KV writes, session destroy). */
static int bool_answer(struct consul *c, const char *what, bool *out, char *err, size_t errlen)
{
	char line[16];
	size_t n = c->body.len;
	const char *p = c->body.data ? c->body.data : "";

	while (n && isspace((unsigned char)*p))
		p++, n--;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	if (n >= sizeof(line))
		return consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: unexpected answer (not true or false)",
					what);
	memcpy(line, p, n);
	line[n] = '\0';
	if (strcmp(line, "true") == 0)
		*out = true;
	else if (strcmp(line, "false") == 0)
		*out = false;
	else
		return consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen,
					"%s: unexpected answer '%s' (not true or false)", what, line);
	return 0;
}

long consul_wait_budget_ms(long wait_ms)
{
	if (wait_ms <= 0)
		wait_ms = CONSUL_DEFAULT_WAIT_MS;
	return wait_ms + wait_ms / 16 + WAIT_MARGIN_MS;
}

/* The index, wait and consistency parameters of a blocking read (after a first parameter). */
static bool add_blocking(sk_buf *path, const struct consul_read *r)
{
	uint64_t index = r->index;
	long wait_ms = r->wait_ms;
	enum consul_consistency mode = r->mode;

	return (index == 0 || sk_buf_addf(path, "&index=%" PRIu64, index)) &&
	       (index == 0 || wait_ms <= 0 || sk_buf_addf(path, "&wait=%ldms", wait_ms)) &&
	       (mode == CONSUL_DEFAULT || sk_buf_addf(path, "&%s", consul_consistency_str(mode)));
}

/* A listing to GET: its path (with the query) and name in errors, whether a 404 is an empty
 * listing, and the parser it goes to. */
struct listing_call {
	const char *path, *what;
	bool empty_404;
	enum consul_listing_kind kind;
};

/* GET a blocking listing, parsed as it arrives: the status and the index checked, the entries
 * into out, the answer's headers into r->meta. */
static int blocking_list(struct consul *c, const struct listing_call *lc, struct consul_read *r,
			 struct consul_kv_list *out, char *err, size_t errlen)
{
	struct consul_listing *l = consul_listing_new(lc->kind, c->body.max);
	const char *what = lc->what;
	char why[240];
	int ret = -1, rc;

	c->listing = l;
	rc = request(c, &(struct consul_call){ .method = "GET", .path = lc->path, .what = what, .dl = r->dl }, err,
		     errlen);
	c->listing = NULL;
	if (rc < 0)
		goto out;
	if (c->meta.http_status != 200 && !(lc->empty_404 && c->meta.http_status == 404)) {
		status_error(c, what, err, errlen);
		goto out;
	}
	if (!c->index_seen) {
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: answer without a valid X-Consul-Index header",
				 what);
		goto out;
	}
	if (c->meta.http_status == 200 && consul_listing_finish(l, out, why, sizeof(why)) < 0) {
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: bad answer: %s", what, why);
		goto out;
	}
	ret = 0;
out:
	consul_listing_free(l);
	r->meta = c->meta;
	consul_http_release_body(c);
	return ret;
}

int consul_kv_list(struct consul *c, const char *prefix, struct consul_read *r, struct consul_kv_list *out, char *err,
		   size_t errlen)
{
	sk_buf path;
	char what[300];
	int ret = -1;

	out->n = 0;
	out->items = NULL;
	snprintf(what, sizeof(what), "GET /v1/kv/%.200s?recurse", prefix);
	sk_buf_init(&path, 16384);
	if (check_key(c, prefix, true, err, errlen) < 0)
		goto out;
	if (!sk_buf_add(&path, "/v1/kv/", 7) || !consul_http_escape(&path, prefix, true) ||
	    !sk_buf_add(&path, "?recurse", 8) || !add_blocking(&path, r))
		consul_http_refuse(c, err, errlen, "%s: key too long", what);
	else
		ret = blocking_list(c, &(struct listing_call){ path.data, what, true, CONSUL_LISTING_KV }, r, out, err,
				    errlen);
out:
	r->meta = c->meta;
	sk_buf_free(&path);
	return ret;
}

/* A PUT or DELETE on a key: its query ("?name" or "?name=value", the value escaped; no name: none)
 * and the value sent (NULL: no body). */
struct kv_op {
	const char *method, *key;
	const char *query_name, *query_value;
	const void *value;
	size_t len;
};

/* PUT/DELETE on a key, expecting true/false. */
static int kv_write(struct consul *c, const struct kv_op *op, const deadline_t *dl, bool *done, char *err,
		    size_t errlen)
{
	const char *method = op->method, *key = op->key, *query_name = op->query_name, *query_value = op->query_value;
	sk_buf path;
	char what[300];
	int ret = -1;

	snprintf(what, sizeof(what), "%s /v1/kv/%.200s", method, key);
	if (check_key(c, key, false, err, errlen) < 0)
		return -1;
	sk_buf_init(&path, 16384);
	if (!sk_buf_add(&path, "/v1/kv/", 7) || !consul_http_escape(&path, key, true) ||
	    (query_name &&
	     (!sk_buf_addf(&path, "?%s", query_name) ||
	      (query_value && (!sk_buf_add(&path, "=", 1) || !consul_http_escape(&path, query_value, false)))))) {
		consul_http_refuse(c, err, errlen, "%s: key too long", what);
		goto out;
	}
	if (request(c,
		    &(struct consul_call){ method, path.data, what, op->value ? "application/octet-stream" : NULL,
					   op->value, op->len, dl },
		    err, errlen) < 0)
		goto out;
	if (c->meta.http_status != 200) {
		status_error(c, what, err, errlen);
		goto out;
	}
	ret = bool_answer(c, what, done, err, errlen);
out:
	sk_buf_free(&path);
	return ret;
}

int consul_kv_put(struct consul *c, const struct consul_kv_write *w, const deadline_t *dl, bool *done, char *err,
		  size_t errlen)
{
	const char *session = w->session;

	*done = false;
	if (session && !*session)
		return consul_http_refuse(c, err, errlen, "PUT /v1/kv/%.200s: empty session ID", w->key);
	return kv_write(
		c,
		&(struct kv_op){ "PUT", w->key, session ? "acquire" : NULL, session, w->value ? w->value : "", w->len },
		dl, done, err, errlen);
}

int consul_kv_release(struct consul *c, const struct consul_kv_write *w, const deadline_t *dl, bool *done, char *err,
		      size_t errlen)
{
	*done = false;
	if (!w->session || !*w->session)
		return consul_http_refuse(c, err, errlen, "PUT /v1/kv/%.200s: empty session ID", w->key);
	return kv_write(c, &(struct kv_op){ "PUT", w->key, "release", w->session, "", 0 }, dl, done, err, errlen);
}

int consul_kv_delete(struct consul *c, const char *key, bool recurse, const deadline_t *dl, char *err, size_t errlen)
{
	bool done;

	return kv_write(c, &(struct kv_op){ "DELETE", key, recurse ? "recurse" : NULL, NULL, NULL, 0 }, dl, &done, err,
			errlen);
}

static bool session_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n >= CONSUL_SESSION_ID_MAX)
		return false;
	for (; *id; id++)
		if (!isxdigit((unsigned char)*id) && *id != '-')
			return false;
	return true;
}

/* The JSON body of PUT /v1/session/create. False when it does not fit. */
static bool session_body(sk_buf *body, const struct consul_session_spec *s)
{
	return sk_buf_add(body, "{\"Name\":", 8) && sk_buf_add_json_str(body, s->name ? s->name : "") &&
	       (s->ttl_s <= 0 || sk_buf_addf(body, ",\"TTL\":\"%lds\"", s->ttl_s)) &&
	       (!s->behavior || sk_buf_addf(body, ",\"Behavior\":\"%s\"", s->behavior)) &&
	       (!s->lock_delay || sk_buf_addf(body, ",\"LockDelay\":\"%s\"", s->lock_delay)) &&
	       (s->node_health || sk_buf_addf(body, ",\"NodeChecks\":[],\"Checks\":[]")) && sk_buf_add(body, "}", 1);
}

int consul_session_create(struct consul *c, const struct consul_session_spec *s, const deadline_t *dl,
			  char id[CONSUL_SESSION_ID_MAX], char *err, size_t errlen)
{
	const char *what = "PUT /v1/session/create", *behavior = s->behavior, *lock_delay = s->lock_delay;
	cJSON *doc = NULL, *jid;
	sk_buf body;
	int ret = -1;

	id[0] = '\0';
	if (behavior && strcmp(behavior, "delete") != 0 && strcmp(behavior, "release") != 0)
		return consul_http_refuse(c, err, errlen, "%s: behavior must be delete or release", what);
	if (lock_delay && (!*lock_delay || strspn(lock_delay, "0123456789.nsumh") != strlen(lock_delay)))
		return consul_http_refuse(c, err, errlen, "%s: bad lock delay '%.40s'", what, lock_delay);
	if (s->ttl_s < 0 || s->ttl_s > 86400)
		return consul_http_refuse(c, err, errlen, "%s: TTL %lds out of range", what, s->ttl_s);
	sk_buf_init(&body, 4096);
	if (!session_body(&body, s)) {
		consul_http_refuse(c, err, errlen, "%s: session name too long", what);
		goto out;
	}
	if (request(c,
		    &(struct consul_call){ "PUT", "/v1/session/create", what, "application/json", body.data, body.len,
					   dl },
		    err, errlen) < 0)
		goto out;
	if (c->meta.http_status != 200) {
		status_error(c, what, err, errlen);
		goto out;
	}
	doc = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	jid = doc ? cJSON_GetObjectItemCaseSensitive(doc, "ID") : NULL;
	if (!cJSON_IsString(jid) || !session_id_ok(jid->valuestring)) {
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: answer without a session ID", what);
		goto out;
	}
	if (!sk_strlcpy(id, jid->valuestring, CONSUL_SESSION_ID_MAX)) {
		consul_http_fail(c, CONSUL_CLIENT_ERROR, err, errlen, "%s: session ID too long", what);
		goto out;
	}
	ret = 0;
out:
	cJSON_Delete(doc);
	sk_buf_free(&body);
	return ret;
}

/* PUT <path><id>[?note=...]: the endpoints that name a session, a service or a check; `what`
 * receives the request's name for errors. */
struct named_put {
	const char *path, *id, *note;
	char what[200];
};

static int put_named(struct consul *c, struct named_put *n, const deadline_t *dl, char *err, size_t errlen)
{
	const char *path = n->path, *id = n->id, *note = n->note, *what = n->what;
	sk_buf url;
	int ret = -1;

	snprintf(n->what, sizeof(n->what), "PUT %s%.120s", path, id);
	if (!*id || sk_has_ctl(id) || (note && sk_has_ctl(note)))
		return consul_http_refuse(c, err, errlen, "%s: not an ID", what);
	sk_buf_init(&url, 1024);
	if (!sk_buf_add(&url, path, strlen(path)) || !consul_http_escape(&url, id, false) ||
	    (note && (!sk_buf_add(&url, "?note=", 6) || !consul_http_escape(&url, note, false)))) {
		consul_http_refuse(c, err, errlen, "%s: too long", what);
		goto out;
	}
	ret = request(c, &(struct consul_call){ .method = "PUT", .path = url.data, .what = what, .dl = dl }, err,
		      errlen);
out:
	sk_buf_free(&url);
	return ret;
}

/* PUT /v1/session/<verb>/<n->id>. */
static int session_op(struct consul *c, const char *verb, struct named_put *n, const deadline_t *dl, char *err,
		      size_t errlen)
{
	char path[64];

	snprintf(path, sizeof(path), "/v1/session/%s/", verb);
	n->path = path;
	if (!session_id_ok(n->id)) {
		snprintf(n->what, sizeof(n->what), "PUT %s%.80s", path, n->id);
		return consul_http_refuse(c, err, errlen, "%s: not a session ID", n->what);
	}
	return put_named(c, n, dl, err, errlen);
}

int consul_session_renew(struct consul *c, const char *id, const deadline_t *dl, bool *gone, char *err, size_t errlen)
{
	struct named_put n = { .id = id };
	const char *what = n.what;

	*gone = false;
	if (session_op(c, "renew", &n, dl, err, errlen) < 0)
		return -1;
	if (c->meta.http_status == 404) {
		*gone = true;
		return 0;
	}
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	return 0;
}

int consul_session_destroy(struct consul *c, const char *id, const deadline_t *dl, char *err, size_t errlen)
{
	struct named_put n = { .id = id };
	const char *what = n.what;
	bool ok;

	if (session_op(c, "destroy", &n, dl, err, errlen) < 0)
		return -1;
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	if (bool_answer(c, what, &ok, err, errlen) < 0)
		return -1;
	if (!ok)
		return consul_http_fail(c, CONSUL_HTTP_ERROR, err, errlen, "%s: refused", what);
	return 0;
}

int consul_agent_service_register(struct consul *c, const char *json, size_t len, const deadline_t *dl, char *err,
				  size_t errlen)
{
	const char *what = "PUT /v1/agent/service/register";

	if (request(c,
		    &(struct consul_call){ "PUT", "/v1/agent/service/register", what, "application/json", json, len,
					   dl },
		    err, errlen) < 0)
		return -1;
	return c->meta.http_status == 200 ? 0 : status_error(c, what, err, errlen);
}

int consul_agent_service_deregister(struct consul *c, const char *id, const deadline_t *dl, char *err, size_t errlen)
{
	struct named_put n = { .path = "/v1/agent/service/deregister/", .id = id };

	if (put_named(c, &n, dl, err, errlen) < 0)
		return -1;
	return c->meta.http_status == 200 ? 0 : status_error(c, n.what, err, errlen);
}

int consul_agent_check_pass(struct consul *c, const char *check_id, const char *note, const deadline_t *dl, char *err,
			    size_t errlen)
{
	struct named_put n = { .path = "/v1/agent/check/pass/", .id = check_id, .note = note };
	char line[256];

	if (put_named(c, &n, dl, err, errlen) < 0)
		return -1;
	if (c->meta.http_status == 200)
		return 0;
	consul_http_body_line(c, line, sizeof(line));
	if (c->meta.http_status == 404 ||
	    (c->meta.http_status == 500 &&
	     (strstr(line, "does not have associated TTL") || strstr(line, "Unknown check"))))
		return 1;
	return status_error(c, n.what, err, errlen);
}

int consul_leader(struct consul *c, const deadline_t *dl, char *out, size_t len, char *err, size_t errlen)
{
	const char *what = "GET /v1/status/leader";
	cJSON *doc;
	int ret = -1;

	if (len)
		out[0] = '\0';
	if (request(c, &(struct consul_call){ .method = "GET", .path = "/v1/status/leader", .what = what, .dl = dl },
		    err, errlen) < 0)
		return -1;
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	doc = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	if (!cJSON_IsString(doc))
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: answer is not a JSON string", what);
	else if (sk_has_ctl(doc->valuestring) || !sk_strlcpy(out, doc->valuestring, len))
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: unexpected leader address", what);
	else
		ret = 0;
	cJSON_Delete(doc);
	return ret;
}

int consul_agent_self(struct consul *c, const deadline_t *dl, bool *server, char *err, size_t errlen)
{
	const char *what = "GET /v1/agent/self";
	cJSON *doc, *config, *jserver;
	int ret = -1;

	*server = false;
	if (consul_http_request(
		    c, &(struct consul_call){ .method = "GET", .path = "/v1/agent/self", .what = what, .dl = dl }, err,
		    errlen) < 0)
		return -1;
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	doc = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	config = doc ? cJSON_GetObjectItemCaseSensitive(doc, "Config") : NULL;
	jserver = config ? cJSON_GetObjectItemCaseSensitive(config, "Server") : NULL;
	if (!cJSON_IsBool(jserver)) {
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: answer without Config.Server", what);
	} else {
		*server = cJSON_IsTrue(jserver);
		ret = 0;
	}
	cJSON_Delete(doc);
	consul_http_release_body(c);
	return ret;
}

int consul_agent_detect(struct consul *c, const deadline_t *dl, enum consul_agent_mode *mode, const char **why,
			char *err, size_t errlen)
{
	bool server = false;

	if (consul_agent_self(c, dl, &server, err, errlen) == 0) {
		*mode = server ? CONSUL_AGENT_NONE : CONSUL_AGENT_LOCAL;
		*why = server ? "Consul servers answer directly" : "a Consul client agent answers";
		return 0;
	}
	if (c->meta.reason != CONSUL_FORBIDDEN)
		return -1;
	*mode = CONSUL_AGENT_NONE;
	*why = "the token may not read GET /v1/agent/self (agent_prefix \"\" read): taken as Consul servers; set "
	       "consul-agent to local if a client agent runs here";
	return 0;
}

uint64_t consul_next_index(uint64_t prev, uint64_t got)
{
	if (got < prev)
		return 0;
	if (got == 0)
		return 1;
	return got;
}

int consul_health_service(struct consul *c, const struct consul_service_query *q, struct consul_read *r,
			  struct consul_kv_list *out, char *err, size_t errlen)
{
	struct consul_meta *meta = &r->meta;
	sk_buf path;
	char what[300];
	int ret = -1;
	bool ok;

	out->n = 0;
	out->items = NULL;
	memset(meta, 0, sizeof(*meta));
	snprintf(what, sizeof(what), "GET /v1/health/service/%.200s", q->name);
	if (!q->name || !*q->name || strchr(q->name, '/')) {
		consul_http_refuse(c, err, errlen, "%s: bad service name", what);
		*meta = c->meta;
		return -1;
	}
	sk_buf_init(&path, 16384);
	ok = sk_buf_add(&path, "/v1/health/service/", 19) && consul_http_escape(&path, q->name, false) &&
	     sk_buf_add(&path, "?passing", 8);
	for (size_t i = 0; ok && i < q->ntags; i++)
		ok = sk_buf_add(&path, "&tag=", 5) && consul_http_escape(&path, q->tags[i], false);
	for (size_t i = 0; ok && i < q->nnode_meta; i++)
		ok = sk_buf_add(&path, "&node-meta=", 11) && consul_http_escape(&path, q->node_meta[i], false);
	ok = ok && (!q->near || (sk_buf_add(&path, "&near=", 6) && consul_http_escape(&path, q->near, false))) &&
	     (!q->filter || (sk_buf_add(&path, "&filter=", 8) && consul_http_escape(&path, q->filter, false))) &&
	     (!q->datacenter || (sk_buf_add(&path, "&dc=", 4) && consul_http_escape(&path, q->datacenter, false))) &&
	     add_blocking(&path, r);
	if (!ok)
		consul_http_refuse(c, err, errlen, "%s: query too long", what);
	else
		ret = blocking_list(c, &(struct listing_call){ path.data, what, false, CONSUL_LISTING_HEALTH }, r, out,
				    err, errlen);
	*meta = c->meta;
	sk_buf_free(&path);
	return ret;
}
