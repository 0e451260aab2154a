/* pass.h: one reconcile of one target (pass.c): read, decide, apply, verify, record. */
#ifndef SK_SYNC_PASS_H
#define SK_SYNC_PASS_H

#include <stdbool.h>

#include "target.h"

/* One reconcile as target_reconcile says, but -2 when the hot path found a checksum it did not
 * know before writing anything (the known rows are forgotten: the caller reads in full then). */
int pass_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print);

#endif
