/* main.c: proxysql-sync: load the configuration, pick the mode, run until a signal says stop. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "config.h"
#include "config_check.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "proc.h"
#include "runfile.h"

/* The running agent, swapped on reload; the health handler reads it under `mu`. While a reload
 * stops the old agent (up to admin-timeout), `ag` is NULL and `state` says why: the lock is never
 * held across the stop, so no request waits for it. */
static struct {
	pthread_mutex_t mu;
	struct agent *ag;
	const char *state;
} live = { PTHREAD_MUTEX_INITIALIZER, NULL, "starting" };

static void on_health(void *ctx, const char *method, const char *path, struct http_reply *r)
{
	(void)ctx;
	(void)method;
	r->content_type = "text/plain; charset=utf-8";
	if (strcmp(path, "/healthz") == 0) { /* the process answers: nothing to lock */
		r->status = 200;
		snprintf(r->body, sizeof(r->body), "ok\n");
		r->len = strlen(r->body);
		return;
	}
	pthread_mutex_lock(&live.mu);
	if (strcmp(path, "/readyz") == 0) {
		char why[300];
		bool ok = live.ag && agent_ready(live.ag, why, sizeof(why));

		if (!live.ag)
			snprintf(why, sizeof(why), "%s", live.state);
		r->status = ok ? 200 : 503;
		snprintf(r->body, sizeof(r->body), "%s\n", why);
	} else if (strcmp(path, "/metrics") == 0 && live.ag) {
		sk_buf b;

		sk_buf_init(&b, sizeof(r->body) - 1);
		metrics_render(live.ag, &b);
		r->status = 200;
		r->content_type = "text/plain; version=0.0.4";
		if (b.len)
			memcpy(r->body, b.data, b.len);
		r->body[b.len] = '\0';
		sk_buf_free(&b);
	} else if (strcmp(path, "/metrics") == 0) {
		r->status = 503;
		snprintf(r->body, sizeof(r->body), "%s\n", live.state);
	} else {
		r->status = 404;
		snprintf(r->body, sizeof(r->body), "not found: try /healthz, /readyz, /metrics\n");
	}
	pthread_mutex_unlock(&live.mu);
	log_redact(r->body);
	r->len = strlen(r->body); /* measured after redacting, which may shorten it */
}

static void setup_logging(const struct sync_config *c, const char *argv0)
{
	log_setup(argv0, c->settings.log_format, c->settings.log_level, stdout);
}

/* --once takes a lock so that overlapping cron runs cannot collide. Its default sits in a
 * directory no other user can write (runfile_default), so none can create it first; any path is
 * opened without following a symbolic link, and a file that is not regular, belongs to another
 * user or has other hard links is refused with one line (runfile_open). */
