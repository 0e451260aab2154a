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

#include "clustercheck.h"
#include "consul.h"
#include "galera.h"
#include "healthcheck.h"
#include "http.h"
#include "log.h"
#include "probe.h"

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
	/* --listen's /liveness, /readiness and /healthcheck: their settings. */
	const char *datadir, *recovery_file, *state_file;
	struct galera_rules readiness;
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

/* Take the persistent connection for a request that is not the classic check (they share it with
 * the classic one). False when `dl` passed first. */
static bool conn_acquire(struct checker *c, const deadline_t *dl)
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

static void conn_release(struct checker *c)
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

/* /liveness and /readiness: liveness-check's and readiness-check's rules on the shared connection. */
static void answer_probe(struct checker *c, bool liveness, const deadline_t *dl, struct http_reply *rep)
{
	struct statusmap status = { 0 }, vars = { 0 };
	struct probe_verdict v;
	struct db_err e = { .reason = DB_TIMEOUT };
	bool need_vars = !liveness && galera_rules_need_vars(&c->readiness);
	bool fetched = false;

	if (liveness ? probe_liveness_bypass(c->recovery_file, c->datadir, &v)
		     : probe_readiness_bypass(c->recovery_file, c->datadir, &v)) {
		reply_text(rep, true, v.msg);
		return;
	}
	if (!conn_acquire(c, dl)) {
		sk_fmt(e.msg, sizeof(e.msg), "timed out waiting for the check in progress");
	} else {
		fetched = (c->db.connected || probe_galera_connect(&c->db, &c->pc, dl, &e) == 0) &&
			  probe_galera_read(&c->db, dl, &status, need_vars ? &vars : NULL, &e) == 0;
		if (!fetched)
			db_close(&c->db);
		conn_release(c);
	}
	if (liveness)
		probe_liveness_judge(fetched, &status, &e, c->state_file, &c->pc, c->timeout_ms, "--timeout", &v);
	else
		probe_readiness_judge(fetched, &status, need_vars ? &vars : NULL, &e, &c->readiness, &c->pc,
				      c->timeout_ms, "--timeout", &v);
	reply_text(rep, v.up, v.msg);
	statusmap_free(&status);
	statusmap_free(&vars);
}

/* /healthcheck: healthcheck.sh's tests on the shared connection (it is the "socket" of every test;
 * the connect test's fallback sees why it failed). */
