/* cc_check.h: clustercheck's check of a Galera node (cc_check.c): the classic answers, the
 * checker every mode shares (its settings, and --listen's persistent connection and cache), one
 * check and the disabled file. */
#ifndef SK_CC_CHECK_H
#define SK_CC_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include <pthread.h>

#include "db.h"
#include "galera.h"
#include "probe.h"
#include "readiness.h"

/* The classic answers (Percona clustercheck) and what one check said. */
enum cc_answer { CC_SYNCED, CC_NOT_SYNCED, CC_READ_ONLY, CC_DISABLED };
extern const char *const cc_check_answer_names[];

struct cc_result {
	enum cc_answer answer;
	const char *reason;
	char detail[600];
	char ignored[300]; /* the disabled file, there from an untrusted owner: named in detail */
};

struct cc_checker {
	struct probe_conn pc;
	struct galera_rules rules;
	long timeout_ms;
	const char *disabled_file;
	/* --listen: one persistent connection; concurrent requests share the check in flight. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct db db;
	bool in_flight, have;
	unsigned long gen;
	struct cc_result last;
	int64_t last_at;
	long cache_ms;
	enum cc_answer logged;
	/* --listen's /liveness, /readiness and /healthcheck: their settings. The datadir, recovery
	 * file, pid file and SST policy as liveness-check reads them (each /liveness request works on
	 * a copy, whose evidence is its own). */
	struct probe_sst sst;
	const char *state_file;
	struct readiness_rules readiness; /* readiness-check's rules, from the --readiness-* options */
};

/* One check on `db` (connected first when needed), bounded by `dl`: fills r (cc_check.c), after
 * cc_check_disabled (r->ignored, when set, ends r->detail). */
void cc_check_once(struct cc_checker *c, struct db *db, const deadline_t *dl, struct cc_result *r);

/* The disabled file (--disabled-file) is there from root, this process's user or the datadir's
 * owner (--datadir): r says so and true. From anyone else: false, and r->ignored says whose
 * (cc_check.c). */
bool cc_check_disabled(const struct cc_checker *c, struct cc_result *r);

#endif
