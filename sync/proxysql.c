/* proxysql.c: reading and writing ProxySQL's admin tables, one statement per query. */
#include "proxysql.h"

#include <stdlib.h>
#include <string.h>

#include "spooky.h"

int pxadmin_connect(struct pxadmin *a, const struct pxadmin_target *t, const deadline_t *dl, struct db_err *e)
{
	struct db_target dt = {
		.host = t->host,
		.port = (unsigned)t->port,
		.port_explicit = t->port_explicit,
		.user = t->user,
		.password = t->password,
		.tls = t->tls,
		.tls_ca = t->tls_ca,
		.tls_cert = t->tls_cert,
		.tls_key = t->tls_key,
		.tls_verify = t->tls_verify,
		.what = t->name,
	};

	a->t = t;
	if (a->db.connected)
		return 0;
	db_close(&a->db);
	return db_connect(&a->db, &dt, dl, e);
}

static const struct px_module *mod(const struct pxadmin *a)
{
	return a->m ? a->m : &px_mysql;
}

static long col_long(const char *v, long def)
{
	long n;

	return v && sk_parse_long(v, -2147483648L, 2147483647L, &n) ? n : def;
}

struct user_sink {
	px_user_fn *fn;
	void *ctx;
};

static void server_row(void *ctx, MYSQL_ROW row, unsigned ncols)
{
	struct px_server s;

	if (ncols < 11)
		return;
	model_server_defaults(&s);
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
	model_servers_add(ctx, &s);
}

/* A users row as read_layer selects it: pgsql_users has no default_schema and schema_locked, which
 * the query then selects as NULL and 0, so that both sides read the same 14 columns. */
static void user_row(void *ctx, MYSQL_ROW row, unsigned ncols)
{
	const struct user_sink *sink = ctx;
	struct px_user u;

	if (ncols < 14)
		return;
	model_user_defaults(&u);
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
	u.attributes = row[12];
	u.comment = row[13] ? row[13] : "";
	sink->fn(sink->ctx, &u);
	if (row[1])
		sk_wipe(row[1], strlen(row[1])); /* used; the library's buffer is freed unwiped */
}

static void add_user(void *ctx, const struct px_user *u)
{
	model_users_add(ctx, u);
}

/* The columns read of a servers and a users table, in server_row's and user_row's order. */
#define SERVER_COLUMNS                                                                                               \
	"hostgroup_id, hostname, port, status, weight, compression, max_connections, max_replication_lag, use_ssl, " \
	"max_latency_ms, comment"

static const char *user_columns(const struct px_module *m)
{
	return m->schema
		       ? "username, password, active, use_ssl, default_hostgroup, default_schema, schema_locked, "
			 "transaction_persistent, fast_forward, backend, frontend, max_connections, attributes, comment"
		       : "username, password, active, use_ssl, default_hostgroup, NULL, 0, transaction_persistent, "
			 "fast_forward, backend, frontend, max_connections, attributes, comment";
}

/* Read the servers and users tables of one layer ("main.", "runtime_" or "disk.") row by row:
 * servers into `servers` (sorted), each user row to `sink` (NULL: not read). */
static int read_layer(struct pxadmin *a, const char *layer, const deadline_t *dl, struct px_servers *servers,
		      const struct user_sink *sink, struct db_err *e)
{
	const struct px_module *m = mod(a);
	char sql[400];

	if (servers) {
		memset(servers, 0, sizeof(*servers));
		sk_fmt(sql, sizeof(sql), "SELECT " SERVER_COLUMNS " FROM %s%s_servers", layer, m->name);
		if (db_query_each(&a->db, sql, dl, server_row, servers, e) < 0) {
			model_servers_free(servers);
			return -1;
		}
		model_servers_sort(servers);
	}
	if (!sink)
		return 0;
	sk_fmt(sql, sizeof(sql), "SELECT %s FROM %s%s_users", user_columns(m), layer, m->name);
	if (db_query_each(&a->db, sql, dl, user_row, (void *)sink, e) < 0) {
		if (servers)
			model_servers_free(servers);
		return -1;
	}
	return 0;
}

