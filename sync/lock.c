/* lock.c: cluster-mode = single-writer: the agents of one ProxySQL Cluster elect the one that
 * writes, through a Consul session lock on cluster-lock-key. */
#include "agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	struct cluster_lock *k = &ag->lock;

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
	    consul_kv_release(k->c, ag->cfg->settings.cluster_lock_key, k->session, &dl, &done, err, sizeof(err)) < 0)
		log_warn("cluster lock: %s", err);
}

void *lock_main(void *arg)
{
	struct agent *ag = arg;
	struct cluster_lock *k = &ag->lock;
	const struct sync_settings *s = &ag->cfg->settings;
	const char *key = s->cluster_lock_key;
	long ttl_s = s->cluster_lock_ttl_s;
	int64_t ttl_us = (int64_t)ttl_s * 1000000, grace_us = s->cluster_leader_grace_us;
	char delay[32], name[400], host[256] = "", err[400];
	int attempt = 0;

	snprintf(delay, sizeof(delay), "%lds", (long)s->cluster_lock_delay_s);
	if (gethostname(host, sizeof(host) - 1) < 0)
		sk_strlcpy(host, "?", sizeof(host));
	snprintf(name, sizeof(name), "proxysql-sync %s %s", host, ag->ntargets ? ag->targets[0].pt.name : "");
	while (!ag->stop) {
		deadline_t dl = deadline_in_ms(5000);
		bool gone = false, done = false;
		int64_t now;

		if (!k->session[0]) {
			/* Tied to the node's serfHealth too: a holder whose node dies loses it. */
			if (consul_session_create(k->c, name, ttl_s, "release", delay, true, &dl, k->session,
						  sizeof(k->session), err, sizeof(err)) < 0) {
				lose(ag, err);
				log_warn("cluster lock %s: %s (retrying)", key, err);
				if (shared_nap(ag, shared_backoff_ms(attempt++, 5000)))
					break;
				continue;
			}
		} else if (consul_session_renew(k->c, k->session, &dl, &gone, err, sizeof(err)) < 0 || gone) {
			if (gone) {
				k->session[0] = '\0';
				lose(ag, "its session ended");
			} else if (deadline_now_us() >= k->valid_until_us) {
				lose(ag, err);
			}
			if (shared_nap(ag, shared_backoff_ms(attempt++, 2000)))
				break;
			continue;
		}
		attempt = 0;
		now = deadline_now_us();
		if (k->holder) {
			k->valid_until_us = now + ttl_us;
			if (target_gone(ag, grace_us))
				release(ag, "its own ProxySQL has been unreachable longer than cluster-leader-grace");
		} else if (!target_gone(ag, grace_us)) {
			dl = deadline_in_ms(5000);
			if (consul_kv_put(k->c, key, name, strlen(name), k->session, &dl, &done, err, sizeof(err)) < 0)
				log_warn("cluster lock %s: %s", key, err);
			else if (done) {
				k->valid_until_us = deadline_now_us() + ttl_us;
				k->holder = true;
				k->takeovers++;
				log_info("cluster lock %s: this agent is the writer of its ProxySQL Cluster", key);
				pthread_mutex_lock(&ag->mu);
				pthread_cond_broadcast(&ag->cv); /* targets: apply now */
				pthread_mutex_unlock(&ag->mu);
			}
		}
		/* The holder renews at a third of the TTL; the others try for the lock every second. */
		if (shared_nap(ag, k->holder ? ttl_s * 1000 / 3 : 900 + random() % 201))
			break;
	}
	consul_set_cancel_fd(k->c, -1); /* the stop is signalled: these last two requests must go out */
	if (k->session[0]) {
		deadline_t dl = deadline_in_ms(1000);

		if (k->holder)
			release(ag, "stopping");
		if (consul_session_destroy(k->c, k->session, &dl, err, sizeof(err)) < 0)
			log_warn("cluster lock: %s", err);
	}
	return NULL;
}
