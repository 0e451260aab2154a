/* target.c: one loop per ProxySQL admin target: connect, read, plan, apply, verify, and keep at it. */
#include "agent.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

#define PING_INTERVAL_MS 500

static struct drain_rec *drain_find(struct target *t, const struct px_server *s)
{
	for (size_t i = 0; i < t->ndrains; i++)
		if (t->drains[i].hostgroup == s->hostgroup && t->drains[i].port == s->port &&
		    strcmp(t->drains[i].host, s->host) == 0)
			return &t->drains[i];
	return NULL;
}

static bool in_list(const long *v, size_t n, long hg)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == hg)
			return true;
	return false;
}

static bool wanted(const struct px_servers *want, const struct px_server *s)
{
	return model_servers_find(want, s->hostgroup, s->host, s->port) != NULL;
}

/* Never empty a writer hostgroup (layout_keep_writers), unless allow-empty-writer. */
static int keep_writers(struct agent *ag, const long *owned, size_t nowned, struct px_servers *want,
			const struct px_servers *have)
{
	if (ag->cfg->settings.allow_empty_writer)
		return 0;
	return layout_keep_writers(&ag->cfg->layout, owned, nowned, want, have);
}

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
	/* What this target lets the agent write (scope()): the owned hostgroups less those of
	 * clusters refused here, the tables refused, and why. */
	long owned[AGENT_MAX_HOSTGROUPS];
	size_t nowned;
	bool refuse[TABLE_COUNT];
	unsigned refused; /* REFUSED_* bits */
	char refused_why[240];
};

static const char *const table_names[TABLE_COUNT] = { "mysql_servers", "mysql_users" };

static void mark_unreachable(struct target *t)
{
	if (t->reachable || !t->unreachable_since_us)
		t->unreachable_since_us = deadline_now_us();
	t->reachable = false;
}

static bool family_has(const struct px_family *f, long hg)
{
	return hg >= 0 && in_list(f->hg, f->n, hg);
}

/* A table that its ProxySQL Cluster pulls from peers is not written (cluster-mode = refuse). */
static void refuse_pulled(struct agent *ag, struct target *t, struct tstate *st)
{
	const struct layout_config *l = &ag->cfg->layout;
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
			 table_names[tb], table_names[tb], pulled[tb]);
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
static void scope(struct agent *ag, struct target *t, struct tstate *st)
{
	size_t k = 0;

	st->nowned = ag->nowned;
	memcpy(st->owned, ag->owned, ag->nowned * sizeof(long));
	st->refused_why[0] = '\0';
	refuse_pulled(ag, t, st);
	refuse_monitored(&ag->cfg->layout, st);
	for (size_t i = 0; i < st->nowned; i++)
		if (st->owned[i] >= 0)
			st->owned[k++] = st->owned[i];
	st->nowned = k;
	if (st->refuse[TABLE_SERVERS])
		st->nowned = 0;
}

/* cluster-mode = disable-pull: the target stops pulling the tables the agent manages from its
 * peers; the tables it does not manage keep syncing. */
