/* test_lib.c: unit tests of lib/: options, option files, secrets, redaction, deadlines, status maps,
 * SpookyHash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cJSON.h>

#include "cfgnum.h"
#include "consul.h"
#include "deadline.h"
#include "log.h"
#include "opt.h"
#include "probe.h"
#include "mycnf.h"
#include "secret.h"
#include "spooky.h"
#include "statusmap.h"
#include "testdata.h"
#include "runfile.h"
#include "trust.h"

/* The settings struct the table below binds (opts_bind). */
struct tset {
	long port;
	double timeout;
	bool json;
	const char *format;
	const char *password;
};

/* clang-format off */
static const struct opt_def defs[] = {
	{"port", 'P', OPT_INT, "PORT", "3306", "T_PORT", 1, 65535, NULL, "port", 0, OPT_FIELD(struct tset, port)},
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL, "timeout", 0, OPT_FIELD(struct tset, timeout)},
	{"json", 0, OPT_FLAG, NULL, "0", "T_JSON", 0, 0, NULL, "json", 0, OPT_FIELD(struct tset, json)},
	{"format", 0, OPT_ENUM, "FMT", "text", NULL, 0, 0, "text|json", "format", 0, OPT_FIELD(struct tset, format)},
	{"password", 0, OPT_STRING, "PW", NULL, "T_PASSWORD", 0, 0, NULL, "pw", OPT_SECRET | OPT_NO_ARGV,
	 OPT_FIELD(struct tset, password)},
	{"config", 'c', OPT_STRING, "FILE", NULL, NULL, 0, 0, NULL, "config", OPT_NO_FILE},
};
/* clang-format on */

static enum opts_result parse(struct opts *o, int argc, char **argv, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->prog = "t";
	o->version = "0";
	o->synopsis = "";
	o->summary = "";
	o->defs = defs;
	o->ndefs = SK_ARRAY_LEN(defs);
	o->config_opt = "config";
	o->max_args = 1;
	return opts_parse(o, argc, argv, err, errlen);
}

static void test_opts_defaults_and_argv(void **state)
{
	char *argv[] = { "t", "--port=3311", "-t", "0.25", "--json", "pos", NULL };
	struct opts o;
	char err[256];

	(void)state;
	unsetenv("T_PORT");
	assert_int_equal(parse(&o, 6, argv, err, sizeof(err)), OPTS_OK);
	assert_int_equal(opt_int(&o, "port"), 3311);
	assert_true(opt_num(&o, "timeout") > 0.24 && opt_num(&o, "timeout") < 0.26);
	assert_true(opt_flag(&o, "json"));
	assert_string_equal(opt_str(&o, "format"), "text");
	assert_false(opt_given(&o, "format"));
	assert_int_equal(o.nargs, 1);
	assert_string_equal(o.args[0], "pos");
	opts_free(&o);
}

/* opts_bind writes each bound option into its field, by type; unbound ones are left alone. */
static void test_opts_bind(void **state)
{
	char *argv[] = { "t", "--port=3311", "-t", "0.25", "--json", "--format=json", NULL };
	struct tset t;
	struct opts o;
	char err[256];

	(void)state;
	unsetenv("T_PORT");
	unsetenv("T_PASSWORD");
	memset(&t, 0xa5, sizeof(t));
	assert_int_equal(parse(&o, 6, argv, err, sizeof(err)), OPTS_OK);
	opts_bind(&o, &t);
	assert_int_equal(t.port, 3311);
	assert_true(t.timeout > 0.24 && t.timeout < 0.26);
	assert_true(t.json);
	assert_string_equal(t.format, "json");
	assert_null(t.password);
	opts_free(&o);
}

/* A row bound to a field of another type aborts at the first opts_bind, whatever the values. */
static void test_opts_bind_type_mismatch(void **state)
{
	static const struct opt_def bad[] = {
		{ "port", 0, OPT_NUMBER, "N", "1", NULL, 0, 9, NULL, "port", 0, OPT_FIELD(struct tset, port) },
	};
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct opts o = { .prog = "t", .version = "0", .synopsis = "", .summary = "", .defs = bad, .ndefs = 1 };
		struct tset t;
		char err[256];
		char *argv[] = { "t", NULL };

		if (freopen("/dev/null", "w", stderr) == NULL)
			_exit(3);
		if (opts_parse(&o, 1, argv, err, sizeof(err)) != OPTS_OK)
			_exit(4);
		opts_bind(&o, &t);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

static void test_opts_precedence(void **state)
{
	char path[] = "/tmp/sk-test-XXXXXX";
	int fd = mkstemp(path);
	const char *cfg = "port = 1111\njson = true\nformat = \"json\"\n";
	char cfgarg[64];
	char *argv1[] = { "t", "--config", path, NULL };
	char *argv2[] = { "t", cfgarg, "-P", "3333", NULL };
	struct opts o;
	char err[256];

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, cfg, strlen(cfg)), (int)strlen(cfg));
	close(fd);
	snprintf(cfgarg, sizeof(cfgarg), "--config=%s", path);

	unsetenv("T_PORT");
	assert_int_equal(parse(&o, 3, argv1, err, sizeof(err)), OPTS_OK);
	assert_int_equal(opt_int(&o, "port"), 1111); /* file over default */
	assert_string_equal(opt_str(&o, "format"), "json");
	opts_free(&o);

	setenv("T_PORT", "2222", 1);
	assert_int_equal(parse(&o, 3, argv1, err, sizeof(err)), OPTS_OK);
	assert_int_equal(opt_int(&o, "port"), 2222); /* env over file */
	assert_string_equal(opt_source(&o, "port"), "env T_PORT");
	opts_free(&o);

	assert_int_equal(parse(&o, 4, argv2, err, sizeof(err)), OPTS_OK);
	assert_int_equal(opt_int(&o, "port"), 3333); /* argv over env */
	opts_free(&o);
	unsetenv("T_PORT");
	unlink(path);
}

