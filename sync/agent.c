/* agent.c: the agent's start, stop and --once, and its /readyz verdict. The coordinator (Consul
 * snapshots -> one desired state) is in desired.c. The watchers are in watch.c, the targets in target.c. */
#include "agent.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "announce.h"
#include "config_check.h"
#include "consul_login.h"
#include "desired.h"
#include "log.h"
#include "metrics.h"

/* ---- start, stop, once ------------------------------------------------------------------ */

/* One more watch, of `prefix` (taken) or, svc >= 0, of that service of the layout. */
static void add_watch(struct agent *ag, char *prefix, int svc)
{
	struct watch *w = &ag->watches[ag->nwatches++];

	w->prefix = prefix;
	w->label = metrics_label_value(w->prefix);
	w->svc = svc;
	w->ag = ag;
	w->ok = true;
	w->wake_fd = -1;
}

/* A watch for each KV prefix that is set, then one for each service. */
static void add_watches(struct agent *ag, const struct layout_config *l)
{
	const char *prefixes[] = { l->master_prefix, l->replica_prefix, l->servers_prefix, l->users_prefix,
				   l->announce_prefix };

	for (size_t i = 0; i < SK_ARRAY_LEN(prefixes); i++) {
		if (prefixes[i] && *prefixes[i]) {
			size_t n = strlen(prefixes[i]);
			char *p = xmalloc(n + 2);

			/* Always list with a trailing slash: mysql/slave/db1 would also match db10. */
			memcpy(p, prefixes[i], n);
			if (prefixes[i][n - 1] != '/')
				p[n++] = '/';
			p[n] = '\0';
			add_watch(ag, p, -1);
		}
	}
	for (size_t i = 0; i < l->nservices && ag->nwatches < AGENT_MAX_WATCHES; i++)
		add_watch(ag, xstrdup(l->services[i].label), (int)i);
	for (size_t i = 0; i < l->nclusters && ag->nwatches < AGENT_MAX_WATCHES; i++) {
		const struct layout_cluster *cl = &l->clusters[i];
		size_t n;
		char *p;

		if (!cl->patroni_namespace)
			continue;
		n = strlen(cl->patroni_namespace) + strlen(cl->alias) + 3;
		p = xmalloc(n);
		snprintf(p, n, "%s/%s/", cl->patroni_namespace, cl->alias); /* Patroni's keys of that cluster */
		add_watch(ag, p, -1);
	}
}

static void init_target(struct agent *ag, struct target *t, const struct sync_target *st)
{
	t->ag = ag;
	t->cfg = st;
	t->px.m = ag->mod;
	/* The PostgreSQL side's target says so in logs and /readyz ("name/pgsql"); /metrics gives it
	 * the target's name and module="pgsql" (metrics_render). */
	if (ag->parent) {
		size_t n = strlen(st->name) + strlen(ag->mod->name) + 2;

		t->side_name = xmalloc(n);
		snprintf(t->side_name, n, "%s/%s", st->name, ag->mod->name);
	}
	t->pt.name = ag->parent ? t->side_name : st->name;
	t->pt.host = st->host;
	t->pt.port = st->port;
	t->pt.port_explicit = st->port_explicit;
	t->pt.user = st->user;
	t->pt.password = st->password;
	t->pt.tls = st->tls;
	t->pt.tls_verify = st->tls_verify;
	t->pt.tls_ca = st->tls_ca;
	t->pt.tls_cert = st->tls_cert;
	t->pt.tls_key = st->tls_key;
	t->label = metrics_label_value(st->name);
}