static int disable_pull(struct agent *ag, struct target *t, struct tstate *st, const deadline_t *dl, struct db_err *e)
{
	bool managed[TABLE_COUNT] = { ag->nowned > 0, *ag->cfg->layout.users_prefix != '\0' };
	long *pulled[TABLE_COUNT] = { &st->facts.servers_diffs_before_sync, &st->facts.users_diffs_before_sync };
	bool changed = false;

	if (t->cfg->mode != SYNC_CLUSTER_DISABLE_PULL || st->facts.cluster_peers <= 0)
		return 0;
	for (int tb = 0; tb < TABLE_COUNT; tb++) {
		char sql[120];

		if (!managed[tb] || *pulled[tb] <= 0)
			continue;
		sk_fmt(sql, sizeof(sql), "SET admin-cluster_%s_diffs_before_sync=0", table_names[tb]);
		if (pxadmin_exec(&t->px, sql, dl, e) < 0)
			return -1;
		log_info("target %s: ProxySQL Cluster member: no longer pulls %s from its peers (cluster-mode = "
			 "disable-pull; was admin-cluster_%s_diffs_before_sync=%ld)",
			 t->pt.name, table_names[tb], table_names[tb], *pulled[tb]);
		*pulled[tb] = 0;
		changed = true;
	}
	if (layout_has_fleet(&ag->cfg->layout) && st->facts.peers_diffs_before_sync > 0) {
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

static void tstate_free(struct tstate *st)
{
	pxadmin_facts_free(&st->facts);
	model_servers_free(&st->mem_s);
	model_servers_free(&st->rt_s);
	model_users_free(&st->mem_u);
	plan_rowset_free(&st->rt_u);
	model_peers_free(&st->mem_p);
	model_peers_free(&st->rt_p);
	memset(st, 0, sizeof(*st));
}

struct rowset_sink {
	struct plan_rowset *set;
	const char *user_tag;
};

static void runtime_user(void *ctx, const struct px_user *u)
{
	const struct rowset_sink *k = ctx;

	plan_rowset_user(k->set, u, k->user_tag);
}

static int read_state(struct target *t, bool users, bool disk, const deadline_t *dl, struct tstate *st,
		      struct db_err *e)
{
	bool peers = layout_has_fleet(&t->ag->cfg->layout);
	struct rowset_sink sink = { &st->rt_u, t->ag->cfg->layout.user_tag };
	struct px_vouchers before;

	memset(st, 0, sizeof(*st));
	/* The vouchers before the facts: a LOAD between the two leaves vouchers that differ from the
	 * ones read with the checksums below, which then vouch for nothing. */
	if (pxadmin_vouchers(&t->px, dl, &before, e) < 0 || pxadmin_read_facts(&t->px, dl, &st->facts, e) < 0 ||
	    pxadmin_read(&t->px, dl, &st->mem_s, users ? &st->mem_u : NULL, e) < 0 ||
	    pxadmin_checksums(&t->px, dl, users, disk, &st->ck, e) < 0)
		return -1;
	if (!pxadmin_vouched(&before, &st->ck.v))
		memset(&st->ck.v, 0, sizeof(st->ck.v));
	/* Equal checksums: runtime was loaded from this memory and the monitor has moved nothing. */
	st->have_rt_s = st->ck.servers_memory != st->ck.servers_runtime;
	st->have_rt_u = users;
	if (pxadmin_read_runtime(&t->px, dl, st->have_rt_s ? &st->rt_s : NULL, users ? runtime_user : NULL, &sink, e) <
	    0)
		return -1;
	plan_rowset_seal(&st->rt_u);
	if (peers && (pxadmin_read_peers(&t->px, false, dl, &st->mem_p, e) < 0 ||
		      pxadmin_read_peers(&t->px, true, dl, &st->rt_p, e) < 0))
		return -1;
	return 0;
}

/* What a target's tables held after the last reconcile that verified them: memory's rows (runtime
 * held the same, nothing staged by others), the facts they were planned with, the checksums read
 * then (their vouchers vouch for the facts), and when they were last read in full. */
struct target_known {
	struct px_servers mem_s;
	struct px_users mem_u;
	struct px_facts facts;
	struct px_checksums ck;
	int64_t read_us;
};

void target_forget(struct target *t)
{
	if (!t->known)
		return;
	model_servers_free(&t->known->mem_s);
	model_users_free(&t->known->mem_u);
	pxadmin_facts_free(&t->known->facts);
	free(t->known);
	t->known = NULL;
}

/* The hot path's read: nothing. The known rows and facts stand for the target's until
 * known_holds() has checked the checksums of the tables the plan writes and the vouchers of the
 * facts. The known state is taken (a reconcile that ends well puts it back). */
static void read_known(struct target *t, struct tstate *st, int64_t *read_us)
{
	struct target_known *k = t->known;

	memset(st, 0, sizeof(*st));
	t->known = NULL;
	st->ck = k->ck; /* as read when the rows were verified; disk changes only by a SAVE */
	st->mem_s = k->mem_s;
	st->mem_u = k->mem_u;
	st->facts = k->facts;
	*read_us = k->read_us;
	free(k);
}

/* Which tables a plan writes. */
static void plan_tables(const struct plan *p, bool *servers, bool *users)
{
	*servers = *users = false;
	for (size_t i = 0; i < p->n; i++) {
		*servers = *servers || strstr(p->steps[i].sql, "MYSQL SERVERS") ||
			   strstr(p->steps[i].sql, "mysql_servers");
		*users = *users || strstr(p->steps[i].sql, "MYSQL USERS") || strstr(p->steps[i].sql, "mysql_users");
	}
}

/* Before a hot-path apply (or a pass with nothing to write): the checksums of the tables the plan
 * writes are the ones known (nobody changed that memory or loaded it since), and the facts the plan
 * was made with still hold: vouched for by runtime_checksums_values, or read again when they are
 * not (a module loaded since, an older ProxySQL) or when the plan writes users (names staged in
 * memory are protected too, and no checksum covers memory). Returns 1, 0 (read in full), -1 on
 * errors. */
static int known_holds(struct target *t, const struct plan *p, struct tstate *st, const deadline_t *dl,
		       struct db_err *e)
{
	const struct px_checksums *known = &st->ck;
	struct px_checksums ck;
	struct px_facts now;
	bool servers, users, same;

	plan_tables(p, &servers, &users);
	if (pxadmin_checksums(&t->px, dl, users, false, &ck, e) < 0)
		return -1;
	if ((servers && (ck.servers_memory != known->servers_memory || ck.servers_runtime != known->servers_runtime)) ||
	    (users && (ck.users_memory != known->users_memory || ck.users_runtime != known->users_runtime)))
		return 0;
	if (!users && pxadmin_vouched(&known->v, &ck.v))
		return 1;
	if (pxadmin_read_facts(&t->px, dl, &now, e) < 0)
		return -1;
	same = pxadmin_facts_equal(&now, &st->facts);
	pxadmin_facts_free(&now);
	if (same)
		st->ck.v = ck.v; /* read before the facts: they vouch for them from now on */
	return same;
}

/* The users after a plan that wrote some: the rows it left as read are moved out of `read`, only
 * the others copied (a change of one user among 50,000 holds them once, not twice); `read` is
 * emptied. */
static void take_users(struct px_users *dst, struct px_users *read, const struct plan *after)
{
	uintptr_t lo = (uintptr_t)read->v, hi = (uintptr_t)(read->v + read->n);

	dst->cap = after->nafter_users ? after->nafter_users : 1;
	dst->v = xcalloc(dst->cap, sizeof(*dst->v));
	for (size_t i = 0; i < after->nafter_users; i++) {
		uintptr_t at = (uintptr_t)after->after_users[i];

		if (read->n && at >= lo && at < hi) {
			struct px_user *u = &read->v[(at - lo) / sizeof(*read->v)];

			dst->v[dst->n++] = *u;
			u->username = NULL; /* moved */
		} else {
			model_users_add(dst, after->after_users[i]);
		}
	}
	model_users_free(read);
}

/* Keep what the target's tables hold now: `st`'s rows (taken), or the plan's rows after it ran. */
static void remember(struct target *t, struct tstate *st, const struct plan *after, const struct px_checksums *ck,
		     int64_t read_us)
{
	struct target_known *k = xcalloc(1, sizeof(*k));
	bool servers = false, users = false;

	target_forget(t);
	if (after)
		plan_tables(after, &servers, &users);
	/* A table the plan wrote: its rows after the plan (copies). One it did not write: the rows
	 * read, moved (a server change must not copy 50,000 users). */
	if (servers) {
		for (size_t i = 0; i < after->nafter_servers; i++)
			model_servers_add(&k->mem_s, after->after_servers[i]);
		model_servers_sort(&k->mem_s);
	} else {
		k->mem_s = st->mem_s;
		memset(&st->mem_s, 0, sizeof(st->mem_s));
	}
	if (users) {
		take_users(&k->mem_u, &st->mem_u, after);
	} else {
		k->mem_u = st->mem_u;
		memset(&st->mem_u, 0, sizeof(st->mem_u));
	}
	k->facts = st->facts;
	memset(&st->facts, 0, sizeof(st->facts));
	k->ck = *ck;
	k->read_us = read_us;
	t->known = k;
}

/* The hot path's verify: the checksums after the apply say runtime and disk hold what memory
 * holds (a LOAD that took, a SAVE that took). Returns 1 (verified, `ck` filled), 0 (read in full
 * to verify), -1 on errors. */
static int verify_known(struct target *t, const struct plan *p, const struct px_checksums *before, bool users,
			bool disk, const deadline_t *dl, struct px_checksums *ck, struct db_err *e)
{
	bool servers_loaded = false, servers_written, users_written;
	uint64_t before_v2 = before->v.servers_v2;

	/* A users LOAD is not checked here: runtime_checksums_values sums runtime's rows (one per
	 * role), which never equal memory's CHECKSUM; the full verify at resync-interval reads them. */
	for (size_t i = 0; i < p->n; i++)
		servers_loaded = servers_loaded || strcmp(p->steps[i].sql, "LOAD MYSQL SERVERS TO RUNTIME") == 0;
	plan_tables(p, &servers_written, &users_written);
	/* The users' checksums only when the plan wrote users. A table the plan did not write keeps
	 * the checksums it was verified with: only those vouch for its known rows. */
	if (pxadmin_checksums(&t->px, dl, users && users_written, disk, ck, e) < 0)
		return -1;
	if (!servers_written) {
		ck->servers_memory = before->servers_memory;
		ck->servers_disk = before->servers_disk;
		ck->servers_runtime = before->servers_runtime;
	}
	if (!users_written) {
		ck->users_memory = before->users_memory;
		ck->users_disk = before->users_disk;
		ck->users_runtime = before->users_runtime;
	}
	if (!disk) { /* not read, and unchanged: no SAVE was sent (the SAVE put off is owed from it) */
		ck->servers_disk = before->servers_disk;
		ck->users_disk = before->users_disk;
	}
	/* The facts still hold when no voucher moved but mysql_servers_v2 by the plan's own LOAD (its
	 * checksum covers mysql_servers too); otherwise the next hot pass reads them again. */
	if (servers_loaded)
		before_v2 = ck->v.servers_v2;
	if (!pxadmin_vouched(&(struct px_vouchers){ before->v.admin_vars, before->v.mysql_vars, before_v2,
						    before->v.peers, before->v.present },
			     &ck->v))
		memset(&ck->v, 0, sizeof(ck->v));
	if (servers_loaded && ck->servers_runtime != ck->servers_memory)
		return 0;
	if (disk && (ck->servers_memory != ck->servers_disk || (users && ck->users_memory != ck->users_disk)))
		return 0;
	return 1;
}

/* proxysql_servers: the announced fleet, this target itself always in it (announce-address). */
static void plan_fleet(struct sync_config *cfg, const struct agent_want *want, const struct tstate *st,
		       struct plan *out)
{
	const struct sync_settings *set = &cfg->settings;
	struct px_peers fleet;
	struct px_peer self = { 0 };
	char host[256];
	bool have_self = set->announce_parsed;

	model_peers_copy(&fleet, &want->peers);
	if (have_self) {
		snprintf(host, sizeof(host), "%s", set->announce_host);
		self.host = host;
		self.port = set->announce_port;
		self.weight = set->announce_weight;
		self.comment = (char *)set->announce_comment;
		model_peers_add(&fleet, self.host, self.port, self.weight, self.comment);
		model_peers_sort(&fleet);
	}
	plan_peers(&fleet, &st->mem_p, &st->rt_p, have_self ? &self : NULL, set->save_to_disk, out);
	model_peers_free(&fleet);
}

/* The plan that brings the target from `st` to `want_s` / `want`, with every owed LOAD and SAVE
 * derived from what the target says (drift between memory, runtime and disk). */
static void plan_state(struct agent *ag, const struct tstate *st, const struct px_servers *want_s,
		       const struct agent_want *want, const struct plan_drain *dinfo, size_t nd, bool save,
		       struct plan *out, struct plan_drift *ds, struct plan_drift *du)
{
	struct sync_config *cfg = ag->cfg;
	bool users = *cfg->layout.users_prefix != '\0';
	struct plan_options po = {
		.owned_hostgroups = st->owned,
		.nowned = st->nowned,
		.user_tag = cfg->layout.user_tag,
		.drain_timeout_ms = cfg->settings.drain_timeout_ms,
		.save_to_disk = save,
		.keep_servers = &want->keep_servers,
		.keep_users = &want->keep_users,
		.protected_users = &st->facts.protected_users,
		.adopt_users = cfg->settings.adopt_users,
		.hold_foreign = cfg->settings.foreign_edits == SYNC_FOREIGN_HOLD,
	};
	struct plan_inputs in = {
		.want_servers = st->refuse[TABLE_SERVERS] ? NULL : want_s,
		.have_servers = &st->mem_s,
		.runtime_servers = st->have_rt_s ? &st->rt_s : NULL,
		.want_users = users && !st->refuse[TABLE_USERS] ? &want->users : NULL,
		.have_users = users ? &st->mem_u : NULL,
		.runtime_users = users && st->have_rt_u ? &st->rt_u : NULL,
		.families = &st->facts.families,
		.servers_disk_differs = st->ck.servers_memory != st->ck.servers_disk,
		.users_disk_differs = st->ck.users_memory != st->ck.users_disk,
		.drains = dinfo,
		.ndrains = nd,
	};

	plan_target(&in, &po, out, ds, du);
	if (layout_has_fleet(&cfg->layout))
		plan_fleet(cfg, want, st, out);
}

static unsigned long reads_now(struct agent *ag)
{
	unsigned long n = ~0UL;

	pthread_mutex_lock(&ag->mu);
	for (size_t i = 0; i < ag->nwatches; i++)
		if (ag->watches[i].reads < n)
			n = ag->watches[i].reads;
	pthread_mutex_unlock(&ag->mu);
	return n;
}

static struct shrink_hold *hold_find(struct target *t, long hg)
{
	for (size_t i = 0; i < t->nholds; i++)
		if (t->holds[i].hostgroup == hg)
			return &t->holds[i];
	return NULL;
}

static void hold_drop(struct target *t, struct shrink_hold *h)
{
	*h = t->holds[--t->nholds];
}

static bool serving(const struct px_server *s)
{
	return !sk_streq_ci(s->status, "OFFLINE_SOFT") && !sk_streq_ci(s->status, "OFFLINE_HARD");
}

/* Serving servers of hostgroup `hg` in `have`, and desired ones in `want`. */
static void hostgroup_counts(const struct px_servers *have, const struct px_servers *want, long hg, size_t *have_n,
			     size_t *want_n)
{
	*have_n = *want_n = 0;
	for (size_t i = 0; i < have->n; i++)
		*have_n += have->v[i].hostgroup == hg && serving(&have->v[i]);
	for (size_t i = 0; i < want->n; i++)
		*want_n += want->v[i].hostgroup == hg;
}

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
	int writers; /* writer hostgroups that would be empty: their servers kept (keep_writers) */
	int held; /* hostgroups the hostgroup guard holds */
	unsigned long reads, confirmations;
	size_t n;
	struct hold_decision hg[AGENT_MAX_HOSTGROUPS];
};

static enum hold_step hold_step(const struct shrink_hold *h, const struct hold_decision *d, double fraction,
				const struct guards *g)
{
	bool shrink = d->have_n > 0 && d->want_n < d->have_n &&
		      (d->want_n == 0 || (double)(d->have_n - d->want_n) / (double)d->have_n > fraction);

	if (!shrink)
		return h ? HOLD_DROP : HOLD_NONE;
	if (!h || h->want_n != d->want_n || h->have_n != d->have_n)
		return HOLD_START;
	return g->reads - h->reads_mark >= g->confirmations ? HOLD_CONFIRMED : HOLD_KEEP;
}

/* The hostgroup guard: a managed hostgroup that the desired state empties or shrinks by more than
 * shrink-fraction, compared with what this target has now (so the first snapshot after a start, a
 * reload or --once has a baseline too), keeps the target's servers until `confirmations` further
 * reads of every prefix agree. Decides, adds the servers held to `want`; record_holds() follows. */
static void guard_hostgroups(struct agent *ag, struct target *t, const struct tstate *st, struct px_servers *want,
			     const struct px_servers *have, struct guards *g)
{
	double fraction = ag->cfg->settings.shrink_fraction;

	g->confirmations = (unsigned long)ag->cfg->settings.confirmations;
	g->reads = reads_now(ag);
	for (size_t o = 0; o < st->nowned; o++) {
		struct hold_decision *d = &g->hg[g->n++];

		d->hostgroup = st->owned[o];
		hostgroup_counts(have, want, d->hostgroup, &d->have_n, &d->want_n);
		d->step = hold_step(hold_find(t, d->hostgroup), d, fraction, g);
		if (d->step != HOLD_START && d->step != HOLD_KEEP)
			continue;
		for (size_t i = 0; i < have->n; i++)
			if (have->v[i].hostgroup == d->hostgroup && serving(&have->v[i]) && !wanted(want, &have->v[i]))
				model_servers_add(want, &have->v[i]);
		g->held++;
	}
	if (g->held)
		model_servers_sort(want);
}

/* A new hold (or one whose counts changed): counted, and the watchers read again at once to
 * confirm, not at the next change. */
static void hold_start(struct agent *ag, struct target *t, struct shrink_hold *h, const struct hold_decision *d,
		       const struct guards *g)
{
	if (!h) {
		t->holds = xrealloc(t->holds, (t->nholds + 1) * sizeof(*t->holds));
		h = &t->holds[t->nholds++];
	}
	h->hostgroup = d->hostgroup;
	h->have_n = d->have_n;
	h->want_n = d->want_n;
	h->reads_mark = g->reads;
	pthread_mutex_lock(&ag->mu);
	ag->hostgroup_guard_blocks++;
	ag->reread_until_us = deadline_now_us() + 5000000;
	pthread_mutex_unlock(&ag->mu);
	shared_wake_watchers(ag);
	log_warn("guard: target %s: hostgroup %ld would go from %zu to %zu servers; keeping them until "
		 "%lu "
		 "more reads agree (confirmations)",
		 t->pt.name, d->hostgroup, d->have_n, d->want_n, g->confirmations);
}

/* Record what guard_hostgroups() decided: the holds kept, started and dropped, the lines, the
 * counts; while any holds, the watchers re-read and the targets look again soon. */
static void record_holds(struct agent *ag, struct target *t, const struct guards *g)
{
	for (size_t i = 0; i < g->n; i++) {
		const struct hold_decision *d = &g->hg[i];
		struct shrink_hold *h = hold_find(t, d->hostgroup);

		if (d->step == HOLD_START) {
			hold_start(ag, t, h, d, g);
		} else if (d->step == HOLD_CONFIRMED) {
			log_warn("guard: target %s: hostgroup %ld from %zu to %zu servers confirmed by %lu reads",
				 t->pt.name, d->hostgroup, d->have_n, d->want_n, g->confirmations);
			hold_drop(t, h);
		} else if (d->step == HOLD_DROP) {
			hold_drop(t, h);
		}
	}
	if (g->held) {
		pthread_mutex_lock(&ag->mu);
		ag->reread_until_us = deadline_now_us() + 5000000;
		pthread_cond_broadcast(&ag->cv);
		pthread_mutex_unlock(&ag->mu);
	}
}

static void set_why(struct agent *ag, struct target *t, const char *fmt, ...) SK_PRINTF(3, 4);

static void set_why(struct agent *ag, struct target *t, const char *fmt, ...)
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
	static const char *const tables[TABLE_COUNT] = { "mysql_servers", "mysql_users" };
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
			if (in_list(ag->owned, ag->nowned, st->facts.families.v[i].hg[k])) {
				monitor_rows++;
				break;
			}
	if (!t->facts_logged || monitor_rows != t->monitor_rows || st->facts.cluster_peers != t->cluster_peers) {
		t->facts_logged = true;
		log_info("target %s: %zu monitor hostgroup row(s) over the agent's hostgroups; %ld ProxySQL Cluster "
			 "peer(s), pulling mysql_servers after %ld differing check(s) and mysql_users after %ld "
			 "(0: never; admin-cluster_*_diffs_before_sync)",
			 t->pt.name, monitor_rows, st->facts.cluster_peers, st->facts.servers_diffs_before_sync,
			 st->facts.users_diffs_before_sync);
		t->monitor_rows = monitor_rows;
		t->cluster_peers = st->facts.cluster_peers;
	}
	t->diffs_before_sync[TABLE_SERVERS] = st->facts.servers_diffs_before_sync;
	t->diffs_before_sync[TABLE_USERS] = st->facts.users_diffs_before_sync;
}

