/* db.c: Connector/C's non-blocking API driven by poll(), so one deadline bounds DNS, connect,
 * TLS, authentication and every query to the millisecond. */
#include "db.h"

#include <arpa/inet.h>
#include <errno.h>
#include <errmsg.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dbauth.h"

static const char *const reason_names[] = {
	"ok",
	"timeout",
	"connection refused",
	"unknown host",
	"access denied",
	"connection lost",
	"protocol error",
	"server error",
	"client error",
	"authentication method refused",
};

const char *db_reason_str(enum db_reason r)
{
	return reason_names[r];
}

static void library_init_once(void)
{
	mysql_library_init(0, NULL, NULL);
	dbauth_init();
}

void db_library_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	/* A write to a server that went away must fail with EPIPE, not kill the process. */
	signal(SIGPIPE, SIG_IGN);
	pthread_once(&once, library_init_once);
}

/* ---- name resolution with a deadline -------------------------------------------------- */

struct resolve_job {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int refs; /* the waiter and the worker; the last one out frees the job */
	bool done;
	int rc;
	char host[256];
	char addr[INET6_ADDRSTRLEN];
};

static void job_release(struct resolve_job *j)
{
	bool last;

	pthread_mutex_lock(&j->mu);
	last = --j->refs == 0;
	pthread_mutex_unlock(&j->mu);
	if (last) {
		pthread_cond_destroy(&j->cv);
		pthread_mutex_destroy(&j->mu);
		free(j);
	}
}

static void *resolve_worker(void *arg)
{
	struct resolve_job *j = arg;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
	char addr[INET6_ADDRSTRLEN] = "";
	int rc = getaddrinfo(j->host, NULL, &hints, &res);

	if (rc == 0 && res) {
		const void *src = res->ai_family == AF_INET6
					  ? (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr
					  : (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr;

		if (!inet_ntop(res->ai_family, src, addr, sizeof(addr)))
			rc = EAI_FAIL;
	} else if (rc == 0) {
		rc = EAI_NONAME;
	}
	if (res)
		freeaddrinfo(res);
	pthread_mutex_lock(&j->mu);
	j->rc = rc;
	memcpy(j->addr, addr, sizeof(addr));
	j->done = true;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	job_release(j);
	return NULL;
}

/* A resolver job for `host` on its own detached thread; the job holds two references, ours and
 * the thread's. NULL with e set when it cannot start. */
static struct resolve_job *resolve_start(const char *host, struct db_err *e)
{
	struct resolve_job *j = xcalloc(1, sizeof(*j));
	pthread_condattr_t ca;
	pthread_attr_t ta;
	pthread_t tid;

	if (!sk_strlcpy(j->host, host, sizeof(j->host))) {
		free(j);
		e->reason = DB_UNKNOWN_HOST;
		sk_fmt(e->msg, sizeof(e->msg), "host name too long");
		return NULL;
	}
	pthread_mutex_init(&j->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->cv, &ca);
	pthread_condattr_destroy(&ca);
	j->refs = 2;
	pthread_attr_init(&ta);
	pthread_attr_setdetachstate(&ta, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&tid, &ta, resolve_worker, j) != 0) {
		pthread_attr_destroy(&ta);
		j->refs = 1;
		job_release(j);
		e->reason = DB_CLIENT_ERROR;
		sk_fmt(e->msg, sizeof(e->msg), "cannot start resolver thread");
		return NULL;
	}
	pthread_attr_destroy(&ta);
	return j;
}

/* Resolve `host` to a numeric address within the deadline. getaddrinfo has no timeout of its
 * own, so it runs on a detached thread that is abandoned when the deadline passes. */
static int resolve(const char *host, const deadline_t *dl, char *addr, size_t addrlen, struct db_err *e)
{
	struct resolve_job *j = resolve_start(host, e);
	int rc;

	if (!j)
		return -1;
	pthread_mutex_lock(&j->mu);
	while (!j->done) {
		struct timespec ts;
		int64_t at = dl->at ? dl->at : deadline_now_us() + 3600 * 1000000LL;

		ts.tv_sec = at / 1000000;
		ts.tv_nsec = (at % 1000000) * 1000;
		if (pthread_cond_timedwait(&j->cv, &j->mu, &ts) == ETIMEDOUT && !j->done)
			break;
	}
	rc = j->done ? j->rc : -1;
	if (j->done && rc == 0)
		sk_strlcpy(addr, j->addr, addrlen);
	pthread_mutex_unlock(&j->mu);
	job_release(j);

	if (rc == 0)
		return 0;
	if (rc == -1) {
		e->reason = DB_TIMEOUT;
		sk_fmt(e->msg, sizeof(e->msg), "timed out resolving host '%s'", host);
	} else {
		e->reason = DB_UNKNOWN_HOST;
		sk_fmt(e->msg, sizeof(e->msg), "unknown host '%s': %s", host, gai_strerror(rc));
	}
	return -1;
}

/* ---- driving non-blocking calls ------------------------------------------------------- */

static atomic_int abort_fd = -1;

void db_set_abort_fd(int fd)
{
	atomic_store(&abort_fd, fd);
}

/* Wait for what the library asked for, bounded by the deadline. Returns the ready bits,
 * or -1 when the deadline passed or the abort descriptor became readable. */
static int wait_io(MYSQL *m, int status, const deadline_t *dl)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = mysql_get_socket(m), .events = 0 },
				       { .fd = atomic_load(&abort_fd), .events = POLLIN } };
		int timeout = deadline_left_ms(dl), r, ready = 0;

		if (timeout == 0)
			return -1;
		if (status & MYSQL_WAIT_READ)
			p[0].events |= POLLIN;
		if (status & MYSQL_WAIT_WRITE)
			p[0].events |= POLLOUT;
		if (status & MYSQL_WAIT_EXCEPT)
			p[0].events |= POLLPRI;
		if (status & MYSQL_WAIT_TIMEOUT) {
			unsigned t = mysql_get_timeout_value_ms(m);

			if (t < (unsigned)timeout)
				timeout = (int)t;
		}
		r = poll(p, p[1].fd >= 0 ? 2 : 1, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return MYSQL_WAIT_READ | MYSQL_WAIT_WRITE; /* let the library see the error */
		if (p[1].fd >= 0 && p[1].revents)
			return -1;
		if (r == 0) {
			if (deadline_expired(dl))
				return -1;
			if (status & MYSQL_WAIT_TIMEOUT)
				return MYSQL_WAIT_TIMEOUT;
			continue;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			ready |= MYSQL_WAIT_READ;
		if (p[0].revents & (POLLOUT | POLLHUP | POLLERR))
			ready |= MYSQL_WAIT_WRITE;
		if (p[0].revents & POLLPRI)
			ready |= MYSQL_WAIT_EXCEPT;
		return ready & (status | MYSQL_WAIT_READ | MYSQL_WAIT_WRITE);
	}
}

