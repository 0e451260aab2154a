/* consul.h: a Consul HTTP API client (KV, sessions, status) on libcurl and cJSON, with the
 * standard CONSUL_* environment, blocking queries, one deadline per call and a response cap.
 * This header is the client proper (its endpoints: consul.c; the client and its transport:
 * consul_http.c). It includes what its users need with it: the settings and the proxy
 * (consul_config.h) and the listings (consul_listing.h). The ACL rule of an endpoint is in
 * consul_acl.h, the transport's internals in consul_http.h. */
#ifndef SK_CONSUL_H
#define SK_CONSUL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "consul_config.h"
#include "consul_listing.h"
#include "deadline.h"
#include "util.h"

#define CONSUL_SESSION_ID_MAX 64 /* room for a session ID (a 36-character UUID) and its NUL */

/* The client: one reusable connection (keep-alive). Not thread-safe: one thread at a time. */
struct consul;

/* Check the config and build a client; no network traffic happens here. Reads the token file
 * (secret_read_file) when one is set. Returns NULL with err set (bad address, unreadable token
 * file, client cert without key, libcurl failure). The config may be freed afterwards. */
struct consul *consul_new(const struct consul_config *cfg, char *err, size_t errlen);

struct consul_login;

/* Let the client's requests carry the token of a login (consul_login.h) instead of its own: the
 * login is borrowed (free it after the client) and may be shared by the clients of every thread.
 * A request answered 403 "ACL not found" logs in again and is sent once more. NULL: back to the
 * client's own token. */
void consul_set_login(struct consul *c, struct consul_login *l);

/* Log the login's token out (POST /v1/acl/logout: Consul destroys it), at exit. Without a login,
 * or when it has no token, does nothing and returns 0. The login forgets the token either way.
 * Returns 0 or -1 with err set. */
int consul_logout(struct consul *c, const deadline_t *dl, char *err, size_t errlen) SK_MUST_CHECK;

/* Close the connection and free the client (NULL is fine). */
void consul_free(struct consul *c);

/* The base URL requests go to, e.g. "http://127.0.0.1:8500" (never contains a secret). */
const char *consul_url(const struct consul *c);

/* While the file descriptor `fd` is readable (a signalfd or a self-pipe), every request in
 * progress or started stops within milliseconds and fails with "cancelled". The client never
 * reads the descriptor. -1 (the default) turns cancellation off. */
void consul_set_cancel_fd(struct consul *c, int fd);

/* Why a Consul call failed; the reasons a caller must tell apart (the answer, a status or a
 * listing, is kept apart from the reason). Set on every failure of the functions below that take
 * a client, in consul_last_meta and in the meta they fill. */
enum consul_reason {
	CONSUL_OK,
	CONSUL_CLIENT_ERROR, /* refused before sending: a bad key, ID or name, a request too long, memory */
	CONSUL_UNREACHABLE, /* no answer: connection refused or reset, DNS, TLS, the proxy */
	CONSUL_TIMEOUT, /* the deadline passed before the answer was complete (or before sending) */
	CONSUL_CANCELLED, /* the cancel descriptor became readable (consul_set_cancel_fd) */
	CONSUL_FORBIDDEN, /* HTTP 403: the ACL token lacks the rights */
	CONSUL_NOT_FOUND, /* HTTP 404 where it is not an answer of its own */
	CONSUL_HTTP_ERROR, /* another answer than the one expected: a status, a refused destroy */
	CONSUL_TOO_LARGE, /* the answer passed the response size cap (max_response): refused unread */
	CONSUL_BAD_ANSWER, /* the answer did not parse or lacked what it must hold */
};

/* "ok", "client_error", "unreachable", "timeout", "cancelled", "forbidden", "not_found",
 * "http_error", "too_large", "bad_answer". */
const char *consul_reason_str(enum consul_reason r);

/* What the last answer's headers said, and why the call failed. */
struct consul_meta {
	uint64_t index; /* X-Consul-Index; 0 when absent */
	bool known_leader; /* X-Consul-KnownLeader: true */
	long last_contact_ms; /* X-Consul-LastContact */
	bool filtered_by_acls; /* X-Consul-Results-Filtered-By-ACLs: true: the answer may be partial */
	long http_status; /* 0 when no HTTP answer arrived (connection failed, timeout, cancelled) */
	enum consul_reason reason; /* CONSUL_OK, or why the call failed */
};

/* The meta of the most recent request (any function), owned by the client. */
const struct consul_meta *consul_last_meta(const struct consul *c);

