/* proxysql.h: the admin-interface adapter: read main.* tables and pool stats, apply a plan. */
#ifndef SK_PROXYSQL_H
#define SK_PROXYSQL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "model.h"
#include "module.h"
#include "plan.h"

struct pxadmin_target {
	const char *name;
	const char *host;
	long port;
	bool port_explicit; /* the address named its port: "localhost:6032" is TCP, not the socket */
	const char *user;
	const char *password;
	bool tls, tls_verify; /* TLS to the admin interface; verify its certificate and name */
	const char *tls_ca, *tls_cert, *tls_key;
};

struct pxadmin {
	struct db db;
	const struct pxadmin_target *t;
	const struct px_module *m; /* the tables read and written (NULL: px_mysql) */
};

/* Connect (when not connected) within the deadline. */
int pxadmin_connect(struct pxadmin *a, const struct pxadmin_target *t, const deadline_t *dl,
		    struct db_err *e) SK_MUST_CHECK;

/* Read main.mysql_servers and main.mysql_users (never runtime_*, which the monitor rewrites);
 * sorted. `users` may be NULL when users are not managed. */
int pxadmin_read(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, struct px_users *users,
		 struct db_err *e) SK_MUST_CHECK;

/* A user row as it is read: its strings live only during the call. */
typedef void px_user_fn(void *ctx, const struct px_user *u);

/* The same two tables as runtime has them (runtime_mysql_servers, sorted; runtime_mysql_users, each
 * row handed to `users` as it arrives, so that none need be kept; NULL: not read). Rows are
 * streamed from the server, never held as a whole result set. */
int pxadmin_read_runtime(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, px_user_fn *users,
			 void *ctx, struct db_err *e) SK_MUST_CHECK;

/* The newest epoch (Unix seconds) at which a ProxySQL Cluster peer loaded mysql_servers or
 * mysql_users, as this node sees it (stats_proxysql_servers_checksums); 0 when none. */
int pxadmin_peer_epoch(struct pxadmin *a, const deadline_t *dl, long long *epoch, struct db_err *e) SK_MUST_CHECK;

/* proxysql_servers of memory (main) or runtime; sorted. */
int pxadmin_read_peers(struct pxadmin *a, bool runtime, const deadline_t *dl, struct px_peers *out,
		       struct db_err *e) SK_MUST_CHECK;

/* What the target says of itself: read at every full read, and on the hot path when the vouchers
 * below changed or the plan writes users. */
struct px_facts {
	struct px_names protected_users; /* the user names of admin-admin_credentials, admin-stats_credentials,
					    admin-cluster_username and mysql-monitor_username (memory and
					    runtime); sorted. The passwords are never kept. */
	struct px_families families; /* the rows of the four monitor hostgroup tables (runtime) */
	long cluster_peers; /* rows of runtime_proxysql_servers: > 0 when it is in a ProxySQL Cluster */
	long servers_diffs_before_sync, users_diffs_before_sync, peers_diffs_before_sync; /* > 0: pulled from peers */
};

int pxadmin_read_facts(struct pxadmin *a, const deadline_t *dl, struct px_facts *f, struct db_err *e) SK_MUST_CHECK;
/* Only the identity part: protected_users and the diffs_before_sync, memory's and runtime's (one
 * query); families and cluster_peers are left 0. */
int pxadmin_read_identity(struct pxadmin *a, const deadline_t *dl, struct px_facts *f, struct db_err *e) SK_MUST_CHECK;
void pxadmin_facts_free(struct px_facts *f);
/* The same facts, as far as the plan is concerned (all of them, or the identity part). Pure. */
bool pxadmin_facts_equal(const struct px_facts *a, const struct px_facts *b);
bool pxadmin_identity_equal(const struct px_facts *a, const struct px_facts *b);

