/* metrics.c: the agent's state as Prometheus text for /metrics. */
#include "metrics.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "consul_login.h"
#include "log.h"

const double metrics_hist_bounds_ms[TARGET_HIST_BUCKETS] = { 1, 2.5, 5, 10, 25, 50, 100, 250, 1000, 5000 };

char *metrics_label_value(const char *s)
{
	size_t n = 0;
	char *out, *o;

	for (const char *p = s; *p; p++)
		n += *p == '\\' || *p == '"' || *p == '\n' ? 2 : 1;
	o = out = xmalloc(n + 1);
	for (const char *p = s; *p; p++) {
		if (*p == '\\' || *p == '"' || *p == '\n')
			*o++ = '\\';
		*o++ = *p == '\n' ? 'n' : *p;
	}
	*o = '\0';
	return out;
}

/* The metrics with one sample per target. */
enum target_metric {
	TM_CONFLICTS_NOW,
	TM_PROTECTED_NOW,
	TM_CLUSTER_PEERS,
	TM_MONITOR_ROWS,
	TM_APPLIES,
	TM_WRITER_GUARD,
	TM_LAST_SYNC_UNIX,
	TM_IN_SYNC,
};

static const struct {
	const char *name, *type, *help;
	int decimals;
} target_metrics[] = {
	[TM_CONFLICTS_NOW] = { "proxysql_sync_user_conflicts", "gauge",
			       "KV users left alone: a user of that name is not the agent's (adopt-users).", 0 },
	[TM_PROTECTED_NOW] = { "proxysql_sync_protected_users", "gauge",
			       "KV users named like an admin, stats, cluster or monitor login of the target: never "
			       "written.",
			       0 },
	[TM_CLUSTER_PEERS] = { "proxysql_sync_cluster_peers", "gauge",
			       "Rows of runtime_proxysql_servers (a ProxySQL Cluster member when > 0).", 0 },
	[TM_MONITOR_ROWS] = { "proxysql_sync_monitor_hostgroup_rows", "gauge",
			      "Rows of the monitor hostgroup tables that name one of the agent's hostgroups.", 0 },
	[TM_APPLIES] = { "proxysql_sync_applies_total", "counter",
			 "Applies that changed a target (statements sent and verified).", 0 },
	[TM_WRITER_GUARD] = { "proxysql_sync_writer_guard_total", "counter",
			      "Times a writer hostgroup would have been emptied and its servers were kept.", 0 },
	[TM_LAST_SYNC_UNIX] = { "proxysql_sync_last_sync_timestamp_seconds", "gauge",
				"When the target was last found or brought in sync (Unix time).", 3 },
	[TM_IN_SYNC] = { "proxysql_sync_target_in_sync", "gauge",
			 "1 when desired = memory = runtime (= disk with save-to-disk), as the target says.", 0 },
};

static double target_value(const struct target *t, enum target_metric m)
{
	switch (m) {
	case TM_CONFLICTS_NOW: return (double)t->conflicts_now;
	case TM_PROTECTED_NOW: return (double)t->protected_now;
	case TM_CLUSTER_PEERS: return (double)t->cluster_peers;
	case TM_MONITOR_ROWS: return (double)t->monitor_rows;
	case TM_APPLIES: return (double)t->applies;
	case TM_WRITER_GUARD: return (double)t->writer_guard;
	case TM_LAST_SYNC_UNIX: return (double)t->last_sync_unix;
	case TM_IN_SYNC: return (double)t->in_sync;
	}
	return 0;
}

static bool per_target(const struct agent *ag, sk_buf *b, enum target_metric m)
{
	const char *name = target_metrics[m].name;
	bool ok = sk_buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, target_metrics[m].help, name,
			      target_metrics[m].type);

	for (size_t i = 0; ok && i < ag->ntargets; i++)
		ok = sk_buf_addf(b, "%s{target=\"%s\"} %.*f\n", name, ag->targets[i].label, target_metrics[m].decimals,
				 target_value(&ag->targets[i], m));
	return ok;
}

