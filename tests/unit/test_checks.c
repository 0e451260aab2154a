/* test_checks.c: table tests of the Galera, replica and proxysql-check verdicts and of healthcheck
 * runs (argv and canned server answers in, exit code and stderr out); one case a file in
 * tests/data/checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clustercheck_opts.h"
#include "galera.h"
#include "healthcheck.h"
#include "proxysql_verdict.h"
#include "readiness.h"
#include "replica.h"
#include "sst.h"
#include "sst_proc.h"
#include "statusmap.h"
#include "testdata.h"

struct tcase {
	struct statusmap head, status, vars, row, row2;
	char proc[32][512]; /* [proc] lines, verbatim */
	int nproc;
};

/* Split a case file into "key = value" header lines and [status] / [vars] / [row] sections. */
static void parse_case(const char *path, struct tcase *c)
{
	char *text = testdata_read(path), *p = text, err[256];
	struct statusmap *cur = &c->head;

	memset(c, 0, sizeof(*c));
	while (*p) {
		char *nl = strchr(p, '\n'), *eq;
		char line[1024];

		if (nl)
			*nl = '\0';
		sk_strlcpy(line, p, sizeof(line));
		p = nl ? nl + 1 : p + strlen(p);
		sk_trim(line);
		if (!line[0] || line[0] == '#')
			continue;
		if (strcmp(line, "[status]") == 0) {
			cur = &c->status;
			continue;
		}
		if (strcmp(line, "[vars]") == 0) {
			cur = &c->vars;
			continue;
		}
		if (strcmp(line, "[row]") == 0) {
			cur = &c->row;
			continue;
		}
		if (strcmp(line, "[row2]") == 0) {
			cur = &c->row2;
			continue;
		}
		if (strcmp(line, "[proc]") == 0) {
			cur = NULL;
			continue;
		}
		if (!cur) {
			assert_true(c->nproc < 32);
			sk_strlcpy(c->proc[c->nproc++], line, sizeof(c->proc[0]));
			continue;
		}
		if (cur == &c->head) {
			eq = strchr(line, '=');
			assert_non_null(eq);
			*eq = '\0';
			assert_int_equal(statusmap_set(cur, sk_trim(line), sk_trim(eq + 1)), 0);
		} else {
			/* Sections go through the same text parser the fuzzer exercises. */
			if (statusmap_parse(cur, line, strlen(line), err, sizeof(err)) != 0)
				fail_msg("%s: %s", path, err);
		}
	}
	free(text);
}

static long head_long(const struct tcase *c, const char *key, long def)
{
	const char *v = statusmap_get(&c->head, key);
	long n;

	if (!v)
		return def;
	assert_true(sk_parse_long(v, -1000000, 1000000000, &n));
	return n;
}

static void rules_for(const struct tcase *c, struct galera_rules *r)
{
	const char *preset = statusmap_get(&c->head, "rules");

	memset(r, 0, sizeof(*r));
	r->readonly_ok = true;
	assert_non_null(preset);
	if (strcmp(preset, "liveness") == 0) {
		r->need_primary = true;
	} else if (strcmp(preset, "readiness") == 0) {
		r->need_primary = r->need_synced = r->donor_ok = true;
	} else if (strcmp(preset, "clustercheck") == 0) {
		r->need_primary = r->need_synced = true;
	} else if (strcmp(preset, "haproxy") == 0) {
		r->need_primary = r->need_synced = r->need_maint_disabled = r->need_not_rejecting = true;
		r->available_nodes = 1;
	} else {
		fail_msg("unknown rules preset '%s'", preset);
	}
	r->donor_ok = head_long(c, "donor_ok", r->donor_ok) != 0;
	r->readonly_ok = head_long(c, "readonly_ok", r->readonly_ok) != 0;
	r->need_read_only = head_long(c, "require_read_only", 0) != 0;
	r->available_nodes = (int)head_long(c, "available_nodes", r->available_nodes);
}

/* ---- healthcheck runs against canned answers ---------------------------------------------- */

