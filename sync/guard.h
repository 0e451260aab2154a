/* guard.h: what keeps a target's servers from going too fast (guard.c): a writer hostgroup never
 * emptied, a hostgroup that shrinks held until confirmed, and the records of servers being
 * drained. */
#ifndef SK_SYNC_GUARD_H
#define SK_SYNC_GUARD_H

#include "known.h"

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

/* What the hostgroup guard decided for one owned hostgroup. */
enum hold_step {
	HOLD_NONE, /* not shrinking, not held */
	HOLD_DROP, /* not shrinking any more: the hold goes */
	HOLD_START, /* shrinking: held from now (or again, its counts changed) */
	HOLD_KEEP, /* shrinking: held, waiting for confirmations */
	HOLD_CONFIRMED, /* shrinking, confirmed: the hold goes, the hostgroup shrinks */
};

struct hold_decision {
	long hostgroup;
	size_t have_n, want_n;
	enum hold_step step;
};

/* What the guards decided for one plan. Deciding changes nothing but the desired rows; the record
 * (log lines, counters, the holds kept) follows once the plan stands, so that a hot path that
 * falls back to a full read records the guards once. */
struct guards {
	int writers; /* writer hostgroups that would be empty: their servers kept (guard_keep_writers) */
	int held; /* hostgroups the hostgroup guard holds */
	unsigned long reads, confirmations;
	size_t n;
	struct hold_decision hg[AGENT_MAX_HOSTGROUPS];
};

/* Whether hostgroup `hg` is one of v[0..n); whether server `s` is one of `want`. */
bool guard_in_list(const long *v, size_t n, long hg);
bool guard_is_wanted(const struct px_servers *want, const struct px_server *s);

/* Never empty a writer hostgroup (layout_keep_writers), unless allow-empty-writer: returns how many
 * writer hostgroups kept their servers in `want`. */
int guard_keep_writers(struct agent *ag, const long *owned, size_t nowned, struct px_servers *want,
		       const struct px_servers *have);

/* The hostgroup guard's decision for each hostgroup st owns, into `g`: the servers held are added
 * to `want`. Changes nothing else; guard_record_holds() records it. */
void guard_hostgroups(struct agent *ag, struct target *t, const struct tstate *st, struct px_servers *want,
		      const struct px_servers *have, struct guards *g);

/* Record what guard_hostgroups() decided: the holds kept, started, dropped; lines and counts. */
void guard_record_holds(struct agent *ag, struct target *t, const struct guards *g);

/* The record of server `s` being drained (made when first seen draining). */
struct drain_rec *guard_drain_track(struct target *t, const struct px_server *s);

/* Drop the records of servers no longer drained: gone from `have`, wanted again, or not
 * OFFLINE_SOFT. */
void guard_forget_drains(struct target *t, const struct px_servers *have, const struct px_servers *want);

/* Free the target's drain records and holds. */
void guard_free(struct target *t);

#endif