/* Log what the plan left alone and what others staged, once per change; keep the counts. */
static void report(struct agent *ag, struct target *t, const struct tstate *st, const struct plan *p,
		   const struct plan_drift *ds, const struct plan_drift *du)
{
	report_users(ag, t, p);
	report_foreign(ag, t, ds, du);
	report_facts(ag, t, st);
}

static void mark_in_sync(struct agent *ag, struct target *t)
{
	pthread_mutex_lock(&ag->pub_mu);
	t->why[0] = '\0';
	pthread_mutex_unlock(&ag->pub_mu);
	t->in_sync = true;
	t->synced_once = true;
	t->last_sync_unix = shared_unix_now();
}

/* single-writer, not the writer: write nothing; the target is in sync once the cluster has carried
 * the writer's change to it (its plan is empty), not when it stays different longer than
 * cluster-converge-timeout. Returns 0 (in sync) or 1 (look again soon). */
static int follow(struct agent *ag, struct target *t, const struct plan *p)
{
	int64_t now = deadline_now_us(), limit = ag->cfg->settings.cluster_converge_timeout_us;

	if (p->n == 0 && !p->servers_held && !p->users_held) {
		if (t->diverged_since_us)
			log_info("target %s: the cluster carried the writer's state here (%.2f s after this agent saw "
				 "the change)",
				 t->pt.name, (double)(now - t->diverged_since_us) / 1e6);
		t->diverged_since_us = 0;
		mark_in_sync(ag, t);
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
		set_why(ag, t,
			"single-writer follower: differs from the desired state for longer than "
			"cluster-converge-timeout");
	} else if (!t->synced_once) {
		set_why(ag, t, "single-writer follower: waiting for the cluster to carry the writer's state");
	}
	return 1;
}

