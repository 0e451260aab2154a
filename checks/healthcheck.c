/* healthcheck.c: healthcheck.sh's argument walk, tests and verdicts, and their I/O on one connection. */
#include "healthcheck.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "galera.h"
#include "mycnf.h"
#include "probe.h"
#include "sst.h"
#include "sst_proc.h"

static const char *const test_names[HC_NTESTS] = {
	"connect",     "innodb_initialized", "innodb_buffer_pool_loaded", "galera_online", "galera_ready",
	"replication", "mariadbupgrade",
};

const char *healthcheck_test_str(enum hc_test t)
{
	return test_names[t];
}

int healthcheck_test_find(const char *name)
{
	for (int i = 0; i < HC_NTESTS; i++)
		if (strcmp(name, test_names[i]) == 0)
			return i;
	return -1;
}

/* ---- the argument walk ------------------------------------------------------------------ */

void healthcheck_parser_init(struct hc_parser *p, int argc, char **argv)
{
	p->argc = argc;
	p->argv = argv;
	p->i = 1;
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The next argument, when there is one. */
static const char *peek(const struct hc_parser *p)
{
	return p->i + 1 < p->argc ? p->argv[p->i + 1] : NULL;
}

/* A value-taking option without '=': the script takes the next word unless it starts with "--"
 * (then the option is bare: `bare`). With no next word its final `shift` fails under `set -e`:
 * exit 1. */
static void take_value(struct hc_parser *p, struct hc_step *s, const char *bare, const char *opt)
{
	const char *next = peek(p);

	if (!next) {
		s->value = "";
		/* the step applies, then the run ends: see healthcheck_run_args */
		snprintf(s->msg, sizeof(s->msg), "healthcheck: %s needs a value (the last argument)", opt);
		return;
	}
	if (bare && starts(next, "--")) {
		s->value = bare;
		return;
	}
	s->value = next;
	p->i++;
}

/* "--defaults-file", "--defaults-extra-file", "--defaults-group-suffix", bare or with "=":
 * the key the script stores ("file", "extra_file", "group_suffix"), else NULL. */
static const char *defaults_key(const char *a)
{
	static const char *const names[][2] = {
		{ "--defaults-file", "file" },
		{ "--defaults-extra-file", "extra_file" },
		{ "--defaults-group-suffix", "group_suffix" },
	};

	for (size_t i = 0; i < SK_ARRAY_LEN(names); i++) {
		size_t n = strlen(names[i][0]);

		if (strncmp(a, names[i][0], n) == 0 && (a[n] == '\0' || a[n] == '='))
			return names[i][1];
	}
	return NULL;
}

int healthcheck_own_option(const char *a)
{
	static const char *const flags[] = { "--json", "--alive-during-sst" };
	static const char *const valued[] = { "--timeout", "--user", "--password-file" };

	for (size_t i = 0; i < SK_ARRAY_LEN(flags); i++)
		if (strcmp(a, flags[i]) == 0)
			return 1;
	for (size_t i = 0; i < SK_ARRAY_LEN(valued); i++) {
		size_t n = strlen(valued[i]);

		if (strncmp(a, valued[i], n) == 0 && a[n] == '=')
			return 1;
		if (strcmp(a, valued[i]) == 0)
			return 2;
	}
	return 0;
}

/* --replication_KEY[=VALUE]: the key lower-cased, the value "1" when none follows. */
static void repl_step(struct hc_parser *p, struct hc_step *s, const char *a)
{
	const char *key = a + strlen("--replication_"), *eq = strchr(key, '=');
	size_t n = eq ? (size_t)(eq - key) : strlen(key);

	s->kind = HC_STEP_REPL;
	if (n >= sizeof(s->key))
		n = sizeof(s->key) - 1;
	for (size_t j = 0; j < n; j++)
		s->key[j] = (char)tolower((unsigned char)key[j]);
	if (eq)
		s->value = eq + 1;
	else
		take_value(p, s, "1", a);
}

/* The script's settings (--su, --replication_*, --datadir, the option files, --no-connect): true
 * with `s` filled, false when `a` is none of them. */
static bool setting_step(struct hc_parser *p, struct hc_step *s, const char *a)
{
	const char *k, *eq = strchr(a, '=');

	if (starts(a, "--su=")) {
		s->kind = HC_STEP_SU;
		s->value = a + 5;
	} else if (strcmp(a, "--su") == 0) {
		s->kind = HC_STEP_SU;
		take_value(p, s, NULL, "--su");
	} else if (strcmp(a, "--su-mysql") == 0) {
		s->kind = HC_STEP_SU;
		s->value = "mysql";
	} else if (starts(a, "--replication_")) {
		repl_step(p, s, a);
	} else if (starts(a, "--datadir=")) {
		s->kind = HC_STEP_DATADIR;
		s->value = a + 10;
	} else if (strcmp(a, "--datadir") == 0) {
		s->kind = HC_STEP_DATADIR;
		take_value(p, s, NULL, "--datadir");
	} else if (strcmp(a, "--no-defaults") == 0) {
		s->kind = HC_STEP_NO_DEFAULTS;
	} else if ((k = defaults_key(a)) != NULL) {
		s->kind = HC_STEP_DEFAULTS;
		sk_strlcpy(s->key, k, sizeof(s->key));
		if (eq)
			s->value = eq + 1;
		else
			take_value(p, s, "", a);
	} else if (strcmp(a, "--no-connect") == 0) {
		s->kind = HC_STEP_NO_CONNECT;
	} else {
		return false;
	}
	return true;
}

/* A test ("--connect"), "--" (nothing), or an unknown word: an error step. */
static void test_step(struct hc_step *s, const char *a)
{
	int t;

	if (!starts(a, "--")) {
		s->kind = HC_STEP_ERROR;
		snprintf(s->msg, sizeof(s->msg), "Unknown healthcheck option %s", a);
		return;
	}
	t = healthcheck_test_find(a + 2);
	if (!a[2]) {
		s->kind = HC_STEP_SKIP; /* "--": the script's test name is empty, nothing runs */
	} else if (t < 0) {
		s->kind = HC_STEP_ERROR;
		snprintf(s->msg, sizeof(s->msg), "healthcheck unknown option or test '%s'", a + 2);
	} else {
		s->kind = HC_STEP_TEST;
		s->test = (enum hc_test)t;
	}
}

bool healthcheck_parser_next(struct hc_parser *p, struct hc_step *s)
{
	const char *a;

	memset(s, 0, sizeof(*s));
	if (p->i >= p->argc)
		return false;
	a = p->argv[p->i];
	if (setting_step(p, s, a)) {
		/* filled */
	} else if (healthcheck_own_option(a) == 1) {
		s->kind = HC_STEP_SKIP;
	} else if (healthcheck_own_option(a) == 2) {
		s->kind = HC_STEP_SKIP;
		if (peek(p))
			p->i++;
	} else if (strcmp(a, "--password") == 0 || starts(a, "--password=")) {
		/* Never echoed: what follows may be the password itself. */
		s->kind = HC_STEP_ERROR;
		snprintf(s->msg, sizeof(s->msg),
			 "healthcheck: a password is not taken on the command line (every process can read it "
			 "there): use --password-file or HEALTHCHECK_PASSWORD_FILE");
		if (!a[10] && peek(p))
			p->i++; /* and its value */
	} else {
		test_step(s, a);
	}
	p->i++;
	return true;
}

/* ---- the run ---------------------------------------------------------------------------- */

static void set_str(char **field, const char *v)
{
	free(*field);
	*field = v && *v ? xstrdup(v) : NULL;
}

static void defaults_clear(struct hc_defaults *d)
{
	set_str(&d->file, NULL);
	set_str(&d->extra_file, NULL);
	set_str(&d->group_suffix, NULL);
	d->no_defaults = false;
}

/* The datadir, and its owner (mysqld's user, whose .my-healthcheck.cnf the entrypoint writes
 * 0600 while the probe may run as root): trusted for option files. */
static void set_datadir(struct hc_run *r, const char *dir)
{
	struct stat st;

	set_str(&r->datadir, dir);
	r->defs.datadir_owner = dir && stat(dir, &st) == 0 ? st.st_uid : 0;
}

static void repl_clear(struct hc_repl *r)
{
	char **f[] = { &r->io, &r->sql, &r->seconds_behind_master, &r->sql_remaining_delay, &r->all, &r->name };

	for (size_t i = 0; i < SK_ARRAY_LEN(f); i++)
		set_str(f[i], NULL);
}

static void run_reset(struct hc_run *r)
{
	char path[1024];
	struct stat st;

	repl_clear(&r->repl);
	defaults_clear(&r->defs);
	set_datadir(r, r->default_datadir);
	r->connect_s = -1;
	/* As the script starts: its datadir's .my-healthcheck.cnf, when it is a regular file ([ -f ]), is the
	 * default extra file (the entrypoint writes it with the healthcheck user's password). */
	if (sk_fmt(path, sizeof(path), "%s/.my-healthcheck.cnf", r->default_datadir) && stat(path, &st) == 0 &&
	    S_ISREG(st.st_mode))
		set_str(&r->defs.extra_file, path);
}

void healthcheck_run_init(struct hc_run *r, const char *default_datadir, FILE *err)
{
	memset(r, 0, sizeof(*r));
	r->default_datadir = default_datadir && *default_datadir ? default_datadir : "/var/lib/mysql";
	r->err = err;
	run_reset(r);
}

void healthcheck_run_free(struct hc_run *r)
{
	repl_clear(&r->repl);
	defaults_clear(&r->defs);
	free(r->datadir);
	r->datadir = NULL;
}

static void record(struct hc_run *r, const char *test, bool ok, const char *reason)
{
	struct hc_result *res;

	if (r->nresults >= HC_MAX_RESULTS)
		return;
	res = &r->results[r->nresults++];
	sk_strlcpy(res->test, test, sizeof(res->test));
	res->ok = ok;
	sk_strlcpy(res->reason, reason, sizeof(res->reason));
}

static void say(struct hc_run *r, const char *line)
{
	if (r->err) {
		fprintf(r->err, "%s\n", line);
		fflush(r->err);
	}
}

/* The script's _repl_param_check after a --replication_* setting. */
static void repl_set(struct hc_run *r, const char *key, const char *value)
{
	struct hc_repl *s = &r->repl;
	char line[200];

	if (strcmp(key, "io") == 0)
		set_str(&s->io, value);
	else if (strcmp(key, "sql") == 0)
		set_str(&s->sql, value);
	else if (strcmp(key, "seconds_behind_master") == 0)
		set_str(&s->seconds_behind_master, value);
	else if (strcmp(key, "sql_remaining_delay") == 0)
		set_str(&s->sql_remaining_delay, value);
	else if (strcmp(key, "all") == 0)
		set_str(&s->all, value);
	else if (strcmp(key, "name") == 0)
		set_str(&s->name, value);
	/* any other key is stored by the script and never read: no effect */

	if (strcmp(key, "seconds_behind_master") == 0 || strcmp(key, "sql_remaining_delay") == 0) {
		if (!s->io) {
			set_str(&s->io, "1");
			snprintf(line, sizeof(line), "Forcing --replication_io=1, %s requires IO thread to be running",
				 key);
			say(r, line);
		}
	} else if (strcmp(key, "all") == 0 && s->name) {
		set_str(&s->name, NULL);
		say(r, "Option --replication_all incompatible with specified source --replication_name, clearing "
		       "replication_name");
	} else if (strcmp(key, "name") == 0 && s->all) {
		set_str(&s->all, NULL);
		say(r, "Option --replication_name incompatible with --replication_all, clearing replication_all");
	}
}

static void defaults_set(struct hc_run *r, const char *key, const char *value)
{
	if (strcmp(key, "file") == 0)
		set_str(&r->defs.file, value);
	else if (strcmp(key, "extra_file") == 0)
		set_str(&r->defs.extra_file, value);
	else
		set_str(&r->defs.group_suffix, value);
	r->defs.no_defaults = false;
}

static int fail_line(struct hc_run *r, const char *test, const char *line)
{
	record(r, test, false, line);
	say(r, line);
	return 1;
}

/* --su USER: become the user and start afresh with the remaining arguments. 0 to go on, else the
 * run's exit code. */
static int su_step(struct hc_run *r, const struct hc_parser *p, const struct hc_step *s, const struct hc_io *io)
{
	char reason[400], line[600];

	if (s->msg[0])
		return 0; /* no user: the missing value ends the run */
	if (!io->su || io->su(io->ctx, s->value, reason, sizeof(reason)) < 0) {
		snprintf(line, sizeof(line), "healthcheck: --su %s: %s", s->value,
			 io->su ? reason : "not supported here");
		return fail_line(r, "su", line);
	}
	record(r, "su", true, s->value);
	/* The script execs itself as the user with the remaining arguments: a fresh start, earlier
	 * settings and results forgotten. */
	io->reset(io->ctx);
	run_reset(r);
	if (p->i >= p->argc)
		return fail_line(r, "arguments", "At least one argument required");
	return 0;
}

/* One test; false (and the failure line said) when it fails. */
static bool test_passes(struct hc_run *r, enum hc_test t, const struct hc_io *io)
{
	char reason[400], line[600];

	if (healthcheck_run_test(r, t, io, reason, sizeof(reason)))
		return true;
	snprintf(line, sizeof(line), "healthcheck %s failed: %s", healthcheck_test_str(t), reason);
	say(r, line);
	return false;
}

/* Apply one step. 0 to go on, else the run's exit code. */
static int apply_step(struct hc_run *r, const struct hc_parser *p, const struct hc_step *s, const struct hc_io *io)
{
	switch (s->kind) {
	case HC_STEP_TEST: return test_passes(r, s->test, io) ? 0 : 1;
	case HC_STEP_REPL: repl_set(r, s->key, s->value); break;
	case HC_STEP_DATADIR: set_datadir(r, s->value); break;
	case HC_STEP_NO_DEFAULTS:
		defaults_clear(&r->defs);
		r->defs.no_defaults = true;
		io->reset(io->ctx);
		break;
	case HC_STEP_DEFAULTS:
		defaults_set(r, s->key, s->value);
		io->reset(io->ctx);
		break;
	case HC_STEP_NO_CONNECT: r->connect_s = 0; break;
	case HC_STEP_SU: return su_step(r, p, s, io);
	case HC_STEP_SKIP: break;
	case HC_STEP_ERROR: return fail_line(r, "arguments", s->msg);
	}
	return 0;
}

const char *healthcheck_trailing_setting(int argc, char **argv)
{
	struct hc_parser p;
	struct hc_step s;
	const char *unused = NULL;

	healthcheck_parser_init(&p, argc, argv);
	for (const char *arg = argc > 1 ? argv[1] : NULL; healthcheck_parser_next(&p, &s);
	     arg = p.i < argc ? argv[p.i] : NULL) {
		if (s.msg[0] || s.kind == HC_STEP_ERROR)
			return NULL; /* the run ends there with its own message */
		if (s.kind == HC_STEP_TEST || s.kind == HC_STEP_SU)
			unused = NULL; /* --su starts afresh */
		else if (s.kind == HC_STEP_REPL || s.kind == HC_STEP_DATADIR || s.kind == HC_STEP_DEFAULTS ||
			 s.kind == HC_STEP_NO_DEFAULTS)
			unused = arg;
	}
	return unused;
}

int healthcheck_run_args(struct hc_run *r, int argc, char **argv, const struct hc_io *io)
{
	struct hc_parser p;
	struct hc_step s;
	char reason[400], line[600];
	const char *unused;
	int rc;

	if (argc <= 1)
		return fail_line(r, "arguments", "At least one argument required");
	if ((unused = healthcheck_trailing_setting(argc, argv)) != NULL) {
		snprintf(line, sizeof(line),
			 "healthcheck warning: %.200s has no test after it and changes nothing (an option applies to "
			 "the tests that follow it, as in healthcheck.sh)",
			 unused);
		say(r, line);
	}
	healthcheck_parser_init(&p, argc, argv);
	while (healthcheck_parser_next(&p, &s)) {
		if ((rc = apply_step(r, &p, &s, io)) != 0)
			return rc;
		if (s.msg[0])
			return fail_line(r, "arguments", s.msg);
	}
	if (r->connect_s != 0) {
		/* No successful connect recorded: the run's answer is the connect test's. */
		if (!healthcheck_run_test(r, HC_CONNECT, io, reason, sizeof(reason))) {
			snprintf(line, sizeof(line), "healthcheck connect failed: %s", reason);
			say(r, line);
			return 1;
		}
	}
	return 0;
}

/* ---- the tests -------------------------------------------------------------------------- */

#define SQL_SKIP_NETWORKING "select @@skip_networking"
#define SQL_INNODB \
	"select 1 from information_schema.ENGINES WHERE engine='innodb' AND support in ('YES', 'DEFAULT', 'ENABLED')"
#define SQL_BUFFER_POOL                                                      \
	"select VARIABLE_VALUE from information_schema.GLOBAL_STATUS WHERE " \
	"VARIABLE_NAME='Innodb_buffer_pool_load_status'"

static bool test_connect(struct hc_run *r, const struct hc_io *io, char *reason, size_t len)
{
	struct db_err e;
	char val[64], sock_why[300] = "", tcp_why[300];
	struct hc_value v = { .buf = val, .len = sizeof(val) };
	bool ok;

	if (io->socket_value(io->ctx, &r->defs, SQL_SKIP_NETWORKING, &v, &e) == 0 && v.found &&
	    (strcmp(val, "0") == 0 || strcmp(val, "1") == 0)) {
		if (val[0] == '1') {
			snprintf(reason, len, "skip_networking=1: the server does not listen on TCP yet");
			return false;
		}
		snprintf(reason, len, "connected over the socket, skip_networking=0");
		return true;
	}
	if (v.found)
		snprintf(sock_why, sizeof(sock_why), "unexpected answer '%s' to select @@skip_networking", val);
	else
		io->describe(io->ctx, &e, sock_why, sizeof(sock_why));
	v.found = false;
	if (io->tcp_value(io->ctx, &r->defs, SQL_SKIP_NETWORKING, &v, &e) == 0)
		ok = healthcheck_judge_tcp_connect(val, v.found, NULL, tcp_why, sizeof(tcp_why));
	else {
		char d[300];

		io->describe(io->ctx, &e, d, sizeof(d));
		ok = healthcheck_judge_tcp_connect(NULL, false, &e, tcp_why, sizeof(tcp_why));
		if (!ok)
			snprintf(tcp_why, sizeof(tcp_why), "%s", d);
	}
	snprintf(reason, len, "socket: %s; TCP to localhost: %s", sock_why, tcp_why);
	if (!ok && r->alive_during_sst && io->sst_running) {
		char why[600] = "";

		if (io->sst_running(io->ctx, r->datadir ? r->datadir : "", why, sizeof(why)) == 1) {
			snprintf(reason, len, "%s (--alive-during-sst; mysqld does not answer yet)", why);
			ok = true;
		} else if (why[0]) {
			sk_fmt(reason + strlen(reason), len - strlen(reason), "; %s", why);
		}
	}
	return ok;
}

/* The replication test: SHOW ... STATUS as the settings say, judged. */
static bool test_replication(struct hc_run *r, const struct hc_io *io, char *reason, size_t len)
{
	struct statusmap rows[64];
	struct hc_rows got = { .rows = rows, .max = SK_ARRAY_LEN(rows) };
	struct db_err e;
	char sql[400];
	bool ok = false;

	memset(rows, 0, sizeof(rows));
	healthcheck_replication_sql(&r->repl, sql, sizeof(sql));
	if (io->socket_rows(io->ctx, &r->defs, sql, &got, &e) < 0)
		io->describe(io->ctx, &e, reason, len);
	else
		ok = healthcheck_judge_replication(rows, got.n, &r->repl, reason, len);
	for (size_t i = 0; i < SK_ARRAY_LEN(rows); i++)
		statusmap_free(&rows[i]);
	return ok;
}

bool healthcheck_run_test(struct hc_run *r, enum hc_test t, const struct hc_io *io, char *reason, size_t len)
{
	struct statusmap status = { 0 };
	struct db_err e;
	char val[512], path[1100];
	struct hc_value v = { .buf = val, .len = sizeof(val) };
	bool ok = false;

	reason[0] = '\0';
	switch (t) {
	case HC_CONNECT:
		ok = test_connect(r, io, reason, len);
		if (ok)
			r->connect_s = 0;
		break;
	case HC_INNODB_INITIALIZED:
	case HC_INNODB_BUFFER_POOL_LOADED:
		if (io->socket_value(io->ctx, &r->defs, t == HC_INNODB_INITIALIZED ? SQL_INNODB : SQL_BUFFER_POOL, &v,
				     &e) < 0)
			io->describe(io->ctx, &e, reason, len);
		else if (t == HC_INNODB_INITIALIZED)
			ok = healthcheck_judge_innodb_initialized(val, v.found, reason, len);
		else
			ok = healthcheck_judge_buffer_pool_loaded(val, v.found, reason, len);
		break;
	case HC_GALERA_ONLINE:
	case HC_GALERA_READY:
		if (io->socket_status(io->ctx, &r->defs, &status, &e) < 0)
			io->describe(io->ctx, &e, reason, len);
		else if (t == HC_GALERA_ONLINE)
			ok = healthcheck_judge_galera_online(&status, reason, len);
		else
			ok = healthcheck_judge_galera_ready(&status, reason, len);
		statusmap_free(&status);
		break;
	case HC_REPLICATION: ok = test_replication(r, io, reason, len); break;
	case HC_MARIADBUPGRADE:
		snprintf(path, sizeof(path), "%s/mariadb_upgrade_info", r->datadir ? r->datadir : "");
		ok = io->upgrade_locked(io->ctx, path, reason, len) == 0;
		break;
	case HC_NTESTS: break;
	}
	record(r, healthcheck_test_str(t), ok, reason);
	return ok;
}

/* ---- pure verdicts ---------------------------------------------------------------------- */

bool healthcheck_judge_innodb_initialized(const char *value, bool found, char *reason, size_t len)
{
	if (found && value && strcmp(value, "1") == 0) {
		snprintf(reason, len, "InnoDB initialized");
		return true;
	}
	snprintf(reason, len, "InnoDB is not available yet (information_schema.ENGINES)");
	return false;
}

bool healthcheck_judge_buffer_pool_loaded(const char *value, bool found, char *reason, size_t len)
{
	bool ok = found && value && strstr(value, "load completed");

	snprintf(reason, len, "Innodb_buffer_pool_load_status=%s", found && value ? value : "(missing)");
	return ok;
}

bool healthcheck_judge_galera_online(const struct statusmap *status, char *reason, size_t len)
{
	/* The script's test is wsrep_local_state == 4; a donor is simply not synced. */
	struct galera_rules rules = { .need_synced = true, .synced_only = true, .readonly_ok = true };
	struct galera_verdict v;

	galera_judge(status, NULL, &rules, &v);
	snprintf(reason, len, "%s", v.detail);
	return v.up;
}

bool healthcheck_judge_galera_ready(const struct statusmap *status, char *reason, size_t len)
{
	const char *ready = statusmap_get(status, "wsrep_ready");

	if (!ready) {
		snprintf(reason, len, "no wsrep_ready status: not a Galera node");
		return false;
	}
	snprintf(reason, len, "wsrep_ready=%s", ready);
	return strcmp(ready, "ON") == 0;
}

/* The script compares with bash arithmetic: a limit must be a whole number. */
static bool over(const char *limit, const char *value, const char *field, char *reason, size_t len, bool *bad)
{
	long lim, v;

	*bad = false;
	if (!sk_parse_long(limit, -(1L << 40), 1L << 40, &lim)) {
		snprintf(reason, len, "--replication_%s: '%s' is not a whole number", field, limit);
		*bad = true;
		return true;
	}
	if (!sk_parse_long(value, -(1L << 40), 1L << 40, &v))
		return false;
	return lim < v;
}

/* One replication connection against the settings: false with the reason when it fails. */
static bool repl_row_ok(const struct statusmap *row, const struct hc_repl *s, char *reason, size_t len)
{
	const char *conn = statusmap_get(row, "Connection_name");
	const char *io = statusmap_get(row, "Slave_IO_Running");
	const char *sql = statusmap_get(row, "Slave_SQL_Running");
	const char *sbm = statusmap_get(row, "Seconds_Behind_Master");
	const char *srd = statusmap_get(row, "SQL_Remaining_Delay");
	const char *ioerr = statusmap_get(row, "Last_IO_Errno");
	const char *sqlerr = statusmap_get(row, "Last_SQL_Errno");
	char who[120] = "";
	bool bad;

	if (conn && *conn)
		snprintf(who, sizeof(who), "connection '%s': ", conn);
	if (s->io && io && strcmp(io, "No") == 0) {
		snprintf(reason, len, "%sSlave_IO_Running=No%s%s", who,
			 ioerr && strcmp(ioerr, "0") ? ", Last_IO_Errno=" : "",
			 ioerr && strcmp(ioerr, "0") ? ioerr : "");
		return false;
	}
	if (s->sql && sql && strcmp(sql, "No") == 0) {
		snprintf(reason, len, "%sSlave_SQL_Running=No%s%s", who,
			 sqlerr && strcmp(sqlerr, "0") ? ", Last_SQL_Errno=" : "",
			 sqlerr && strcmp(sqlerr, "0") ? sqlerr : "");
		return false;
	}
	if (s->seconds_behind_master && statusmap_has(row, "Seconds_Behind_Master")) {
		if (!sbm) {
			snprintf(reason, len, "%sSeconds_Behind_Master=NULL", who);
			return false;
		}
		if (over(s->seconds_behind_master, sbm, "seconds_behind_master", reason, len, &bad)) {
			if (!bad)
				snprintf(reason, len, "%sSeconds_Behind_Master=%s > %s", who, sbm,
					 s->seconds_behind_master);
			return false;
		}
	}
	if (s->sql_remaining_delay && srd &&
	    over(s->sql_remaining_delay, srd, "sql_remaining_delay", reason, len, &bad)) {
		if (!bad)
			snprintf(reason, len, "%sSQL_Remaining_Delay=%s > %s", who, srd, s->sql_remaining_delay);
		return false;
	}
	return true;
}

bool healthcheck_judge_replication(const struct statusmap *rows, size_t nrows, const struct hc_repl *s, char *reason,
				   size_t len)
{
	for (size_t i = 0; i < nrows; i++)
		if (!repl_row_ok(&rows[i], s, reason, len))
			return false;
	if (nrows == 0)
		snprintf(reason, len, "not a replica (no replication status): passes");
	else
		snprintf(reason, len, "%zu replication connection%s as required", nrows, nrows == 1 ? "" : "s");
	return true;
}

bool healthcheck_judge_tcp_connect(const char *value, bool found, const struct db_err *e, char *reason, size_t len)
{
	if (!e) {
		if (found && value && strcmp(value, "0") == 0) {
			snprintf(reason, len, "connected, skip_networking=0");
			return true;
		}
		if (found && value && strcmp(value, "1") == 0)
			snprintf(reason, len, "skip_networking=1");
		else
			snprintf(reason, len, "Unknown error: answer '%s'", found && value ? value : "(no row)");
		return false;
	}
	if (e->code == 1820 || e->code == 4151 || e->code == 1226 ||
	    (e->code >= 1000 && e->code < 2000 && strcmp(e->sqlstate, "28000") == 0)) {
		snprintf(reason, len, "the server answered (%s): counts as connected", e->msg);
		return true;
	}
	snprintf(reason, len, "%s", e->msg);
	return false;
}

void healthcheck_replication_sql(const struct hc_repl *s, char *buf, size_t len)
{
	char name[200];
	size_t k = 0;

	if (s->all) {
		snprintf(buf, len, "SHOW ALL REPLICAS STATUS");
		return;
	}
	if (!s->name) {
		snprintf(buf, len, "SHOW REPLICA STATUS");
		return;
	}
	for (const char *p = s->name; *p && k + 3 < sizeof(name); p++) {
		if (*p == '\'' || *p == '\\')
			name[k++] = '\\';
		name[k++] = *p;
	}
	name[k] = '\0';
	snprintf(buf, len, "SHOW REPLICA '%s' STATUS", name);
}

/* ---- the I/O against mysqld ------------------------------------------------------------- */

void healthcheck_dbio_init(struct hc_dbio *d, const deadline_t *dl, long budget_ms, const char *timeout_setting)
{
	memset(d, 0, sizeof(*d));
	d->dl = dl;
	d->budget_ms = budget_ms;
	d->timeout_setting = timeout_setting;
}

void healthcheck_dbio_close(struct hc_dbio *d)
{
	db_close(&d->db);
	d->tried = false;
}

/* Where and as whom the mariadb client would connect with these settings. */
struct hc_target {
	struct mycnf cnf;
	char user[256];
	const char *socket;
	unsigned port;
};

static int target_resolve(const struct hc_defaults *defs, struct hc_target *t, struct db_err *e)
{
	struct mycnf_sources src = {
		.no_defaults = defs->no_defaults,
		.defaults_file = defs->file,
		.extra_file = defs->extra_file,
		.group_suffix = defs->group_suffix,
		.home = getenv("HOME"),
		.trusted_owner = defs->datadir_owner,
	};
	const char *env;
	char why[300];
	long port;

	memset(t, 0, sizeof(*t));
	if (mycnf_load_client(&src, &t->cnf, why, sizeof(why)) < 0) {
		memset(e, 0, sizeof(*e));
		e->reason = DB_CLIENT_ERROR;
		sk_fmt(e->msg, sizeof(e->msg), "option file %s", why);
		return -1;
	}
	if (t->cnf.user) {
		sk_strlcpy(t->user, t->cnf.user, sizeof(t->user));
	} else {
		/* The client's default user is the login name of the process. */
		struct passwd *pw = getpwuid(geteuid());

		sk_strlcpy(t->user, pw ? pw->pw_name : "", sizeof(t->user));
	}
	env = getenv("MYSQL_UNIX_PORT");
	t->socket = t->cnf.socket ? t->cnf.socket : env && *env ? env : "/run/mysqld/mysqld.sock";
	env = getenv("MYSQL_TCP_PORT");
	t->port = t->cnf.port                                  ? (unsigned)t->cnf.port
		  : env && sk_parse_long(env, 1, 65535, &port) ? (unsigned)port
							       : 3306;
	return 0;
}

static int connect_to(struct hc_dbio *d, struct db *db, const struct hc_defaults *defs, bool tcp, struct db_err *e)
{
	struct hc_target t;
	struct db_target dt = { 0 };
	int rc;

	if (target_resolve(defs, &t, e) < 0) {
		snprintf(d->what, sizeof(d->what), "option files");
		return -1;
	}
	if (tcp)
		snprintf(d->what, sizeof(d->what), "localhost:%u", t.port);
	else
		snprintf(d->what, sizeof(d->what), "%s", t.socket);
	/* "localhost" over TCP: the client resolves it; 127.0.0.1 is what it finds first here. */
	dt.host = tcp ? "127.0.0.1" : NULL;
	dt.socket = tcp ? NULL : t.socket;
	dt.port = t.port;
	dt.user = d->user ? d->user : t.user;
	dt.password = d->password ? d->password : t.cnf.password;
	dt.what = d->what;
	rc = db_connect(db, &dt, d->dl, e);
	mycnf_free(&t.cnf);
	return rc;
}

static int ensure_socket(struct hc_dbio *d, const struct hc_defaults *defs, struct db_err *e)
{
	if (d->tried)
		sk_strlcpy(d->what, d->sock_what, sizeof(d->what));
	if (d->db.connected)
		return 0;
	if (d->tried) {
		*e = d->failed;
		return -1;
	}
	d->tried = true;
	if (connect_to(d, &d->db, defs, false, e) < 0) {
		d->failed = *e;
		sk_strlcpy(d->sock_what, d->what, sizeof(d->sock_what));
		return -1;
	}
	sk_strlcpy(d->sock_what, d->what, sizeof(d->sock_what));
	return 0;
}

/* A failed query on the shared connection: later tests see the same failure. */
static int query_failed(struct hc_dbio *d, const struct db_err *e)
{
	if (!d->db.connected)
		d->failed = *e;
	return -1;
}

static int dbio_socket_value(void *ctx, const struct hc_defaults *defs, const char *sql, struct hc_value *v,
			     struct db_err *e)
{
	struct hc_dbio *d = ctx;

	v->found = false;
	if (ensure_socket(d, defs, e) < 0)
		return -1;
	if (db_query_value(&d->db, sql, d->dl, &(struct db_value_dest){ v->buf, v->len, &v->found }, e) < 0)
		return query_failed(d, e);
	return 0;
}

static int dbio_socket_status(void *ctx, const struct hc_defaults *defs, struct statusmap *status, struct db_err *e)
{
	struct hc_dbio *d = ctx;

	if (ensure_socket(d, defs, e) < 0)
		return -1;
	if (probe_galera_read(&d->db, d->dl, status, NULL, e) < 0)
		return query_failed(d, e);
	return 0;
}

static int dbio_socket_rows(void *ctx, const struct hc_defaults *defs, const char *sql, struct hc_rows *r,
			    struct db_err *e)
{
	struct hc_dbio *d = ctx;

	r->n = 0;
	if (ensure_socket(d, defs, e) < 0)
		return -1;
	if (db_query_rows(&d->db, sql, d->dl, &(struct db_rows_dest){ r->rows, r->max, &r->n }, e) < 0)
		return query_failed(d, e);
	return 0;
}

static int dbio_tcp_value(void *ctx, const struct hc_defaults *defs, const char *sql, struct hc_value *v,
			  struct db_err *e)
{
	struct hc_dbio *d = ctx;
	struct db db = { 0 };
	int rc;

	v->found = false;
	if (connect_to(d, &db, defs, true, e) < 0)
		return -1;
	rc = db_query_value(&db, sql, d->dl, &(struct db_value_dest){ v->buf, v->len, &v->found }, e);
	db_close(&db);
	return rc;
}

int healthcheck_upgrade_locked(const char *path, char *why, size_t whylen)
{
	int fd;

	if (faccessat(AT_FDCWD, path, R_OK, AT_EACCESS) != 0) {
		snprintf(why, whylen, "%s absent or unreadable: no upgrade running", path);
		return 0;
	}
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return 1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		/* Held by mariadb-upgrade, or flock failed: the script's flock fails either way. */
		if (errno == EWOULDBLOCK)
			snprintf(why, whylen, "%s is locked: mariadb-upgrade is running", path);
		else
			snprintf(why, whylen, "%s: flock: %s", path, strerror(errno));
		close(fd);
		return 1;
	}
	close(fd);
	snprintf(why, whylen, "%s not locked: no upgrade running", path);
	return 0;
}

