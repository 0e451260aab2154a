/* register.c: clustercheck --register: keep this node's key in Consul KV, under a session, while
 * the node is healthy (the modern clustercheckcron), on a period or once (--once, cron). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <unistd.h>

#include "register.h"
#include "consul.h"
#include "consul_login.h"
#include "log.h"
#include "proc.h"
#include "runfile.h"

enum key_state { KEY_UNKNOWN, KEY_PRESENT, KEY_ABSENT };

struct registrar {
	struct cc_checker *c;
	const struct register_settings *r;
	struct consul *consul;
	struct consul_login *login; /* --consul-login-method: the token the client carries; NULL: none */
	char key[1024]; /* <consul-prefix>/<advertise> */
	char advertise[300];
	char session_name[400];
	char session[CONSUL_SESSION_ID_MAX]; /* "" when we hold none */
	long ttl_s;
	long interval_ms, check_ms, consul_ms;
	char session_file[4200]; /* --once only: --session-file, or its default */
	bool once;
	int sigfd; /* readable once a stop signal is pending; -1 with --once */
	enum key_state state; /* what we know of the key */
	int node_logged; /* last logged answer, -1 before the first round */
	bool consul_failing;
	unsigned failures;
	bool agent_logged; /* what answers at --consul-addr has been said */
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

/* The length of --consul-prefix without trailing slashes, or -1 with err when a segment is not one
 * we write. */
static long prefix_length(const char *prefix, char *err, size_t errlen)
{
	size_t plen;

	if (!prefix || !*prefix)
		return sk_err(err, errlen, "--register needs --consul-prefix (e.g. mysql/replica/<cluster>/<region>)");
	plen = strlen(prefix);
	while (plen && prefix[plen - 1] == '/')
		plen--;
	for (const char *seg = prefix; seg < prefix + plen;) {
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
	return (long)plen;
}

/* --advertise, or the checked host:port (the node's IP for localhost or a socket). */
static int advertise_pick(struct registrar *g, char *err, size_t errlen)
{
	const struct probe_conn *pc = &g->c->pc;
	char ip[64];

	if (g->r->advertise) {
		if (!sk_strlcpy(g->advertise, g->r->advertise, sizeof(g->advertise)))
			return sk_err(err, errlen, "advertise: too long");
	} else if (!pc->host || !*pc->host || strcmp(pc->host, "localhost") == 0) {
		probe_node_ip(ip, sizeof(ip));
		sk_fmt(g->advertise, sizeof(g->advertise), strchr(ip, ':') ? "[%s]:%u" : "%s:%u", ip,
		       pc->t.port ? pc->t.port : 3306);
	} else {
		sk_fmt(g->advertise, sizeof(g->advertise), strchr(pc->host, ':') ? "[%s]:%u" : "%s:%u", pc->host,
		       pc->t.port ? pc->t.port : 3306);
	}
	return 0;
}

/* --advertise HOST:PORT (HOST a name, IPv4 or [IPv6]) and the key built from it. */
static int register_names(struct registrar *g, char *err, size_t errlen)
{
	const char *prefix = g->r->prefix, *colon;
	bool bare = g->r->key_without_port;
	long plen = prefix_length(prefix, err, errlen), port;

	if (plen < 0 || advertise_pick(g, err, errlen) < 0)
		return -1;
	colon = strrchr(g->advertise, ':');
	if (!colon || !sk_parse_long(colon + 1, 1, 65535, &port) ||
	    !segment_ok(g->advertise, strlen(g->advertise), g->advertise[0] == '[' ? ":[]" : ":") ||
	    (g->advertise[0] == '[' && colon[-1] != ']') ||
	    (g->advertise[0] != '[' && strchr(g->advertise, ':') != colon))
		return sk_err(
			err, errlen,
			"advertise '%.200s': expected HOST:PORT (a name, an IPv4 address or [IPv6]) (--advertise)",
			g->advertise);
	/* --key-without-port: "<prefix>/<host>" = "host:port" (no ':' in the key). */
	if (!sk_fmt(g->key, sizeof(g->key), "%.*s/%.*s", (int)plen, prefix,
		    bare ? (int)(colon - g->advertise) - (g->advertise[0] == '[' ? 1 : 0) - (g->advertise[0] == '[')
			 : (int)strlen(g->advertise),
		    g->advertise + (bare && g->advertise[0] == '[')))
		return sk_err(err, errlen, "consul-prefix: too long");
	sk_fmt(g->session_name, sizeof(g->session_name), "clustercheck %s", g->advertise);
	return 0;
}

void register_settings_load(const struct opts *o, struct register_settings *r)
{
	r->interval_ms = (long)(opt_num(o, "interval") * 1000);
	/* mysqld's state file, from the command line: the session file's name until it was renamed */
	r->state_file_flag = strncmp(opt_source(o, "state-file"), "--", 2) == 0 ? opt_str(o, "state-file") : NULL;
	if (!consul_agent_mode_parse(opt_str(o, "consul-agent"), &r->agent))
		r->agent = CONSUL_AGENT_AUTO; /* opts_parse refuses any other value first */
	r->consul_rc = consul_config_from_opts(&r->consul, o, r->consul_err, sizeof(r->consul_err));
}

void register_settings_free(struct register_settings *r)
{
	consul_config_free(&r->consul);
}

static bool session_id_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= CONSUL_SESSION_ID_MAX)
		return false;
	return strspn(s, "0123456789abcdefABCDEF-") == n;
}

