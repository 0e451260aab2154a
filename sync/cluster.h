/* cluster.h: a target in a ProxySQL Cluster or under ProxySQL's monitor (cluster.c): what the
 * agent may write there (cluster-mode, roles), disable-pull, and single-writer's follower and
 * writer. */
#ifndef SK_SYNC_CLUSTER_H
#define SK_SYNC_CLUSTER_H

#include "known.h"

/* Who owns what on this target (st->owned, st->refuse, st->refused and why): the agent's
 * hostgroups less those of clusters a monitor row moves (or roles = "monitor" ones no row has),
 * none when its Cluster pulls mysql_servers (cluster-mode = refuse). */
void cluster_scope(struct agent *ag, struct target *t, struct tstate *st);

/* cluster-mode = disable-pull: the target stops pulling the tables the agent manages from its
 * peers (logged). Returns 0, or -1 with `e` set. */
int cluster_disable_pull(struct agent *ag, struct target *t, struct tstate *st, const deadline_t *dl, struct db_err *e);

/* single-writer, not the writer: nothing is written; the target is in sync once plan `p` is empty.
 * Returns 0 (in sync) or 1 (look again soon). */
int cluster_follow(struct agent *ag, struct target *t, const struct plan *p);

/* single-writer, the writer: before a LOAD, wait (up to 1.5 s, within `dl`) for a second newer than
 * the peers' last epoch. Returns 0, or -1 (the read failed, logged; or the agent stops). */
int cluster_await_newer_epoch(struct agent *ag, struct target *t, const struct plan *p, const deadline_t *dl);

#endif
