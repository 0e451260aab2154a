/* fuzz_healthcheck.c: libFuzzer harness for healthcheck's argument walk and its run: healthcheck_run_args
 * over an argv from the input, against a fake server whose answers the input picks too.
 *
 * The input's first byte picks the answers (socket login ok or refused, TCP login ok, denied or
 * refused, skip_networking 0 or 1, InnoDB there or not, a replica row or none, the upgrade file
 * locked or not, --su allowed or not); the rest is split on NUL bytes into argv (at most 32
 * arguments). Checked: the exit code is 0 or 1; a healthy exit ran a connect test or saw
 * --no-connect; the recorded results fit their table; every argv element was read in bounds
 * (ASan). */
#include <string.h>

#include "fuzz.h"
#include "healthcheck.h"
#include "log.h"

#define MAX_ARGS 32

static unsigned answers; /* the first byte of the input */

static void fail_with(struct db_err *e, unsigned code, const char *state)
{
	memset(e, 0, sizeof(*e));
	e->code = code;
	e->reason = code == 1045 ? DB_ACCESS_DENIED : DB_REFUSED;
	snprintf(e->sqlstate, sizeof(e->sqlstate), "%s", state);
	snprintf(e->msg, sizeof(e->msg), "fake error (%u)", code);
}

static int fk_value(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e)
{
	(void)ctx;
	(void)d;
	v->found = false;
	if (answers & 1) {
		fail_with(e, 2002, "HY000");
		return -1;
	}
	if (strstr(sql, "skip_networking")) {
		v->found = true;
		snprintf(v->buf, v->len, "%d", (answers >> 3) & 1);
	} else if ((answers >> 4) & 1) {
		v->found = true;
		snprintf(v->buf, v->len, "%s", strstr(sql, "ENGINES") ? "1" : "Buffer pool(s) load completed at 1");
	}
	return 0;
}

static int fk_tcp(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e)
{
	switch ((answers >> 1) & 3) {
	case 0: return fk_value(ctx, d, sql, v, e);
	case 1: fail_with(e, 1045, "28000"); return -1;
	default: fail_with(e, 2002, "HY000"); return -1;
	}
}

static int fk_status(void *ctx, const struct hc_defaults *d, struct statusmap *status, struct db_err *e)
{
	(void)ctx;
	(void)d;
	if (answers & 1) {
		fail_with(e, 2002, "HY000");
		return -1;
	}
	if (statusmap_set(status, "wsrep_local_state", (answers >> 4) & 1 ? "4" : "2") < 0 ||
	    statusmap_set(status, "wsrep_ready", (answers >> 4) & 1 ? "ON" : "OFF") < 0)
		abort();
	return 0;
}

static int fk_rows(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_rows *r, struct db_err *e)
{
	(void)ctx;
	(void)d;
	(void)sql;
	r->n = 0;
	if (answers & 1) {
		fail_with(e, 2002, "HY000");
		return -1;
	}
	if (((answers >> 5) & 1) && r->max > 0) {
		if (statusmap_set(&r->rows[0], "Slave_IO_Running", "No") < 0 ||
		    statusmap_set(&r->rows[0], "Slave_SQL_Running", "Yes") < 0 ||
		    statusmap_set(&r->rows[0], "Seconds_Behind_Master", NULL) < 0 ||
		    statusmap_set(&r->rows[0], "SQL_Remaining_Delay", "30") < 0)
			abort();
		r->n = 1;
	}
	return 0;
}

static int fk_locked(void *ctx, const char *path, char *why, size_t whylen)
{
	(void)ctx;
	snprintf(why, whylen, "%s", path);
	return (answers >> 6) & 1;
}

static void fk_reset(void *ctx)
{
	(void)ctx;
}

static void fk_describe(void *ctx, const struct db_err *e, char *buf, size_t len)
{
	(void)ctx;
	snprintf(buf, len, "%s", e->msg);
}

static int fk_su(void *ctx, const char *user, char *err, size_t errlen)
{
	(void)ctx;
	(void)user;
	return (answers >> 7) & 1 ? 0 : sk_err(err, errlen, "not allowed");
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_setup("fuzz", LOG_TEXT, LOG_OFF, stderr);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hc_io io = {
		.socket_value = fk_value,
		.socket_status = fk_status,
		.socket_rows = fk_rows,
		.tcp_value = fk_tcp,
		.upgrade_locked = fk_locked,
		.reset = fk_reset,
		.describe = fk_describe,
		.su = fk_su,
	};
	char *argv[MAX_ARGS + 2], *copy;
	struct hc_run run;
	int argc = 0, rc;
	bool connect_ok = false;

	if (size < 1)
		return 0;
	answers = data[0];
	/* Each argument its own allocation, so a read past one is an ASan report. */
	copy = malloc(size);
	if (!copy)
		abort();
	memcpy(copy, data + 1, size - 1);
	copy[size - 1] = '\0';
	argv[argc++] = strdup("healthcheck");
	for (char *p = copy; argc <= MAX_ARGS && p < copy + size - 1; p += strlen(p) + 1)
		argv[argc++] = strdup(p);
	argv[argc] = NULL;
	free(copy);

	healthcheck_run_init(&run, "/nonexistent", NULL);
	rc = healthcheck_run_args(&run, argc, argv, &io);
	if (rc != 0 && rc != 1)
		FAIL("exit code %d", rc);
	if (run.nresults > HC_MAX_RESULTS)
		FAIL("%zu results", run.nresults);
	for (size_t i = 0; i < run.nresults; i++)
		if (strcmp(run.results[i].test, "connect") == 0 && run.results[i].ok)
			connect_ok = true;
	if (rc == 0 && !connect_ok && run.connect_s != 0)
		FAIL("healthy without a connect");
	healthcheck_run_free(&run);
	for (int i = 0; i < argc; i++)
		free(argv[i]);
	return 0;
}