struct bad_case {
	const char *args[4];
	const char *env;
	const char *want; /* substring of the error */
};

static void test_opts_errors(void **state)
{
	static const struct bad_case cases[] = {
		{ { "--port", "abc" }, NULL, "--port: 'abc' is not a whole number from 1 to 65535" },
		{ { "--port=0" }, NULL, "--port: '0' is not a whole number" },
		{ { "--port", " 80" }, NULL, "is not a whole number" },
		{ { "--timeout", "1e3" }, NULL, "is not a number from 0.05 to 3600" },
		{ { "--timeout", "nan" }, NULL, "is not a number" },
		{ { "--timeout" }, NULL, "--timeout needs a value (SECONDS)" },
		{ { "--json=maybe" }, NULL, "is not a boolean" },
		{ { "--format", "xml" }, NULL, "is not one of text|json" },
		{ { "--nope" }, NULL, "unknown option '--nope'" },
		{ { "--password", "x" }, NULL, "--password is not accepted on the command line" },
		{ { "a", "b" }, NULL, "too many arguments" },
		{ { "--config", "/nonexistent/sk.cfg" }, NULL, "config file /nonexistent/sk.cfg: No such file" },
		{ { NULL }, "T_PORT=99999", "env T_PORT: '99999' is not a whole number" },
	};

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		char *argv[6] = { "t" };
		int argc = 1;
		struct opts o;
		char err[256] = "";

		for (int k = 0; k < 4 && cases[i].args[k]; k++)
			argv[argc++] = (char *)cases[i].args[k];
		if (cases[i].env)
			putenv((char *)cases[i].env);
		assert_int_equal(parse(&o, argc, argv, err, sizeof(err)), OPTS_ERROR);
		if (!strstr(err, cases[i].want))
			fail_msg("case %zu: error '%s' does not contain '%s'", i, err, cases[i].want);
		opts_free(&o);
		unsetenv("T_PORT");
	}
}

static void test_config_file_errors(void **state)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "bogus = 1\n", "unknown setting" },
		{ "port = \"x\"\n", "'x' is not a whole number" },
		{ "port = 1;\nport ==\n", "duplicate setting name" },
		{ "port = = 3\n", "syntax error" },
		{ "config = \"a\"\n", "unknown setting" },
		{ "grp = { a = 1; };\n", "unknown setting" },
		{ "port = 1;\n  @include \"/dev/stdin\"\n", "@include is not supported" },
	};

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		char path[] = "/tmp/sk-test-XXXXXX";
		int fd = mkstemp(path);
		char *argv[] = { "t", "-c", path, NULL };
		struct opts o;
		char err[512] = "";

		assert_int_equal(write(fd, cases[i].text, strlen(cases[i].text)), (int)strlen(cases[i].text));
		close(fd);
		if (parse(&o, 3, argv, err, sizeof(err)) != OPTS_ERROR)
			fail_msg("case %zu: '%s' was accepted", i, cases[i].text);
		if (!strstr(err, cases[i].want) || !strstr(err, path))
			fail_msg("case %zu: error '%s' lacks '%s' or the path", i, err, cases[i].want);
		opts_free(&o);
		unlink(path);
	}
}

static void check_mycnf_case(const char *cnf_path)
{
	char expect_path[1024], got[1024], err[256] = "";
	char *want;
	struct mycnf c;
	size_t n = strlen(cnf_path);

	snprintf(expect_path, sizeof(expect_path), "%.*s.expect", (int)(n - 4), cnf_path);
	want = testdata_read(expect_path);
	if (mycnf_read(cnf_path, NULL, &c, err, sizeof(err)) < 0) {
		snprintf(got, sizeof(got), "error=%s\n", strchr(err, ' ') ? strchr(err, ' ') + 1 : err);
	} else {
		snprintf(got, sizeof(got), "user=%s\npassword=%s\nhost=%s\nsocket=%s\nport=%ld\n",
			 c.user ? c.user : "(null)", c.password ? c.password : "(null)", c.host ? c.host : "(null)",
			 c.socket ? c.socket : "(null)", c.port);
		mycnf_free(&c);
	}
	if (strcmp(got, want) != 0)
		fail_msg("%s:\n got:\n%s want:\n%s", cnf_path, got, want);
	free(want);
}

static void test_mycnf_table(void **state)
{
	char **files;
	size_t n = testdata_list("mycnf", ".cnf", &files);

	(void)state;
	assert_true(n >= 5);
	for (size_t i = 0; i < n; i++) {
		check_mycnf_case(files[i]);
		free(files[i]);
	}
	free(files);
}

static void test_mycnf_too_large(void **state)
{
	char path[] = "/tmp/sk-test-XXXXXX";
	int fd = mkstemp(path);
	char block[4096], err[256] = "";
	struct mycnf c;

	(void)state;
	memset(block, '#', sizeof(block));
	for (int i = 0; i < 2560; i++) /* 10 MB */
		assert_int_equal(write(fd, block, sizeof(block)), (int)sizeof(block));
	close(fd);
	assert_int_equal(mycnf_read(path, NULL, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "too large"));
	unlink(path);
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	fclose(f);
}