int pxadmin_read(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, struct px_users *users,
		 struct db_err *e)
{
	struct user_sink sink = { add_user, users };

	if (users)
		memset(users, 0, sizeof(*users));
	if (read_layer(a, "main.", dl, servers, users ? &sink : NULL, e) < 0) {
		if (users)
			model_users_free(users);
		return -1;
	}
	if (users)
		model_users_sort(users);
	return 0;
}

int pxadmin_read_runtime(struct pxadmin *a, const deadline_t *dl, struct px_servers *servers, px_user_fn *users,
			 void *ctx, struct db_err *e)
{
	struct user_sink sink = { users, ctx };

	return read_layer(a, "runtime_", dl, servers, users ? &sink : NULL, e);
}

int pxadmin_peer_epoch(struct pxadmin *a, const deadline_t *dl, long long *epoch, struct db_err *e)
{
	const char *m = mod(a)->name;
	MYSQL_RES *res;
	MYSQL_ROW row;
	char sql[300];
	long n;

	*epoch = 0;
	sk_fmt(sql, sizeof(sql),
	       "SELECT MAX(epoch) FROM stats.stats_proxysql_servers_checksums WHERE name IN ('%s_servers', "
	       "'%s_servers_v2', '%s_users')",
	       m, m, m);
	if (db_query(&a->db, sql, dl, &res, e) < 0)
		return -1;
	if (res && (row = mysql_fetch_row(res)) != NULL && row[0] && sk_parse_long(row[0], 0, 4102444800L, &n))
		*epoch = n;
	if (res)
		mysql_free_result(res);
	return 0;
}

int pxadmin_read_peers(struct pxadmin *a, bool runtime, const deadline_t *dl, struct px_peers *out, struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	memset(out, 0, sizeof(*out));
	if (db_query(&a->db,
		     runtime ? "SELECT hostname, port, weight, comment FROM runtime_proxysql_servers"
			     : "SELECT hostname, port, weight, comment FROM main.proxysql_servers",
		     dl, &res, e) < 0)
		return -1;
	while (res && (row = mysql_fetch_row(res)) != NULL)
		model_peers_add(out, row[0] ? row[0] : "", col_long(row[1], 6032), col_long(row[2], 0),
				row[3] ? row[3] : "");
	if (res)
		mysql_free_result(res);
	model_peers_sort(out);
	return 0;
}

/* "0x248FC739B0B507DA" (or "0x00" for an empty table) as a number; 0 when unreadable. CHECKSUM
 * prints the two 32-bit halves without zero padding, runtime_checksums_values pads that text on
 * the right with '0' to 16 digits: padded here too, so that the two compare. */
uint64_t pxadmin_checksum_value(const char *v)
{
	uint64_t n = 0;
	size_t digits;

	if (!v || (strncmp(v, "0x", 2) != 0 && strncmp(v, "0X", 2) != 0))
		return 0;
	digits = strlen(v + 2);
	for (v += 2; *v; v++) {
		int d = *v >= '0' && *v <= '9'   ? *v - '0'
			: *v >= 'a' && *v <= 'f' ? *v - 'a' + 10
			: *v >= 'A' && *v <= 'F' ? *v - 'A' + 10
						 : -1;

		if (d < 0)
			return 0;
		n = n << 4 | (uint64_t)d;
	}
	return digits == 0 ? 0 : digits < 16 ? n << (4 * (16 - digits)) : n;
}

