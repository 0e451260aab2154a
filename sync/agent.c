/* agent.c: the sync loop: watch Consul KV, hold back what the guards distrust, wait for
 * quiescence, and keep every ProxySQL target in the desired state. */
#include "agent.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "secret.h"

#define PING_INTERVAL_MS 500

static const double hist_bounds_ms[AGENT_HIST_BUCKETS] = { 1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 5000 };

static double unix_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep up to `ms`, returning early (true) once the agent stops. */
static bool nap(struct agent *ag, long ms)
{
	struct pollfd p = { .fd = ag->cancel_fd, .events = POLLIN };

	return poll(&p, 1, (int)ms) > 0;
}

static long backoff_ms(int attempt)
{
	long base = 250L << (attempt < 7 ? attempt : 7); /* 250 ms .. 32 s */

	if (base > 30000)
		base = 30000;
	return base / 2 + (long)(random() % (base / 2 + 1)); /* jitter: half to the whole */
}

static bool same_snapshot(const struct consul_kv_list *a, const struct consul_kv_list *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->items[i].key, b->items[i].key) != 0 || a->items[i].len != b->items[i].len ||
		    memcmp(a->items[i].value, b->items[i].value, a->items[i].len) != 0)
			return false;
	return true;
}

/* ---- watchers ------------------------------------------------------------------------- */

/* A read that failed or must not be believed: count it, log it when the trouble is new, keep the
 * last good snapshot, and read afresh next time (a restarted Consul may have a lower index, and a
 * blocking query on the old one would sit out the whole wait). */
static void watch_failed(struct watch *w, long status, const char *err)
{
	struct agent *ag = w->ag;

	pthread_mutex_lock(&ag->mu);
	ag->consul_errors++;
	if (w->ok || status != w->err_status)
		log_warn("consul: %s: %s (%s, retrying)", w->prefix, err,
			 w->have ? "keeping the last good state" : "nothing read yet");
	w->ok = false;
	w->err_status = status;
	sk_strlcpy(w->error, err, sizeof(w->error));
	w->index = 0;
	pthread_mutex_unlock(&ag->mu);
}

/* An answer that arrived but is not believed (no known leader, too stale): logged once while the
 * reason lasts. */
static void watch_ignore(struct watch *w, const char *reason, const char *detail)
{
	if (w->ignoring != reason)
		log_warn("consul: %s: %s%s: answers ignored until that changes", w->prefix, reason, detail);
	w->ignoring = reason;
	w->index = 0;
}