enum consul_consistency { CONSUL_DEFAULT, CONSUL_STALE, CONSUL_CONSISTENT };

const char *consul_consistency_str(enum consul_consistency mode);
bool consul_consistency_parse(const char *s, enum consul_consistency *out) SK_MUST_CHECK;

/* consul-agent: whether a Consul client agent runs beside us at the client's address. AUTO asks it
 * (consul_agent_detect); LOCAL: a client agent, whose node health sessions may be bound to, and
 * whose /v1/agent/ service API is this host's own; NONE: Consul servers answer directly (perhaps
 * through a load-balanced address), so sessions are bound to their TTL only and the agent service
 * API is not ours to use. */
enum consul_agent_mode { CONSUL_AGENT_AUTO, CONSUL_AGENT_LOCAL, CONSUL_AGENT_NONE };

/* "auto", "local", "none". */
const char *consul_agent_mode_str(enum consul_agent_mode mode);
bool consul_agent_mode_parse(const char *s, enum consul_agent_mode *out) SK_MUST_CHECK;

/* Whether the agent answering at the client's address is a server: GET /v1/agent/self, its
 * Config.Server, into *server. Returns 0, or -1 with err set and the reason in consul_last_meta
 * (CONSUL_FORBIDDEN: the token lacks agent:read). */
int consul_agent_self(struct consul *c, const deadline_t *dl, bool *server, char *err, size_t errlen) SK_MUST_CHECK;

/* consul-agent = auto resolved at one answer of GET /v1/agent/self: Config.Server false is LOCAL,
 * true is NONE, a 403 (the token lacks agent:read) is NONE too. On 0, *mode is LOCAL or NONE and
 * *why (a constant string) says in words what decided it ("Consul servers answer directly"); -1
 * with err set when no such answer came (unreachable, timeout, another status): ask again later. */
int consul_agent_detect(struct consul *c, const deadline_t *dl, enum consul_agent_mode *mode, const char **why,
			char *err, size_t errlen) SK_MUST_CHECK;

/* One read of a listing: with index > 0 a blocking query, which Consul answers when something
 * changes or after wait_ms (plus up to wait_ms/16 of jitter), so the deadline `dl` allows at
 * least consul_wait_budget_ms(wait_ms); the consistency mode. The call fills `meta` with the
 * answer's headers and the reason of a failure. */
struct consul_read {
	uint64_t index;
	long wait_ms;
	enum consul_consistency mode;
	const deadline_t *dl;
	struct consul_meta meta; /* filled by the call */
};

/* Read every key under `prefix` (GET /v1/kv/<prefix>?recurse), blocking as r says. A prefix
 * with no keys (404) is an empty list, not an error. On success *out holds the entries (free
 * with consul_kv_list_free) and r->meta the headers; the index is always present (an answer
 * without X-Consul-Index is an error). On failure returns -1, *out is empty, r->meta says what
 * arrived (http_status 0: no answer) and err says the status and the first line of the body. */
int consul_kv_list(struct consul *c, const char *prefix, struct consul_read *r, struct consul_kv_list *out, char *err,
		   size_t errlen) SK_MUST_CHECK;

/* A health-checked service to read: GET /v1/health/service/<name>?passing, with each tag (every
 * one must match), node-meta "key:value" pairs, near, Consul's filter expression and a datacenter
 * (NULL: the agent's). */
struct consul_service_query {
	const char *name;
	char *const *tags;
	size_t ntags;
	char *const *node_meta;
	size_t nnode_meta;
	const char *near, *filter, *datacenter;
};

/* The instances of a service whose checks all pass, as KV pairs: the key "<address>:<port>"
 * (Service.Address, else Node.Address), the value a JSON object {"node", "id", "weight" (its
 * Weights.Passing), "meta" (Service.Meta)}. The read (blocking, consistency, meta) and
 * failures as consul_kv_list. */
int consul_health_service(struct consul *c, const struct consul_service_query *q, struct consul_read *r,
			  struct consul_kv_list *out, char *err, size_t errlen) SK_MUST_CHECK;

/* The deadline a blocking query with `wait_ms` needs: the wait, Consul's jitter (wait/16) and
 * a margin for the network. */
long consul_wait_budget_ms(long wait_ms);

/* The index for the next blocking query, from the previous one and the X-Consul-Index just
 * received (Consul's blocking-query rules): when the index went backwards (got < prev: a
 * snapshot restore, the newest key deleted, a different server) the answer is 0, meaning
 * "restart": the next read is a plain, non-blocking one that re-reads everything. Otherwise
 * the new index, but never 0: an index of 0 would make every query return at once (a busy
 * loop), so 0 becomes 1, which is always safe. Pure. */