/* The rows of runtime_checksums_values that vouch for the runtime half of the facts: each changes
 * with every LOAD of its module (a Cluster's pull included) and with nothing else.
 * - admin_vars: every admin- variable as it runs (the admin, stats and cluster credentials, the
 *   Cluster's diffs_before_sync);
 * - mysql_vars: every mysql- variable (mysql-monitor_username);
 * - servers_v2: mysql_servers and the monitor hostgroup tables as loaded (ProxySQL 2.6 and later);
 * - peers: proxysql_servers.
 * `present` has a bit per row read (an older ProxySQL lacks mysql_servers_v2): a missing row
 * vouches for nothing. Names staged in memory but not loaded are not covered: the hot path reads
 * the facts again before it writes users. */
struct px_vouchers {
	uint64_t admin_vars, mysql_vars, servers_v2, peers;
	unsigned present;
};

/* True when `now` vouches that the facts read with `then` still hold: every row present and
 * unchanged. Pure. */
bool pxadmin_vouched(const struct px_vouchers *then, const struct px_vouchers *now);

/* CHECKSUM MEMORY of mysql_servers, the layers PX_CK_* name, and the mysql_servers and mysql_users
 * rows of runtime_checksums_values (a layer not read is 0). Runtime's mysql_servers checksum
 * equals memory's right after a LOAD (until the monitor moves a server); the users' never does
 * (runtime hashes one row per role), so users are compared row by row (plan_drift_users), and
 * their runtime checksum only tells whether runtime changed since it was last read. */
struct px_checksums {
	uint64_t servers_memory, servers_disk, servers_runtime, users_memory, users_disk, users_runtime;
	struct px_vouchers v; /* from the same read of runtime_checksums_values */
};

enum {
	PX_CK_SERVERS_DISK = 1,
	PX_CK_USERS_MEMORY = 2,
	PX_CK_USERS_DISK = 4,
};

int pxadmin_checksums(struct pxadmin *a, const deadline_t *dl, unsigned layers, struct px_checksums *c,
		      struct db_err *e) SK_MUST_CHECK;

/* A CHECKSUM's text ("0x248FC739B0B507DA", "0x00") or a runtime_checksums_values checksum as a
 * number (0 when unreadable), the two made comparable. Pure. */
uint64_t pxadmin_checksum_value(const char *text);

/* What CHECKSUM MEMORY MYSQL USERS says of a mysql_users table holding `rows` (in any order), as
 * pxadmin_checksums gives it: ProxySQL hashes every column of `SELECT * FROM mysql_users ORDER BY
 * username` as SQLite's text (NULL and '' alike), and SQLite walks that order on the
 * UNIQUE (username, frontend) index. Only for a module with CHECKSUM commands (the MySQL side). */
uint64_t pxadmin_users_checksum(const struct px_user *const *rows, size_t n);
/* Only the vouchers (one query). */
int pxadmin_vouchers(struct pxadmin *a, const deadline_t *dl, struct px_vouchers *v, struct db_err *e) SK_MUST_CHECK;

/* ConnUsed per (hostgroup, host, port) from stats_mysql_connection_pool for the given servers;
 * conn_used[i] gets the value for servers[i] (0 when absent). */
int pxadmin_conn_used(struct pxadmin *a, const deadline_t *dl, const struct px_server *const *servers, size_t n,
		      long *conn_used, struct db_err *e) SK_MUST_CHECK;

/* Send the plan's statements, one per query, in order. On failure *done tells how many went
 * through; a LOAD is only ever reached after every statement before it succeeded, so a failed
 * apply leaves the runtime as it was. Once *stop is set no further statement is sent (the
 * apply is abandoned, -1 with "stopping"). */
int pxadmin_apply(struct pxadmin *a, const struct plan *p, const deadline_t *dl, const atomic_bool *stop, size_t *done,
		  struct db_err *e) SK_MUST_CHECK;

/* One statement that returns no rows (SET, LOAD, SAVE). */
int pxadmin_exec(struct pxadmin *a, const char *sql, const deadline_t *dl, struct db_err *e) SK_MUST_CHECK;

/* A cheap question that tells whether the connection and the admin still answer. */
int pxadmin_ping(struct pxadmin *a, const deadline_t *dl, struct db_err *e) SK_MUST_CHECK;

void pxadmin_close(struct pxadmin *a);

#endif