/* The agent of one side: the MySQL one (parent NULL, cfg->layout) or the PostgreSQL one. */
static void agent_init(struct agent *ag, struct sync_config *cfg, struct agent *parent)
{
	memset(ag, 0, sizeof(*ag));
	ag->cfg = cfg;
	ag->parent = parent;
	ag->layout = parent ? &cfg->pg_layout : &cfg->layout;
	ag->mod = parent ? &px_pgsql : &px_mysql;
	/* The client settings and the token are in cfg->consul (read by sync_config_load). */
	ag->mode = cfg->settings.consistency;
	ag->cancel_fd = -1;
	pthread_mutex_init(&ag->mu, NULL);
	pthread_mutex_init(&ag->pub_mu, NULL);
	pthread_mutex_init(&ag->agent_mu, NULL);
	pthread_cond_init(&ag->cv, NULL);
	ag->nowned = layout_owned_hostgroups(ag->layout, ag->owned, SK_ARRAY_LEN(ag->owned));
	if (ag->nowned > SK_ARRAY_LEN(ag->owned)) /* --check-config refuses that; never read past the array */
		ag->nowned = SK_ARRAY_LEN(ag->owned);
	add_watches(ag, ag->layout);
	/* A side with nothing to watch (only PostgreSQL configured, say) keeps no target. */
	ag->ntargets = ag->nwatches ? cfg->ntargets : 0;
	ag->targets = xcalloc(cfg->ntargets, sizeof(*ag->targets));
	ag->started = xcalloc(ag->nwatches + cfg->ntargets + 3, sizeof(*ag->started));
	for (size_t i = 0; i < ag->ntargets; i++)
		init_target(ag, &ag->targets[i], &cfg->targets[i]);
}

/* A Consul client for one of the agent's threads, carrying the login's token when the config logs
 * in with an auth method (one login, shared by every client). NULL with err set. */
static struct consul *agent_client(struct agent *ag, char *err, size_t errlen)
{
	const struct consul_config *cc = &ag->cfg->consul;
	struct consul *c;

	if (ag->parent) /* the PostgreSQL side carries the MySQL side's login */
		ag = ag->parent;
	if (cc->login_method && !ag->login) {
		ag->login = consul_login_new(cc->login_method, cc->login_bearer_file, cc->login_meta, err, errlen);
		if (!ag->login)
			return NULL;
	}
	c = consul_new(cc, err, errlen);
	if (c && ag->login)
		consul_set_login(c, ag->login);
	return c;
}

/* At the end, the login's token is destroyed (POST /v1/acl/logout) through a client no thread uses
 * any more, with its cancel descriptor (already written) turned off. */
static void agent_logout(struct agent *ag)
{
	struct consul *c = ag->lock.c ? ag->lock.c : ag->announce_c ? ag->announce_c : NULL;
	deadline_t dl = deadline_in_ms(2000);
	char err[400];

	for (size_t i = 0; !c && i < ag->nwatches; i++)
		c = ag->watches[i].c;
	if (!ag->login)
		return;
	if (c) {
		consul_set_cancel_fd(c, -1);
		if (consul_logout(c, &dl, err, sizeof(err)) < 0)
			log_warn("consul: logout: %s", err);
	}
	consul_login_free(ag->login);
	ag->login = NULL;
}

static void agent_release(struct agent *ag)
{
	agent_logout(ag);
	for (size_t i = 0; i < ag->nwatches; i++)
		watch_free(&ag->watches[i]);
	for (size_t i = 0; i < ag->ntargets; i++)
		target_free(&ag->targets[i]);
	free(ag->targets);
	free(ag->started);
	lock_free(&ag->lock);
	if (ag->announce_c)
		consul_free(ag->announce_c);
	agent_seen_free(&ag->logged_rejects);
	shared_want_put(ag->want);
	ag->want = NULL;
	shared_snapshots_unpin(ag);
	if (ag->cancel_fd >= 0)
		close(ag->cancel_fd);
	pthread_cond_destroy(&ag->cv);
	pthread_mutex_destroy(&ag->agent_mu);
	pthread_mutex_destroy(&ag->pub_mu);
	pthread_mutex_destroy(&ag->mu);
}

