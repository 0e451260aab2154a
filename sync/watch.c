/* watch.c: one blocking-query loop per watched Consul prefix: believe an answer or say why not,
 * keep the last good snapshot, and hold back a prefix that empties or shrinks until it is confirmed. */
#include "agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

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

/* A read that failed or must not be believed: count it, log it when the trouble is new, keep the
 * last good snapshot, and read afresh next time (a restarted Consul may have a lower index, and a
 * blocking query on the old one would sit out the whole wait). */
static void watch_failed(struct watch *w, long status, const char *err)
{
	struct agent *ag = w->ag;

	pthread_mutex_lock(&ag->mu);
	ag->consul_errors++;
	if (status == -2)
		w->too_large++;
	if (w->ok || status != w->err_status)
		log_warn("consul: %s: %s%s (%s, retrying)", w->prefix, err, status == -2 ? " (max-response-bytes)" : "",
			 w->have ? "keeping the last good state" : "nothing read yet");
	w->err_status = status;
	pthread_mutex_lock(&ag->pub_mu);
	sk_strlcpy(w->error, err, sizeof(w->error));
	w->ok = false; /* after the text: /readyz reads the text of this failure */
	pthread_mutex_unlock(&ag->pub_mu);
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

int agent_watch_read(struct watch *w, uint64_t index, long wait_ms, const deadline_t *dl, struct consul_kv_list *out,
		     struct consul_meta *meta, char *err, size_t errlen)
{
	const struct layout_service *sv;
	struct consul_service_query q;

	if (w->svc < 0)
		return consul_kv_list(w->c, w->prefix, index, wait_ms, w->ag->mode, dl, out, meta, err, errlen);
	sv = &w->ag->cfg->layout.services[w->svc];
	q = (struct consul_service_query){ .name = sv->name,
					   .tags = sv->tags,
					   .ntags = sv->ntags,
					   .node_meta = sv->node_meta,
					   .nnode_meta = sv->nnode_meta,
					   .near = sv->near,
					   .filter = sv->filter,
					   .datacenter = sv->datacenter };
	if (consul_health_service(w->c, &q, index, wait_ms, w->ag->mode, dl, out, meta, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < out->n; i++) { /* the key the layout maps to this service's hostgroup */
		char key[512];

		snprintf(key, sizeof(key), SERVICE_KEY_PREFIX "%d/%s", w->svc, out->items[i].key);
		free(out->items[i].key);
		out->items[i].key = xstrdup(key);
	}
	return 0;
}

/* Clear the watch's wake descriptor; true when it had been written. */
static bool woken(struct watch *w)
{
	uint64_t n = 0;

	return w->wake_fd >= 0 && read(w->wake_fd, &n, sizeof(n)) == (ssize_t)sizeof(n) && n > 0;
}

void *watch_main(void *arg)
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
		bool shrunk, rereading;

		/* Rate limit (Consul's advice: a token bucket, burst 2): only reads that followed an
		 * answer without a change cost a token, so a busy loop (an index that keeps moving,
		 * an answer that returns at once) slows to 10 a second while real changes flow. */
		tokens += (double)(now - tokens_at) / 100000.0;
		tokens_at = now;
		if (tokens > 2)
			tokens = 2;
		if (idle_answer) {
			if (tokens < 1 && agent_nap(ag, (long)((1 - tokens) * 100)))
				break;
			tokens = tokens < 1 ? 0 : tokens - 1;
		}
		idle_answer = true;

		if (agent_watch_read(w, w->index, wait_ms, &dl, &list, &meta, err, sizeof(err)) < 0) {
			if (ag->stop)
				break;
			if (woken(w)) { /* a guard wants a fresh read: not a failure */
				w->index = 0;
				continue;
			}
			watch_failed(w, meta.reason == CONSUL_TOO_LARGE ? -2 : meta.http_status, err);
			if (agent_nap(ag, agent_backoff_ms(attempt++, 30000)))
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
			if (agent_nap(ag, agent_backoff_ms(attempt++, 30000)))
				break;
			continue;
		}
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
			if (agent_nap(ag, agent_backoff_ms(attempt++, 30000)))
				break;
			continue;
		}
		if (!meta.known_leader) {
			watch_ignore(w, "no known leader", "");
			consul_kv_list_free(&list);
			if (agent_nap(ag, agent_backoff_ms(attempt++, 30000)))
				break;
			continue;
		}
		if (w->ignoring) {
			log_info("consul: %s: answers believed again", w->prefix);
			w->ignoring = NULL;
		}
		attempt = 0; /* only now: no-leader and too-stale answers back off like errors */
		w->index = consul_next_index(w->index, meta.index);
		w->metric_index = meta.index;

		pthread_mutex_lock(&ag->mu);
		w->reads++;
		/* A target confirms a hostgroup that shrinks: read again soon rather than block. */
		rereading = ag->reread_until_us > deadline_now_us();
		if (w->have && same_snapshot(&w->kv, &list)) {
			w->confirming = 0;
			if (rereading)
				pthread_cond_broadcast(&ag->cv);
			pthread_mutex_unlock(&ag->mu);
			consul_kv_list_free(&list);
			if (rereading) {
				w->index = 0;
				if (agent_nap(ag, 200))
					break;
			}
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
			if (agent_nap(ag, 200))
				break;
			continue;
		}
		if (shrunk)
			log_warn("guard: %s shrink from %zu to %zu keys confirmed by %ld reads", w->prefix, before,
				 list.n, confirmations);
		w->confirming = 0;
		idle_answer = false;
		agent_snapshot_retire(ag, &w->kv);
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
