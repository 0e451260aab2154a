/* proxysql_check.c: proxysql-check, liveness and readiness probes for a ProxySQL container, and its drain before a stop. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consul.h"
#include "log.h"
#include "statusmap.h"
#include "probe_main.h"
#include "proxysql_verdict.h"

struct proxysql_settings {
	struct probe_settings p;
	struct proxysql_rules rules;
	long drain_delay_ms;
	bool resume_on_failure; /* --resume-on-failure */
};

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("ProxySQL's admin interface", "127.0.0.1", "ProxySQL admin address (admin users may only log in locally).",
			   "6032", "admin", NULL, "PROXYSQL_ADMIN_PASSWORD", NULL),
	{"liveness", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Alive when the admin interface answers within the deadline.", 0},
	{"readiness", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Ready when every --writer-hostgroup has an ONLINE server in runtime_mysql_servers.", 0},
	{"writer-hostgroup", 'w', OPT_STRING, "ID[,ID...]", "0", "PROXYSQL_WRITER_HOSTGROUPS", 0, 0, NULL,
	 "Hostgroups that must each have an ONLINE server for --readiness.", 0, OPT_FIELD(struct proxysql_settings, rules.writer_hostgroup)},
	{"sync-readyz", 0, OPT_STRING, "URL", NULL, NULL, 0, 0, NULL,
	 "With --readiness: also require this proxysql-sync /readyz URL to answer 200.", 0, OPT_FIELD(struct proxysql_settings, rules.sync_readyz)},
	{"drain", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Before a stop: serve for --drain-delay, PROXYSQL PAUSE (new connections refused), then wait until no client is connected (exit 0; 1 at --timeout, naming the clients left).", 0},
	{"drain-delay", 0, OPT_NUMBER, "SECONDS", "0", "PROXYSQL_DRAIN_DELAY", 0, 3600, NULL,
	 "With --drain: keep accepting connections this long first (the Service drops the endpoint meanwhile); shorter than --timeout.", 0},
	{"resume-on-failure", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "With --drain: when the drain fails or times out once ProxySQL is paused, send PROXYSQL RESUME (a fresh connection, up to 5 s more) so it serves again; for drains not followed by a stop. Without it the failure line says ProxySQL stays paused.", 0, OPT_FIELD(struct proxysql_settings, resume_on_failure)},
	{"timeout", 't', OPT_NUMBER, "SECONDS", "2", NULL, 0.05, 3600, NULL, "One deadline for the whole check (with --drain: for the whole drain).", 0},
};
/* clang-format on */

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* The proxy for `url`, chosen as for Consul (never one for this machine: the agent is a sidecar)
 * into *proxy, NULL for a direct connection or a URL libcurl cannot take apart (it then fails on
 * its own). -1 with why set for a proxy URL that cannot be used (consul_proxy_for). */
static int proxy_for_url(const char *url, char **proxy, char *why, size_t len)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL, *port = NULL;
	long p = 0;
	int rc = 0;

	*proxy = NULL;
	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK || !sk_parse_long(port, 1, 65535, &p))
			p = 0;
		rc = consul_proxy_from_env(scheme, host, p, proxy, why, len);
	}
	curl_free(scheme);
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return rc;
}

/* GET url within the deadline; returns the HTTP status or -1 with why set. */
static long http_status(const char *url, const deadline_t *dl, char *why, size_t len)
{
	long left = deadline_timeout_ms(dl), status = -1;
	char *proxy;
	CURL *c;
	CURLcode rc;

	if (left < 0) { /* never 0 to libcurl: that would mean no timeout at all */
		sk_fmt(why, len, "no time left for the request (--timeout)");
		return -1;
	}
	if (proxy_for_url(url, &proxy, why, len) < 0)
		return -1;
	c = curl_easy_init();
	if (!c) {
		free(proxy);
		sk_fmt(why, len, "cannot start libcurl");
		return -1;
	}
	curl_easy_setopt(c, CURLOPT_PROXY, proxy ? proxy : ""); /* "": direct, whatever the environment */
	curl_easy_setopt(c, CURLOPT_NOPROXY, "");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, left);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else
		sk_fmt(why, len, "%s", curl_easy_strerror(rc));
	curl_easy_cleanup(c);
	if (proxy) { /* may hold user:password */
		sk_wipe(proxy, strlen(proxy));
		free(proxy);
	}
	return status;
}

