/* clustercheck.h: clustercheck's options (shared with the argv fuzzer) and its check (shared by its
 * main and its Consul registrar, register.c). */
#ifndef SK_CLUSTERCHECK_H
#define SK_CLUSTERCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <pthread.h>

#include "db.h"
#include "galera.h"
#include "opt.h"
#include "probe.h"
#include "util.h"

/* The classic answers (Percona clustercheck) and what one check said. */
enum cc_answer { CC_SYNCED, CC_NOT_SYNCED, CC_READ_ONLY, CC_DISABLED };
extern const char *const cc_answer_names[];

struct cc_result {
	enum cc_answer answer;
	const char *reason;
	char detail[400];
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
	/* --listen's /liveness, /readiness and /healthcheck: their settings. */
	const char *datadir, *recovery_file, *state_file;
	const char *pid_file;
	struct sst_policy sst_policy;
	struct galera_rules readiness;
};

/* One check on `db` (connected first when needed), bounded by `dl`: fills r. */
void cc_check_once(struct cc_checker *c, struct db *db, const deadline_t *dl, struct cc_result *r);

/* The disabled file (--disabled-file) is there: r says so and true. */
bool cc_disabled(const struct cc_checker *c, struct cc_result *r);

/* --register (register.c): keep the node's key in Consul while it is healthy, on a period or
 * --once. Returns the exit code; *abandoned when a check thread was left on a hung server. */
int cc_register_run(struct cc_checker *c, const struct opts *o, bool *abandoned);

/* Set `o` up for clustercheck's table (name, synopsis, summary, definitions) before opts_parse. */
void clustercheck_opts_init(struct opts *o);

/* The classic positional form, as in xinetd server_args: USER PASS AVAILABLE_WHEN_DONOR LOG_FILE
 * AVAILABLE_WHEN_READONLY DEFAULTS_FILE, applied after opts_parse; an empty argument keeps the
 * default. *password_on_argv tells whether a password came from the command line (the caller
 * warns). Returns 0, or -1 with a one-line reason. */
int clustercheck_apply_positional(struct opts *o, bool *password_on_argv, char *err, size_t errlen) SK_MUST_CHECK;

#endif