/* single-writer: a peer pulls only a checksum whose epoch (whole seconds) is newer than its own; a
 * LOAD in the same second as a peer's last one would never spread ("epoch times are EQUAL"). So the
 * writer's LOAD waits, up to a second and a half and within the deadline, for a later second. */
static int await_newer_epoch(struct agent *ag, struct target *t, const struct plan *p, const deadline_t *dl)
{
	long long epoch;
	struct db_err e;
	bool loads = false;

	for (size_t i = 0; i < p->n && !loads; i++)
		loads = strncmp(p->steps[i].sql, "LOAD MYSQL ", 11) == 0;
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

/* Only drains (and the LOAD and SAVE that follow them) left to do. */
static bool only_drains(const struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		const char *sql = p->steps[i].sql;

		if (strncmp(sql, "UPDATE mysql_servers SET status='OFFLINE_SOFT'", 46) != 0 &&
		    strncmp(sql, "DELETE FROM mysql_servers", 25) != 0 && strncmp(sql, "LOAD ", 5) != 0 &&
		    strncmp(sql, "SAVE ", 5) != 0)
			return false;
	}
	return true;
}

static void forget_drains(struct target *t, const struct px_servers *have, const struct px_servers *want)
{
	for (size_t i = 0; i < t->ndrains;) {
		const struct px_server *h =
			model_servers_find(have, t->drains[i].hostgroup, t->drains[i].host, t->drains[i].port);

		if (!h || wanted(want, h) || !sk_streq_ci(h->status, "OFFLINE_SOFT")) {
			free(t->drains[i].host);
			t->drains[i] = t->drains[--t->ndrains];
		} else {
			i++;
		}
	}
}

