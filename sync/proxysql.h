/* proxysql.h: the admin-interface adapter: read main.* tables and pool stats, apply a plan. */
#ifndef SK_PROXYSQL_H
#define SK_PROXYSQL_H

#include <stdatomic.h>
#include <stdbool.h>

#include "db.h"
#include "model.h"
#include "plan.h"

struct pxadmin_target {
	const char *name;
	const char *host;
	long port;
	const char *user;
	const char *password;
};

struct pxadmin {
	struct db db;
	const struct pxadmin_target *t;
};

/* Connect (when not connected) within the deadline. */
int pxadmin_connect(struct pxadmin *a, const struct pxadmin_target *t, const deadline_t *dl,
		    struct db_err *e) SK_MUST_CHECK;

/* Read main.mysql_servers and main.mysql_users (never runtime_*, which the monitor rewrites);
 * sorted. `users` may be NULL when users are not managed. */
int pxadmin_read(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, struct px_users *users,
		 struct db_err *e) SK_MUST_CHECK;

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

/* A cheap question that tells whether the connection and the admin still answer. */
int pxadmin_ping(struct pxadmin *a, const deadline_t *dl, struct db_err *e) SK_MUST_CHECK;

void pxadmin_close(struct pxadmin *a);

#endif
