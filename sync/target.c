/* target.c: one loop per ProxySQL admin target: connect, read, plan, apply, verify, and keep at it. */
#include "agent.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
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

static bool owned(const struct agent *ag, long hg)
{
	for (size_t i = 0; i < ag->nowned; i++)
		if (ag->owned[i] == hg)
			return true;
	return false;
}

static bool wanted(const struct px_servers *want, const struct px_server *s)
{
	return px_servers_find(want, s->hostgroup, s->host, s->port) != NULL;
}

/* Never empty a writer hostgroup: when the desired state has no server in one that ProxySQL
 * has servers in, keep those. Returns how many hostgroups were held. */
static int keep_writers(struct agent *ag, struct px_servers *want, const struct px_servers *have)
{
	int held = 0;

	if (opt_flag(&ag->cfg->o, "allow-empty-writer"))
		return 0;
	for (size_t c = 0; c < ag->cfg->layout.nclusters; c++) {
		long hg = ag->cfg->layout.clusters[c].writer_hostgroup;
		bool any = false;

		for (size_t i = 0; i < want->n && !any; i++)
			any = want->v[i].hostgroup == hg;
		if (any)
			continue;
		for (size_t i = 0; i < have->n; i++) {
			if (have->v[i].hostgroup == hg && !sk_streq_ci(have->v[i].status, "OFFLINE_HARD")) {
				px_servers_add(want, &have->v[i]);
				any = true;
			}
		}
		if (any)
			held++;
	}
	if (held)
		px_servers_sort(want);
	return held;
}

/* After a failed apply: each LOAD that went through without its SAVE leaves a SAVE owed, done
 * at the next reconcile even when nothing else differs (main = runtime by then, disk behind). */
static void owe_saves(struct target *t, const struct plan *p, size_t done)
{
	bool loaded_servers = false, loaded_users = false;

	for (size_t i = 0; i < p->n; i++) {
		const char *sql = p->steps[i].sql;

		if (i < done && strcmp(sql, "LOAD MYSQL SERVERS TO RUNTIME") == 0)
			loaded_servers = true;
		else if (i < done && strcmp(sql, "LOAD MYSQL USERS TO RUNTIME") == 0)
			loaded_users = true;
		else if (i >= done && loaded_servers && strcmp(sql, "SAVE MYSQL SERVERS TO DISK") == 0)
			t->save_owed_servers = true;
		else if (i >= done && loaded_users && strcmp(sql, "SAVE MYSQL USERS TO DISK") == 0)
			t->save_owed_users = true;
	}
}

