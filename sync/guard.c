/* guard.c: what keeps a target's servers from going too fast: a writer hostgroup is never emptied
 * (allow-empty-writer), a hostgroup the desired state empties or shrinks by more than
 * shrink-fraction is held until `confirmations` more reads of every prefix agree, and a server
 * leaving is drained (OFFLINE_SOFT) with a record of since when. The guards decide while a plan is
 * made and record (logs, counters, holds) once it stands, so a hot path that falls back to a full
 * read records once. The holds and drain records live in struct target; this file owns them. */
#include "guard.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"

static struct drain_rec *drain_find(struct target *t, const struct px_server *s)
{
	for (size_t i = 0; i < t->ndrains; i++)
		if (t->drains[i].hostgroup == s->hostgroup && t->drains[i].port == s->port &&
		    strcmp(t->drains[i].host, s->host) == 0)
			return &t->drains[i];
	return NULL;
}

bool guard_in_list(const long *v, size_t n, long hg)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == hg)
			return true;
	return false;
}

bool guard_is_wanted(const struct px_servers *want, const struct px_server *s)
{
	return model_servers_find(want, s->hostgroup, s->host, s->port) != NULL;
}

/* Never empty a writer hostgroup (layout_keep_writers), unless allow-empty-writer. */
int guard_keep_writers(struct agent *ag, const long *owned, size_t nowned, struct px_servers *want,
		       const struct px_servers *have)
{
	if (ag->cfg->settings.allow_empty_writer)
		return 0;
	return layout_keep_writers(ag->layout, owned, nowned, want, have);
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
 * reads of every prefix agree. Decides, adds the servers held to `want`; guard_record_holds() follows. */
void guard_hostgroups(struct agent *ag, struct target *t, const struct tstate *st, struct px_servers *want,
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
			if (have->v[i].hostgroup == d->hostgroup && serving(&have->v[i]) &&
			    !guard_is_wanted(want, &have->v[i]))
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
void guard_record_holds(struct agent *ag, struct target *t, const struct guards *g)
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

/* The drain's record of a server being drained: since when (the clock starts when first seen
 * draining, or when the agent restarted). */
struct drain_rec *guard_drain_track(struct target *t, const struct px_server *s)
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

void guard_forget_drains(struct target *t, const struct px_servers *have, const struct px_servers *want)
{
	for (size_t i = 0; i < t->ndrains;) {
		const struct px_server *h =
			model_servers_find(have, t->drains[i].hostgroup, t->drains[i].host, t->drains[i].port);

		if (!h || guard_is_wanted(want, h) || !sk_streq_ci(h->status, "OFFLINE_SOFT")) {
			free(t->drains[i].host);
			t->drains[i] = t->drains[--t->ndrains];
		} else {
			i++;
		}
	}
}

void guard_free(struct target *t)
{
	for (size_t k = 0; k < t->ndrains; k++)
		free(t->drains[k].host);
	free(t->drains);
	free(t->holds);
	t->drains = NULL;
	t->holds = NULL;
	t->ndrains = t->nholds = 0;
}
