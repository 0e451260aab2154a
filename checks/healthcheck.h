/* healthcheck.h: the MariaDB image's healthcheck.sh as a library: its arguments read strictly left
 * to right, its tests (connect, innodb_initialized, ..., replication, mariadbupgrade) and their
 * verdicts, run on one connection under one deadline through a small I/O interface. */
#ifndef SK_HEALTHCHECK_H
#define SK_HEALTHCHECK_H

#include <stdbool.h>
#include <sys/types.h>
#include <stddef.h>
#include <stdio.h>

#include "db.h"
#include "deadline.h"
#include "statusmap.h"

enum hc_test {
	HC_CONNECT,
	HC_INNODB_INITIALIZED,
	HC_INNODB_BUFFER_POOL_LOADED,
	HC_GALERA_ONLINE,
	HC_GALERA_READY,
	HC_REPLICATION,
	HC_MARIADBUPGRADE,
	HC_NTESTS
};

/* The test's name as on the command line (without "--"). */
const char *healthcheck_test_str(enum hc_test t);
/* The test called `name`, or -1. */
int healthcheck_test_find(const char *name);

/* One argument (or an argument and its value) of the command line. */
enum hc_step_kind {
	HC_STEP_TEST, /* run `test` */
	HC_STEP_REPL, /* set replication setting `key` to `value` */
	HC_STEP_DATADIR, /* --datadir */
	HC_STEP_NO_DEFAULTS, /* --no-defaults */
	HC_STEP_DEFAULTS, /* --defaults-file / -extra-file / -group-suffix (key: file, extra_file, group_suffix) */
	HC_STEP_NO_CONNECT, /* --no-connect */
	HC_STEP_SU, /* --su=USER, --su USER, --su-mysql: `value` is the user */
	HC_STEP_SKIP, /* one of our own options (--timeout, --json), handled before the run */
	HC_STEP_ERROR, /* unknown option or test, a value missing at the end: `msg`, exit 1 */
};

struct hc_step {
	enum hc_step_kind kind;
	enum hc_test test;
	char key[64];
	const char *value; /* points into argv, or a literal; NULL for none */
	char msg[200];
};

/* Walks argv from argv[1] as healthcheck.sh does. */
struct hc_parser {
	int argc, i;
	char **argv;
};

/* Is `arg` one of healthcheck's own options (read by opts_parse before the walk, skipped by it)?
 * 0 no, 1 a flag or "--name=value", 2 "--name" whose value is the next argument. */
int healthcheck_own_option(const char *arg);

void healthcheck_parser_init(struct hc_parser *p, int argc, char **argv);
/* Fill `s` with the next step; false at the end of the arguments. Pure: reads argv only. */
bool healthcheck_parser_next(struct hc_parser *p, struct hc_step *s);

/* The argument of the last setting (--replication_*, --datadir, --defaults-*, --no-defaults) that no
 * test follows, so that it changes nothing; NULL when every setting has a test after it. Pure. */
const char *healthcheck_trailing_setting(int argc, char **argv);

/* The replication settings (--replication_*); NULL or "" means unset, as in the script. */
struct hc_repl {
	char *io, *sql, *seconds_behind_master, *sql_remaining_delay, *all, *name;
};

/* The option-file settings of the run (--no-defaults, --defaults-*). */
struct hc_defaults {
	bool no_defaults;
	char *file, *extra_file, *group_suffix;
	uid_t datadir_owner; /* trusted for option files besides root and this process's user (0: none) */
};

/* Where a one-value query's answer goes: `buf` (`len` bytes, cut to fit); `found` false when
 * the query returned no row. */
struct hc_value {
	char *buf;
	size_t len;
	bool found;
};

/* Where a query's rows go, column name -> value: at most `max` into `rows`, `n` of them filled. */
struct hc_rows {
	struct statusmap *rows;
	size_t max;
	size_t n;
};

/* What the tests need from the server; the real one (hc_dbio) talks to mysqld, the unit tests
 * pass a fake. Every function returns 0 or -1 with `e` filled. */
struct hc_io {
	/* One value (first column of the first row) of `sql` on the socket connection, opened on
	 * first use with the current option-file settings and reused, into `v`. */
	int (*socket_value)(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v,
			    struct db_err *e);
	/* The wsrep status (as probe_galera_read) on the socket connection. */
	int (*socket_status)(void *ctx, const struct hc_defaults *d, struct statusmap *status, struct db_err *e);
	/* Every row of `sql` (SHOW REPLICA STATUS) into `r`. */
	int (*socket_rows)(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_rows *r,
			   struct db_err *e);
	/* One value of `sql` over TCP to localhost (the connect test's fallback), on a new connection. */
	int (*tcp_value)(void *ctx, const struct hc_defaults *d, const char *sql, struct hc_value *v, struct db_err *e);
	/* 1 when `path` is readable and another process holds a lock on it, 0 when not (or absent);
	 * `why` says which. */
	int (*upgrade_locked)(void *ctx, const char *path, char *why, size_t whylen);
	/* The settings changed (option files, --su): close connections; the next use reopens. */
	void (*reset)(void *ctx);
	/* Describe a failure for the reason line ("timeout after 3.0s connecting (sock, --timeout)"). */
	void (*describe)(void *ctx, const struct db_err *e, char *buf, size_t len);
	/* 1 when the mysqld of `datadir` is receiving an SST or recovering (what sst_liveness_before
	 * calls alive), `why` saying what was found; 0 when not, `why` then naming any bypass file
	 * ignored for its owner (else left as it was). NULL: never looked at. */
	int (*sst_running)(void *ctx, const char *datadir, char *why, size_t whylen);
	/* Become `user` (--su): 0, or -1 with `err`. NULL: --su is refused. */
	int (*su)(void *ctx, const char *user, char *err, size_t errlen);
	void *ctx;
};