struct hc_http {
	struct checker *c;
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

static int hh_value(void *ctx, const struct hc_defaults *d, const char *sql, char *val, size_t vlen, bool *found,
		    struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	*found = false;
	if (hh_connect(h, e) < 0)
		return -1;
	if (db_query_value(&h->c->db, sql, h->dl, val, vlen, found, e) < 0)
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

static int hh_rows(void *ctx, const struct hc_defaults *d, const char *sql, struct statusmap *rows, size_t max,
		   size_t *nrows, struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	*nrows = 0;
	if (hh_connect(h, e) < 0)
		return -1;
	if (db_query_rows(&h->c->db, sql, h->dl, rows, max, nrows, e) < 0)
		return hh_query_failed(h, e);
	return 0;
}

static int hh_fallback(void *ctx, const struct hc_defaults *d, const char *sql, char *val, size_t vlen, bool *found,
		       struct db_err *e)
{
	struct hc_http *h = ctx;

	(void)d;
	(void)sql;
	(void)val;
	(void)vlen;
	*found = false;
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
	return hc_upgrade_locked(path, why, whylen);
}

/* The query "connect&replication_io=1&replication" as healthcheck's argv; options that pick files
 * or users are refused over HTTP. Returns the argc, or -1 with `bad` naming the argument. */
static int query_argv(char *query, char **argv, int max, char *store, size_t storelen, char *bad, size_t badlen)
{
	static const char *const refused[] = { "su",
					       "su-mysql",
					       "datadir",
					       "no-defaults",
					       "defaults-file",
					       "defaults-extra-file",
					       "defaults-group-suffix",
					       "timeout",
					       "json" };
	char *save = NULL, *tok;
	size_t used = 0;
	int argc = 0;

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

static void answer_healthcheck(struct checker *c, char *query, const deadline_t *dl, struct http_reply *rep)
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
	char *argv[64], store[sizeof(rep->query) + 128], bad[200], lines[2048] = "", line[600] = "healthy:";
	struct hc_run run;
	FILE *err;
	int argc, rc;

	argc = query_argv(query, argv, (int)SK_ARRAY_LEN(argv), store, sizeof(store), bad, sizeof(bad));
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
	hc_run_init(&run, c->datadir, err);
	rc = hc_run_args(&run, argc, argv, &io);
	conn_release(c);
	if (err)
		fclose(err);
	if (rc == 0) {
		for (size_t i = 0; i < run.nresults; i++)
			sk_fmt(line + strlen(line), sizeof(line) - strlen(line), "%s %s", i ? "," : "",
			       run.results[i].test);
	} else {
		/* The last line says why (the earlier ones are the script's notices). */
		char *end = lines + strlen(lines), *start;

		while (end > lines && end[-1] == '\n')
			*--end = '\0';
		start = strrchr(lines, '\n');
		sk_strlcpy(line, start ? start + 1 : lines, sizeof(line));
	}
	reply_text(rep, rc == 0, line);
	hc_run_free(&run);
}

static void answer_classic(struct checker *c, const deadline_t *dl, struct http_reply *rep)
{
	struct result r;

	shared_check(c, dl, &r);
	rep->status = answers[r.answer].status;
	rep->content_type = "text/plain";
	rep->close = true;
	rep->len = strlen(answers[r.answer].body);
	memcpy(rep->body, answers[r.answer].body, rep->len);
}

static void on_http(void *ctx, const char *method, const char *path, struct http_reply *rep)
{
	struct checker *c = ctx;
	deadline_t dl = deadline_in_ms(c->timeout_ms);

	(void)method;
	if (strcmp(path, "/") == 0 || strcmp(path, "*") == 0)
		answer_classic(c, &dl, rep);
	else if (strcmp(path, "/liveness") == 0)
		answer_probe(c, true, &dl, rep);
	else if (strcmp(path, "/readiness") == 0)
		answer_probe(c, false, &dl, rep);
	else if (strcmp(path, "/healthcheck") == 0)
		answer_healthcheck(c, rep->query, &dl, rep);
	else {
		reply_text(rep, false, "not found: the paths are /, /liveness, /readiness and /healthcheck?TESTS");
		rep->status = 404;
	}
}

static int serve(struct checker *c, const char *spec, unsigned idle_s, unsigned max_conns)
{
	struct http_server *srv;
	sigset_t set;
	char err[256];
	int sig = 0, abort_pipe[2];

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
	srv = http_start(spec, HTTP_HANDLERS_BLOCK, on_http, c, idle_s, max_conns, err, sizeof(err));
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

/* -- --register: the node's key in Consul KV ------------------------------------------------------- */

enum key_state { KEY_UNKNOWN, KEY_PRESENT, KEY_ABSENT };

struct registrar {
	struct checker *c;
	struct consul *consul;
	char key[1024]; /* <consul-prefix>/<advertise> */
	char advertise[300];
	char session_name[400];
	char session[CONSUL_SESSION_ID_MAX]; /* "" when we hold none */
	long ttl_s;
	long interval_ms, check_ms, consul_ms;
	const char *state_file; /* --once only */
	bool once;
	int sigfd; /* readable once a stop signal is pending; -1 with --once */
	enum key_state state; /* what we know of the key */
	int node_logged; /* last logged answer, -1 before the first round */
	bool consul_failing;
	unsigned failures;
};

/* A key segment we write: letters, digits, '.', '_', '-' (and ':' and brackets for HOST:PORT). */
static bool segment_ok(const char *s, size_t n, const char *extra)
{
	if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') && !(ch >= '0' && ch <= '9') &&
		    !strchr("._-", ch) && !(extra && ch && strchr(extra, ch)))
			return false;
	}
	return true;
}

/* --advertise HOST:PORT (HOST a name, IPv4 or [IPv6]) and the key built from it. */
static int register_names(struct registrar *g, const struct opts *o, char *err, size_t errlen)
{
	const char *prefix = opt_str(o, "consul-prefix"), *adv = opt_str(o, "advertise"), *colon, *seg;
	size_t plen;
	long port;

	if (!prefix || !*prefix)
		return sk_err(err, errlen, "--register needs --consul-prefix (e.g. mysql/replica/<cluster>/<region>)");
	plen = strlen(prefix);
	while (plen && prefix[plen - 1] == '/')
		plen--;
	for (seg = prefix; seg < prefix + plen;) {
		size_t n = strcspn(seg, "/");

		if (n > (size_t)(prefix + plen - seg))
			n = (size_t)(prefix + plen - seg);
		if (!segment_ok(seg, n, NULL))
			return sk_err(err, errlen,
				      "consul-prefix '%.200s': segments are letters, digits, '.', '_' or '-' "
				      "(no empty, '.' or '..' segment, no leading '/')",
				      prefix);
		seg += n + 1;
	}
	if (plen == 0)
		return sk_err(err, errlen, "consul-prefix '%.200s' is empty", prefix);
	if (adv) {
		if (!sk_strlcpy(g->advertise, adv, sizeof(g->advertise)))
			return sk_err(err, errlen, "advertise: too long");
	} else {
		const struct probe_conn *pc = &g->c->pc;
		char ip[64];

		if (!pc->host || !*pc->host || strcmp(pc->host, "localhost") == 0) {
			probe_node_ip(ip, sizeof(ip));
			sk_fmt(g->advertise, sizeof(g->advertise), strchr(ip, ':') ? "[%s]:%u" : "%s:%u", ip,
			       pc->t.port ? pc->t.port : 3306);
		} else {
			sk_fmt(g->advertise, sizeof(g->advertise), strchr(pc->host, ':') ? "[%s]:%u" : "%s:%u",
			       pc->host, pc->t.port ? pc->t.port : 3306);
		}
	}
	colon = strrchr(g->advertise, ':');
	if (!colon || !sk_parse_long(colon + 1, 1, 65535, &port) ||
	    !segment_ok(g->advertise, strlen(g->advertise), g->advertise[0] == '[' ? ":[]" : ":") ||
	    (g->advertise[0] == '[' && colon[-1] != ']') ||
	    (g->advertise[0] != '[' && strchr(g->advertise, ':') != colon))
		return sk_err(
			err, errlen,
			"advertise '%.200s': expected HOST:PORT (a name, an IPv4 address or [IPv6]) (--advertise)",
			g->advertise);
	if (!sk_fmt(g->key, sizeof(g->key), "%.*s/%s", (int)plen, prefix, g->advertise))
		return sk_err(err, errlen, "consul-prefix: too long");
	sk_fmt(g->session_name, sizeof(g->session_name), "clustercheck %s", g->advertise);
	return 0;
}

/* The Consul client from CONSUL_* variables, overridden by the options. */
static struct consul *register_consul(const struct opts *o, char *err, size_t errlen)
{
	struct consul_config cfg;
	struct consul *c = NULL;