/* Replace the connection's socket with a dead one, so the pending operation fails at once.
 * shutdown() alone does not abort a TCP connect that is still waiting for SYN-ACK. */
static void poison_socket(MYSQL *m)
{
	int fd = (int)mysql_get_socket(m), s;

	if (fd < 0)
		return;
	shutdown(fd, SHUT_RDWR);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s >= 0) {
		dup2(s, fd);
		close(s);
	}
}

struct op {
	MYSQL *m;
	int kind; /* 0 connect, 1 query, 2 store, 3 fetch a row of res, 4 free res */
	MYSQL *conn_ret;
	int query_ret;
	MYSQL_RES *res_ret;
	MYSQL_RES *res; /* kinds 3 and 4 */
	MYSQL_ROW row_ret;
};

static int op_cont(struct op *op, int ready)
{
	switch (op->kind) {
	case 0: return mysql_real_connect_cont(&op->conn_ret, op->m, ready);
	case 1: return mysql_real_query_cont(&op->query_ret, op->m, ready);
	case 2: return mysql_store_result_cont(&op->res_ret, op->m, ready);
	case 3: return mysql_fetch_row_cont(&op->row_ret, op->res, ready);
	default: return mysql_free_result_cont(op->res, ready);
	}
}

/* Run an operation to completion. Returns true when it finished in time, false when the
 * deadline passed (the operation was then forced to fail and the socket is dead). */
static bool drive(struct op *op, int status, const deadline_t *dl)
{
	while (status) {
		int ready = wait_io(op->m, status, dl);

		if (ready < 0) {
			poison_socket(op->m);
			for (int k = 0; status && k < 1000; k++)
				status = op_cont(op, MYSQL_WAIT_READ | MYSQL_WAIT_WRITE);
			return false;
		}
		status = op_cont(op, ready);
	}
	return true;
}

