/* db.h: a MySQL/MariaDB connection (MariaDB Connector/C) where every step honours one deadline. */
#ifndef SK_DB_H
#define SK_DB_H

#include <mysql.h>
#include <stdbool.h>

#include "deadline.h"
#include "statusmap.h"
#include "util.h"

/* Why a connection or query failed; the reasons a probe must tell apart. */
enum db_reason {
	DB_OK,
	DB_TIMEOUT, /* the deadline passed (connect, DNS, TLS, auth or query) */
	DB_REFUSED, /* TCP connection refused or socket missing */
	DB_UNKNOWN_HOST, /* name resolution failed */
	DB_ACCESS_DENIED, /* bad user or password, or no rights */
	DB_LOST, /* the server closed the connection */
	DB_PROTOCOL, /* malformed packets, handshake errors, TLS errors */
	DB_SERVER_ERROR, /* the server answered a query with an error */
	DB_CLIENT_ERROR, /* anything else on the client side */
	DB_AUTH_REFUSED, /* the server asked for an authentication method that would reveal the password */
};

const char *db_reason_str(enum db_reason r);

struct db_err {
	enum db_reason reason;
	unsigned code; /* server or client error number, 0 for our own timeouts */
	char sqlstate[6]; /* the server's SQLSTATE ("28000": access denied), "" for our own timeouts */
	char msg[256]; /* one line, never contains the password */
};

struct db_target {
	const char *host; /* name or address; NULL or "" with socket: unix socket */
	unsigned port; /* 0: 3306 */
	bool port_explicit; /* the address named its port (--port, "localhost:6032"): "localhost" is TCP */
	const char *socket; /* unix socket path, or NULL */
	const char *user;
	const char *password; /* may be NULL or "" */
	bool tls; /* require TLS */
	const char *tls_ca, *tls_cert, *tls_key;
	bool tls_verify; /* verify the server certificate and name */
	const char *what; /* short name for messages, e.g. "127.0.0.1:3306" (optional) */
};

struct db {
	MYSQL *m;
	bool connected;
};

/* Prepare the client library once, before threads start (idempotent). */
void db_library_init(void);

/* Once `fd` is readable, every pending and later wait of this process gives up as at its
 * deadline: a server that is stopping need not wait out a hung check. -1 (the default): none. */
void db_set_abort_fd(int fd);

/* Where `t` is reached (pure): NULL for the unix socket (no host but a socket, or "localhost"
 * without a port of its own: the mysql client's rule, which the replaced scripts relied on), else
 * the host to reach over TCP: 127.0.0.1 for no host, and for "localhost" with an explicit port
 * (the name itself when the certificate is verified against it); any other host as given. */
const char *db_route(const struct db_target *t);

/* Connect within the deadline. DNS, TCP, TLS and authentication all share it; on failure the
 * handle is closed and `e` says why. Returns 0 or -1. */
int db_connect(struct db *db, const struct db_target *t, const deadline_t *dl, struct db_err *e) SK_MUST_CHECK;

/* Run one statement; on success *res holds the stored result (NULL for statements without rows)
 * which the caller frees with mysql_free_result. The whole round trip is bounded by `dl`; on
 * timeout the connection is shut down and must be closed. */
int db_query(struct db *db, const char *sql, const deadline_t *dl, MYSQL_RES **res, struct db_err *e) SK_MUST_CHECK;

/* A row of db_query_each: `row[0..ncols-1]` (NULL for SQL NULL), valid only during the call; the
 * function may change the text in place (wipe what it copied). */
typedef void db_row_fn(void *ctx, MYSQL_ROW row, unsigned ncols);

/* Run one statement and hand its rows to `fn` one by one as they arrive (mysql_use_result): the
 * result set is never held whole, whatever its size. The round trip and every row are bounded by
 * `dl`; on failure (the rows given so far stand) the connection is marked lost when the server
 * or the deadline broke it. Returns 0 or -1. */
int db_query_each(struct db *db, const char *sql, const deadline_t *dl, db_row_fn *fn, void *ctx,
		  struct db_err *e) SK_MUST_CHECK;

/* Run one statement and discard any result. */
int db_exec(struct db *db, const char *sql, const deadline_t *dl, struct db_err *e) SK_MUST_CHECK;

/* Run a query whose rows are (name, value) pairs (SHOW GLOBAL STATUS / VARIABLES) into `map`. */
int db_query_pairs(struct db *db, const char *sql, const deadline_t *dl, struct statusmap *map,
		   struct db_err *e) SK_MUST_CHECK;

/* Run a query and store the first row as column name -> value (SHOW REPLICA STATUS).
 * *nrows tells whether there was a row at all (0 or 1). */
int db_query_row(struct db *db, const char *sql, const deadline_t *dl, struct statusmap *map, unsigned long *nrows,
		 struct db_err *e) SK_MUST_CHECK;

/* Where a query's one value goes: the buffer val[len], and *found, whether a row came. */
struct db_value_dest {
	char *val;
	size_t len;
	bool *found;
};

/* Run a query for one value: the first column of the first row into to->val ("NULL" for SQL
 * NULL); *to->found is false when there is no row. */
int db_query_value(struct db *db, const char *sql, const deadline_t *dl, const struct db_value_dest *to,
		   struct db_err *e) SK_MUST_CHECK;

/* Where a query's rows go: up to `max` maps rows[] (the caller provides them, empty, and frees
 * them), and *n, how many were filled. */
struct db_rows_dest {
	struct statusmap *rows;
	size_t max;
	size_t *n;
};

/* Run a query and store up to to->max rows, each as column name -> value, in
 * to->rows[0..*to->n-1]. */
int db_query_rows(struct db *db, const char *sql, const deadline_t *dl, const struct db_rows_dest *to,
		  struct db_err *e) SK_MUST_CHECK;

/* Close the connection (never blocks: the socket is shut down first). Safe on a closed handle. */
void db_close(struct db *db);

#endif