/* "error CODE SQLSTATE message" from the case into a db_err; false for "ok" or absent. */
static bool case_error(const struct tcase *c, const char *key, struct db_err *e)
{
	const char *v = statusmap_get(&c->head, key);
	char buf[300], *code, *state, *msg, *save = NULL;
	long n;

	memset(e, 0, sizeof(*e));
	if (!v || strncmp(v, "error ", 6) != 0)
		return false;
	sk_strlcpy(buf, v + 6, sizeof(buf));
	code = strtok_r(buf, " ", &save);
	state = strtok_r(NULL, " ", &save);
	msg = strtok_r(NULL, "", &save);
	assert_non_null(code);
	assert_non_null(state);
	assert_true(sk_parse_long(code, 0, 100000, &n));
	e->code = (unsigned)n;
	sk_strlcpy(e->sqlstate, state, sizeof(e->sqlstate));
	e->reason = n == 2002 ? DB_REFUSED : n == 1045 ? DB_ACCESS_DENIED : n == 0 ? DB_TIMEOUT : DB_SERVER_ERROR;
	sk_fmt(e->msg, sizeof(e->msg), "%s (%ld)", msg ? msg : "", n);
	return true;
}

static int fake_value(const struct tcase *c, const char *key, const char *sql, struct hc_value *out, struct db_err *e)
{
	const char *which = strstr(sql, "skip_networking") ? "skip_networking"
			    : strstr(sql, "ENGINES")       ? "innodb"
							   : "buffer_pool";
	const char *v;

	out->found = false;
	if (case_error(c, key, e))
		return -1;
	if (strcmp(key, "tcp") == 0)
		which = "tcp_skip_networking";
	v = statusmap_get(&c->head, which);
	if (v) {
		out->found = true;
		sk_strlcpy(out->buf, v, out->len);
	}
	return 0;
}

static int fk_socket_value(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v,
			   struct db_err *e)
{
	(void)d;
	return fake_value(ctx, "socket", sql, v, e);
}

static int fk_tcp_value(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e)
{
	(void)d;
	return fake_value(ctx, "tcp", sql, v, e);
}

static int copy_map(const struct statusmap *from, struct statusmap *to)
{
	for (size_t i = 0; i < from->n; i++)
		if (statusmap_set(to, from->items[i].name, from->items[i].value) < 0)
			return -1;
	return 0;
}

static int fk_socket_status(void *ctx, const struct hc_defaults *d, struct statusmap *status, struct db_err *e)
{
	const struct tcase *c = ctx;

	(void)d;
	if (case_error(c, "socket", e))
		return -1;
	assert_int_equal(copy_map(&c->status, status), 0);
	return 0;
}

static int fk_socket_rows(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_rows *r, struct db_err *e)
{
	const struct tcase *c = ctx;
	const char *want = statusmap_get(&c->head, "expect_sql");

	(void)d;
	r->n = 0;
	if (want)
		assert_string_equal(sql, want);
	if (case_error(c, "socket", e) || case_error(c, "replication_error", e))
		return -1;
	assert_true(r->max >= 2);
	if (c->row.n)
		assert_int_equal(copy_map(&c->row, &r->rows[r->n++]), 0);
	if (c->row2.n)
		assert_int_equal(copy_map(&c->row2, &r->rows[r->n++]), 0);
	return 0;
}

static int fk_upgrade_locked(void *ctx, const char *path, char *why, size_t whylen)
{
	const struct tcase *c = ctx;
	const char *v = statusmap_get(&c->head, "upgrade");
	bool locked = v && strcmp(v, "locked") == 0;

	snprintf(why, whylen, "%s %s", path, locked ? "is locked" : "not locked");
	return locked;
}

/* "sst_running = <what was found>": the datadir's mysqld receives an SST; "sst_ignored = <line>":
 * not, and a bypass file was ignored for its owner. */
static int fk_sst_running(void *ctx, const char *datadir, char *why, size_t whylen)
{
	const struct tcase *c = ctx;
	const char *v = statusmap_get(&c->head, "sst_running");
	const char *ignored = statusmap_get(&c->head, "sst_ignored");

	if (v)
		snprintf(why, whylen, "%s in %s", v, datadir);
	else if (ignored)
		snprintf(why, whylen, "%s", ignored);
	return v != NULL;
}

static void fk_reset(void *ctx)
{
	(void)ctx;
}

static void fk_describe(void *ctx, const struct db_err *e, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "%s (fake): %s", db_reason_str(e->reason), e->msg);
}

static int fk_su(void *ctx, const char *user, char *err, size_t errlen)
{
	const struct tcase *c = ctx;
	const char *v = statusmap_get(&c->head, "su");

	if (!v || strcmp(v, "ok") != 0)
		return sk_err(err, errlen, "%s", v ? v : "not allowed");
	(void)user;
	return 0;
}