/* Sleep until `until_us` (monotonic), never past the deadline. */
static void sleep_until(int64_t until_us, const deadline_t *dl)
{
	int64_t now;

	if (dl->at && until_us > dl->at)
		until_us = dl->at;
	while ((now = deadline_now_us()) < until_us) {
		struct timespec ts = { .tv_sec = (until_us - now) / 1000000,
				       .tv_nsec = ((until_us - now) % 1000000) * 1000 };

		if (nanosleep(&ts, NULL) < 0 && errno != EINTR)
			return;
	}
}

/* Client_Connections_connected of one stats table into *n; -1 with e filled. */
static int one_count(struct db *db, const char *table, const deadline_t *dl, long *n, struct db_err *e)
{
	char sql[160], val[32];
	bool found = false;

	snprintf(sql, sizeof(sql), "SELECT Variable_Value FROM %s WHERE Variable_Name='Client_Connections_connected'",
		 table);
	if (db_query_value(db, sql, dl, &(struct db_value_dest){ val, sizeof(val), &found }, e) < 0)
		return -1;
	if (!found || !sk_parse_long(val, 0, 1L << 40, n)) {
		e->reason = DB_SERVER_ERROR;
		e->code = 0;
		e->sqlstate[0] = '\0';
		sk_fmt(e->msg, sizeof(e->msg), "%s has no Client_Connections_connected", table);
		return -1;
	}
	return 0;
}

/* The clients connected now: MySQL's (stats_mysql_global), plus PostgreSQL's where the ProxySQL
 * has a PgSQL module (3.0: stats_pgsql_global; *pgsql turns false the first time that table is
 * missing, as on 2.7). -1 with e filled. */
static long clients_connected(struct db *db, const deadline_t *dl, bool *pgsql, struct db_err *e)
{
	long n = 0, p = 0;

	if (one_count(db, "stats_mysql_global", dl, &n, e) < 0)
		return -1;
	if (*pgsql && one_count(db, "stats_pgsql_global", dl, &p, e) < 0) {
		if (!strstr(e->msg, "no such table"))
			return -1;
		*pgsql = false;
		p = 0;
	}
	return n + p;
}

/* "user@host:port (command N ms), ..." for the clients the processlists still list (MySQL's, and
 * PostgreSQL's with `pgsql`), at most 8. */
static void name_clients(struct db *db, const deadline_t *dl, bool pgsql, char *out, size_t len)
{
	static const char *const mysql_only =
		"SELECT user, cli_host, cli_port, command, time_ms FROM stats_mysql_processlist ORDER BY SessionID "
		"LIMIT 8";
	static const char *const both =
		"SELECT * FROM (SELECT user, cli_host, cli_port, command, time_ms FROM stats_mysql_processlist "
		"UNION ALL SELECT user, cli_host, cli_port, command, time_ms FROM stats_pgsql_processlist) LIMIT 8";
	struct statusmap rows[8];
	size_t n = 0, used = 0;
	struct db_err e;

	memset(rows, 0, sizeof(rows));
	out[0] = '\0';
	if (db_query_rows(db, pgsql ? both : mysql_only, dl, &(struct db_rows_dest){ rows, SK_ARRAY_LEN(rows), &n },
			  &e) < 0) {
		sk_fmt(out, len, "processlist unreadable: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		int w = snprintf(out + used, len - used, "%s%s@%s:%s (%s %s ms)", i ? ", " : "",
				 statusmap_get(&rows[i], "user") ? statusmap_get(&rows[i], "user") : "?",
				 statusmap_get(&rows[i], "cli_host") ? statusmap_get(&rows[i], "cli_host") : "?",
				 statusmap_get(&rows[i], "cli_port") ? statusmap_get(&rows[i], "cli_port") : "?",
				 statusmap_get(&rows[i], "command") ? statusmap_get(&rows[i], "command") : "?",
				 statusmap_get(&rows[i], "time_ms") ? statusmap_get(&rows[i], "time_ms") : "?");
		if (w < 0)
			break;
		used += (size_t)w < len - used ? (size_t)w : len - used - 1;
	}
	for (size_t i = 0; i < SK_ARRAY_LEN(rows); i++)
		statusmap_free(&rows[i]);
}