/* Tell every thread to stop: the flag, the condition, the cancel descriptor, the watchers. */
static void signal_stop(struct agent *ag)
{
	uint64_t one = 1;

	pthread_mutex_lock(&ag->mu);
	ag->stop_us = deadline_now_us();
	ag->stop = true;
	pthread_cond_broadcast(&ag->cv);
	pthread_mutex_unlock(&ag->mu);
	if (write(ag->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot signal the Consul watchers: %s", strerror(errno));
	shared_wake_watchers(ag);
}

/* Start one of the agent's threads, remembered for stop_started. */
/* A thread to start: where its id goes, its body and the body's argument, what it is (for errors). */
struct agent_thread {
	pthread_t *tid;
	void *(*fn)(void *);
	void *arg;
	const char *what;
};

static int start_thread(struct agent *ag, const struct agent_thread *th, char *err, size_t errlen)
{
	int e = pthread_create(th->tid, NULL, th->fn, th->arg);

	if (e != 0)
		return sk_err(err, errlen, "cannot start a %s thread: %s", th->what, strerror(e));
	ag->started[ag->nstarted++] = *th->tid;
	return 0;
}

/* A start that failed halfway: stop the threads already running, in any order (none has written
 * anything yet that a stop could cut short: a target's first apply is abandoned before its LOAD). */
static void stop_started(struct agent *ag)
{
	if (!ag->nstarted)
		return;
	signal_stop(ag);
	for (size_t i = 0; i < ag->nstarted; i++)
		pthread_join(ag->started[i], NULL);
	ag->nstarted = 0;
}

/* The cancel descriptor and every Consul client: one per watch (with its own wake descriptor), the
 * announcer's and the cluster lock's. Returns 0, or -1 with err set. */
static int open_clients(struct agent *ag, char *err, size_t errlen)
{
	ag->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ag->cancel_fd < 0)
		return sk_err(err, errlen, "eventfd: %s", strerror(errno));
	for (size_t i = 0; i < ag->nwatches; i++) {
		struct watch *w = &ag->watches[i];

		w->c = agent_client(ag, err, errlen);
		if (!w->c)
			return -1;
		/* Its own descriptor: written at stop, and when a guard wants a fresh read now. */
		w->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (w->wake_fd < 0)
			return sk_err(err, errlen, "eventfd: %s", strerror(errno));
		consul_set_cancel_fd(w->c, w->wake_fd);
	}
	if (*ag->cfg->settings.announce_address && !ag->parent) {
		ag->announce_c = agent_client(ag, err, errlen);
		if (!ag->announce_c)
			return -1;
		consul_set_cancel_fd(ag->announce_c, ag->cancel_fd);
	}
	if (lock_single_writer(ag) && !ag->parent) { /* the PostgreSQL side follows the MySQL side's lock */
		ag->lock.enabled = true;
		ag->lock.c = agent_client(ag, err, errlen);
		if (!ag->lock.c)
			return -1;
		consul_set_cancel_fd(ag->lock.c, ag->cancel_fd);
	}
	return 0;
}

/* The watchers, the coordinator, the targets, the cluster lock and the announcer. Returns 0, or -1
 * with err set (the threads started are in ag->started). */
static int start_threads(struct agent *ag, char *err, size_t errlen)
{
	for (size_t i = 0; i < ag->nwatches; i++)
		if (start_thread(ag,
				 &(struct agent_thread){ &ag->watches[i].tid, watch_main, &ag->watches[i], "watcher" },
				 err, errlen) < 0)
			return -1;
	if (start_thread(ag, &(struct agent_thread){ &ag->coordinator, desired_coordinator_main, ag, "coordinator" },
			 err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < ag->ntargets; i++)
		if (start_thread(ag,
				 &(struct agent_thread){ &ag->targets[i].tid, target_main, &ag->targets[i], "target" },
				 err, errlen) < 0)
			return -1;
	if (ag->lock.enabled &&
	    start_thread(ag, &(struct agent_thread){ &ag->lock.tid, lock_main, ag, "cluster lock" }, err, errlen) < 0)
		return -1;
	if (ag->announce_c &&
	    start_thread(ag, &(struct agent_thread){ &ag->announce_tid, announce_main, ag, "announce" }, err, errlen) <
		    0)
		return -1;
	return 0;
}

/* One line for what the agent watches: every prefix (and service), where, and for how many targets. */
static void log_watching(const struct agent *ag)
{
	char list[600] = "";
	size_t used = 0;

	if (!ag->nwatches)
		return;
	for (size_t i = 0; i < ag->nwatches && used < sizeof(list); i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", ag->watches[i].prefix);

		used += w > 0 ? (size_t)w : 0;
	}
	log_info("watching %s at %s (%s consistency) for %zu target%s", list, consul_url(ag->watches[0].c),
		 consul_consistency_str(ag->mode), ag->ntargets, ag->ntargets == 1 ? "" : "s");
}

/* Open the clients and start the threads of an agent initialised (agent_init). */
static int start_side(struct agent *ag, char *err, size_t errlen)
{
	if (open_clients(ag, err, errlen) < 0)
		goto fail;
	log_watching(ag);
	if (start_threads(ag, err, errlen) < 0)
		goto fail;
	return 0;
fail:
	stop_started(ag);
	agent_release(ag);
	return -1;
}

int agent_start(struct agent *ag, struct sync_config *cfg, char *err, size_t errlen)
{
	agent_init(ag, cfg, NULL);
	if (start_side(ag, err, errlen) < 0)
		return -1;
	if (!sync_config_has_pgsql(cfg))
		return 0;
	ag->pg = xmalloc(sizeof(*ag->pg));
	agent_init(ag->pg, cfg, ag);
	if (start_side(ag->pg, err, errlen) < 0) {
		free(ag->pg);
		ag->pg = NULL;
		(void)agent_stop(ag, true);
		return -1;
	}
	return 0;
}

bool agent_stop(struct agent *ag, bool wait_targets)
{
	struct timespec ts;

	signal_stop(ag);
	if (ag->pg) { /* both sides told at once; the PostgreSQL side's end first (it uses our login) */
		if (!agent_stop(ag->pg, wait_targets))
			return false;
		free(ag->pg);
		ag->pg = NULL;
	}
	for (size_t i = 0; i < ag->nwatches; i++)
		pthread_join(ag->watches[i].tid, NULL);
	pthread_join(ag->coordinator, NULL);
	/* A target stuck on a hung admin gets until the second is over: its LOAD can only follow a
	 * complete stage, so leaving now cannot leave the runtime half applied. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 800 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (size_t i = 0; i < ag->ntargets; i++) {
		if (pthread_timedjoin_np(ag->targets[i].tid, NULL, &ts) == 0)
			continue;
		if (!wait_targets) {
			log_warn("target %s: still busy at shutdown; leaving it", ag->targets[i].pt.name);
			return false; /* the process exits next; nothing is freed under the running thread */
		}
		log_warn("target %s: still busy; waiting for its admin call to end (admin-timeout)",
			 ag->targets[i].pt.name);
		pthread_join(ag->targets[i].tid, NULL);
	}
	if (ag->lock.enabled) /* after the targets: the lock is released once nobody writes */
		pthread_join(ag->lock.tid, NULL);
	if (ag->announce_c)
		pthread_join(ag->announce_tid, NULL);
	agent_release(ag);
	return true;
}