/* mycnf_load_client reads what the mariadb client reads: its groups, in file order, the suffixed
 * groups, !include and !includedir, the extra file before ~/.my.cnf; a required file must exist. */
static void test_mycnf_load_client(void **state)
{
	char dir[] = "/tmp/sk-test-XXXXXX", path[4][64], text[512], err[256] = "";
	struct mycnf c;
	struct mycnf_sources src = { 0 };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path[0], sizeof(path[0]), "%s/main.cnf", dir);
	snprintf(path[1], sizeof(path[1]), "%s/conf.d", dir);
	snprintf(path[2], sizeof(path[2]), "%s/conf.d/50-a.cnf", dir);
	snprintf(path[3], sizeof(path[3]), "%s/.my.cnf", dir);
	assert_int_equal(mkdir(path[1], 0700), 0);
	write_text(path[2], "[mariadb-client]\nport=3307\n[mysqld]\nport=1\n");
	snprintf(text, sizeof(text),
		 "[client]\nuser=a\nport=3306\n!includedir %s\n[client-mariadb]\nuser=b\n"
		 "[client_x]\npassword=px\n[server]\nuser=no\n",
		 path[1]);
	write_text(path[0], text);
	write_text(path[3], "[client]\nsocket=/home.sock\n");

	src.defaults_file = path[0];
	src.home = dir;
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	assert_string_equal(c.user, "b");
	assert_int_equal(c.port, 3307);
	assert_null(c.password); /* [client_x] only with the suffix */
	assert_null(c.socket); /* --defaults-file: ~/.my.cnf is not read */
	mycnf_free(&c);

	src.group_suffix = "_x";
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	assert_string_equal(c.password, "px");
	mycnf_free(&c);

	src = (struct mycnf_sources){ .extra_file = path[0], .home = dir };
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	assert_string_equal(c.socket, "/home.sock"); /* the extra file, then ~/.my.cnf */
	assert_string_equal(c.user, "b");
	mycnf_free(&c);

	src.no_defaults = true;
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	assert_null(c.user);

	/* /dev/null reads as an empty file, as the mariadb client reads it; another device does not. */
	src = (struct mycnf_sources){ .defaults_file = "/dev/null", .home = dir };
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	assert_null(c.user);
	assert_null(c.socket);
	src = (struct mycnf_sources){ .extra_file = "/dev/null" };
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), 0);
	mycnf_free(&c);
	assert_int_equal(mycnf_read("/dev/null", NULL, &c, err, sizeof(err)), 0);
	assert_null(c.user);
	assert_int_equal(mycnf_read("/dev/zero", NULL, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));

	src = (struct mycnf_sources){ .defaults_file = "/nonexistent/my.cnf" };
	assert_int_equal(mycnf_load_client(&src, &c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent/my.cnf"));

	unlink(path[0]);
	unlink(path[2]);
	unlink(path[3]);
	rmdir(path[1]);
	rmdir(dir);
}

static void test_secret_file(void **state)
{
	char path[] = "/tmp/sk-test-XXXXXX";
	int fd = mkstemp(path);
	char err[256] = "";
	char *pw;

	(void)state;
	assert_int_equal(write(fd, "hunter2-pw\n", 11), 11);
	close(fd);
	pw = secret_read_file(path, err, sizeof(err));
	assert_non_null(pw);
	assert_string_equal(pw, "hunter2-pw");
	free(pw);

	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "a\0b", 3), 3);
	close(fd);
	assert_null(secret_read_file(path, err, sizeof(err)));
	assert_non_null(strstr(err, "NUL"));

	assert_null(secret_read_file("/nonexistent/secret", err, sizeof(err)));
	assert_non_null(strstr(err, "No such file"));
	assert_null(secret_read_file("/tmp", err, sizeof(err)));
	assert_non_null(strstr(err, "not a regular file"));
	unlink(path);
}

/* One field of a "a | b | c" table row, trimmed; advances *cur past it. */
static char *bar_field(char **cur)
{
	char *f = *cur, *bar = strchr(f, '|');

	*cur = bar ? bar + 1 : f + strlen(f);
	if (bar)
		*bar = '\0';
	return sk_trim(f);
}

static void secret_verdict_row(char *line, void *ctx)
{
	char *cur = line, *mode = bar_field(&cur), *owner = bar_field(&cur), *group = bar_field(&cur);
	char *layout = bar_field(&cur), *want = bar_field(&cur), *why = bar_field(&cur);
	struct secret_facts f = { 0 };

	(void)ctx;
	f.mode = (mode_t)(S_IFREG | strtol(mode, NULL, 8));
	f.owner_trusted = strcmp(owner, "other") != 0;
	f.owner_root = strcmp(owner, "root") == 0;
	f.group_ours = strcmp(group, "ours") == 0;
	f.k8s_layout = strcmp(layout, "k8s") == 0;
	f.readonly_mount = strcmp(layout, "ro") == 0;
	if (strcmp(secret_finding_str(secret_judge(&f)), want) != 0)
		fail_msg("%s %s %s %s (%s): want %s, got %s", mode, owner, group, layout, why, want,
			 secret_finding_str(secret_judge(&f)));
	assert_true(secret_finding_refuses(secret_judge(&f)) ==
		    (strcmp(want, "ok") != 0 && strcmp(want, "readable") != 0));
}

static void process_age_row(char *line, void *ctx)
{
	char *cur = line, *stat = bar_field(&cur), *hz = bar_field(&cur), *now = bar_field(&cur);
	char *want = bar_field(&cur), *why = bar_field(&cur);
	int64_t got = deadline_age_from_stat(stat, strtol(hz, NULL, 10), strtoll(now, NULL, 10));

	(void)ctx;
	if (got != strtoll(want, NULL, 10))
		fail_msg("%s: want %s us, got %lld", why, want, (long long)got);
}