/* The second column of the first row of `sql` as a checksum. */
static int one_checksum(struct pxadmin *a, const char *sql, const deadline_t *dl, uint64_t *out, struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	*out = 0;
	if (db_query(&a->db, sql, dl, &res, e) < 0)
		return -1;
	if (res && (row = mysql_fetch_row(res)) != NULL && mysql_num_fields(res) >= 2)
		*out = pxadmin_checksum_value(row[1]);
	if (res)
		mysql_free_result(res);
	return 0;
}

/* The rows of runtime_checksums_values the agent reads: runtime's servers and users of the module,
 * and the vouchers. */
static int runtime_checksums(struct pxadmin *a, const deadline_t *dl, struct px_checksums *c, struct db_err *e)
{
	const struct px_module *m = mod(a);
	char servers[24], users[24], sql[400];
	const char *const names[] = {
		servers, users, "admin_variables", m->variables, m->servers_v2, "proxysql_servers"
	};
	uint64_t *const slots[] = { &c->servers_runtime, &c->users_runtime, &c->v.admin_vars,
				    &c->v.mysql_vars,    &c->v.servers_v2,  &c->v.peers };
	MYSQL_RES *res;
	MYSQL_ROW row;

	sk_fmt(servers, sizeof(servers), "%s_servers", m->name);
	sk_fmt(users, sizeof(users), "%s_users", m->name);
	sk_fmt(sql, sizeof(sql),
	       "SELECT name, checksum FROM runtime_checksums_values WHERE name IN ('%s', '%s', 'admin_variables', "
	       "'%s', '%s', 'proxysql_servers')",
	       servers, users, m->variables, m->servers_v2);
	if (db_query(&a->db, sql, dl, &res, e) < 0)
		return -1;
	while (res && (row = mysql_fetch_row(res)) != NULL)
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (row[0] && strcmp(row[0], names[i]) == 0) {
				*slots[i] = pxadmin_checksum_value(row[1]);
				c->v.present |= i >= 2 ? 1u << (i - 2) : 0;
			}
	if (res)
		mysql_free_result(res);
	return 0;
}

/* A checksum of one table of one layer ("main." or "disk.") made by the agent, for a module
 * without CHECKSUM commands: every column of every row, in primary-key order, hashed (sk_hash, a
 * NULL apart from ''). Equal contents give equal values (never those of a CHECKSUM command:
 * compare like with like). */
struct table_sum {
	sk_hash h;
	size_t rows;
};

static void hash_row(void *ctx, MYSQL_ROW row, unsigned ncols)
{
	struct table_sum *t = ctx;

	for (unsigned i = 0; i < ncols; i++) {
		sk_hash_long(&t->h, row[i] != NULL);
		sk_hash_str(&t->h, row[i] ? row[i] : "");
		if (row[i])
			sk_wipe(row[i], strlen(row[i])); /* a users table's password among them */
	}
	t->rows++;
}

static int table_hash(struct pxadmin *a, const char *layer, bool users, const deadline_t *dl, uint64_t *out,
		      struct db_err *e)
{
	const struct px_module *m = mod(a);
	struct table_sum t = { { 0xcbf29ce484222325ULL, 0x452821e638d01377ULL }, 0 };
	char sql[400];

	if (users)
		sk_fmt(sql, sizeof(sql), "SELECT %s FROM %s%s_users ORDER BY username, backend, frontend",
		       user_columns(m), layer, m->name);
	else
		sk_fmt(sql, sizeof(sql),
		       "SELECT " SERVER_COLUMNS " FROM %s%s_servers ORDER BY hostgroup_id, hostname, port", layer,
		       m->name);
	if (db_query_each(&a->db, sql, dl, hash_row, &t, e) < 0)
		return -1;
	*out = t.rows ? (t.h.a ^ t.h.b) | 1 : 0; /* 0 for an empty table, as ProxySQL's own */
	return 0;
}

/* Memory's or disk's checksum of the servers or users table: ProxySQL's CHECKSUM command, or the
 * agent's own hash where the module has none. */