static void run_healthcheck_case(const char *path, struct tcase *c)
{
	struct hc_io io = {
		.socket_value = fk_socket_value,
		.socket_status = fk_socket_status,
		.socket_rows = fk_socket_rows,
		.tcp_value = fk_tcp_value,
		.upgrade_locked = fk_upgrade_locked,
		.reset = fk_reset,
		.describe = fk_describe,
		.sst_running = fk_sst_running,
		.su = fk_su,
		.ctx = c,
	};
	const char *args = statusmap_get(&c->head, "args");
	char *argv[64], buf[1024], *save = NULL, *tok, *err_text = NULL, want[2048] = "", key[32];
	size_t err_len = 0;
	int argc = 0, rc;
	struct hc_run run;
	FILE *err = open_memstream(&err_text, &err_len);

	assert_non_null(err);
	argv[argc++] = "healthcheck";
	sk_strlcpy(buf, args ? args : "", sizeof(buf));
	for (tok = strtok_r(buf, " ", &save); tok && argc < 63; tok = strtok_r(NULL, " ", &save))
		argv[argc++] = strcmp(tok, "''") == 0 ? "" : tok;
	argv[argc] = NULL;
	for (int i = 1; i < 10; i++) {
		const char *line;

		snprintf(key, sizeof(key), "expect_stderr_%d", i);
		if (!(line = statusmap_get(&c->head, key)))
			break;
		assert_true(sk_strlcpy(want + strlen(want), line, sizeof(want) - strlen(want)));
		assert_true(sk_strlcpy(want + strlen(want), "\n", sizeof(want) - strlen(want)));
	}
	healthcheck_run_init(&run, "/nonexistent-datadir", err);
	run.alive_during_sst = head_long(c, "alive_during_sst", 0) != 0;
	rc = healthcheck_run_args(&run, argc, argv, &io);
	fclose(err);
	if (rc != head_long(c, "expect_exit", -1) || strcmp(err_text, want) != 0)
		fail_msg("%s: got exit %d, stderr:\n%s\nwant exit %ld, stderr:\n%s", path, rc, err_text,
			 head_long(c, "expect_exit", -1), want);
	if (statusmap_get(&c->head, "expect_tests")) {
		char got[512] = "";

		for (size_t i = 0; i < run.nresults; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%s=%s", i ? " " : "",
				 run.results[i].test, run.results[i].ok ? "ok" : "failed");
		if (strcmp(got, statusmap_get(&c->head, "expect_tests")) != 0)
			fail_msg("%s: tests run '%s', want '%s'", path, got, statusmap_get(&c->head, "expect_tests"));
	}
	healthcheck_run_free(&run);
	free(err_text);
}

/* ---- liveness over SST evidence ----------------------------------------------------------- */

static bool head_flag(const struct tcase *c, const char *key)
{
	return head_long(c, key, 0) != 0;
}

/* "foreign = PATH:UID,PATH:UID" (bypass files there from another user), euid and datadir_owner
 * (whom they are trusted from) into the evidence. */
static void sst_case_foreign(const struct tcase *c, struct sst_evidence *ev)
{
	const char *foreign = statusmap_get(&c->head, "foreign");
	char list[1024], *save = NULL;

	ev->trust.euid = (uid_t)head_long(c, "euid", 0);
	ev->trust.datadir_owner = (uid_t)head_long(c, "datadir_owner", -1);
	if (!foreign)
		return;
	sk_strlcpy(list, foreign, sizeof(list));
	for (char *f = strtok_r(list, ",", &save); f && ev->nforeign < SST_MAX_FOREIGN;
	     f = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(f, ':');

		assert_non_null(colon);
		*colon = '\0';
		sk_strlcpy(ev->foreign[ev->nforeign].path, sk_trim(f), sizeof(ev->foreign[0].path));
		ev->foreign[ev->nforeign++].owner = (uid_t)strtoul(colon + 1, NULL, 10);
	}
}

/* The evidence and policy in the header; the verdict before asking mysqld, the stale note and the
 * note on the files ignored for their owner (expect_ignored). */
