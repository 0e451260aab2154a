/* lock.h: cluster-mode = single-writer: this agent's side of the election of the one agent of a
 * ProxySQL Cluster that writes (lock.c). agent.c makes the lock's Consul client and starts its
 * thread; lock.c runs it and frees it. */
#ifndef SK_SYNC_LOCK_H
#define SK_SYNC_LOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "consul.h"

struct agent;

/* cluster-mode = single-writer (lock.c): this agent's side of the election. */
struct cluster_lock {
	bool enabled;
	pthread_t tid;
	struct consul *c;
	char session[CONSUL_SESSION_ID_MAX];
	atomic_bool holder;
	_Atomic int64_t valid_until_us; /* the holder writes only until then */
	int64_t renewed_us; /* when the session's last renew (or its create) that succeeded was sent */
	bool node_health; /* the session is bound to the local agent's node health too */
	bool put_failing, create_failing; /* the last try to take the lock, to make a session, failed (logged once) */
	atomic_ulong takeovers;
};

/* The thread body: `arg` is the agent. */
void *lock_main(void *arg);

/* Whether a target of this agent uses single-writer, and whether this agent holds the cluster
 * lock now (and may write). */
bool lock_single_writer(const struct agent *ag);
bool lock_may_write(struct agent *ag);

/* Free the lock's Consul client, its thread stopped. */
void lock_free(struct cluster_lock *k);

#endif
