/* plan.h: (desired, current) -> the admin statements that make ProxySQL match (a pure function). */
#ifndef SK_PLAN_H
#define SK_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"
#include "module.h"

/* What the pool says about a server that is being drained (OFFLINE_SOFT and no longer wanted). */
struct plan_drain {
	long hostgroup;
	const char *host;
	long port;
	long conn_used; /* ConnUsed in stats_mysql_connection_pool; 0 when absent */
	int64_t draining_ms; /* how long the agent has seen it draining */
};

struct plan_options {
	const struct px_module *module; /* the tables written (NULL: px_mysql) */
	const long *owned_hostgroups; /* sorted; servers in other hostgroups are left alone */
	size_t nowned;
	const char *user_tag; /* users whose comment starts with this are the agent's */
	int64_t drain_timeout_ms; /* a draining server is deleted after this even with used connections */
	bool save_to_disk; /* SAVE ... TO DISK after each LOAD */
	/* Rejected means kept: servers and users the plan leaves exactly as the target has them. */
	const struct px_keeps *keep_servers;
	const struct px_names *keep_users;
	/* Names the target's admin, stats, cluster and monitor logins use: a user of that name is
	 * never written (a frontend row locks that login out), only removed when it is the agent's. */
	const struct px_names *protected_users;
	bool adopt_users; /* a KV user may replace a user of the same name that is not the agent's */
	/* What the target itself says, table by table (from its checksums and runtime tables):
	 * memory differs from runtime in the agent's rows (a LOAD is owed), memory differs from disk
	 * (with save_to_disk, a SAVE is owed), and rows of others staged in memory but not loaded. */
	bool load_owed_servers, load_owed_users;
	bool save_owed_servers, save_owed_users;
	size_t foreign_servers, foreign_users;
	bool hold_foreign; /* foreign-edits = hold: no LOAD (nor anything else) of a table with such rows */
};

/* What memory and runtime disagree on, in the agent's rows and in the others'. */
struct plan_drift {
	size_t owned, foreign;
};

struct plan_step {
	char *sql; /* sent to the admin, one statement */
	char *shown; /* the same with passwords replaced by '***', for logs and --dry-run (== sql
		      * when there is nothing to redact) */
};

struct plan {
	const struct px_module *m; /* the tables the statements write */
	struct plan_step *steps;
	size_t n;
	/* Counts for logs and metrics. */
	size_t server_inserts, server_updates, server_drains, server_deletes, draining;
	size_t user_inserts, user_updates, user_deletes;
	size_t peer_inserts, peer_updates, peer_deletes;
	bool servers_changed, users_changed;
	/* Left alone: KV users that collide with a user that is not the agent's (adopt_users off),
	 * KV users named like a protected login; the first name of each, for the log. */
	size_t user_conflicts, user_protected;
	const char *first_conflict, *first_protected;
	bool servers_held, users_held; /* hold_foreign stopped that table */
	/* The rows memory holds once the statements have run (pointers into the want and have arrays
	 * given to plan_build; users in order, servers to be sorted), for a caller that keeps what the
	 * target has; a drained row changes status and a held table is not planned, so either leaves
	 * after_exact false. */
	const struct px_server **after_servers;
	size_t nafter_servers;
	const struct px_user **after_users;
	size_t nafter_users;
	bool after_exact;
};

/* proxysql_servers: make `have` (memory) equal `want` (the announced fleet), never removing `self`
 * (the target itself; NULL: none); LOAD PROXYSQL SERVERS TO RUNTIME when a row changed or runtime
 * differs from memory, SAVE ... TO DISK with save_to_disk. Appends to `p`. Pure. */
void plan_peers(const struct px_peers *want, const struct px_peers *have, const struct px_peers *runtime,
		const struct px_peer *self, bool save_to_disk, struct plan *p);

/* Memory against runtime. Servers: runtime's SHUNNED counts as ONLINE, OFFLINE_HARD rows (removed,
 * still in the pool) are left out on both sides, and the hostgroups of one monitor row count as
 * one (the monitor moves servers between them in runtime only). A server is the agent's when its
 * hostgroup is owned. Users: a memory row stands for one runtime row per role (frontend,
 * backend), inactive rows for none, NULL schema and password read as ''; a user is the agent's
 * when its comment carries the tag. Each side is a set; `d` counts the rows in one side only. */