static void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct agent *ag = w->ag;
	long wait_ms = (long)(opt_num(&ag->cfg->o, "wait") * 1000);
	double max_stale_ms = opt_num(&ag->cfg->o, "max-stale") * 1000;
	double shrink = opt_num(&ag->cfg->o, "shrink-fraction");
	long confirmations = opt_int(&ag->cfg->o, "confirmations");
	int attempt = 0;
	int64_t tokens_at = deadline_now_us(); /* token bucket: burst 2, one token per 100 ms */
	double tokens = 2;
	bool idle_answer = false;

	while (!ag->stop) {
		struct consul_kv_list list = { 0 };
		struct consul_meta meta;
		char err[300];
		deadline_t dl = deadline_in_ms(w->index ? consul_wait_budget_ms(wait_ms) : 10000);
		int64_t now = deadline_now_us();
		size_t before;
		bool shrunk;

		/* Rate limit (Consul's advice: a token bucket, burst 2): only reads that followed an
		 * answer without a change cost a token, so a busy loop (an index that keeps moving,
		 * an answer that returns at once) slows to 10 a second while real changes flow. */
		tokens += (double)(now - tokens_at) / 100000.0;
		tokens_at = now;
		if (tokens > 2)
			tokens = 2;
		if (idle_answer) {
			if (tokens < 1 && nap(ag, (long)((1 - tokens) * 100)))
				break;
			tokens = tokens < 1 ? 0 : tokens - 1;
		}
		idle_answer = true;

		if (consul_kv_list(w->c, w->prefix, w->index, wait_ms, ag->mode, &dl, &list, &meta, err, sizeof(err)) <
		    0) {
			if (ag->stop)
				break;
			watch_failed(w, meta.http_status, err);
			if (nap(ag, backoff_ms(attempt++)))
				break;
			continue;
		}
		if (meta.filtered_by_acls) {
			/* The token may not read every key: the keys it cannot read are missing, and a
			 * prefix that looks emptied or shrunken would pass the guard after enough reads. */
			snprintf(err, sizeof(err),
				 "answer filtered by ACLs: the token cannot read every key under the prefix (its ACL "
				 "policy)");
			consul_kv_list_free(&list);
			watch_failed(w, -1, err);
			if (nap(ag, backoff_ms(attempt++)))
				break;
			continue;
		}
		attempt = 0;
		if (!w->ok) {
			log_info("consul: %s: reachable again (index %llu, %zu keys)", w->prefix,
				 (unsigned long long)meta.index, list.n);
			w->ok = true;
		}
		if (ag->mode == CONSUL_STALE && (double)meta.last_contact_ms > max_stale_ms) {
			char detail[80];

			snprintf(detail, sizeof(detail), " (%ld ms, max-stale %.0f ms)", meta.last_contact_ms,
				 max_stale_ms);
			watch_ignore(w, "too far behind the leader", detail);
			consul_kv_list_free(&list);
			if (nap(ag, backoff_ms(attempt++)))
				break;
			continue;
		}
		if (!meta.known_leader) {
			watch_ignore(w, "no known leader", "");
			consul_kv_list_free(&list);
			if (nap(ag, backoff_ms(attempt++)))
				break;
			continue;
		}
		if (w->ignoring) {
			log_info("consul: %s: answers believed again", w->prefix);
			w->ignoring = NULL;
		}
		w->index = consul_next_index(w->index, meta.index);
		w->metric_index = meta.index;

		pthread_mutex_lock(&ag->mu);
		if (w->have && same_snapshot(&w->kv, &list)) {
			w->confirming = 0;
			pthread_mutex_unlock(&ag->mu);
			consul_kv_list_free(&list);
			continue; /* a wake-up without a change: nothing to do */
		}
		/* An emptied or much smaller prefix may be a stale or lost Consul state: believe it
		 * only after consecutive reads say the same. */
		before = w->kv.n;
		shrunk = w->have && before > 0 &&
			 (list.n == 0 ||
			  (double)(before - (list.n < before ? list.n : before)) / (double)before > shrink);
		if (shrunk && ++w->confirming < confirmations) {
			ag->guard_blocks++;
			log_warn("guard: %s went from %zu to %zu keys; confirming (%d/%ld)", w->prefix, before, list.n,
				 w->confirming, confirmations);
			pthread_mutex_unlock(&ag->mu);
			consul_kv_list_free(&list);
			w->index = 0; /* re-read at once rather than wait for the next change */
			if (nap(ag, 200))
				break;
			continue;
		}
		if (shrunk)
			log_warn("guard: %s shrink from %zu to %zu keys confirmed by %ld reads", w->prefix, before,
				 list.n, confirmations);
		w->confirming = 0;
		idle_answer = false;
		consul_kv_list_free(&w->kv);
		w->kv = list;
		w->have = true;
		ag->snap_gen++;
		ag->last_change_us = deadline_now_us();
		if (!ag->first_change_us)
			ag->first_change_us = ag->last_change_us;
		pthread_cond_broadcast(&ag->cv);
		pthread_mutex_unlock(&ag->mu);
	}
	return NULL;
}

/* ---- coordinator: snapshot -> desired ------------------------------------------------- */

static bool logged_before(struct agent *ag, const char *line)
{
	for (size_t i = 0; i < ag->nlogged; i++)
		if (strcmp(ag->logged_rejects[i], line) == 0)
			return true;
	if (ag->nlogged < 10000) {
		ag->logged_rejects = xrealloc(ag->logged_rejects, (ag->nlogged + 1) * sizeof(char *));
		ag->logged_rejects[ag->nlogged++] = xstrdup(line);
	}
	return false;
}

/* Build the desired state from every watch's snapshot. Caller holds mu. Returns false when the
 * snapshot must not be applied (a half-written failover). */
