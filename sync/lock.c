/* lock.c: cluster-mode = single-writer: the agents of one ProxySQL Cluster elect the one that
 * writes, through a Consul session lock on cluster-lock-key. */
#include "lock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

/* Any target of this agent in single-writer mode. */
bool lock_single_writer(const struct agent *ag)
{
	for (size_t i = 0; i < ag->ntargets; i++) {
		if (ag->targets[i].cfg->mode == SYNC_CLUSTER_SINGLE_WRITER)
			return true;
	}
	return false;
}

bool lock_may_write(struct agent *ag)
{
	struct cluster_lock *k = &(ag->parent ? ag->parent : ag)->lock; /* one lock for both sides */

	/* Only until the TTL since the last renew runs out: Consul cannot give the lock to anyone else
	 * before the session is invalidated (at least a TTL later) and the lock-delay has passed. */
	return k->holder && deadline_now_us() < k->valid_until_us;
}

/* One of the agent's single-writer targets has been unreachable longer than cluster-leader-grace. */
static bool target_gone(struct agent *ag, int64_t grace_us)
{
	int64_t now = deadline_now_us();

	for (size_t i = 0; i < ag->ntargets; i++) {
		const struct target *t = &ag->targets[i];

		if (!t->reachable && t->unreachable_since_us && now - t->unreachable_since_us > grace_us)
			return true;
	}
	return false;
}

static void lose(struct agent *ag, const char *why)
{
	struct cluster_lock *k = &ag->lock;

	if (k->holder)
		log_warn("cluster lock %s: no longer the writer: %s", ag->cfg->settings.cluster_lock_key, why);
	k->holder = false;
	k->valid_until_us = 0;
}

static void release(struct agent *ag, const char *why)
{
	struct cluster_lock *k = &ag->lock;
	deadline_t dl = deadline_in_ms(2000);
	char err[300];
	bool done;

	lose(ag, why);
	if (k->session[0] &&
	    consul_kv_release(
		    k->c, &(struct consul_kv_write){ .key = ag->cfg->settings.cluster_lock_key, .session = k->session },
		    &dl, &done, err, sizeof(err)) < 0)
		log_warn("cluster lock: %s", err);
}

/* This agent's session on the lock: created when there is none, else renewed. Returns 0 while it
 * lives, else the cap of the backoff before the next try (the lock is lost when the session could
 * not be created, has ended, or could not be renewed before the lock's validity ran out; bound to
 * the local agent's node health, at the first renew that fails: that node may be failing, and Consul
 * would then end the session before its TTL). */
static long keep_session(struct agent *ag, const char *name)
{
	struct cluster_lock *k = &ag->lock;
	const struct sync_settings *s = &ag->cfg->settings;
	deadline_t dl = deadline_in_ms(5000);
	char delay[32], err[400];
	bool gone = false;
	enum consul_agent_mode agent;
	int64_t sent_us = deadline_now_us();

	if (!k->session[0]) {
		snprintf(delay, sizeof(delay), "%lds", (long)s->cluster_lock_delay_s);
		/* With a local agent, tied to its node's serfHealth too: a holder whose node dies loses it.
		 * Without, to its TTL only (a server's restart must not end it). */
		if (shared_consul_agent(ag, k->c, &agent, err, sizeof(err)) < 0 ||
		    consul_session_create(k->c,
					  &(struct consul_session_spec){ name, s->cluster_lock_ttl_s, "release", delay,
									 agent == CONSUL_AGENT_LOCAL },
					  &dl, k->session, err, sizeof(err)) < 0) {
			lose(ag, err);
			if (!k->create_failing) /* once while it lasts */
				log_warn("cluster lock %s: %s (retrying)", s->cluster_lock_key, err);
			k->create_failing = true;
			return 5000;
		}
		k->create_failing = false;
		k->node_health = agent == CONSUL_AGENT_LOCAL;
		k->renewed_us = sent_us;
		return 0;
	}
	if (consul_session_renew(k->c, k->session, &dl, &gone, err, sizeof(err)) == 0 && !gone) {
		k->renewed_us = sent_us;
		return 0;
	}
	if (gone) {
		k->session[0] = '\0';
		lose(ag, "its session ended");
	} else if (k->node_health || deadline_now_us() >= k->valid_until_us) {
		lose(ag, err);
	}
	return 2000;
}