	if (consul_config_from_opts(&cfg, o, err, errlen) == 0)
		c = consul_new(&cfg, err, errlen);
	consul_config_free(&cfg);
	return c;
}

static bool session_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONSUL_SESSION_ID_MAX)
		return false;
	return strspn(s, "0123456789abcdefABCDEF-") == n;
}

/* The session ID a previous --once run left, or "" (a missing file is normal; garbage is ignored). */
static void state_load(struct registrar *g)
{
	char *text = NULL, why[300];

	g->session[0] = '\0';
	if (sk_read_file(g->state_file, 256, &text, NULL, why, sizeof(why)) < 0) {
		if (access(g->state_file, F_OK) == 0)
			log_warn("state file %s: ignored (%s)", g->state_file, why);
		return;
	}
	sk_trim(text);
	if (session_id_valid(text))
		sk_strlcpy(g->session, text, sizeof(g->session));
	else if (*text)
		log_warn("state file %s: not a session ID, ignored (--state-file)", g->state_file);
	free(text);
}

/* Write the session ID atomically (a temporary file, fsync, rename), mode 0600. */
static int state_save(const struct registrar *g, char *err, size_t errlen)
{
	char tmp[4200], line[CONSUL_SESSION_ID_MAX + 1];
	int fd, n = snprintf(line, sizeof(line), "%s\n", g->session);

	if (!sk_fmt(tmp, sizeof(tmp), "%s.%ld.tmp", g->state_file, (long)getpid()))
		return sk_err(err, errlen, "state file %s: path too long (--state-file)", g->state_file);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sk_err(err, errlen, "state file %s: %s (--state-file)", tmp, strerror(errno));
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		int e = errno;

		close(fd);
		unlink(tmp);
		return sk_err(err, errlen, "state file %s: %s (--state-file)", tmp, strerror(e));
	}
	close(fd);
	if (rename(tmp, g->state_file) < 0) {
		int e = errno;

		unlink(tmp);
		return sk_err(err, errlen, "state file %s: %s (--state-file)", g->state_file, strerror(e));
	}
	return 0;
}

