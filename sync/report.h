/* report.h: what a target's reconciles say (report.c): the lines logged once per change, the
 * counts /metrics shows, and why /readyz says the target is not in sync. */
#ifndef SK_SYNC_REPORT_H
#define SK_SYNC_REPORT_H

#include "known.h"
#include "util.h"

/* The target stopped answering (or never did): since when. */
void report_unreachable(struct target *t);

/* Why the target is not in sync, for /readyz (under ag->pub_mu). */
void report_why(struct agent *ag, struct target *t, const char *fmt, ...) SK_PRINTF(3, 4);

/* Log what plan `p` left alone and what others staged (ds, du), and what the target says of
 * itself (st), once per change; keep the counts. */
void report_plan(struct agent *ag, struct target *t, const struct tstate *st, const struct plan *p,
		 const struct plan_drift *ds, const struct plan_drift *du);

/* The target is in the desired state: no why, in sync, when. */
void report_in_sync(struct agent *ag, struct target *t);

#endif