void plan_drift_servers(const struct px_servers *memory, const struct px_servers *runtime,
			const struct px_families *families, const struct plan_options *o, struct plan_drift *d);
void plan_drift_users(const struct px_users *memory, const struct px_users *runtime, const struct plan_options *o,
		      struct plan_drift *d);

/* A set of rows compared by hash (memory against runtime), so that runtime's rows need not be kept:
 * plan_rowset_user adds a user row as runtime holds it (one entry per role, none when inactive;
 * owned when its comment carries `user_tag`); plan_rowset_seal sorts it and drops duplicates
 * (plan_drift_users_set wants it sealed). */
struct plan_rowhash {
	uint64_t h[2];
	bool owned;
};

struct plan_rowset {
	size_t n;
	struct plan_rowhash *v;
	bool sealed;
};

void plan_rowset_user(struct plan_rowset *s, const struct px_user *u, const char *user_tag);
void plan_rowset_seal(struct plan_rowset *s);
void plan_rowset_free(struct plan_rowset *s);
/* plan_drift_users with runtime's rows as a sealed set. */
void plan_drift_users_set(const struct px_users *memory, const struct plan_rowset *runtime,
			  const struct plan_options *o, struct plan_drift *d);

/* Everything a target's plan is made from: the desired rows, its memory (have), its runtime where it
 * may differ from memory (NULL: runtime was loaded from this memory, the checksums say so), what
 * its monitor rows are, whether its disk differs from memory, and the servers being drained. */
struct plan_inputs {
	const struct px_servers *want_servers, *have_servers, *runtime_servers;
	const struct px_users *want_users, *have_users; /* want NULL: users not managed */
	const struct plan_rowset *runtime_users; /* sealed; NULL: not read */
	const struct px_families *families;
	bool servers_disk_differs, users_disk_differs;
	const struct plan_drain *drains;
	size_t ndrains;
};

/* Compute the statements: per server INSERT / UPDATE / drain (UPDATE status='OFFLINE_SOFT') /
 * DELETE once drained, then LOAD MYSQL SERVERS TO RUNTIME (and SAVE ... TO DISK); per user
 * DELETE + INSERT when it differs, DELETE when gone (the agent's users only); then LOAD MYSQL
 * USERS TO RUNTIME (and SAVE). A table whose rows need nothing gets a LOAD only when one is owed
 * (memory differs from runtime in the agent's rows), a SAVE only when one is owed (memory differs
 * from disk, and no foreign row would be saved without being loaded): a drain poll, a resync that
 * finds nothing and a reconnect send nothing. Arrays must be sorted (model_*_sort). Values must
 * already be validated (layout does it); everything is quoted anyway. From `in` it takes
 * the desired and present rows (servers when want_servers and have_servers are set, users when
 * want_users and have_users are) and the drains; runtime and disk are `o`'s owed flags. Pure; free
 * with plan_free. */
void plan_build(const struct plan_inputs *in, const struct plan_options *o, struct plan *out);

/* The drift (memory against runtime, plan_drift_*) and the plan for one target: fills the owed
 * LOADs and SAVEs and the foreign counts of `o` from `in`, then plan_build. Pure. */
void plan_target(const struct plan_inputs *in, struct plan_options *o, struct plan *out, struct plan_drift *ds,
		 struct plan_drift *du);

/* The plan as text, one statement a line ending in ";", passwords redacted. Caller frees. */
char *plan_text(const struct plan *p);

/* Free the statements and the rows after (wiped), keeping n, the counts and the flags: a plan that
 * has run and whose text is no longer needed holds no memory that grows with the rows. */
void plan_drop_text(struct plan *p);

/* What the plan changes, in an operator's words, into buf: "1 server added, 2 users changed", or
 * for a plan of LOADs and SAVEs only, what those do ("saved to disk what was loaded before (a
 * SAVE put off by save-delay)"). Pure. Returns buf. */
const char *plan_describe(const struct plan *p, char *buf, size_t len);

void plan_free(struct plan *p);

#endif
