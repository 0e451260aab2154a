/* pass.c: one reconcile of one target, as steps over one working state (struct pass): connect,
 * read (the kept rows on the hot path, known.c; else the tables), decide (what the target lets the
 * agent write, cluster.c; the guards, guard.c; the plan), apply (or print, or follow the writer),
 * verify, and conclude (in sync or not, what the tables are known to hold now). What each step
 * says goes through report.c. */
#include "pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "cluster.h"
#include "config_check.h"
#include "guard.h"
#include "known.h"
#include "lock.h"
#include "log.h"
#include "metrics.h"
#include "report.h"

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
static void plan_state(struct pass *r, struct plan *out)
{
	const struct tstate *st = &r->st;
	const struct agent_want *want = r->want;
	struct sync_config *cfg = r->ag->cfg;
	bool users = *r->ag->layout->users_prefix != '\0';
	struct plan_options po = {
		.module = r->ag->mod,
		.owned_hostgroups = st->owned,
		.nowned = st->nowned,
		.user_tag = r->ag->layout->user_tag,
		.drain_timeout_ms = cfg->settings.drain_timeout_ms,
		.save_to_disk = r->save,
		.keep_servers = &want->keep_servers,
		.keep_users = &want->keep_users,
		.protected_users = &st->facts.protected_users,
		.adopt_users = cfg->settings.adopt_users,
		.hold_foreign = cfg->settings.foreign_edits == SYNC_FOREIGN_HOLD,
	};
	struct plan_inputs in = {
		.want_servers = st->refuse[TABLE_SERVERS] ? NULL : &r->want_s,
		.have_servers = &st->mem_s,
		.runtime_servers = st->have_rt_s ? &st->rt_s : NULL,
		.want_users = users && !st->refuse[TABLE_USERS] ? &want->users : NULL,
		.have_users = users ? &st->mem_u : NULL,
		.runtime_users = users && st->have_rt_u ? &st->rt_u : NULL,
		.families = &st->facts.families,
		.servers_disk_differs = st->ck.servers_memory != st->ck.servers_disk,
		.users_disk_differs = st->ck.users_memory != st->ck.users_disk,
		.drains = r->dinfo,
		.ndrains = r->nd,
	};

	plan_target(&in, &po, out, &r->ds, &r->du);
	if (layout_has_fleet(r->ag->layout))
		plan_fleet(cfg, want, st, out);
}

/* Only drains (and the LOAD and SAVE that follow them) left to do. */
static bool only_drains(const struct plan *p)
{
	char drain[64], del[40];
	size_t ndrain, ndel;

	sk_fmt(drain, sizeof(drain), "UPDATE %s SET status='OFFLINE_SOFT'", p->m->tables[TABLE_SERVERS]);
	sk_fmt(del, sizeof(del), "DELETE FROM %s", p->m->tables[TABLE_SERVERS]);
	ndrain = strlen(drain);
	ndel = strlen(del);
	for (size_t i = 0; i < p->n; i++) {
		const char *sql = p->steps[i].sql;

		if (strncmp(sql, drain, ndrain) != 0 && strncmp(sql, del, ndel) != 0 && strncmp(sql, "LOAD ", 5) != 0 &&
		    strncmp(sql, "SAVE ", 5) != 0)
			return false;
	}
	return true;
}

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
	r->users = *r->ag->layout->users_prefix != '\0';
	r->disk = r->save = cfg->settings.save_to_disk;
	r->dl = deadline_in_ms(cfg->settings.admin_timeout_ms);
	r->started = r->read_us = deadline_now_us();
	r->rc = -1;
	if (!t->px.db.connected || print || layout_has_fleet(ag->layout) ||
	    t->cfg->mode == SYNC_CLUSTER_SINGLE_WRITER ||
	    (t->known && r->started - known_read_us(t) >= cfg->settings.resync_interval_us))
		known_forget(t);
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
	report_unreachable(t);
	t->last_failure = r->e.reason;
	t->errors_connect++;
	report_why(r->ag, t, "unreachable: %s", r->e.msg);
	return -1;
}

/* The PostgreSQL side on a ProxySQL without pgsql tables (before 3.0): refused, said once, in
 * /readyz while it lasts; the MySQL side is another agent and goes on. */
