/* clustercheck.c: clustercheck, the classic Galera HTTP health check: one-shot for xinetd and
 * systemd Accept=yes (byte-for-byte responses), or --listen to serve HTTP itself. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include "galera.h"
#include "http.h"
#include "log.h"
#include "probe.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("localhost", "mysqld address; localhost means the unix socket, as for the mysql client.",
			   "3306", "clustercheckuser", NULL, "MYSQL_PASSWORD", "clustercheckpassword!"),
	{"timeout", 't', OPT_NUMBER, "SECONDS", "10", NULL, 0.05, 3600, NULL,
	 "One deadline for each check (connect, auth, queries); decimals allowed.", 0},
	{"available-when-donor", 0, OPT_FLAG, NULL, "0", "AVAILABLE_WHEN_DONOR", 0, 0, NULL,
	 "A donor/desynced node (wsrep_local_state=2) counts as synced.", 0},
	{"available-when-readonly", 0, OPT_FLAG, NULL, "1", "AVAILABLE_WHEN_READONLY", 0, 0, NULL,
	 "A read_only=ON node counts as available; 0 answers 503 'read-only'.", 0},
	{"log-file", 0, OPT_STRING, "PATH", "/dev/null", "ERR_FILE", 0, 0, NULL,
	 "Where the one-line reason and warnings go (stderr may be the client socket under xinetd).", 0},
	{"disabled-file", 0, OPT_STRING, "PATH", "/var/tmp/clustercheck.disabled", NULL, 0, 0, NULL,
	 "While this file exists the node answers 503 'manually disabled'.", 0},
	{"listen", 'l', OPT_STRING, "[ADDR:]PORT", NULL, NULL, 0, 0, NULL,
	 "Serve HTTP on this address (the classic port is 9200) instead of answering once on stdout.", 0},
	{"cache-ms", 0, OPT_INT, "MS", "0", NULL, 0, 60000, NULL,
	 "With --listen: reuse a result for this long (0: every request checks; concurrent requests share one check).", 0},
	{"max-connections", 0, OPT_INT, "N", "256", NULL, 1, 10000, NULL,
	 "With --listen: open HTTP connections at most.", 0},
	{"idle-timeout", 0, OPT_INT, "SECONDS", "10", NULL, 1, 3600, NULL,
	 "With --listen: close a connection that sends nothing for this long.", 0},
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", NULL, 0, 0, "text|json", "With --listen: log line format.", 0},
	{"log-level", 0, OPT_ENUM, "LEVEL", "info", NULL, 0, 0, "debug|info|warn|error", "With --listen: lowest level logged.", 0},
};
/* clang-format on */

/* The classic answers, byte for byte (Percona clustercheck). */
enum answer { SYNCED, NOT_SYNCED, READ_ONLY, DISABLED };
static const struct {
	int status;
	const char *status_text;
	const char *body;
} answers[] = {
	[SYNCED] = { 200, "OK", "Percona XtraDB Cluster Node is synced.\r\n" },
	[NOT_SYNCED] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is not synced.\r\n" },
	[READ_ONLY] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is read-only.\r\n" },
	[DISABLED] = { 503, "Service Unavailable", "Percona XtraDB Cluster Node is manually disabled.\r\n" },
};

static const char *const answer_names[] = { "synced", "not synced", "read-only", "manually disabled" };

struct result {
	enum answer answer;
	const char *reason;
	char detail[400];
};

