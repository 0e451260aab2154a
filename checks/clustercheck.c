/* clustercheck.c: clustercheck, the classic Galera HTTP health check: one-shot for xinetd and
 * systemd Accept=yes (byte-for-byte responses), --listen to serve HTTP itself, or --register to
 * keep this node's key in Consul KV while it is healthy (the modern clustercheckcron). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include "cc_check.h"
#include "clustercheck_opts.h"
#include "consul.h"
#include "galera.h"
#include "healthcheck.h"
#include "http.h"
#include "log.h"
#include "proc.h"
#include "register.h"
#include "probe_main.h"

/* The classic answers, byte for byte (Percona clustercheck). */
static const struct {
	int status;
	const char *status_text;
	const char *body;
} answers[] = {
	[CC_SYNCED] = { 200, "OK", "Percona XtraDB Cluster Node is synced.\r\n" },
	[CC_NOT_SYNCED] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is not synced.\r\n" },
	[CC_READ_ONLY] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is read-only.\r\n" },
	[CC_DISABLED] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is manually disabled.\r\n" },
};

static int format_response(enum cc_answer a, char *buf, size_t len)
{
	return snprintf(
		buf, len,
		"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
		answers[a].status, answers[a].status_text, strlen(answers[a].body), answers[a].body);
}

/* After answering on a socket (xinetd, systemd Accept=yes), close the write side and drain the
 * request briefly, so closing with unread data does not turn into a reset that loses the reply. */
static void finish_socket(void)
{
	int type;
	socklen_t len = sizeof(type);
	char sink[512];
	deadline_t dl = deadline_in_ms(100);

	if (getsockopt(STDOUT_FILENO, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return;
	shutdown(STDOUT_FILENO, SHUT_WR);
	while (!deadline_expired(&dl)) {
		struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };

		if (poll(&p, 1, deadline_left_ms(&dl)) <= 0 || read(STDIN_FILENO, sink, sizeof(sink)) <= 0)
			break;
	}
}

/* The classic check once: the script's HTTP answer on stdout, the reason in the log file and, for a
 * person (`tell`: --verbose, or stdout is a terminal), on stderr as well. */
static int one_shot(struct cc_checker *c, bool json, bool tell, FILE *diag, int64_t started)
{
	struct cc_result r;
	char out[512];
	int n;

	if (!cc_check_disabled(c, &r)) {
		deadline_t dl = deadline_since_start_ms(c->timeout_ms);

		cc_check_once(c, &c->db, &dl, &r);
		db_close(&c->db);
	}
	if (diag)
		fprintf(diag, "%s\n", r.detail);
	if (json)
		return probe_report(&(struct probe_out){ .probe = "clustercheck", .json = true, .started_us = started },
				    r.answer == CC_SYNCED, r.reason, r.detail);
	n = format_response(r.answer, out, sizeof(out));
	if (fwrite(out, 1, (size_t)n, stdout) != (size_t)n || fflush(stdout) != 0)
		return 1;
	if (tell)
		fprintf(stderr, "clustercheck: %s\n", r.detail);
	finish_socket();
	return r.answer == CC_SYNCED ? 0 : 1;
}

/* Under c->mu: a result this request may take without checking: a cached one, the one of a check
 * that started after this request arrived (it waits for it within `dl`), or the timeout answer.
 * False when this request must run the check itself. */
static bool reuse_or_wait(struct cc_checker *c, const deadline_t *dl, struct cc_result *r)
{
	unsigned long gen;

	for (;;) {
		if (c->have && c->cache_ms > 0 && deadline_now_us() - c->last_at <= c->cache_ms * 1000) {
			*r = c->last;
			return true;
		}
		if (!c->in_flight)
			return false;
		gen = c->gen;
		while (c->in_flight && c->gen == gen) {
			struct timespec ts = { dl->at / 1000000, (dl->at % 1000000) * 1000 };

			if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT && c->gen == gen) {
				r->answer = CC_NOT_SYNCED;
				r->reason = "timeout";
				sk_fmt(r->detail, sizeof(r->detail),
				       "not synced: timeout after %.1fs waiting for the check in progress (--timeout)",
				       (double)c->timeout_ms / 1000.0);
				return true;
			}
		}
		if (c->gen != gen) {
			*r = c->last; /* a check that started after this request arrived: fresh enough */
			return true;
		}
	}
}