static int layer_checksum(struct pxadmin *a, bool disk, bool users, const deadline_t *dl, uint64_t *out,
			  struct db_err *e)
{
	const struct px_module *m = mod(a);
	char sql[80];

	if (!m->checksum_cmds)
		return table_hash(a, disk ? "disk." : "main.", users, dl, out, e);
	sk_fmt(sql, sizeof(sql), "CHECKSUM %s %s %s", disk ? "DISK" : "MEMORY", m->cmd, users ? "USERS" : "SERVERS");
	return one_checksum(a, sql, dl, out, e);
}

int pxadmin_checksums(struct pxadmin *a, const deadline_t *dl, unsigned layers, struct px_checksums *c,
		      struct db_err *e)
{
	memset(c, 0, sizeof(*c));
	if (layer_checksum(a, false, false, dl, &c->servers_memory, e) < 0 ||
	    ((layers & PX_CK_SERVERS_DISK) && layer_checksum(a, true, false, dl, &c->servers_disk, e) < 0) ||
	    ((layers & PX_CK_USERS_MEMORY) && layer_checksum(a, false, true, dl, &c->users_memory, e) < 0) ||
	    ((layers & PX_CK_USERS_DISK) && layer_checksum(a, true, true, dl, &c->users_disk, e) < 0))
		return -1;
	return runtime_checksums(a, dl, c, e);
}

/* SQLite's order for the CHECKSUM's ORDER BY username: by name (bytes), then by frontend. */
static int checksum_order(const void *x, const void *y)
{
	const struct px_user *a = *(const struct px_user *const *)x, *b = *(const struct px_user *const *)y;
	int c = strcmp(a->username, b->username);

	return c ? c : (a->frontend > b->frontend) - (a->frontend < b->frontend);
}

static void hash_text(sk_spooky *s, const char *v)
{
	if (v)
		sk_spooky_update(s, v, strlen(v));
}

/* As SQLite prints an integer column ("%lld"), without a call to the printf family: 50,000 users
 * are 450,000 numbers. */
static void hash_number(sk_spooky *s, long v)
{
	char text[24], *p = text + sizeof(text);
	unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	sk_spooky_update(s, p, (size_t)(text + sizeof(text) - p));
}

static void hash_user(sk_spooky *s, const struct px_user *u)
{
	const long flags[] = { u->schema_locked, u->transaction_persistent, u->fast_forward, u->backend,
			       u->frontend,      u->max_connections };

	hash_text(s, u->username);
	hash_text(s, u->password);
	hash_number(s, u->active);
	hash_number(s, u->use_ssl);
	hash_number(s, u->default_hostgroup);
	hash_text(s, u->default_schema);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		hash_number(s, flags[i]);
	hash_text(s, u->attributes);
	hash_text(s, u->comment);
}

uint64_t pxadmin_users_checksum(const struct px_user *const *rows, size_t n)
{
	const struct px_user **sorted = NULL;
	sk_spooky s;
	uint64_t h1, h2;
	char text[24];
	size_t i = 1;

	if (n == 0)
		return 0; /* "0x00" */
	while (i < n && checksum_order(&rows[i - 1], &rows[i]) <= 0)
		i++;
	if (i < n) { /* not in order already (the agent's rows are by name; a name's two rows may not be) */
		sorted = xcalloc(n, sizeof(*sorted));
		memcpy(sorted, rows, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), checksum_order);
		rows = sorted;
	}
	sk_spooky_init(&s, 19, 3);
	for (i = 0; i < n; i++)
		hash_user(&s, rows[i]);
	free(sorted);
	sk_spooky_final(&s, &h1, &h2);
	/* The CHECKSUM's own text (the low half first, neither padded), read as the answer is. */
	sk_fmt(text, sizeof(text), "0x%X%X", (unsigned)(h1 & 0xffffffffu), (unsigned)(h1 >> 32));
	return pxadmin_checksum_value(text);
}

