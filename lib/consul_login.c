/* consul_login.c: the ACL token of an auth-method login, shared by a process's Consul clients.
 *
 * One token serves every thread. A thread that needs it copies it under a short lock; a thread
 * that finds it missing, due for renewal or lost logs in with its own client while holding only
 * the `busy` flag, so nobody waits on another thread's network call: a thread without a usable
 * token fails at once and retries on its own schedule. A failed login sets a backoff that every
 * thread honours, so a revoked auth method costs one login a backoff period, not one per
 * request. A renewal runs at three quarters of the token's life, so the old token (still valid)
 * carries requests while it is in flight. */
#include "consul_login.h"

#include <cJSON.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consul.h"
#include "consul_http.h"
#include "log.h"
#include "secret.h"

struct consul_login {
	pthread_mutex_t mu;
	pthread_cond_t done; /* a login ended (busy turned false); on CLOCK_MONOTONIC */
	char *method, *bearer_file, *meta_json;
	char secret[CONSUL_LOGIN_SECRET_MAX]; /* "" when there is none */
	char accessor[64];
	uint64_t gen; /* raised by each login that succeeds */
	bool lost, busy;
	int64_t renew_at_us, expires_at_us; /* monotonic; INT64_MAX: never */
	int64_t next_try_us;
	long backoff_ms;
	uint64_t ok, failed;
};

/* -- the pure parts ----------------------------------------------------------------------------- */

static bool meta_pair_add(cJSON *obj, const char *pair, size_t n, char *err, size_t errlen)
{
	const char *eq = memchr(pair, '=', n);
	char key[128], value[512];

	if (!eq || eq == pair) {
		sk_err(err, errlen, "'%.*s' is not key=value", (int)(n > 60 ? 60 : n), pair);
		return false;
	}
	if ((size_t)(eq - pair) >= sizeof(key) || n - (size_t)(eq - pair) - 1 >= sizeof(value)) {
		sk_err(err, errlen, "a pair longer than %zu characters", sizeof(value));
		return false;
	}
	snprintf(key, sizeof(key), "%.*s", (int)(eq - pair), pair);
	snprintf(value, sizeof(value), "%.*s", (int)(n - (size_t)(eq - pair) - 1), eq + 1);
	if (sk_has_ctl(key) || sk_has_ctl(value)) {
		sk_err(err, errlen, "'%s' holds a control character", key);
		return false;
	}
	if (cJSON_GetObjectItemCaseSensitive(obj, key)) {
		sk_err(err, errlen, "'%s' is given twice", key);
		return false;
	}
	if (cJSON_GetArraySize(obj) >= CONSUL_LOGIN_META_MAX) {
		sk_err(err, errlen, "more than %d pairs", CONSUL_LOGIN_META_MAX);
		return false;
	}
	return cJSON_AddStringToObject(obj, key, value) != NULL;
}

int consul_login_meta_json(const char *meta, sk_buf *out, char *err, size_t errlen)
{
	cJSON *obj = cJSON_CreateObject();
	char *text = NULL;
	int ret = -1;

	for (const char *p = meta ? meta : ""; obj && *p;) {
		size_t n = strcspn(p, ",");

		if (n == 0) {
			sk_err(err, errlen, "an empty pair (two commas, or one at an end)");
			goto out;
		}
		if (!meta_pair_add(obj, p, n, err, errlen))
			goto out;
		p += n;
		if (*p == ',' && !*++p) {
			sk_err(err, errlen, "an empty pair (two commas, or one at an end)");
			goto out;
		}
	}
	text = obj ? cJSON_PrintUnformatted(obj) : NULL;
	if (!text || !sk_buf_add(out, text, strlen(text))) {
		sk_err(err, errlen, "too long");
		goto out;
	}
	ret = 0;
out:
	free(text);
	cJSON_Delete(obj);
	return ret;
}

static bool digits(const char **s, int n, int *out)
{
	*out = 0;
	for (int i = 0; i < n; i++, (*s)++) {
		if (!isdigit((unsigned char)**s))
			return false;
		*out = *out * 10 + (**s - '0');
	}
	return true;
}