struct checker {
	struct probe_conn pc;
	struct galera_rules rules;
	long timeout_ms;
	const char *disabled_file;
	/* --listen: one persistent connection; concurrent requests share the check in flight. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct db db;
	bool in_flight, have;
	unsigned long gen;
	struct result last;
	int64_t last_at;
	long cache_ms;
	enum answer logged;
};

/* One check on `db` (connected first when needed), bounded by `dl`. */
static void check_once(struct checker *c, struct db *db, const deadline_t *dl, struct result *r)
{
	struct statusmap status = { 0 }, vars = { 0 };
	struct galera_verdict v;
	struct db_err e;

	if (!db->connected && probe_galera_connect(db, &c->pc, dl, &e) < 0)
		goto failed;
	if (probe_galera_read(db, dl, &status, galera_rules_need_vars(&c->rules) ? &vars : NULL, &e) < 0) {
		db_close(db);
		goto failed;
	}
	galera_judge(&status, &vars, &c->rules, &v);
	r->answer = v.up ? SYNCED : v.reason == GALERA_READ_ONLY ? READ_ONLY : NOT_SYNCED;
	r->reason = galera_reason_str(v.reason);
	sk_fmt(r->detail, sizeof(r->detail), "%s: %s", v.up ? "synced" : "not synced", v.detail);
	statusmap_free(&status);
	statusmap_free(&vars);
	return;
failed:
	r->answer = NOT_SYNCED;
	r->reason = e.reason == DB_TIMEOUT ? "timeout" : db_reason_str(e.reason);
	probe_describe_error(&e, &c->pc, c->timeout_ms, "--timeout", r->detail + 12, sizeof(r->detail) - 12);
	memcpy(r->detail, "not synced: ", 12);
	statusmap_free(&status);
	statusmap_free(&vars);
}

static bool disabled(const struct checker *c, struct result *r)
{
	if (!probe_file_exists(c->disabled_file))
		return false;
	r->answer = DISABLED;
	r->reason = "disabled";
	sk_fmt(r->detail, sizeof(r->detail), "manually disabled: %s exists", c->disabled_file);
	return true;
}

static int format_response(enum answer a, char *buf, size_t len)
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

static int one_shot(struct checker *c, bool json, FILE *diag, int64_t started)
{
	struct result r;
	char out[512];
	int n;

	if (!disabled(c, &r)) {
		deadline_t dl = deadline_in_ms(c->timeout_ms);

		check_once(c, &c->db, &dl, &r);
		db_close(&c->db);
	}
	if (diag)
		fprintf(diag, "%s\n", r.detail);
	if (json)
		return probe_report("clustercheck", true, r.answer == SYNCED, r.reason, r.detail, NULL, started);
	n = format_response(r.answer, out, sizeof(out));
	if (fwrite(out, 1, (size_t)n, stdout) != (size_t)n || fflush(stdout) != 0)
		return 1;
	finish_socket();
	return r.answer == SYNCED ? 0 : 1;
}

/* --listen: the result for one request, sharing a check already in flight. */
static void shared_check(struct checker *c, const deadline_t *dl, struct result *r)
{
	unsigned long gen;

	if (disabled(c, r))
		return;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		if (c->have && c->cache_ms > 0 && deadline_now_us() - c->last_at <= c->cache_ms * 1000) {
			*r = c->last;
			pthread_mutex_unlock(&c->mu);
			return;
		}
		if (!c->in_flight)
			break;
		gen = c->gen;
		while (c->in_flight && c->gen == gen) {
			struct timespec ts = { dl->at / 1000000, (dl->at % 1000000) * 1000 };

			if (pthread_cond_timedwait(&c->cv, &c->mu, &ts) == ETIMEDOUT && c->gen == gen) {
				pthread_mutex_unlock(&c->mu);
				r->answer = NOT_SYNCED;
				r->reason = "timeout";
				sk_fmt(r->detail, sizeof(r->detail),
				       "not synced: timeout after %.1fs waiting for the check in progress (--timeout)",
				       (double)c->timeout_ms / 1000.0);
				return;
			}
		}
		if (c->gen != gen) {
			*r = c->last; /* a check that started after this request arrived: fresh enough */
			pthread_mutex_unlock(&c->mu);
			return;
		}
	}
	c->in_flight = true;
	pthread_mutex_unlock(&c->mu);

	check_once(c, &c->db, dl, r);