/* KV users a target refused because a login of ProxySQL itself has their name. */
static size_t protected_now(const struct agent *ag)
{
	size_t n = 0;

	for (size_t i = 0; i < ag->ntargets; i++)
		n += ag->targets[i].protected_now;
	return n;
}

/* Rows someone else staged in memory without loading them, counted and as last seen. */
static bool foreign_metrics(const struct agent *ag, sk_buf *b)
{
	bool ok = sk_buf_addf(b, "# HELP proxysql_sync_foreign_staged_rows_total Rows found staged in memory by "
				 "someone else (not loaded) before an apply.\n"
				 "# TYPE proxysql_sync_foreign_staged_rows_total counter\n");

	for (size_t i = 0; i < ag->ntargets; i++)
		for (int k = 0; k < TABLE_COUNT; k++)
			ok = ok &&
			     sk_buf_addf(b, "proxysql_sync_foreign_staged_rows_total{target=\"%s\",table=\"%s\"} %lu\n",
					 ag->targets[i].label, ag->mod->tables[k],
					 ag->targets[i].foreign_staged_total[k]);
	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_foreign_staged_rows Rows staged in memory by someone else, not "
				  "loaded, as last seen.\n# TYPE proxysql_sync_foreign_staged_rows gauge\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		for (int k = 0; k < TABLE_COUNT; k++)
			ok = ok && sk_buf_addf(b, "proxysql_sync_foreign_staged_rows{target=\"%s\",table=\"%s\"} %zu\n",
					       ag->targets[i].label, ag->mod->tables[k], ag->targets[i].foreign_now[k]);
	return ok;
}

/* The LOADs and SAVEs owed, and each target's ProxySQL Cluster. */
static bool owed_and_cluster_metrics(const struct agent *ag, sk_buf *b)
{
	bool ok = sk_buf_addf(b, "# HELP proxysql_sync_owed_total LOADs and SAVEs sent because runtime or disk "
				 "differed from memory with nothing else to change.\n"
				 "# TYPE proxysql_sync_owed_total counter\n");

	for (size_t i = 0; i < ag->ntargets; i++)
		ok = ok && sk_buf_addf(b,
				       "proxysql_sync_owed_total{target=\"%s\",kind=\"load\"} %lu\n"
				       "proxysql_sync_owed_total{target=\"%s\",kind=\"save\"} %lu\n",
				       ag->targets[i].label, ag->targets[i].loads_owed, ag->targets[i].label,
				       ag->targets[i].saves_owed);
	ok = ok && per_target(ag, b, TM_CLUSTER_PEERS);
	ok = ok &&
	     sk_buf_addf(b, "# HELP proxysql_sync_cluster_diffs_before_sync admin-cluster_<table>_diffs_before_sync "
			    "(> 0: the table is pulled from peers).\n"
			    "# TYPE proxysql_sync_cluster_diffs_before_sync gauge\n");
	for (size_t i = 0; i < ag->ntargets; i++)
		for (int k = 0; k < TABLE_COUNT; k++)
			ok = ok &&
			     sk_buf_addf(b, "proxysql_sync_cluster_diffs_before_sync{target=\"%s\",table=\"%s\"} %ld\n",
					 ag->targets[i].label, ag->mod->tables[k], ag->targets[i].diffs_before_sync[k]);
	return ok;
}