static int take_lock(const char *path)
{
	char buf[4200], why[300];
	int fd;

	if (!path) {
		if (runfile_default("proxysql-sync", "proxysql-sync.lock", buf, sizeof(buf), why, sizeof(why)) < 0) {
			log_error("lock file: %s; give a path in a directory only this user can write (--lock-file)",
				  why);
			return -1;
		}
		path = buf;
	}
	fd = runfile_open(path, O_RDONLY | O_CREAT, NULL, why, sizeof(why));
	if (fd < 0) {
		log_error("lock file %s: %s%s (--lock-file)", path, why,
			  strstr(why, "symbolic") || strstr(why, "uid ") ? "; remove it or choose another path" : "");
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		log_error("another proxysql-sync --once holds %s; not running twice", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* What the health handlers read: `ag`, or NULL with `state` saying why. */
static void set_live(struct agent *ag, const char *state)
{
	pthread_mutex_lock(&live.mu);
	live.ag = ag;
	if (state)
		live.state = state;
	pthread_mutex_unlock(&live.mu);
}

/* health-listen: /healthz, /readyz and /metrics. Returns 0 with *health set (NULL: none), or -1
 * (logged). */
static int start_health(const struct sync_settings *s, struct http_server **health)
{
	struct http_limits lim = {
		.max_conns = s->health_max_connections,
		.max_conns_per_ip = s->health_max_connections_per_ip,
		.idle_timeout_s = s->health_idle_timeout_s,
		.request_timeout_ms = s->health_request_timeout_ms,
	};
	char err[512];

	*health = NULL;
	if (!*s->health_listen)
		return 0;
	*health = http_start(s->health_listen, &(struct http_service){ HTTP_HANDLERS_QUICK, on_health, NULL }, &lim,
			     err, sizeof(err));
	if (!*health) {
		log_error("%s (health-listen)", err);
		return -1;
	}
	log_info("health on %s: /healthz /readyz /metrics", s->health_listen);
	return 0;
}

/* SIGHUP: load the configuration again and restart the agent on it; on any failure keep (or
 * restart on) the running one. Returns 0, or -1 when not even that restarts (logged). */
static int reload(struct sync_config *cfg, int argc, char **argv, struct agent *ag)
{
	struct sync_config next, old;
	char err[512];

	if (sync_config_load(&next, argc, argv, err, sizeof(err)) != OPTS_OK) {
		log_error("reload failed, keeping the running configuration: %s", err);
		sync_config_free(&next);
		return 0;
	}
	log_info("reloading the configuration");
	set_live(NULL, "reloading the configuration");
	(void)agent_stop(ag, true); /* no thread may outlive the configuration freed next */
	/* The agent points into the configuration: restart it on the new one, or, should that fail,
	 * on the old one again. */
	old = *cfg;
	*cfg = next;
	setup_logging(cfg, argv[0]);
	if (agent_start(ag, cfg, err, sizeof(err)) < 0) {
		log_error("reload failed, keeping the running configuration: %s", err);
		sync_config_free(cfg);
		*cfg = old;
		setup_logging(cfg, argv[0]);
		if (agent_start(ag, cfg, err, sizeof(err)) < 0) {
			log_error("%s", err);
			return -1;
		}
	} else {
		sync_config_free(&old);
	}
	set_live(ag, NULL);
	return 0;
}

/* Runs until SIGTERM or SIGINT. *abandoned: a target thread still runs (see agent_stop), so the
 * configuration must not be freed. */
static int run(struct sync_config *cfg, int argc, char **argv, bool *abandoned)
{
	static struct agent ag;
	struct http_server *health = NULL;
	sigset_t set;
	char err[512];
	int sig;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	/* Before any other thread: as a container's PID 1 the agent inherits every orphan. */
	if (proc_reaper_start(err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 2; /* as when any other thread cannot start */
	}
	if (start_health(&cfg->settings, &health) < 0)
		return 2;
	if (agent_start(&ag, cfg, err, sizeof(err)) < 0) {
		log_error("%s", err);
		http_stop(health);
		return 2;
	}
	set_live(&ag, NULL);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig != SIGHUP) {
			log_info("stopping on signal %d", sig);
			break;
		}
		if (reload(cfg, argc, argv, &ag) < 0) {
			http_stop(health);
			return 2;
		}
	}
	set_live(NULL, NULL);
	*abandoned = !agent_stop(&ag, false);
	http_stop(health);
	return 0;
}

/* Log sync_config_warnings, one line each. */
static void log_warnings(const struct sync_config *cfg)
{
	char text[4096];

	if (sync_config_warnings(cfg, text, sizeof(text)) == 0)
		return;
	for (char *line = text, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		log_warn("configuration: %s", line); /* the last one too when the text was cut */
		if (!nl)
			break;
	}
}

/* --dry-run, --once (under its lock file) or the agent until a signal stops it. */
static int run_mode(struct sync_config *cfg, int argc, char **argv, const sigset_t *stops, bool *abandoned)
{
	int rc, lock;

	if (cfg->settings.dry_run || cfg->settings.once)
		pthread_sigmask(SIG_UNBLOCK, stops, NULL);
	if (cfg->settings.dry_run)
		return agent_once(cfg, true);
	if (!cfg->settings.once)
		return run(cfg, argc, argv, abandoned);
	lock = take_lock(cfg->settings.lock_file);
	rc = lock < 0 ? 1 : agent_once(cfg, false);
	if (lock >= 0)
		close(lock);
	return rc;
}

/* One malloc arena: the watcher allocates a snapshot, the coordinator the desired state, a target
 * the rows it keeps, and each frees what another made; with an arena each, those frees are not
 * reused across threads and the peak grows (56.6 against 62.7 MiB at 52,000 keys). */
static void one_arena(void)
{
#ifdef __GLIBC__
	mallopt(M_ARENA_MAX, 1);
#endif
}

int main(int argc, char **argv)
{
	/* static: a configuration left to a target thread still running at exit (agent_stop) stays
	 * reachable, not a leak. */
	static struct sync_config cfg;
	sigset_t stops;
	char err[512];
	int rc;
	bool abandoned = false;

	proc_no_dumps(); /* before any password or token is read */
	/* Before anything else: a stop or reload signal that comes while the agent starts waits for
	 * the loop (sigwait), rather than being dropped (PID 1 has no default actions) or, for
	 * SIGHUP, killing it. The one-shot modes take them back below. */
	sigemptyset(&stops);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stops, NULL);

	one_arena();
	log_setup(argv[0], LOG_TEXT, LOG_INFO, stdout);
	switch (sync_config_load(&cfg, argc, argv, err, sizeof(err))) {
	case OPTS_EXIT: sync_config_free(&cfg); return 0;
	case OPTS_ERROR:
		fprintf(stderr, "proxysql-sync: %s\n", err);
		sync_config_free(&cfg);
		return 2;
	case OPTS_OK: break;
	}
	setup_logging(&cfg, argv[0]);
	log_warnings(&cfg);
	if (cfg.settings.check_config) {
		printf("proxysql-sync: configuration ok: %zu target(s), %zu cluster(s)", cfg.ntargets,
		       cfg.layout.nclusters);
		if (cfg.pg_layout.nclusters)
			printf(", %zu Patroni cluster(s)", cfg.pg_layout.nclusters);
		printf("\n");
		sync_config_free(&cfg);
		return 0;
	}
	db_library_init();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	srandom((unsigned)getpid() ^ (unsigned)deadline_now_us());
	rc = run_mode(&cfg, argc, argv, &stops, &abandoned);
	if (!abandoned)
		sync_config_free(&cfg);
	curl_global_cleanup();
	return rc;
}