/* One reconcile's working state, from the read to the record. */
struct pass {
	struct agent *ag;
	struct target *t;
	const struct agent_want *want;
	bool print, users, disk;
	bool save; /* this pass SAVEs what it LOADs (disk, unless the hot path puts the SAVE off) */
	deadline_t dl;
	struct tstate st;
	struct px_servers want_s; /* the desired servers of the hostgroups written here, guards applied */
	struct plan plan, check;
	struct plan_drift ds, du;
	/* Servers being drained: the rows, how many connections still use them, the plan's view. */
	const struct px_server **draining;
	long *used;
	struct plan_drain *dinfo;
	size_t nd;
	struct db_err e;
	int64_t started, read_us;
	int rc, fast;
	struct guards guards;
	bool verified_known;
	struct px_checksums after_ck;
};

/* Start a reconcile: its deadline, and whether it may take the hot path: a target still connected
 * since a reconcile that verified its tables, within resync-interval of their last full read,
 * outside a ProxySQL Cluster and a fleet. */
static void pass_begin(struct pass *r, struct agent *ag, struct target *t, const struct agent_want *want, bool print)
{
	struct sync_config *cfg = ag->cfg;

	memset(r, 0, sizeof(*r));
	r->ag = ag;
	r->t = t;
	r->want = want;
	r->print = print;
	r->users = *cfg->layout.users_prefix != '\0';
	r->disk = r->save = cfg->settings.save_to_disk;
	r->dl = deadline_in_ms(cfg->settings.admin_timeout_ms);
	r->started = r->read_us = deadline_now_us();
	r->rc = -1;
	if (!t->px.db.connected || print || layout_has_fleet(&cfg->layout) ||
	    t->cfg->mode == SYNC_CLUSTER_SINGLE_WRITER ||
	    (t->known && r->started - t->known->read_us >= cfg->settings.resync_interval_us))
		target_forget(t);
}

static int connect_target(struct pass *r)
{
	struct target *t = r->t;
	bool was = t->px.db.connected;
	char warning[512];

	if (pxadmin_connect(&t->px, &t->pt, &r->dl, &r->e) >= 0) {
		/* Once per connection made, not per pass: connections are kept. */
		if (!was && sync_target_unverified(t->cfg, warning, sizeof(warning)))
			log_warn("%s", warning);
		return 0;
	}
	if (t->reachable || !t->last_check_us)
		log_warn("target %s: cannot connect: %s", t->pt.name, r->e.msg);
	mark_unreachable(t);
	t->last_failure = r->e.reason;
	t->errors_connect++;
	set_why(r->ag, t, "unreachable: %s", r->e.msg);
	return -1;
}

/* Read: the known rows and what the target says of itself (the hot path), or its tables. */
static int read_tables(struct pass *r)
{
	struct target *t = r->t;

	if (t->known) {
		read_known(t, &r->st, &r->read_us);
		r->fast = 1;
		/* save-delay: until the first LOAD not yet saved is that old, LOAD and put the SAVE off */
		if (r->disk && r->ag->cfg->settings.save_delay_us > 0 &&
		    (!t->save_due_us || r->started < t->save_due_us))
			r->save = false;
	}
	if (!r->fast && read_state(t, r->users, r->disk, &r->dl, &r->st, &r->e) < 0) {
		log_warn("target %s: reading its tables failed: %s", t->pt.name, r->e.msg);
		t->errors_read++;
		t->last_failure = r->e.reason;
		pxadmin_close(&t->px);
		mark_unreachable(t);
		set_why(r->ag, t, "reading its tables failed: %s", r->e.msg);
		tstate_free(&r->st);
		return -1;
	}
	if (!t->reachable)
		log_info("target %s: connected", t->pt.name);
	t->reachable = true;
	t->unreachable_since_us = 0;
	return 0;
}

/* What this target lets the agent write (scope()), said when it changes and in /readyz. */
static void apply_scope(struct pass *r)
{
	struct target *t = r->t;

	scope(r->ag, t, &r->st);
	if (r->st.refused != t->refused_now) {
		if (r->st.refused)
			log_warn("target %s: %s", t->pt.name, r->st.refused_why);
		t->refused_now = r->st.refused;
	}
	if (r->st.refused) { /* /readyz says so from now on, not only once the rest is applied */
		t->in_sync = false;
		set_why(r->ag, t, "%s", r->st.refused_why);
	}
}

