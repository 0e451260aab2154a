/* clustercheck.h: clustercheck's options (shared with the argv fuzzer), its check (cc_check.c,
 * shared by its main and its Consul registrar) and the registrar (register.c). */
#ifndef SK_CLUSTERCHECK_H
#define SK_CLUSTERCHECK_H

#include <stdbool.h>
#include <stddef.h>

#include <pthread.h>

#include "db.h"
#include "galera.h"
#include "opt.h"
#include "consul.h"
#include "probe.h"
#include "readiness.h"
#include "util.h"

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

/* --register's settings, read once from clustercheck's options. */
struct register_settings {
	bool once; /* --once: one round for cron */
	long ttl_s; /* --session-ttl */
	long interval_ms; /* --interval */
	const char *session_file; /* --session-file (with --once); NULL: runfile_default */
	const char *state_file_flag; /* --state-file from the command line (the session file's former name), or NULL */
	const char *prefix; /* --consul-prefix */
	const char *advertise; /* --advertise; NULL: the checked host:port */
	bool key_without_port; /* --key-without-port */
	enum consul_agent_mode agent; /* --consul-agent */
	struct consul_config consul; /* CONSUL_* and --consul-* */
	int consul_rc; /* consul_config_from_opts: -1 with consul_err */
	char consul_err[600];
};

/* Read --register's options (and the Consul client's configuration) into `r`. */
void register_settings_load(const struct opts *o, struct register_settings *r);
void register_settings_free(struct register_settings *r);

/* --register (register.c): keep the node's key in Consul while it is healthy, on a period or
 * --once. Returns the exit code; *abandoned when a check thread was left on a hung server. */
int register_run(struct cc_checker *c, const struct register_settings *r, bool *abandoned);

/* Set `o` up for clustercheck's table (name, synopsis, summary, definitions) before opts_parse. */
void clustercheck_opts_init(struct opts *o);

/* The classic positional form, as in xinetd server_args: USER PASS AVAILABLE_WHEN_DONOR LOG_FILE
 * AVAILABLE_WHEN_READONLY DEFAULTS_FILE, applied after opts_parse; an empty argument keeps the
 * default. *password_on_argv tells whether a password came from the command line (the caller
 * warns). Returns 0, or -1 with a one-line reason. */
int clustercheck_opts_apply_positional(struct opts *o, bool *password_on_argv, char *err, size_t errlen) SK_MUST_CHECK;

#endif