int pxadmin_vouchers(struct pxadmin *a, const deadline_t *dl, struct px_vouchers *v, struct db_err *e)
{
	struct px_checksums c = { 0 };

	if (runtime_checksums(a, dl, &c, e) < 0)
		return -1;
	*v = c.v;
	return 0;
}

bool pxadmin_vouched(const struct px_vouchers *then, const struct px_vouchers *now)
{
	return then->present == 0xf && now->present == 0xf && then->admin_vars == now->admin_vars &&
	       then->mysql_vars == now->mysql_vars && then->servers_v2 == now->servers_v2 && then->peers == now->peers;
}

/* The user names of an admin or stats credentials list: "user:password;user2:password2". */
static void credential_users(const char *v, struct px_names *out)
{
	while (v && *v) {
		const char *end = strchr(v, ';'), *colon;
		size_t len = end ? (size_t)(end - v) : strlen(v);
		char name[MODEL_USER_MAX + 1];

		colon = memchr(v, ':', len);
		if (colon)
			len = (size_t)(colon - v);
		if (len > 0 && len < sizeof(name)) {
			memcpy(name, v, len);
			name[len] = '\0';
			model_names_add(out, name);
		}
		v = end ? end + 1 : NULL;
	}
}

/* The identity variables (memory and runtime: a name either layer has is protected) and the
 * cluster's pull settings as they run, in one query. */
int pxadmin_read_identity(struct pxadmin *a, const deadline_t *dl, struct px_facts *f, struct db_err *e)
{
	const struct px_module *m = mod(a);
	char names[400], servers_diffs[64], users_diffs[64];
	MYSQL_RES *res;
	MYSQL_ROW row;
	char sql[1000];

	memset(f, 0, sizeof(*f));
	sk_fmt(servers_diffs, sizeof(servers_diffs), "admin-cluster_%s_servers_diffs_before_sync", m->name);
	sk_fmt(users_diffs, sizeof(users_diffs), "admin-cluster_%s_users_diffs_before_sync", m->name);
	sk_fmt(names, sizeof(names),
	       "variable_name IN ('admin-admin_credentials', 'admin-stats_credentials', 'admin-cluster_username', "
	       "'%s', '%s', '%s', 'admin-cluster_proxysql_servers_diffs_before_sync')",
	       m->monitor_user, servers_diffs, users_diffs);
	sk_fmt(sql, sizeof(sql),
	       "SELECT 0, variable_name, variable_value FROM global_variables WHERE %s UNION ALL "
	       "SELECT 1, variable_name, variable_value FROM runtime_global_variables WHERE %s",
	       names, names);
	if (db_query(&a->db, sql, dl, &res, e) < 0)
		return -1;
	while (res && (row = mysql_fetch_row(res)) != NULL) {
		const char *name = row[1] ? row[1] : "", *v = row[2] ? row[2] : "";
		bool runtime = row[0] && strcmp(row[0], "1") == 0;
		long n;

		if (strcmp(name, "admin-admin_credentials") == 0 || strcmp(name, "admin-stats_credentials") == 0)
			credential_users(v, &f->protected_users);
		else if ((strcmp(name, "admin-cluster_username") == 0 || strcmp(name, m->monitor_user) == 0) && *v)
			model_names_add(&f->protected_users, v);
		else if (runtime && strcmp(name, servers_diffs) == 0 && sk_parse_long(v, 0, 2147483647L, &n))
			f->servers_diffs_before_sync = n;
		else if (runtime && strcmp(name, users_diffs) == 0 && sk_parse_long(v, 0, 2147483647L, &n))
			f->users_diffs_before_sync = n;
		else if (runtime && strcmp(name, "admin-cluster_proxysql_servers_diffs_before_sync") == 0 &&
			 sk_parse_long(v, 0, 2147483647L, &n))
			f->peers_diffs_before_sync = n;
		if (row[2])
			sk_wipe(row[2], strlen(row[2])); /* credentials: passwords, never kept */
	}
	if (res)
		mysql_free_result(res);
	model_names_sort(&f->protected_users);
	return 0;
}