/* With a live session: the holder extends its validity (or gives the lock up when its own ProxySQL
 * has been unreachable too long); the others try to take the lock. */
static void hold_or_take(struct agent *ag, const char *name)
{
	struct cluster_lock *k = &ag->lock;
	const struct sync_settings *s = &ag->cfg->settings;
	int64_t ttl_us = (int64_t)s->cluster_lock_ttl_s * 1000000;
	deadline_t dl = deadline_in_ms(5000);
	char err[400];
	bool done = false;

	/* Valid a TTL from when the last renew (or the create) was sent, not answered: Consul's timer
	 * restarted no earlier than that, so it cannot end the session (and give the lock away) before
	 * the holder stops writing, however long the answer took (see docs/internals.md, "Fencing
	 * without node health"). */
	if (k->holder) {
		k->valid_until_us = k->renewed_us + ttl_us;
		if (target_gone(ag, s->cluster_leader_grace_us))
			release(ag, "its own ProxySQL has been unreachable longer than cluster-leader-grace");
		return;
	}
	if (target_gone(ag, s->cluster_leader_grace_us))
		return;
	if (consul_kv_put(k->c, &(struct consul_kv_write){ s->cluster_lock_key, name, strlen(name), k->session }, &dl,
			  &done, err, sizeof(err)) < 0) {
		if (!k->put_failing) /* once while it lasts: the others try every second */
			log_warn("cluster lock %s: %s", s->cluster_lock_key, err);
		k->put_failing = true;
		return;
	}
	k->put_failing = false;
	if (!done)
		return;
	k->valid_until_us = k->renewed_us + ttl_us;
	k->holder = true;
	k->takeovers++;
	log_info("cluster lock %s: this agent is the writer of its ProxySQL Cluster", s->cluster_lock_key);
	pthread_mutex_lock(&ag->mu);
	pthread_cond_broadcast(&ag->cv); /* targets: apply now */
	pthread_mutex_unlock(&ag->mu);
}

/* Stopping: the lock released and the session destroyed. */
static void leave(struct agent *ag)
{
	struct cluster_lock *k = &ag->lock;
	deadline_t dl = deadline_in_ms(1000);
	char err[400];

	consul_set_cancel_fd(k->c, -1); /* the stop is signalled: these last two requests must go out */
	if (!k->session[0])
		return;
	if (k->holder)
		release(ag, "stopping");
	if (consul_session_destroy(k->c, k->session, &dl, err, sizeof(err)) < 0)
		log_warn("cluster lock: %s", err);
}

void *lock_main(void *arg)
{
	struct agent *ag = arg;
	struct cluster_lock *k = &ag->lock;
	char name[400], host[256] = "";
	int attempt = 0;

	if (gethostname(host, sizeof(host) - 1) < 0)
		sk_strlcpy(host, "?", sizeof(host));
	snprintf(name, sizeof(name), "proxysql-sync %s %s", host, ag->ntargets ? ag->targets[0].pt.name : "");
	while (!ag->stop) {
		long cap = keep_session(ag, name);

		if (cap) {
			if (shared_nap(ag, shared_backoff_ms(attempt++, cap)))
				break;
			continue;
		}
		attempt = 0;
		hold_or_take(ag, name);
		/* The holder renews at a third of the TTL; the others try for the lock every second. */
		if (shared_nap(ag, k->holder ? ag->cfg->settings.cluster_lock_ttl_s * 1000 / 3 : 900 + random() % 201))
			break;
	}
	leave(ag);
	return NULL;
}

void lock_free(struct cluster_lock *k)
{
	if (k->c)
		consul_free(k->c);
	k->c = NULL;
}
