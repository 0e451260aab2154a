/* known.c: what a target's tables are read as (struct tstate), and what the agent knows they hold
 * between reconciles: the hot path's kept rows and the SAVE put off by save-delay.
 *
 * Kept rows. A full read of a target costs its whole mysql_servers and mysql_users (50,000 users
 * is megabytes, tens of milliseconds). After a reconcile that verified the tables (nothing held,
 * refused, guarded or drained; no Cluster, no fleet, runtime equal to memory), the rows are kept
 * (known_remember) with the checksums read then. The next change is planned from them
 * (known_take) without a read; before anything is written, known_holds checks that the checksums
 * of the tables the plan writes are still the kept ones and that the facts (monitor rows, Cluster
 * settings) still hold, vouched for by runtime_checksums_values or read again. Any doubt forgets
 * them (known_forget) and the pass reads in full. After the apply, known_verify checks the
 * checksums instead of reading back; rows of a table the plan did not write are moved, not
 * copied. Memory's users checksum after a users write is computed from the rows the plan leaves
 * (pxadmin_users_checksum) while the agent's hash agreed with ProxySQL's at the last full read:
 * reading it back costs as much as a quarter of the change at 50,000 users, and the next pass's
 * check before it writes compares it with memory's anyway. A full read still happens every
 * resync-interval.
 *
 * Save delay. A SAVE ... TO DISK rewrites ProxySQL's whole SQLite table, the slowest statement of a
 * hot-path apply. With save-delay, a hot pass LOADs and puts the SAVE off (known_put_off_save): it
 * is due save-delay after the first LOAD not yet saved, for every table written since, and the
 * target loop wakes for it then (its pass SAVEs). A full read never puts it off, and a stopping
 * agent sends it (known_save_before_stopping) so a ProxySQL restarted from disk keeps what runtime
 * has. Until then disk differs from memory, which the checksums show and the next pass owes. */
#include "known.h"

#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"

void known_tstate_free(struct tstate *st)
{
	pxadmin_facts_free(&st->facts);
	model_servers_free(&st->mem_s);
	model_servers_free(&st->rt_s);
	model_users_free(&st->mem_u);
	plan_rowset_free(&st->rt_u);
	model_peers_free(&st->mem_p);
	model_peers_free(&st->rt_p);
	memset(st, 0, sizeof(*st));
}

struct rowset_sink {
	struct plan_rowset *set;
	const char *user_tag;
};

static void runtime_user(void *ctx, const struct px_user *u)
{
	const struct rowset_sink *k = ctx;

	plan_rowset_user(k->set, u, k->user_tag);
}

/* Whether the agent's hash of the users it read is the CHECKSUM read with them (a write between the
 * two reads, or a ProxySQL that hashes otherwise, says no: the checksum is then read back). */
static bool users_sum_agrees(const struct px_users *u, uint64_t read)
{
	const struct px_user **rows = xcalloc(u->n ? u->n : 1, sizeof(*rows));
	bool same;

	for (size_t i = 0; i < u->n; i++)
		rows[i] = &u->v[i];
	same = pxadmin_users_checksum(rows, u->n) == read;
	free(rows);
	return same;
}

int known_read_state(struct target *t, bool users, bool disk, const deadline_t *dl, struct tstate *st, struct db_err *e)
{
	bool peers = layout_has_fleet(t->ag->layout);
	struct rowset_sink sink = { &st->rt_u, t->ag->layout->user_tag };
	struct px_vouchers before;

	memset(st, 0, sizeof(*st));
	/* The vouchers before the facts: a LOAD between the two leaves vouchers that differ from the
	 * ones read with the checksums below, which then vouch for nothing. */
	if (pxadmin_vouchers(&t->px, dl, &before, e) < 0 || pxadmin_read_facts(&t->px, dl, &st->facts, e) < 0 ||
	    pxadmin_read(&t->px, dl, &st->mem_s, users ? &st->mem_u : NULL, e) < 0 ||
	    pxadmin_checksums(&t->px, dl,
			      (disk ? PX_CK_SERVERS_DISK : 0) | (users ? PX_CK_USERS_MEMORY : 0) |
				      (users && disk ? PX_CK_USERS_DISK : 0),
			      &st->ck, e) < 0)
		return -1;
	if (!pxadmin_vouched(&before, &st->ck.v))
		memset(&st->ck.v, 0, sizeof(st->ck.v));
	st->users_sum_ok = users && t->ag->mod->checksum_cmds && users_sum_agrees(&st->mem_u, st->ck.users_memory);
	if (users && t->ag->mod->checksum_cmds && !st->users_sum_ok)
		log_debug("target %s: memory's users checksum is not the agent's hash of the rows read with it: a "
			  "users change reads it back",
			  t->pt.name);
	/* Equal checksums: runtime was loaded from this memory and the monitor has moved nothing. A
	 * memory checksum the agent made itself (no CHECKSUM command) never compares with runtime's. */
	st->have_rt_s = !t->ag->mod->checksum_cmds || st->ck.servers_memory != st->ck.servers_runtime;
	st->have_rt_u = users;
	if (pxadmin_read_runtime(&t->px, dl, st->have_rt_s ? &st->rt_s : NULL, users ? runtime_user : NULL, &sink, e) <
	    0)
		return -1;
	plan_rowset_seal(&st->rt_u);
	if (peers && (pxadmin_read_peers(&t->px, false, dl, &st->mem_p, e) < 0 ||
		      pxadmin_read_peers(&t->px, true, dl, &st->rt_p, e) < 0))
		return -1;
	return 0;
}

