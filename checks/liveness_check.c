/* liveness_check.c: liveness-check, drop-in for the PXC operator's liveness-check.sh. */
#include <stdio.h>
#include <string.h>

#include "galera.h"
#include "log.h"
#include "probe.h"
#include "proc.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", NULL, "mysqld address [default: this node's first IP, like hostname -I]", "33062",
			   "monitor", "/etc/mysql/mysql-users-secret/monitor", "MONITOR_PASSWORD", NULL),
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL,
	 "One deadline for the whole check; decimals allowed. Overrides LIVENESS_CHECK_TIMEOUT.", 0},
	{"k8s-timeout", 0, OPT_INT, "SECONDS", "5", "LIVENESS_CHECK_TIMEOUT", 1, 3600, NULL,
	 "The probe's timeoutSeconds; the deadline stays below it by 20% (at most 1 s).", 0},
	{"state-file", 0, OPT_STRING, "PATH", NULL, "MYSQL_STATE_FILE", 0, 0, NULL,
	 "mysqld state file (NUL bytes ignored); when it says 'startup' a failing node is left alive.", 0},
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", NULL, 0, 0, NULL,
	 "mysqld's datadir: where sleep-forever, sst_in_progress and wsrep_recovery_verbose.log live, and the cwd of "
	 "the mysqld whose SST processes count.", 0},
	{"recovery-file", 0, OPT_STRING, "PATH", "/tmp/recovery-case", NULL, 0, 0, NULL,
	 "When this file exists the node is in manual recovery: report alive.", 0},
	PROBE_SST_OPTIONS(""),
};
/* clang-format on */

int main(int argc, char **argv)
{
	struct opts o = {
		.prog = "liveness-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]...",
		.summary = "Exit 0 while this MySQL node should be left running: mysqld answers within the deadline\n"
			   "and is in a Primary Galera component, or is starting up, recovering or receiving an SST (a "
			   "joiner\n"
			   "SST process of this datadir's mysqld, or a sst_in_progress file younger than "
			   "--sst-file-grace).",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 3,
	};
	struct probe_verdict v;
	struct probe_sst sst;
	struct probe_conn pc;
	struct statusmap status = { 0 };
	struct db_err e;
	char err[512];
	int64_t started = deadline_now_us();
	const char *setting;
	long budget_ms;
	deadline_t dl;
	int rc;
	bool json, fetched;

	proc_no_dumps(); /* before any password is read */
	log_setup(argv[0], LOG_TEXT, LOG_WARN, stderr);
	if ((rc = opts_parse_main(&o, argc, argv)) >= 0)
		return rc;
	json = opt_flag(&o, "json");
	if (o.nargs)
		fprintf(stderr, "liveness-check: warning: positional arguments are ignored (as by liveness-check.sh); "
				"never pass a password on the command line\n");

	probe_sst_from_opts(&o, &sst);
	if (probe_liveness_before(&sst, &v)) {
		rc = probe_report("liveness", json, true, v.reason, v.msg, stdout, started);
		opts_free(&o);
		return rc;
	}

	if (probe_conn_setup(&o, &pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "liveness-check: %s\n", err);
		opts_free(&o);
		return 2;
	}
	budget_ms = opt_given(&o, "timeout") ? (long)(opt_num(&o, "timeout") * 1000)
					     : probe_k8s_deadline_ms(opt_int(&o, "k8s-timeout"));
	setting = opt_given(&o, "timeout") ? "--timeout" : "LIVENESS_CHECK_TIMEOUT";
	dl = deadline_in_ms(budget_ms);

	fetched = probe_fetch_galera(&pc, &dl, &status, NULL, &e) == 0;
	probe_liveness_judge(fetched, &status, &e, opt_str(&o, "state-file"), &sst, &pc, budget_ms, setting, &v);
	rc = probe_report("liveness", json, v.up, v.reason, v.msg, stdout, started);
	statusmap_free(&status);
	probe_conn_free(&pc);
	opts_free(&o);
	return rc;
}
