/* consul_login.h: an ACL token obtained by logging in with an auth method, as `consul login`
 * does it (POST /v1/acl/login with a bearer token, a Kubernetes service-account JWT), shared by
 * every Consul client of a process. The login renews itself before the token expires and after
 * Consul forgets it (403 "ACL not found"), re-reading the bearer token file each time (kubelet
 * rotates it). Neither the bearer token nor the SecretID is ever printed: both are registered
 * with the log redactor while they are in use. */
#ifndef SK_CONSUL_LOGIN_H
#define SK_CONSUL_LOGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "deadline.h"
#include "util.h"

#define CONSUL_LOGIN_BEARER_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount/token"
#define CONSUL_LOGIN_SECRET_MAX 128 /* room for a SecretID (a 36-character UUID) and its NUL */
#define CONSUL_LOGIN_META_MAX 16 /* pairs in consul-login-meta */
#define CONSUL_LOGIN_TIMEOUT_MS 10000 /* one login, whatever the request that needs it allows */
#define CONSUL_LOGIN_BACKOFF_MIN_MS 1000
#define CONSUL_LOGIN_BACKOFF_MAX_MS 60000

struct consul;

/* -- the pure parts ----------------------------------------------------------------------------- */

/* consul-login-meta ("key=value,key2=value2", as `consul login -meta` takes them one by one) as
 * the JSON object of the login's "Meta" into `out` ("{}" for NULL or ""). Refused, with err
 * naming the pair (not the setting): a pair without '=', an empty key, a control character, a repeated key, more
 * than CONSUL_LOGIN_META_MAX pairs. Returns 0 or -1. */
int consul_login_meta_json(const char *meta, sk_buf *out, char *err, size_t errlen) SK_MUST_CHECK;

/* What a login answered (the ACLToken object). */
struct consul_login_answer {
	char secret[CONSUL_LOGIN_SECRET_MAX]; /* SecretID */
	char accessor[64]; /* AccessorID: not a secret, it names the token in logs */
	int64_t life_ms; /* ExpirationTime - CreateTime (the server's clocks); -1: never expires */
};

/* Parse the answer of POST /v1/acl/login. A SecretID and AccessorID are required (UUID-shaped);
 * ExpirationTime, when present, must be an RFC 3339 time after CreateTime (or, without CreateTime,
 * after `now_unix_ms`). Returns 0, or -1 with err saying what is missing (never quoting the
 * SecretID). Pure. */
int consul_login_parse_answer(const char *body, size_t len, int64_t now_unix_ms, struct consul_login_answer *a,
			      char *err, size_t errlen) SK_MUST_CHECK;

/* An RFC 3339 time ("2026-12-03T23:59:59.123456789Z", "...+02:00") in milliseconds since the
 * epoch. False when it is not one. Pure. */
bool consul_login_parse_time(const char *s, int64_t *unix_ms) SK_MUST_CHECK;

/* When, after a login whose token lives life_ms (-1: forever), to log in again: at three quarters
 * of its life but at least 5 s before it ends, and never sooner than 1 s; -1 for never. Pure. */
int64_t consul_login_renew_after_ms(int64_t life_ms);

/* The next backoff after a failed login (doubling from CONSUL_LOGIN_BACKOFF_MIN_MS, capped at
 * CONSUL_LOGIN_BACKOFF_MAX_MS). Pure. */
long consul_login_next_backoff_ms(long backoff_ms);

/* -- the shared login ------------------------------------------------------------------------- */

struct consul_login;

/* A login with auth method `method`, the bearer token read from `bearer_file` (NULL: the
 * Kubernetes default path) at each login, and `meta` (consul-login-meta). No traffic here.
 * NULL with err set, naming the setting, when meta is refused or the method name is empty or
 * holds a control character. Thread-safe once built; free it after every client that uses it. */
struct consul_login *consul_login_new(const char *method, const char *bearer_file, const char *meta, char *err,
				      size_t errlen);

/* Wipe the token and free (NULL is fine). Does not log out: see consul_logout. */
void consul_login_free(struct consul_login *l);

/* The token a request carries and the generation it is of (a secret: wipe it after use). */
struct consul_login_secret {
	char token[CONSUL_LOGIN_SECRET_MAX];
	uint64_t gen;
};

/* The token a request of client `c` carries, copied into out->token, with its generation in
 * out->gen. Logs in first through `c` (whose own token is not sent) when there is no token yet, when
 * it is due for renewal, or when it was lost; a renewal that fails keeps using the old token
 * until it expires. At most one thread logs in at a time; while one does, another without a
 * usable token fails at once ("a login is in progress"), and after a failed login nobody tries
 * again before the backoff. Returns 0, or -1 with err set and c's reason saying why. */
int consul_login_token(struct consul_login *l, struct consul *c, const deadline_t *dl, struct consul_login_secret *out,
		       char *err, size_t errlen) SK_MUST_CHECK;

/* A request sent with the token of generation `gen` answered 403 "ACL not found": Consul no
 * longer knows the token (revoked, or expired early). The next consul_login_token logs in again
 * (once per lost token: a later generation is not touched). */
void consul_login_lost(struct consul_login *l, uint64_t gen);

/* The generation of the token in hand: it changes with each login that succeeds (and with
 * consul_login_take), so a holder of something bound to a token (a service the local agent keeps
 * with the token it was registered with) knows when to renew it. */
uint64_t consul_login_generation(struct consul_login *l);

/* Logins that succeeded and that failed so far (for tests and metrics). */
void consul_login_counts(struct consul_login *l, uint64_t *ok, uint64_t *failed);

/* Take the current token out of the login (it is forgotten: the next request logs in again), for
 * consul_logout. Returns false when there is none. */
bool consul_login_take(struct consul_login *l, char *out, size_t outlen);

#endif
