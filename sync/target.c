/* target.c: one loop per ProxySQL admin target: wait for a desired state it has not applied (or a
 * SAVE put off that is due, or resync-interval), reconcile (pass.c), back off on failures, and at
 * stop send the SAVE put off. Also frees what a target holds, each part by its owner. */
#include "target.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <time.h>

#include "agent.h"
#include "guard.h"
#include "known.h"
#include "log.h"
#include "pass.h"
#include "report.h"

#define PING_INTERVAL_MS 500

int target_reconcile(struct agent *ag, struct target *t, const struct agent_want *want, bool print)
{
	int rc = pass_reconcile(ag, t, want, print);

	return rc == -2 ? pass_reconcile(ag, t, want, print) : rc; /* known forgotten: a full read */
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
	report_unreachable(t);
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
	known_save_before_stopping(t);
	pxadmin_close(&t->px);
	return NULL;
}

void target_free(struct target *t)
{
	guard_free(t);
	known_forget(t);
	free(t->label);
	free(t->side_name);
	t->label = NULL;
}