/* Make sure we hold a live session: renew the one we have, or create one. */
static int session_ensure(struct registrar *g, const deadline_t *dl, char *err, size_t errlen)
{
	bool gone = false;

	if (g->session[0]) {
		if (consul_session_renew(g->consul, g->session, dl, &gone, err, errlen) < 0)
			return -1;
		if (!gone)
			return 0;
		log_info("session %s is gone (expired or destroyed): creating a new one", g->session);
		g->session[0] = '\0';
	}
	/* No serfHealth check: a restart of the local Consul agent must not delete every node's key at
	 * once; a dead node's key goes when its TTL lapses. */
	if (consul_session_create(g->consul, g->session_name, g->ttl_s, "delete", "0s", false, dl, g->session,
				  sizeof(g->session), err, errlen) < 0)
		return -1;
	log_debug("session %s created (TTL %lds, behavior delete)", g->session, g->ttl_s);
	if (g->once && state_save(g, err, errlen) < 0) {
		char why[256];

		/* Without the file the next run could not reuse it: do not leave it behind. */
		if (consul_session_destroy(g->consul, g->session, dl, why, sizeof(why)) < 0)
			log_warn("%s", why);
		g->session[0] = '\0';
		return -1;
	}
	return 0;
}

/* One Consul round: while `up`, the key exists, holds the advertise address and is locked by our
 * session; otherwise it does not exist. Returns 0 when Consul now matches, -1 with err set. */
static int consul_round(struct registrar *g, bool up, const char *why_down, const deadline_t *dl, char *err,
			size_t errlen)
{
	struct consul_kv_list l = { 0 };
	struct consul_meta meta;
	const struct consul_kv *e = NULL;
	size_t alen = strlen(g->advertise);
	int ret = -1;

	if (up && session_ensure(g, dl, err, errlen) < 0)
		return -1;
	if (consul_kv_list(g->consul, g->key, 0, 0, CONSUL_DEFAULT, dl, &l, &meta, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.items[i].key, g->key) == 0)
			e = &l.items[i];
	if (up) {
		bool done;

		if (e && e->session && strcmp(e->session, g->session) == 0 && e->len == alen &&
		    memcmp(e->value, g->advertise, alen) == 0) {
			if (g->state != KEY_PRESENT)
				log_info("registered %s = %s (session %s)", g->key, g->advertise, g->session);
			g->state = KEY_PRESENT;
			ret = 0;
			goto out;
		}
		if (consul_kv_put(g->consul, g->key, g->advertise, alen, g->session, dl, &done, err, errlen) < 0)
			goto out;
		if (!done) {
			sk_err(err, errlen,
			       "%s is locked by session %s (a previous run?): it goes when that session ends, "
			       "within 2 x its TTL",
			       g->key, e && e->session ? e->session : "(unknown)");
			goto out;
		}
		log_info("registered %s = %s (session %s)", g->key, g->advertise, g->session);
		g->state = KEY_PRESENT;
	} else {
		if (e) {
			if (consul_kv_delete(g->consul, g->key, false, dl, err, errlen) < 0)
				goto out;
			log_info("deregistered %s (%s)", g->key, why_down);
		} else if (g->state == KEY_PRESENT) {
			log_info("deregistered %s (%s; the key was already gone)", g->key, why_down);
		}
		g->state = KEY_ABSENT;
	}
	ret = 0;
out:
	consul_kv_list_free(&l);
	return ret;
}