static void run_sst_case(const char *path, struct tcase *c)
{
	struct sst_evidence ev = { 0 };
	struct sst_policy p = { .grace_s = head_long(c, "grace", 300), .trust_file = head_flag(c, "trust_file") };
	struct sst_verdict v = { 0 };
	const char *m = statusmap_get(&c->head, "mysqld");
	const char *want_msg = statusmap_get(&c->head, "expect_msg");
	const char *want_note = statusmap_get(&c->head, "expect_note");
	const char *want_ignored = statusmap_get(&c->head, "expect_ignored");
	char note[400] = "", ignored[1024];
	bool decided, noted;

	ev.recovery_file = head_flag(c, "recovery_file");
	ev.sleep_forever = head_flag(c, "sleep_forever");
	ev.recovery_log = head_flag(c, "recovery_log");
	ev.sst_file = statusmap_has(&c->head, "sst_file_age");
	ev.sst_file_age_s = head_long(c, "sst_file_age", 0);
	ev.mysqld = !m || strcmp(m, "unknown") == 0 ? SST_MYSQLD_UNKNOWN
		    : strcmp(m, "none") == 0        ? SST_MYSQLD_NONE
						    : SST_MYSQLD_RUNNING;
	ev.mysqld_pid = head_long(c, "mysqld_pid", 0);
	sk_strlcpy(ev.found_by, statusmap_get(&c->head, "found_by") ? statusmap_get(&c->head, "found_by") : "",
		   sizeof(ev.found_by));
	ev.recovering = head_flag(c, "recovering");
	ev.joiner_pid = head_long(c, "joiner_pid", 0);
	sk_strlcpy(ev.joiner, statusmap_get(&c->head, "joiner") ? statusmap_get(&c->head, "joiner") : "",
		   sizeof(ev.joiner));
	ev.joiner_children = (int)head_long(c, "joiner_children", 0);
	ev.donor_pid = head_long(c, "donor_pid", 0);
	sst_case_foreign(c, &ev);

	decided = sst_liveness_before(&ev, "/var/lib/mysql", &p, &v);
	noted = sst_stale_note(&ev, &p, note, sizeof(note));
	if (want_ignored && strcmp(sst_foreign_note(&ev, ignored, sizeof(ignored)) ? ignored : "none", want_ignored))
		fail_msg("%s: ignored '%s', want '%s'", path, ignored, want_ignored);
	if ((long)decided != head_long(c, "expect_decided", -1) ||
	    (decided && strcmp(v.reason, statusmap_get(&c->head, "expect_reason")) != 0) ||
	    (decided && want_msg && strcmp(v.msg, want_msg) != 0) ||
	    (want_note && strcmp(noted ? note : "none", want_note) != 0))
		fail_msg("%s: got decided=%d reason=%s msg='%s' note='%s'; want decided=%ld reason=%s msg='%s' "
			 "note='%s'",
			 path, decided, decided ? v.reason : "-", decided ? v.msg : "", noted ? note : "none",
			 head_long(c, "expect_decided", -1), statusmap_get(&c->head, "expect_reason"),
			 want_msg ? want_msg : "(any)", want_note ? want_note : "(any)");
}

/* sst_procs_needed over the files in the header and what mysqld said (asked = not_asked | ok |
 * failed): whether mysqld's processes are read. A healthy mysqld with no SST file never costs the
 * /proc walk. */
static void run_sst_needs_case(const char *path, struct tcase *c)
{
	struct sst_evidence files = { 0 };
	const char *asked = statusmap_get(&c->head, "asked");
	enum sst_asked a = SST_NOT_ASKED;
	bool needed;

	assert_non_null(asked);
	if (strcmp(asked, "not_asked") == 0)
		a = SST_NOT_ASKED;
	else if (strcmp(asked, "ok") == 0)
		a = SST_ANSWER_OK;
	else if (strcmp(asked, "failed") == 0)
		a = SST_ANSWER_FAILED;
	else
		fail_msg("%s: unknown asked '%s'", path, asked);
	files.recovery_file = head_flag(c, "recovery_file");
	files.sleep_forever = head_flag(c, "sleep_forever");
	files.recovery_log = head_flag(c, "recovery_log");
	files.sst_file = statusmap_has(&c->head, "sst_file_age");
	files.sst_file_age_s = head_long(c, "sst_file_age", 0);
	sst_case_foreign(c, &files);
	needed = sst_procs_needed(&files, a);
	if ((long)needed != head_long(c, "expect_procs", -1))
		fail_msg("%s: procs needed %d, want %ld", path, needed, head_long(c, "expect_procs", -1));
}

/* ---- the /proc adapter on a fake /proc ---------------------------------------------------- */