/* deadline_age_from_stat from tests/data/deadline/process-age.table; deadline_since_start_ms on
 * this process (started long before: at most DEADLINE_STARTUP_MAX_US of it counts). */
static void test_deadline_since_start(void **state)
{
	deadline_t d;

	(void)state;
	assert_true(testdata_each_line("deadline/process-age.table", process_age_row, NULL) >= 10);
	d = deadline_since_start_ms(1000);
	assert_true(deadline_left_ms(&d) <= 1000 && deadline_left_ms(&d) >= 1000 - DEADLINE_STARTUP_MAX_US / 1000 - 50);
}

/* secret_judge from tests/data/secret/file-verdict.table. */
static void test_secret_verdict_table(void **state)
{
	(void)state;
	assert_true(testdata_each_line("secret/file-verdict.table", secret_verdict_row, NULL) >= 20);
}

/* secret_read_file on real files: a world-writable one refused naming it, a world-readable one
 * read with one warning, the same behind a kubelet "..data" link read silently. */
static void test_secret_file_modes(void **state)
{
	char dir[] = "/tmp/sk-secret-XXXXXX", path[256], data[256], link[256], err[512] = "", *pw, *logged = NULL;
	size_t loglen = 0;
	FILE *log = open_memstream(&logged, &loglen);
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	log_setup("test", LOG_TEXT, LOG_INFO, log);
	snprintf(path, sizeof(path), "%s/plain", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_int_equal(write(fd, "s3cr3t-value\n", 13), 13);
	close(fd);
	assert_int_equal(chmod(path, 0666), 0);
	assert_null(secret_read_file(path, err, sizeof(err)));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "refused: other users can write it (mode 0666"));
	assert_int_equal(chmod(path, 0644), 0);
	pw = secret_read_file(path, err, sizeof(err));
	assert_non_null(pw);
	free(pw);
	fflush(log);
	assert_non_null(strstr(logged, "other users can read it (mode 0644"));
	assert_non_null(strstr(logged, path));

	/* The kubelet's layout: name -> ..data/name, ..data -> ..2024_01_01_00_00_00.1 */
	snprintf(data, sizeof(data), "%s/..2024_01_01_00_00_00.1", dir);
	assert_int_equal(mkdir(data, 0755), 0);
	snprintf(data, sizeof(data), "%s/..2024_01_01_00_00_00.1/password", dir);
	assert_int_equal(rename(path, data), 0);
	snprintf(link, sizeof(link), "%s/..data", dir);
	assert_int_equal(symlink("..2024_01_01_00_00_00.1", link), 0);
	snprintf(path, sizeof(path), "%s/password", dir);
	assert_int_equal(symlink("..data/password", path), 0);
	loglen = 0;
	fseek(log, 0, SEEK_SET);
	pw = secret_read_file(path, err, sizeof(err));
	assert_non_null(pw);
	assert_string_equal(pw, "s3cr3t-value");
	free(pw);
	fflush(log);
	assert_int_equal(loglen, 0);
	log_setup("test", LOG_TEXT, LOG_INFO, stderr);
	fclose(log);
	free(logged);
	unlink(path);
	unlink(link);
	unlink(data);
	*strrchr(data, '/') = '\0';
	rmdir(data);
	rmdir(dir);
}

/* Read a field of a .cases file: \n \r \t \\ \xHH; anything else after a backslash is an error. */
static char *unescape(const char *s, size_t *len)
{
	char *out = xmalloc(strlen(s) + 1);
	size_t n = 0;

	for (; *s; s++) {
		if (*s != '\\') {
			out[n++] = *s;
			continue;
		}
		s++;
		if (*s == 'n')
			out[n++] = '\n';
		else if (*s == 'r')
			out[n++] = '\r';
		else if (*s == 't')
			out[n++] = '\t';
		else if (*s == '\\')
			out[n++] = '\\';
		else if (*s == 'x' && s[1] && s[2]) {
			char hex[3] = { s[1], s[2], '\0' };

			out[n++] = (char)strtol(hex, NULL, 16);
			s += 2;
		} else
			fail_msg("bad escape \\%c in a case file", *s ? *s : '0');
	}
	out[n] = '\0';
	if (len)
		*len = n;
	return out;
}

/* Each case of tests/data/log/<name>: calls `run` with its fields once the blank line ending it is
 * read. Fields: secret (any number), format, in, want. */
struct log_case {
	char *format, *in, *want;
	size_t line, nsecrets;
};

static size_t for_each_log_case(const char *name, void (*run)(const struct log_case *c))
{
	char path[1024], *text, *p, *next;
	struct log_case c = { 0 };
	size_t line = 0, cases = 0;

	snprintf(path, sizeof(path), "%s/log/%s", testdata_dir(), name);
	text = testdata_read(path);
	for (p = text; p; p = next) {
		next = strchr(p, '\n');
		if (next)
			*next++ = '\0';
		line++;
		if (*p == '#')
			continue;
		if (*p == '\0') {
			if (c.in) {
				assert_non_null(c.want);
				run(&c);
				cases++;
			}
			free(c.format);
			free(c.in);
			free(c.want);
			memset(&c, 0, sizeof(c));
			log_clear_secrets();
			continue;
		}
		if (!c.line)
			c.line = line;
		if (strncmp(p, "secret ", 7) == 0) {
			char *v = unescape(p + 7, NULL);

			log_add_secret(v);
			free(v);
			c.nsecrets++;
		} else if (strncmp(p, "format ", 7) == 0) {
			c.format = xstrdup(p + 7);
		} else if (strncmp(p, "in ", 3) == 0) {
			c.in = unescape(p + 3, NULL);
		} else if (strncmp(p, "want ", 5) == 0) {
			c.want = unescape(p + 5, NULL);
		} else {
			fail_msg("%s:%zu: unknown line '%s'", path, line, p);
		}
	}
	assert_null(c.in); /* the file ends with a blank line */
	free(text);
	return cases;
}

