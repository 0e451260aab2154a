/* watch.h: one watched Consul source (a KV prefix or a service) and the thread that reads it
 * (watch.c). The agent (agent.c) makes the watches, their clients and wake descriptors; watch.c
 * reads, judges and keeps the snapshot, and frees all of it. */
#ifndef SK_SYNC_WATCH_H
#define SK_SYNC_WATCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "consul.h"

struct agent;

/* One watched prefix: a blocking-query loop and the last snapshot that passed the guards. */
struct watch {
	struct agent *ag;
	char *prefix; /* a KV prefix, or the label of a service */
	char *label; /* the prefix as a Prometheus label value (escaped) */
	int svc; /* the index of the service in layout.services; -1: a KV prefix */
	pthread_t tid;
	struct consul *c;
	uint64_t index;
	unsigned long gen; /* snapshots taken (under ag->mu): the coordinator rebuilds what changed */
	struct consul_kv_list kv; /* the accepted snapshot (under ag->mu) */
	atomic_bool have; /* a good read has been accepted */
	atomic_bool ok; /* the last request succeeded */
	int confirming; /* consecutive reads confirming a shrink */
	_Atomic uint64_t metric_index;
	char error[300]; /* under ag->pub_mu */
	/* What the current trouble is, so that it is logged once and not at every retry (the texts
	 * vary: "after 3 ms"): the HTTP status of a failed read (0: no answer; -1: filtered by ACLs),
	 * -2: larger than max-response-bytes), and the reason answers are being ignored (NULL: they
	 * are not). */
	enum consul_reason err_reason; /* the last failure, so that a new kind is logged */
	long err_status;
	const char *ignoring;
	bool stale_episode; /* stale answers are past max-stale: read again from the leader (logged once) */
	int wake_fd; /* eventfd: the watch's Consul request in flight ends when it is written */
	atomic_ulong too_large; /* answers refused for passing max-response-bytes */
	unsigned long reads; /* answers believed (changed or not), under ag->mu: the hostgroup guard's confirmations */
};

/* How one read asks: from `index` (0: at once), blocking up to `wait_ms`, with consistency `mode`,
 * within `dl`. */
struct watch_query {
	uint64_t index;
	long wait_ms;
	enum consul_consistency mode;
	const deadline_t *dl;
};

/* One read of a watch's source (a KV prefix or a service, whose instances get the keys the layout
 * expects: SERVICE_KEY_PREFIX "<index>/<address>") as `q` asks, as consul_kv_list. */
int watch_read(struct watch *w, const struct watch_query *q, struct consul_kv_list *out, struct consul_meta *meta,
	       char *err, size_t errlen) SK_MUST_CHECK;

/* The thread body: `arg` is the struct watch *. */
void *watch_main(void *arg);

/* Free what the watch holds (its client, snapshot, texts, wake descriptor), its thread stopped. */
void watch_free(struct watch *w);

#endif