/* The cluster lock (single-writer) and what each target refuses. */
static bool refused_metrics(struct agent *ag, sk_buf *b)
{
	bool ok = true;

	if (ag->lock.enabled)
		ok = ok && sk_buf_addf(b,
				       "# HELP proxysql_sync_cluster_writer 1 while this agent holds cluster-lock-key "
				       "(single-writer).\n# TYPE proxysql_sync_cluster_writer gauge\n"
				       "proxysql_sync_cluster_writer %d\n"
				       "# TYPE proxysql_sync_cluster_lock_acquired_total counter\n"
				       "proxysql_sync_cluster_lock_acquired_total %lu\n",
				       lock_may_write(ag), ag->lock.takeovers);
	ok = ok &&
	     sk_buf_addf(b, "# HELP proxysql_sync_target_refused 1 while the target refuses the agent a table "
			    "(reason cluster: its ProxySQL Cluster pulls it; monitor: a cluster and the monitor's "
			    "rows disagree on roles; no_tables: a ProxySQL before 3.0 has no pgsql tables).\n# TYPE "
			    "proxysql_sync_target_refused gauge\n");
	for (size_t i = 0; i < ag->ntargets; i++) {
		unsigned r = ag->targets[i].refused_now;
		const char *n = ag->targets[i].label, *sv = ag->mod->tables[TABLE_SERVERS],
			   *us = ag->mod->tables[TABLE_USERS];

		ok = ok &&
		     sk_buf_addf(b,
				 "proxysql_sync_target_refused{target=\"%s\",table=\"%s\",reason=\"cluster\"} %d\n"
				 "proxysql_sync_target_refused{target=\"%s\",table=\"%s\",reason=\"cluster\"} %d\n"
				 "proxysql_sync_target_refused{target=\"%s\",table=\"%s\",reason=\"monitor\"} %d\n",
				 n, sv, !!(r & REFUSED_CLUSTER_SERVERS), n, us, !!(r & REFUSED_CLUSTER_USERS), n, sv,
				 !!(r & REFUSED_MONITOR));
		if (ag->parent) /* the PostgreSQL side: a ProxySQL before 3.0 has none of its tables */
			ok = ok && sk_buf_addf(b,
					       "proxysql_sync_target_refused{target=\"%s\",table=\"%s\",reason=\"no_"
					       "tables\"} %d\n",
					       n, sv, !!(r & REFUSED_NO_TABLES));
	}
	return ok;
}

/* What the targets say of themselves and what they hold back. */
static bool target_facts(struct agent *ag, sk_buf *b)
{
	return foreign_metrics(ag, b) && per_target(ag, b, TM_CONFLICTS_NOW) && per_target(ag, b, TM_PROTECTED_NOW) &&
	       owed_and_cluster_metrics(ag, b) && per_target(ag, b, TM_MONITOR_ROWS) && refused_metrics(ag, b);
}

/* consul-login-method: the logins so far, by result (nothing without a login). */
static bool login_metrics(const struct agent *ag, sk_buf *b)
{
	uint64_t ok, failed;

	if (!ag->login)
		return true;
	consul_login_counts(ag->login, &ok, &failed);
	return sk_buf_addf(b,
			   "# HELP proxysql_sync_consul_logins_total Logins with consul-login-method, by result.\n"
			   "# TYPE proxysql_sync_consul_logins_total counter\n"
			   "proxysql_sync_consul_logins_total{result=\"ok\"} %llu\n"
			   "proxysql_sync_consul_logins_total{result=\"failed\"} %llu\n",
			   (unsigned long long)ok, (unsigned long long)failed);
}