/* Replace {datadir}, {other}, {proc} in `in`. */
static void fill(const char *in, const char *root, char *out, size_t len)
{
	static const char *const keys[][2] = { { "{datadir}", "data" }, { "{other}", "other" }, { "{proc}", "proc" } };
	size_t k = 0;

	while (*in && k + 1 < len) {
		bool done = false;

		for (size_t i = 0; i < SK_ARRAY_LEN(keys) && !done; i++) {
			size_t n = strlen(keys[i][0]);

			if (strncmp(in, keys[i][0], n) == 0) {
				k += (size_t)snprintf(out + k, len - k, "%s/%s", root, keys[i][1]);
				in += n;
				done = true;
			}
		}
		if (!done)
			out[k++] = *in++;
	}
	out[k < len ? k : len - 1] = '\0';
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[1024];

	sk_strlcpy(tmp, path, sizeof(tmp));
	for (char *p = tmp + 1; *p; p++) {
		if (*p == '/') {
			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -1;
			*p = '/';
		}
	}
	return mkdir(tmp, mode) < 0 && errno != EEXIST ? -1 : 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void put_file(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, n, f), n);
	fclose(f);
}

/* One [proc] line: "PID PPID STATE COMM CWD ARG|ARG|...". */
struct fake_proc {
	long pid, ppid;
	char state, comm[32], cwd[512], args[512];
};

/* The user a fake process runs as: "uids = PID:UID,..." in the header, else the test's own (the
 * owner of the fake datadir, as mysqld's user owns the real one). */
static unsigned long fake_uid(const struct tcase *c, long pid)
{
	const char *uids = statusmap_get(&c->head, "uids");
	char key[32];
	const char *at;
	size_t n;

	n = (size_t)snprintf(key, sizeof(key), "%ld:", pid);
	for (at = uids; at && (at = strstr(at, key)) != NULL; at += n)
		if (at == uids || at[-1] == ',' || at[-1] == ' ')
			return strtoul(at + n, NULL, 10);
	return (unsigned long)geteuid();
}

static void fake_proc_tree(const struct tcase *c, const char *root, bool children_files)
{
	struct fake_proc p[32];
	char path[1024], text[1024];

	for (int i = 0; i < c->nproc; i++) {
		char line[1024];
		int off = 0;

		fill(c->proc[i], root, line, sizeof(line));
		assert_int_equal(sscanf(line, "%ld %ld %c %31s %511s %n", &p[i].pid, &p[i].ppid, &p[i].state, p[i].comm,
					p[i].cwd, &off),
				 5);
		sk_strlcpy(p[i].args, line + off, sizeof(p[i].args));
	}
	for (int i = 0; i < c->nproc; i++) {
		size_t n = strlen(p[i].args), k = 0;

		snprintf(path, sizeof(path), "%s/proc/%ld/task/%ld", root, p[i].pid, p[i].pid);
		assert_int_equal(mkdir_p(path, 0755), 0);
		snprintf(path, sizeof(path), "%s/proc/%ld/comm", root, p[i].pid);
		snprintf(text, sizeof(text), "%s\n", p[i].comm);
		put_file(path, text, strlen(text));
		for (size_t j = 0; j <= n; j++)
			text[j] = p[i].args[j] == '|' ? '\0' : p[i].args[j];
		snprintf(path, sizeof(path), "%s/proc/%ld/cmdline", root, p[i].pid);
		put_file(path, text, n + 1);
		snprintf(path, sizeof(path), "%s/proc/%ld/stat", root, p[i].pid);
		snprintf(text, sizeof(text), "%ld (%s) %c %ld 1 1 0 -1\n", p[i].pid, p[i].comm, p[i].state, p[i].ppid);
		put_file(path, text, strlen(text));
		snprintf(path, sizeof(path), "%s/proc/%ld/status", root, p[i].pid);
		snprintf(text, sizeof(text), "Name:\t%s\nUid:\t%lu\t%lu\t%lu\t%lu\n", p[i].comm, fake_uid(c, p[i].pid),
			 fake_uid(c, p[i].pid), fake_uid(c, p[i].pid), fake_uid(c, p[i].pid));
		put_file(path, text, strlen(text));
		if (strcmp(p[i].cwd, "-") != 0) {
			snprintf(path, sizeof(path), "%s/proc/%ld/cwd", root, p[i].pid);
			assert_int_equal(symlink(p[i].cwd, path), 0);
		}
		if (!children_files)
			continue;
		text[0] = '\0';
		for (int j = 0; j < c->nproc; j++)
			if (p[j].ppid == p[i].pid)
				k += (size_t)snprintf(text + k, sizeof(text) - k, "%ld ", p[j].pid);
		snprintf(path, sizeof(path), "%s/proc/%ld/task/%ld/children", root, p[i].pid, p[i].pid);
		put_file(path, text, strlen(text));
	}
}