	pthread_mutex_lock(&c->mu);
	c->last = *r;
	c->last_at = deadline_now_us();
	c->have = true;
	c->gen++;
	c->in_flight = false;
	if (r->answer != c->logged) {
		log_info("node %s -> %s (%s)", answer_names[c->logged], answer_names[r->answer], r->detail);
		c->logged = r->answer;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

static void on_http(void *ctx, const char *method, const char *path, struct http_reply *rep)
{
	struct checker *c = ctx;
	deadline_t dl = deadline_in_ms(c->timeout_ms);
	struct result r;

	(void)method;
	(void)path;
	shared_check(c, &dl, &r);
	rep->status = answers[r.answer].status;
	rep->content_type = "text/plain";
	rep->close = true;
	rep->len = strlen(answers[r.answer].body);
	memcpy(rep->body, answers[r.answer].body, rep->len);
}

static int serve(struct checker *c, const char *spec, unsigned idle_s, unsigned max_conns)
{
	struct http_server *srv;
	sigset_t set;
	char err[256];
	int sig = 0;

	/* Block the stop signals in every thread; the main thread waits for them. */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	db_library_init();
	srv = http_start(spec, on_http, c, idle_s, max_conns, err, sizeof(err));
	if (!srv) {
		log_error("%s (--listen)", err);
		return 2;
	}
	log_info("listening on %s (port %u), timeout %.1fs, cache %ldms", spec, http_port(srv),
		 (double)c->timeout_ms / 1000.0, c->cache_ms);
	sigwait(&set, &sig);
	log_info("stopping on signal %d", sig);
	http_stop(srv);
	db_close(&c->db);
	return 0;
}

/* The classic positional form, as in xinetd server_args: USER PASS DONOR LOGFILE READONLY DEFAULTS_FILE. */
static int apply_positional(struct opts *o, FILE **diag_warning, char *err, size_t errlen)
{
	static const char *const names[] = {
		"user", "password", "available-when-donor", "log-file", "available-when-readonly", "defaults-extra-file"
	};
	char source[32];

	if (o->nargs > (int)SK_ARRAY_LEN(names))
		return sk_err(err, errlen, "too many arguments: at most %zu (see --help)", SK_ARRAY_LEN(names));
	for (int i = 0; i < o->nargs; i++) {
		if (!o->args[i][0] && i != 1)
			continue; /* the scripts' ${N:-default}: an empty argument keeps the default */
		snprintf(source, sizeof(source), "argument %d", i + 1);
		if (opt_set(o, names[i], o->args[i], source, err, errlen) < 0)
			return -1;
	}
	*diag_warning = o->nargs >= 2 && o->args[1][0] ? stderr : NULL;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.prog = "clustercheck",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]... [USER [PASS [AVAILABLE_WHEN_DONOR [LOG_FILE [AVAILABLE_WHEN_READONLY "
			    "[DEFAULTS_FILE]]]]]]",
		.summary =
			"Answer whether this Galera node should take traffic, as the classic clustercheck does:\n"
			"an HTTP 200/503 response on stdout (xinetd, systemd Accept=yes) and exit 0/1, or serve HTTP\n"
			"itself with --listen. The positional form is accepted for existing xinetd server_args.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 6,
	};
	static struct checker c = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	int64_t started = deadline_now_us();
	FILE *diag = NULL, *warn_to = NULL;
	char err[512];
	enum log_level level;
	enum log_format fmt;
	int rc;

	log_setup(argv[0], LOG_TEXT, LOG_INFO, stderr);
	switch (opts_parse(&o, argc, argv, err, sizeof(err))) {
	case OPTS_EXIT: opts_free(&o); return 0;
	case OPTS_ERROR:
		fprintf(stderr, "clustercheck: %s\n", err);
		opts_free(&o);
		return 2;
	case OPTS_OK: break;
	}
	if (apply_positional(&o, &warn_to, err, sizeof(err)) < 0 || probe_conn_setup(&o, &c.pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "clustercheck: %s\n", err);
		opts_free(&o);
		return 2;
	}
	if (strcmp(opt_str(&o, "log-file"), "/dev/null") != 0) {
		diag = fopen(opt_str(&o, "log-file"), "ae");
		if (!diag)
			fprintf(stderr, "clustercheck: warning: cannot open log file %s: %s\n", opt_str(&o, "log-file"),
				strerror(errno));
	}
	if (warn_to) {
		const char *w = "clustercheck: warning: a password on the command line is visible to every user "
				"(ps, /proc); use --password-file, MYSQL_PASSWORD or a defaults file";

		/* Never onto stderr when it may be the client's socket: only to a terminal or the log file. */
		if (isatty(STDERR_FILENO) || opt_str(&o, "listen"))
			fprintf(stderr, "%s\n", w);
		if (diag)
			fprintf(diag, "%s\n", w);
	}

	c.rules.need_primary = true;
	c.rules.need_synced = true;
	c.rules.donor_ok = opt_flag(&o, "available-when-donor");
	c.rules.readonly_ok = opt_flag(&o, "available-when-readonly");
	c.timeout_ms = (long)(opt_num(&o, "timeout") * 1000);
	c.cache_ms = opt_int(&o, "cache-ms");
	c.disabled_file = opt_str(&o, "disabled-file");
	c.logged = SYNCED;

	if (opt_str(&o, "listen")) {
		if (!log_level_parse(opt_str(&o, "log-level"), &level) ||
		    !log_format_parse(opt_str(&o, "log-format"), &fmt))
			level = LOG_INFO, fmt = LOG_TEXT;
		log_setup(argv[0], fmt, level, stderr);
		rc = serve(&c, opt_str(&o, "listen"), (unsigned)opt_int(&o, "idle-timeout"),
			   (unsigned)opt_int(&o, "max-connections"));
	} else {
		rc = one_shot(&c, opt_flag(&o, "json"), diag, started);
	}
	if (diag)
		fclose(diag);
	probe_conn_free(&c.pc);
	opts_free(&o);
	return rc;
}
