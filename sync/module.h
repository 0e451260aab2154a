/* module.h: which side of ProxySQL a reconcile writes: the MySQL tables (mysql_servers,
 * mysql_users, LOAD MYSQL ...) or, on ProxySQL 3, the PostgreSQL ones (pgsql_servers, pgsql_users,
 * LOAD PGSQL ...). The two sides share the admin interface, the plan and the guards; what differs
 * is named here (module.c), so the code that reads and writes the tables says each name once. */
#ifndef SK_SYNC_MODULE_H
#define SK_SYNC_MODULE_H

#include <stdbool.h>

struct px_module {
	const char *name; /* "mysql", "pgsql": the tables' prefix, in logs and /metrics */
	const char *cmd; /* "MYSQL", "PGSQL": LOAD ... TO RUNTIME, SAVE ... TO DISK */
	const char *tables[2]; /* the servers and the users table (TABLE_SERVERS, TABLE_USERS) */
	long default_port; /* a server row's port when none is given */
	/* The users table has default_schema and schema_locked (pgsql_users has neither). */
	bool schema;
	/* CHECKSUM MEMORY|DISK <cmd> SERVERS|USERS exist (not for PGSQL on ProxySQL 3.0): without
	 * them the agent hashes the rows of main and disk itself (pxadmin_checksums). */
	bool checksum_cmds;
	/* The hot path (known.c) may plan from kept rows: it leans on the checksum commands. */
	bool hot_path;
	const char *monitor_user; /* the monitor's login variable: a user of that name is protected */
	const char *variables; /* the runtime_checksums_values row of the module's variables */
	const char *servers_v2; /* the row that covers the servers and the monitor rows as loaded */
	/* The monitor hostgroup tables' rows (writer first) and the Cluster's size, in one query. */
	const char *families_sql;
};

extern const struct px_module px_mysql, px_pgsql;

#endif
