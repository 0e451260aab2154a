/* galera.c: the Galera verdict every probe shares, as a pure function of status and variables. */
#include "galera.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

static const char *const reason_names[] = {
	"ok",         "no_wsrep",          "non_primary",           "not_synced", "donor", "read_only",
	"maint_mode", "rejecting_queries", "donor_rejects_queries",
};

const char *galera_reason_str(enum galera_reason r)
{
	return reason_names[r];
}

bool galera_rules_need_vars(const struct galera_rules *r)
{
	return !r->readonly_ok || r->need_read_only || r->need_maint_disabled || r->need_not_rejecting;
}

static const char *state_comment(long state)
{
	switch (state) {
	case 1: return "Joining";
	case 2: return "Donor/Desynced";
	case 3: return "Joined";
	case 4: return "Synced";
	case 0: return "Initialized";
	default: return "unknown";
	}
}

static void verdict(struct galera_verdict *v, bool up, enum galera_reason reason, const char *detail)
{
	v->up = up;
	v->reason = reason;
	sk_strlcpy(v->detail, detail, sizeof(v->detail));
}

/* The membership rules over the status: a Primary component, Synced (or a donor when allowed).
 * False with the verdict filled when one fails. */
static bool judge_status(const struct statusmap *status, const struct galera_rules *r, long state, const char *comment,
			 struct galera_verdict *v)
{
	const char *cs = statusmap_get(status, "wsrep_cluster_status");
	const char *ls = statusmap_get(status, "wsrep_local_state");
	char d[200];
	bool donor_ok;

	if (!cs && !ls) {
		verdict(v, false, GALERA_NO_WSREP,
			"no wsrep status (wsrep_cluster_status, wsrep_local_state): not a Galera node");
		return false;
	}
	if (r->need_primary && (!cs || strcmp(cs, "Primary") != 0)) {
		snprintf(d, sizeof(d), "wsrep_cluster_status=%s", cs ? cs : "(missing)");
		verdict(v, false, GALERA_NON_PRIMARY, d);
		return false;
	}
	donor_ok = r->donor_ok || (r->available_nodes > 0 && r->available_nodes <= 1);
	if (!r->need_synced)
		return true;
	if (state == 2 && !donor_ok && !r->synced_only) {
		snprintf(d, sizeof(d), "wsrep_local_state=2 (%s), donor not allowed", comment);
		verdict(v, false, GALERA_DONOR, d);
		return false;
	}
	if (state != 4 && (state != 2 || r->synced_only)) {
		snprintf(d, sizeof(d), "wsrep_local_state=%s (%s)", ls ? ls : "(missing)", comment);
		verdict(v, false, GALERA_NOT_SYNCED, d);
		return false;
	}
	return true;
}

/* pxc_maint_mode, wsrep_reject_queries and a donor's wsrep_sst_donor_rejects_queries. */
static bool judge_traffic(const struct statusmap *vars, const struct galera_rules *r, long state,
			  struct galera_verdict *v)
{
	const char *mm = statusmap_get(vars, "pxc_maint_mode");
	const char *rq = statusmap_get(vars, "wsrep_reject_queries");
	const char *dr = statusmap_get(vars, "wsrep_sst_donor_rejects_queries");
	char d[200];

	if (r->need_maint_disabled && mm && strcmp(mm, "DISABLED") != 0) {
		snprintf(d, sizeof(d), "pxc_maint_mode=%s", mm);
		verdict(v, false, GALERA_MAINT, d);
		return false;
	}
	if (!r->need_not_rejecting)
		return true;
	if (rq && strcmp(rq, "NONE") != 0) {
		snprintf(d, sizeof(d), "wsrep_reject_queries=%s", rq);
		verdict(v, false, GALERA_REJECTING, d);
		return false;
	}
	if (state == 2 && dr && strcmp(dr, "OFF") != 0) {
		snprintf(d, sizeof(d), "wsrep_sst_donor_rejects_queries=%s on a donor", dr);
		verdict(v, false, GALERA_DONOR_REJECTING, d);
		return false;
	}
	return true;
}

/* read_only against the rules: refused when read-only nodes are not allowed, required when the
 * rules want a read-only node (a node whose variables were not read is not read-only). */
static bool judge_read_only(const struct statusmap *vars, const struct galera_rules *r, struct galera_verdict *v)
{
	const char *ro = vars ? statusmap_get(vars, "read_only") : NULL;

	if (vars && !r->readonly_ok && ro && (sk_streq_ci(ro, "ON") || strcmp(ro, "1") == 0)) {
		verdict(v, false, GALERA_READ_ONLY, "read_only=ON");
		return false;
	}
	if (r->need_read_only && (!ro || !sk_streq_ci(ro, "ON"))) {
		verdict(v, false, GALERA_READ_ONLY, "read_only=OFF, read-only required");
		return false;
	}
	return true;
}

void galera_judge(const struct statusmap *status, const struct statusmap *vars, const struct galera_rules *r,
		  struct galera_verdict *v)
{
	const char *cs = statusmap_get(status, "wsrep_cluster_status");
	const char *ls = statusmap_get(status, "wsrep_local_state");
	const char *comment = statusmap_get(status, "wsrep_local_state_comment");
	char d[200];
	long state = -1;

	if (ls && !sk_parse_long(ls, 0, 1000, &state))
		state = -1;
	if (!comment || !*comment)
		comment = state_comment(state);
	if (!judge_status(status, r, state, comment, v))
		return;
	if (vars && !judge_traffic(vars, r, state, v))
		return;
	if (!judge_read_only(vars, r, v))
		return;
	if (!r->need_synced)
		snprintf(d, sizeof(d), "wsrep_cluster_status=%s", cs ? cs : "(missing)");
	else
		snprintf(d, sizeof(d), "wsrep_local_state=%ld (%s)%s", state, comment,
			 r->need_primary ? ", wsrep_cluster_status=Primary" : "");
	verdict(v, true, GALERA_OK, d);
}
