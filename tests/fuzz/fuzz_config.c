/* fuzz_config.c: libFuzzer harness for the config file loader: opts_load_file through
 * opts_parse (libconfig text -> option table), with proxysql-sync's structured settings
 * (sync_config_load: clusters and targets lists, whole-config checks) or a probe's table.
 *
 * The input becomes the file's content, in a memfd read through /proc/self/fd/N. The first byte
 * picks the table. Inputs that name an @include are skipped: libconfig would read that file
 * (see docs/reliability.md). Checked: a load returns OK or an error with a message, never
 * crashes, and a successful sync config satisfies what check_whole promises. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
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

/* clang-format off */
/* A probe's table: the shared connection rows and the kinds of option clustercheck adds. */
static const struct opt_def probe_options[] = {
	PROBE_CONN_OPTIONS("mysqld", "localhost", "mysqld address.", "3306", "clustercheckuser", NULL, "MYSQL_PASSWORD",
			   "clustercheckpassword!"),
	{"timeout", 't', OPT_NUMBER, "SECONDS", "10", NULL, 0.05, 3600, NULL, "Deadline.", 0},
	{"available-when-donor", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Donor is fine.", 0},
	{"listen", 'l', OPT_STRING, "[ADDR:]PORT", NULL, NULL, 0, 0, NULL, "Serve HTTP.", 0},
	{"cache-ms", 0, OPT_INT, "MS", "0", NULL, 0, 60000, NULL, "Cache.", 0},
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", NULL, 0, 0, "text|json", "Format.", 0},
	{"compat", 0, OPT_STRING, "X", NULL, NULL, 0, 0, NULL, "Hidden spelling.", OPT_HIDDEN},
};
/* clang-format on */

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup("fuzz", LOG_TEXT, LOG_OFF, stderr);
	fd = memfd_create("fuzz.cfg", 0);
	/* A memfd is 0777: the loader refuses a config file others could write, so the harness
	 * would fuzz nothing past that check. */
	if (fd < 0 || fchmod(fd, 0600) < 0)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	/* The tables read these; a fixed environment keeps runs reproducible. */
	unsetenv("PROXYSQL_SYNC_CONFIG");
	unsetenv("PROXYSQL_ADMIN_ADDR");
	unsetenv("PROXYSQL_ADMIN_PASSWORD");
	unsetenv("MYSQL_PASSWORD");
	unsetenv("MYSQL_USERNAME");
	unsetenv("DEFAULTS_EXTRA_FILE");
	return 0;
}

static void check_sync(const struct sync_config *c)
{
	const struct layout_config *l = &c->layout;

	if (c->ntargets == 0 || !l->master_prefix || !l->users_prefix || !l->user_tag || !l->user_tag[0])
		FAIL("accepted config without a target or prefixes");
	for (size_t i = 0; i < c->ntargets; i++)
		if (!c->targets[i].host || !c->targets[i].name || !c->targets[i].user || !c->targets[i].password ||
		    c->targets[i].port < 1 || c->targets[i].port > 65535)
			FAIL("target %zu incomplete", i);
	for (size_t i = 0; i < l->nclusters; i++) {
		if (!l->clusters[i].alias || !l->clusters[i].alias[0] || strchr(l->clusters[i].alias, '/'))
			FAIL("cluster alias '%s'", l->clusters[i].alias ? l->clusters[i].alias : "(null)");
		if (l->clusters[i].reader_hostgroup == l->clusters[i].writer_hostgroup)
			FAIL("cluster %s: reader equals writer", l->clusters[i].alias);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *args[] = { "prog", "-c", path, NULL };
	char err[1024] = "";
	enum opts_result r;

	if (size < 1 || memmem(data, size, "@include", 8))
		return 0;
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
		abort();
	if (data[0] & 1) {
		struct sync_config c;

		r = sync_config_load(&c, 3, args, err, sizeof(err));
		if (r == OPTS_OK)
			check_sync(&c);
		sync_config_free(&c);
	} else {
		struct opts o = { .prog = "probe",
				  .version = "0",
				  .synopsis = "",
				  .summary = "",
				  .defs = probe_options,
				  .ndefs = SK_ARRAY_LEN(probe_options),
				  .config_opt = "config",
				  .max_args = 6 };

		r = opts_parse(&o, 3, args, err, sizeof(err));
		if (r == OPTS_OK) {
			for (size_t i = 0; i < o.ndefs; i++) {
				(void)opt_str(&o, o.defs[i].name);
				(void)opt_source(&o, o.defs[i].name);
			}
			if (opt_num(&o, "timeout") < 0.05 || opt_num(&o, "timeout") > 3600 || opt_int(&o, "port") < 1 ||
			    opt_int(&o, "port") > 65535)
				FAIL("a value outside its bounds was accepted");
		}
		opts_free(&o);
	}
	if (r == OPTS_ERROR && !err[0])
		FAIL("an error without a message");
	log_clear_secrets();
	return 0;
}