uint64_t consul_next_index(uint64_t prev, uint64_t got);

/* A write to one key: `len` bytes of `value`, and the session that takes the key's lock with it
 * (consul_kv_put; NULL: a plain write) or gives it back (consul_kv_release). */
struct consul_kv_write {
	const char *key;
	const void *value;
	size_t len;
	const char *session;
};

/* Write w->len bytes as the value of w->key (PUT /v1/kv/<key>, body raw). With w->session the
 * write also takes the key's lock for that session (?acquire=), and *done is false when another
 * session holds it or a lock delay is in force; a plain write sets *done true.
 * Returns 0, or -1 with err set (a non-200 answer, the network). */
int consul_kv_put(struct consul *c, const struct consul_kv_write *w, const deadline_t *dl, bool *done, char *err,
		  size_t errlen) SK_MUST_CHECK;

/* Release the lock w->session holds on w->key (PUT ?release=, the value emptied: w->value is not
 * read); *done is false when the session did not hold it. Returns 0, or -1 with err set. */
int consul_kv_release(struct consul *c, const struct consul_kv_write *w, const deadline_t *dl, bool *done, char *err,
		      size_t errlen) SK_MUST_CHECK;

/* Delete `key`, or every key under it with `recurse`. Deleting a missing key succeeds. */
int consul_kv_delete(struct consul *c, const char *key, bool recurse, const deadline_t *dl, char *err,
		     size_t errlen) SK_MUST_CHECK;

/* A session to create: named `name` with a TTL of ttl_s seconds (0: none), `behavior` "delete" or
 * "release" (what happens to its keys when it ends; NULL: Consul's default) and `lock_delay` (a Go
 * duration such as "0s" or "15s"; NULL: Consul's default). With `node_health` the session has
 * Consul's default check, the node's serfHealth, and ends when the node does (a restart of the
 * local Consul agent included); without, it has no check ("NodeChecks" and, for Consul before
 * 1.7, "Checks" empty) and lives as long as it is renewed within its TTL. */
struct consul_session_spec {
	const char *name;
	long ttl_s;
	const char *behavior, *lock_delay;
	bool node_health;
};

/* Create a session (PUT /v1/session/create) as s says and write its ID into id. Returns 0 or
 * -1. */
int consul_session_create(struct consul *c, const struct consul_session_spec *s, const deadline_t *dl,
			  char id[CONSUL_SESSION_ID_MAX], char *err, size_t errlen) SK_MUST_CHECK;

/* Renew a TTL session. When Consul no longer knows it (404: expired or destroyed) returns 0
 * with *gone true; the caller creates a new one. Returns -1 on any other failure. */
int consul_session_renew(struct consul *c, const char *id, const deadline_t *dl, bool *gone, char *err,
			 size_t errlen) SK_MUST_CHECK;

/* Destroy a session; its keys are released or deleted as its behaviour says. Destroying an
 * unknown session succeeds. */
int consul_session_destroy(struct consul *c, const char *id, const deadline_t *dl, char *err,
			   size_t errlen) SK_MUST_CHECK;

/* The local Consul agent's service API. Register a service (`json`: a service definition, its
 * checks included), deregister one by ID, pass a TTL check by ID with a note. A check pass that
 * the agent does not know (404 "Unknown check ID", or the 500 "does not have associated TTL" of
 * older releases: the agent restarted without it, or someone deregistered the service) returns 1;
 * the caller registers again. Each returns 0 or -1. */
int consul_agent_service_register(struct consul *c, const char *json, size_t len, const deadline_t *dl, char *err,
				  size_t errlen) SK_MUST_CHECK;
int consul_agent_service_deregister(struct consul *c, const char *id, const deadline_t *dl, char *err,
				    size_t errlen) SK_MUST_CHECK;
int consul_agent_check_pass(struct consul *c, const char *check_id, const char *note, const deadline_t *dl, char *err,
			    size_t errlen) SK_MUST_CHECK;

/* The Raft leader's address (GET /v1/status/leader) into out[len]; "" when there is none.
 * A cheap liveness probe: no ACL, no blocking. Returns 0 or -1. */
int consul_leader(struct consul *c, const deadline_t *dl, char *out, size_t len, char *err,
		  size_t errlen) SK_MUST_CHECK;

#endif
