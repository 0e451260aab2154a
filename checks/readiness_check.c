/* readiness_check.c: readiness-check, drop-in for the PXC operator's readiness-check.sh, plus --replica. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "galera.h"
#include "log.h"
#include "probe.h"
#include "proc.h"
#include "replica.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", NULL, "mysqld address [default: this node's first IP, like hostname -I]", "33062",
			   "monitor", "/etc/mysql/mysql-users-secret/monitor", "MONITOR_PASSWORD", NULL),
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL,
	 "One deadline for the whole check; decimals allowed. Overrides READINESS_CHECK_TIMEOUT.", 0},
	{"k8s-timeout", 0, OPT_INT, "SECONDS", "10", "READINESS_CHECK_TIMEOUT", 1, 3600, NULL,
	 "The probe's timeoutSeconds; the deadline stays below it by 20% (at most 1 s).", 0},
	{"available-when-donor", 0, OPT_FLAG, NULL, "1", "AVAILABLE_WHEN_DONOR", 0, 0, NULL,
	 "A donor/desynced node (wsrep_local_state=2) counts as ready.", 0},
	{"replica", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Check an async replica instead of a Galera node: IO and SQL threads running, lag known.", 0},
	{"max-lag", 0, OPT_INT, "SECONDS", "-1", NULL, -1, 100000000, NULL,
	 "With --replica: not ready when Seconds_Behind_Master is above this (-1: no limit).", 0},
	{"require-read-only", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Not ready unless read_only=ON.", 0},
	{"require-writable", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Not ready unless read_only=OFF.", 0},
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", NULL, 0, 0, NULL,
	 "Where the bypass file sleep-forever lives.", 0},
	{"recovery-file", 0, OPT_STRING, "PATH", "/tmp/recovery-case", NULL, 0, 0, NULL,
	 "When this file exists the node is in manual recovery: report ready.", 0},
};
/* clang-format on */

int main(int argc, char **argv)
{
	struct opts o = {
		.prog = "readiness-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]...",
		.summary = "Exit 0 when this MySQL node should take traffic: Galera Primary and Synced (or Donor when\n"
			   "allowed), or with --replica an async replica whose threads run and whose lag is known.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 2,
	};
	struct probe_conn pc;
	struct statusmap status = { 0 }, vars = { 0 };
	struct db_err e;
	char err[512], msg[600];
	struct probe_verdict pv;
	int64_t started = deadline_now_us();
	const char *setting;
	long budget_ms;
	deadline_t dl;
	int rc;
	bool json;

	proc_no_dumps(); /* before any password is read */
	log_setup(argv[0], LOG_TEXT, LOG_WARN, stderr);
	if ((rc = opts_parse_main(&o, argc, argv)) >= 0)
		return rc;
	json = opt_flag(&o, "json");
	if (o.nargs)
		fprintf(stderr,
			"readiness-check: warning: positional arguments are ignored (as by readiness-check.sh); "
			"never pass a password on the command line\n");
	if (opt_flag(&o, "require-read-only") && opt_flag(&o, "require-writable")) {
		fprintf(stderr, "readiness-check: --require-read-only and --require-writable exclude each other\n");
		opts_free(&o);
		return 2;
	}

	/* Manual recovery: the operator's scripts report ready so nothing restarts the pod. */
	if (probe_readiness_bypass(opt_str(&o, "recovery-file"), opt_str(&o, "datadir"), &pv)) {
		rc = probe_report("readiness", json, true, pv.reason, pv.msg, stdout, started);
		opts_free(&o);
		return rc;
	}

	if (probe_conn_setup(&o, &pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "readiness-check: %s\n", err);
		opts_free(&o);
		return 2;
	}
	budget_ms = opt_given(&o, "timeout") ? (long)(opt_num(&o, "timeout") * 1000)
					     : probe_k8s_deadline_ms(opt_int(&o, "k8s-timeout"));
	dl = deadline_in_ms(budget_ms);
	setting = opt_given(&o, "timeout") ? "--timeout" : "READINESS_CHECK_TIMEOUT";

	if (opt_flag(&o, "replica")) {
		struct replica_rules rules = {
			.max_lag = opt_int(&o, "max-lag"),
			.read_only = opt_flag(&o, "require-read-only")  ? 1
				     : opt_flag(&o, "require-writable") ? 0
									: -1,
		};
		struct replica_verdict v;
		struct statusmap row = { 0 };
		struct db db = { 0 };
		unsigned long nrows = 0;

		if (db_connect(&db, &pc.t, &dl, &e) < 0 ||
		    db_query_row(&db, "SHOW REPLICA STATUS", &dl, &row, &nrows, &e) < 0 ||
		    (rules.read_only >= 0 &&
		     db_query_pairs(&db, "SHOW GLOBAL VARIABLES LIKE 'read_only'", &dl, &vars, &e) < 0)) {
			rc = probe_report_db_error("readiness", "not ready", json, &e, &pc, budget_ms, setting, stdout,
						   started);
		} else {
			replica_judge(&row, nrows, statusmap_get(&vars, "read_only"), &rules, &v);
			snprintf(msg, sizeof(msg), "%s: %s", v.up ? "ready" : "not ready", v.detail);
			rc = probe_report("readiness", json, v.up, replica_reason_str(v.reason), msg, stdout, started);
		}
		db_close(&db);
		statusmap_free(&row);
	} else {
		struct galera_rules rules = {
			.need_primary = true,
			.need_synced = true,
			.donor_ok = opt_flag(&o, "available-when-donor"),
			.readonly_ok = !opt_flag(&o, "require-writable"),
		};
		struct galera_verdict v;

		if (probe_fetch_galera(&pc, &dl, &status,
				       galera_rules_need_vars(&rules) || opt_flag(&o, "require-read-only") ? &vars
													   : NULL,
				       &e) < 0) {
			rc = probe_report_db_error("readiness", "not ready", json, &e, &pc, budget_ms, setting, stdout,
						   started);
		} else {
			galera_judge(&status, &vars, &rules, &v);
			if (v.up && opt_flag(&o, "require-read-only")) {
				const char *ro = statusmap_get(&vars, "read_only");

				if (!ro || !sk_streq_ci(ro, "ON")) {
					v.up = false;
					v.reason = GALERA_READ_ONLY;
					sk_strlcpy(v.detail, "read_only=OFF, read-only required", sizeof(v.detail));
				}
			}
			snprintf(msg, sizeof(msg), "%s: %s", v.up ? "ready" : "not ready", v.detail);
			rc = probe_report("readiness", json, v.up, galera_reason_str(v.reason), msg, stdout, started);
		}
	}
	statusmap_free(&status);
	statusmap_free(&vars);
	probe_conn_free(&pc);
	opts_free(&o);
	return rc;
}
