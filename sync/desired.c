/* desired.c: the coordinator: Consul's snapshots become one desired state, published for the
 * targets by reference.
 *
 * The state is built in two parts, the servers and the users, because they come from different
 * keys and their costs differ by orders of magnitude: 50,000 users cost 50-100 ms of JSON
 * parsing, 2,000 servers a few. A build looks at which watches replaced their snapshot since the
 * last published build, and at which parts those watches' keys fed then and feed now
 * (layout_key_parts); only those parts are built again, and the published state shares the
 * other part with the one before it (struct want_part, reference-counted). So a server change
 * costs what the servers cost, a user change what the users cost, and a change to a key that
 * feeds nothing publishes nothing. A build that must not be applied (a half-written failover)
 * publishes nothing and records nothing: the next build starts from the same published state. */
#include "desired.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static uint64_t seen_hash(const char *text)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a, then a finaliser that spreads the low bits */

	for (const unsigned char *p = (const unsigned char *)text; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h ? h : 1;
}

/* The slot of `h`, or the empty slot where it would go. */
static uint64_t *seen_slot(const struct agent_seen *s, uint64_t h)
{
	size_t i = (size_t)h & (s->size - 1);

	while (s->slot[i] && s->slot[i] != h)
		i = (i + 1) & (s->size - 1);
	return &s->slot[i];
}

bool agent_seen_has(const struct agent_seen *s, const char *text)
{
	return s->size && *seen_slot(s, seen_hash(text)) != 0;
}

enum agent_seen_result agent_seen_add(struct agent_seen *s, const char *text)
{
	uint64_t h = seen_hash(text), *slot;

	if (s->size && *seen_slot(s, h))
		return AGENT_SEEN_OLD;
	if (s->n >= AGENT_SEEN_MAX)
		return AGENT_SEEN_FULL;
	if ((s->n + 1) * 2 > s->size) { /* at most half full: short probes */
		struct agent_seen bigger = { .size = s->size ? s->size * 2 : 64, .n = s->n };

		bigger.slot = xcalloc(bigger.size, sizeof(*bigger.slot));
		for (size_t i = 0; i < s->size; i++)
			if (s->slot[i])
				*seen_slot(&bigger, s->slot[i]) = s->slot[i];
		free(s->slot);
		*s = bigger;
	}
	slot = seen_slot(s, h);
	*slot = h;
	s->n++;
	return AGENT_SEEN_NEW;
}

void agent_seen_free(struct agent_seen *s)
{
	free(s->slot);
	memset(s, 0, sizeof(*s));
}

/* Log the rejections in `r` (a build's, both parts) that the previous build did not have. */
static void log_rejects(struct agent *ag, const struct layout_reject *const *r, size_t n)
{
	struct agent_seen now = { 0 };
	size_t unlogged = 0;
	char first[700] = "";

	for (size_t i = 0; i < n; i++) {
		char line[700];
		bool before;

		snprintf(line, sizeof(line), "%s: %s", r[i]->key, r[i]->reason);
		before = agent_seen_has(&ag->logged_rejects, line);
		switch (agent_seen_add(&now, line)) {
		case AGENT_SEEN_OLD: break; /* twice in this build */
		case AGENT_SEEN_NEW:
			if (!before) {
				ag->rejected_total++;
				log_warn("rejected %s", line);
			}
			break;
		case AGENT_SEEN_FULL:
			if (!before && !unlogged++)
				sk_strlcpy(first, line, sizeof(first));
			break;
		}
	}
	/* More at once than the set holds: one line for the rest, and again only when their number
	 * changes. */
	if (unlogged && unlogged != ag->unlogged_last)
		log_warn("rejected %zu more entries, not logged one by one (over %d rejections at once; first: %s)",
			 unlogged, AGENT_SEEN_MAX, first);
	ag->unlogged_last = unlogged;
	agent_seen_free(&ag->logged_rejects);
	ag->logged_rejects = now;
	ag->rejected_now = n;
}

/* The rejects of `lr` and, for each part it did not build, those of the published part kept. */
static void log_build_rejects(struct agent *ag, const struct layout_result *lr, unsigned built)
{
	size_t n = lr->nrejects, k = 0;
	const struct want_part *kept[2] = { NULL, NULL };
	const struct layout_reject **all;

	for (int p = 0; p < 2 && ag->want; p++)
		if (!(built & (1u << p)) && ag->want->parts[p]) {
			kept[p] = ag->want->parts[p];
			n += kept[p]->nrejects;
		}
	all = xcalloc(n ? n : 1, sizeof(*all));
	for (size_t i = 0; i < lr->nrejects; i++)
		all[k++] = &lr->rejects[i];
	for (int p = 0; p < 2; p++)
		for (size_t i = 0; kept[p] && i < kept[p]->nrejects; i++)
			all[k++] = &kept[p]->rejects[i];
	log_rejects(ag, all, k);
	free(all);
}

void agent_log_rejects(struct agent *ag, const struct layout_result *lr)
{
	log_build_rejects(ag, lr, LAYOUT_PARTS);
}