/* Per watch: the last index, whether it is up, the answers refused for their size. */
static bool watch_metrics(const struct agent *ag, sk_buf *b)
{
	bool ok = true;

	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_consul_index X-Consul-Index of the last answer per prefix.\n"
				  "# TYPE proxysql_sync_consul_index gauge\n");
	for (size_t i = 0; i < ag->nwatches; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_consul_index{prefix=\"%s\"} %llu\n", ag->watches[i].label,
				       (unsigned long long)ag->watches[i].metric_index);
	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_consul_up 1 while the last read of the prefix or service "
				  "succeeded and was believed.\n# TYPE proxysql_sync_consul_up gauge\n");
	for (size_t i = 0; i < ag->nwatches; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_consul_up{prefix=\"%s\"} %d\n", ag->watches[i].label,
				       ag->watches[i].ok && ag->watches[i].have);
	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_consul_too_large_total Answers refused for passing "
				  "max-response-bytes (the last good state kept).\n# TYPE "
				  "proxysql_sync_consul_too_large_total counter\n");
	for (size_t i = 0; i < ag->nwatches; i++)
		ok = ok && sk_buf_addf(b, "proxysql_sync_consul_too_large_total{prefix=\"%s\"} %lu\n",
				       ag->watches[i].label, (unsigned long)ag->watches[i].too_large);
	ok = ok && sk_buf_addf(b,
			       "# HELP proxysql_sync_consul_stale_rereads_total Stale answers past max-stale read "
			       "again from the leader (consistency = stale).\n# TYPE "
			       "proxysql_sync_consul_stale_rereads_total counter\n"
			       "proxysql_sync_consul_stale_rereads_total %lu\n",
			       (unsigned long)ag->stale_rereads);
	return ok && login_metrics(ag, b);
}

/* Rejections, guards and errors. */
static bool guard_metrics(const struct agent *ag, sk_buf *b)
{
	bool ok = true;

	ok = ok &&
	     sk_buf_addf(
		     b,
		     "# HELP proxysql_sync_rejected_entries_total Rejections logged since the start (a problem "
		     "counted once while it lasts).\n# TYPE proxysql_sync_rejected_entries_total "
		     "counter\nproxysql_sync_rejected_entries_total %lu\n"
		     "# HELP proxysql_sync_rejected_entries KV entries (and service instances, protected user names) "
		     "rejected now.\n# TYPE proxysql_sync_rejected_entries gauge\nproxysql_sync_rejected_entries %zu\n"
		     "# HELP proxysql_sync_guard_blocks_total Times a guard held a change back (shrink: a prefix; "
		     "hostgroup_shrink; unsettled_failover).\n# TYPE proxysql_sync_guard_blocks_total "
		     "counter\nproxysql_sync_guard_blocks_total{guard=\"shrink\"} %lu\n"
		     "proxysql_sync_guard_blocks_total{guard=\"hostgroup_shrink\"} %lu\n"
		     "proxysql_sync_guard_blocks_total{guard=\"unsettled_failover\"} %lu\n",
		     ag->rejected_total, ag->rejected_now + protected_now(ag), ag->guard_blocks,
		     ag->hostgroup_guard_blocks, ag->unsettled_holds);
	ok = ok && sk_buf_addf(b,
			       "# HELP proxysql_sync_desired_builds_total Desired states built and published, by the "
			       "part built (a change rebuilds only the part its keys feed).\n# TYPE "
			       "proxysql_sync_desired_builds_total counter\n"
			       "proxysql_sync_desired_builds_total{part=\"servers\"} %lu\n"
			       "proxysql_sync_desired_builds_total{part=\"users\"} %lu\n"
			       "proxysql_sync_desired_builds_total{part=\"both\"} %lu\n",
			       (unsigned long)ag->desired_builds[0], (unsigned long)ag->desired_builds[1],
			       (unsigned long)ag->desired_builds[2]);
	ok = ok && sk_buf_addf(b,
			       "# HELP proxysql_sync_errors_total Failures by stage: consul, connect, read, apply, "
			       "verify.\n# TYPE proxysql_sync_errors_total "
			       "counter\nproxysql_sync_errors_total{stage=\"consul\",target=\"\"} %lu\n",
			       ag->consul_errors);
	for (size_t i = 0; i < ag->ntargets; i++) {
		struct target *t = &ag->targets[i];

		ok = ok && sk_buf_addf(b,
				       "proxysql_sync_errors_total{stage=\"connect\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"read\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"apply\",target=\"%s\"} %lu\n"
				       "proxysql_sync_errors_total{stage=\"verify\",target=\"%s\"} %lu\n",
				       t->label, t->errors_connect, t->label, t->errors_read, t->label, t->errors_apply,
				       t->label, t->errors_verify);
	}
	return ok;
}