/* The desired servers of the hostgroups written here, with what the guards keep from going
 * (decided here, recorded by record_guards()). */
static void guard_wanted(struct pass *r)
{
	const struct px_servers *all = &r->want->servers;

	for (size_t i = 0; i < all->n; i++)
		if (in_list(r->st.owned, r->st.nowned, all->v[i].hostgroup))
			model_servers_add(&r->want_s, &all->v[i]);
	r->guards.writers = keep_writers(r->ag, r->st.owned, r->st.nowned, &r->want_s, &r->st.mem_s);
	guard_hostgroups(r->ag, r->t, &r->st, &r->want_s, &r->st.mem_s, &r->guards);
}

/* Record the guards once the plan stands (on the hot path, once the checksums vouch for the known
 * rows it was planned from): once per reconcile, whatever read it took. */
static void record_guards(struct pass *r)
{
	if (r->guards.writers) {
		r->t->writer_guard++;
		log_warn("guard: target %s: %d writer hostgroup(s) would be empty; keeping their servers",
			 r->t->pt.name, r->guards.writers);
	}
	record_holds(r->ag, r->t, &r->guards);
}

/* The drain's record of a server being drained: since when (the clock starts when first seen
 * draining, or when the agent restarted). */
static struct drain_rec *drain_track(struct target *t, const struct px_server *s)
{
	struct drain_rec *r = drain_find(t, s);

	if (!r) {
		t->drains = model_grow(t->drains, t->ndrains, sizeof(*t->drains));
		r = &t->drains[t->ndrains++];
		r->hostgroup = s->hostgroup;
		r->host = xstrdup(s->host);
		r->port = s->port;
		r->since_us = deadline_now_us();
	}
	return r;
}

/* Servers being drained: how many connections still use them, and since when. */
static int read_drains(struct pass *r)
{
	struct target *t = r->t;

	for (size_t i = 0; i < r->st.mem_s.n; i++) {
		const struct px_server *s = &r->st.mem_s.v[i];

		if (in_list(r->st.owned, r->st.nowned, s->hostgroup) && !wanted(&r->want_s, s) &&
		    sk_streq_ci(s->status, "OFFLINE_SOFT")) {
			r->draining = model_grow(r->draining, r->nd, sizeof(*r->draining));
			r->draining[r->nd++] = s;
		}
	}
	if (!r->nd)
		return 0;
	r->used = xcalloc(r->nd, sizeof(long));
	if (pxadmin_conn_used(&t->px, &r->dl, r->draining, r->nd, r->used, &r->e) < 0) {
		log_warn("target %s: reading stats_mysql_connection_pool failed: %s", t->pt.name, r->e.msg);
		t->errors_read++;
		t->last_failure = r->e.reason;
		return -1;
	}
	r->dinfo = xcalloc(r->nd, sizeof(*r->dinfo));
	for (size_t i = 0; i < r->nd; i++) {
		struct drain_rec *d = drain_track(t, r->draining[i]);

		r->dinfo[i].hostgroup = r->draining[i]->hostgroup;
		r->dinfo[i].host = d->host; /* not the row's: the verify below reads afresh */
		r->dinfo[i].port = r->draining[i]->port;
		r->dinfo[i].conn_used = r->used[i];
		r->dinfo[i].draining_ms = (deadline_now_us() - d->since_us) / 1000;
	}
	return 0;
}

/* Decide: what this target lets the agent write, the guards, the drains, the plan (on the hot
 * path, only while the checksums of the tables it writes are the known ones). False when the
 * reconcile ends here, r->rc saying how. */
static bool decide(struct pass *r)
{
	struct target *t = r->t;

	if (disable_pull(r->ag, t, &r->st, &r->dl, &r->e) < 0) {
		log_warn("target %s: disabling its ProxySQL Cluster pull failed: %s", t->pt.name, r->e.msg);
		t->errors_apply++;
		t->last_failure = r->e.reason;
		set_why(r->ag, t, "disabling its ProxySQL Cluster pull failed: %s", r->e.msg);
		return false;
	}
	apply_scope(r);
	guard_wanted(r);
	if (read_drains(r) < 0)
		return false;
	plan_state(r->ag, &r->st, &r->want_s, r->want, r->dinfo, r->nd, r->save, &r->plan, &r->ds, &r->du);
	if (r->fast) {
		int k = known_holds(t, &r->plan, &r->st, &r->dl, &r->e);

		if (k < 0) {
			t->errors_read++;
			t->last_failure = r->e.reason;
			set_why(r->ag, t, "reading its checksums failed: %s", r->e.msg);
			return false;
		}
		if (k == 0) {
			r->rc = -2;
			return false;
		}
	}
	record_guards(r);
	report(r->ag, t, &r->st, &r->plan, &r->ds, &r->du);
	return true;
}

/* --dry-run: print the plan instead of applying it. */
static void print_plan(struct pass *r)
{
	char *text = plan_text(&r->plan);

	printf("-- target %s: %zu statement(s)\n%s", r->t->pt.name, r->plan.n, text);
	fflush(stdout);
	free(text);
	r->rc = 0;
}

static void apply_failed(struct pass *r, size_t done)
{
	struct target *t = r->t;
	const struct plan *p = &r->plan;

	if (r->ag->stop)
		log_warn("target %s: stopping: abandoned the apply after %zu of %zu statement(s), before its "
			 "LOAD",
			 t->pt.name, done, p->n);
	else
		log_error("target %s: statement %zu of %zu failed: %s: %s", t->pt.name, done + 1, p->n, r->e.msg,
			  p->steps[done].shown);
	t->errors_apply++;
	t->last_failure = r->e.reason;
	t->in_sync = false;
	set_why(r->ag, t, "statement %zu of %zu failed: %s", done + 1, p->n, r->e.msg);
	pxadmin_close(&t->px);
}

/* A hot-path pass that LOADed without its SAVE (save-delay): the SAVE is due save-delay after the
 * first LOAD not yet saved, for every table written since. */
static void put_off_save(struct pass *r)
{
	struct target *t = r->t;
	bool servers, users;

	if (r->save || !r->disk || !r->plan.n)
		return;
	plan_tables(&r->plan, &servers, &users);
	if (!t->save_due_us) {
		t->save_due_us = r->started + r->ag->cfg->settings.save_delay_us;
		t->save_servers = t->save_users = false;
	}
	t->save_servers = t->save_servers || servers;
	t->save_users = t->save_users || users;
}