static bool build_desired(struct agent *ag, struct layout_result *lr)
{
	struct kv_pair *kv;
	size_t n = 0, k = 0;

	for (size_t i = 0; i < ag->nwatches; i++)
		n += ag->watches[i].kv.n;
	kv = xcalloc(n ? n : 1, sizeof(*kv));
	for (size_t i = 0; i < ag->nwatches; i++)
		for (size_t j = 0; j < ag->watches[i].kv.n; j++) {
			kv[k].key = ag->watches[i].kv.items[j].key;
			kv[k].value = ag->watches[i].kv.items[j].value;
			kv[k].len = ag->watches[i].kv.items[j].len;
			k++;
		}
	layout_build(&ag->cfg->layout, kv, k, lr);
	free(kv);
	for (size_t i = 0; i < lr->nrejects; i++) {
		char line[700];

		snprintf(line, sizeof(line), "%s: %s", lr->rejects[i].key, lr->rejects[i].reason);
		if (!logged_before(ag, line)) {
			ag->rejected_total++;
			log_warn("rejected %s", line);
		}
	}
	ag->rejected_now = lr->nrejects;
	if (lr->nunsettled) {
		ag->unsettled_holds++;
		log_warn("holding: the master keys of %s%s disagree (failover being written); waiting for them to "
			 "settle",
			 lr->unsettled[0], lr->nunsettled > 1 ? " and others" : "");
		return false;
	}
	return true;
}

static void *coordinator_main(void *arg)
{
	struct agent *ag = arg;
	int64_t qmin = (int64_t)(opt_num(&ag->cfg->o, "quiescence-min") * 1e6);
	int64_t qmax = (int64_t)(opt_num(&ag->cfg->o, "quiescence-max") * 1e6);
	unsigned long built = 0;
	bool announced = false;

	pthread_mutex_lock(&ag->mu);
	while (!ag->stop) {
		bool all = true;
		int64_t now = deadline_now_us(), due;
		struct layout_result lr;

		for (size_t i = 0; i < ag->nwatches; i++)
			all = all && ag->watches[i].have;
		if (!all || ag->snap_gen == built) {
			pthread_cond_wait(&ag->cv, &ag->mu);
			continue;
		}
		/* Quiescence after the first build: wait until the snapshot has been still for
		 * quiescence-min, but never longer than quiescence-max after the first change. */
		due = ag->last_change_us + qmin;
		if (ag->first_change_us && ag->first_change_us + qmax < due)
			due = ag->first_change_us + qmax;
		if (ag->have_desired && now < due) {
			struct timespec ts;
			int64_t at;

			clock_gettime(CLOCK_REALTIME, &ts);
			at = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + (due - now);
			ts.tv_sec = at / 1000000;
			ts.tv_nsec = (at % 1000000) * 1000;
			pthread_cond_timedwait(&ag->cv, &ag->mu, &ts);
			continue;
		}
		built = ag->snap_gen;
		ag->first_change_us = 0;
		if (!build_desired(ag, &lr)) {
			layout_result_free(&lr);
			continue;
		}
		px_servers_free(&ag->want_servers);
		px_users_free(&ag->want_users);
		ag->want_servers = lr.servers;
		ag->want_users = lr.users;
		memset(&lr.servers, 0, sizeof(lr.servers));
		memset(&lr.users, 0, sizeof(lr.users));
		layout_result_free(&lr);
		ag->desired_gen++;
		ag->have_desired = true;
		if (!announced) {
			log_info("desired state ready: %zu servers, %zu users", ag->want_servers.n, ag->want_users.n);
			announced = true;
		}
		pthread_cond_broadcast(&ag->cv);
	}
	pthread_mutex_unlock(&ag->mu);
	return NULL;
}

/* ---- targets --------------------------------------------------------------------------- */

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
		t->last_sync_unix = unix_now();
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

		while (b < AGENT_HIST_BUCKETS && ms > hist_bounds_ms[b])
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
	t->last_sync_unix = unix_now();
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

static void *target_main(void *arg)
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
			if (nap(ag, backoff_ms(attempt++)))
				break;
		}
	}
	pxadmin_close(&t->px);
	return NULL;
}

/* ---- start, stop, once ------------------------------------------------------------------ */

static int consul_setup(struct agent *ag, char *err, size_t errlen)
{
	const struct opts *o = &ag->cfg->o;

	/* The client settings and the token are in ag->cfg->consul (read by sync_config_load). */
	if (!consul_consistency_parse(opt_str(o, "consistency"), &ag->mode))
		return sk_err(err, errlen, "consistency: '%s' is not default, stale or consistent",
			      opt_str(o, "consistency"));
	return 0;
}