/* The apply-duration histogram, per target. */
static bool apply_histogram(const struct agent *ag, sk_buf *b)
{
	bool ok = true;

	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_apply_duration_seconds Time of one apply: read, statements, "
				  "LOAD, SAVE, verify.\n# TYPE proxysql_sync_apply_duration_seconds histogram\n");
	for (size_t i = 0; i < ag->ntargets; i++) {
		struct target *t = &ag->targets[i];
		unsigned long cum = 0;

		for (size_t k = 0; k < TARGET_HIST_BUCKETS; k++) {
			cum += t->hist[k];
			ok = ok &&
			     sk_buf_addf(b,
					 "proxysql_sync_apply_duration_seconds_bucket{target=\"%s\",le=\"%g\"} %lu\n",
					 t->label, metrics_hist_bounds_ms[k] / 1000.0, cum);
		}
		ok = ok && sk_buf_addf(b,
				       "proxysql_sync_apply_duration_seconds_bucket{target=\"%s\",le=\"+Inf\"} %lu\n"
				       "proxysql_sync_apply_duration_seconds_sum{target=\"%s\"} %.6f\n"
				       "proxysql_sync_apply_duration_seconds_count{target=\"%s\"} %lu\n",
				       t->label, cum + t->hist[TARGET_HIST_BUCKETS], t->label,
				       (double)t->hist_sum_us / 1e6, t->label, t->hist_count);
	}
	return ok;
}

/* The Patroni scope whose hostgroup `hg` is, as a label value to free (NULL: none, or not the
 * PostgreSQL side's). */
static char *hostgroup_scope(const struct layout_config *l, long hg)
{
	for (size_t i = 0; i < l->nclusters; i++)
		if (l->clusters[i].patroni_namespace &&
		    (l->clusters[i].writer_hostgroup == hg || l->clusters[i].reader_hostgroup == hg))
			return metrics_label_value(l->clusters[i].alias);
	return NULL;
}

/* The desired state's counts, as the coordinator last published them. */
static bool desired_metrics(struct agent *ag, sk_buf *b)
{
	size_t desired[AGENT_MAX_HOSTGROUPS], users;
	bool ok = true;

	pthread_mutex_lock(&ag->pub_mu); /* published by the coordinator at each build */
	memcpy(desired, ag->desired_servers, sizeof(desired));
	users = ag->desired_users;
	pthread_mutex_unlock(&ag->pub_mu);
	ok = ok && sk_buf_addf(b, "# HELP proxysql_sync_desired_servers Servers the desired state has per owned "
				  "hostgroup (and Patroni scope).\n# TYPE proxysql_sync_desired_servers gauge\n");
	for (size_t i = 0; i < ag->nowned; i++) {
		char *scope = ag->parent ? hostgroup_scope(ag->layout, ag->owned[i]) : NULL;

		ok = ok && sk_buf_addf(b, "proxysql_sync_desired_servers{%s%s%shostgroup=\"%ld\"} %zu\n",
				       scope ? "scope=\"" : "", scope ? scope : "", scope ? "\"," : "", ag->owned[i],
				       desired[i]);
		free(scope);
	}
	ok = ok && sk_buf_addf(b,
			       "# HELP proxysql_sync_desired_users Users the desired state has.\n# TYPE "
			       "proxysql_sync_desired_users gauge\nproxysql_sync_desired_users %zu\n",
			       users);
	return ok;
}

static bool render_side(struct agent *ag, sk_buf *b)
{
	return watch_metrics(ag, b) && guard_metrics(ag, b) && per_target(ag, b, TM_APPLIES) &&
	       per_target(ag, b, TM_WRITER_GUARD) && per_target(ag, b, TM_LAST_SYNC_UNIX) &&
	       per_target(ag, b, TM_IN_SYNC) && apply_histogram(ag, b) && desired_metrics(ag, b) && target_facts(ag, b);
}

