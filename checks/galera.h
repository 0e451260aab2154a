/* galera.h: pure verdicts over Galera status and variables: galera status map -> up/down + reason. */
#ifndef SK_GALERA_H
#define SK_GALERA_H

#include <stdbool.h>

#include "statusmap.h"

/* The reason behind a verdict, kept apart from the answer (up/down). */
enum galera_reason {
	GALERA_OK, /* every rule held */
	GALERA_NO_WSREP, /* the status has no wsrep variables: not a Galera node */
	GALERA_NON_PRIMARY, /* wsrep_cluster_status is not Primary */
	GALERA_NOT_SYNCED, /* wsrep_local_state is not 4 (or 2 when donors are allowed) */
	GALERA_DONOR, /* wsrep_local_state is 2 and donors are not allowed */
	GALERA_READ_ONLY, /* read_only=ON and read-only nodes are not allowed, or OFF and read-only is required */
	GALERA_MAINT, /* pxc_maint_mode is not DISABLED */
	GALERA_REJECTING, /* wsrep_reject_queries is not NONE */
	GALERA_DONOR_REJECTING /* a donor with wsrep_sst_donor_rejects_queries=ON */
};

const char *galera_reason_str(enum galera_reason r);

/* Which rules a probe applies; every script being replaced is one combination of these. */
struct galera_rules {
	bool need_primary; /* wsrep_cluster_status must be Primary */
	bool need_synced; /* wsrep_local_state must be 4, or 2 under the donor rule */
	bool donor_ok; /* a donor/desynced node (2) counts as synced */
	bool synced_only; /* only 4 counts: a donor (2) is simply not synced (healthcheck --galera_online) */
	int available_nodes; /* haproxy-check last-node rule: donor is fine when <= 1 node; 0 = unused */
	bool readonly_ok; /* a read_only=ON node is acceptable (vars needed when false) */
	bool need_read_only; /* only a read_only=ON node is (readiness-check --require-read-only; vars needed) */
	bool need_maint_disabled; /* pxc_maint_mode must be DISABLED when the variable exists */
	bool need_not_rejecting; /* wsrep_reject_queries=NONE, and donors must not reject queries */
};

/* Variables the rules need from SHOW GLOBAL VARIABLES; false means the status query alone decides. */
bool galera_rules_need_vars(const struct galera_rules *r);

struct galera_verdict {
	bool up;
	enum galera_reason reason;
	char detail[200]; /* e.g. "wsrep_local_state=2 (Donor/Desynced), donor not allowed" */
};

/* Judge a node from its wsrep status (SHOW GLOBAL STATUS) and variables (may be NULL when
 * galera_rules_need_vars is false). Pure: no I/O, no globals. */
void galera_judge(const struct statusmap *status, const struct statusmap *vars, const struct galera_rules *r,
		  struct galera_verdict *v);

#endif
