/* fuzz_argv.c: libFuzzer harness for command-line parsing: opts_parse with long, short,
 * inline and separate values, "--", and the positional compatibility form.
 *
 * The input is split on NUL bytes into argv (at most 32 arguments). The first byte picks the
 * table: proxysql-sync's real one through sync_config_load, or a probe's (the shared
 * PROBE_CONN_OPTIONS rows plus clustercheck's kinds of option) followed by clustercheck's
 * positional form USER PASS DONOR LOGFILE READONLY DEFAULTS_FILE (opt_set, as its main does)
 * and probe_conn_setup. Runs in an empty directory, so relative paths name nothing. Checked: OK,
 * exit (help/version) or an error with a message; accepted values lie within their bounds; a
 * password never comes from an option on argv (only from the positional compat form). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "probe.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char *__lsan_default_suppressions(void);

/* libconfig 1.5's scanner loses a string token's buffer when the parse fails (1 to 64 bytes per
 * failed parse): its leak, not ours; nothing of ours is allocated under libconfig's frames. */
const char *__lsan_default_suppressions(void)
{
	return "leak:libconfig.so\n";
}

#define FAIL(...)                                           \
	do {                                                \
		fprintf(stderr, "INVARIANT: " __VA_ARGS__); \
		fputc('\n', stderr);                        \
		abort();                                    \
	} while (0)

#define MAX_ARGS 32

/* clang-format off */
static const struct opt_def probe_options[] = {
	PROBE_CONN_OPTIONS("localhost", "mysqld address.", "3306", "clustercheckuser", NULL, "MYSQL_PASSWORD",
			   "clustercheckpassword!"),
	{"timeout", 't', OPT_NUMBER, "SECONDS", "10", NULL, 0.05, 3600, NULL, "Deadline.", 0},
	{"available-when-donor", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Donor is fine.", 0},
	{"available-when-readonly", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "Read-only is fine.", 0},
	{"log-file", 0, OPT_STRING, "PATH", "/dev/null", NULL, 0, 0, NULL, "Log file.", 0},
	{"listen", 'l', OPT_STRING, "[ADDR:]PORT", NULL, NULL, 0, 0, NULL, "Serve HTTP.", 0},
	{"cache-ms", 0, OPT_INT, "MS", "0", NULL, 0, 60000, NULL, "Cache.", 0},
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", NULL, 0, 0, "text|json", "Format.", 0},
};
/* clang-format on */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char dir[] = "/tmp/sk-fuzz-argv-XXXXXX";

	(void)argc;
	(void)argv;
	log_setup("fuzz", LOG_TEXT, LOG_OFF, stderr);
	if (!mkdtemp(dir) || chdir(dir) < 0)
		abort();
	rmdir(dir); /* the cwd stays usable and empty; nothing is left behind */
	unsetenv("PROXYSQL_SYNC_CONFIG");
	unsetenv("PROXYSQL_ADMIN_ADDR");
	unsetenv("PROXYSQL_ADMIN_PASSWORD");
	unsetenv("MYSQL_PASSWORD");
	unsetenv("MYSQL_USERNAME");
	unsetenv("DEFAULTS_EXTRA_FILE");
	return 0;
}

/* The clustercheck compat form: positional arguments set named options. */
static int positional(struct opts *o, char *err, size_t errlen)
{
	static const char *const names[] = {
		"user", "password", "available-when-donor", "log-file", "available-when-readonly", "defaults-extra-file"
	};

	if (o->nargs > (int)SK_ARRAY_LEN(names))
		return sk_err(err, errlen, "too many arguments");
	for (int i = 0; i < o->nargs; i++)
		if ((o->args[i][0] || i == 1) && opt_set(o, names[i], o->args[i], "argument", err, errlen) < 0)
			return -1;
	return 0;
}

static void run_probe(int argc, char **argv)
{
	struct opts o = { .prog = "probe",
			  .version = "0",
			  .synopsis = "",
			  .summary = "",
			  .defs = probe_options,
			  .ndefs = SK_ARRAY_LEN(probe_options),
			  .config_opt = "config",
			  .max_args = 6 };
	char err[1024] = "";
	enum opts_result r = opts_parse(&o, argc, argv, err, sizeof(err));

	if (r == OPTS_OK) {
		struct probe_conn pc;

		if (opt_given(&o, "password") && strcmp(opt_source(&o, "password"), "argument") != 0)
			FAIL("password taken from %s", opt_source(&o, "password"));
		if (opt_int(&o, "port") < 1 || opt_int(&o, "port") > 65535 || opt_num(&o, "timeout") < 0.05 ||
		    opt_int(&o, "cache-ms") < 0 || opt_int(&o, "cache-ms") > 60000)
			FAIL("a value outside its bounds was accepted");
		if (positional(&o, err, sizeof(err)) == 0 && probe_conn_setup(&o, &pc, err, sizeof(err)) == 0) {
			if (!pc.user || !pc.password || (!pc.host && !pc.socket))
				FAIL("connection settings incomplete");
			probe_conn_free(&pc);
		} else if (!err[0]) {
			FAIL("an error without a message");
		}
	} else if (r == OPTS_ERROR && !err[0]) {
		FAIL("an error without a message");
	}
	opts_free(&o);
}

static void run_sync(int argc, char **argv)
{
	struct sync_config c;
	char err[1024] = "";
	enum opts_result r = sync_config_load(&c, argc, argv, err, sizeof(err));

	if (r == OPTS_OK) {
		if (c.ntargets == 0 || opt_num(&c.o, "wait") < 1 || opt_num(&c.o, "wait") > 600)
			FAIL("accepted without a target or with a wait out of bounds");
		if (opt_given(&c.o, "admin-password") && strncmp(opt_source(&c.o, "admin-password"), "env ", 4) != 0)
			FAIL("admin password taken from %s", opt_source(&c.o, "admin-password"));
	} else if (r == OPTS_ERROR && !err[0]) {
		FAIL("an error without a message");
	}
	sync_config_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf, *argv[MAX_ARGS + 2];
	int argc = 1;

	if (size < 1)
		return 0;
	buf = xmalloc(size);
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	argv[0] = "prog";
	for (char *p = buf; p < buf + size && argc <= MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	if (data[0] & 1)
		run_sync(argc, argv);
	else
		run_probe(argc, argv);
	log_clear_secrets();
	free(buf);
	return 0;
}