static void agent_init(struct agent *ag, struct sync_config *cfg)
{
	const char *prefixes[] = { cfg->layout.master_prefix, cfg->layout.replica_prefix, cfg->layout.servers_prefix,
				   cfg->layout.users_prefix };

	memset(ag, 0, sizeof(*ag));
	ag->cfg = cfg;
	ag->cancel_fd = -1;
	pthread_mutex_init(&ag->mu, NULL);
	pthread_cond_init(&ag->cv, NULL);
	ag->nowned = layout_owned_hostgroups(&cfg->layout, ag->owned, SK_ARRAY_LEN(ag->owned));
	for (size_t i = 0; i < SK_ARRAY_LEN(prefixes); i++) {
		if (prefixes[i] && *prefixes[i]) {
			size_t n = strlen(prefixes[i]);
			struct watch *w = &ag->watches[ag->nwatches++];

			/* Always list with a trailing slash: mysql/slave/db1 would also match db10. */
			w->prefix = xmalloc(n + 2);
			memcpy(w->prefix, prefixes[i], n);
			if (prefixes[i][n - 1] != '/')
				w->prefix[n++] = '/';
			w->prefix[n] = '\0';
			w->ag = ag;
			w->ok = true;
		}
	}
	ag->ntargets = cfg->ntargets;
	ag->targets = xcalloc(cfg->ntargets, sizeof(*ag->targets));
	for (size_t i = 0; i < cfg->ntargets; i++) {
		struct target *t = &ag->targets[i];

		t->ag = ag;
		t->cfg = &cfg->targets[i];
		t->pt.name = cfg->targets[i].name;
		t->pt.host = cfg->targets[i].host;
		t->pt.port = cfg->targets[i].port;
		t->pt.user = cfg->targets[i].user;
		t->pt.password = cfg->targets[i].password;
	}
}

static void agent_release(struct agent *ag)
{
	for (size_t i = 0; i < ag->nwatches; i++) {
		if (ag->watches[i].c)
			consul_free(ag->watches[i].c);
		consul_kv_list_free(&ag->watches[i].kv);
		free(ag->watches[i].prefix);
	}
	for (size_t i = 0; i < ag->ntargets; i++) {
		for (size_t k = 0; k < ag->targets[i].ndrains; k++)
			free(ag->targets[i].drains[k].host);
		free(ag->targets[i].drains);
	}
	free(ag->targets);
	for (size_t i = 0; i < ag->nlogged; i++)
		free(ag->logged_rejects[i]);
	free(ag->logged_rejects);
	px_servers_free(&ag->want_servers);
	px_users_free(&ag->want_users);
	if (ag->cancel_fd >= 0)
		close(ag->cancel_fd);
	pthread_cond_destroy(&ag->cv);
	pthread_mutex_destroy(&ag->mu);
}

int agent_start(struct agent *ag, struct sync_config *cfg, char *err, size_t errlen)
{
	agent_init(ag, cfg);
	if (consul_setup(ag, err, errlen) < 0)
		goto fail;
	ag->cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ag->cancel_fd < 0) {
		sk_err(err, errlen, "eventfd: %s", strerror(errno));
		goto fail;
	}
	for (size_t i = 0; i < ag->nwatches; i++) {
		ag->watches[i].c = consul_new(&ag->cfg->consul, err, errlen);
		if (!ag->watches[i].c)
			goto fail;
		consul_set_cancel_fd(ag->watches[i].c, ag->cancel_fd);
	}
	log_info("watching %s at %s (%s consistency); %zu target(s)", ag->watches[0].prefix,
		 consul_url(ag->watches[0].c), opt_str(&cfg->o, "consistency"), ag->ntargets);
	for (size_t i = 0; i < ag->nwatches; i++)
		pthread_create(&ag->watches[i].tid, NULL, watch_main, &ag->watches[i]);
	pthread_create(&ag->coordinator, NULL, coordinator_main, ag);
	for (size_t i = 0; i < ag->ntargets; i++)
		pthread_create(&ag->targets[i].tid, NULL, target_main, &ag->targets[i]);
	return 0;
fail:
	agent_release(ag);
	return -1;
}