static void set_err(MYSQL *m, bool timed_out, const char *step, struct db_err *e)
{
	unsigned code = mysql_errno(m);

	e->code = code;
	if (!timed_out && code)
		sk_strlcpy(e->sqlstate, mysql_sqlstate(m), sizeof(e->sqlstate));
	if (timed_out) {
		e->reason = DB_TIMEOUT;
		sk_fmt(e->msg, sizeof(e->msg), "timed out %s", step);
		return;
	}
	switch (code) {
	case 1044:
	case 1045:
	case 1142:
	case 1143:
	case 1227:
	case 1698: e->reason = DB_ACCESS_DENIED; break;
	case CR_CONNECTION_ERROR:
	case CR_CONN_HOST_ERROR: e->reason = DB_REFUSED; break;
	case CR_UNKNOWN_HOST: e->reason = DB_UNKNOWN_HOST; break;
	case CR_SERVER_LOST:
	case CR_SERVER_GONE_ERROR: e->reason = DB_LOST; break;
	case CR_SERVER_HANDSHAKE_ERR:
	case CR_MALFORMED_PACKET:
	case CR_SSL_CONNECTION_ERROR:
	case CR_AUTH_PLUGIN_CANNOT_LOAD:
	case CR_AUTH_PLUGIN_ERR: e->reason = DB_PROTOCOL; break;
	default:
		e->reason = code >= 1000 && code < 2000 ? DB_SERVER_ERROR
			    : code >= 3000              ? DB_SERVER_ERROR
							: DB_CLIENT_ERROR;
		break;
	}
	sk_fmt(e->msg, sizeof(e->msg), "%s (%u)", mysql_error(m), code);
}

const char *db_route(const struct db_target *t)
{
	if (!t->host || !*t->host)
		return t->socket && *t->socket ? NULL : "127.0.0.1";
	if (strcmp(t->host, "localhost") != 0)
		return t->host;
	if (!t->port_explicit)
		return NULL;
	return t->tls && t->tls_verify ? "localhost" : "127.0.0.1";
}

/* Where to connect: *host (the unix socket's "localhost", or an address resolved under the
 * deadline into addr[INET6_ADDRSTRLEN]) and *proto. Returns 0 or -1 with e set. */
static int connect_host(const struct db_target *t, const deadline_t *dl, char *addr, const char **hostp,
			unsigned *proto, struct db_err *e)
{
	const char *host = db_route(t);

	if (!host) {
		/* The library's default socket path when none is given. */
		host = "localhost";
		*proto = MYSQL_PROTOCOL_SOCKET;
	} else {
		unsigned char tmp[sizeof(struct in6_addr)];

		*proto = MYSQL_PROTOCOL_TCP;
		/* Resolve names here, under the deadline; numeric addresses pass straight through.
		 * With certificate verification the name must reach the library as given. */
		if (inet_pton(AF_INET, host, tmp) != 1 && inet_pton(AF_INET6, host, tmp) != 1 &&
		    !(t->tls && t->tls_verify)) {
			if (resolve(host, dl, addr, INET6_ADDRSTRLEN, e) < 0)
				return -1;
			host = addr;
		}
	}
	*hostp = host;
	return 0;
}