static void run_redact_case(const struct log_case *c)
{
	char *line = xstrdup(c->in);

	log_redact(line);
	if (strcmp(line, c->want) != 0)
		fail_msg("redact.cases line %zu: got '%s', want '%s'", c->line, line, c->want);
	assert_true(strlen(line) <= strlen(c->in));
	free(line);
}

/* Redaction ends for any secret ("***", a secret inside another, overlapping matches): a case that
 * loops forever is ended by the alarm and fails the program. */
static void test_redaction(void **state)
{
	(void)state;
	alarm(20);
	assert_true(for_each_log_case("redact.cases", run_redact_case) >= 10);
	alarm(0);
}

/* One log line written through log_msg, captured. */
static char *capture_line(enum log_format f, const char *msg)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *mem = open_memstream(&buf, &size);

	assert_non_null(mem);
	log_setup("t", f, LOG_INFO, mem);
	log_info("%s", msg);
	fclose(mem);
	log_setup("t", LOG_TEXT, LOG_INFO, stderr);
	return buf;
}

/* The message part of a captured line, checked to be one line of the format's shape. */
static const char *line_message(char *line, bool json)
{
	size_t n = strlen(line);
	char *m;

	assert_true(n > 0 && line[n - 1] == '\n');
	assert_ptr_equal(strchr(line, '\n'), line + n - 1); /* one line, whatever the message held */
	line[n - 1] = '\0';
	if (!json) {
		m = strstr(line, " info t: ");
		assert_non_null(m);
		return m + 9;
	}
	{
		cJSON *doc = cJSON_Parse(line);

		assert_non_null(doc); /* still valid JSON */
		cJSON_Delete(doc);
	}
	m = strstr(line, "\"msg\":\"");
	assert_non_null(m);
	assert_true(n >= 3 && strcmp(line + n - 3, "\"}") == 0);
	line[n - 3] = '\0';
	return m + 7;
}

static void run_line_case(const struct log_case *c)
{
	bool json = c->format && strcmp(c->format, "json") == 0;
	char *line = capture_line(json ? LOG_JSON : LOG_TEXT, c->in);
	const char *got = line_message(line, json);

	if (strcmp(got, c->want) != 0)
		fail_msg("lines.cases line %zu: got '%s', want '%s'", c->line, got, c->want);
	free(line);
}

/* Control characters in a message are escaped in both formats: data cannot forge a line. */
static void test_log_lines(void **state)
{
	(void)state;
	assert_true(for_each_log_case("lines.cases", run_line_case) >= 5);
}

/* A line longer than the limit after escaping is cut with a marker, in both formats, never
 * dropped; and a secret past the formatting buffer is redacted before the cut. */
static void test_log_long_lines(void **state)
{
	static const char mark[] = " [cut: line longer than 8192 bytes]";
	char *msg = xmalloc(20001), *line;
	const char *got;

	(void)state;
	for (int json = 0; json <= 1; json++) {
		memset(msg, '\x01', 4000); /* 16000 bytes escaped as text, 24000 as JSON */
		msg[4000] = '\0';
		line = capture_line(json ? LOG_JSON : LOG_TEXT, msg);
		assert_true(strlen(line) <= 8192);
		got = line_message(line, json);
		assert_true(strlen(got) > 7000);
		assert_string_equal(got + strlen(got) - strlen(mark), mark);
		assert_memory_equal(got, json ? "\\u0001" : "\\x01", json ? 6 : 4);
		free(line);
	}
	/* Cut at a character boundary: no half of a UTF-8 sequence before the marker. */
	for (int i = 0; i < 6000; i++)
		memcpy(msg + 2 * i, "\xc3\xa9", 2);
	msg[12000] = '\0';
	line = capture_line(LOG_JSON, msg);
	got = line_message(line, true);
	assert_true(strlen(got) - strlen(mark) > 7000 && (strlen(got) - strlen(mark)) % 2 == 0);
	free(line);
	/* A secret that straddles the 4 KiB formatting buffer is still redacted. */
	log_add_secret("TOPSECRETVALUE");
	memset(msg, 'x', 5000);
	memcpy(msg + 4090, "TOPSECRETVALUE", 14);
	msg[5000] = '\0';
	line = capture_line(LOG_TEXT, msg);
	assert_null(strstr(line, "TOPSEC"));
	assert_non_null(strstr(line, "x***x"));
	free(line);
	log_clear_secrets();
	free(msg);
}

/* cJSON allocations, checked as they are freed: none may still hold `secret_text`. */
static const char *secret_text;
static int blocks_with_secret;

static void *hooked_malloc(size_t n)
{
	return malloc(n);
}

static void hooked_free(void *p)
{
	if (p && secret_text && memmem(p, malloc_usable_size(p), secret_text, strlen(secret_text)))
		blocks_with_secret++;
	free(p);
}

static void expect_wiped(const char *secret)
{
	cJSON_Hooks hooks = { hooked_malloc, hooked_free };

	secret_text = secret;
	blocks_with_secret = 0;
	cJSON_InitHooks(&hooks);
}

