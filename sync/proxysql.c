/* proxysql.c: reading and writing ProxySQL's admin tables, one statement per query. */
#include "proxysql.h"

#include <stdlib.h>
#include <string.h>

int pxadmin_connect(struct pxadmin *a, const struct pxadmin_target *t, const deadline_t *dl, struct db_err *e)
{
	struct db_target dt = {
		.host = t->host,
		.port = (unsigned)t->port,
		.user = t->user,
		.password = t->password,
		.what = t->name,
	};

	a->t = t;
	if (a->db.connected)
		return 0;
	db_close(&a->db);
	return db_connect(&a->db, &dt, dl, e);
}

static long col_long(const char *v, long def)
{
	long n;

	return v && sk_parse_long(v, -2147483648L, 2147483647L, &n) ? n : def;
}

int pxadmin_read(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, struct px_users *users,
		 struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	memset(servers, 0, sizeof(*servers));
	if (users)
		memset(users, 0, sizeof(*users));
	if (db_query(&a->db,
		     "SELECT hostgroup_id, hostname, port, status, weight, compression, max_connections, "
		     "max_replication_lag, use_ssl, max_latency_ms, comment FROM main.mysql_servers",
		     dl, &res, e) < 0)
		return -1;
	while (res && (row = mysql_fetch_row(res)) != NULL) {
		struct px_server s;

		px_server_defaults(&s);
		s.hostgroup = col_long(row[0], 0);
		s.host = row[1] ? row[1] : "";
		s.port = col_long(row[2], 3306);
		sk_strlcpy(s.status, row[3] ? row[3] : "", sizeof(s.status));
		s.weight = col_long(row[4], 1);
		s.compression = col_long(row[5], 0);
		s.max_connections = col_long(row[6], 1000);
		s.max_replication_lag = col_long(row[7], 0);
		s.use_ssl = col_long(row[8], 0);
		s.max_latency_ms = col_long(row[9], 0);
		s.comment = row[10] ? row[10] : "";
		px_servers_add(servers, &s);
	}
	if (res)
		mysql_free_result(res);
	px_servers_sort(servers);
	if (!users)
		return 0;
	if (db_query(&a->db,
		     "SELECT username, password, active, use_ssl, default_hostgroup, default_schema, schema_locked, "
		     "transaction_persistent, fast_forward, backend, frontend, max_connections, comment "
		     "FROM main.mysql_users",
		     dl, &res, e) < 0) {
		px_servers_free(servers);
		return -1;
	}
	while (res && (row = mysql_fetch_row(res)) != NULL) {
		struct px_user u;

		px_user_defaults(&u);
		u.username = row[0] ? row[0] : "";
		u.password = row[1] ? row[1] : "";
		u.active = col_long(row[2], 1);
		u.use_ssl = col_long(row[3], 0);
		u.default_hostgroup = col_long(row[4], 0);
		u.default_schema = row[5];
		u.schema_locked = col_long(row[6], 0);
		u.transaction_persistent = col_long(row[7], 1);
		u.fast_forward = col_long(row[8], 0);
		u.backend = col_long(row[9], 1);
		u.frontend = col_long(row[10], 1);
		u.max_connections = col_long(row[11], 10000);
		u.comment = row[12] ? row[12] : "";
		px_users_add(users, &u);
	}
	if (res)
		mysql_free_result(res);
	px_users_sort(users);
	return 0;
}

int pxadmin_conn_used(struct pxadmin *a, const deadline_t *dl, const struct px_server *const *servers, size_t n,
		      long *conn_used, struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	for (size_t i = 0; i < n; i++)
		conn_used[i] = 0;
	if (n == 0)
		return 0;
	if (db_query(&a->db, "SELECT hostgroup, srv_host, srv_port, ConnUsed FROM stats.stats_mysql_connection_pool",
		     dl, &res, e) < 0)
		return -1;
	while (res && (row = mysql_fetch_row(res)) != NULL) {
		long hg = col_long(row[0], -1), port = col_long(row[2], 0), used = col_long(row[3], 0);

		for (size_t i = 0; i < n; i++)
			if (servers[i]->hostgroup == hg && servers[i]->port == port && row[1] &&
			    strcmp(servers[i]->host, row[1]) == 0)
				conn_used[i] += used;
	}
	if (res)
		mysql_free_result(res);
	return 0;
}

int pxadmin_apply(struct pxadmin *a, const struct plan *p, const deadline_t *dl, const atomic_bool *stop, size_t *done,
		  struct db_err *e)
{
	*done = 0;
	for (size_t i = 0; i < p->n; i++) {
		if (stop && *stop) {
			memset(e, 0, sizeof(*e));
			e->reason = DB_CLIENT_ERROR;
			sk_fmt(e->msg, sizeof(e->msg), "stopping");
			return -1;
		}
		if (db_exec(&a->db, p->steps[i].sql, dl, e) < 0)
			return -1;
		(*done)++;
	}
	return 0;
}

int pxadmin_ping(struct pxadmin *a, const deadline_t *dl, struct db_err *e)
{
	return db_exec(&a->db, "SELECT 1", dl, e);
}

void pxadmin_close(struct pxadmin *a)
{
	db_close(&a->db);
}