/* The handle's timeouts, protocol and TLS. */
static void connect_options(MYSQL *m, const struct db_target *t, const deadline_t *dl, unsigned proto)
{
	unsigned secs;
	my_bool on = 1;

	/* The library's own timeouts are whole seconds: round up, as a backstop behind poll(). */
	secs = (unsigned)(deadline_left_ms(dl) / 1000 + 1);
	mysql_options(m, MYSQL_OPT_NONBLOCK, 0);
	mysql_options(m, MYSQL_OPT_CONNECT_TIMEOUT, &secs);
	mysql_options(m, MYSQL_OPT_READ_TIMEOUT, &secs);
	mysql_options(m, MYSQL_OPT_WRITE_TIMEOUT, &secs);
	mysql_options(m, MYSQL_OPT_PROTOCOL, &proto);
	if (t->tls) {
		mysql_ssl_set(m, t->tls_key, t->tls_cert, t->tls_ca, NULL, NULL);
		mysql_options(m, MYSQL_OPT_SSL_ENFORCE, &on);
		if (t->tls_verify)
			mysql_options(m, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
	}
}

int db_connect(struct db *db, const struct db_target *t, const deadline_t *dl, struct db_err *e)
{
	char addr[INET6_ADDRSTRLEN];
	const char *host;
	unsigned proto;
	struct op op = { 0 };
	int status;

	memset(e, 0, sizeof(*e));
	db->connected = false;
	db_library_init();
	if (connect_host(t, dl, addr, &host, &proto, e) < 0)
		return -1;
	db->m = mysql_init(NULL);
	if (!db->m) {
		e->reason = DB_CLIENT_ERROR;
		sk_fmt(e->msg, sizeof(e->msg), "out of memory");
		return -1;
	}
	connect_options(db->m, t, dl, proto);
	dbauth_prepare(db->m, t->tls && t->tls_verify);
	op.m = db->m;
	op.kind = 0;
	status = mysql_real_connect_start(&op.conn_ret, db->m, host, t->user, t->password ? t->password : "", NULL,
					  t->port ? t->port : 3306, proto == MYSQL_PROTOCOL_SOCKET ? t->socket : NULL,
					  0);
	if (!drive(&op, status, dl) || !op.conn_ret) {
		set_err(db->m, deadline_expired(dl), "connecting", e);
		if (dbauth_refusal(db->m, e->msg, sizeof(e->msg)))
			e->reason = DB_AUTH_REFUSED;
		dbauth_done();
		mysql_close(db->m);
		db->m = NULL;
		return -1;
	}
	dbauth_done();
	db->connected = true;
	return 0;
}

/* Send `sql` and wait for the start of its answer (db_query, db_query_each). */
static int send_query(struct db *db, const char *sql, const deadline_t *dl, struct db_err *e)
{
	struct op op = { .m = db->m, .kind = 1 };
	int status;

	memset(e, 0, sizeof(*e));
	if (!db->m || !db->connected) {
		e->reason = DB_LOST;
		sk_fmt(e->msg, sizeof(e->msg), "not connected");
		return -1;
	}
	status = mysql_real_query_start(&op.query_ret, db->m, sql, (unsigned long)strlen(sql));
	if (!drive(&op, status, dl) || op.query_ret != 0) {
		set_err(db->m, deadline_expired(dl), "waiting for the query", e);
		if (e->reason == DB_TIMEOUT || e->reason == DB_LOST || e->reason == DB_PROTOCOL)
			db->connected = false;
		return -1;
	}
	return 0;
}

int db_query(struct db *db, const char *sql, const deadline_t *dl, MYSQL_RES **res, struct db_err *e)
{
	struct op op = { .m = db->m, .kind = 2 };
	int status;

	*res = NULL;
	if (send_query(db, sql, dl, e) < 0)
		return -1;
	if (mysql_field_count(db->m) == 0)
		return 0;
	status = mysql_store_result_start(&op.res_ret, db->m);
	if (!drive(&op, status, dl) || !op.res_ret) {
		set_err(db->m, deadline_expired(dl), "reading the result", e);
		db->connected = false;
		if (op.res_ret)
			mysql_free_result(op.res_ret);
		return -1;
	}
	*res = op.res_ret;
	return 0;
}

/* Free a result read with mysql_use_result (whatever rows are left are read and dropped), bounded
 * by the deadline; false when it passed (the socket is then dead). */
static bool free_streamed(struct db *db, MYSQL_RES *res, const deadline_t *dl)
{
	struct op op = { .m = db->m, .kind = 4, .res = res };

	return drive(&op, mysql_free_result_start(res), dl);
}

int db_query_each(struct db *db, const char *sql, const deadline_t *dl, db_row_fn *fn, void *ctx, struct db_err *e)
{
	struct op op = { .m = db->m, .kind = 3 };
	MYSQL_RES *res;
	unsigned ncols;
	int status;

	if (send_query(db, sql, dl, e) < 0)
		return -1;
	if (mysql_field_count(db->m) == 0)
		return 0;
	res = mysql_use_result(db->m);
	if (!res) {
		set_err(db->m, false, "reading the result", e);
		db->connected = false;
		return -1;
	}
	ncols = mysql_num_fields(res);
	op.res = res;
	for (;;) {
		op.row_ret = NULL;
		status = mysql_fetch_row_start(&op.row_ret, res);
		if (!drive(&op, status, dl) || (!op.row_ret && mysql_errno(db->m))) {
			set_err(db->m, deadline_expired(dl), "reading the result", e);
			db->connected = false;
			(void)free_streamed(db, res, dl);
			return -1;
		}
		if (!op.row_ret)
			break;
		fn(ctx, op.row_ret, ncols);
	}
	if (!free_streamed(db, res, dl)) {
		set_err(db->m, true, "reading the result", e);
		db->connected = false;
		return -1;
	}
	return 0;
}

int db_exec(struct db *db, const char *sql, const deadline_t *dl, struct db_err *e)
{
	MYSQL_RES *res;

	if (db_query(db, sql, dl, &res, e) < 0)
		return -1;
	if (res)
		mysql_free_result(res);
	return 0;
}

int db_query_pairs(struct db *db, const char *sql, const deadline_t *dl, struct statusmap *map, struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	if (db_query(db, sql, dl, &res, e) < 0)
		return -1;
	if (!res || mysql_num_fields(res) < 2) {
		if (res)
			mysql_free_result(res);
		e->reason = DB_PROTOCOL;
		sk_fmt(e->msg, sizeof(e->msg), "expected (name, value) rows");
		return -1;
	}
	while ((row = mysql_fetch_row(res)) != NULL) {
		if (row[0] && statusmap_set(map, row[0], row[1]) < 0) {
			mysql_free_result(res);
			e->reason = DB_PROTOCOL;
			sk_fmt(e->msg, sizeof(e->msg), "too many rows");
			return -1;
		}
	}
	mysql_free_result(res);
	return 0;
}

/* Store one row as column name -> value. */
static int row_to_map(MYSQL_RES *res, MYSQL_ROW row, struct statusmap *map, struct db_err *e)
{
	MYSQL_FIELD *fields = mysql_fetch_fields(res);
	unsigned n = mysql_num_fields(res);

	for (unsigned i = 0; i < n; i++) {
		if (statusmap_set(map, fields[i].name, row[i]) < 0) {
			e->reason = DB_PROTOCOL;
			sk_fmt(e->msg, sizeof(e->msg), "too many columns");
			return -1;
		}
	}
	return 0;
}

int db_query_row(struct db *db, const char *sql, const deadline_t *dl, struct statusmap *map, unsigned long *nrows,
		 struct db_err *e)
{
	size_t n = 0;
	int rc = db_query_rows(db, sql, dl, &(struct db_rows_dest){ map, 1, &n }, e);

	*nrows = n;
	return rc;
}

int db_query_value(struct db *db, const char *sql, const deadline_t *dl, const struct db_value_dest *to,
		   struct db_err *e)
{
	MYSQL_RES *res;
	MYSQL_ROW row;

	*to->found = false;
	to->val[0] = '\0';
	if (db_query(db, sql, dl, &res, e) < 0)
		return -1;
	if (res && (row = mysql_fetch_row(res)) != NULL && mysql_num_fields(res) > 0) {
		*to->found = true;
		sk_strlcpy(to->val, row[0] ? row[0] : "NULL", to->len);
	}
	if (res)
		mysql_free_result(res);
	return 0;
}

int db_query_rows(struct db *db, const char *sql, const deadline_t *dl, const struct db_rows_dest *to, struct db_err *e)
{
	struct statusmap *rows = to->rows;
	size_t *nrows = to->n, max = to->max;
	MYSQL_RES *res;
	MYSQL_ROW row;
	int rc = 0;

	*nrows = 0;
	if (db_query(db, sql, dl, &res, e) < 0)
		return -1;
	if (!res)
		return 0;
	while (rc == 0 && *nrows < max && (row = mysql_fetch_row(res)) != NULL)
		if ((rc = row_to_map(res, row, &rows[*nrows], e)) == 0)
			(*nrows)++;
	mysql_free_result(res);
	return rc;
}

void db_close(struct db *db)
{
	if (!db->m)
		return;
	/* A healthy connection says goodbye (no "Aborted connection" noise in the server log);
	 * a broken one is cut so that close cannot block. */
	if (!db->connected)
		poison_socket(db->m);
	mysql_close(db->m);
	db->m = NULL;
	db->connected = false;
}
