/* liveness_check.c: liveness-check, drop-in for the PXC operator's liveness-check.sh. */
#include <stdio.h>
#include <string.h>

#include "galera.h"
#include "log.h"
#include "probe_main.h"

struct liveness_settings {
	struct probe_settings p;
	struct probe_sst sst;
	const char *state_file;
};

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", NULL, "mysqld address [default: this node's first IP, like hostname -I]", "33062",
			   "monitor", "/etc/mysql/mysql-users-secret/monitor", "MONITOR_PASSWORD", NULL),
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL,
	 "One deadline for the whole check; decimals allowed. Overrides LIVENESS_CHECK_TIMEOUT.", 0},
	{"k8s-timeout", 0, OPT_INT, "SECONDS", "5", "LIVENESS_CHECK_TIMEOUT", 1, 3600, NULL,
	 "The probe's timeoutSeconds; the deadline stays below it by 20% (at most 1 s).", 0},
	{"state-file", 0, OPT_STRING, "PATH", NULL, "MYSQL_STATE_FILE", 0, 0, NULL,
	 "mysqld state file (NUL bytes ignored); when it says 'startup' a failing node is left alive.", 0, OPT_FIELD(struct liveness_settings, state_file)},
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", NULL, 0, 0, NULL,
	 "mysqld's datadir: where sleep-forever, sst_in_progress and wsrep_recovery_verbose.log live, and the cwd of "
	 "the mysqld whose SST processes count.", 0, OPT_FIELD(struct liveness_settings, sst.datadir)},
	{"recovery-file", 0, OPT_STRING, "PATH", "/tmp/recovery-case", NULL, 0, 0, NULL,
	 "When this file exists the node is in manual recovery: report alive (only a file of root, this user or "
	 "the datadir's owner counts, as for the datadir's files).", 0, OPT_FIELD(struct liveness_settings, sst.recovery_file)},
	PROBE_SST_OPTIONS("", struct liveness_settings, sst),
};
/* clang-format on */

static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct liveness_settings *s = settings;

	(void)err;
	(void)errlen;
	probe_settings_load(o, &s->p);
	probe_k8s_settings_load(o, "LIVENESS_CHECK_TIMEOUT", &s->p);
	return 0;
}

static bool before(void *settings, struct probe_verdict *v)
{
	struct liveness_settings *s = settings;

	return probe_liveness_before(&s->sst, v);
}

static int fetch(const void *settings, const struct probe_conn *pc, const deadline_t *dl, struct probe_fetch *f,
		 struct db_err *e)
{
	(void)settings;
	return probe_fetch_galera(pc, dl, &f->status, NULL, e);
}

static void judge(void *settings, const struct probe_outcome *o, struct probe_verdict *v)
{
	struct liveness_settings *s = settings;

	probe_liveness_judge(o, s->state_file, &s->sst, v);
}

static const struct probe_kind liveness_kind = {
	.name = "liveness",
	.opts = {
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
	},
	.log_level = LOG_WARN,
	.ignored_args = "as by liveness-check.sh",
	.settings_size = sizeof(struct liveness_settings),
	.settings_load = settings_load,
	.before = before,
	.fetch = fetch,
	.judge = judge,
};

int main(int argc, char **argv)
{
	return probe_main(&liveness_kind, argc, argv);
}