/* A KV listing's document and a user's JSON value are wiped before they are freed: no block that
 * goes back to the allocator holds the password, or its base64 (what Consul sends). */
static void test_secrets_wiped_before_free(void **state)
{
	const char user[] = "{\"password\": \"Pw-4f9c2e1d\", \"roles\": [\"Pw-4f9c2e1d\"]}";
	/* base64 of {"password":"Pw-4f9c2e1d"} */
	const char listing[] = "[{\"Key\":\"proxysql/users/app\",\"Value\":\"eyJwYXNzd29yZCI6IlB3LTRmOWMyZTFkIn0=\","
			       "\"Flags\":0,\"CreateIndex\":5,\"ModifyIndex\":5,\"LockIndex\":0}]";
	struct consul_kv_list l;
	char err[200];
	cJSON *doc;

	(void)state;
	expect_wiped("Pw-4f9c2e1d");
	doc = cJSON_Parse(user);
	assert_non_null(doc);
	sk_json_delete_wiped(doc);
	assert_int_equal(blocks_with_secret, 0);
	doc = cJSON_Parse(user); /* the check itself: cJSON_Delete alone leaves it */
	cJSON_Delete(doc);
	assert_true(blocks_with_secret > 0);

	expect_wiped("eyJwYXNzd29yZCI6IlB3LTRmOWMyZTFkIn0=");
	assert_int_equal(consul_parse_kv_json(listing, strlen(listing), &l, err, sizeof(err)), 0);
	assert_int_equal(blocks_with_secret, 0);
	assert_int_equal(l.n, 1);
	assert_non_null(memmem(l.items[0].value, l.items[0].len, "Pw-4f9c2e1d", 11));
	consul_kv_list_free(&l);
	cJSON_InitHooks(NULL);
	secret_text = NULL;
}