/* A fake /proc and datadir from the case, sst_gather over them, the evidence against expect_*. */
static void run_sst_proc_case(const char *path, struct tcase *c)
{
	char root[] = "/tmp/sk-proc-XXXXXX", dir[1024], pid_file[1024], found[400], want[400];
	const char *files = statusmap_get(&c->head, "files"), *v;
	struct sst_evidence ev;

	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/data", root);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/other", root);
	assert_int_equal(mkdir_p(dir, 0755), 0);
	fake_proc_tree(c, root, head_long(c, "children_files", 1) != 0);
	/* files = "mysqld.pid:100,sst_in_progress:" in the datadir */
	if (files) {
		char list[512], *save = NULL;

		sk_strlcpy(list, files, sizeof(list));
		for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
			char *colon = strchr(f, ':');

			assert_non_null(colon);
			*colon = '\0';
			snprintf(dir, sizeof(dir), "%s/data/%s", root, f);
			put_file(dir, colon + 1, strlen(colon + 1));
		}
	}
	if ((v = statusmap_get(&c->head, "pid_file")))
		fill(v, root, pid_file, sizeof(pid_file));
	snprintf(dir, sizeof(dir), "%s/data", root);
	snprintf(found, sizeof(found), "%s/proc", root);
	sst_gather(found, dir, v ? pid_file : NULL, NULL, time(NULL), &ev);
	fill(statusmap_get(&c->head, "expect_found_by") ? statusmap_get(&c->head, "expect_found_by") : "", root, want,
	     sizeof(want));
	snprintf(found, sizeof(found), "%s", ev.found_by);
	if (strcmp(sst_mysqld_str(ev.mysqld), statusmap_get(&c->head, "expect_mysqld")) != 0 ||
	    ev.mysqld_pid != head_long(c, "expect_mysqld_pid", 0) ||
	    ev.joiner_pid != head_long(c, "expect_joiner_pid", 0) ||
	    ev.donor_pid != head_long(c, "expect_donor_pid", 0) ||
	    ev.joiner_children != head_long(c, "expect_joiner_children", 0) ||
	    ev.recovering != (head_long(c, "expect_recovering", 0) != 0) ||
	    strcmp(ev.joiner,
		   statusmap_get(&c->head, "expect_joiner") ? statusmap_get(&c->head, "expect_joiner") : "") ||
	    strlen(found) < strlen(want) || strcmp(found + strlen(found) - strlen(want), want) != 0)
		fail_msg("%s: got mysqld=%s pid=%ld joiner=%ld '%s' (%d children) donor=%ld recovering=%d "
			 "found_by='%s'; "
			 "want found_by ending '%s'",
			 path, sst_mysqld_str(ev.mysqld), ev.mysqld_pid, ev.joiner_pid, ev.joiner, ev.joiner_children,
			 ev.donor_pid, ev.recovering, found, want);
	assert_int_equal(nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
}

/* ---- proxysql-check's liveness and readiness on canned admin answers ------------------------ */

/* The case's mode and writer hostgroups, its answers ([status]: hostgroup -> ONLINE servers;
 * [vars]: proxysql-sync's /readyz) or its failure (admin = error ...), judged. */
static void run_proxysql_case(const char *path, struct tcase *c)
{
	const char *mode = statusmap_get(&c->head, "mode");
	const char *want_reason = statusmap_get(&c->head, "expect_reason");
	const char *want_msg = statusmap_get(&c->head, "expect_msg");
	struct proxysql_rules r = { .writer_hostgroup = statusmap_get(&c->head, "writer_hostgroup"),
				    .sync_readyz = statusmap_get(&c->head, "sync_readyz") };
	struct probe_fetch f = { .status = c->status, .vars = c->vars };
	struct probe_conn pc = { .what = "127.0.0.1:6032" };
	struct probe_verdict v;
	struct db_err e;

	assert_non_null(mode);
	assert_non_null(want_reason);
	assert_non_null(want_msg);
	r.mode = strcmp(mode, "readiness") == 0 ? PROXYSQL_READINESS : PROXYSQL_LIVENESS;
	if (!r.writer_hostgroup)
		r.writer_hostgroup = "0";
	r.nids = proxysql_parse_hostgroups(r.writer_hostgroup, r.ids, PROXYSQL_MAX_HOSTGROUPS);
	assert_true(r.nids > 0);
	proxysql_judge(&r,
		       &(struct probe_outcome){ .fetched = !case_error(c, "admin", &e),
						.f = &f,
						.e = &e,
						.pc = &pc,
						.budget_ms = head_long(c, "budget_ms", 2000),
						.setting = "--timeout" },
		       &v);
	if ((long)v.up != head_long(c, "expect_up", -1) || strcmp(v.reason, want_reason) != 0 ||
	    strcmp(v.msg, want_msg) != 0)
		fail_msg("%s: got up=%d reason=%s msg='%s'; want up=%ld reason=%s msg='%s'", path, v.up, v.reason,
			 v.msg, head_long(c, "expect_up", -1), want_reason, want_msg);
}