/* --listen: the result for one request, sharing a check already in flight. */
static void shared_check(struct cc_checker *c, const deadline_t *dl, struct cc_result *r)
{
	if (cc_check_disabled(c, r))
		return;
	pthread_mutex_lock(&c->mu);
	if (reuse_or_wait(c, dl, r)) {
		pthread_mutex_unlock(&c->mu);
		return;
	}
	c->in_flight = true;
	pthread_mutex_unlock(&c->mu);

	cc_check_once(c, &c->db, dl, r);

	pthread_mutex_lock(&c->mu);
	c->last = *r;
	c->last_at = deadline_now_us();
	c->have = true;
	c->gen++;
	c->in_flight = false;
	if (r->answer != c->logged) {
		log_info("node %s -> %s (%s)", cc_check_answer_names[c->logged], cc_check_answer_names[r->answer],
			 r->detail);
		c->logged = r->answer;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Take the persistent connection for a request that is not the classic check (they share it with
 * the classic one). False when `dl` passed first. */
static bool conn_acquire(struct cc_checker *c, const deadline_t *dl)
{
	struct timespec ts = { dl->at / 1000000, (dl->at % 1000000) * 1000 };

	pthread_mutex_lock(&c->mu);
	while (c->in_flight) {
		if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT && c->in_flight) {
			pthread_mutex_unlock(&c->mu);
			return false;
		}
	}
	c->in_flight = true;
	pthread_mutex_unlock(&c->mu);
	return true;
}

static void conn_release(struct cc_checker *c)
{
	pthread_mutex_lock(&c->mu);
	c->in_flight = false;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void reply_text(struct http_reply *rep, bool up, const char *line)
{
	rep->status = up ? 200 : 503;
	rep->content_type = "text/plain";
	rep->close = true;
	sk_fmt(rep->body, sizeof(rep->body), "%s\n", line);
	rep->len = strlen(rep->body);
}

/* Fetch on the shared connection what /liveness (the wsrep status) or /readiness (what its rules
 * need) judges. False with e filled when it failed. */
static bool fetch_shared(struct cc_checker *c, bool readiness, const deadline_t *dl, struct probe_fetch *f,
			 struct db_err *e)
{
	bool fetched;

	if (!conn_acquire(c, dl)) {
		sk_fmt(e->msg, sizeof(e->msg), "timed out waiting for the check in progress");
		return false;
	}
	fetched = (c->db.connected || probe_galera_connect(&c->db, &c->pc, dl, e) == 0) &&
		  (readiness ? readiness_fetch(&c->db, &c->readiness, dl, f, e)
			     : probe_galera_read(&c->db, dl, &f->status, NULL, e)) == 0;
	if (!fetched)
		db_close(&c->db);
	conn_release(c);
	return fetched;
}

/* /liveness: liveness-check's rules on the shared connection. */
static void answer_liveness(struct cc_checker *c, const deadline_t *dl, struct http_reply *rep)
{
	struct probe_fetch f = { 0 };
	struct probe_verdict v;
	struct probe_sst sst = c->sst; /* this request's evidence */
	struct db_err e = { .reason = DB_TIMEOUT };

	if (!probe_liveness_before(&sst, &v)) {
		struct probe_outcome o = {
			.f = &f, .e = &e, .pc = &c->pc, .budget_ms = c->timeout_ms, .setting = "--timeout"
		};

		o.fetched = fetch_shared(c, false, dl, &f, &e);
		probe_liveness_judge(&o, c->state_file, &sst, &v);
	}
	reply_text(rep, v.up, v.msg);
	probe_fetch_free(&f);
}

/* /readiness: readiness-check's rules (the --readiness-* options) on the shared connection. */
static void answer_readiness(struct cc_checker *c, const deadline_t *dl, struct http_reply *rep)
{
	struct probe_fetch f = { 0 };
	struct probe_verdict v;
	struct db_err e = { .reason = DB_TIMEOUT };
	char ignored[400];

	if (!probe_readiness_bypass(c->sst.recovery_file, c->sst.datadir, &v, ignored, sizeof(ignored))) {
		struct probe_outcome o = {
			.f = &f, .e = &e, .pc = &c->pc, .budget_ms = c->timeout_ms, .setting = "--timeout"
		};

		o.fetched = fetch_shared(c, true, dl, &f, &e);
		readiness_judge(&c->readiness, &o, &v);
		probe_verdict_note(&v, ignored);
	}
	reply_text(rep, v.up, v.msg);
	probe_fetch_free(&f);
}

/* /healthcheck: healthcheck.sh's tests on the shared connection (it is the "socket" of every test;
 * the connect test's fallback sees why it failed). */
struct hc_http {
	struct cc_checker *c;
	const deadline_t *dl;
	struct db_err failed;
	bool have_failed;
};

static int hh_connect(struct hc_http *h, struct db_err *e)
{
	if (h->c->db.connected)
		return 0;
	if (h->have_failed) {
		*e = h->failed;
		return -1;
	}
	if (probe_galera_connect(&h->c->db, &h->c->pc, h->dl, e) < 0) {
		h->failed = *e;
		h->have_failed = true;
		return -1;
	}
	return 0;
}

static int hh_query_failed(struct hc_http *h, const struct db_err *e)
{
	if (!h->c->db.connected) {
		db_close(&h->c->db);
		h->failed = *e;
		h->have_failed = true;
	}
	return -1;
}

static int hh_value(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	v->found = false;
	if (hh_connect(h, e) < 0)
		return -1;
	if (db_query_value(&h->c->db, sql, h->dl, &(struct db_value_dest){ v->buf, v->len, &v->found }, e) < 0)
		return hh_query_failed(h, e);
	return 0;
}

static int hh_status(void *ctx, const struct hc_defaults *d, struct statusmap *status, struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	if (hh_connect(h, e) < 0)
		return -1;
	if (probe_galera_read(&h->c->db, h->dl, status, NULL, e) < 0)
		return hh_query_failed(h, e);
	return 0;
}

static int hh_rows(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_rows *r, struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	r->n = 0;
	if (hh_connect(h, e) < 0)
		return -1;
	if (db_query_rows(&h->c->db, sql, h->dl, &(struct db_rows_dest){ r->rows, r->max, &r->n }, e) < 0)
		return hh_query_failed(h, e);
	return 0;
}

static int hh_fallback(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	(void)sql;
	v->found = false;
	*e = h->failed;
	return -1;
}

static void hh_reset(void *ctx)
{
	(void)ctx;
}

static void hh_describe(void *ctx, const struct db_err *e, char *buf, size_t len)
{
	struct hc_http *h = ctx;

	probe_describe_error(e, &h->c->pc, h->c->timeout_ms, "--timeout", buf, len);
}

static int hh_upgrade_locked(void *ctx, const char *path, char *why, size_t whylen)
{
	(void)ctx;
	return healthcheck_upgrade_locked(path, why, whylen);
}

/* A /healthcheck query as healthcheck's argv, its words kept in `store`. */
struct query_args {
	char *argv[64];
	char store[sizeof(((struct http_reply *)0)->query) + 128];
};

/* The query "connect&replication_io=1&replication" as healthcheck's argv in `a`; options that pick
 * files or users are refused over HTTP. Returns the argc, or -1 with `bad` naming the argument. */
static int query_argv(char *query, struct query_args *a, char *bad, size_t badlen)
{
	static const char *const refused[] = { "su",
					       "su-mysql",
					       "datadir",
					       "no-defaults",
					       "defaults-file",
					       "defaults-extra-file",
					       "defaults-group-suffix",
					       "timeout",
					       "json",
					       "user",
					       "password-file",
					       "alive-during-sst" };
	char **argv = a->argv, *store = a->store, *save = NULL, *tok;
	size_t used = 0, storelen = sizeof(a->store);
	int argc = 0, max = (int)SK_ARRAY_LEN(a->argv);

	argv[argc++] = "healthcheck";
	for (tok = strtok_r(query, "&", &save); tok && argc + 1 < max; tok = strtok_r(NULL, "&", &save)) {
		size_t n = strcspn(tok, "=");

		for (size_t i = 0; i < SK_ARRAY_LEN(refused); i++) {
			if (strlen(refused[i]) == n && strncmp(tok, refused[i], n) == 0) {
				snprintf(bad, badlen, "%s", tok);
				return -1;
			}
		}
		/* "connect" and "connect=" (some clients write the empty value) are the same test. */
		if (tok[n] == '=' && !tok[n + 1] && strncmp(tok, "replication_", 12) != 0)
			tok[n] = '\0';
		/* Each parameter is the option of the same name: "connect" is --connect. */
		if (!sk_fmt(store + used, storelen - used, "--%s", tok)) {
			snprintf(bad, badlen, "%.40s... (the query is too long)", tok);
			return -1;
		}
		argv[argc++] = store + used;
		used += strlen(store + used) + 1;
	}
	argv[argc] = NULL;
	return argc;
}

/* The body of a /healthcheck answer: "healthy: connect, ..." after `line`'s "healthy:", or the
 * last of the run's lines (the earlier ones are the script's notices). */
static void result_line(const struct hc_run *run, int rc, char *lines, char *line, size_t len)
{
	char *end = lines + strlen(lines), *start;

	if (rc == 0) {
		for (size_t i = 0; i < run->nresults; i++)
			sk_fmt(line + strlen(line), len - strlen(line), "%s %s", i ? "," : "", run->results[i].test);
		return;
	}
	while (end > lines && end[-1] == '\n')
		*--end = '\0';
	start = strrchr(lines, '\n');
	sk_strlcpy(line, start ? start + 1 : lines, len);
}

static void answer_healthcheck(struct cc_checker *c, char *query, const deadline_t *dl, struct http_reply *rep)
{
	struct hc_http h = { .c = c, .dl = dl };
	struct hc_io io = {
		.socket_value = hh_value,
		.socket_status = hh_status,
		.socket_rows = hh_rows,
		.tcp_value = hh_fallback,
		.upgrade_locked = hh_upgrade_locked,
		.reset = hh_reset,
		.describe = hh_describe,
		.ctx = &h,
	};
	struct query_args args;
	char bad[200], lines[2048] = "", line[600] = "healthy:";
	struct hc_run run;
	FILE *err;
	int argc, rc;

	argc = query_argv(query, &args, bad, sizeof(bad));
	if (argc < 0) {
		sk_fmt(line, sizeof(line), "healthcheck: '%s' is not accepted over HTTP", bad);
		reply_text(rep, false, line);
		rep->status = 400;
		return;
	}
	if (!conn_acquire(c, dl)) {
		sk_fmt(line, sizeof(line),
		       "healthcheck: timeout after %.1fs waiting for the check in progress (--timeout)",
		       (double)c->timeout_ms / 1000.0);
		reply_text(rep, false, line);
		return;
	}
	err = fmemopen(lines, sizeof(lines) - 1, "w");
	healthcheck_run_init(&run, c->sst.datadir, err);
	rc = healthcheck_run_args(&run, argc, args.argv, &io);
	conn_release(c);
	if (err)
		fclose(err);
	result_line(&run, rc, lines, line, sizeof(line));
	reply_text(rep, rc == 0, line);
	healthcheck_run_free(&run);
}

static void answer_classic(struct cc_checker *c, const deadline_t *dl, struct http_reply *rep)
{
	struct cc_result r;

	shared_check(c, dl, &r);
	rep->status = answers[r.answer].status;
	rep->content_type = "text/plain";
	rep->close = true;
	rep->len = strlen(answers[r.answer].body);
	memcpy(rep->body, answers[r.answer].body, rep->len);
}

static void on_http(void *ctx, const char *method, const char *path, struct http_reply *rep)
{
	struct cc_checker *c = ctx;
	deadline_t dl = deadline_in_ms(c->timeout_ms);

	(void)method;
	if (strcmp(path, "/") == 0 || strcmp(path, "*") == 0)
		answer_classic(c, &dl, rep);
	else if (strcmp(path, "/liveness") == 0)
		answer_liveness(c, &dl, rep);
	else if (strcmp(path, "/readiness") == 0)
		answer_readiness(c, &dl, rep);
	else if (strcmp(path, "/healthcheck") == 0)
		answer_healthcheck(c, rep->query, &dl, rep);
	else {
		reply_text(rep, false, "not found: the paths are /, /liveness, /readiness and /healthcheck?TESTS");
		rep->status = 404;
	}
}

static int serve(struct cc_checker *c, const char *spec, const struct http_limits *lim)
{
	struct http_server *srv;
	sigset_t set;
	char err[256];
	int sig = 0, abort_pipe[2];

	/* Before any other thread: as a container's PID 1 it inherits every orphan. */
	if (proc_reaper_start(err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 1;
	}
	/* Block the stop signals in every thread; the main thread waits for them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	db_library_init();
	if (pipe2(abort_pipe, O_CLOEXEC) == 0)
		db_set_abort_fd(abort_pipe[0]);
	else
		abort_pipe[0] = abort_pipe[1] = -1;
	srv = http_start(spec, &(struct http_service){ HTTP_HANDLERS_BLOCK, on_http, c }, lim, err, sizeof(err));
	if (!srv) {
		log_error("%s (--listen)", err);
		return 2;
	}
	log_info("listening on %s (port %u), timeout %.1fs, cache %ldms", spec, http_port(srv),
		 (double)c->timeout_ms / 1000.0, c->cache_ms);
	sigwait(&set, &sig);
	log_info("stopping on signal %d", sig);
	/* A check hanging on mysqld gives up now instead of at its deadline, and its client gets
	 * the 503 answer before the connections close. */
	if (abort_pipe[1] >= 0 && write(abort_pipe[1], "x", 1) < 0)
		log_warn("cannot interrupt the checks in flight: %s", strerror(errno));
	if (!http_drain(srv, 1000))
		log_warn("stopping with requests still unanswered after 1 s");
	http_stop(srv);
	db_close(&c->db);
	return 0;
}

/* The classic positional form (xinetd server_args), before the rows are bound. */
static int positional(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct clustercheck_settings *s = settings;

	return clustercheck_opts_apply_positional(o, &s->password_on_argv, err, errlen);
}

/* The classic check's rules, --listen's paths' settings, and the modes' own. */
static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct clustercheck_settings *s = settings;
	struct cc_checker *c = &s->c;

	if (readiness_rules_load(o, "readiness-", &c->readiness, err, errlen) < 0)
		return -1;
	probe_settings_load(o, &s->p);
	c->rules = (struct galera_rules){ .need_primary = true,
					  .need_synced = true,
					  .donor_ok = opt_flag(o, "available-when-donor"),
					  .readonly_ok = opt_flag(o, "available-when-readonly") };
	c->timeout_ms = (long)(opt_num(o, "timeout") * 1000);
	if (!log_level_parse(opt_str(o, "log-level"), &s->log_level) ||
	    !log_format_parse(opt_str(o, "log-format"), &s->log_format))
		s->log_level = LOG_INFO, s->log_format = LOG_TEXT;
	s->limits = (struct http_limits){
		.max_conns = (unsigned)opt_int(o, "max-connections"),
		.max_conns_per_ip = (unsigned)opt_int(o, "max-connections-per-ip"),
		.idle_timeout_s = (unsigned)opt_int(o, "idle-timeout"),
		.request_timeout_ms = (unsigned)(opt_num(o, "request-timeout") * 1000),
	};
	if (s->registering)
		register_settings_load(o, &s->reg);
	return 0;
}

static void settings_free(void *settings)
{
	struct clustercheck_settings *s = settings;

	if (s->registering)
		register_settings_free(&s->reg);
}

/* A warning: into the log file, and onto stderr only when it cannot be the client's socket. */
static void diag_warn(const struct clustercheck_settings *s, FILE *diag, const char *w)
{
	if (isatty(STDERR_FILENO) || s->listen)
		fprintf(stderr, "clustercheck: %s\n", w);
	if (diag)
		fprintf(diag, "clustercheck: %s\n", w);
}

/* --log-file (stderr may be the client's socket under xinetd), and the warning about a password
 * on the command line: never onto stderr when it may be the client's socket. */
static FILE *open_diag(const struct clustercheck_settings *s)
{
	FILE *diag = NULL;
	char w[512];

	if (strcmp(s->log_file, "/dev/null") != 0) {
		diag = fopen(s->log_file, "ae");
		if (!diag)
			fprintf(stderr, "clustercheck: warning: cannot open log file %s: %s\n", s->log_file,
				strerror(errno));
	}
	if (s->password_on_argv)
		diag_warn(s, diag,
			  "warning: a password on the command line is visible to every user (ps, /proc); use "
			  "--password-file, MYSQL_PASSWORD or a defaults file");
	if (probe_tls_unverified(&s->c.pc, w, sizeof(w)))
		diag_warn(s, diag, w);
	return diag;
}

/* Waiters time out on a CLOCK_MONOTONIC deadline (deadline_t), so the condition variable must use
 * that clock (the default, CLOCK_REALTIME, made every wait expire at once). */
static void checker_init(struct cc_checker *c)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->logged = CC_SYNCED;
}

/* --listen's address as the server will read it: a bad one is a usage error (one line, exit 2),
 * like any other bad option, not a log line from the server that could not start. */
static bool listen_spec_ok(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];

	if (http_parse_listen(spec, &ss, &len, why, sizeof(why)) == 0)
		return true;
	fprintf(stderr, "clustercheck: --listen: %s\n", why);
	return false;
}