/* Apply the plan (or print it, or, a single-writer follower, only watch the cluster carry the
 * writer's). False when the reconcile ends here, r->rc saying how. */
static bool apply(struct pass *r)
{
	struct agent *ag = r->ag;
	struct target *t = r->t;
	bool single_writer = t->cfg->mode == SYNC_CLUSTER_SINGLE_WRITER;
	size_t done = 0;

	if (r->print) {
		print_plan(r);
		return false;
	}
	if (single_writer && !lock_may_write(ag)) {
		r->rc = follow(ag, t, &r->plan);
		return false;
	}
	for (size_t i = 0; i < r->plan.n; i++) {
		if (strncmp(r->plan.steps[i].sql, "LOAD ", 5) == 0 && !r->plan.servers_changed &&
		    !r->plan.users_changed)
			t->loads_owed++;
		else if (strncmp(r->plan.steps[i].sql, "SAVE ", 5) == 0 && i == 0 && !t->save_due_us)
			t->saves_owed++;
	}
	if (r->plan.n && single_writer && await_newer_epoch(ag, t, &r->plan, &r->dl) < 0)
		return false;
	if (r->plan.n && pxadmin_apply(&t->px, &r->plan, &r->dl, &ag->stop, &done, &r->e) < 0) {
		apply_failed(r, done);
		return false;
	}
	put_off_save(r);
	return true;
}

/* The full verify: what ProxySQL has now, memory, runtime and disk, needs nothing more but drains. */
static bool verify_read(struct pass *r)
{
	struct target *t = r->t;

	r->fast = 0;
	/* The statements have run: their text need not stay while the tables are read again. */
	plan_drop_text(&r->plan);
	tstate_free(&r->st);
	r->read_us = deadline_now_us();
	if (read_state(t, r->users, r->disk, &r->dl, &r->st, &r->e) < 0) {
		t->errors_read++;
		t->last_failure = r->e.reason;
		set_why(r->ag, t, "reading its tables after the apply failed: %s", r->e.msg);
		return false;
	}
	scope(r->ag, t, &r->st);
	plan_state(r->ag, &r->st, &r->want_s, r->want, r->dinfo, r->nd, r->save, &r->check, &r->ds, &r->du);
	if (only_drains(&r->check) && !r->check.servers_held && !r->check.users_held)
		return true;
	for (size_t i = 0; i < r->check.n; i++)
		if (!only_drains(&(struct plan){ .steps = &r->check.steps[i], .n = 1 })) {
			log_error("target %s: verify failed: still needed after apply: %s", t->pt.name,
				  r->check.steps[i].shown);
			break;
		}
	t->errors_verify++;
	t->in_sync = false;
	set_why(r->ag, t, "verify failed after an apply");
	return false;
}

/* Verify. The hot path (planned from known rows) checks the checksums: runtime and disk hold what
 * memory holds. Otherwise, or when they do not say so, the tables are read in full (verify_read). */
static bool verify(struct pass *r)
{
	if (r->plan.n && r->fast && r->plan.after_exact && !r->guards.writers && !r->guards.held && !r->st.refused &&
	    r->nd == 0) {
		int v = verify_known(r->t, &r->plan, &r->st.ck, r->users, r->save, &r->dl, &r->after_ck, &r->e);

		if (v < 0) {
			r->t->errors_read++;
			r->t->last_failure = r->e.reason;
			set_why(r->ag, r->t, "reading its checksums after the apply failed: %s", r->e.msg);
			return false;
		}
		r->verified_known = v == 1;
	}
	return !r->plan.n || r->verified_known || verify_read(r);
}

/* Record an apply: the latency histogram, the count, one line. */
static void record_apply(struct pass *r)
{
	struct target *t = r->t;
	const struct plan *p = &r->plan;
	double ms = (double)(deadline_now_us() - r->started) / 1000.0;
	size_t b = 0;
	char what[400];

	while (b < AGENT_HIST_BUCKETS && ms > metrics_hist_bounds_ms[b])
		b++;
	t->hist[b]++;
	t->hist_sum_us += (unsigned long)(ms * 1000.0);
	t->hist_count++;
	t->applies++;
	log_info("target %s: applied %zu statement%s in %.1f ms: %s", t->pt.name, p->n, p->n == 1 ? "" : "s", ms,
		 plan_describe(p, what, sizeof(what)));
}

/* Held, refused or guarded although the apply went well: not in sync, and why. Returns 1 (look
 * again soon) or 0. */
static int still_held(struct pass *r)
{
	struct target *t = r->t;

	if (!r->plan.servers_held && !r->plan.users_held && !r->st.refused && !r->guards.held)
		return 0;
	t->in_sync = false;
	if (r->plan.servers_held || r->plan.users_held)
		set_why(r->ag, t, "%s held: rows staged by someone else are not loaded (foreign-edits = hold)",
			r->plan.servers_held ? "mysql_servers" : "mysql_users");
	else if (r->st.refused)
		set_why(r->ag, t, "%s", r->st.refused_why);
	else
		set_why(r->ag, t, "guard: %d hostgroup(s) shrinking, waiting for confirmations", r->guards.held);
	return 1;
}

/* Conclude: in the desired state or not, and what the tables are known to hold now. */
static void conclude(struct pass *r)
{
	struct target *t = r->t;
	const struct layout_config *l = &r->ag->cfg->layout;
	bool draining = r->plan.draining || r->plan.server_drains;

	if (still_held(r)) {
		r->rc = 1;
		return;
	}
	if (!t->in_sync)
		log_info("target %s: in the desired state (%zu servers, %zu users)%s", t->pt.name, r->want_s.n,
			 r->users ? r->want->users.n : 0, draining ? "; draining" : "");
	mark_in_sync(r->ag, t);
	r->rc = draining ? 1 : 0;
	/* What the tables hold now is known when nothing was held, refused, guarded or drained and
	 * runtime held what memory held (in the agent's rows and in the others'). */
	if (r->rc == 0 && !r->print && !r->guards.held && !r->guards.writers && !r->st.refused && r->nd == 0 &&
	    !draining && r->st.facts.cluster_peers == 0 && !layout_has_fleet(l) &&
	    t->cfg->mode != SYNC_CLUSTER_SINGLE_WRITER && !r->ds.owned && !r->ds.foreign && !r->du.owned &&
	    !r->du.foreign)
		remember(t, &r->st, r->verified_known ? &r->plan : NULL, r->verified_known ? &r->after_ck : &r->st.ck,
			 r->read_us);
	else
		target_forget(t);
}