/* ---- /readiness over HTTP and readiness-check: one verdict for the same flags ------------- */

/* The case's rules as readiness-check's flags, or as clustercheck's (`prefix` "readiness-"). */
static int readiness_argv(const struct tcase *c, const char *prog, const char *prefix, char store[8][64], char **argv)
{
	bool replica = statusmap_get(&c->head, "kind") != NULL;
	long ro = replica                                ? head_long(c, "read_only_rule", -1)
		  : head_long(c, "require_read_only", 0) ? 1
		  : head_long(c, "readonly_ok", 1) == 0  ? 0
							 : -1;
	int n = 0, argc = 0;

	argv[argc++] = (char *)prog;
	if (replica)
		snprintf(store[n], 64, "--%sreplica", prefix), argv[argc++] = store[n++];
	if (statusmap_has(&c->head, "donor_ok"))
		snprintf(store[n], 64, "--%savailable-when-donor=%ld", prefix, head_long(c, "donor_ok", 1)),
			argv[argc++] = store[n++];
	if (statusmap_has(&c->head, "max_lag")) {
		snprintf(store[n], 64, "--%smax-lag", prefix), argv[argc++] = store[n++];
		snprintf(store[n], 64, "%ld", head_long(c, "max_lag", -1)), argv[argc++] = store[n++];
	}
	if (ro >= 0)
		snprintf(store[n], 64, "--%srequire-%s", prefix, ro ? "read-only" : "writable"),
			argv[argc++] = store[n++];
	argv[argc] = NULL;
	return argc;
}

/* Parse the flags with the binary's own option table and read its readiness rules as it does. */
static void readiness_path(const struct tcase *c, const char *path, bool clustercheck, struct probe_verdict *v)
{
	char store[8][64], *argv[16], err[512];
	struct probe_fetch f = { .status = c->status, .vars = c->vars, .row = c->row };
	struct readiness_rules r;
	struct opts o;
	int argc;

	if (clustercheck)
		clustercheck_opts_init(&o);
	else
		o = readiness_kind.opts;
	argc = readiness_argv(c, o.prog, clustercheck ? "readiness-" : "", store, argv);
	if (opts_parse(&o, argc, argv, err, sizeof(err)) != OPTS_OK)
		fail_msg("%s: %s: %s", path, o.prog, err);
	if (readiness_rules_load(&o, clustercheck ? "readiness-" : "", &r, err, sizeof(err)) < 0)
		fail_msg("%s: %s: %s", path, o.prog, err);
	f.nrows = (unsigned long)head_long(c, "nrows", 1);
	readiness_judge(&r, &(struct probe_outcome){ .fetched = true, .f = &f, .setting = "--timeout" }, v);
	opts_free(&o);
}

/* readiness-check and clustercheck --listen's /readiness on the case's answers: the same verdict,
 * and the one the case expects. */
static void run_readiness_paths(const char *path, const struct tcase *c, bool up, const char *reason,
				const char *detail)
{
	struct probe_verdict check, http;
	char want[700];

	readiness_path(c, path, false, &check);
	readiness_path(c, path, true, &http);
	snprintf(want, sizeof(want), "%s: %s", up ? "ready" : "not ready", detail);
	if (check.up != http.up || strcmp(check.reason, http.reason) != 0 || strcmp(check.msg, http.msg) != 0)
		fail_msg("%s: readiness-check says %d %s '%s', /readiness says %d %s '%s'", path, check.up,
			 check.reason, check.msg, http.up, http.reason, http.msg);
	if (check.up != up || strcmp(check.reason, reason) != 0 || strcmp(check.msg, want) != 0)
		fail_msg("%s: both paths say %d %s '%s'; the judge says %d %s '%s'", path, check.up, check.reason,
			 check.msg, up, reason, want);
}

