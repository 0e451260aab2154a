/* shared.c: what proxysql-sync's threads share (see shared.h): the stop signal, the retry pace,
 * the reference-counted desired state and the pinned snapshots. */
#include "shared.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

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
	model_servers_free(&w->servers);
	model_users_free(&w->users);
	model_keeps_free(&w->keep_servers);
	model_names_free(&w->keep_users);
	model_peers_free(&w->peers);
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