/* The poll period of Client_Connections_connected, the time kept at the end of the deadline for
 * naming the clients left, and --resume-on-failure's own deadline (the drain's is spent by then:
 * a fresh connection and PROXYSQL RESUME, retried while a PAUSE that got no answer may still take
 * effect: a real 2.7.1 answers PAUSE after 2 to 3.6 s). */
#define DRAIN_POLL_US 100000
#define DRAIN_TAIL_MS 100
#define DRAIN_RESUME_MS 5000
#define DRAIN_RESUME_RETRY_US 250000

/* What a drain knows of ProxySQL's pause when it ends. */
enum pause_state {
	PAUSE_NOT_SENT, /* failed before PROXYSQL PAUSE, or PAUSE refused: ProxySQL serves as before */
	PAUSE_UNANSWERED, /* PAUSE sent, no answer (timeout, connection lost): it may take effect */
	PAUSE_DONE, /* PAUSE answered OK, or "already paused" */
};

/* One drain's settings and how it ended: the verdict before a word on the pause is added. */
struct drain_run {
	const struct probe_conn *pc;
	const deadline_t *dl;
	long budget_ms, delay_ms;
	bool json, resume_on_failure, already;
	int64_t started, paused_at;
	enum pause_state pause;
	const char *reason;
	char msg[1400];
};

/* A failed connection or query as the drain's verdict (returns -1 for the caller to pass on). */
static int drain_db_failure(struct drain_run *d, const struct db_err *e)
{
	struct probe_verdict v;

	probe_db_verdict("not drained", e, d->pc, d->budget_ms, "--timeout", &v);
	d->reason = v.reason;
	sk_strlcpy(d->msg, v.msg, sizeof(d->msg));
	return -1;
}

/* Serve for the delay, then PROXYSQL PAUSE (a ProxySQL paused already is fine: a second drain).
 * 0 once paused (d->pause PAUSE_DONE), -1 with the verdict in d. */
static int drain_pause(struct drain_run *d, struct db *db)
{
	struct db_err e;

	sleep_until(d->started + (int64_t)d->delay_ms * 1000, d->dl);
	d->pause = PAUSE_UNANSWERED;
	if (db_exec(db, "PROXYSQL PAUSE", d->dl, &e) < 0) {
		if (!strstr(e.msg, "already paused")) {
			if (e.reason == DB_SERVER_ERROR || e.reason == DB_REFUSED)
				d->pause = PAUSE_NOT_SENT; /* answered with an error: not paused */
			return drain_db_failure(d, &e);
		}
		d->already = true;
	}
	d->pause = PAUSE_DONE;
	d->paused_at = deadline_now_us();
	return 0;
}

/* Once paused: poll the client count at most every 100 ms until it is 0 (returns 0) or the
 * deadline leaves only the time to name the clients left (-1). The verdict goes in d. */
static int drain_wait(struct drain_run *d, struct db *db)
{
	const deadline_t *dl = d->dl;
	struct db_err e;
	char left[640];
	bool pgsql = true;
	long n = -1;

	/* ProxySQL 3.0 answers PAUSE twice (its MySQL module, then its PgSQL one): the second answer
	 * would be read as the answer to the next query. A new connection leaves it behind. */
	db_close(db);
	if (db_connect(db, &d->pc->t, dl, &e) < 0 || (n = clients_connected(db, dl, &pgsql, &e)) < 0)
		return drain_db_failure(d, &e);
	if (!d->json) {
		printf("proxysql-drain: %s after %.1f s; %ld client(s) connected; waiting up to %.1f s\n",
		       d->already ? "already paused" : "paused (new connections refused)",
		       (double)(d->paused_at - d->started) / 1e6, n, (double)deadline_left_ms(dl) / 1000.0);
		fflush(stdout);
	}
	while (n > 0 && deadline_left_ms(dl) > DRAIN_TAIL_MS) {
		sleep_until(deadline_now_us() + DRAIN_POLL_US, &(deadline_t){ .at = dl->at - DRAIN_TAIL_MS * 1000 });
		if (deadline_left_ms(dl) <= DRAIN_TAIL_MS)
			break;
		if ((n = clients_connected(db, dl, &pgsql, &e)) < 0)
			return drain_db_failure(d, &e);
	}
	if (n == 0) {
		d->reason = "ok";
		sk_fmt(d->msg, sizeof(d->msg), "drained: no client connected, %.2f s after the pause",
		       (double)(deadline_now_us() - d->paused_at) / 1e6);
		return 0;
	}
	name_clients(db, dl, pgsql, left, sizeof(left));
	d->reason = "clients_left";
	sk_fmt(d->msg, sizeof(d->msg),
	       "not drained: %ld client(s) still connected at the deadline (--timeout %.1fs): %s", n,
	       (double)d->budget_ms / 1000.0, left[0] ? left : "(none listed)");
	return -1;
}