/* The zone part of an RFC 3339 time: "Z" or "+hh:mm" / "-hh:mm", as seconds east of UTC. */
static bool zone_offset(const char *s, long *off)
{
	int hh, mm;

	if ((*s == 'Z' || *s == 'z') && !s[1]) {
		*off = 0;
		return true;
	}
	if ((*s != '+' && *s != '-') || strlen(s) != 6 || s[3] != ':')
		return false;
	{
		const char *p = s + 1;
		const char *q = s + 4;

		if (!digits(&p, 2, &hh) || !digits(&q, 2, &mm) || hh > 23 || mm > 59)
			return false;
	}
	*off = (s[0] == '-' ? -1L : 1L) * (hh * 3600L + mm * 60L);
	return true;
}

bool consul_login_parse_time(const char *s, int64_t *unix_ms)
{
	struct tm tm = { 0 };
	int y, mo, d, h, mi, sec, ms = 0;
	long off;
	time_t t;

	if (!digits(&s, 4, &y) || *s++ != '-' || !digits(&s, 2, &mo) || *s++ != '-' || !digits(&s, 2, &d))
		return false;
	if (*s != 'T' && *s != 't')
		return false;
	s++;
	if (!digits(&s, 2, &h) || *s++ != ':' || !digits(&s, 2, &mi) || *s++ != ':' || !digits(&s, 2, &sec))
		return false;
	if (*s == '.') {
		int nd = 0;

		for (s++; isdigit((unsigned char)*s); s++, nd++)
			if (nd < 3)
				ms = ms * 10 + (*s - '0');
		if (nd == 0)
			return false;
		for (; nd < 3; nd++)
			ms *= 10;
	}
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || !zone_offset(s, &off))
		return false;
	tm.tm_year = y - 1900;
	tm.tm_mon = mo - 1;
	tm.tm_mday = d;
	tm.tm_hour = h;
	tm.tm_min = mi;
	tm.tm_sec = sec;
	t = timegm(&tm);
	*unix_ms = ((int64_t)t - off) * 1000 + ms;
	return true;
}

static bool uuid_shaped(const char *s)
{
	size_t n = strlen(s);

	if (n < 8 || n >= CONSUL_LOGIN_SECRET_MAX)
		return false;
	for (; *s; s++)
		if (!isxdigit((unsigned char)*s) && *s != '-')
			return false;
	return true;
}

/* The token's life from its ExpirationTime and CreateTime (or now): -1 without expiry. */
static int token_life(const cJSON *doc, int64_t now_unix_ms, int64_t *life_ms, char *err, size_t errlen)
{
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(doc, "ExpirationTime");
	const cJSON *created = cJSON_GetObjectItemCaseSensitive(doc, "CreateTime");
	int64_t exp_ms, from_ms = now_unix_ms;

	*life_ms = -1;
	if (!exp || cJSON_IsNull(exp))
		return 0;
	if (!cJSON_IsString(exp) || !consul_login_parse_time(exp->valuestring, &exp_ms))
		return sk_err(err, errlen, "the login's ExpirationTime is not a time");
	if (cJSON_IsString(created) && !consul_login_parse_time(created->valuestring, &from_ms))
		return sk_err(err, errlen, "the login's CreateTime is not a time");
	if (exp_ms <= from_ms)
		return sk_err(err, errlen,
			      "the login's token expires as it is made (ExpirationTime not after CreateTime)");
	*life_ms = exp_ms - from_ms;
	return 0;
}

int consul_login_parse_answer(const char *body, size_t len, int64_t now_unix_ms, struct consul_login_answer *a,
			      char *err, size_t errlen)
{
	cJSON *doc = cJSON_ParseWithLength(body ? body : "", len);
	const cJSON *sid = NULL, *acc;
	int ret = -1;

	memset(a, 0, sizeof(*a));
	if (!cJSON_IsObject(doc)) {
		sk_err(err, errlen, "the login's answer is not a JSON object");
		goto out;
	}
	sid = cJSON_GetObjectItemCaseSensitive(doc, "SecretID");
	acc = cJSON_GetObjectItemCaseSensitive(doc, "AccessorID");
	if (!cJSON_IsString(sid) || !uuid_shaped(sid->valuestring)) {
		sk_err(err, errlen, "the login's answer has no SecretID");
		goto out;
	}
	if (!cJSON_IsString(acc) || !uuid_shaped(acc->valuestring) || strlen(acc->valuestring) >= sizeof(a->accessor)) {
		sk_err(err, errlen, "the login's answer has no AccessorID");
		goto out;
	}
	if (token_life(doc, now_unix_ms, &a->life_ms, err, errlen) < 0)
		goto out;
	snprintf(a->secret, sizeof(a->secret), "%s", sid->valuestring);
	snprintf(a->accessor, sizeof(a->accessor), "%s", acc->valuestring);
	ret = 0;
out:
	if (cJSON_IsString(sid))
		sk_wipe(sid->valuestring, strlen(sid->valuestring));
	cJSON_Delete(doc);
	return ret;
}