bool agent_stop(struct agent *ag, bool wait_targets)
{
	uint64_t one = 1;
	struct timespec ts;

	pthread_mutex_lock(&ag->mu);
	ag->stop = true;
	pthread_cond_broadcast(&ag->cv);
	pthread_mutex_unlock(&ag->mu);
	if (write(ag->cancel_fd, &one, sizeof(one)) < 0)
		log_warn("cannot signal the Consul watchers: %s", strerror(errno));
	for (size_t i = 0; i < ag->nwatches; i++)
		pthread_join(ag->watches[i].tid, NULL);
	pthread_join(ag->coordinator, NULL);
	/* A target stuck on a hung admin gets until the second is over: its LOAD can only follow a
	 * complete stage, so leaving now cannot leave the runtime half applied. */
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 800 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	for (size_t i = 0; i < ag->ntargets; i++) {
		if (pthread_timedjoin_np(ag->targets[i].tid, NULL, &ts) == 0)
			continue;
		if (!wait_targets) {
			log_warn("target %s: still busy at shutdown; leaving it", ag->targets[i].pt.name);
			return false; /* the process exits next; nothing is freed under the running thread */
		}
		log_warn("target %s: still busy; waiting for its admin call to end (admin-timeout)",
			 ag->targets[i].pt.name);
		pthread_join(ag->targets[i].tid, NULL);
	}
	agent_release(ag);
	return true;
}

int agent_once(struct sync_config *cfg, bool dry_run)
{
	struct agent ag;
	struct layout_result lr;
	char err[400];
	int rc = 0;
	bool ok = true;

	agent_init(&ag, cfg);
	if (consul_setup(&ag, err, sizeof(err)) < 0) {
		log_error("%s", err);
		agent_release(&ag);
		return 2;
	}
	for (size_t i = 0; i < ag.nwatches && ok; i++) {
		struct watch *w = &ag.watches[i];
		struct consul_meta meta;
		deadline_t dl = deadline_in_ms(10000);

		w->c = consul_new(&cfg->consul, err, sizeof(err));
		if (!w->c || consul_kv_list(w->c, w->prefix, 0, 0, ag.mode, &dl, &w->kv, &meta, err, sizeof(err)) < 0) {
			log_error("consul: %s: %s", w->prefix, err);
			ok = false;
		} else if (!meta.known_leader) {
			log_error("consul: %s: no known leader; not applying", w->prefix);
			ok = false;
		}
		w->have = ok;
	}
	if (!ok) {
		agent_release(&ag);
		return 1;
	}
	if (!build_desired(&ag, &lr)) {
		layout_result_free(&lr);
		agent_release(&ag);
		return 1;
	}
	for (size_t i = 0; i < ag.ntargets; i++) {
		int r = agent_reconcile(&ag, &ag.targets[i], &lr.servers, &lr.users, dry_run);

		pxadmin_close(&ag.targets[i].px);
		if (r < 0)
			rc = 1;
	}
	layout_result_free(&lr);
	agent_release(&ag);
	return rc;
}

/* ---- health and metrics ---------------------------------------------------------------- */

bool agent_ready(struct agent *ag, char *why, size_t len)
{
	bool ready = true;

	pthread_mutex_lock(&ag->mu);
	for (size_t i = 0; i < ag->nwatches && ready; i++) {
		if (!ag->watches[i].ok || !ag->watches[i].have) {
			snprintf(why, len, "consul %s: %s", ag->watches[i].prefix,
				 ag->watches[i].have ? ag->watches[i].error : "not read yet");
			ready = false;
		}
	}
	for (size_t i = 0; i < ag->ntargets && ready; i++) {
		struct target *t = &ag->targets[i];

		if (!t->reachable || !t->synced_once) {
			snprintf(why, len, "target %s: %s", t->pt.name,
				 !t->reachable ? "unreachable" : "not synced yet");
			ready = false;
		}
	}
	if (ready)
		snprintf(why, len, "ready");
	pthread_mutex_unlock(&ag->mu);
	return ready;
}