/* --resume-on-failure: PROXYSQL RESUME on a fresh admin connection within DRAIN_RESUME_MS of its
 * own. "not paused" is retried while a PAUSE that got no answer may still take effect. Returns 0
 * (resumed, or *was_not_paused), or -1 with why. */
static int drain_resume(const struct drain_run *d, bool *was_not_paused, char *why, size_t len)
{
	deadline_t dl = deadline_in_ms(DRAIN_RESUME_MS);
	struct db db = { 0 };
	struct db_err e;
	int rc = -1;

	*was_not_paused = false;
	for (;;) {
		if (db_connect(&db, &d->pc->t, &dl, &e) == 0 && db_exec(&db, "PROXYSQL RESUME", &dl, &e) == 0)
			rc = 0;
		db_close(&db); /* 3.0 answers RESUME twice too */
		if (rc == 0)
			*was_not_paused = false;
		if (rc == 0 || !strstr(e.msg, "not paused"))
			break;
		*was_not_paused = true;
		if (d->pause == PAUSE_DONE || deadline_left_ms(&dl) * 1000 <= DRAIN_RESUME_RETRY_US)
			return 0;
		sleep_until(deadline_now_us() + DRAIN_RESUME_RETRY_US, &dl);
	}
	if (rc < 0)
		probe_describe_error(&e, d->pc, DRAIN_RESUME_MS, "--resume-on-failure's 5 s", why, len);
	return rc;
}

/* A failed drain that paused ProxySQL (or may have): resume it (--resume-on-failure), or say that
 * it stays paused and how to resume it. Appended to the verdict line. */
static void drain_after_failure(struct drain_run *d)
{
	const char *state = d->pause == PAUSE_DONE ? "ProxySQL stays paused (new connections refused)"
						   : "ProxySQL may be paused (PROXYSQL PAUSE got no answer)";
	size_t used = strlen(d->msg);
	char why[400];
	bool not_paused;

	if (d->pause == PAUSE_NOT_SENT)
		return;
	if (!d->resume_on_failure)
		sk_fmt(d->msg + used, sizeof(d->msg) - used,
		       "; %s: to serve again, run PROXYSQL RESUME on the admin interface %s (or drain with "
		       "--resume-on-failure)",
		       state, d->pc->what);
	else if (drain_resume(d, &not_paused, why, sizeof(why)) < 0)
		sk_fmt(d->msg + used, sizeof(d->msg) - used,
		       "; %s: PROXYSQL RESUME failed (--resume-on-failure): %s; run PROXYSQL RESUME on the admin "
		       "interface %s",
		       state, why, d->pc->what);
	else
		sk_fmt(d->msg + used, sizeof(d->msg) - used, "; %s (--resume-on-failure)",
		       not_paused ? "ProxySQL was not paused (PROXYSQL RESUME: not paused): it serves"
				  : "resumed: PROXYSQL RESUME sent, ProxySQL accepts new connections again");
}

/* --drain on a connected admin: pause, wait for the clients to leave, and on a failure once
 * paused resume or say how to. One line of progress once paused, then the verdict. */