static void test_k8s_deadline_table(void **state)
{
	char path[1024], *text, *p, *save = NULL;
	int rows = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/k8s-deadline.table", testdata_dir());
	text = testdata_read(path);
	for (p = strtok_r(text, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		long t, want;
		char *tab = strchr(p, '\t');

		assert_non_null(tab);
		*tab = '\0';
		assert_true(sk_parse_long(p, 1, 100000, &t));
		assert_true(sk_parse_long(tab + 1, 1, 100000000, &want));
		if (probe_k8s_deadline_ms(t) != want)
			fail_msg("timeoutSeconds=%ld: got %ld ms, want %ld", t, probe_k8s_deadline_ms(t), want);
		assert_true(want > 0 && want < t * 1000);
		rows++;
	}
	assert_true(rows >= 5);
	free(text);
}

static void test_deadline(void **state)
{
	deadline_t d = deadline_in_ms(50), n = deadline_never(), e = deadline_in_ms(0);

	(void)state;
	assert_true(deadline_left_ms(&d) <= 50 && deadline_left_ms(&d) > 0);
	assert_false(deadline_expired(&d));
	assert_true(deadline_expired(&e));
	assert_int_equal(deadline_left_ms(&e), 0);
	assert_false(deadline_expired(&n));
	assert_int_equal(deadline_left_ms(&n), INT32_MAX);
	assert_true(deadline_min(n, d).at == d.at);
	/* For libcurl, where 0 means "no timeout": at least 1 ms while time is left, -1 after. */
	assert_true(deadline_timeout_ms(&d) >= 1 && deadline_timeout_ms(&d) <= 50);
	assert_int_equal(deadline_timeout_ms(&e), -1);
	assert_int_equal(deadline_timeout_ms(&n), INT32_MAX);
	for (int i = 0; i < 1000; i++) {
		deadline_t soon = { deadline_now_us() + 300 }; /* 0.3 ms: rounds up, never down to 0 */
		long ms = deadline_timeout_ms(&soon);

		assert_true(ms == 1 || ms == -1);
	}
	usleep(60000);
	assert_true(deadline_expired(&d));
	assert_int_equal(deadline_timeout_ms(&d), -1);
}

static void test_statusmap_parse(void **state)
{
	struct statusmap m = { 0 };
	char err[128];
	const char text[] = "# comment\nwsrep_local_state\t4\nWSREP_CLUSTER_STATUS   Primary\nempty\nnullv NULL\n";
	char big[2048];

	(void)state;
	assert_int_equal(statusmap_parse(&m, text, strlen(text), err, sizeof(err)), 0);
	assert_string_equal(statusmap_get(&m, "wsrep_cluster_status"), "Primary");
	assert_string_equal(statusmap_get(&m, "empty"), "");
	assert_null(statusmap_get(&m, "nullv"));
	assert_true(statusmap_has(&m, "nullv"));
	assert_null(statusmap_get(&m, "absent"));
	memset(big, 'x', sizeof(big));
	assert_int_equal(statusmap_parse(&m, big, sizeof(big), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "longer than"));
	assert_int_equal(statusmap_parse(&m, "a\0b", 3, err, sizeof(err)), -1);
	statusmap_free(&m);
}

static void test_parse_numbers(void **state)
{
	long l;
	double d;
	bool b;

	(void)state;
	assert_true(sk_parse_long("42", 0, 100, &l) && l == 42);
	assert_false(sk_parse_long("42x", 0, 100, &l));
	assert_false(sk_parse_long("", 0, 100, &l));
	assert_false(sk_parse_long("99999999999999999999", 0, 100, &l));
	assert_true(sk_parse_double("1.5", 0, 2, &d) && d == 1.5);
	assert_false(sk_parse_double("0x10", 0, 100, &d));
	assert_false(sk_parse_double("inf", 0, 100, &d));
	assert_true(sk_parse_bool("ON", &b) && b);
	assert_true(sk_parse_bool("0", &b) && !b);
	assert_false(sk_parse_bool("2", &b));
}

/* trust_path: a file of this user is honoured, a symbolic link is followed only through trusted
 * links, and a missing file or a dangling link is absent. (Files of another user are tested in
 * the integration suite, which can run a process as another user.) */
static void test_trust_path(void **state)
{
	char dir[] = "/tmp/sk-trust-XXXXXX", file[64], link[64], dangling[64], loop[64];
	uid_t owner = 12345;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	snprintf(dangling, sizeof(dangling), "%s/dangling", dir);
	snprintf(loop, sizeof(loop), "%s/loop", dir);
	assert_true(trust_uid(0));
	assert_true(trust_uid(geteuid()));
	assert_int_equal(trust_path(file, (uid_t)-1, &owner), TRUST_ABSENT);
	assert_int_equal(trust_path(NULL, (uid_t)-1, NULL), TRUST_ABSENT);
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(trust_path(file, (uid_t)-1, &owner), TRUST_OK);
	assert_int_equal(symlink("file", link), 0);
	assert_int_equal(trust_path(link, (uid_t)-1, &owner), TRUST_OK);
	assert_int_equal(symlink("nowhere", dangling), 0);
	assert_int_equal(trust_path(dangling, (uid_t)-1, &owner), TRUST_ABSENT);
	assert_int_equal(symlink("loop", loop), 0);
	assert_int_equal(trust_path(loop, (uid_t)-1, &owner), TRUST_ABSENT);
	assert_int_equal(owner, 12345); /* never set unless foreign */
	unlink(file);
	unlink(link);
	unlink(dangling);
	unlink(loop);
	rmdir(dir);
}

/* Undo the case files' escapes (\n \t \\) in place. */
static void unescape_case(char *s)
{
	char *w = s;

	for (char *r = s; *r; r++) {
		if (*r == '\\' && r[1]) {
			r++;
			*w++ = *r == 'n' ? '\n' : *r == 't' ? '\t' : *r;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* cfgnum_check from tests/data/config/numbers.cases: each number libconfig 1.5 would wrap, clamp or
 * make infinite is refused with the file, line and setting, quoting the number as written. */
static void test_config_numbers(void **state)
{
	char path[512], *text, *save = NULL, file[4096] = "", err[256];
	size_t cases = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/config/numbers.cases", testdata_dir());
	text = testdata_read(path);
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "in ", 3) == 0) {
			unescape_case(line + 3);
			size_t len = strlen(file);

			snprintf(file + len, sizeof(file) - len, "%s\n", line + 3);
		} else if (strncmp(line, "want ", 5) == 0) {
			int rc = cfgnum_check(file, "f.cfg", err, sizeof(err));

			if (strcmp(line + 5, "ok") == 0 ? rc != 0 : rc == 0 || strcmp(err, line + 5) != 0)
				fail_msg("numbers.cases: file\n%sgot %s, want %s", file, rc ? err : "ok", line + 5);
			file[0] = '\0';
			cases++;
		}
	}
	free(text);
	assert_true(cases >= 12);
}

/* What runfile_open makes of each kind of file at a path: a file of this user with one link is
 * opened; anything else is refused with the reason. Other owners need root (chown). */
static void test_runfile_open(void **state)
{
	char dir[] = "/tmp/sk-runfile-XXXXXX", path[96], other[96], err[200];
	static const struct {
		const char *setup, *why; /* why: NULL when it opens */
		int flags;
		bool absent;
	} cases[] = {
		{ "none", "No such file or directory", O_RDONLY, true },
		{ "none", NULL, O_RDONLY | O_CREAT, false },
		{ "file", NULL, O_RDONLY, false },
		{ "symlink", "a symbolic link, not followed", O_RDONLY | O_CREAT, false },
		{ "fifo", "not a regular file", O_RDONLY | O_CREAT, false },
		{ "hardlink", "has 2 hard links, not 1", O_RDONLY, false },
		{ "foreign", "belongs to uid 12345, not to this user", O_RDONLY | O_CREAT, false },
	};

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		bool absent = !cases[i].absent;
		int fd;

		unlink(path);
		unlink(other);
		if (strcmp(cases[i].setup, "foreign") == 0 && geteuid() != 0)
			continue;
		if (strcmp(cases[i].setup, "none") && strcmp(cases[i].setup, "symlink") &&
		    strcmp(cases[i].setup, "fifo"))
			close(open(path, O_WRONLY | O_CREAT, 0600));
		if (strcmp(cases[i].setup, "symlink") == 0)
			assert_int_equal(symlink(other, path), 0); /* dangling: following it would create `other` */
		if (strcmp(cases[i].setup, "fifo") == 0)
			assert_int_equal(mkfifo(path, 0600), 0);
		if (strcmp(cases[i].setup, "hardlink") == 0)
			assert_int_equal(link(path, other), 0);
		if (strcmp(cases[i].setup, "foreign") == 0)
			assert_int_equal(chown(path, 12345, 12345), 0);
		fd = runfile_open(path, cases[i].flags, &absent, err, sizeof(err));
		if (!cases[i].why) {
			assert_true(fd >= 0);
			close(fd);
		} else {
			assert_int_equal(fd, -1);
			assert_non_null(strstr(err, cases[i].why));
		}
		assert_int_equal(absent, cases[i].absent);
		if (strcmp(cases[i].setup, "symlink") == 0)
			assert_int_equal(access(other, F_OK), -1);
	}
	unlink(path);
	unlink(other);
	rmdir(dir);
}