#define HC_MAX_RESULTS 64

struct hc_result {
	char test[40]; /* "connect", or "arguments" for a bad argument, "su" for --su */
	bool ok;
	char reason[512];
};

/* A run: the state the script keeps in shell variables, and what happened. */
struct hc_run {
	const char *default_datadir; /* /var/lib/mysql, where .my-healthcheck.cnf is looked up */
	char *datadir;
	struct hc_repl repl;
	struct hc_defaults defs;
	int connect_s; /* -1: no successful connect recorded; 0: recorded */
	bool started; /* at least one argument was seen after the last --su */
	bool alive_during_sst; /* --alive-during-sst: the connect test passes while an SST runs */
	struct hc_result results[HC_MAX_RESULTS];
	size_t nresults;
	FILE *err; /* stderr: the script's messages, and a reason for every failure */
};

/* Set up the state as the script starts (the default extra file when it exists). */
void healthcheck_run_init(struct hc_run *r, const char *default_datadir, FILE *err);
void healthcheck_run_free(struct hc_run *r);

/* Run the whole command line; returns the exit code (0 healthy, 1 not). */
int healthcheck_run_args(struct hc_run *r, int argc, char **argv, const struct hc_io *io);

/* Run one test now with the current settings; fills `reason`, returns true when it passes. */
bool healthcheck_run_test(struct hc_run *r, enum hc_test t, const struct hc_io *io, char *reason, size_t len);

/* Pure verdicts. `value`/`found`: the query's answer. */
bool healthcheck_judge_innodb_initialized(const char *value, bool found, char *reason, size_t len);
bool healthcheck_judge_buffer_pool_loaded(const char *value, bool found, char *reason, size_t len);
bool healthcheck_judge_galera_online(const struct statusmap *status, char *reason, size_t len);
bool healthcheck_judge_galera_ready(const struct statusmap *status, char *reason, size_t len);
/* SHOW [ALL] REPLICA[S] STATUS rows against the settings, in the script's field order. */
bool healthcheck_judge_replication(const struct statusmap *rows, size_t nrows, const struct hc_repl *s, char *reason,
				   size_t len);
/* The connect test's TCP answer: skip_networking 0 passes, 1 fails; errors that prove a server
 * answered (access denied 28000, 1820 password expired, 4151 account locked, 1226 resource
 * limit) pass; 2002 and anything else fail. `e` NULL: the query answered `value`. */
bool healthcheck_judge_tcp_connect(const char *value, bool found, const struct db_err *e, char *reason, size_t len);

/* The mariadbupgrade test's lock probe: 1 when `path` is readable and locked by another process
 * (flock LOCK_EX|LOCK_NB, released at once), 0 when free or absent; `why` says which. */
int healthcheck_upgrade_locked(const char *path, char *why, size_t whylen);

/* The SHOW ... REPLICA ... STATUS statement for the settings, the name quoted. */
void healthcheck_replication_sql(const struct hc_repl *s, char *buf, size_t len);

/* The I/O against a real server: one socket connection reused by every test, under one deadline. */
struct hc_dbio {
	const deadline_t *dl;
	long budget_ms;
	const char *timeout_setting; /* "--timeout" or "HEALTHCHECK_TIMEOUT" */
	struct db db; /* the socket connection */
	bool tried; /* db was attempted with the current settings */
	struct db_err failed; /* why it could not be opened (when tried and not connected) */
	char what[300]; /* the address of the last attempt, for describe */
	char sock_what[300]; /* the socket's, set again for every use of the socket connection */
	const char *user, *password; /* --user, --password-file/HEALTHCHECK_PASSWORD: over the option files */
};

void healthcheck_dbio_init(struct hc_dbio *d, const deadline_t *dl, long budget_ms, const char *timeout_setting);
void healthcheck_dbio_close(struct hc_dbio *d);
/* The SST evidence of `datadir` through /proc (sst_gather, sst_liveness_before with the default
 * grace): an hc_io sst_running. */
int healthcheck_sst_running(void *ctx, const char *datadir, char *why, size_t whylen);

/* An hc_io over `d`; `su` may be NULL. */
struct hc_io healthcheck_dbio_ops(struct hc_dbio *d, int (*su)(void *ctx, const char *user, char *err, size_t errlen));

#endif