static void log_node(struct registrar *g, const struct result *r)
{
	if (g->node_logged == (int)r->answer)
		return;
	if (g->node_logged < 0)
		log_info("node %s (%s)", answer_names[r->answer], r->detail);
	else
		log_info("node %s -> %s (%s)", answer_names[g->node_logged], answer_names[r->answer], r->detail);
	g->node_logged = (int)r->answer;
}

/* One check, then Consul. Returns 0 when Consul matches the node, -1 otherwise (logged once per
 * change of state). */
static int register_round(struct registrar *g, const struct result *r)
{
	deadline_t dl = deadline_in_ms(g->consul_ms);
	char err[600];

	log_node(g, r);
	if (consul_round(g, r->answer == SYNCED, r->detail, &dl, err, sizeof(err)) < 0) {
		struct pollfd p = { .fd = g->sigfd, .events = POLLIN };

		if (g->sigfd >= 0 && poll(&p, 1, 0) > 0)
			return -1; /* cancelled by a stop signal: nothing to report */
		g->failures++;
		if (!g->consul_failing || g->once)
			log_warn("consul %s: %s%s", consul_url(g->consul), err,
				 g->once ? "" : " (retrying with backoff; quiet until it recovers)");
		else
			log_debug("consul %s: %s", consul_url(g->consul), err);
		g->consul_failing = true;
		return -1;
	}
	if (g->consul_failing)
		log_info("consul %s: working again", consul_url(g->consul));
	g->consul_failing = false;
	g->failures = 0;
	return 0;
}

/* Time to the next round: the interval, or after failures a capped exponential backoff with jitter
 * (from min(interval, 1 s) up to half the session TTL, so a flapping Consul never lets it lapse). */
static long next_delay_ms(const struct registrar *g)
{
	long base = g->interval_ms < 1000 ? g->interval_ms : 1000, cap = g->ttl_s * 500, d = base;

	if (!g->failures)
		return g->interval_ms;
	if (cap < g->interval_ms)
		cap = g->interval_ms;
	for (unsigned i = 1; i < g->failures && d < cap; i++)
		d *= 2;
	if (d > cap)
		d = cap;
	return d - d / 5 + (long)((unsigned long)random() % (unsigned long)(d / 5 + 1));
}

/* The Galera check runs on its own thread, so a stop signal is answered at once even while
 * mysqld hangs (the check itself is bounded by its deadline). */
struct worker {
	struct checker *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool want, busy;
	deadline_t dl;
	struct result r;
	int done[2]; /* a byte after each check */
};

static void *check_worker(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		struct result r;
		deadline_t dl;

		pthread_mutex_lock(&w->mu);
		while (!w->want)
			pthread_cond_wait(&w->cv, &w->mu);
		w->want = false;
		w->busy = true;
		dl = w->dl;
		pthread_mutex_unlock(&w->mu);
		if (!disabled(w->c, &r))
			check_once(w->c, &w->c->db, &dl, &r);
		pthread_mutex_lock(&w->mu);
		w->r = r;
		w->busy = false;
		pthread_mutex_unlock(&w->mu);
		if (write(w->done[1], "x", 1) < 0) {
			/* the pipe never fills: the main thread drains it */
		}
	}
	return NULL;
}