static void pass_end(struct pass *r)
{
	if (r->save && r->disk && !r->print && r->rc >= 0) /* it saved what was put off */
		r->t->save_due_us = 0;
	forget_drains(r->t, &r->st.mem_s, &r->want_s);
	plan_free(&r->plan);
	plan_free(&r->check);
	free(r->draining);
	free(r->dinfo);
	free(r->used);
	model_servers_free(&r->want_s);
	tstate_free(&r->st);
}

/* One reconcile: read, decide, apply, verify, record. -2 when the hot path found a checksum it
 * did not know before writing anything (the caller reads in full then). */
static int reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print)
{
	struct pass r;
	int rc;

	pass_begin(&r, ag, t, want, print);
	if (connect_target(&r) < 0 || read_tables(&r) < 0)
		return -1;
	if (decide(&r) && apply(&r) && verify(&r)) {
		if (r.plan.n)
			record_apply(&r);
		conclude(&r);
	}
	rc = r.rc;
	pass_end(&r);
	return rc;
}

int target_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print)
{
	int rc = reconcile(ag, t, want, print);

	return rc == -2 ? reconcile(ag, t, want, print) : rc; /* known forgotten: a full read */
}

/* Wait up to PING_INTERVAL_MS (or until a SAVE put off is due) for a desired state this target
 * has not applied. False when there is none yet (or the agent stops); otherwise its generation,
 * and whether it is new here or the SAVE is due. */
static bool await_desired(struct agent *ag, struct target *t, unsigned long *gen, bool *need)
{
	struct timespec ts;
	int64_t at, wait_us = PING_INTERVAL_MS * 1000, now = deadline_now_us();
	bool have;

	if (t->save_due_us && t->save_due_us - now < wait_us)
		wait_us = t->save_due_us > now ? t->save_due_us - now : 0;
	pthread_mutex_lock(&ag->mu);
	clock_gettime(CLOCK_REALTIME, &ts);
	at = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + wait_us;
	ts.tv_sec = at / 1000000;
	ts.tv_nsec = (at % 1000000) * 1000;
	if (!ag->stop && (!ag->have_desired || ag->desired_gen == t->applied_gen) && wait_us > 0)
		pthread_cond_timedwait(&ag->cv, &ag->mu, &ts);
	have = !ag->stop && ag->have_desired;
	if (have) {
		*gen = ag->desired_gen;
		*need = *gen != t->applied_gen || (t->save_due_us && deadline_now_us() >= t->save_due_us);
	}
	pthread_mutex_unlock(&ag->mu);
	return have;
}

/* A lost connection may be a restarted ProxySQL (its config lost or reloaded from disk):
 * reconnecting always re-reads, and applies what differs. True when the target must be read. */
static bool lost_connection(struct target *t, bool was_connected)
{
	deadline_t dl = deadline_in_ms(PING_INTERVAL_MS * 2);
	struct db_err e;

	if (!was_connected)
		return true;
	if (pxadmin_ping(&t->px, &dl, &e) >= 0)
		return false;
	log_warn("target %s: admin stopped answering (%s); reconnecting", t->pt.name, e.msg);
	pxadmin_close(&t->px);
	mark_unreachable(t);
	return true;
}

/* One reconcile with the desired state published now; `gen` is set to its generation. */
static int reconcile_published(struct agent *ag, struct target *t, unsigned long *gen)
{
	struct agent_want *w;
	int r;

	pthread_mutex_lock(&ag->mu);
	w = shared_want_get(ag);
	*gen = ag->desired_gen;
	pthread_mutex_unlock(&ag->mu);
	r = target_reconcile(ag, t, w, false);
	t->last_check_us = deadline_now_us();
	shared_want_put(w);
#ifdef __GLIBC__
	malloc_trim(0); /* give the pages of a big plan back: RSS stays flat while idle */
#endif
	return r;
}

/* Stopping with a SAVE put off: send it, so that a ProxySQL restarted from disk later keeps what
 * runtime has; within admin-timeout and until 700 ms after the stop (agent_stop waits 800 for the
 * targets, counted from about then). */
static void save_before_stopping(struct target *t)
{
	int64_t left_ms = (t->ag->stop_us + 700000 - deadline_now_us()) / 1000;
	deadline_t dl = deadline_min(deadline_in_ms(t->ag->cfg->settings.admin_timeout_ms), deadline_in_ms(left_ms));
	struct db_err e;

	if (!t->save_due_us || !t->px.db.connected)
		return;
	if (left_ms <= 0) {
		log_warn("target %s: stopping: no time left for the SAVE put off by save-delay; disk differs "
			 "from memory until the next start saves it",
			 t->pt.name);
		return;
	}
	if ((t->save_servers && pxadmin_exec(&t->px, "SAVE MYSQL SERVERS TO DISK", &dl, &e) < 0) ||
	    (t->save_users && pxadmin_exec(&t->px, "SAVE MYSQL USERS TO DISK", &dl, &e) < 0)) {
		log_warn("target %s: stopping: the SAVE put off by save-delay failed: %s", t->pt.name, e.msg);
		return;
	}
	t->save_due_us = 0;
	log_info("target %s: stopping: saved to disk what was LOADed since the last SAVE", t->pt.name);
}

void *target_main(void *arg)
{
	struct target *t = arg;
	struct agent *ag = t->ag;
	int64_t resync_us = ag->cfg->settings.resync_interval_us;
	int attempt = 0;
	bool pending = false;

	while (!ag->stop) {
		unsigned long gen;
		bool need, was_connected = t->px.db.connected;
		int r;

		if (!await_desired(ag, t, &gen, &need))
			continue;
		if (lost_connection(t, was_connected))
			need = true;
		if (ag->stop)
			break;
		if (!need && !pending && deadline_now_us() - t->last_check_us < resync_us)
			continue;
		r = reconcile_published(ag, t, &gen);
		if (r >= 0) {
			t->applied_gen = gen;
			pending = r == 1;
			attempt = 0;
			continue;
		}
		t->in_sync = false;
		/* A refused connection is a ProxySQL that is down or restarting: try again soon, so
		 * that one that comes back empty gets its config at once, however long it was away.
		 * Other failures (access denied, timeouts, errors) back off to 5 s. */
		if (shared_nap(ag, t->last_failure == DB_REFUSED ? 200 + random() % 101
								 : shared_backoff_ms(attempt++, 5000)))
			break;
	}
	save_before_stopping(t);
	pxadmin_close(&t->px);
	return NULL;
}