/* What a target's tables held after the last reconcile that verified them: memory's rows (runtime
 * held the same, nothing staged by others), the facts they were planned with, the checksums read
 * then (their vouchers vouch for the facts), and when they were last read in full. */
struct target_known {
	struct px_servers mem_s;
	struct px_users mem_u;
	struct px_facts facts;
	struct px_checksums ck;
	bool users_sum_ok;
	int64_t read_us;
};

void known_forget(struct target *t)
{
	if (!t->known)
		return;
	model_servers_free(&t->known->mem_s);
	model_users_free(&t->known->mem_u);
	pxadmin_facts_free(&t->known->facts);
	free(t->known);
	t->known = NULL;
}

/* The hot path's read: nothing. The known rows and facts stand for the target's until
 * known_holds() has checked the checksums of the tables the plan writes and the vouchers of the
 * facts. The known state is taken (a reconcile that ends well puts it back). */
void known_take(struct target *t, struct tstate *st, int64_t *read_us)
{
	struct target_known *k = t->known;

	memset(st, 0, sizeof(*st));
	t->known = NULL;
	st->ck = k->ck; /* as read when the rows were verified; disk changes only by a SAVE */
	st->mem_s = k->mem_s;
	st->mem_u = k->mem_u;
	st->facts = k->facts;
	st->users_sum_ok = k->users_sum_ok;
	*read_us = k->read_us;
	free(k);
}

/* Whether a statement of the plan names `text`. */
static bool plan_names(const struct plan *p, const char *text)
{
	for (size_t i = 0; i < p->n; i++)
		if (strstr(p->steps[i].sql, text))
			return true;
	return false;
}

/* Which tables a plan writes: their rows (the table's name) or their layers ("MYSQL USERS" of a
 * LOAD or SAVE). */
static void plan_tables(const struct plan *p, bool *servers, bool *users)
{
	char load_servers[32], load_users[32];

	sk_fmt(load_servers, sizeof(load_servers), "%s SERVERS", p->m->cmd);
	sk_fmt(load_users, sizeof(load_users), "%s USERS", p->m->cmd);
	*servers = plan_names(p, load_servers) || plan_names(p, p->m->tables[TABLE_SERVERS]);
	*users = plan_names(p, load_users) || plan_names(p, p->m->tables[TABLE_USERS]);
}

/* Before a hot-path apply (or a pass with nothing to write): the checksums of the tables the plan
 * writes are the ones known (nobody changed that memory or loaded it since), and the facts the plan
 * was made with still hold: vouched for by runtime_checksums_values, or read again when they are
 * not (a module loaded since, an older ProxySQL); when the plan writes users the logins are read
 * again in any case (names staged in memory are protected too, and no checksum covers memory).
 * Returns 1, 0 (read in full), -1 on errors. */
