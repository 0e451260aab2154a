/* known.h: what a target's tables are read as for one plan (struct tstate), and what the agent
 * knows they hold between reconciles: the hot path's kept rows and the SAVE put off by save-delay
 * (known.c). */
#ifndef SK_SYNC_KNOWN_H
#define SK_SYNC_KNOWN_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "proxysql.h"
#include "target.h"

/* Everything read from a target for one plan: what it says of itself, its memory (main), runtime
 * where it may differ, and the checksums. */
struct tstate {
	struct px_facts facts;
	struct px_checksums ck;
	struct px_servers mem_s, rt_s;
	struct px_users mem_u;
	struct plan_rowset rt_u; /* runtime's users, as row hashes: the rows themselves are not kept */
	struct px_peers mem_p, rt_p; /* proxysql_servers, when the agent manages it */
	bool have_rt_s, have_rt_u; /* runtime read (false: runtime holds what memory holds) */
	/* The agent's hash of memory's users (pxadmin_users_checksum) was ProxySQL's CHECKSUM at the
	 * last full read: a hot pass that writes users computes the checksum it leaves. */
	bool users_sum_ok;
	/* What this target lets the agent write (cluster_scope()): the owned hostgroups less those of
	 * clusters refused here, the tables refused, and why. */
	long owned[AGENT_MAX_HOSTGROUPS];
	size_t nowned;
	bool refuse[TABLE_COUNT];
	unsigned refused; /* REFUSED_* bits */
	char refused_why[240];
};

/* Free what `st` holds and zero it. */
void known_tstate_free(struct tstate *st);

/* Read the target's tables in full into `st` (zeroed first): the facts, memory (users too with
 * `users`), the checksums (disk's with `disk`), runtime where it may differ, the fleet's
 * proxysql_servers. Returns 0, or -1 with `e` set (st is then for the caller to free). */
int known_read_state(struct target *t, bool users, bool disk, const deadline_t *dl, struct tstate *st,
		     struct db_err *e);

/* The hot path's read: take what the target is known to hold into `st` (t->known is then NULL;
 * known_remember puts it back) and when it was last read in full into `read_us`. t->known must be
 * set. */
void known_take(struct target *t, struct tstate *st, int64_t *read_us);

/* When the known rows were last read in full. t->known must be set. */
int64_t known_read_us(const struct target *t);

/* Before a hot-path apply: the checksums of the tables plan `p` writes are the ones known, and the
 * facts still hold (vouched for, or read again). Returns 1, 0 (read in full), -1 on errors (`e`). */
int known_holds(struct target *t, const struct plan *p, struct tstate *st, const deadline_t *dl, struct db_err *e);

/* Keep what the target's tables hold now: `st`'s rows (taken from it), or `after`'s rows for the
 * tables that plan wrote, with checksums `ck` and the time of the last full read. */
void known_remember(struct target *t, struct tstate *st, const struct plan *after, const struct px_checksums *ck,
		    int64_t read_us);

/* What a hot-path apply did, for its verify: the plan applied, the checksums it was planned from,
 * whether users are managed, whether the plan SAVEd. */
struct known_applied {
	const struct plan *plan;
	const struct px_checksums *before;
	bool users, disk;
	bool users_sum_ok; /* the tstate's: memory's users checksum is computed, not read back */
};

/* The hot path's verify: the checksums after the apply say runtime and disk hold what memory
 * holds. Returns 1 (verified, `ck` filled), 0 (read in full to verify), -1 on errors (`e`). */
int known_verify(struct target *t, const struct known_applied *a, const deadline_t *dl, struct px_checksums *ck,
		 struct db_err *e);

/* Forget what the target's tables were known to hold (the next reconcile reads them in full). */
void known_forget(struct target *t);

/* A hot-path pass started at `started` LOADed plan `p` without its SAVE (save-delay): the SAVE is
 * due save-delay after the first LOAD not yet saved, for every table written since. */
void known_put_off_save(struct target *t, const struct plan *p, int64_t started);

/* Stopping with a SAVE put off: send it, within admin-timeout and 700 ms of the stop (logged). */
void known_save_before_stopping(struct target *t);

#endif