void agent_metrics(struct agent *ag, sk_buf *b)
{
	bool ok = true;

	pthread_mutex_lock(&ag->mu);
	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_consul_index X-Consul-Index of the last answer per prefix.\n"
				  "# TYPE proxysql_sync_consul_index gauge\n");
	for (size_t i = 0; i < ag->nwatches; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_consul_index{prefix=\"%s\"} %llu\n", ag->watches[i].prefix,
				       (unsigned long long)ag->watches[i].metric_index);
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_consul_up gauge\n");
	for (size_t i = 0; i < ag->nwatches; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_consul_up{prefix=\"%s\"} %d\n", ag->watches[i].prefix,
				       ag->watches[i].ok && ag->watches[i].have);
	ok = ok &&
	     sk_buf_addf(
		     b,
		     "# TYPE proxysql_sync_rejected_entries_total counter\nproxysql_sync_rejected_entries_total %lu\n"
		     "# TYPE proxysql_sync_rejected_entries gauge\nproxysql_sync_rejected_entries %zu\n"
		     "# TYPE proxysql_sync_guard_blocks_total "
		     "counter\nproxysql_sync_guard_blocks_total{guard=\"shrink\"} %lu\n"
		     "proxysql_sync_guard_blocks_total{guard=\"unsettled_failover\"} %lu\n",
		     ag->rejected_total, ag->rejected_now, ag->guard_blocks, ag->unsettled_holds);
	ok = ok && sk_buf_addf(b,
			       "# TYPE proxysql_sync_errors_total "
			       "counter\nproxysql_sync_errors_total{stage=\"consul\",target=\"\"} %lu\n",
			       ag->consul_errors);
	for (size_t i = 0; i < ag->ntargets; i++) {
		struct target *t = &ag->targets[i];

		ok = ok && sk_buf_addf(b,
				       "proxysql_sync_errors_total{stage=\"connect\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"read\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"apply\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"verify\",target=\"%s\"} %lu\n",
				       t->pt.name, t->errors_connect, t->pt.name, t->errors_read, t->pt.name,
				       t->errors_apply, t->pt.name, t->errors_verify);
	}
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_applies_total counter\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_applies_total{target=\"%s\"} %lu\n", ag->targets[i].pt.name,
				       ag->targets[i].applies);
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_writer_guard_total counter\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_writer_guard_total{target=\"%s\"} %lu\n",
				       ag->targets[i].pt.name, ag->targets[i].writer_guard);
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_last_sync_timestamp_seconds gauge\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_last_sync_timestamp_seconds{target=\"%s\"} %.3f\n",
				       ag->targets[i].pt.name, ag->targets[i].last_sync_unix);
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_target_in_sync gauge\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_target_in_sync{target=\"%s\"} %d\n", ag->targets[i].pt.name,
				       ag->targets[i].in_sync);
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_apply_duration_seconds histogram\n");
	for (size_t i = 0; i < ag->ntargets; i++) {
		struct target *t = &ag->targets[i];
		unsigned long cum = 0;

		for (size_t k = 0; k < AGENT_HIST_BUCKETS; k++) {
			cum += t->hist[k];
			ok = ok &&
			     sk_buf_addf(b,
					 "proxysql_sync_apply_duration_seconds_bucket{target=\"%s\",le=\"%g\"} %lu\n",
					 t->pt.name, hist_bounds_ms[k] / 1000.0, cum);
		}
		ok = ok && sk_buf_addf(b,
				       "proxysql_sync_apply_duration_seconds_bucket{target=\"%s\",le=\"+Inf\"} %lu\n"
				       "proxysql_sync_apply_duration_seconds_sum{target=\"%s\"} %.6f\n"
				       "proxysql_sync_apply_duration_seconds_count{target=\"%s\"} %lu\n",
				       t->pt.name, cum + t->hist[AGENT_HIST_BUCKETS], t->pt.name,
				       (double)t->hist_sum_us / 1e6, t->pt.name, t->hist_count);
	}
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_desired_servers gauge\n");
	for (size_t i = 0; i < ag->nowned; i++) {
		size_t n = 0;

		for (size_t k = 0; k < ag->want_servers.n; k++)
			n += ag->want_servers.v[k].hostgroup == ag->owned[i];
		ok = ok && sk_buf_addf(b, "proxysql_sync_desired_servers{hostgroup=\"%ld\"} %zu\n", ag->owned[i], n);
	}
	ok = ok && sk_buf_addf(b, "# TYPE proxysql_sync_desired_users gauge\nproxysql_sync_desired_users %zu\n",
			       ag->want_users.n);
	pthread_mutex_unlock(&ag->mu);
	if (!ok)
		log_warn("metrics: output larger than its buffer; truncated");
}