/* Run one check on the worker. Returns 1 when a stop signal arrived first, else 0 with *r. */
static int worker_check(struct worker *w, int sigfd, long check_ms, struct result *r)
{
	deadline_t give_up = deadline_in_ms(check_ms + 1000);
	char sink[64];

	pthread_mutex_lock(&w->mu);
	if (!w->busy) {
		w->dl = deadline_in_ms(check_ms);
		w->want = true;
		pthread_cond_signal(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	for (;;) {
		struct pollfd p[2] = { { .fd = sigfd, .events = POLLIN }, { .fd = w->done[0], .events = POLLIN } };

		if (poll(p, 2, deadline_left_ms(&give_up)) < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN)
			return 1;
		if (p[1].revents & POLLIN) {
			while (read(w->done[0], sink, sizeof(sink)) > 0)
				;
			pthread_mutex_lock(&w->mu);
			if (!w->busy && !w->want) {
				*r = w->r;
				pthread_mutex_unlock(&w->mu);
				return 0;
			}
			pthread_mutex_unlock(&w->mu);
		}
		if (deadline_expired(&give_up))
			break;
	}
	r->answer = NOT_SYNCED;
	r->reason = "timeout";
	sk_fmt(r->detail, sizeof(r->detail), "not synced: the check did not return within %ld ms", check_ms + 1000);
	return 0;
}

/* SIGTERM/SIGINT: delete the key and destroy the session, within a second. */
static void register_stop(struct registrar *g, int sig)
{
	deadline_t dl = deadline_in_ms(800);
	char err[600];

	log_info("stopping on signal %d", sig);
	consul_set_cancel_fd(g->consul, -1);
	if (!g->session[0])
		return;
	if (g->state == KEY_PRESENT) {
		if (consul_kv_delete(g->consul, g->key, false, &dl, err, sizeof(err)) < 0)
			log_warn("consul %s: %s (the key goes with the session)", consul_url(g->consul), err);
		else
			log_info("deregistered %s (stopping)", g->key);
	}
	if (consul_session_destroy(g->consul, g->session, &dl, err, sizeof(err)) < 0)
		log_warn("consul %s: %s (the session expires within 2 x %lds)", consul_url(g->consul), err, g->ttl_s);
}

static int register_loop(struct registrar *g, bool *abandoned)
{
	struct worker w = { .c = g->c, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct signalfd_siginfo si;
	pthread_t thread;
	sigset_t set;
	int sigfd;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sigfd < 0 || pipe2(w.done, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_error("cannot set up signals: %s", strerror(errno));
		return 1;
	}
	db_library_init();
	if (pthread_create(&thread, NULL, check_worker, &w) != 0) {
		log_error("cannot start the check thread");
		return 1;
	}
	pthread_detach(thread);
	srandom((unsigned)(deadline_now_us() ^ getpid()));
	g->sigfd = sigfd;
	consul_set_cancel_fd(g->consul, sigfd);
	log_info("registering %s in consul %s every %.1fs while synced (session TTL %lds)", g->key,
		 consul_url(g->consul), (double)g->interval_ms / 1000.0, g->ttl_s);
	for (;;) {
		struct pollfd p = { .fd = sigfd, .events = POLLIN };
		struct result r;
		deadline_t next;

		if (worker_check(&w, sigfd, g->check_ms, &r))
			break;
		register_round(g, &r); /* failures are logged and retried */
		next = deadline_in_ms(next_delay_ms(g));
		p.revents = 0;
		while (!deadline_expired(&next)) {
			int n = poll(&p, 1, deadline_left_ms(&next));

			if (n > 0 || (n < 0 && errno != EINTR))
				break;
		}
		if (p.revents & POLLIN)
			break;
	}
	if (read(sigfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		si.ssi_signo = 0;
	register_stop(g, (int)si.ssi_signo);
	pthread_mutex_lock(&w.mu);
	*abandoned = w.busy || w.want; /* the check thread still uses the connection settings */
	pthread_mutex_unlock(&w.mu);
	if (!*abandoned)
		db_close(&g->c->db);
	close(sigfd);
	return 0;
}

/* --register: check and update Consul every --interval, or once (--once). */
static int run_register(struct checker *c, const struct opts *o, bool *abandoned)
{
	struct registrar g = { .c = c, .sigfd = -1, .node_logged = -1, .state = KEY_UNKNOWN };
	char err[600];
	int rc;

	g.once = opt_flag(o, "once");
	g.ttl_s = opt_int(o, "session-ttl");
	g.interval_ms = (long)(opt_num(o, "interval") * 1000);
	g.check_ms = c->timeout_ms < g.interval_ms ? c->timeout_ms : g.interval_ms;
	g.consul_ms = c->timeout_ms;
	g.state_file = opt_str(o, "state-file");
	if (register_names(&g, o, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 2;
	}
	if (!g.once && g.interval_ms * 2 > g.ttl_s * 1000) {
		log_error("--interval %.1fs is more than half of --session-ttl %lds: the session would lapse between "
			  "rounds",
			  (double)g.interval_ms / 1000.0, g.ttl_s);
		return 2;
	}
	if (g.once && (!g.state_file || !*g.state_file)) {
		log_error("--once needs --state-file to keep its session between runs");
		return 2;
	}
	g.consul = register_consul(o, err, sizeof(err));
	if (!g.consul) {
		log_error("%s", err);
		return 2;
	}
	if (g.once) {
		struct result r;

		state_load(&g);
		g.check_ms = c->timeout_ms;
		if (!disabled(c, &r)) {
			deadline_t dl = deadline_in_ms(g.check_ms);

			check_once(c, &c->db, &dl, &r);
			db_close(&c->db);
		}
		rc = register_round(&g, &r) < 0 ? 1 : 0;
	} else {
		rc = register_loop(&g, abandoned);
	}
	consul_free(g.consul);
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o;
	static struct checker c = { .mu = PTHREAD_MUTEX_INITIALIZER };
	pthread_condattr_t ca;
	int64_t started = deadline_now_us();
	FILE *diag = NULL;
	bool password_on_argv = false;
	char err[512];
	enum log_level level;
	enum log_format fmt;
	int rc;

	/* Waiters time out on a CLOCK_MONOTONIC deadline (deadline_t), so the condition variable
	 * must use that clock (the default, CLOCK_REALTIME, made every wait expire at once). */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c.cv, &ca);
	pthread_condattr_destroy(&ca);
	log_setup(argv[0], LOG_TEXT, LOG_INFO, stderr);
	clustercheck_opts_init(&o);
	if ((rc = opts_parse_main(&o, argc, argv)) >= 0)
		return rc;
	if (clustercheck_apply_positional(&o, &password_on_argv, err, sizeof(err)) < 0 ||
	    probe_conn_setup(&o, &c.pc, err, sizeof(err)) < 0) {
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
	if (password_on_argv) {
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
	c.datadir = opt_str(&o, "datadir");
	c.recovery_file = opt_str(&o, "recovery-file");
	c.state_file = opt_str(&o, "state-file");
	c.readiness = (struct galera_rules){
		.need_primary = true,
		.need_synced = true,
		.donor_ok = opt_flag(&o, "readiness-available-when-donor"),
		.readonly_ok = true,
	};

	if (opt_flag(&o, "once") && !opt_flag(&o, "register")) {
		fprintf(stderr, "clustercheck: --once goes with --register\n");
		rc = 2;
	} else if (opt_flag(&o, "register") && opt_str(&o, "listen")) {
		fprintf(stderr, "clustercheck: --register and --listen are separate modes: run two processes\n");
		rc = 2;
	} else if (opt_flag(&o, "register")) {
		bool abandoned = false;

		if (!log_level_parse(opt_str(&o, "log-level"), &level) ||
		    !log_format_parse(opt_str(&o, "log-format"), &fmt))
			level = LOG_INFO, fmt = LOG_TEXT;
		log_setup(argv[0], fmt, level, stderr);
		rc = run_register(&c, &o, &abandoned);
		if (abandoned) {
			/* A check hangs on the worker thread (bounded by its deadline): leave its memory alone. */
			if (diag)
				fclose(diag);
			return rc;
		}
	} else if (opt_str(&o, "listen")) {
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
