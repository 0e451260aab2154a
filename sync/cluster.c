/* cluster.c: a target that is a member of a ProxySQL Cluster, or whose servers ProxySQL's monitor
 * moves. What the agent may write there: no table its Cluster pulls from peers (cluster-mode =
 * refuse), or the pull switched off (disable-pull); no hostgroup a monitor row covers unless the
 * cluster's roles say "monitor". With single-writer, the writer's LOAD waits for a newer epoch and
 * the followers only watch the Cluster carry its state. Apart from the reconcile (pass.c) because
 * these are ProxySQL's rules, not the agent's. */
#include "cluster.h"

#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "guard.h"
#include "log.h"
#include "report.h"

static bool family_has(const struct px_family *f, long hg)
{
	return hg >= 0 && guard_in_list(f->hg, f->n, hg);
}

/* A table that its ProxySQL Cluster pulls from peers is not written (cluster-mode = refuse). */
static void refuse_pulled(struct agent *ag, struct target *t, struct tstate *st)
{
	const struct layout_config *l = ag->layout;
	bool managed[TABLE_COUNT] = { ag->nowned > 0, *l->users_prefix != '\0' };
	long pulled[TABLE_COUNT] = { st->facts.servers_diffs_before_sync, st->facts.users_diffs_before_sync };

	for (int tb = 0; tb < TABLE_COUNT; tb++) {
		st->refuse[tb] = managed[tb] && st->facts.cluster_peers > 0 && pulled[tb] > 0 &&
				 t->cfg->mode == SYNC_CLUSTER_REFUSE;
		if (!st->refuse[tb])
			continue;
		st->refused |= tb == TABLE_SERVERS ? REFUSED_CLUSTER_SERVERS : REFUSED_CLUSTER_USERS;
		snprintf(st->refused_why, sizeof(st->refused_why),
			 "in a ProxySQL Cluster that pulls %s from its peers (admin-cluster_%s_diffs_before_sync=%ld): "
			 "not "
			 "written; choose cluster-mode = \"disable-pull\" or \"single-writer\"",
			 ag->mod->tables[tb], ag->mod->tables[tb], pulled[tb]);
	}
}

/* The monitor hostgroup row that covers cluster `cl`: with roles = "monitor", the one whose writer
 * hostgroup is the cluster's writer; otherwise one that has any of its hostgroups. NULL: none. */
static const struct px_family *monitor_row(const struct tstate *st, const struct layout_cluster *cl)
{
	const struct px_family *hit = NULL;

	for (size_t i = 0; i < st->facts.families.n && !hit; i++) {
		const struct px_family *f = &st->facts.families.v[i];

		if (cl->monitor_roles ? f->hg[0] == cl->writer_hostgroup
				      : family_has(f, cl->writer_hostgroup) || family_has(f, cl->reader_hostgroup))
			hit = f;
		for (size_t r = 0; r < cl->nremote && !hit && !cl->monitor_roles; r++)
			if (family_has(f, cl->remote[r].hostgroup))
				hit = f;
	}
	return hit;
}

/* Cluster `cl`'s hostgroups are not written here (marked -1 in st->owned). */
static void disown_cluster(struct tstate *st, const struct layout_cluster *cl)
{
	for (size_t i = 0; i < st->nowned; i++)
		if (st->owned[i] == cl->writer_hostgroup || st->owned[i] == cl->reader_hostgroup)
			st->owned[i] = -1;
	for (size_t r = 0; r < cl->nremote; r++)
		for (size_t i = 0; i < st->nowned; i++)
			if (st->owned[i] == cl->remote[r].hostgroup)
				st->owned[i] = -1;
}

/* A cluster with roles = "kv" whose hostgroups a monitor row covers is not written, nor one with
 * roles = "monitor" that no monitor row has as its writer. */
static void refuse_monitored(const struct layout_config *l, struct tstate *st)
{
	for (size_t c = 0; c < l->nclusters; c++) {
		const struct layout_cluster *cl = &l->clusters[c];
		const struct px_family *hit = monitor_row(st, cl);

		if (cl->monitor_roles ? hit != NULL : hit == NULL)
			continue;
		st->refused |= REFUSED_MONITOR;
		if (cl->monitor_roles)
			snprintf(st->refused_why, sizeof(st->refused_why),
				 "cluster %s has roles = \"monitor\" but no monitor hostgroup row here has "
				 "writer_hostgroup "
				 "%ld: not written",
				 cl->alias, cl->writer_hostgroup);
		else
			snprintf(
				st->refused_why, sizeof(st->refused_why),
				"cluster %s: a %s row (writer %ld) covers its hostgroups, ProxySQL's monitor moves its "
				"servers: not written; set roles = \"monitor\" for it",
				cl->alias, hit->table, hit->hg[0]);
		disown_cluster(st, cl);
	}
}

/* Who owns what on this target: the agent's hostgroups less those refused_monitored(), none when
 * refuse_pulled() refuses mysql_servers. */
void cluster_scope(struct agent *ag, struct target *t, struct tstate *st)
{
	size_t k = 0;

	st->nowned = ag->nowned;
	memcpy(st->owned, ag->owned, ag->nowned * sizeof(long));
	st->refused_why[0] = '\0';
	refuse_pulled(ag, t, st);
	refuse_monitored(ag->layout, st);
	for (size_t i = 0; i < st->nowned; i++)
		if (st->owned[i] >= 0)
			st->owned[k++] = st->owned[i];
	st->nowned = k;
	if (st->refuse[TABLE_SERVERS])
		st->nowned = 0;
}