static int drain(struct drain_run *d, struct db *db)
{
	bool ok = drain_pause(d, db) == 0 && drain_wait(d, db) == 0;

	if (!ok)
		drain_after_failure(d);
	return probe_report(&(struct probe_out){ .probe = proxysql_probe_name(PROXYSQL_DRAIN),
						 .json = d->json,
						 .text_stream = stdout,
						 .started_us = d->started },
			    ok, d->reason, d->msg);
}

static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct proxysql_settings *s = settings;
	struct proxysql_rules *r = &s->rules;
	bool ready = opt_flag(o, "readiness"), draining = opt_flag(o, "drain");

	if ((int)opt_flag(o, "liveness") + (int)ready + (int)draining != 1)
		return sk_err(err, errlen, "give exactly one of --liveness, --readiness and --drain");
	if (!draining && s->resume_on_failure)
		return sk_err(err, errlen, "--resume-on-failure goes with --drain");
	if (draining && opt_num(o, "drain-delay") >= opt_num(o, "timeout"))
		return sk_err(err, errlen, "--drain-delay (%.1fs) must be shorter than --timeout (%.1fs)",
			      opt_num(o, "drain-delay"), opt_num(o, "timeout"));
	if (ready && (r->nids = proxysql_parse_hostgroups(r->writer_hostgroup, r->ids, PROXYSQL_MAX_HOSTGROUPS)) < 0)
		return sk_err(err, errlen, "%s: '%s' is not a list of hostgroup ids (like 10,20)",
			      opt_source(o, "writer-hostgroup")[0] ? opt_source(o, "writer-hostgroup")
								   : "--writer-hostgroup",
			      r->writer_hostgroup);
	r->mode = draining ? PROXYSQL_DRAIN : ready ? PROXYSQL_READINESS : PROXYSQL_LIVENESS;
	probe_settings_load(o, &s->p);
	s->p.budget_ms = (long)(opt_num(o, "timeout") * 1000);
	s->p.timeout_setting = "--timeout";
	s->drain_delay_ms = (long)(opt_num(o, "drain-delay") * 1000);
	return 0;
}

/* The ONLINE servers of one writer hostgroup into *online; -1 with e filled. */
static int online_servers(struct db *db, long id, const deadline_t *dl, long *online, struct db_err *e)
{
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	char sql[1024];

	snprintf(sql, sizeof(sql),
		 "SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=%ld AND status='ONLINE'", id);
	if (db_query(db, sql, dl, &res, e) < 0)
		return -1;
	row = res ? mysql_fetch_row(res) : NULL;
	if (!row || !row[0] || !sk_parse_long(row[0], 0, 1L << 40, online))
		*online = 0;
	if (res)
		mysql_free_result(res);
	return 0;
}

/* A fetch whose answers do not fit (never with PROXYSQL_MAX_HOSTGROUPS): -1 with e filled. */
static int answers_full(struct db_err *e)
{
	memset(e, 0, sizeof(*e));
	e->reason = DB_SERVER_ERROR;
	sk_fmt(e->msg, sizeof(e->msg), "too many answers to keep");
	return -1;
}

/* --readiness on a connected admin: the ONLINE servers of each writer hostgroup until one has none,
 * then proxysql-sync's /readyz when asked (proxysql_verdict.h says where each answer goes). */
static int fetch_readiness(const struct proxysql_rules *r, struct db *db, const deadline_t *dl, struct probe_fetch *f,
			   struct db_err *e)
{
	char id[32], n[32], why[256] = "";
	long online = 0, status;

	for (int i = 0; i < r->nids; i++) {
		if (online_servers(db, r->ids[i], dl, &online, e) < 0)
			return -1;
		snprintf(id, sizeof(id), "%ld", r->ids[i]);
		snprintf(n, sizeof(n), "%ld", online);
		if (statusmap_set(&f->status, id, n) < 0)
			return answers_full(e);
		if (online == 0)
			return 0;
	}
	if (!r->sync_readyz)
		return 0;
	status = http_status(r->sync_readyz, dl, why, sizeof(why));
	snprintf(n, sizeof(n), "%ld", status);
	if (statusmap_set(&f->vars, PROXYSQL_READYZ_STATUS, n) < 0 ||
	    (status < 0 && statusmap_set(&f->vars, PROXYSQL_READYZ_ERROR, why) < 0))
		return answers_full(e);
	return 0;
}

