/* target.h: one ProxySQL admin interface and what the agent knows about it, and the thread that
 * keeps it in the desired state (target.c). One reconcile is pass.c's; its parts are known.c (what
 * the tables are known to hold between reconciles, the SAVE put off), cluster.c (ProxySQL Cluster
 * and monitor rows), guard.c (shrink holds, kept writers, drains) and report.c (logs, /readyz). */
#ifndef SK_SYNC_TARGET_H
#define SK_SYNC_TARGET_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "proxysql.h"

#define TARGET_HIST_BUCKETS 10 /* the apply-duration histogram (metrics_hist_bounds_ms) */

struct agent;
struct agent_want;
struct drain_rec; /* guard.h */
struct shrink_hold; /* guard.h */
struct target_known; /* known.c */

enum { TABLE_SERVERS, TABLE_USERS, TABLE_COUNT };

/* What a target refuses to let the agent write: a table its ProxySQL Cluster pulls (cluster-mode =
 * refuse), a cluster the monitor's rows and the cluster's roles disagree on. */
enum { REFUSED_CLUSTER_SERVERS = 1, REFUSED_CLUSTER_USERS = 2, REFUSED_MONITOR = 4, REFUSED_NO_TABLES = 8 };

/* One ProxySQL admin interface and what the agent knows about it. */
struct target {
	struct agent *ag;
	const struct sync_target *cfg;
	struct pxadmin_target pt;
	char *label; /* the name as a Prometheus label value (escaped) */
	char *side_name; /* the PostgreSQL side's "name/pgsql" (pt.name points to it); NULL: the MySQL side */
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
	_Atomic unsigned refused_now; /* what this target refuses (REFUSED_* bits), logged when it changes */
	/* What the last verified reconcile left in its tables (known.c): a change whose checksums
	 * say nothing else moved is planned from it without reading the tables again. */
	struct target_known *known;
	/* A SAVE the hot path put off (save-delay, known.c), target thread only: due then (0: none),
	 * of which tables. */
	int64_t save_due_us;
	bool save_servers, save_users;
	/* metrics */
	atomic_ulong applies, errors_read, errors_apply, errors_verify, errors_connect, writer_guard;
	atomic_ulong foreign_staged_total[TABLE_COUNT], loads_owed, saves_owed;
	atomic_ulong hist[TARGET_HIST_BUCKETS + 1];
	atomic_ulong hist_sum_us; /* microseconds */
	atomic_ulong hist_count;
};

/* Reconcile one target with `want` (one read, plan, apply, verify). Used by the target loop and
 * agent_once. Returns 0 when the target is now in the desired state (pending drains allowed),
 * 1 when drains are still pending or a guard holds a hostgroup, -1 on errors. With `print`,
 * prints the plan and applies nothing. */
int target_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print);

/* The thread body: `arg` is the struct target *. */
void *target_main(void *arg);

/* Free what the target holds (drains, holds, known rows, label), its thread stopped. The
 * connection is closed by the thread as it ends. */
void target_free(struct target *t);

#endif