/* cluster-mode = disable-pull: the target stops pulling the tables the agent manages from its
 * peers; the tables it does not manage keep syncing. */
int cluster_disable_pull(struct agent *ag, struct target *t, struct tstate *st, const deadline_t *dl, struct db_err *e)
{
	bool managed[TABLE_COUNT] = { ag->nowned > 0, *ag->layout->users_prefix != '\0' };
	long *pulled[TABLE_COUNT] = { &st->facts.servers_diffs_before_sync, &st->facts.users_diffs_before_sync };
	bool changed = false;

	if (t->cfg->mode != SYNC_CLUSTER_DISABLE_PULL || st->facts.cluster_peers <= 0)
		return 0;
	for (int tb = 0; tb < TABLE_COUNT; tb++) {
		char sql[120];

		if (!managed[tb] || *pulled[tb] <= 0)
			continue;
		sk_fmt(sql, sizeof(sql), "SET admin-cluster_%s_diffs_before_sync=0", ag->mod->tables[tb]);
		if (pxadmin_exec(&t->px, sql, dl, e) < 0)
			return -1;
		log_info("target %s: ProxySQL Cluster member: no longer pulls %s from its peers (cluster-mode = "
			 "disable-pull; was admin-cluster_%s_diffs_before_sync=%ld)",
			 t->pt.name, ag->mod->tables[tb], ag->mod->tables[tb], *pulled[tb]);
		*pulled[tb] = 0;
		changed = true;
	}
	if (layout_has_fleet(ag->layout) && st->facts.peers_diffs_before_sync > 0) {
		/* proxysql_servers follows the announced fleet: the agent's too */
		if (pxadmin_exec(&t->px, "SET admin-cluster_proxysql_servers_diffs_before_sync=0", dl, e) < 0)
			return -1;
		log_info("target %s: ProxySQL Cluster member: no longer pulls proxysql_servers from its peers "
			 "(cluster-mode = disable-pull; the agent keeps it equal to the announced fleet)",
			 t->pt.name);
		st->facts.peers_diffs_before_sync = 0;
		changed = true;
	}
	if (changed && (pxadmin_exec(&t->px, "LOAD ADMIN VARIABLES TO RUNTIME", dl, e) < 0 ||
			pxadmin_exec(&t->px, "SAVE ADMIN VARIABLES TO DISK", dl, e) < 0))
		return -1;
	return 0;
}

/* single-writer, not the writer: write nothing; the target is in sync once the cluster has carried
 * the writer's change to it (its plan is empty), not when it stays different longer than
 * cluster-converge-timeout. Returns 0 (in sync) or 1 (look again soon). */
int cluster_follow(struct agent *ag, struct target *t, const struct plan *p)
{
	int64_t now = deadline_now_us(), limit = ag->cfg->settings.cluster_converge_timeout_us;

	if (p->n == 0 && !p->servers_held && !p->users_held) {
		if (t->diverged_since_us)
			log_info("target %s: the cluster carried the writer's state here (%.2f s after this agent saw "
				 "the change)",
				 t->pt.name, (double)(now - t->diverged_since_us) / 1e6);
		t->diverged_since_us = 0;
		report_in_sync(ag, t);
		return 0;
	}
	if (!t->diverged_since_us)
		t->diverged_since_us = now;
	if (now - t->diverged_since_us > limit) {
		if (t->in_sync)
			log_warn("target %s: single-writer follower: still %zu statement(s) from this agent's desired "
				 "state after %.0f s (cluster-converge-timeout); every member's agent must compute the "
				 "same desired state (the same configuration)",
				 t->pt.name, p->n, (double)limit / 1e6);
		t->in_sync = false;
		report_why(ag, t,
			   "single-writer follower: differs from the desired state for longer than "
			   "cluster-converge-timeout");
	} else if (!t->synced_once) {
		report_why(ag, t, "single-writer follower: waiting for the cluster to carry the writer's state");
	}
	return 1;
}

/* single-writer: a peer pulls only a checksum whose epoch (whole seconds) is newer than its own; a
 * LOAD in the same second as a peer's last one would never spread ("epoch times are EQUAL"). So the
 * writer's LOAD waits, up to a second and a half and within the deadline, for a later second. */
int cluster_await_newer_epoch(struct agent *ag, struct target *t, const struct plan *p, const deadline_t *dl)
{
	long long epoch;
	struct db_err e;
	bool loads = false;
	char load[16];

	sk_fmt(load, sizeof(load), "LOAD %s ", p->m->cmd);
	for (size_t i = 0; i < p->n && !loads; i++)
		loads = strncmp(p->steps[i].sql, load, strlen(load)) == 0;
	if (!loads || t->cluster_peers <= 0)
		return 0;
	if (pxadmin_peer_epoch(&t->px, dl, &epoch, &e) < 0) {
		log_warn("target %s: reading stats_proxysql_servers_checksums failed: %s", t->pt.name, e.msg);
		t->errors_read++;
		return -1;
	}
	for (int i = 0; i < 15 && (long long)shared_unix_now() <= epoch && deadline_left_ms(dl) > 200; i++)
		if (shared_nap(ag, 100))
			return -1;
	return 0;
}