int healthcheck_sst_running(void *ctx, const char *datadir, char *why, size_t whylen)
{
	struct sst_policy policy = { .grace_s = 300 };
	struct sst_evidence ev;
	struct sst_verdict v;

	(void)ctx;
	sst_gather("/proc", datadir, NULL, NULL, time(NULL), &ev);
	if (!sst_liveness_before(&ev, datadir, &policy, &v)) {
		sst_foreign_note(&ev, why, whylen); /* files ignored for their owner, if any */
		return 0;
	}
	snprintf(why, whylen, "%s", v.msg);
	return 1;
}

static int dbio_upgrade_locked(void *ctx, const char *path, char *why, size_t whylen)
{
	(void)ctx;
	return healthcheck_upgrade_locked(path, why, whylen);
}

static void dbio_reset(void *ctx)
{
	healthcheck_dbio_close(ctx);
}

static void dbio_describe(void *ctx, const struct db_err *e, char *buf, size_t len)
{
	struct hc_dbio *d = ctx;
	struct probe_conn pc;

	memset(&pc, 0, sizeof(pc));
	sk_strlcpy(pc.what, d->what[0] ? d->what : "?", sizeof(pc.what));
	if (e->reason == DB_CLIENT_ERROR && strncmp(e->msg, "option file ", 12) == 0)
		snprintf(buf, len, "%s", e->msg);
	else
		probe_describe_error(e, &pc, d->budget_ms, d->timeout_setting, buf, len);
}

struct hc_io healthcheck_dbio_ops(struct hc_dbio *d, int (*su)(void *ctx, const char *user, char *err, size_t errlen))
{
	struct hc_io io = {
		.socket_value = dbio_socket_value,
		.socket_status = dbio_socket_status,
		.socket_rows = dbio_socket_rows,
		.tcp_value = dbio_tcp_value,
		.upgrade_locked = dbio_upgrade_locked,
		.reset = dbio_reset,
		.describe = dbio_describe,
		.sst_running = healthcheck_sst_running,
		.su = su,
		.ctx = d,
	};

	return io;
}