/* The session ID a previous --once run left, or "": a missing file is normal; a file that is not
 * this user's own (planted by another user, a link, a FIFO) or holds no session ID is ignored with
 * a line, and the new session is saved over it. */
static void session_load(struct registrar *g)
{
	char text[256], why[300];
	bool absent = false;
	ssize_t n = -1;
	int fd = runfile_open(g->session_file, O_RDONLY, &absent, why, sizeof(why));

	g->session[0] = '\0';
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		if (n < 0)
			sk_fmt(why, sizeof(why), "%s", strerror(errno));
		close(fd);
	}
	if (n < 0) {
		if (!absent)
			log_warn("session file %s: %s: ignored, a new session is made (--session-file)",
				 g->session_file, why);
		return;
	}
	text[n] = '\0';
	sk_trim(text);
	if (session_id_valid(text))
		sk_strlcpy(g->session, text, sizeof(g->session));
	else if (*text)
		log_warn("session file %s: not a session ID: ignored, a new session is made (--session-file)",
			 g->session_file);
}

/* Write the session ID atomically: a new temporary file beside it (O_EXCL, no link followed, mode
 * 0600), fsync, then rename over the file (which replaces a link there, never follows it). */
static int session_save(const struct registrar *g, char *err, size_t errlen)
{
	char tmp[4300], line[CONSUL_SESSION_ID_MAX + 1];
	int fd, n = snprintf(line, sizeof(line), "%s\n", g->session);

	if (!sk_fmt(tmp, sizeof(tmp), "%s.%ld.tmp", g->session_file, (long)getpid()))
		return sk_err(err, errlen, "session file %s: path too long (--session-file)", g->session_file);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return sk_err(err, errlen, "session file %s: %s (--session-file)", tmp, strerror(errno));
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		int e = errno;

		close(fd);
		unlink(tmp);
		return sk_err(err, errlen, "session file %s: %s (--session-file)", tmp, strerror(e));
	}
	close(fd);
	if (rename(tmp, g->session_file) < 0) {
		int e = errno;

		unlink(tmp);
		return sk_err(err, errlen, "session file %s: %s (--session-file)", g->session_file, strerror(e));
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
	if (consul_session_create(g->consul,
				  &(struct consul_session_spec){ g->session_name, g->ttl_s, "delete", "0s", false }, dl,
				  g->session, err, errlen) < 0)
		return -1;
	log_debug("session %s created (TTL %lds, behavior delete)", g->session, g->ttl_s);
	if (g->once && session_save(g, err, errlen) < 0) {
		char why[256];

		/* Without the file the next run could not reuse it: do not leave it behind. */
		if (consul_session_destroy(g->consul, g->session, dl, why, sizeof(why)) < 0)
			log_warn("%s", why);
		g->session[0] = '\0';
		return -1;
	}
	return 0;
}