/* runfile_pick: $XDG_RUNTIME_DIR when private, else /run when writable and private, else this
 * user's own 0700 directory in /tmp; one planted there, or open to others, is refused. */
static void test_runfile_pick(void **state)
{
	char base[] = "/tmp/sk-pick-XXXXXX", xdg[64], run[64], tmp[64], mine[96], want[128], buf[256], err[300];
	struct runfile_dirs d = { .xdg = xdg, .run = run, .tmp = tmp, .prefix = "p" };
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(base));
	snprintf(xdg, sizeof(xdg), "%s/xdg", base);
	snprintf(run, sizeof(run), "%s/run", base);
	snprintf(tmp, sizeof(tmp), "%s/tmp", base);
	snprintf(mine, sizeof(mine), "%s/p-%u", tmp, (unsigned)geteuid());
	assert_int_equal(mkdir(xdg, 0700), 0);
	assert_int_equal(mkdir(run, 0755), 0);
	assert_int_equal(mkdir(tmp, 01777), 0);
	chmod(tmp, 01777);
	assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/f.lock", xdg);
	assert_string_equal(buf, want);
	chmod(xdg, 0777); /* others can write it: not used */
	assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/f.lock", run);
	assert_string_equal(buf, want);
	d.xdg = "relative";
	chmod(run, 0777);
	assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s/f.lock", mine);
	assert_string_equal(buf, want);
	assert_int_equal(lstat(mine, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	chmod(mine, 0777);
	assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "others can write it (mode 777)"));
	rmdir(mine);
	assert_int_equal(symlink(xdg, mine), 0); /* a link to a directory, even ours: not used */
	assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a directory"));
	unlink(mine);
	if (geteuid() == 0) {
		assert_int_equal(mkdir(mine, 0700), 0);
		assert_int_equal(chown(mine, 12345, 12345), 0);
		assert_int_equal(runfile_pick(&d, "f.lock", buf, sizeof(buf), err, sizeof(err)), -1);
		assert_non_null(strstr(err, "belongs to uid 12345, not to this user"));
		rmdir(mine);
	}
	rmdir(xdg);
	rmdir(run);
	rmdir(tmp);
	rmdir(base);
}

/* One row of spooky/vectors.table: the message hashed whole and in pieces of several sizes. */
static void spooky_row(char *line, void *ctx)
{
	static const size_t pieces[] = { 0, 1, 7, 95, 96, 97, 191, 192, 200 };
	unsigned long long s1, s2, w1, w2;
	size_t len;
	unsigned char *m;

	(void)ctx;
	if (sscanf(line, "%llx %llx %zu %llx %llx", &s1, &s2, &len, &w1, &w2) != 5)
		fail_msg("bad vector line: %s", line);
	m = xcalloc(len ? len : 1, 1);
	for (size_t i = 0; i < len; i++)
		m[i] = (unsigned char)((i * 131 + len) & 0xff);
	for (size_t k = 0; k < sizeof(pieces) / sizeof(pieces[0]); k++) {
		size_t piece = pieces[k] ? pieces[k] : len; /* 0: the whole message in one update */
		sk_spooky s;
		uint64_t h1, h2;

		sk_spooky_init(&s, s1, s2);
		for (size_t at = 0; at < len; at += piece)
			sk_spooky_update(&s, m + at, len - at < piece ? len - at : piece);
		sk_spooky_update(&s, "", 0); /* an empty field, as a NULL column is hashed */
		sk_spooky_final(&s, &h1, &h2);
		if (h1 != w1 || h2 != w2)
			fail_msg(
				"seeds %llx %llx, length %zu, pieces of %zu: got %016llx %016llx, want %016llx %016llx",
				s1, s2, len, piece, (unsigned long long)h1, (unsigned long long)h2, w1, w2);
	}
	free(m);
}

static void test_spooky_vectors(void **state)
{
	(void)state;
	assert_true(testdata_each_line("spooky/vectors.table", spooky_row, NULL) >= 90);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_opts_defaults_and_argv),
		cmocka_unit_test(test_opts_bind),
		cmocka_unit_test(test_deadline_since_start),
		cmocka_unit_test(test_opts_bind_type_mismatch),
		cmocka_unit_test(test_opts_precedence),
		cmocka_unit_test(test_opts_errors),
		cmocka_unit_test(test_config_file_errors),
		cmocka_unit_test(test_mycnf_table),
		cmocka_unit_test(test_mycnf_too_large),
		cmocka_unit_test(test_mycnf_load_client),
		cmocka_unit_test(test_secret_verdict_table),
		cmocka_unit_test(test_secret_file_modes),
		cmocka_unit_test(test_secret_file),
		cmocka_unit_test(test_redaction),
		cmocka_unit_test(test_log_lines),
		cmocka_unit_test(test_log_long_lines),
		cmocka_unit_test(test_secrets_wiped_before_free),
		cmocka_unit_test(test_k8s_deadline_table),
		cmocka_unit_test(test_deadline),
		cmocka_unit_test(test_statusmap_parse),
		cmocka_unit_test(test_parse_numbers),
		cmocka_unit_test(test_trust_path),
		cmocka_unit_test(test_config_numbers),
		cmocka_unit_test(test_runfile_open),
		cmocka_unit_test(test_runfile_pick),
		cmocka_unit_test(test_spooky_vectors),
	};

	return cmocka_run_group_tests_name("lib", tests, NULL, NULL);
}