int agent_reconcile(struct agent *ag, struct target *t, const struct px_servers *want_servers,
		    const struct px_users *want_users, bool print)
{
	struct sync_config *cfg = ag->cfg;
	bool users = *cfg->layout.users_prefix != '\0';
	deadline_t dl = deadline_in_ms((int64_t)(opt_num(&cfg->o, "admin-timeout") * 1000));
	struct px_servers have_s = { 0 }, want_s;
	struct px_users have_u = { 0 };
	struct plan plan = { 0 }, check = { 0 };
	struct plan_options po = {
		.owned_hostgroups = ag->owned,
		.nowned = ag->nowned,
		.user_tag = cfg->layout.user_tag,
		.drain_timeout_ms = (int64_t)(opt_num(&cfg->o, "drain-timeout") * 1000),
		.save_to_disk = opt_flag(&cfg->o, "save-to-disk"),
		.save_owed_servers = t->save_owed_servers,
		.save_owed_users = t->save_owed_users,
	};
	const struct px_server **draining = NULL;
	struct plan_drain *dinfo = NULL;
	long *used = NULL;
	size_t nd = 0, done = 0;
	struct db_err e;
	int64_t started = deadline_now_us();
	int rc = -1, held;

	if (pxadmin_connect(&t->px, &t->pt, &dl, &e) < 0) {
		if (t->reachable || !t->last_check_us)
			log_warn("target %s: cannot connect: %s", t->pt.name, e.msg);
		t->reachable = false;
		t->errors_connect++;
		return -1;
	}
	if (pxadmin_read(&t->px, &dl, &have_s, users ? &have_u : NULL, &e) < 0) {
		log_warn("target %s: reading main.mysql_servers/users failed: %s", t->pt.name, e.msg);
		t->errors_read++;
		pxadmin_close(&t->px);
		t->reachable = false;
		return -1;
	}
	if (!t->reachable)
		log_info("target %s: connected", t->pt.name);
	t->reachable = true;

	px_servers_copy(&want_s, want_servers);
	held = keep_writers(ag, &want_s, &have_s);
	if (held) {
		t->writer_guard++;
		log_warn("guard: target %s: %d writer hostgroup(s) would be empty; keeping their servers", t->pt.name,
			 held);
	}
	/* Servers being drained: how many connections still use them, and since when. */
	for (size_t i = 0; i < have_s.n; i++) {
		const struct px_server *s = &have_s.v[i];

		if (owned(ag, s->hostgroup) && !wanted(&want_s, s) && sk_streq_ci(s->status, "OFFLINE_SOFT")) {
			draining = xrealloc(draining, (nd + 1) * sizeof(*draining));
			draining[nd++] = s;
		}
	}
	if (nd) {
		used = xcalloc(nd, sizeof(long));
		if (pxadmin_conn_used(&t->px, &dl, draining, nd, used, &e) < 0) {
			log_warn("target %s: reading stats_mysql_connection_pool failed: %s", t->pt.name, e.msg);
			t->errors_read++;
			goto out;
		}
		dinfo = xcalloc(nd, sizeof(*dinfo));
		for (size_t i = 0; i < nd; i++) {
			struct drain_rec *r = drain_find(t, draining[i]);

			if (!r) { /* first seen draining now (or the agent restarted): the clock starts */
				t->drains = xrealloc(t->drains, (t->ndrains + 1) * sizeof(*t->drains));
				r = &t->drains[t->ndrains++];
				r->hostgroup = draining[i]->hostgroup;
				r->host = xstrdup(draining[i]->host);
				r->port = draining[i]->port;
				r->since_us = deadline_now_us();
			}
			dinfo[i].hostgroup = draining[i]->hostgroup;
			dinfo[i].host = r->host; /* not the row's: the verify below reads have_s afresh */
			dinfo[i].port = draining[i]->port;
			dinfo[i].conn_used = used[i];
			dinfo[i].draining_ms = (deadline_now_us() - r->since_us) / 1000;
		}
	}
	plan_build(&want_s, users ? want_users : NULL, &have_s, users ? &have_u : NULL, dinfo, nd, &po, &plan);
	if (print) {
		char *text = plan_text(&plan);

		printf("-- target %s: %zu statement(s)\n%s", t->pt.name, plan.n, text);
		fflush(stdout);
		free(text);
		rc = 0;
		goto out;
	}
	if (plan.n == 0) {
		if (!t->in_sync)
			log_info("target %s: in the desired state (%zu servers, %zu users)%s", t->pt.name, want_s.n,
				 want_users ? want_users->n : 0, plan.draining ? "; draining" : "");
		t->in_sync = true;
		t->synced_once = true;
		t->last_sync_unix = agent_unix_now();
		rc = plan.draining ? 1 : 0;
		goto out;
	}
	if (pxadmin_apply(&t->px, &plan, &dl, &ag->stop, &done, &e) < 0) {
		if (ag->stop)
			log_warn("target %s: stopping: abandoned the apply after %zu of %zu statement(s), before its "
				 "LOAD",
				 t->pt.name, done, plan.n);
		else
			log_error("target %s: statement %zu of %zu failed: %s: %s", t->pt.name, done + 1, plan.n, e.msg,
				  plan.steps[done].shown);
		t->errors_apply++;
		t->in_sync = false;
		pxadmin_close(&t->px);
		owe_saves(t, &plan, done);
		goto out;
	}
	t->save_owed_servers = t->save_owed_users = false;
	/* Verify: what ProxySQL has now must need nothing more (drains aside). */
	px_servers_free(&have_s);
	px_users_free(&have_u);
	if (pxadmin_read(&t->px, &dl, &have_s, users ? &have_u : NULL, &e) < 0) {
		t->errors_read++;
		goto out;
	}
	plan_build(&want_s, users ? want_users : NULL, &have_s, users ? &have_u : NULL, dinfo, nd, &po, &check);
	for (size_t i = 0; i < check.n; i++) {
		if (strncmp(check.steps[i].sql, "UPDATE mysql_servers SET status='OFFLINE_SOFT'", 46) != 0 &&
		    strncmp(check.steps[i].sql, "DELETE FROM mysql_servers", 25) != 0 &&
		    strncmp(check.steps[i].sql, "LOAD ", 5) != 0 && strncmp(check.steps[i].sql, "SAVE ", 5) != 0) {
			log_error("target %s: verify failed: still needed after apply: %s", t->pt.name,
				  check.steps[i].shown);
			t->errors_verify++;
			goto out;
		}
	}
	{
		double ms = (double)(deadline_now_us() - started) / 1000.0;
		size_t b = 0;

		while (b < AGENT_HIST_BUCKETS && ms > agent_hist_bounds_ms[b])
			b++;
		t->hist[b]++;
		t->hist_sum_us += (unsigned long)(ms * 1000.0);
		t->hist_count++;
		t->applies++;
		log_info("target %s: applied %zu statement(s) in %.1f ms: servers +%zu ~%zu drain %zu -%zu, users +%zu "
			 "~%zu -%zu",
			 t->pt.name, plan.n, ms, plan.server_inserts, plan.server_updates, plan.server_drains,
			 plan.server_deletes, plan.user_inserts, plan.user_updates, plan.user_deletes);
	}
	t->in_sync = true;
	t->synced_once = true;
	t->last_sync_unix = agent_unix_now();
	rc = plan.draining || plan.server_drains ? 1 : 0;
out:
	/* Forget drain records of servers that are gone or wanted again. */
	for (size_t i = 0; i < t->ndrains;) {
		struct px_server probe = { .hostgroup = t->drains[i].hostgroup,
					   .host = t->drains[i].host,
					   .port = t->drains[i].port };
		const struct px_server *h = px_servers_find(&have_s, probe.hostgroup, probe.host, probe.port);

		if (!h || wanted(&want_s, h) || !sk_streq_ci(h->status, "OFFLINE_SOFT")) {
			free(t->drains[i].host);
			t->drains[i] = t->drains[--t->ndrains];
		} else {
			i++;
		}
	}
	plan_free(&plan);
	plan_free(&check);
	free(draining);
	free(dinfo);
	free(used);
	px_servers_free(&want_s);
	px_servers_free(&have_s);
	px_users_free(&have_u);
	return rc;
}

