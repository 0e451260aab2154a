/* agent.h: proxysql-sync's moving parts: Consul watchers, the coordinator, one loop per target. */
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
#include "shared.h"

#define AGENT_MAX_WATCHES (5 + LAYOUT_MAX_SERVICES) /* the five KV prefixes and the services */
#define AGENT_HIST_BUCKETS 10

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

struct drain_rec {
	long hostgroup;
	char *host;
	long port;
	int64_t since_us;
};

/* A managed hostgroup whose desired servers are far fewer than the target has: held (the target's
 * servers stay) until `confirmations` more reads of every prefix say the same. */
struct shrink_hold {
	long hostgroup;
	size_t have_n, want_n;
	unsigned long reads_mark;
};

enum { TABLE_SERVERS, TABLE_USERS, TABLE_COUNT };

/* What a target refuses to let the agent write: a table its ProxySQL Cluster pulls (cluster-mode =
 * refuse), a cluster the monitor's rows and the cluster's roles disagree on. */
enum { REFUSED_CLUSTER_SERVERS = 1, REFUSED_CLUSTER_USERS = 2, REFUSED_MONITOR = 4 };

/* One ProxySQL admin interface and what the agent knows about it. */
struct target {
	struct agent *ag;
	const struct sync_target *cfg;
	struct pxadmin_target pt;
	char *label; /* the name as a Prometheus label value (escaped) */
	pthread_t tid;
	struct pxadmin px;
	/* Written by the target thread, read by /readyz and /metrics: atomics, no lock. */
	atomic_bool reachable, synced_once, in_sync;
	unsigned long applied_gen;
	int64_t last_check_us;
	_Atomic double last_sync_unix;
	struct drain_rec *drains;
	size_t ndrains;
	struct shrink_hold *holds;
	size_t nholds;
	enum db_reason last_failure; /* of the last failed reconcile: how soon to try again */
	_Atomic int64_t unreachable_since_us; /* 0 while reachable */
	int64_t diverged_since_us; /* single-writer follower: since when its target differs from desired */
	char why[240]; /* why the target is not in sync, for /readyz (under ag->pub_mu) */
	/* What the last reconcile found, logged when it changes (and in /metrics: atomics). */
	_Atomic size_t protected_now, conflicts_now, foreign_now[TABLE_COUNT];
	_Atomic long cluster_peers, diffs_before_sync[TABLE_COUNT];
	_Atomic size_t monitor_rows; /* monitor hostgroup rows that name an owned hostgroup */
	bool facts_logged;
	_Atomic unsigned refused_now; /* what this target refuses (target.c REFUSED_* bits), logged when it changes */
	/* What the last verified reconcile left in its tables (target.c): a change whose checksums
	 * say nothing else moved is planned from it without reading the tables again. */
	struct target_known *known;
	/* A SAVE the hot path put off (save-delay), target thread only: due then (0: none), of
	 * which tables. */
	int64_t save_due_us;
	bool save_servers, save_users;
	/* metrics */
	atomic_ulong applies, errors_read, errors_apply, errors_verify, errors_connect, writer_guard;
	atomic_ulong foreign_staged_total[TABLE_COUNT], loads_owed, saves_owed;
	atomic_ulong hist[AGENT_HIST_BUCKETS + 1];
	atomic_ulong hist_sum_us; /* microseconds */
	atomic_ulong hist_count;
};

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

struct agent {
	struct sync_config *cfg;
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

/* Reconcile one target with `want` (one read, plan, apply, verify). Used by the target loop and
 * agent_once. Returns 0 when the target is now in the desired state (pending drains allowed),
 * 1 when drains are still pending or a guard holds a hostgroup, -1 on errors. With `print`,
 * prints the plan and applies nothing. */
int target_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print);

/* Log the rejections of a build that the previous build did not have (each once while it lasts;
 * past AGENT_SEEN_MAX at once, one line for the rest), count them in rejected_total, set
 * rejected_now. Caller holds ag->mu (or owns the agent). */
void agent_log_rejects(struct agent *ag, const struct layout_result *lr);

/* Publish the desired state's counts for /metrics (after want_servers and want_users change). */
void agent_publish_desired(struct agent *ag);

/* The /readyz verdict. It does not take ag->mu: it reads atomics and what the threads publish
 * under ag->pub_mu, so it answers at once whatever the agent is busy with. */
bool agent_ready(struct agent *ag, char *why, size_t len);

/* metrics.c: render /metrics (Prometheus text), without ag->mu as agent_ready; `s` as the value
 * of a Prometheus label (between the quotes): backslash, double quote and newline escaped, for the
 * caller to free; the apply-duration histogram's bucket bounds. */
void metrics_render(struct agent *ag, sk_buf *out);
char *metrics_label_value(const char *s);
extern const double metrics_hist_bounds_ms[AGENT_HIST_BUCKETS];

/* watch.c: one read of a watch's source (a KV prefix or a service, whose instances get the keys
 * the layout expects: SERVICE_KEY_PREFIX "<index>/<address>") with consistency `mode`, as
 * consul_kv_list. */
int watch_read(struct watch *w, uint64_t index, long wait_ms, enum consul_consistency mode, const deadline_t *dl,
	       struct consul_kv_list *out, struct consul_meta *meta, char *err, size_t errlen) SK_MUST_CHECK;

/* Forget what a target's tables were known to hold (the next reconcile reads them in full). */
void target_forget(struct target *t);
/* The thread bodies: a struct watch * (watch.c), a struct target * (target.c), the agent (lock.c,
 * announce.c). */
void *watch_main(void *arg);
void *target_main(void *arg);
void *lock_main(void *arg);
void *announce_main(void *arg);

/* single-writer (lock.c): whether a target of this agent uses it, and whether this agent holds the
 * cluster lock now (and may write). */
bool lock_single_writer(const struct agent *ag);
bool lock_may_write(struct agent *ag);

#endif