int64_t consul_login_renew_after_ms(int64_t life_ms)
{
	int64_t after;

	if (life_ms < 0)
		return -1;
	after = life_ms / 4 * 3;
	if (life_ms - after < 5000)
		after = life_ms - 5000;
	return after < 1000 ? 1000 : after;
}

long consul_login_next_backoff_ms(long backoff_ms)
{
	if (backoff_ms < CONSUL_LOGIN_BACKOFF_MIN_MS)
		return CONSUL_LOGIN_BACKOFF_MIN_MS;
	return backoff_ms >= CONSUL_LOGIN_BACKOFF_MAX_MS / 2 ? CONSUL_LOGIN_BACKOFF_MAX_MS : backoff_ms * 2;
}

/* -- the shared login ------------------------------------------------------------------------- */

/* A condition whose timed waits count on the monotonic clock, as deadlines do. */
static void cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

struct consul_login *consul_login_new(const char *method, const char *bearer_file, const char *meta, char *err,
				      size_t errlen)
{
	struct consul_login *l;
	char why[300];
	sk_buf json;

	if (!method || !*method || sk_has_ctl(method)) {
		sk_err(err, errlen, "consul-login-method: not an auth method name");
		return NULL;
	}
	sk_buf_init(&json, 16384);
	if (consul_login_meta_json(meta, &json, why, sizeof(why)) < 0) {
		sk_err(err, errlen, "consul-login-meta: %s", why);
		sk_buf_free(&json);
		return NULL;
	}
	l = xcalloc(1, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
	cond_init_monotonic(&l->done);
	l->method = xstrdup(method);
	l->bearer_file = xstrdup(bearer_file && *bearer_file ? bearer_file : CONSUL_LOGIN_BEARER_DEFAULT);
	l->meta_json = xstrdup(json.data);
	l->renew_at_us = l->expires_at_us = INT64_MAX;
	sk_buf_free(&json);
	return l;
}

/* Forget the token (locked): wiped, and no longer redacted once nobody can print it. */
static void forget_token(struct consul_login *l)
{
	if (l->secret[0])
		log_forget_secret(l->secret);
	sk_wipe(l->secret, sizeof(l->secret));
	l->accessor[0] = '\0';
}

void consul_login_free(struct consul_login *l)
{
	if (!l)
		return;
	forget_token(l);
	pthread_cond_destroy(&l->done);
	pthread_mutex_destroy(&l->mu);
	free(l->method);
	free(l->bearer_file);
	free(l->meta_json);
	free(l);
}

/* The body of POST /v1/acl/login, with the bearer token read now into *jwt (a secret, registered
 * with the log redactor by secret_read_file: the caller wipes it and forgets it once the login is
 * over, so that rotated tokens never fill the redactor). */
static int login_body(const struct consul_login *l, sk_buf *body, char **jwt, char *err, size_t errlen)
{
	char why[300];

	*jwt = secret_read_file(l->bearer_file, why, sizeof(why));
	if (!*jwt)
		return sk_err(err, errlen, "consul login: the bearer token file %s", why);
	if (!**jwt || sk_has_ctl(*jwt))
		return sk_err(err, errlen,
			      "consul login: the bearer token file %s is empty or holds a control character",
			      l->bearer_file);
	if (!sk_buf_add(body, "{\"AuthMethod\":", 14) || !sk_buf_add_json_str(body, l->method) ||
	    !sk_buf_add(body, ",\"BearerToken\":", 15) || !sk_buf_add_json_str(body, *jwt) ||
	    !sk_buf_addf(body, ",\"Meta\":%s}", l->meta_json))
		return sk_err(err, errlen, "consul login: the bearer token is too large");
	return 0;
}

/* A bearer token no longer needed: wiped, freed, and no longer redacted (nothing holds it). */
static void drop_jwt(char *jwt)
{
	if (!jwt)
		return;
	log_forget_secret(jwt);
	sk_wipe(jwt, strlen(jwt));
	free(jwt);
}

static int64_t unix_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The login was answered with another status than 200: Consul's reason, and what it means. */
static int refused(const struct consul_login *l, struct consul *c, const char *what, char *err, size_t errlen)
{
	char line[256];

	consul_http_body_line(c, line, sizeof(line));
	return consul_http_fail(c, c->meta.http_status == 403 ? CONSUL_FORBIDDEN : CONSUL_HTTP_ERROR, err, errlen,
				"%s: HTTP %ld: %s (auth method %s, bearer token of %s)", what, c->meta.http_status,
				*line ? line : "no reason given", l->method, l->bearer_file);
}

/* One login through `c` (no lock held): the answer into *a. A listing the client is reading
 * waits for its own answer: the login's is not fed to it. */
static int login_post(const struct consul_login *l, struct consul *c, const deadline_t *dl,
		      struct consul_login_answer *a, char *err, size_t errlen)
{
	const char *what = "POST /v1/acl/login";
	struct consul_listing *listing = c->listing;
	char why[300], *jwt = NULL;
	sk_buf body;
	int ret = -1;

	c->listing = NULL;
	sk_buf_init(&body, 65536);
	if (login_body(l, &body, &jwt, why, sizeof(why)) < 0) {
		consul_http_fail(c, CONSUL_CLIENT_ERROR, err, errlen, "%s", why);
		goto out;
	}
	if (consul_http_request_as(
		    c, NULL,
		    &(struct consul_call){ "POST", "/v1/acl/login", what, "application/json", body.data, body.len, dl },
		    err, errlen) < 0)
		goto out;
	if (c->meta.http_status != 200) {
		refused(l, c, what, err, errlen);
		goto out;
	}
	if (consul_login_parse_answer(c->body.data, c->body.len, unix_now_ms(), a, why, sizeof(why)) < 0) {
		consul_http_fail(c, CONSUL_BAD_ANSWER, err, errlen, "%s: %s", what, why);
		goto out;
	}
	ret = 0;
out:
	sk_wipe(body.data, body.len);
	sk_buf_free(&body);
	drop_jwt(jwt);
	consul_http_release_body(c); /* the answer held the SecretID */
	c->listing = listing;
	return ret;
}

/* Record a login's outcome (locked). */
static void login_done(struct consul_login *l, int rc, const struct consul_login_answer *a, const char *err)
{
	int64_t now = deadline_now_us();

	l->busy = false;
	pthread_cond_broadcast(&l->done);
	if (rc < 0) {
		l->failed++;
		l->backoff_ms = consul_login_next_backoff_ms(l->backoff_ms);
		l->next_try_us = now + (int64_t)l->backoff_ms * 1000;
		log_warn("consul: login with auth method %s failed: %s (next try in %ld s)", l->method, err,
			 l->backoff_ms / 1000);
		return;
	}
	forget_token(l);
	snprintf(l->secret, sizeof(l->secret), "%s", a->secret);
	snprintf(l->accessor, sizeof(l->accessor), "%s", a->accessor);
	log_add_secret(l->secret);
	l->gen++;
	l->ok++;
	l->lost = false;
	l->backoff_ms = 0;
	l->next_try_us = 0;
	l->expires_at_us = a->life_ms < 0 ? INT64_MAX : now + a->life_ms * 1000;
	l->renew_at_us = a->life_ms < 0 ? INT64_MAX : now + consul_login_renew_after_ms(a->life_ms) * 1000;
	if (a->life_ms < 0)
		log_info("consul: logged in with auth method %s (token %.8s…, no expiry)", l->method, l->accessor);
	else
		log_info("consul: logged in with auth method %s (token %.8s…, expires in %lld s)", l->method,
			 l->accessor, (long long)(a->life_ms / 1000));
}

/* Whether the token in hand may carry a request (locked). */
static bool usable(const struct consul_login *l, int64_t now)
{
	return l->secret[0] && !l->lost && now < l->expires_at_us;
}

/* Copy the token out (locked). */
static int hand_out(const struct consul_login *l, char *out, size_t outlen, uint64_t *gen, char *err, size_t errlen)
{
	if (!sk_strlcpy(out, l->secret, outlen))
		return sk_err(err, errlen, "consul login: the token is too long");
	*gen = l->gen;
	return 0;
}

/* Why no token can be handed out now (locked). */
static int no_token(const struct consul_login *l, struct consul *c, int64_t now, char *err, size_t errlen)
{
	if (l->busy)
		return consul_http_fail(c, CONSUL_FORBIDDEN, err, errlen,
					"consul login with auth method %s: a login is in progress", l->method);
	return consul_http_fail(c, CONSUL_FORBIDDEN, err, errlen,
				"consul login with auth method %s failed; next try in %lld s", l->method,
				(long long)((l->next_try_us - now) / 1000000 + 1));
}

/* Without a usable token while another thread logs in: wait for that login (locked), within the
 * caller's deadline, rather than fail a request that the login in flight will serve. Returns the
 * time. */
static int64_t wait_for_login(struct consul_login *l, const deadline_t *dl)
{
	while (l->busy) {
		long left = deadline_timeout_ms(dl);
		struct timespec ts;

		if (left < 0)
			break;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += left / 1000;
		ts.tv_nsec += (left % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		if (pthread_cond_timedwait(&l->done, &l->mu, &ts) != 0)
			break;
	}
	return deadline_now_us();
}

int consul_login_token(struct consul_login *l, struct consul *c, const deadline_t *dl, struct consul_login_secret *out,
		       char *err, size_t errlen)
{
	struct consul_login_answer a;
	deadline_t login_dl;
	char why[400] = "";
	int64_t now = deadline_now_us();
	bool due;
	int rc;

	pthread_mutex_lock(&l->mu);
	if (l->busy && !usable(l, now))
		now = wait_for_login(l, dl);
	due = !usable(l, now) || now >= l->renew_at_us;
	if (!due || l->busy || now < l->next_try_us) {
		rc = usable(l, now) ? hand_out(l, out->token, sizeof(out->token), &out->gen, err, errlen)
				    : no_token(l, c, now, err, errlen);
		pthread_mutex_unlock(&l->mu);
		return rc;
	}
	l->busy = true;
	pthread_mutex_unlock(&l->mu);

	/* The caller's deadline may be a blocking query's minute; the login, which other threads may
	 * be waiting for, gets at most CONSUL_LOGIN_TIMEOUT_MS of it. */
	login_dl = deadline_min(*dl, deadline_in_ms(CONSUL_LOGIN_TIMEOUT_MS));
	rc = login_post(l, c, &login_dl, &a, why, sizeof(why));

	pthread_mutex_lock(&l->mu);
	login_done(l, rc, &a, why);
	now = deadline_now_us();
	if (usable(l, now))
		rc = hand_out(l, out->token, sizeof(out->token), &out->gen, err, errlen);
	else
		rc = sk_err(err, errlen, "%s", why);
	pthread_mutex_unlock(&l->mu);
	sk_wipe(&a, sizeof(a));
	return rc;
}

void consul_login_lost(struct consul_login *l, uint64_t gen)
{
	pthread_mutex_lock(&l->mu);
	if (gen == l->gen && !l->lost && l->secret[0]) {
		l->lost = true;
		log_warn(
			"consul: Consul no longer knows the login's token %.8s… (revoked or expired): logging in again",
			l->accessor);
	}
	pthread_mutex_unlock(&l->mu);
}

uint64_t consul_login_generation(struct consul_login *l)
{
	uint64_t gen;

	pthread_mutex_lock(&l->mu);
	gen = l->gen;
	pthread_mutex_unlock(&l->mu);
	return gen;
}

void consul_login_counts(struct consul_login *l, uint64_t *ok, uint64_t *failed)
{
	pthread_mutex_lock(&l->mu);
	*ok = l->ok;
	*failed = l->failed;
	pthread_mutex_unlock(&l->mu);
}

bool consul_login_take(struct consul_login *l, char *out, size_t outlen)
{
	bool had;

	pthread_mutex_lock(&l->mu);
	had = l->secret[0] && sk_strlcpy(out, l->secret, outlen);
	l->gen++;
	l->lost = false;
	l->renew_at_us = l->expires_at_us = INT64_MAX;
	sk_wipe(l->secret, sizeof(l->secret)); /* still redacted: the caller logs out with it */
	l->accessor[0] = '\0';
	pthread_mutex_unlock(&l->mu);
	return had;
}
