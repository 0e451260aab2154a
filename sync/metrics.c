/* metrics.c: the agent's state as Prometheus text for /metrics. */
#include "agent.h"

#include "log.h"

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
					 t->pt.name, agent_hist_bounds_ms[k] / 1000.0, cum);
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
