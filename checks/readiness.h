/* readiness.h: readiness-check's rules, read once from its options or clustercheck's
 * --readiness-* ones, and the one judge both paths use (readiness-check and clustercheck
 * --listen's /readiness). */
#ifndef SK_READINESS_H
#define SK_READINESS_H

#include <stdbool.h>

#include "galera.h"
#include "probe.h"
#include "replica.h"

/* Every rule of a readiness verdict. */
struct readiness_rules {
	bool replica; /* an async replica (replica rules) instead of a Galera node (galera rules) */
	struct galera_rules galera; /* Primary, Synced or an allowed donor, read_only as required */
	struct replica_rules rep; /* threads running, lag, read_only as required */
};

/* Read the rules from `o`: the options available-when-donor, replica, max-lag,
 * require-read-only and require-writable, each named with `prefix` in front ("" for
 * readiness-check, "readiness-" for clustercheck). Returns 0, or -1 with err when both
 * requirements are given. */
int readiness_rules_load(const struct opts *o, const char *prefix, struct readiness_rules *r, char *err,
			 size_t errlen) SK_MUST_CHECK;

/* Read what the rules need on a connected `db`: wsrep status (and variables when the rules need
 * them), or SHOW REPLICA STATUS (and read_only when required). 0, or -1 with e. */
int readiness_fetch(struct db *db, const struct readiness_rules *r, const deadline_t *dl, struct probe_fetch *f,
		    struct db_err *e) SK_MUST_CHECK;

/* The verdict from a fetch (`fetched` false: `e` says why): "ready: ..." / "not ready: ...". */
void readiness_judge(const struct readiness_rules *r, bool fetched, const struct probe_fetch *f, const struct db_err *e,
		     const struct probe_conn *pc, long budget_ms, const char *setting, struct probe_verdict *v);

/* readiness-check as a kind of probe (readiness_check.c runs it). */
extern const struct probe_kind readiness_kind;

#endif
