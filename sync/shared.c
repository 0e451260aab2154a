/* shared.c: what proxysql-sync's threads share (see shared.h): the stop signal, the retry pace,
 * the reference-counted desired state, the pinned snapshots and consul-agent resolved. */
#include "shared.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

static void part_put(struct want_part *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	model_servers_free(&p->servers);
	model_users_free(&p->users);
	model_keeps_free(&p->keep_servers);
	model_names_free(&p->keep_users);
	model_peers_free(&p->peers);
	for (size_t i = 0; i < p->nrejects; i++) {
		free(p->rejects[i].key);
		free(p->rejects[i].reason);
	}
	free(p->rejects);
	free(p);
}

struct agent_want *shared_want_get(struct agent *ag)
{
	if (ag->want)
		atomic_fetch_add(&ag->want->refs, 1);
	return ag->want;
}

void shared_want_put(struct agent_want *w)
{
	if (!w || atomic_fetch_sub(&w->refs, 1) != 1)
		return;
	for (int p = 0; p < 2; p++)
		part_put(w->parts[p]);
	free(w);
}

void shared_snapshot_retire(struct agent *ag, struct consul_kv_list *kv)
{
	if (ag->pinned) {
		ag->retired = model_grow(ag->retired, ag->nretired, sizeof(*ag->retired));
		ag->retired[ag->nretired++] = *kv;
		memset(kv, 0, sizeof(*kv));
		return;
	}
	consul_kv_list_free(kv);
}

void shared_snapshots_unpin(struct agent *ag)
{
	ag->pinned = false;
	for (size_t i = 0; i < ag->nretired; i++)
		consul_kv_list_free(&ag->retired[i]);
	free(ag->retired);
	ag->retired = NULL;
	ag->nretired = 0;
}

double shared_unix_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

bool shared_nap(struct agent *ag, long ms)
{
	struct pollfd p = { .fd = ag->cancel_fd, .events = POLLIN };

	return poll(&p, 1, (int)ms) > 0;
}

void shared_wake_watchers(struct agent *ag)
{
	uint64_t one = 1;

	for (size_t i = 0; i < ag->nwatches; i++)
		if (ag->watches[i].wake_fd >= 0 && write(ag->watches[i].wake_fd, &one, sizeof(one)) < 0)
			log_warn("cannot wake the watcher of %s: %s", ag->watches[i].prefix, strerror(errno));
}

long shared_backoff_ms(int attempt, long cap_ms)
{
	long base = 250L << (attempt < 7 ? attempt : 7); /* 250 ms .. 32 s */

	if (base > cap_ms)
		base = cap_ms;
	return base / 2 + (long)(random() % (base / 2 + 1)); /* jitter: half to the whole */
}

/* The line that says, once, what the sessions are bound to. */
static void log_consul_agent(struct consul *c, enum consul_agent_mode mode, const char *why)
{
	if (mode == CONSUL_AGENT_LOCAL)
		log_info("consul: local agent at %s: %s (sessions also end with its node's health, serfHealth)",
			 consul_url(c), why);
	else
		log_info("consul: no local agent at %s: %s (sessions bound to their TTL only)", consul_url(c), why);
}

int shared_consul_agent(struct agent *ag, struct consul *c, enum consul_agent_mode *mode, char *err, size_t errlen)
{
	enum consul_agent_mode m = ag->cfg->settings.consul_agent;
	deadline_t dl = deadline_in_ms(5000);
	char why[300];
	const char *said = "";
	int rc = 0;

	pthread_mutex_lock(&ag->agent_mu);
	if (ag->consul_agent != CONSUL_AGENT_AUTO) {
		*mode = ag->consul_agent;
		pthread_mutex_unlock(&ag->agent_mu);
		return 0;
	}
	/* Held across the request (bounded by its deadline): the other thread waits for this answer
	 * rather than ask again. */
	if (m == CONSUL_AGENT_AUTO) {
		rc = consul_agent_detect(c, &dl, &m, &said, err, errlen);
		snprintf(why, sizeof(why), "%s", said);
	} else
		snprintf(why, sizeof(why), "consul-agent = %s", consul_agent_mode_str(m));
	if (rc == 0) {
		ag->consul_agent = m;
		*mode = m;
		log_consul_agent(c, m, why);
	}
	pthread_mutex_unlock(&ag->agent_mu);
	return rc;
}
