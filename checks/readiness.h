/* readiness.h: readiness-check's rules, read once from its options or clustercheck's
 * --readiness-* ones, and the one judge both paths use (readiness-check and clustercheck
 * --listen's /readiness). */
#ifndef SK_READINESS_H
#define SK_READINESS_H

#include <stdbool.h>

#include "galera.h"
#include "probe.h"
#include "probe_main.h"
#include "replica.h"

/* clang-format off */
/* The readiness rules' options, the one list of them: readiness-check's table takes them as they
 * are (READINESS_RULE_OPTIONS), clustercheck's with "readiness-" in front of each name
 * (READINESS_RULE_OPTIONS_PREFIXED), so a rule added here is an option of both. A row is
 * X(NAME, TYPE, ARG, DEFAULT, ENV, MIN, MAX, readiness-check's help, clustercheck's help);
 * readiness_rules_load reads them into struct readiness_rules. */
#define READINESS_RULE_ROWS(X)                                                                                         \
	X("available-when-donor", OPT_FLAG, NULL, "1", "AVAILABLE_WHEN_DONOR", 0, 0,                                   \
	  "A donor/desynced node (wsrep_local_state=2) counts as ready.",                                              \
	  "With --listen: a donor/desynced node is ready on /readiness (readiness-check's default).")                  \
	X("replica", OPT_FLAG, NULL, "0", NULL, 0, 0,                                                                  \
	  "Check an async replica instead of a Galera node: IO and SQL threads running, lag known.",                   \
	  "With --listen: /readiness checks an async replica instead of a Galera node, as readiness-check --replica.") \
	X("max-lag", OPT_INT, "SECONDS", "-1", NULL, -1, 100000000,                                                    \
	  "With --replica: not ready when Seconds_Behind_Master is above this (-1: no limit).",                        \
	  "With --readiness-replica: /readiness is not ready when Seconds_Behind_Master is above this (-1: no limit).") \
	X("require-read-only", OPT_FLAG, NULL, "0", NULL, 0, 0, "Not ready unless read_only=ON.",                      \
	  "With --listen: /readiness is not ready unless read_only=ON, as readiness-check --require-read-only.")       \
	X("require-writable", OPT_FLAG, NULL, "0", NULL, 0, 0, "Not ready unless read_only=OFF.",                      \
	  "With --listen: /readiness is not ready unless read_only=OFF, as readiness-check --require-writable.")

#define READINESS_RULE_ROW_(NAME, TYPE, ARG, DEF, ENV, MIN, MAX, HELP, PREFIXED_HELP)                                  \
	{NAME, 0, TYPE, ARG, DEF, ENV, MIN, MAX, NULL, HELP, 0},
#define READINESS_RULE_ROW_PREFIXED_(NAME, TYPE, ARG, DEF, ENV, MIN, MAX, HELP, PREFIXED_HELP)                         \
	{"readiness-" NAME, 0, TYPE, ARG, DEF, ENV, MIN, MAX, NULL, PREFIXED_HELP, 0},

/* The rule rows of an option table: readiness-check's names, or clustercheck's "readiness-" ones. */
#define READINESS_RULE_OPTIONS READINESS_RULE_ROWS(READINESS_RULE_ROW_)
#define READINESS_RULE_OPTIONS_PREFIXED READINESS_RULE_ROWS(READINESS_RULE_ROW_PREFIXED_)
/* clang-format on */

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

/* The verdict from a fetch (o->fetched false: o->e says why): "ready: ..." / "not ready: ...". */
void readiness_judge(const struct readiness_rules *r, const struct probe_outcome *o, struct probe_verdict *v);

/* readiness-check as a kind of probe (readiness_check.c runs it). */
extern const struct probe_kind readiness_kind;

#endif
