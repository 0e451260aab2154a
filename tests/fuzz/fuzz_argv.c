/* fuzz_argv.c: libFuzzer harness for command-line parsing: opts_parse with long, short,
 * inline and separate values, "--", and the positional compatibility form.
 *
 * The input is split on NUL bytes into argv (at most 32 arguments). The first byte picks the
 * table: proxysql-sync's real one through sync_config_load, or clustercheck's real one
 * (clustercheck_opts_init) followed by its positional form USER PASS DONOR LOGFILE READONLY
 * DEFAULTS_FILE (clustercheck_opts_apply_positional, as its main does), probe_conn_settings_load and probe_conn_setup. Runs in an empty directory, so relative paths name nothing. Checked: OK,
 * exit (help/version) or an error with a message; accepted values lie within their bounds; a
 * password never comes from an option on argv (only from the positional compat form). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "clustercheck_opts.h"
#include "config.h"
#include "log.h"
#include "probe.h"

const char *__lsan_default_suppressions(void);

/* libconfig 1.5's scanner loses a string token's buffer when the parse fails (1 to 64 bytes per
 * failed parse): its leak, not ours; nothing of ours is allocated under libconfig's frames. */
const char *__lsan_default_suppressions(void)
{
	return "leak:libconfig.so\n";
}

#define MAX_ARGS 32

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

static void run_probe(int argc, char **argv)
{
	struct opts o;
	char err[1024] = "";
	enum opts_result r;

	clustercheck_opts_init(&o);
	r = opts_parse(&o, argc, argv, err, sizeof(err));
	if (r == OPTS_OK) {
		struct probe_conn_settings cs;
		struct probe_conn pc;
		bool password_on_argv;

		if (opt_given(&o, "password") && strcmp(opt_source(&o, "password"), "argument") != 0)
			FAIL("password taken from %s", opt_source(&o, "password"));
		if (opt_int(&o, "port") < 1 || opt_int(&o, "port") > 65535 || opt_num(&o, "timeout") < 0.05 ||
		    opt_int(&o, "cache-ms") < 0 || opt_int(&o, "cache-ms") > 60000)
			FAIL("a value outside its bounds was accepted");
		if (clustercheck_opts_apply_positional(&o, &password_on_argv, err, sizeof(err)) < 0) {
			if (!err[0])
				FAIL("an error without a message");
		} else {
			const char *pw = opt_str(&o, "password");

			/* An empty PASS keeps no password: nothing to warn about. */
			if (password_on_argv != (strcmp(opt_source(&o, "password"), "argument 2") == 0 && pw && pw[0]))
				FAIL("password_on_argv %d, but the password came from %s", password_on_argv,
				     opt_source(&o, "password"));
			probe_conn_settings_load(&o, &cs);
			if (probe_conn_setup(&cs, &pc, err, sizeof(err)) == 0) {
				if (!pc.user || !pc.password || (!pc.host && !pc.socket))
					FAIL("connection settings incomplete");
				probe_conn_free(&pc);
			} else if (!err[0]) {
				FAIL("an error without a message");
			}
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