/* A family of rendered text: its "# HELP name ..." line up to the next family's. */
struct family {
	const char *at, *series, *end; /* the block, its first series line, its end */
	size_t namelen; /* of the name after "# HELP " */
	bool merged;
};

#define METRICS_MAX_FAMILIES 64

static size_t split_families(const sk_buf *b, struct family *f, size_t max)
{
	const char *p = b->data, *end = b->data + b->len;
	size_t n = 0;

	while (p && p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p)), *next = eol ? eol + 1 : end;

		if (end - p > 7 && memcmp(p, "# HELP ", 7) == 0 && n < max) {
			const char *name = p + 7, *stop = memchr(name, ' ', (size_t)(next - name));

			f[n++] = (struct family){ p, next, next, (size_t)((stop ? stop : next) - name), false };
		} else if (n) {
			if (*p == '#' && f[n - 1].series == p) /* # TYPE */
				f[n - 1].series = next;
			f[n - 1].end = next;
		}
		p = next;
	}
	return n;
}

/* The series lines of `f` with `label` first among their labels. */
static bool add_labelled(sk_buf *out, const struct family *f, const char *label)
{
	bool ok = true;

	for (const char *line = f->series; ok && line < f->end;) {
		const char *eol = memchr(line, '\n', (size_t)(f->end - line));
		size_t name = strcspn(line, "{ "), len = eol ? (size_t)(eol - line) : (size_t)(f->end - line);

		ok = sk_buf_add(out, line, name) &&
		     (line[name] == '{'
			      ? sk_buf_addf(out, "{%s,", label) && sk_buf_add(out, line + name + 1, len - name - 1)
			      : sk_buf_addf(out, "{%s}", label) && sk_buf_add(out, line + name, len - name)) &&
		     sk_buf_add(out, "\n", 1);
		line += len + 1;
	}
	return ok;
}

/* `side`'s series, labelled, after `main`'s of the same family; its other families at the end. */
static bool merge_sides(sk_buf *out, const sk_buf *main, const sk_buf *side, const char *label)
{
	struct family m[METRICS_MAX_FAMILIES], s[METRICS_MAX_FAMILIES];
	size_t nm = split_families(main, m, METRICS_MAX_FAMILIES), ns = split_families(side, s, METRICS_MAX_FAMILIES);
	bool ok = true;

	for (size_t i = 0; ok && i < nm; i++) {
		ok = sk_buf_add(out, m[i].at, (size_t)(m[i].end - m[i].at));
		for (size_t k = 0; ok && k < ns; k++)
			if (!s[k].merged && s[k].namelen == m[i].namelen &&
			    memcmp(s[k].at + 7, m[i].at + 7, m[i].namelen) == 0) {
				ok = add_labelled(out, &s[k], label);
				s[k].merged = true;
			}
	}
	for (size_t k = 0; ok && k < ns; k++)
		if (!s[k].merged)
			ok = sk_buf_add(out, s[k].at, (size_t)(s[k].series - s[k].at)) &&
			     add_labelled(out, &s[k], label);
	return ok;
}

void metrics_render(struct agent *ag, sk_buf *b)
{
	sk_buf mine, pg;
	bool ok;

	if (!ag->pg) {
		if (!render_side(ag, b))
			log_warn("metrics: output larger than its buffer; truncated");
		return;
	}
	/* The PostgreSQL side's series join the MySQL side's families, labelled module="pgsql". */
	sk_buf_init(&mine, b->max);
	sk_buf_init(&pg, b->max);
	ok = render_side(ag, &mine) && render_side(ag->pg, &pg) && merge_sides(b, &mine, &pg, "module=\"pgsql\"");
	if (!ok)
		log_warn("metrics: output larger than its buffer; truncated");
	sk_buf_free(&mine);
	sk_buf_free(&pg);
}
