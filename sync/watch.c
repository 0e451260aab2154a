/* watch.c: one blocking-query loop per watched Consul prefix: believe an answer or say why not,
 * keep the last good snapshot, and hold back a prefix that empties or shrinks until it is confirmed. */
#include "watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

#define WATCH_READ_MS 10000 /* the deadline of a read that does not block */

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
static void watch_failed(struct watch *w, enum consul_reason reason, long status, const char *err)
{
	struct agent *ag = w->ag;
	bool too_large = reason == CONSUL_TOO_LARGE;

	pthread_mutex_lock(&ag->mu);
	ag->consul_errors++;
	if (too_large)
		w->too_large++;
	if (w->ok || reason != w->err_reason || status != w->err_status)
		log_warn("consul: %s: %s%s (%s, retrying)", w->prefix, err, too_large ? " (max-response-bytes)" : "",
			 w->have ? "keeping the last good state" : "nothing read yet");
	w->err_reason = reason;
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

int watch_read(struct watch *w, const struct watch_query *rq, struct consul_kv_list *out, struct consul_meta *meta,
	       char *err, size_t errlen)
{
	struct consul_read r = { .index = rq->index, .wait_ms = rq->wait_ms, .mode = rq->mode, .dl = rq->dl };
	const struct layout_service *sv;
	struct consul_service_query q;
	int rc;

	if (w->svc < 0) {
		rc = consul_kv_list(w->c, w->prefix, &r, out, err, errlen);
		*meta = r.meta;
		return rc;
	}
	sv = &w->ag->layout->services[w->svc];
	q = (struct consul_service_query){ .name = sv->name,
					   .tags = sv->tags,
					   .ntags = sv->ntags,
					   .node_meta = sv->node_meta,
					   .nnode_meta = sv->nnode_meta,
					   .near = sv->near,
					   .filter = sv->filter,
					   .datacenter = sv->datacenter };
	rc = consul_health_service(w->c, &q, &r, out, err, errlen);
	*meta = r.meta;
	if (rc < 0)
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

/* The pace of a watch's reads: a token bucket (Consul's advice: burst 2) where only reads that
 * followed an answer without a change cost a token, so a busy loop (an index that keeps moving, an
 * answer that returns at once) slows to 10 a second while real changes flow. */
struct pace {
	int64_t tokens_at;
	double tokens;
	bool idle_answer; /* the last answer changed nothing */
};

/* Wait for a token when the last answer changed nothing. True when the agent stops meanwhile. */
static bool pace_wait(struct agent *ag, struct pace *p)
{
	int64_t now = deadline_now_us();

	p->tokens += (double)(now - p->tokens_at) / 100000.0;
	p->tokens_at = now;
	if (p->tokens > 2)
		p->tokens = 2;
	if (p->idle_answer) {
		if (p->tokens < 1 && shared_nap(ag, (long)((1 - p->tokens) * 100)))
			return true;
		p->tokens = p->tokens < 1 ? 0 : p->tokens - 1;
	}
	p->idle_answer = true;
	return false;
}

enum answer {
	ANSWER_BELIEVED, /* `list` holds it */
	ANSWER_AGAIN, /* a guard wants a fresh read: read again at once */
	ANSWER_BACKOFF, /* failed or not believed (logged): read again after a backoff */
	ANSWER_STOP, /* the agent stops */
};

/* consistency = stale: an answer from a server further behind the leader than max-stale is replaced
 * at once by a read of the same source with the default consistency (the leader answers; not
 * blocking, so within a plain read's deadline), which is believed as any answer is. Logged once per
 * episode (and once when the stale answers are fresh again), counted in stale_rereads. Returns 0
 * with *list and *meta the answer to judge (the leader's, or the stale one when it was fresh
 * enough), or -1 with err set (the re-read failed; *list empty). */
static int fresh_enough(struct watch *w, struct consul_kv_list *list, struct consul_meta *meta, char *err,
			size_t errlen)
{
	struct agent *ag = w->ag;
	double max_stale_ms = ag->cfg->settings.max_stale_ms;
	deadline_t dl = deadline_in_ms(WATCH_READ_MS);

	if (ag->mode != CONSUL_STALE)
		return 0;
	if ((double)meta->last_contact_ms <= max_stale_ms) {
		if (w->stale_episode)
			log_info("consul: %s: stale answers within max-stale again", w->prefix);
		w->stale_episode = false;
		return 0;
	}
	if (!w->stale_episode)
		log_warn("consul: %s: the server that answered was %ld ms behind the leader (max-stale %.0f ms): "
			 "reading again from the leader (default consistency) while that lasts",
			 w->prefix, meta->last_contact_ms, max_stale_ms);
	w->stale_episode = true;
	ag->stale_rereads++;
	consul_kv_list_free(list);
	return watch_read(w, &(struct watch_query){ .mode = CONSUL_DEFAULT, .dl = &dl }, list, meta, err, errlen);
}

/* One read of the watch's source, and whether to believe it: a failure, an answer filtered by
 * ACLs or without a known leader is not (each logged when new); a stale one too far behind the
 * leader is read again (fresh_enough). */
static enum answer read_answer(struct watch *w, const deadline_t *dl, struct consul_kv_list *list,
			       struct consul_meta *meta)
{
	struct agent *ag = w->ag;
	char err[300];
	int rc = watch_read(w, &(struct watch_query){ w->index, ag->cfg->settings.wait_ms, ag->mode, dl }, list, meta,
			    err, sizeof(err));

	if (rc == 0)
		rc = fresh_enough(w, list, meta, err, sizeof(err));
	if (rc < 0) {
		if (ag->stop)
			return ANSWER_STOP;
		if (woken(w)) { /* a guard wants a fresh read: not a failure */
			w->index = 0;
			return ANSWER_AGAIN;
		}
		watch_failed(w, meta->reason, meta->http_status, err);
		return ANSWER_BACKOFF;
	}
	if (meta->filtered_by_acls) {
		/* The token may not read every key: the keys it cannot read are missing, and a prefix
		 * that looks emptied or shrunken would pass the guard after enough reads. */
		snprintf(err, sizeof(err),
			 "answer filtered by ACLs: the token cannot read every key under the prefix (its ACL policy)");
		consul_kv_list_free(list);
		watch_failed(w, CONSUL_FORBIDDEN, meta->http_status, err);
		return ANSWER_BACKOFF;
	}
	if (!w->ok) {
		log_info("consul: %s: reachable again (index %llu, %zu keys)", w->prefix,
			 (unsigned long long)meta->index, list->n);
		w->ok = true;
	}
	if (!meta->known_leader) {
		watch_ignore(w, "no known leader", "");
		consul_kv_list_free(list);
		return ANSWER_BACKOFF;
	}
	if (w->ignoring) {
		log_info("consul: %s: answers believed again", w->prefix);
		w->ignoring = NULL;
	}
	return ANSWER_BELIEVED;
}

/* An emptied or much smaller prefix (by more than shrink-fraction) than the watch's snapshot. */
static bool shrinks(const struct watch *w, const struct consul_kv_list *list, double fraction)
{
	size_t before = w->kv.n;

	return w->have && before > 0 &&
	       (list->n == 0 || (double)(before - (list->n < before ? list->n : before)) / (double)before > fraction);
}

/* The believed answer becomes the watch's snapshot, and the coordinator is woken. Caller holds mu. */
static void replace_snapshot(struct watch *w, struct consul_kv_list *list)
{
	struct agent *ag = w->ag;

	w->confirming = 0;
	shared_snapshot_retire(ag, &w->kv);
	w->kv = *list;
	w->have = true;
	w->gen++;
	ag->snap_gen++;
	ag->last_change_us = deadline_now_us();
	if (!ag->first_change_us)
		ag->first_change_us = ag->last_change_us;
	pthread_cond_broadcast(&ag->cv);
}

enum take {
	TAKE_SAME, /* nothing changed */
	TAKE_REREAD, /* not taken yet: read again soon (index 0, after 200 ms) */
	TAKE_NEW, /* the new snapshot */
};

/* What a believed answer does to the watch's snapshot: nothing when it is the same, nothing yet
 * when it shrinks the prefix and is not confirmed by enough reads, else it replaces it. `list` is
 * taken (freed or kept). */
static enum take take_answer(struct watch *w, struct consul_kv_list *list)
{
	struct agent *ag = w->ag;
	long confirmations = ag->cfg->settings.confirmations;
	size_t before;
	bool rereading, shrunk;

	pthread_mutex_lock(&ag->mu);
	before = w->kv.n;
	w->reads++;
	/* A target confirms a hostgroup that shrinks: read again soon rather than block. */
	rereading = ag->reread_until_us > deadline_now_us();
	if (w->have && same_snapshot(&w->kv, list)) {
		w->confirming = 0;
		if (rereading)
			pthread_cond_broadcast(&ag->cv);
		pthread_mutex_unlock(&ag->mu);
		consul_kv_list_free(list);
		return rereading ? TAKE_REREAD : TAKE_SAME; /* a wake-up without a change: nothing to do */
	}
	/* An emptied or much smaller prefix may be a stale or lost Consul state: believe it only after
	 * consecutive reads say the same. */
	shrunk = shrinks(w, list, ag->cfg->settings.shrink_fraction);
	if (shrunk && ++w->confirming < confirmations) {
		ag->guard_blocks++;
		log_warn("guard: %s went from %zu to %zu keys; confirming (%d/%ld)", w->prefix, before, list->n,
			 w->confirming, confirmations);
		pthread_mutex_unlock(&ag->mu);
		consul_kv_list_free(list);
		return TAKE_REREAD; /* re-read at once rather than wait for the next change */
	}
	if (shrunk)
		log_warn("guard: %s shrink from %zu to %zu keys confirmed by %ld reads", w->prefix, before, list->n,
			 confirmations);
	replace_snapshot(w, list);
	pthread_mutex_unlock(&ag->mu);
	return TAKE_NEW;
}

void *watch_main(void *arg)
{
	struct watch *w = arg;
	struct agent *ag = w->ag;
	struct pace pace = { .tokens_at = deadline_now_us(), .tokens = 2 };
	int attempt = 0;

	while (!ag->stop) {
		struct consul_kv_list list = { 0 };
		struct consul_meta meta;
		deadline_t dl =
			deadline_in_ms(w->index ? consul_wait_budget_ms(ag->cfg->settings.wait_ms) : WATCH_READ_MS);
		enum answer a;

		if (pace_wait(ag, &pace))
			break;
		a = read_answer(w, &dl, &list, &meta);
		if (a == ANSWER_STOP)
			break;
		if (a == ANSWER_AGAIN)
			continue;
		if (a == ANSWER_BACKOFF) {
			if (shared_nap(ag, shared_backoff_ms(attempt++, 30000)))
				break;
			continue;
		}
		attempt = 0; /* only now: no-leader and too-stale answers back off like errors */
		w->index = consul_next_index(w->index, meta.index);
		w->metric_index = meta.index;
		switch (take_answer(w, &list)) {
		case TAKE_SAME: break;
		case TAKE_REREAD:
			w->index = 0;
			if (shared_nap(ag, 200))
				return NULL;
			break;
		case TAKE_NEW: pace.idle_answer = false; break;
		}
	}
	return NULL;
}

void watch_free(struct watch *w)
{
	if (w->c)
		consul_free(w->c);
	w->c = NULL;
	consul_kv_list_free(&w->kv);
	free(w->prefix);
	free(w->label);
	w->prefix = w->label = NULL;
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	w->wake_fd = -1;
}