/* While up: the key holds the advertise address under our session (written unless it does).
 * `e`: the key as listed, or NULL. 0, or -1 with err set. */
static int key_hold(struct registrar *g, const struct consul_kv *e, const deadline_t *dl, char *err, size_t errlen)
{
	size_t alen = strlen(g->advertise);
	bool done;

	if (e && e->session && strcmp(e->session, g->session) == 0 && e->len == alen &&
	    memcmp(e->value, g->advertise, alen) == 0) {
		if (g->state != KEY_PRESENT)
			log_info("registered %s = %s (session %s)", g->key, g->advertise, g->session);
		g->state = KEY_PRESENT;
		return 0;
	}
	if (consul_kv_put(g->consul, &(struct consul_kv_write){ g->key, g->advertise, alen, g->session }, dl, &done,
			  err, errlen) < 0)
		return -1;
	if (!done)
		return sk_err(err, errlen,
			      "%s is locked by session %s (a previous run?): it goes when that session ends, "
			      "within 2 x its TTL",
			      g->key, e && e->session ? e->session : "(unknown)");
	log_info("registered %s = %s (session %s)", g->key, g->advertise, g->session);
	g->state = KEY_PRESENT;
	return 0;
}

/* While down: no key. 0, or -1 with err set. */
static int key_drop(struct registrar *g, const struct consul_kv *e, const char *why_down, const deadline_t *dl,
		    char *err, size_t errlen)
{
	if (e) {
		if (consul_kv_delete(g->consul, g->key, false, dl, err, errlen) < 0)
			return -1;
		log_info("deregistered %s (%s)", g->key, why_down);
	} else if (g->state == KEY_PRESENT) {
		log_info("deregistered %s (%s; the key was already gone)", g->key, why_down);
	}
	g->state = KEY_ABSENT;
	return 0;
}

/* Say once what answers at --consul-addr: a local agent or Consul servers (asked with
 * --consul-agent auto at the first round Consul answers; no answer: asked again next round). The
 * session is TTL-only whatever it is: a restart of the database host's Consul agent must never end
 * the sessions of every node it serves at once. */
static void agent_say(struct registrar *g, const deadline_t *dl)
{
	enum consul_agent_mode mode = g->r->agent;
	char why[300], err[400];

	if (g->agent_logged)
		return;
	if (mode == CONSUL_AGENT_AUTO) {
		const char *said;

		if (consul_agent_detect(g->consul, dl, &mode, &said, err, sizeof(err)) < 0)
			return;
		snprintf(why, sizeof(why), "%s", said);
	} else {
		snprintf(why, sizeof(why), "--consul-agent %s", consul_agent_mode_str(mode));
	}
	log_info("consul: %s at %s: %s (the session is bound to its TTL only)",
		 mode == CONSUL_AGENT_LOCAL ? "local agent" : "no local agent", consul_url(g->consul), why);
	g->agent_logged = true;
}

/* One Consul round: while `up`, the key exists, holds the advertise address and is locked by our
 * session; otherwise it does not exist. Returns 0 when Consul now matches, -1 with err set. */
static int consul_round(struct registrar *g, bool up, const char *why_down, const deadline_t *dl, char *err,
			size_t errlen)
{
	struct consul_kv_list l = { 0 };
	struct consul_read rd = { .dl = dl };
	const struct consul_kv *e = NULL;
	int ret;

	agent_say(g, dl);
	if (up && session_ensure(g, dl, err, errlen) < 0)
		return -1;
	if (consul_kv_list(g->consul, g->key, &rd, &l, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.items[i].key, g->key) == 0)
			e = &l.items[i];
	ret = up ? key_hold(g, e, dl, err, errlen) : key_drop(g, e, why_down, dl, err, errlen);
	consul_kv_list_free(&l);
	return ret;
}