/* --once with consistency = stale: an answer past max-stale is replaced by one read with the default
 * consistency (the leader's), as the watches do. */
static int reread_fresh(struct watch *w, struct consul_meta *meta, char *err, size_t errlen)
{
	deadline_t dl = deadline_in_ms(10000);

	log_info("consul: %s: the server that answered was %ld ms behind the leader (max-stale %.0f ms): reading "
		 "again from the leader",
		 w->prefix, meta->last_contact_ms, w->ag->cfg->settings.max_stale_ms);
	w->ag->stale_rereads++;
	consul_kv_list_free(&w->kv);
	return watch_read(w, &(struct watch_query){ .mode = CONSUL_DEFAULT, .dl = &dl }, &w->kv, meta, err, errlen);
}

/* --once: read every prefix once (a read that fails or has no known leader: false). */
static bool read_all(struct agent *ag)
{
	char err[400];

	for (size_t i = 0; i < ag->nwatches; i++) {
		struct watch *w = &ag->watches[i];
		struct consul_meta meta;
		deadline_t dl = deadline_in_ms(10000);

		consul_kv_list_free(&w->kv);
		if (!w->c)
			w->c = agent_client(ag, err, sizeof(err));
		if (!w->c ||
		    watch_read(w, &(struct watch_query){ .mode = ag->mode, .dl = &dl }, &w->kv, &meta, err,
			       sizeof(err)) < 0 ||
		    (ag->mode == CONSUL_STALE && (double)meta.last_contact_ms > ag->cfg->settings.max_stale_ms &&
		     reread_fresh(w, &meta, err, sizeof(err)) < 0)) {
			log_error("consul: %s: %s", w->prefix, err);
			return false;
		}
		if (!meta.known_leader) {
			log_error("consul: %s: no known leader; not applying", w->prefix);
			return false;
		}
		w->have = true;
		w->reads++;
	}
	return true;
}