int pxadmin_read_facts(struct pxadmin *a, const deadline_t *dl, struct px_facts *f, struct db_err *e)
{
	/* The rows of the monitor hostgroup tables (writer first) and the cluster's size, in one
	 * query: each runtime table it names is regenerated for it. */
	const char *monitors = mod(a)->families_sql;
	MYSQL_RES *res;
	MYSQL_ROW row;

	if (pxadmin_read_identity(a, dl, f, e) < 0 || db_query(&a->db, monitors, dl, &res, e) < 0)
		goto fail;
	while (res && (row = mysql_fetch_row(res)) != NULL) {
		struct px_family *fam;

		if (!row[0] || !*row[0]) {
			f->cluster_peers = col_long(row[1], 0);
			continue;
		}
		f->families.v = xrealloc(f->families.v, (f->families.n + 1) * sizeof(*f->families.v));
		fam = &f->families.v[f->families.n++];
		memset(fam, 0, sizeof(*fam));
		sk_strlcpy(fam->table, row[0], sizeof(fam->table));
		for (size_t k = 1; k <= 4; k++)
			if (col_long(row[k], -1) >= 0)
				fam->hg[fam->n++] = col_long(row[k], -1);
	}
	if (res)
		mysql_free_result(res);
	return 0;
fail:
	pxadmin_facts_free(f);
	return -1;
}

void pxadmin_facts_free(struct px_facts *f)
{
	model_names_free(&f->protected_users);
	free(f->families.v);
	memset(f, 0, sizeof(*f));
}

bool pxadmin_identity_equal(const struct px_facts *a, const struct px_facts *b)
{
	if (a->protected_users.n != b->protected_users.n ||
	    a->servers_diffs_before_sync != b->servers_diffs_before_sync ||
	    a->users_diffs_before_sync != b->users_diffs_before_sync ||
	    a->peers_diffs_before_sync != b->peers_diffs_before_sync)
		return false;
	for (size_t i = 0; i < a->protected_users.n; i++)
		if (strcmp(a->protected_users.v[i], b->protected_users.v[i]) != 0)
			return false;
	return true;
}

bool pxadmin_facts_equal(const struct px_facts *a, const struct px_facts *b)
{
	if (!pxadmin_identity_equal(a, b) || a->families.n != b->families.n || a->cluster_peers != b->cluster_peers)
		return false;
	for (size_t i = 0; i < a->families.n; i++) {
		const struct px_family *x = &a->families.v[i], *y = &b->families.v[i];

		if (strcmp(x->table, y->table) != 0 || x->n != y->n ||
		    memcmp(x->hg, y->hg, x->n * sizeof(x->hg[0])) != 0)
			return false;
	}
	return true;
}

int pxadmin_conn_used(struct pxadmin *a, const deadline_t *dl, const struct px_server *const *servers, size_t n,
		      long *conn_used, struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;
	char sql[120];

	for (size_t i = 0; i < n; i++)
		conn_used[i] = 0;
	if (n == 0)
		return 0;
	sk_fmt(sql, sizeof(sql), "SELECT hostgroup, srv_host, srv_port, ConnUsed FROM stats.stats_%s_connection_pool",
	       mod(a)->name);
	if (db_query(&a->db, sql, dl, &res, e) < 0)
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

int pxadmin_exec(struct pxadmin *a, const char *sql, const deadline_t *dl, struct db_err *e)
{
	return db_exec(&a->db, sql, dl, e);
}

int pxadmin_ping(struct pxadmin *a, const deadline_t *dl, struct db_err *e)
{
	return db_exec(&a->db, "SELECT 1", dl, e);
}

void pxadmin_close(struct pxadmin *a)
{
	db_close(&a->db);
}