/* One of the modes: one-shot, --register or --listen. */
static int run_mode(struct clustercheck_settings *s, const char *prog, FILE *diag, int64_t started)
{
	bool abandoned = false;
	int rc;

	if (s->reg.once && !s->registering) {
		fprintf(stderr, "clustercheck: --once goes with --register\n");
		return 2;
	}
	if (s->registering && s->listen) {
		fprintf(stderr, "clustercheck: --register and --listen are separate modes: run two processes\n");
		return 2;
	}
	if (s->listen && !listen_spec_ok(s->listen))
		return 2;
	if (!s->registering && !s->listen)
		return one_shot(&s->c, s->p.json, s->verbose || isatty(STDOUT_FILENO), diag, started);
	log_setup(prog, s->log_format, s->log_level, stderr);
	if (s->listen)
		return serve(&s->c, s->listen, &s->limits);
	rc = register_run(&s->c, &s->reg, &abandoned);
	/* A check hangs on the worker thread (bounded by its deadline): leave its memory alone. */
	s->p.abandoned = abandoned;
	return rc;
}

static int run(void *settings, int argc, char **argv, int64_t started)
{
	struct clustercheck_settings *s = settings;
	char err[512];
	FILE *diag;
	int rc;

	(void)argc;
	checker_init(&s->c);
	diag = open_diag(s);
	/* A one-shot answer goes to stdout, and under xinetd or systemd Accept=yes stderr is the
	 * client's socket too: a warning from reading the secrets (a password file other users can
	 * read) goes to the log file, or to stderr only when it is a terminal. */
	if (!s->registering && !s->listen && !isatty(STDERR_FILENO))
		log_setup(argv[0], LOG_TEXT, diag ? LOG_WARN : LOG_OFF, diag ? diag : stderr);
	if (probe_conn_setup(&s->p.conn, &s->c.pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "clustercheck: %s\n", err);
		if (diag)
			fclose(diag);
		return 2;
	}
	rc = run_mode(s, argv[0], diag, started);
	if (diag)
		fclose(diag);
	if (!s->p.abandoned)
		probe_conn_free(&s->c.pc);
	return rc;
}

static const struct probe_kind clustercheck_kind = {
	.name = "clustercheck",
	.opts_init = clustercheck_opts_init,
	.log_level = LOG_INFO,
	.settings_size = sizeof(struct clustercheck_settings),
	.positional = positional,
	.settings_load = settings_load,
	.settings_free = settings_free,
	.run = run,
};

int main(int argc, char **argv)
{
	return probe_main(&clustercheck_kind, argc, argv);
}