static void no_module_tables(struct pass *r)
{
	struct target *t = r->t;

	if (!(t->refused_now & REFUSED_NO_TABLES))
		log_error("target %s: this ProxySQL has no %s tables (%s; ProxySQL 3.0 or later has them): the %s side "
			  "is not written here, the other side is not affected",
			  t->pt.name, r->ag->mod->name, r->e.msg, r->ag->mod->name);
	t->refused_now = REFUSED_NO_TABLES;
	t->reachable = true;
	t->in_sync = false;
	t->last_failure = r->e.reason;
	report_why(r->ag, t, "no %s tables on this ProxySQL (3.0 or later has them): not written", r->ag->mod->name);
	known_tstate_free(&r->st);
}

/* Read: the known rows and what the target says of itself (the hot path), or its tables. */
static int read_tables(struct pass *r)
{
	struct target *t = r->t;

	if (t->known) {
		known_take(t, &r->st, &r->read_us);
		r->fast = 1;
		/* save-delay: until the first LOAD not yet saved is that old, LOAD and put the SAVE off */
		if (r->disk && r->ag->cfg->settings.save_delay_us > 0 &&
		    (!t->save_due_us || r->started < t->save_due_us))
			r->save = false;
	}
	if (!r->fast && known_read_state(t, r->users, r->disk, &r->dl, &r->st, &r->e) < 0) {
		if (r->ag->parent && strstr(r->e.msg, "no such table")) {
			no_module_tables(r);
			return -1;
		}
		log_warn("target %s: reading its tables failed: %s", t->pt.name, r->e.msg);
		t->errors_read++;
		t->last_failure = r->e.reason;
		pxadmin_close(&t->px);
		report_unreachable(t);
		report_why(r->ag, t, "reading its tables failed: %s", r->e.msg);
		known_tstate_free(&r->st);
		return -1;
	}
	if (!t->reachable)
		log_info("target %s: connected", t->pt.name);
	t->reachable = true;
	t->unreachable_since_us = 0;
	return 0;
}

/* What this target lets the agent write (cluster_scope()), said when it changes and in /readyz. */
static void apply_scope(struct pass *r)
{
	struct target *t = r->t;

	cluster_scope(r->ag, t, &r->st);
	if (r->st.refused != t->refused_now) {
		if (r->st.refused)
			log_warn("target %s: %s", t->pt.name, r->st.refused_why);
		t->refused_now = r->st.refused;
	}
	if (r->st.refused) { /* /readyz says so from now on, not only once the rest is applied */
		t->in_sync = false;
		report_why(r->ag, t, "%s", r->st.refused_why);
	}
}

/* The desired servers of the hostgroups written here, with what the guards keep from going
 * (decided here, recorded by record_guards()). */
static void guard_wanted(struct pass *r)
{
	const struct px_servers *all = &r->want->servers;

	for (size_t i = 0; i < all->n; i++)
		if (guard_in_list(r->st.owned, r->st.nowned, all->v[i].hostgroup))
			model_servers_add(&r->want_s, &all->v[i]);
	r->guards.writers = guard_keep_writers(r->ag, r->st.owned, r->st.nowned, &r->want_s, &r->st.mem_s);
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
	guard_record_holds(r->ag, r->t, &r->guards);
}

