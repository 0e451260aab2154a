/* model.h: the mysql_servers and mysql_users rows the agent manages, their validation and SQL quoting. */
#ifndef SK_MODEL_H
#define SK_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define MODEL_HOST_MAX 255
#define MODEL_USER_MAX 80
#define MODEL_PASSWORD_MAX 256
#define MODEL_SCHEMA_MAX 64
#define MODEL_COMMENT_MAX 255

/* One mysql_servers row (gtid_port is left to ProxySQL's default and never touched). */
struct px_server {
	long hostgroup;
	char *host;
	long port;
	char status[16]; /* ONLINE, OFFLINE_SOFT (draining), ... as stored */
	long weight, compression, max_connections, max_replication_lag, use_ssl, max_latency_ms;
	char *comment;
};

/* One mysql_users row (the agent writes frontend and backend in one row per user). */
struct px_user {
	char *username;
	char *password; /* may be "" */
	long active, use_ssl, default_hostgroup, schema_locked, transaction_persistent, fast_forward, backend, frontend,
		max_connections;
	char *default_schema; /* NULL: SQL NULL */
	char *attributes; /* NULL: '' (the agent writes none; others' rows keep theirs) */
	char *comment;
};

struct px_servers {
	size_t n, cap;
	struct px_server *v;
};

struct px_users {
	size_t n, cap;
	struct px_user *v;
};

/* Make room for element `n` of an array `v` of `size`-byte elements that only ever grows one at a
 * time (or shrinks in place): reallocates when n is 0 or a power of two from 8 on, to twice that,
 * so n appends cost O(n) in all. Returns the (maybe moved) array; aborts when memory runs out. */
void *model_grow(void *v, size_t n, size_t size);

/* ProxySQL's column defaults (sync.md: the 2.7 DDL). */
void model_server_defaults(struct px_server *s);
void model_user_defaults(struct px_user *u);

/* Append a copy (strings duplicated) and return the new element. */
struct px_server *model_servers_add(struct px_servers *a, const struct px_server *s);
struct px_user *model_users_add(struct px_users *a, const struct px_user *u);

/* Sort by (hostgroup, host, port) / username, so plans and output are deterministic. */
void model_servers_sort(struct px_servers *a);
void model_users_sort(struct px_users *a);

/* Find by primary key, or NULL. Arrays must be sorted. */
struct px_server *model_servers_find(const struct px_servers *a, long hostgroup, const char *host, long port);
struct px_user *model_users_find(const struct px_users *a, const char *username);

void model_servers_free(struct px_servers *a);
/* One user's strings (the password wiped first); a row whose username is NULL holds none. */
void model_user_free(struct px_user *u);
void model_users_free(struct px_users *a);
void model_servers_copy(struct px_servers *dst, const struct px_servers *src);
void model_users_copy(struct px_users *dst, const struct px_users *src);

/* True when every column the agent manages is equal (status included, in any case). A user's
 * default_schema NULL equals '' (what a ProxySQL Cluster pull stores for NULL; docs/proxysql-sync.md). */
bool model_server_same(const struct px_server *a, const struct px_server *b);
bool model_user_same(const struct px_user *a, const struct px_user *b);

/* Validation of values from Consul before they reach SQL. Each returns NULL when valid, else a
 * static reason ("has characters other than A-Z a-z 0-9 . - _", "longer than 255 bytes"...). */
const char *model_check_host(const char *host);
const char *model_check_username(const char *user);
const char *model_check_password(const char *pw);
const char *model_check_text(const char *s, size_t max); /* schema, comment: printable UTF-8, no NUL */
/* A PostgreSQL SCRAM secret as pg_authid keeps it: SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:
 * <ServerKey>, the salt and both keys canonical base64, each key 32 bytes. */
bool model_scram_secret_ok(const char *s);

/* Append `s` to `b` as a single-quoted SQL literal for ProxySQL's admin (which runs with
 * NO_BACKSLASH_ESCAPES: a quote is doubled, a backslash is literal). */
bool model_sql_quote(sk_buf *b, const char *s) SK_MUST_CHECK;

/* Split "host:port", "[v6]:port" or "host" (port = default_port). Returns NULL or a reason. */
const char *model_split_address(const char *addr, long default_port, char *host, size_t hostlen, long *port);

/* One proxysql_servers row: a member of this ProxySQL's ProxySQL Cluster. */
struct px_peer {
	char *host;
	long port, weight;
	char *comment;
};

struct px_peers {
	size_t n;
	struct px_peer *v;
};

void model_peers_add(struct px_peers *a, const char *host, long port, long weight, const char *comment);
void model_peers_sort(struct px_peers *a); /* by host, port; duplicates dropped (the first stands) */
const struct px_peer *model_peers_find(const struct px_peers *a, const char *host, long port);
void model_peers_copy(struct px_peers *dst, const struct px_peers *src);
void model_peers_free(struct px_peers *a);

/* A server key the agent must leave as the target has it (a KV key whose value was rejected):
 * host NULL means every server of the hostgroup. */
struct px_keep {
	long hostgroup;
	char *host;
	long port;
};

struct px_keeps {
	size_t n;
	struct px_keep *v;
};

/* A sorted list of names (users to keep, names the admin logs in with). */
struct px_names {
	size_t n;
	char **v;
};

/* One row of a monitor hostgroup table (mysql_replication_hostgroups, mysql_galera_hostgroups,
 * mysql_group_replication_hostgroups, mysql_aws_aurora_hostgroups): the monitor moves servers
 * between these hostgroups in runtime. hg[0] is the writer hostgroup. */
struct px_family {
	char table[40];
	long hg[4];
	size_t n;
};

struct px_families {
	size_t n;
	struct px_family *v;
};

void model_keeps_add(struct px_keeps *k, long hostgroup, const char *host, long port);
void model_keeps_free(struct px_keeps *k);
void model_keeps_copy(struct px_keeps *dst, const struct px_keeps *src);
/* Add a copy of `name`; model_names_sort before model_names_has. */
void model_names_add(struct px_names *l, const char *name);
void model_names_sort(struct px_names *l);
bool model_names_has(const struct px_names *l, const char *name);
void model_names_free(struct px_names *l);
void model_names_copy(struct px_names *dst, const struct px_names *src);
/* The family (monitor row) that names hostgroup `hg`, or NULL. */
const struct px_family *model_family_of(const struct px_families *f, long hg);

#endif