/* Every watch's snapshot as one list of pairs that point into the snapshots (caller holds mu; the
 * snapshots stay until shared_snapshots_unpin when pinned). Caller frees the array. */
static struct kv_pair *gather(struct agent *ag, size_t *nkv)
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
	*nkv = k;
	return kv;
}

/* Log the rejects of a build of `parts` (each problem once) and count them. Caller holds mu.
 * Returns false when the snapshot must not be applied (a half-written failover). */
static bool judge_build(struct agent *ag, struct layout_result *lr, unsigned parts)
{
	log_build_rejects(ag, lr, parts);
	if (lr->nunsettled) {
		ag->unsettled_holds++;
		log_warn("holding: the master keys of %s%s disagree (failover being written); waiting for them to "
			 "settle",
			 lr->unsettled[0], lr->nunsettled > 1 ? " and others" : "");
		return false;
	}
	return true;
}

/* Build the desired state from every watch's snapshot with the lock held throughout (--once: no
 * other thread). Returns false when the snapshot must not be applied. */
bool desired_build_all(struct agent *ag, struct layout_result *lr)
{
	size_t n;
	struct kv_pair *kv = gather(ag, &n);

	layout_build(ag->layout, kv, n, lr);
	free(kv);
	return judge_build(ag, lr, LAYOUT_PARTS);
}

/* A new part `p` (LAYOUT_PART_SERVERS or LAYOUT_PART_USERS) made of lr's rows of that part
 * (taken) and of its rejects: all of them when lr built that part alone, else those of its keys. */
static struct want_part *part_take(const struct layout_config *cfg, struct layout_result *lr, unsigned p,
				   unsigned built)
{
	struct want_part *w = xcalloc(1, sizeof(*w));

	atomic_init(&w->refs, 1);
	if (p == LAYOUT_PART_SERVERS) {
		w->servers = lr->servers;
		w->keep_servers = lr->keep_servers;
		w->peers = lr->peers;
		memset(&lr->servers, 0, sizeof(lr->servers));
		memset(&lr->keep_servers, 0, sizeof(lr->keep_servers));
		memset(&lr->peers, 0, sizeof(lr->peers));
	} else {
		w->users = lr->users;
		w->keep_users = lr->keep_users;
		memset(&lr->users, 0, sizeof(lr->users));
		memset(&lr->keep_users, 0, sizeof(lr->keep_users));
	}
	for (size_t i = 0; i < lr->nrejects; i++) {
		bool users = layout_key_parts(cfg, lr->rejects[i].key) == LAYOUT_PART_USERS;

		if (built != LAYOUT_PARTS || users == (p == LAYOUT_PART_USERS)) {
			w->rejects = model_grow(w->rejects, w->nrejects, sizeof(*w->rejects));
			w->rejects[w->nrejects].key = xstrdup(lr->rejects[i].key);
			w->rejects[w->nrejects++].reason = xstrdup(lr->rejects[i].reason);
		}
	}
	return w;
}

/* Make the desired state of lr's rebuilt `parts` (taken from lr) and the published parts it did
 * not rebuild (shared). Caller holds mu. Returns the state it replaces, for the caller to put once
 * the lock is released (NULL: none). */
static struct agent_want *publish(struct agent *ag, struct layout_result *lr, unsigned parts)
{
	struct agent_want *w = xcalloc(1, sizeof(*w)), *old = ag->want;
	const unsigned which[2] = { LAYOUT_PART_SERVERS, LAYOUT_PART_USERS };

	atomic_init(&w->refs, 1);
	for (int p = 0; p < 2; p++) {
		if ((parts & which[p]) || !old) {
			w->parts[p] = part_take(ag->layout, lr, which[p], old ? parts : LAYOUT_PARTS);
		} else {
			w->parts[p] = old->parts[p];
			atomic_fetch_add(&w->parts[p]->refs, 1);
		}
	}
	/* The rows as the targets read them: views of the parts. */
	w->servers = w->parts[0]->servers;
	w->keep_servers = w->parts[0]->keep_servers;
	w->peers = w->parts[0]->peers;
	w->users = w->parts[1]->users;
	w->keep_users = w->parts[1]->keep_users;
	layout_result_free(lr);
	ag->want = w;
	agent_publish_desired(ag);
	return old;
}

struct agent_want *desired_publish_all(struct agent *ag, struct layout_result *lr)
{
	return publish(ag, lr, LAYOUT_PARTS);
}

void agent_publish_desired(struct agent *ag)
{
	size_t n[AGENT_MAX_HOSTGROUPS] = { 0 };

	const struct px_servers *servers = ag->want ? &ag->want->servers : NULL;

	for (size_t i = 0; servers && i < servers->n; i++) { /* owned is sorted: a binary search each */
		long hg = servers->v[i].hostgroup;
		size_t lo = 0, hi = ag->nowned;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (ag->owned[mid] < hg)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < ag->nowned && ag->owned[lo] == hg)
			n[lo]++;
	}
	pthread_mutex_lock(&ag->pub_mu);
	memcpy(ag->desired_servers, n, sizeof(n));
	ag->desired_users = ag->want ? ag->want->users.n : 0;
	pthread_mutex_unlock(&ag->pub_mu);
}