/* Connect to the admin interface and see it answer, then what --readiness judges. */
static int fetch(const void *settings, const struct probe_conn *pc, const deadline_t *dl, struct probe_fetch *f,
		 struct db_err *e)
{
	const struct proxysql_settings *s = settings;
	struct db db = { 0 };
	MYSQL_RES *res = NULL;
	int rc = -1;

	if (db_connect(&db, &pc->t, dl, e) == 0 && db_query(&db, "SELECT 1", dl, &res, e) == 0) {
		if (res)
			mysql_free_result(res);
		rc = s->rules.mode == PROXYSQL_READINESS ? fetch_readiness(&s->rules, &db, dl, f, e) : 0;
	}
	db_close(&db);
	return rc;
}

static void judge(void *settings, const struct probe_outcome *o, struct probe_verdict *v)
{
	const struct proxysql_settings *s = settings;

	proxysql_judge(&s->rules, o, v);
}

/* The verdict under the mode's name ("proxysql-readiness"). */
static int print(const void *settings, const struct probe_conn *pc, const struct probe_fetch *f,
		 const struct probe_verdict *v, int64_t started)
{
	const struct proxysql_settings *s = settings;

	(void)pc;
	(void)f;
	return probe_report(&(struct probe_out){ .probe = proxysql_probe_name(s->rules.mode),
						 .json = s->p.json,
						 .text_stream = stdout,
						 .started_us = started },
			    v->up, v->reason, v->msg);
}

/* --drain runs on its own; --liveness and --readiness are the driver's steps. */
static bool runs_own(const void *settings)
{
	const struct proxysql_settings *s = settings;

	return s->rules.mode == PROXYSQL_DRAIN;
}

/* --drain: connect to the admin interface and see it answer, then pause and wait for the clients. */
static int run(void *settings, int argc, char **argv, int64_t started)
{
	const struct proxysql_settings *s = settings;
	struct probe_verdict v;
	struct probe_conn pc;
	struct db db = { 0 };
	struct db_err e;
	MYSQL_RES *res = NULL;
	char err[512];
	deadline_t dl;
	int rc;

	(void)argc;
	(void)argv;
	if (probe_conn_setup(&s->p.conn, &pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "proxysql-check: %s\n", err);
		return 2;
	}
	if (probe_tls_unverified(&pc, err, sizeof(err)))
		fprintf(stderr, "proxysql-check: %s\n", err);
	dl = deadline_since_start_ms(s->p.budget_ms);
	if (db_connect(&db, &pc.t, &dl, &e) < 0 || db_query(&db, "SELECT 1", &dl, &res, &e) < 0) {
		probe_db_verdict(proxysql_down_word(PROXYSQL_DRAIN), &e, &pc, s->p.budget_ms, "--timeout", &v);
		rc = print(s, &pc, NULL, &v, started);
	} else {
		if (res)
			mysql_free_result(res);
		rc = drain(&(struct drain_run){ .pc = &pc,
						.dl = &dl,
						.budget_ms = s->p.budget_ms,
						.delay_ms = s->drain_delay_ms,
						.json = s->p.json,
						.resume_on_failure = s->resume_on_failure,
						.started = started },
			   &db);
	}
	db_close(&db);
	probe_conn_free(&pc);
	return rc;
}

static const struct probe_kind proxysql_kind = {
	.name = "proxysql",
	.opts = {
		.prog = "proxysql-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "--liveness|--readiness|--drain [OPTION]...",
		.summary =
			"Probe a ProxySQL instance through its admin interface: --liveness (the admin answers) or\n"
			"--readiness (an ONLINE server in each writer hostgroup, and optionally proxysql-sync ready);\n"
			"or drain it before a stop (--drain: PROXYSQL PAUSE, then wait for its clients to leave).",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
	},
	.log_level = LOG_WARN,
	.settings_size = sizeof(struct proxysql_settings),
	.settings_load = settings_load,
	.fetch = fetch,
	.judge = judge,
	.print = print,
	.runs_own = runs_own,
	.run = run,
};

int main(int argc, char **argv)
{
	return probe_main(&proxysql_kind, argc, argv);
}