void *target_main(void *arg)
{
	struct target *t = arg;
	struct agent *ag = t->ag;
	int64_t resync_us = (int64_t)(opt_num(&ag->cfg->o, "resync-interval") * 1e6);
	int attempt = 0;
	bool pending = false;

	while (!ag->stop) {
		struct px_servers ws;
		struct px_users wu;
		unsigned long gen;
		bool need, was_connected = t->px.db.connected;
		struct timespec ts;
		int64_t at;
		int r;

		pthread_mutex_lock(&ag->mu);
		clock_gettime(CLOCK_REALTIME, &ts);
		at = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + PING_INTERVAL_MS * 1000;
		ts.tv_sec = at / 1000000;
		ts.tv_nsec = (at % 1000000) * 1000;
		if (!ag->stop && (!ag->have_desired || ag->desired_gen == t->applied_gen))
			pthread_cond_timedwait(&ag->cv, &ag->mu, &ts);
		if (ag->stop || !ag->have_desired) {
			pthread_mutex_unlock(&ag->mu);
			continue;
		}
		gen = ag->desired_gen;
		need = gen != t->applied_gen;
		pthread_mutex_unlock(&ag->mu);

		/* A lost connection may be a restarted ProxySQL (its config lost or reloaded from
		 * disk): reconnecting always re-reads and re-applies. */
		if (was_connected) {
			deadline_t dl = deadline_in_ms(PING_INTERVAL_MS * 2);
			struct db_err e;

			if (pxadmin_ping(&t->px, &dl, &e) < 0) {
				log_warn("target %s: admin stopped answering (%s); reconnecting", t->pt.name, e.msg);
				pxadmin_close(&t->px);
				t->reachable = false;
				need = true;
			}
		} else {
			need = true;
		}
		if (ag->stop)
			break;
		if (!need && !pending && deadline_now_us() - t->last_check_us < resync_us)
			continue;

		pthread_mutex_lock(&ag->mu);
		px_servers_copy(&ws, &ag->want_servers);
		px_users_copy(&wu, &ag->want_users);
		gen = ag->desired_gen;
		pthread_mutex_unlock(&ag->mu);
		r = agent_reconcile(ag, t, &ws, &wu, false);
		t->last_check_us = deadline_now_us();
		px_servers_free(&ws);
		px_users_free(&wu);
#ifdef __GLIBC__
		malloc_trim(0); /* give the pages of a big plan back: RSS stays flat while idle */
#endif
		if (r >= 0) {
			t->applied_gen = gen;
			pending = r == 1;
			attempt = 0;
		} else {
			t->in_sync = false;
			if (agent_nap(ag, agent_backoff_ms(attempt++, 30000)))
				break;
		}
	}
	pxadmin_close(&t->px);
	return NULL;
}