/* --once and --dry-run for one side's agent (initialised). */
static int once_side(struct agent *ag, bool dry_run)
{
	long confirmations = ag->cfg->settings.confirmations;
	int rc = 0;

	/* A hostgroup guard that holds is confirmed by reading again, 200 ms apart, as the running
	 * agent does. */
	for (long round = 0;; round++) {
		struct layout_result lr;
		struct agent_want *w;
		bool holding = false;

		if (!read_all(ag)) {
			rc = 1;
			break;
		}
		if (!desired_build_all(ag, &lr)) {
			layout_result_free(&lr);
			rc = 1;
			break;
		}
		shared_want_put(desired_publish_all(ag, &lr));
		w = shared_want_get(ag);
		rc = 0;
		for (size_t i = 0; i < ag->ntargets; i++) {
			struct target *t = &ag->targets[i];
			int r = target_reconcile(ag, t, w, dry_run);

			if (r < 0 || (!dry_run && !t->in_sync))
				rc = 1;
			holding = holding || t->nholds > 0;
		}
		shared_want_put(w);
		if (!holding || dry_run || round >= confirmations)
			break;
		usleep(200000);
	}
	for (size_t i = 0; i < ag->ntargets; i++)
		pxadmin_close(&ag->targets[i].px);
	return rc;
}

int agent_once(struct sync_config *cfg, bool dry_run)
{
	struct agent ag, pg;
	int rc;

	agent_init(&ag, cfg, NULL);
	rc = once_side(&ag, dry_run);
	if (sync_config_has_pgsql(cfg)) {
		agent_init(&pg, cfg, &ag);
		rc = once_side(&pg, dry_run) || rc;
		agent_release(&pg);
	}
	agent_release(&ag);
	return rc;
}

/* ---- health and metrics ---------------------------------------------------------------- */

bool agent_ready(struct agent *ag, char *why, size_t len)
{
	bool ready = true;

	pthread_mutex_lock(&ag->pub_mu);
	for (size_t i = 0; i < ag->nwatches && ready; i++) {
		if (!ag->watches[i].ok || !ag->watches[i].have) {
			snprintf(why, len, "consul %s: %s", ag->watches[i].prefix,
				 ag->watches[i].have ? ag->watches[i].error : "not read yet");
			ready = false;
		}
	}
	for (size_t i = 0; i < ag->ntargets && ready; i++) {
		struct target *t = &ag->targets[i];

		/* In sync: desired = memory = runtime (= disk with save-to-disk, within save-delay after a
		 * hot-path change), as the last reconcile read them from the target. */
		if (!t->reachable || !t->synced_once || !t->in_sync) {
			snprintf(why, len, "target %s: %s", t->pt.name,
				 t->why[0]       ? t->why
				 : !t->reachable ? "unreachable"
						 : "not synced yet");
			ready = false;
		}
	}
	if (ready && ag->announce_why[0]) {
		snprintf(why, len, "announce: %s", ag->announce_why);
		ready = false;
	}
	if (ready)
		snprintf(why, len, "ready");
	pthread_mutex_unlock(&ag->pub_mu);
	return ready && (!ag->pg || agent_ready(ag->pg, why, len));
}