/* Servers being drained: how many connections still use them, and since when. */
static int read_drains(struct pass *r)
{
	struct target *t = r->t;

	for (size_t i = 0; i < r->st.mem_s.n; i++) {
		const struct px_server *s = &r->st.mem_s.v[i];

		if (guard_in_list(r->st.owned, r->st.nowned, s->hostgroup) && !guard_is_wanted(&r->want_s, s) &&
		    sk_streq_ci(s->status, "OFFLINE_SOFT")) {
			r->draining = model_grow(r->draining, r->nd, sizeof(*r->draining));
			r->draining[r->nd++] = s;
		}
	}
	if (!r->nd)
		return 0;
	r->used = xcalloc(r->nd, sizeof(long));
	if (pxadmin_conn_used(&t->px, &r->dl, r->draining, r->nd, r->used, &r->e) < 0) {
		log_warn("target %s: reading stats_%s_connection_pool failed: %s", t->pt.name, r->ag->mod->name,
			 r->e.msg);
		t->errors_read++;
		t->last_failure = r->e.reason;
		return -1;
	}
	r->dinfo = xcalloc(r->nd, sizeof(*r->dinfo));
	for (size_t i = 0; i < r->nd; i++) {
		struct drain_rec *d = guard_drain_track(t, r->draining[i]);

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

	if (cluster_disable_pull(r->ag, t, &r->st, &r->dl, &r->e) < 0) {
		log_warn("target %s: disabling its ProxySQL Cluster pull failed: %s", t->pt.name, r->e.msg);
		t->errors_apply++;
		t->last_failure = r->e.reason;
		report_why(r->ag, t, "disabling its ProxySQL Cluster pull failed: %s", r->e.msg);
		return false;
	}
	apply_scope(r);
	guard_wanted(r);
	if (read_drains(r) < 0)
		return false;
	plan_state(r, &r->plan);
	if (r->fast) {
		int k = known_holds(t, &r->plan, &r->st, &r->dl, &r->e);

		if (k < 0) {
			t->errors_read++;
			t->last_failure = r->e.reason;
			report_why(r->ag, t, "reading its checksums failed: %s", r->e.msg);
			return false;
		}
		if (k == 0) {
			r->rc = -2;
			return false;
		}
	}
	record_guards(r);
	report_plan(r->ag, t, &r->st, &r->plan, &r->ds, &r->du);
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
	report_why(r->ag, t, "statement %zu of %zu failed: %s", done + 1, p->n, r->e.msg);
	pxadmin_close(&t->px);
}

/* Apply the plan (or print it, or, a single-writer follower, only watch the cluster carry the
 * writer's). False when the reconcile ends here, r->rc saying how. */
static bool apply(struct pass *r)
{
	struct agent *ag = r->ag;
	struct target *t = r->t;
	/* single-writer, where the target's Cluster carries these tables (ProxySQL 3.0 pulls no pgsql
	 * table: every agent writes its own target's). */
	bool single_writer = t->cfg->mode == SYNC_CLUSTER_SINGLE_WRITER &&
			     (ag->mod == &px_mysql || r->st.facts.servers_diffs_before_sync > 0 ||
			      r->st.facts.users_diffs_before_sync > 0);
	size_t done = 0;

	if (r->print) {
		print_plan(r);
		return false;
	}
	if (single_writer && !lock_may_write(ag)) {
		r->rc = cluster_follow(ag, t, &r->plan);
		return false;
	}
	for (size_t i = 0; i < r->plan.n; i++) {
		if (strncmp(r->plan.steps[i].sql, "LOAD ", 5) == 0 && !r->plan.servers_changed &&
		    !r->plan.users_changed)
			t->loads_owed++;
		else if (strncmp(r->plan.steps[i].sql, "SAVE ", 5) == 0 && i == 0 && !t->save_due_us)
			t->saves_owed++;
	}
	if (r->plan.n && single_writer && cluster_await_newer_epoch(ag, t, &r->plan, &r->dl) < 0)
		return false;
	if (r->plan.n && pxadmin_apply(&t->px, &r->plan, &r->dl, &ag->stop, &done, &r->e) < 0) {
		apply_failed(r, done);
		return false;
	}
	if (!r->save && r->disk && r->plan.n) /* a hot-path LOAD without its SAVE (save-delay) */
		known_put_off_save(r->t, &r->plan, r->started);
	return true;
}

/* The full verify: what ProxySQL has now, memory, runtime and disk, needs nothing more but drains. */
static bool verify_read(struct pass *r)
{
	struct target *t = r->t;

	r->fast = 0;
	/* The statements have run: their text need not stay while the tables are read again. */
	plan_drop_text(&r->plan);
	known_tstate_free(&r->st);
	r->read_us = deadline_now_us();
	if (known_read_state(t, r->users, r->disk, &r->dl, &r->st, &r->e) < 0) {
		t->errors_read++;
		t->last_failure = r->e.reason;
		report_why(r->ag, t, "reading its tables after the apply failed: %s", r->e.msg);
		return false;
	}
	cluster_scope(r->ag, t, &r->st);
	plan_state(r, &r->check);
	if (only_drains(&r->check) && !r->check.servers_held && !r->check.users_held)
		return true;
	for (size_t i = 0; i < r->check.n; i++)
		if (!only_drains(&(struct plan){ .m = r->check.m, .steps = &r->check.steps[i], .n = 1 })) {
			log_error("target %s: verify failed: still needed after apply: %s", t->pt.name,
				  r->check.steps[i].shown);
			break;
		}
	t->errors_verify++;
	t->in_sync = false;
	report_why(r->ag, t, "verify failed after an apply");
	return false;
}

/* Verify. The hot path (planned from known rows) checks the checksums: runtime and disk hold what
 * memory holds. Otherwise, or when they do not say so, the tables are read in full (verify_read). */
static bool verify(struct pass *r)
{
	if (r->plan.n && r->fast && r->plan.after_exact && !r->guards.writers && !r->guards.held && !r->st.refused &&
	    r->nd == 0) {
		int v = known_verify(
			r->t, &(struct known_applied){ &r->plan, &r->st.ck, r->users, r->save, r->st.users_sum_ok },
			&r->dl, &r->after_ck, &r->e);

		if (v < 0) {
			r->t->errors_read++;
			r->t->last_failure = r->e.reason;
			report_why(r->ag, r->t, "reading its checksums after the apply failed: %s", r->e.msg);
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

	while (b < TARGET_HIST_BUCKETS && ms > metrics_hist_bounds_ms[b])
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
		report_why(r->ag, t, "%s held: rows staged by someone else are not loaded (foreign-edits = hold)",
			   r->ag->mod->tables[r->plan.servers_held ? TABLE_SERVERS : TABLE_USERS]);
	else if (r->st.refused)
		report_why(r->ag, t, "%s", r->st.refused_why);
	else
		report_why(r->ag, t, "guard: %d hostgroup(s) shrinking, waiting for confirmations", r->guards.held);
	return 1;
}

/* Conclude: in the desired state or not, and what the tables are known to hold now. */
static void conclude(struct pass *r)
{
	struct target *t = r->t;
	const struct layout_config *l = r->ag->layout;
	bool draining = r->plan.draining || r->plan.server_drains;

	if (still_held(r)) {
		r->rc = 1;
		return;
	}
	if (!t->in_sync)
		log_info("target %s: in the desired state (%zu servers, %zu users)%s", t->pt.name, r->want_s.n,
			 r->users ? r->want->users.n : 0, draining ? "; draining" : "");
	report_in_sync(r->ag, t);
	r->rc = draining ? 1 : 0;
	/* What the tables hold now is known when nothing was held, refused, guarded or drained and
	 * runtime held what memory held (in the agent's rows and in the others'), on a side whose
	 * CHECKSUM commands can vouch for it later (the hot path). */
	if (r->ag->mod->hot_path && r->rc == 0 && !r->print && !r->guards.held && !r->guards.writers &&
	    !r->st.refused && r->nd == 0 && !draining && r->st.facts.cluster_peers == 0 && !layout_has_fleet(l) &&
	    t->cfg->mode != SYNC_CLUSTER_SINGLE_WRITER && !r->ds.owned && !r->ds.foreign && !r->du.owned &&
	    !r->du.foreign)
		known_remember(t, &r->st, r->verified_known ? &r->plan : NULL,
			       r->verified_known ? &r->after_ck : &r->st.ck, r->read_us);
	else
		known_forget(t);
}

static void pass_end(struct pass *r)
{
	if (r->save && r->disk && !r->print && r->rc >= 0) /* it saved what was put off */
		r->t->save_due_us = 0;
	guard_forget_drains(r->t, &r->st.mem_s, &r->want_s);
	plan_free(&r->plan);
	plan_free(&r->check);
	free(r->draining);
	free(r->dinfo);
	free(r->used);
	model_servers_free(&r->want_s);
	known_tstate_free(&r->st);
}

/* One reconcile: read, decide, apply, verify, record. -2 when the hot path found a checksum it
 * did not know before writing anything (the caller reads in full then). */
int pass_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print)
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