static void run_case(void **state)
{
	const char *path = *state;
	struct tcase c;
	const char *kind, *want_reason, *want_detail;
	bool up;
	const char *reason, *detail;
	struct galera_verdict gv;
	struct replica_verdict rv;

	parse_case(path, &c);
	kind = statusmap_get(&c.head, "kind");
	if (kind && strcmp(kind, "healthcheck") == 0) {
		run_healthcheck_case(path, &c);
		goto done;
	}
	if (kind && strcmp(kind, "sst") == 0) {
		run_sst_case(path, &c);
		goto done;
	}
	if (kind && strcmp(kind, "sst_proc") == 0) {
		run_sst_proc_case(path, &c);
		goto done;
	}
	if (kind && strcmp(kind, "sst_needs") == 0) {
		run_sst_needs_case(path, &c);
		goto done;
	}
	if (kind && strcmp(kind, "proxysql") == 0) {
		run_proxysql_case(path, &c);
		goto done;
	}
	want_reason = statusmap_get(&c.head, "expect_reason");
	want_detail = statusmap_get(&c.head, "expect_detail");
	assert_non_null(want_reason);
	if (kind && strcmp(kind, "replica") == 0) {
		struct replica_rules rr = {
			.max_lag = head_long(&c, "max_lag", -1),
			.read_only = (int)head_long(&c, "read_only_rule", -1),
		};

		replica_judge(&c.row, (unsigned long)head_long(&c, "nrows", 1), statusmap_get(&c.vars, "read_only"),
			      &rr, &rv);
		up = rv.up;
		reason = replica_reason_str(rv.reason);
		detail = rv.detail;
	} else {
		struct galera_rules gr;

		rules_for(&c, &gr);
		galera_judge(&c.status, c.vars.n ? &c.vars : NULL, &gr, &gv);
		up = gv.up;
		reason = galera_reason_str(gv.reason);
		detail = gv.detail;
	}
	if ((long)up != head_long(&c, "expect_up", -1) || strcmp(reason, want_reason) != 0 ||
	    (want_detail && strcmp(detail, want_detail) != 0))
		fail_msg("%s: got up=%d reason=%s detail='%s'; want up=%ld reason=%s detail='%s'", path, up, reason,
			 detail, head_long(&c, "expect_up", -1), want_reason, want_detail ? want_detail : "(any)");
	/* Every readiness and replica case through both paths of the readiness verdict. */
	if ((kind && strcmp(kind, "replica") == 0) || strcmp(statusmap_get(&c.head, "rules"), "readiness") == 0)
		run_readiness_paths(path, &c, up, reason, detail);
done:
	statusmap_free(&c.head);
	statusmap_free(&c.status);
	statusmap_free(&c.vars);
	statusmap_free(&c.row);
	statusmap_free(&c.row2);
}

/* healthcheck_trailing_setting: a setting that no test follows is named (the warning's subject). */
static void test_healthcheck_trailing_setting(void **state)
{
	static const struct {
		const char *args[6];
		const char *want;
	} cases[] = {
		{ { "--connect", "--replication_io=1" }, "--replication_io=1" },
		{ { "--replication_io=1", "--replication" }, NULL },
		{ { "--datadir", "/d", "--connect" }, NULL },
		{ { "--connect", "--datadir", "/d" }, "--datadir" },
		{ { "--connect", "--defaults-extra-file=/x", "--no-defaults" }, "--no-defaults" },
		{ { "--connect", "--replication_io=1", "--su=mysql", "--connect" }, NULL },
		{ { "--connect", "--timeout", "3" }, NULL },
		{ { "--connect" }, NULL },
		{ { "--no-connect", "--replication_seconds_behind_master" }, NULL }, /* an error ends it first */
	};

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		char *argv[8] = { "healthcheck" };
		int argc = 1;
		const char *got;

		for (; argc <= 6 && cases[i].args[argc - 1]; argc++)
			argv[argc] = (char *)cases[i].args[argc - 1];
		got = healthcheck_trailing_setting(argc, argv);
		if (cases[i].want ? !got || strcmp(got, cases[i].want) != 0 : got != NULL)
			fail_msg("case %zu: got %s, want %s", i, got ? got : "NULL",
				 cases[i].want ? cases[i].want : "NULL");
	}
}

int main(void)
{
	char **files;
	size_t n = testdata_list("checks", ".case", &files);
	struct CMUnitTest *tests = xcalloc(n + 1, sizeof(*tests));
	int rc;

	if (n == 0) {
		fprintf(stderr, "no cases found under %s/checks\n", testdata_dir());
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		tests[i].name = strrchr(files[i], '/') + 1;
		tests[i].test_func = run_case;
		tests[i].initial_state = files[i];
	}
	tests[n].name = "healthcheck_trailing_setting";
	tests[n].test_func = test_healthcheck_trailing_setting;
	rc = _cmocka_run_group_tests("checks", tests, n + 1, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	free(tests);
	return rc;
}
