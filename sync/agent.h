/* agent.h: proxysql-sync's agent: its watches, targets, cluster lock and announcer together, the
 * coordinator that builds the desired state from the watches' snapshots, and what /readyz says
 * (agent.c). Each part has its own header (watch.h, target.h, lock.h, announce.h, metrics.h). */
#ifndef SK_AGENT_H
#define SK_AGENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "consul.h"
#include "layout.h"
#include "proxysql.h"
#include "lock.h"
#include "shared.h"
#include "target.h"
#include "watch.h"

#define AGENT_MAX_WATCHES (5 + LAYOUT_MAX_SERVICES) /* the five KV prefixes and the services */

struct agent;

/* A bounded set of texts, kept as 64-bit hashes: which rejections have been logged. At most
 * AGENT_SEEN_MAX entries (256 KiB of table); past that, a new text is not remembered. */
#define AGENT_SEEN_MAX 16384
struct agent_seen {
	uint64_t *slot; /* open addressing; 0: empty */
	size_t size, n;
};

enum agent_seen_result { AGENT_SEEN_OLD, AGENT_SEEN_NEW, AGENT_SEEN_FULL };

/* Add `text`: AGENT_SEEN_OLD when it was there, AGENT_SEEN_NEW when it is now, AGENT_SEEN_FULL when it
 * was not and the set is full (it is not remembered). */
enum agent_seen_result agent_seen_add(struct agent_seen *s, const char *text);
bool agent_seen_has(const struct agent_seen *s, const char *text);
void agent_seen_free(struct agent_seen *s);

struct agent {
	struct sync_config *cfg;
	/* The side of ProxySQL this agent keeps: the MySQL tables from cfg->layout, or (the second
	 * agent, `pg`) the PostgreSQL tables from cfg->pg_layout. */
	const struct layout_config *layout;
	const struct px_module *mod;
	struct agent *pg; /* the PostgreSQL side's agent, started and stopped with this one; NULL: none */
	struct agent *parent; /* of the PostgreSQL side's agent: the MySQL one (its login, its lock) */
	enum consul_consistency mode;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	/* What /readyz and /metrics read besides atomics, published by the threads: the watches' and
	 * targets' texts and the desired state's counts. A leaf lock held only to copy these (never
	 * ag->mu on the request path: the coordinator holds that while it builds from every key). */
	pthread_mutex_t pub_mu;
	size_t desired_servers[AGENT_MAX_HOSTGROUPS]; /* per owned hostgroup (owned[i]), under pub_mu */
	size_t desired_users; /* under pub_mu */
	int cancel_fd; /* an eventfd: readable once the agent stops */
	atomic_bool stop; /* set under mu (with the broadcast), read anywhere */
	_Atomic int64_t stop_us; /* when stop was set: agent_stop waits for the targets until 800 ms after */
	struct watch watches[AGENT_MAX_WATCHES];
	size_t nwatches;
	unsigned long snap_gen;
	/* The coordinator's (desired.c), under mu: each watch's snapshot generation and the parts
	 * its keys fed at the last published build, and the builds by the parts they built
	 * (servers, users, both). */
	unsigned long built_gen[AGENT_MAX_WATCHES];
	unsigned built_feeds[AGENT_MAX_WATCHES];
	atomic_ulong desired_builds[3];
	int64_t last_change_us, first_change_us;
	/* The coordinator builds from the snapshots without the lock: while `pinned`, a replaced
	 * snapshot is kept in `retired` (shared_snapshot_retire) until the build is over. */
	bool pinned;
	struct consul_kv_list *retired;
	size_t nretired;
	/* The desired state the coordinator published (under mu), with what rejected keys keep; the
	 * targets hold references to it (shared_want_get), never copies. */
	struct agent_want *want;
	int64_t reread_until_us; /* a target confirms a shrink: watchers re-read at once until then */
	unsigned long desired_gen;
	bool have_desired;
	struct target *targets;
	size_t ntargets;
	pthread_t coordinator;
	struct cluster_lock lock;
	struct consul *announce_c; /* announce-address: announce.c's client; NULL: not announcing */
	struct consul_login *login; /* consul-login-method: the token every client carries; NULL: none */
	char announce_why[300]; /* why announcing is impossible ("": it is not), for /readyz (under pub_mu) */
	/* consul-agent resolved (shared_consul_agent; AUTO until then), under agent_mu. */
	pthread_mutex_t agent_mu;
	enum consul_agent_mode consul_agent;
	pthread_t announce_tid;
	pthread_t *started; /* the threads running, for a start that fails halfway */
	size_t nstarted;
	long owned[AGENT_MAX_HOSTGROUPS];
	size_t nowned;
	/* metrics */
	atomic_ulong rejected_total, guard_blocks, hostgroup_guard_blocks, unsettled_holds, consul_errors;
	atomic_ulong stale_rereads; /* stale answers past max-stale read again from the leader (watch.c) */
	_Atomic size_t rejected_now;
	/* "key: reason" of the rejections of the last build, logged once while they last (under mu). */
	struct agent_seen logged_rejects;
	size_t unlogged_last; /* rejections past its cap at the last build, summarised in one line */
};

/* Start every thread. Returns 0, or -1 with err set (a Consul client, an eventfd or a thread could
 * not start; the threads already started are stopped first). */
int agent_start(struct agent *ag, struct sync_config *cfg, char *err, size_t errlen) SK_MUST_CHECK;

/* Stop within about a second: cancel Consul requests, let targets finish or abandon the
 * statement in progress (never after a partial stage: a LOAD only follows a complete one).
 * Returns false when a target was left running on a hung admin: the agent and the configuration
 * it reads must then stay allocated until the process exits. With `wait_targets` (a reload) it
 * waits for every target instead, which each admin call's deadline (admin-timeout) bounds, and
 * returns true. */
bool agent_stop(struct agent *ag, bool wait_targets);

/* --once and --dry-run: read every prefix once, build the desired state, and for each target
 * apply it (or print the plan when dry_run). Returns 0 when every target is in the desired state
 * (or, dry run, was read), 1 otherwise. */
int agent_once(struct sync_config *cfg, bool dry_run);

/* Log the rejections of a build that the previous build did not have (each once while it lasts;
 * past AGENT_SEEN_MAX at once, one line for the rest), count them in rejected_total, set
 * rejected_now. Caller holds ag->mu (or owns the agent). */
void agent_log_rejects(struct agent *ag, const struct layout_result *lr);

/* Publish the desired state's counts for /metrics (after want_servers and want_users change). */
void agent_publish_desired(struct agent *ag);

/* The /readyz verdict. It does not take ag->mu: it reads atomics and what the threads publish
 * under ag->pub_mu, so it answers at once whatever the agent is busy with. */
bool agent_ready(struct agent *ag, char *why, size_t len);

#endif