int known_holds(struct target *t, const struct plan *p, struct tstate *st, const deadline_t *dl, struct db_err *e)
{
	const struct px_checksums *known = &st->ck;
	struct px_checksums ck;
	struct px_facts now;
	bool servers, users, same, vouched;

	plan_tables(p, &servers, &users);
	if (pxadmin_checksums(&t->px, dl, users ? PX_CK_USERS_MEMORY : 0, &ck, e) < 0)
		return -1;
	if ((servers && (ck.servers_memory != known->servers_memory || ck.servers_runtime != known->servers_runtime)) ||
	    (users && (ck.users_memory != known->users_memory || ck.users_runtime != known->users_runtime))) {
		log_debug("target %s: %s checksum is not the one known: read in full", t->pt.name,
			  servers && ck.servers_memory != known->servers_memory     ? "memory's servers"
			  : servers && ck.servers_runtime != known->servers_runtime ? "runtime's servers"
			  : ck.users_memory != known->users_memory                  ? "memory's users"
										    : "runtime's users");
		return 0;
	}
	vouched = pxadmin_vouched(&known->v, &ck.v);
	if (!users && vouched)
		return 1;
	/* Vouched for, a users write reads only the logins again (memory's are covered by no voucher);
	 * the monitor rows and the Cluster's size stand. */
	if ((vouched ? pxadmin_read_identity(&t->px, dl, &now, e) : pxadmin_read_facts(&t->px, dl, &now, e)) < 0)
		return -1;
	same = vouched ? pxadmin_identity_equal(&now, &st->facts) : pxadmin_facts_equal(&now, &st->facts);
	pxadmin_facts_free(&now);
	if (same)
		st->ck.v = ck.v; /* read before the facts: they vouch for them from now on */
	return same;
}

/* The users after a plan that wrote some: the rows it left as read are moved out of `read`, only
 * the others copied (a change of one user among 50,000 holds them once, not twice); `read` is
 * emptied. */
static void take_users(struct px_users *dst, struct px_users *read, const struct plan *after)
{
	uintptr_t lo = (uintptr_t)read->v, hi = (uintptr_t)(read->v + read->n);

	dst->cap = after->nafter_users ? after->nafter_users : 1;
	dst->v = xcalloc(dst->cap, sizeof(*dst->v));
	for (size_t i = 0; i < after->nafter_users; i++) {
		uintptr_t at = (uintptr_t)after->after_users[i];

		if (read->n && at >= lo && at < hi) {
			struct px_user *u = &read->v[(at - lo) / sizeof(*read->v)];

			dst->v[dst->n++] = *u;
			u->username = NULL; /* moved */
		} else {
			model_users_add(dst, after->after_users[i]);
		}
	}
	model_users_free(read);
}

/* Keep what the target's tables hold now: `st`'s rows (taken), or the plan's rows after it ran. */
void known_remember(struct target *t, struct tstate *st, const struct plan *after, const struct px_checksums *ck,
		    int64_t read_us)
{
	struct target_known *k = xcalloc(1, sizeof(*k));
	bool servers = false, users = false;

	known_forget(t);
	if (after)
		plan_tables(after, &servers, &users);
	/* A table the plan wrote: its rows after the plan (copies). One it did not write: the rows
	 * read, moved (a server change must not copy 50,000 users). */
	if (servers) {
		for (size_t i = 0; i < after->nafter_servers; i++)
			model_servers_add(&k->mem_s, after->after_servers[i]);
		model_servers_sort(&k->mem_s);
	} else {
		k->mem_s = st->mem_s;
		memset(&st->mem_s, 0, sizeof(st->mem_s));
	}
	if (users) {
		take_users(&k->mem_u, &st->mem_u, after);
	} else {
		k->mem_u = st->mem_u;
		memset(&st->mem_u, 0, sizeof(st->mem_u));
	}
	k->facts = st->facts;
	memset(&st->facts, 0, sizeof(st->facts));
	k->ck = *ck;
	k->users_sum_ok = st->users_sum_ok;
	k->read_us = read_us;
	t->known = k;
}

/* The checksums the verify did not read stay as they were: a table the plan did not write, and
 * disk when no SAVE was sent (the SAVE put off is owed from it). */
static void keep_unwritten(struct px_checksums *ck, const struct px_checksums *before, bool servers, bool users,
			   bool disk)
{
	if (!servers) {
		ck->servers_memory = before->servers_memory;
		ck->servers_disk = before->servers_disk;
		ck->servers_runtime = before->servers_runtime;
	}
	if (!users) {
		ck->users_memory = before->users_memory;
		ck->users_disk = before->users_disk;
		ck->users_runtime = before->users_runtime;
	}
	if (!disk) {
		ck->servers_disk = before->servers_disk;
		ck->users_disk = before->users_disk;
	}
}

/* The hot path's verify: the checksums after the apply say runtime and disk hold what memory
 * holds (a LOAD that took, a SAVE that took). Returns 1 (verified, `ck` filled), 0 (read in full
 * to verify), -1 on errors. */
int known_verify(struct target *t, const struct known_applied *a, const deadline_t *dl, struct px_checksums *ck,
		 struct db_err *e)
{
	const struct plan *p = a->plan;
	const struct px_checksums *before = a->before;
	bool users = a->users, disk = a->disk;
	bool servers_loaded = false, servers_written, users_written, users_sum;
	uint64_t before_v2 = before->v.servers_v2;
	char load[40];