/* Under mu: wait while there is nothing new to build, or, after the first build, until the
 * snapshot has been still for quiescence-min (but never longer than quiescence-max after the first
 * change). True when it waited: look again. */
static bool wait_for_change(struct agent *ag, unsigned long built)
{
	const struct sync_settings *s = &ag->cfg->settings;
	bool all = true;
	int64_t now = deadline_now_us(), due;
	struct timespec ts;
	int64_t at;

	for (size_t i = 0; i < ag->nwatches; i++)
		all = all && ag->watches[i].have;
	if (!all || ag->snap_gen == built) {
		pthread_cond_wait(&ag->cv, &ag->mu);
		return true;
	}
	due = ag->last_change_us + s->quiescence_min_us;
	if (ag->first_change_us && ag->first_change_us + s->quiescence_max_us < due)
		due = ag->first_change_us + s->quiescence_max_us;
	if (!ag->have_desired || now >= due)
		return false;
	clock_gettime(CLOCK_REALTIME, &ts);
	at = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000 + (due - now);
	ts.tv_sec = at / 1000000;
	ts.tv_nsec = (at % 1000000) * 1000;
	pthread_cond_timedwait(&ag->cv, &ag->mu, &ts);
	return true;
}

/* The parts a snapshot's keys feed. */
static unsigned snapshot_feeds(const struct layout_config *cfg, const struct consul_kv_list *kv)
{
	unsigned parts = 0;

	for (size_t i = 0; i < kv->n && parts != LAYOUT_PARTS; i++)
		parts |= layout_key_parts(cfg, kv->items[i].key);
	return parts;
}

/* Which parts to build: those that a watch replaced since the last published build fed then or
 * feeds now (all of them before the first). `feeds` and `gens` get each watch's, for
 * record_built(). Caller holds mu. */
static unsigned parts_changed(struct agent *ag, unsigned *feeds, unsigned long *gens)
{
	unsigned parts = ag->want ? 0 : LAYOUT_PARTS;

	for (size_t i = 0; i < ag->nwatches; i++) {
		const struct watch *w = &ag->watches[i];

		gens[i] = w->gen;
		feeds[i] = ag->built_feeds[i];
		if (ag->want && w->gen == ag->built_gen[i])
			continue;
		feeds[i] = snapshot_feeds(ag->layout, &w->kv);
		parts |= ag->built_feeds[i] | feeds[i];
	}
	return parts;
}

static void record_built(struct agent *ag, const unsigned *feeds, const unsigned long *gens)
{
	for (size_t i = 0; i < ag->nwatches; i++) {
		ag->built_gen[i] = gens[i];
		ag->built_feeds[i] = feeds[i];
	}
}

/* Build the desired state's parts that changed and publish it. Caller holds mu; the build runs
 * without it (it costs what the keys of the parts cost): the snapshots it reads are pinned, a
 * watcher that replaces one meanwhile retires it instead of freeing it. A change none of whose
 * keys feed a part publishes nothing. */
static void build_and_publish(struct agent *ag, bool *announced)
{
	struct layout_result lr;
	struct kv_pair *kv;
	struct agent_want *old;
	unsigned feeds[AGENT_MAX_WATCHES], parts;
	unsigned long gens[AGENT_MAX_WATCHES];
	size_t nkv;

	ag->first_change_us = 0;
	parts = parts_changed(ag, feeds, gens);
	if (!parts) {
		record_built(ag, feeds, gens);
		return;
	}
	kv = gather(ag, &nkv);
	ag->pinned = true;
	pthread_mutex_unlock(&ag->mu);
	layout_build_parts(ag->layout, kv, nkv, parts, &lr);
	free(kv);
	pthread_mutex_lock(&ag->mu);
	shared_snapshots_unpin(ag);
	if (!judge_build(ag, &lr, parts)) {
		layout_result_free(&lr);
		return;
	}
	old = publish(ag, &lr, parts);
	record_built(ag, feeds, gens);
	ag->desired_gen++;
	ag->have_desired = true;
	ag->desired_builds[parts - 1]++;
	if (!*announced) {
		log_info("desired state ready%s%s: %zu servers, %zu users", ag->parent ? " for " : "",
			 ag->parent ? ag->mod->tables[TABLE_SERVERS] : "", ag->want->servers.n, ag->want->users.n);
		*announced = true;
	}
	pthread_cond_broadcast(&ag->cv);
	if (old) { /* freeing the replaced state costs what it holds: not under the lock */
		pthread_mutex_unlock(&ag->mu);
		shared_want_put(old);
		pthread_mutex_lock(&ag->mu);
	}
}

void *desired_coordinator_main(void *arg)
{
	struct agent *ag = arg;
	unsigned long built = 0;
	bool announced = false;

	pthread_mutex_lock(&ag->mu);
	while (!ag->stop) {
		if (wait_for_change(ag, built))
			continue;
		built = ag->snap_gen;
		build_and_publish(ag, &announced);
	}
	pthread_mutex_unlock(&ag->mu);
	return NULL;
}
