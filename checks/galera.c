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
	return !r->readonly_ok || r->need_maint_disabled || r->need_not_rejecting;
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

void galera_judge(const struct statusmap *status, const struct statusmap *vars, const struct galera_rules *r,
		  struct galera_verdict *v)
{
	const char *cs = statusmap_get(status, "wsrep_cluster_status");
	const char *ls = statusmap_get(status, "wsrep_local_state");
	const char *comment = statusmap_get(status, "wsrep_local_state_comment");
	char d[200];
	long state = -1;
	bool donor_ok;

	if (!cs && !ls) {
		verdict(v, false, GALERA_NO_WSREP,
			"no wsrep status (wsrep_cluster_status, wsrep_local_state): not a Galera node");
		return;
	}
	if (r->need_primary && (!cs || strcmp(cs, "Primary") != 0)) {
		snprintf(d, sizeof(d), "wsrep_cluster_status=%s", cs ? cs : "(missing)");
		verdict(v, false, GALERA_NON_PRIMARY, d);
		return;
	}
	if (ls && !sk_parse_long(ls, 0, 1000, &state))
		state = -1;
	if (!comment || !*comment)
		comment = state_comment(state);
	donor_ok = r->donor_ok || (r->available_nodes > 0 && r->available_nodes <= 1);
	if (r->need_synced) {
		if (state == 2 && !donor_ok && !r->synced_only) {
			snprintf(d, sizeof(d), "wsrep_local_state=2 (%s), donor not allowed", comment);
			verdict(v, false, GALERA_DONOR, d);
			return;
		}
		if (state != 4 && (state != 2 || r->synced_only)) {
			snprintf(d, sizeof(d), "wsrep_local_state=%s (%s)", ls ? ls : "(missing)", comment);
			verdict(v, false, GALERA_NOT_SYNCED, d);
			return;
		}
	}
	if (vars && r->need_maint_disabled) {
		const char *mm = statusmap_get(vars, "pxc_maint_mode");

		if (mm && strcmp(mm, "DISABLED") != 0) {
			snprintf(d, sizeof(d), "pxc_maint_mode=%s", mm);
			verdict(v, false, GALERA_MAINT, d);
			return;
		}
	}
	if (vars && r->need_not_rejecting) {
		const char *rq = statusmap_get(vars, "wsrep_reject_queries");
		const char *dr = statusmap_get(vars, "wsrep_sst_donor_rejects_queries");

		if (rq && strcmp(rq, "NONE") != 0) {
			snprintf(d, sizeof(d), "wsrep_reject_queries=%s", rq);
			verdict(v, false, GALERA_REJECTING, d);
			return;
		}
		if (state == 2 && dr && strcmp(dr, "OFF") != 0) {
			snprintf(d, sizeof(d), "wsrep_sst_donor_rejects_queries=%s on a donor", dr);
			verdict(v, false, GALERA_DONOR_REJECTING, d);
			return;
		}
	}
	if (vars && !r->readonly_ok) {
		const char *ro = statusmap_get(vars, "read_only");

		if (ro && (sk_streq_ci(ro, "ON") || strcmp(ro, "1") == 0)) {
			verdict(v, false, GALERA_READ_ONLY, "read_only=ON");
			return;
		}
	}
	if (!r->need_synced)
		snprintf(d, sizeof(d), "wsrep_cluster_status=%s", cs ? cs : "(missing)");
	else
		snprintf(d, sizeof(d), "wsrep_local_state=%ld (%s)%s", state, comment,
			 r->need_primary ? ", wsrep_cluster_status=Primary" : "");
	verdict(v, true, GALERA_OK, d);
}
