/* shared.h: what proxysql-sync's threads share besides struct agent: the stop signal (a nap that
 * ends when the agent stops, the watchers' wake-up), the retry pace, the published desired state
 * the snapshots a build has pinned, and whether a Consul agent runs beside us. The threads' files
 * (agent.c, watch.c, target.c and its reconcile's files, lock.c, announce.c) call these; shared.c
 * calls none of them. */
#ifndef SK_SYNC_SHARED_H
#define SK_SYNC_SHARED_H

#include <stdatomic.h>
#include <stdbool.h>

#include "consul.h"
#include "layout.h"
#include "model.h"

struct agent;

/* What a target is to be brought to: the desired rows and what rejected keys keep. Published
 * once, then only read; freed by the last reference. */
/* A part of the desired state (LAYOUT_PART_SERVERS or LAYOUT_PART_USERS, desired.c): its rows,
 * what its rejected keys keep, and its rejects. Shared by the states published while the keys that
 * feed it do not change; freed by the last reference. */
struct want_part {
	atomic_int refs;
	struct px_servers servers;
	struct px_keeps keep_servers;
	struct px_peers peers;
	struct px_users users;
	struct px_names keep_users;
	struct layout_reject *rejects;
	size_t nrejects;
};

/* What a target is to be brought to: the desired rows and what rejected keys keep. Published
 * once, then only read; freed by the last reference. The rows are views of the two parts
 * (servers, users), which it holds references to. */
struct agent_want {
	atomic_int refs;
	struct px_servers servers;
	struct px_users users;
	struct px_peers peers; /* the announced fleet, for proxysql_servers */
	struct px_keeps keep_servers;
	struct px_names keep_users;
	struct want_part *parts[2]; /* servers, users */
};

/* A reference to the published desired state (caller holds ag->mu; NULL before the first); give
 * it back with shared_want_put, from any thread, without the lock. */
struct agent_want *shared_want_get(struct agent *ag);
void shared_want_put(struct agent_want *w);

/* Let a watch's replaced snapshot go (caller holds mu): freed now, or once the coordinator's build
 * that may still read it is over. `kv` is left empty. */
void shared_snapshot_retire(struct agent *ag, struct consul_kv_list *kv);
/* The build is over: the snapshots retired meanwhile are freed. Caller holds mu. */
void shared_snapshots_unpin(struct agent *ag);

/* consul-agent as the sessions and the announcer need it: LOCAL or NONE as set, or for auto what
 * GET /v1/agent/self answered (consul_agent_detect), asked through `c` by the first thread that
 * needs it, once for the agent's life, and logged once in words. Returns 0 with *mode, or -1 with
 * err set when Consul has not answered yet (the caller retries as after any failed request). */
int shared_consul_agent(struct agent *ag, struct consul *c, enum consul_agent_mode *mode, char *err,
			size_t errlen) SK_MUST_CHECK;

/* The wall clock, in seconds since the epoch. */
double shared_unix_now(void);
/* Sleep up to `ms`, returning early (true) once the agent stops. */
bool shared_nap(struct agent *ag, long ms);
/* End every watcher's request in flight: each then re-reads (or stops, when the agent does). */
void shared_wake_watchers(struct agent *ag);
/* The wait before retry number `attempt` (from 0): 250 ms doubling up to `cap_ms`, with jitter
 * (half to the whole of it). */
long shared_backoff_ms(int attempt, long cap_ms);

#endif