static void log_node(struct registrar *g, const struct cc_result *r)
{
	if (g->node_logged == (int)r->answer)
		return;
	if (g->node_logged < 0)
		log_info("node %s (%s)", cc_check_answer_names[r->answer], r->detail);
	else
		log_info("node %s -> %s (%s)", cc_check_answer_names[g->node_logged], cc_check_answer_names[r->answer],
			 r->detail);
	g->node_logged = (int)r->answer;
}

/* One check, then Consul. Returns 0 when Consul matches the node, -1 otherwise (logged once per
 * change of state). */
static int register_round(struct registrar *g, const struct cc_result *r)
{
	deadline_t dl = deadline_in_ms(g->consul_ms);
	char err[600];

	log_node(g, r);
	if (consul_round(g, r->answer == CC_SYNCED, r->detail, &dl, err, sizeof(err)) < 0) {
		struct pollfd p = { .fd = g->sigfd, .events = POLLIN };
		/* Consul 1.21.5 refuses ':' in keys (hashicorp/consul#22822): say what to do. */
		const char *hint = strstr(err, "invalid key name") && strchr(g->key, ':')
					   ? " (this Consul refuses ':' in keys: use --key-without-port)"
					   : "";

		if (g->sigfd >= 0 && poll(&p, 1, 0) > 0)
			return -1; /* cancelled by a stop signal: nothing to report */
		g->failures++;
		if (!g->consul_failing || g->once)
			log_warn("consul %s: %s%s%s", consul_url(g->consul), err, hint,
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
	struct cc_checker *c;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool want, busy;
	deadline_t dl;
	struct cc_result r;
	int done[2]; /* a byte after each check */
};

static void *check_worker(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		struct cc_result r;
		deadline_t dl;

		pthread_mutex_lock(&w->mu);
		while (!w->want)
			pthread_cond_wait(&w->cv, &w->mu);
		w->want = false;
		w->busy = true;
		dl = w->dl;
		pthread_mutex_unlock(&w->mu);
		if (!cc_check_disabled(w->c, &r))
			cc_check_once(w->c, &w->c->db, &dl, &r);
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
static int worker_check(struct worker *w, int sigfd, long check_ms, struct cc_result *r)
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
	r->answer = CC_NOT_SYNCED;
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

/* Signals to a signalfd, the check thread; as a container's PID 1 the reaper first (before any
 * other thread). Returns the signalfd, or -1 (logged). */
static int loop_start(struct worker *w)
{
	pthread_t thread;
	sigset_t set;
	char err[200];
	int sigfd;

	if (proc_reaper_start(err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sigfd < 0 || pipe2(w->done, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_error("cannot set up signals: %s", strerror(errno));
		return -1;
	}
	db_library_init();
	if (pthread_create(&thread, NULL, check_worker, w) != 0) {
		log_error("cannot start the check thread");
		return -1;
	}
	pthread_detach(thread);
	return sigfd;
}

static int register_loop(struct registrar *g, bool *abandoned)
{
	struct worker w = { .c = g->c, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };
	struct signalfd_siginfo si;
	int sigfd = loop_start(&w);

	if (sigfd < 0)
		return 1;
	srandom((unsigned)(deadline_now_us() ^ getpid()));
	g->sigfd = sigfd;
	consul_set_cancel_fd(g->consul, sigfd);
	log_info("registering %s in consul %s every %.1fs while synced (session TTL %lds)", g->key,
		 consul_url(g->consul), (double)g->interval_ms / 1000.0, g->ttl_s);
	for (;;) {
		struct pollfd p = { .fd = sigfd, .events = POLLIN };
		struct cc_result r;
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

/* --register --once: one check, one Consul round. */
static int register_once(struct registrar *g)
{
	struct cc_checker *c = g->c;
	struct cc_result r;

	session_load(g);
	g->check_ms = c->timeout_ms;
	if (!cc_check_disabled(c, &r)) {
		deadline_t dl = deadline_in_ms(g->check_ms);

		cc_check_once(c, &c->db, &dl, &r);
		db_close(&c->db);
	}
	return register_round(g, &r) < 0 ? 1 : 0;
}

/* --once: --session-file (or --state-file on the command line, its former name), or its default in
 * a directory no other user can write. 0, or -1 (logged). */
static int session_file_pick(struct registrar *g)
{
	const char *given = g->r->session_file;
	char why[300];

	/* The session file's former name, honoured from the command line only (never the environment's
	 * MYSQL_STATE_FILE or a configuration file, where it is mysqld's state file). */
	if (!given && g->r->state_file_flag) {
		log_warn(
			"--state-file %s taken as --session-file, its former name: use --session-file (--state-file is "
			"mysqld's state file, for --listen)",
			g->r->state_file_flag);
		given = g->r->state_file_flag;
	}
	if (given && !*given) {
		log_error("--session-file is empty: --once keeps its session between runs in it");
		return -1;
	}
	if (given ? !sk_strlcpy(g->session_file, given, sizeof(g->session_file))
		  : runfile_default("clustercheck", "clustercheck.session", g->session_file, sizeof(g->session_file),
				    why, sizeof(why)) < 0) {
		log_error("session file: %s (--session-file)", given ? "path too long" : why);
		return -1;
	}
	return 0;
}

/* --consul-login-method: the client carries the login's token (logged in at the first request). */
static int register_login(struct registrar *g, char *err, size_t errlen)
{
	const struct consul_config *cc = &g->r->consul;

	if (!cc->login_method)
		return 0;
	g->login = consul_login_new(cc->login_method, cc->login_bearer_file, cc->login_meta, err, errlen);
	if (!g->login)
		return -1;
	consul_set_login(g->consul, g->login);
	return 0;
}

/* At exit the login's token is destroyed (bounded by the Consul timeout; the cancel descriptor,
 * a signal that may have ended the loop, is turned off for it). */
static void register_logout(struct registrar *g)
{
	deadline_t dl = deadline_in_ms(g->consul_ms);
	char err[400];

	if (!g->login)
		return;
	consul_set_cancel_fd(g->consul, -1);
	if (consul_logout(g->consul, &dl, err, sizeof(err)) < 0)
		log_warn("consul: logout: %s", err);
	consul_login_free(g->login);
	g->login = NULL;
}

/* --register: check and update Consul every --interval, or once (--once). */
int register_run(struct cc_checker *c, const struct register_settings *r, bool *abandoned)
{
	struct registrar g = { .c = c, .r = r, .sigfd = -1, .node_logged = -1, .state = KEY_UNKNOWN };
	char err[600];
	int rc;

	g.once = r->once;
	g.ttl_s = r->ttl_s;
	g.interval_ms = r->interval_ms;
	g.check_ms = c->timeout_ms < g.interval_ms ? c->timeout_ms : g.interval_ms;
	g.consul_ms = c->timeout_ms;
	if (register_names(&g, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 2;
	}
	if (!g.once && g.interval_ms * 2 > g.ttl_s * 1000) {
		log_error("--interval %.1fs is more than half of --session-ttl %lds: the session would lapse between "
			  "rounds",
			  (double)g.interval_ms / 1000.0, g.ttl_s);
		return 2;
	}
	if (g.once && session_file_pick(&g) < 0)
		return 2;
	g.consul = r->consul_rc == 0 ? consul_new(&r->consul, err, sizeof(err)) : NULL;
	if (!g.consul || register_login(&g, err, sizeof(err)) < 0) {
		log_error("%s", r->consul_rc == 0 ? err : r->consul_err);
		consul_free(g.consul);
		return 2;
	}
	rc = g.once ? register_once(&g) : register_loop(&g, abandoned);
	register_logout(&g);
	consul_free(g.consul);
	return rc;
}
