/* report.c: what a target's reconciles say. The lines are logged once per change (a steady target
 * is quiet), the counts behind them kept in struct target for /metrics, and the reason a target is
 * not in sync kept for /readyz. Every reconcile step reports through here, so that the wording and
 * the once-per-change rule live in one place. */
#include "report.h"

#include <stdarg.h>
#include <stdio.h>

#include "agent.h"
#include "guard.h"
#include "log.h"

void report_unreachable(struct target *t)
{
	if (t->reachable || !t->unreachable_since_us)
		t->unreachable_since_us = deadline_now_us();
	t->reachable = false;
}

void report_why(struct agent *ag, struct target *t, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&ag->pub_mu);
	va_start(ap, fmt);
	vsnprintf(t->why, sizeof(t->why), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&ag->pub_mu);
}

/* KV users the plan left alone: named like ProxySQL's own logins, or colliding with users the agent
 * does not own. Logged when the count changes. */
static void report_users(struct agent *ag, struct target *t, const struct plan *p)
{
	if (p->user_protected != t->protected_now) {
		if (p->user_protected)
			log_warn("target %s: rejected %zu KV user(s) named like a login of ProxySQL itself (first: %s; "
				 "admin, stats, cluster or monitor credentials): never written",
				 t->pt.name, p->user_protected, p->first_protected);
		pthread_mutex_lock(&ag->mu);
		if (p->user_protected > t->protected_now)
			ag->rejected_total += p->user_protected - t->protected_now;
		t->protected_now = p->user_protected;
		pthread_mutex_unlock(&ag->mu);
	}
	if (p->user_conflicts != t->conflicts_now) {
		if (p->user_conflicts)
			log_warn(
				"target %s: %zu KV user(s) collide with users the agent does not own (first: %s); left "
				"alone (adopt-users)",
				t->pt.name, p->user_conflicts, p->first_conflict);
		t->conflicts_now = p->user_conflicts;
	}
}

/* Rows others staged in memory, per table: logged and counted when the count changes. */
static void report_foreign(struct agent *ag, struct target *t, const struct plan_drift *ds, const struct plan_drift *du)
{
	const char *const *tables = ag->mod->tables;
	const struct plan_drift *d[TABLE_COUNT] = { ds, du };
	bool hold = ag->cfg->settings.foreign_edits == SYNC_FOREIGN_HOLD;

	for (int k = 0; k < TABLE_COUNT; k++) {
		if (d[k]->foreign == t->foreign_now[k])
			continue;
		if (d[k]->foreign) {
			log_warn("target %s: %zu row(s) of %s staged in memory by someone else, not loaded: %s",
				 t->pt.name, d[k]->foreign, tables[k],
				 hold ? "held, nothing of that table is loaded while they are there (foreign-edits)"
				      : "the agent's next LOAD publishes them (foreign-edits)");
			t->foreign_staged_total[k] += d[k]->foreign;
		}
		t->foreign_now[k] = d[k]->foreign;
	}
}

/* What the target says of itself: monitor rows over the agent's hostgroups, ProxySQL Cluster
 * peers and pulls. Logged at the first connect, then on each change. */
static void report_facts(struct agent *ag, struct target *t, const struct tstate *st)
{
	size_t monitor_rows = 0;

	for (size_t i = 0; i < st->facts.families.n; i++)
		for (size_t k = 0; k < st->facts.families.v[i].n; k++)
			if (guard_in_list(ag->owned, ag->nowned, st->facts.families.v[i].hg[k])) {
				monitor_rows++;
				break;
			}
	if (!t->facts_logged || monitor_rows != t->monitor_rows || st->facts.cluster_peers != t->cluster_peers) {
		t->facts_logged = true;
		log_info("target %s: %zu monitor hostgroup row(s) over the agent's hostgroups; %ld ProxySQL Cluster "
			 "peer(s), pulling %s after %ld differing check(s) and %s after %ld "
			 "(0: never; admin-cluster_*_diffs_before_sync)",
			 t->pt.name, monitor_rows, st->facts.cluster_peers, ag->mod->tables[TABLE_SERVERS],
			 st->facts.servers_diffs_before_sync, ag->mod->tables[TABLE_USERS],
			 st->facts.users_diffs_before_sync);
		t->monitor_rows = monitor_rows;
		t->cluster_peers = st->facts.cluster_peers;
	}
	t->diffs_before_sync[TABLE_SERVERS] = st->facts.servers_diffs_before_sync;
	t->diffs_before_sync[TABLE_USERS] = st->facts.users_diffs_before_sync;
}

/* Log what the plan left alone and what others staged, once per change; keep the counts. */
void report_plan(struct agent *ag, struct target *t, const struct tstate *st, const struct plan *p,
		 const struct plan_drift *ds, const struct plan_drift *du)
{
	report_users(ag, t, p);
	report_foreign(ag, t, ds, du);
	report_facts(ag, t, st);
}

void report_in_sync(struct agent *ag, struct target *t)
{
	pthread_mutex_lock(&ag->pub_mu);
	t->why[0] = '\0';
	pthread_mutex_unlock(&ag->pub_mu);
	t->in_sync = true;
	t->synced_once = true;
	t->last_sync_unix = shared_unix_now();
}