	/* A users LOAD is not checked here: runtime_checksums_values sums runtime's rows (one per
	 * role), which never equal memory's CHECKSUM; the full verify at resync-interval reads them. */
	sk_fmt(load, sizeof(load), "LOAD %s SERVERS TO RUNTIME", p->m->cmd);
	for (size_t i = 0; i < p->n; i++)
		servers_loaded = servers_loaded || strcmp(p->steps[i].sql, load) == 0;
	plan_tables(p, &servers_written, &users_written);
	/* The users' checksums only when the plan wrote users, memory's computed from the rows the
	 * plan leaves when the agent's hash was ProxySQL's at the last full read (the next pass's
	 * check before it writes reads memory's and compares). A table the plan did not write keeps
	 * the checksums it was verified with: only those vouch for its known rows. */
	users_written = users && users_written;
	users_sum = users_written && a->users_sum_ok;
	if (pxadmin_checksums(&t->px, dl,
			      (disk ? PX_CK_SERVERS_DISK : 0) | (users_written && !users_sum ? PX_CK_USERS_MEMORY : 0) |
				      (users_written && disk ? PX_CK_USERS_DISK : 0),
			      ck, e) < 0)
		return -1;
	/* A plan that only LOADs or SAVEs users leaves memory as known_holds found it. */
	if (users_sum)
		ck->users_memory = plan_names(p, p->m->tables[TABLE_USERS])
					   ? pxadmin_users_checksum(p->after_users, p->nafter_users)
					   : before->users_memory;
	keep_unwritten(ck, before, servers_written, users_written, disk);
	/* The facts still hold when no voucher moved but mysql_servers_v2 by the plan's own LOAD (its
	 * checksum covers mysql_servers too); otherwise the next hot pass reads them again. */
	if (servers_loaded)
		before_v2 = ck->v.servers_v2;
	if (!pxadmin_vouched(&(struct px_vouchers){ before->v.admin_vars, before->v.mysql_vars, before_v2,
						    before->v.peers, before->v.present },
			     &ck->v))
		memset(&ck->v, 0, sizeof(ck->v));
	if (servers_loaded && ck->servers_runtime != ck->servers_memory)
		return 0;
	if (disk && (ck->servers_memory != ck->servers_disk || (users && ck->users_memory != ck->users_disk)))
		return 0;
	return 1;
}

/* A hot-path pass that LOADed without its SAVE (save-delay): the SAVE is due save-delay after the
 * first LOAD not yet saved, for every table written since. */
void known_put_off_save(struct target *t, const struct plan *p, int64_t started)
{
	bool servers, users;

	plan_tables(p, &servers, &users);
	if (!t->save_due_us) {
		t->save_due_us = started + t->ag->cfg->settings.save_delay_us;
		t->save_servers = t->save_users = false;
	}
	t->save_servers = t->save_servers || servers;
	t->save_users = t->save_users || users;
}

/* Stopping with a SAVE put off: send it, so that a ProxySQL restarted from disk later keeps what
 * runtime has; within admin-timeout and until 700 ms after the stop (agent_stop waits 800 for the
 * targets, counted from about then). */
void known_save_before_stopping(struct target *t)
{
	int64_t left_ms = (t->ag->stop_us + 700000 - deadline_now_us()) / 1000;
	deadline_t dl = deadline_min(deadline_in_ms(t->ag->cfg->settings.admin_timeout_ms), deadline_in_ms(left_ms));
	struct db_err e;
	char save_servers[40], save_users[40];

	if (!t->save_due_us || !t->px.db.connected)
		return;
	if (left_ms <= 0) {
		log_warn("target %s: stopping: no time left for the SAVE put off by save-delay; disk differs "
			 "from memory until the next start saves it",
			 t->pt.name);
		return;
	}
	sk_fmt(save_servers, sizeof(save_servers), "SAVE %s SERVERS TO DISK", t->ag->mod->cmd);
	sk_fmt(save_users, sizeof(save_users), "SAVE %s USERS TO DISK", t->ag->mod->cmd);
	if ((t->save_servers && pxadmin_exec(&t->px, save_servers, &dl, &e) < 0) ||
	    (t->save_users && pxadmin_exec(&t->px, save_users, &dl, &e) < 0)) {
		log_warn("target %s: stopping: the SAVE put off by save-delay failed: %s", t->pt.name, e.msg);
		return;
	}
	t->save_due_us = 0;
	log_info("target %s: stopping: saved to disk what was LOADed since the last SAVE", t->pt.name);
}

int64_t known_read_us(const struct target *t)
{
	return t->known->read_us;
}
