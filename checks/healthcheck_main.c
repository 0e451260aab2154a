/* healthcheck_main.c: healthcheck (also installed as healthcheck.sh), drop-in for the MariaDB image's
 * healthcheck.sh with one deadline for the whole run. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "healthcheck.h"
#include "log.h"
#include "probe_main.h"
#include "secret.h"

struct healthcheck_settings {
	struct probe_settings p;
	const char *datadir;
	const char *user; /* --user; NULL: the option files' */
	char *password; /* --password-file's content or --password; NULL: the option files' */
	bool alive_during_sst;
};

/* clang-format off */
/* The table drives --help and docs/options/healthcheck.md. The tests and the script's options are
 * read in order by healthcheck_parser_next (as the script does); --timeout, --json and the environment go
 * through opts_parse before the run. */
static const struct opt_def options[] = {
	{"connect", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: the server answers on its socket (skip_networking=0), else over TCP to localhost; an "
	 "access-denied, expired, locked or over-limit login counts as connected.", 0},
	{"innodb_initialized", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: InnoDB is available in information_schema.ENGINES (crash recovery done).", 0},
	{"innodb_buffer_pool_loaded", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: Innodb_buffer_pool_load_status says load completed.", 0},
	{"galera_online", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: wsrep_local_state is 4 (Synced); a donor fails.", 0},
	{"galera_ready", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL, "Test: wsrep_ready is ON.", 0},
	{"replication", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: SHOW [ALL] REPLICA[S] ['name'] STATUS against the --replication_* settings given before it; "
	 "a server that is not a replica passes.", 0},
	{"mariadbupgrade", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Test: no process holds a lock on $datadir/mariadb_upgrade_info (mariadb-upgrade running).", 0},
	{"replication_io", 0, OPT_STRING, "[VALUE]", NULL, NULL, 0, 0, NULL,
	 "For --replication: fail when Slave_IO_Running is No (any non-empty value enables).", 0},
	{"replication_sql", 0, OPT_STRING, "[VALUE]", NULL, NULL, 0, 0, NULL,
	 "For --replication: fail when Slave_SQL_Running is No.", 0},
	{"replication_seconds_behind_master", 0, OPT_STRING, "[N]", NULL, NULL, 0, 0, NULL,
	 "For --replication: fail when Seconds_Behind_Master is NULL or above N; forces --replication_io.", 0},
	{"replication_sql_remaining_delay", 0, OPT_STRING, "[N]", NULL, NULL, 0, 0, NULL,
	 "For --replication: fail when SQL_Remaining_Delay is above N; forces --replication_io.", 0},
	{"replication_all", 0, OPT_STRING, "[VALUE]", NULL, NULL, 0, 0, NULL,
	 "For --replication: check every replication source (clears --replication_name).", 0},
	{"replication_name", 0, OPT_STRING, "NAME", NULL, NULL, 0, 0, NULL,
	 "For --replication: check this multi-source connection (clears --replication_all).", 0},
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", "HEALTHCHECK_DATADIR", 0, 0, NULL,
	 "Where mariadb_upgrade_info is; the environment also moves where .my-healthcheck.cnf is looked up.", 0, OPT_FIELD(struct healthcheck_settings, datadir)},
	{"no-defaults", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Read no option files (also drops the default $datadir/.my-healthcheck.cnf).", 0},
	{"defaults-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL,
	 "Read only this option file (groups [mysql] [mariadb-client] [client] [client-server] "
	 "[client-mariadb]).", 0},
	{"defaults-extra-file", 0, OPT_STRING, "PATH", "$datadir/.my-healthcheck.cnf", NULL, 0, 0, NULL,
	 "Read this option file after /etc/my.cnf and /etc/mysql/my.cnf, before ~/.my.cnf.", 0},
	{"defaults-group-suffix", 0, OPT_STRING, "SUFFIX", NULL, NULL, 0, 0, NULL,
	 "Also read the groups with this suffix ([client_SUFFIX] ...).", 0},
	{"no-connect", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Count the connect test as passed (for /docker-entrypoint-initdb.d scripts).", 0},
	{"su", 0, OPT_STRING, "USER", NULL, NULL, 0, 0, NULL,
	 "Become USER (setgid, initgroups, setuid; as root only) and go on with the remaining arguments as a "
	 "fresh start.", 0},
	{"su-mysql", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL, "The same as --su mysql.", 0},
	{"timeout", 0, OPT_NUMBER, "SECONDS", "3", "HEALTHCHECK_TIMEOUT", 0.05, 3600, NULL,
	 "One deadline for the whole run, every connection and query included; decimals allowed.", 0},
	{"json", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Also print one JSON object on stdout: every test run, its verdict and reason.", 0, OPT_FIELD(struct healthcheck_settings, p.json)},
	{"user", 0, OPT_STRING, "USER", NULL, "HEALTHCHECK_USER", 0, 0, NULL,
	 "User to log in to mariadbd as, over any option file's (.my-healthcheck.cnf included): credentials kept "
	 "outside the datadir survive an SST, which replaces the datadir.", 0, OPT_FIELD(struct healthcheck_settings, user)},
	{"password-file", 0, OPT_STRING, "PATH", NULL, "HEALTHCHECK_PASSWORD_FILE", 0, 0, NULL,
	 "Read the password from this file (a Kubernetes secret mount), over any option file's.", 0},
	{"password", 0, OPT_STRING, "PASSWORD", NULL, "HEALTHCHECK_PASSWORD", 0, 0, NULL,
	 "Password from the environment, over any option file's, when no --password-file is given.",
	 OPT_SECRET | OPT_NO_ARGV},
	{"alive-during-sst", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "For a liveness probe: the connect test also passes while liveness-check would call the datadir's mysqld "
	 "alive without asking it: its joiner SST process, --wsrep-recover, sleep-forever, "
	 "wsrep_recovery_verbose.log, or a sst_in_progress younger than 300 s.", 0, OPT_FIELD(struct healthcheck_settings, alive_during_sst)},
};
/* clang-format on */

static int su_to(void *ctx, const char *user, char *err, size_t errlen)
{
	struct passwd *pw;

	(void)ctx;
	errno = 0;
	pw = *user ? getpwnam(user) : NULL;
	if (!pw)
		return sk_err(err, errlen, "unknown user");
	if (geteuid() != 0)
		return sk_err(err, errlen, "only root can change user");
	if (initgroups(pw->pw_name, pw->pw_gid) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0)
		return sk_err(err, errlen, "cannot become %s: %s", pw->pw_name, strerror(errno));
	/* As gosu does: ~/.my.cnf is the new user's. */
	if (setenv("HOME", pw->pw_dir, 1) < 0)
		return sk_err(err, errlen, "setenv HOME: %s", strerror(errno));
	return 0;
}

/* Our own options (and --help/--version) for opts_parse; the rest stays for the ordered walk. */
static int own_options(int argc, char **argv, char **out)
{
	int n = 0;

	out[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int own = healthcheck_own_option(a);

		if (own || strcmp(a, "--help") == 0 || strcmp(a, "--version") == 0 || strcmp(a, "--help-markdown") == 0)
			out[n++] = argv[i];
		if (own == 2 && i + 1 < argc)
			out[n++] = argv[++i];
	}
	out[n] = NULL;
	return n;
}

static void print_json(const struct hc_run *r, int rc, int64_t started)
{
	sk_buf b;
	bool ok;

	sk_buf_init(&b, 64 * 1024);
	ok = sk_buf_addf(&b, "{\"probe\":\"healthcheck\",\"healthy\":%s,\"exit\":%d,\"tests\":[",
			 rc == 0 ? "true" : "false", rc);
	for (size_t i = 0; ok && i < r->nresults; i++) {
		char reason[sizeof(r->results[i].reason)];

		sk_strlcpy(reason, r->results[i].reason, sizeof(reason));
		log_redact(reason);
		ok = sk_buf_addf(&b, "%s{\"test\":", i ? "," : "") && sk_buf_add_json_str(&b, r->results[i].test) &&
		     sk_buf_addf(&b, ",\"ok\":%s,\"reason\":", r->results[i].ok ? "true" : "false") &&
		     sk_buf_add_json_str(&b, reason) && sk_buf_add(&b, "}", 1);
	}
	if (ok && sk_buf_addf(&b, "],\"elapsed_ms\":%.1f}\n", (double)(deadline_now_us() - started) / 1000.0))
		fputs(b.data, stdout);
	fflush(stdout);
	sk_buf_free(&b);
}

static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct healthcheck_settings *s = settings;

	if (opt_str(o, "password-file")) {
		char why[512];

		s->password = secret_read_file(opt_str(o, "password-file"), why, sizeof(why));
		if (!s->password)
			return sk_err(err, errlen, "password file %s", why);
	} else if (opt_str(o, "password")) {
		s->password = xstrdup(opt_str(o, "password"));
	}
	s->p.budget_ms = (long)(opt_num(o, "timeout") * 1000);
	s->p.timeout_setting = opt_given(o, "timeout") && strncmp(opt_source(o, "timeout"), "env", 3) == 0
				       ? "HEALTHCHECK_TIMEOUT"
				       : "--timeout";
	return 0;
}

static void settings_free(void *settings)
{
	struct healthcheck_settings *s = settings;

	if (s->password) {
		sk_wipe(s->password, strlen(s->password));
		free(s->password);
	}
}

/* The tests and the script's options, strictly left to right, under one deadline. */
static int run(void *settings, int argc, char **argv, int64_t started)
{
	const struct healthcheck_settings *s = settings;
	deadline_t dl = deadline_since_start_ms(s->p.budget_ms);
	struct hc_run hc;
	struct hc_dbio dbio;
	struct hc_io io;
	int rc;

	healthcheck_run_init(&hc, s->datadir, stderr);
	hc.alive_during_sst = s->alive_during_sst;
	healthcheck_dbio_init(&dbio, &dl, s->p.budget_ms, s->p.timeout_setting);
	dbio.user = s->user;
	dbio.password = s->password;
	io = healthcheck_dbio_ops(&dbio, su_to);
	rc = healthcheck_run_args(&hc, argc, argv, &io);
	if (s->p.json)
		print_json(&hc, rc, started);
	healthcheck_dbio_close(&dbio);
	healthcheck_run_free(&hc);
	return rc;
}

static const struct probe_kind healthcheck_kind = {
	.name = "healthcheck",
	.opts = {
		.prog = "healthcheck",
		.version = SIDEKICK_VERSION,
		.synopsis = "TEST-OR-OPTION...",
		.summary =
			"Drop-in for the MariaDB image's healthcheck.sh: the tests run strictly left to right, each\n"
			"with the settings given before it; the first failure ends the run (exit 1). Without a\n"
			"successful connect the run ends with the connect test. Every exit that is not healthy is\n"
			"1 (Docker reserves 2), bad arguments included. It connects to mariadbd through the unix\n"
			"socket, else TCP to localhost, that the option files name ([client] socket=, port=; default\n"
			"/run/mysqld/mysqld.sock and 3306), as the user and password they give or "
			"--user/--password-file.",
		.exit_status = "0 healthy, 1 not healthy or bad arguments (as healthcheck.sh; Docker reserves 2).",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
	},
	.log_level = LOG_WARN,
	.usage_exit = 1,
	.own_args = own_options,
	.settings_size = sizeof(struct healthcheck_settings),
	.settings_load = settings_load,
	.settings_free = settings_free,
	.run = run,
};

int main(int argc, char **argv)
{
	return probe_main(&healthcheck_kind, argc, argv);
}
