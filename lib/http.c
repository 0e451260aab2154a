/* http.c: libmicrohttpd glue: address parsing, a thread per connection or one event loop, replies
 * from a handler, and the limits that keep hostile clients from starving the port. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "deadline.h"

/* One open connection, for its request deadline and its place in the eviction order. */
struct conn {
	struct conn *prev, *next; /* in the server's waiting list while `waiting` */
	int fd;
	int64_t due_us; /* CLOCK_MONOTONIC time by which its request must be complete */
	bool waiting; /* outside the handler: from accept, and again from the end of each handler */
	bool shut; /* shut down by the server (late or evicted); libmicrohttpd has yet to close it */
	unsigned requests; /* requests answered on it */
};

struct http_server {
	struct MHD_Daemon *d;
	http_handler h;
	void *ctx;
	unsigned port;
	atomic_int busy; /* requests between their handler's start and their reply's last byte */
	/* The waiting list: connections outside their handler, waiting for a complete request, oldest
	 * due first (every wait lasts the same, so appending keeps the order); the thread that closes
	 * late ones (the request deadline); and the head is the one evicted at the cap (on_accept). */
	int64_t request_timeout_us;
	unsigned max_conns; /* the cap; libmicrohttpd's own limit is SPARE_CONNS above it */
	pthread_mutex_t mu;
	pthread_cond_t cv; /* on CLOCK_MONOTONIC; signalled when the list gets a new head, or at stop */
	struct conn *head, *tail;
	unsigned open; /* connections libmicrohttpd reported started and not yet closed */
	unsigned shut; /* of which shut down by the server and not yet closed */
	bool stopping;
	bool watchdog_running;
	pthread_t watchdog;
};

/* Descriptors besides the connections: the listening socket, libmicrohttpd's own, the log, the
 * binary's clients (mysqld, Consul, ProxySQL admin). */
#define FD_MARGIN 64

/* Connections beyond the cap that libmicrohttpd may hold while those shut down to make room
 * (evicted, or late) are still closing. On the event loop each closes within one turn of the
 * loop; with a thread per connection, once its thread has run and libmicrohttpd's listening
 * thread has joined it: tens of milliseconds on a loaded machine running hundreds of threads.
 * 1000 connections from 30 addresses (960 wanting the 512 slots) make evictions run at about a
 * thousand a second, so dozens are closing at once: with 16 spare ones clustercheck closed 30 of
 * 272 probes from another address at once, with 64 1 of 469, with 128 none of 538 (2 cores,
 * load average 4). Past them libmicrohttpd takes no new connection (the event loop leaves it in
 * the listen queue, a thread per connection closes it). */
#define SPARE_CONNS 128

/* Requests answered on one connection before its reply says "Connection: close" (Apache's
 * MaxKeepAliveRequests default): a client polling over one connection reconnects every 100
 * requests, which costs it one handshake, and no connection, however busy, keeps its slot and
 * its place in the per-address count for more than 100 requests. */
#define CONN_MAX_REQUESTS 100

/* Each connection's buffer for the request line, headers and the reply's header; a request
 * whose headers do not fit gets 431. Probes and scrapers send a few hundred bytes. */
#define CONN_MEMORY (16 * 1024)

/* Markers in a request's con_cls: headers seen; handler called (counted in busy). */
static int started, handled;

int http_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
	char host[128] = "";
	const char *port_s = spec;
	long port;

	memset(ss, 0, sizeof(*ss));
	if (spec[0] == '[') {
		const char *end = strchr(spec, ']');

		if (!end || end[1] != ':' || (size_t)(end - spec - 1) >= sizeof(host))
			return sk_err(err, errlen, "'%s' is not [ADDR:]PORT", spec);
		memcpy(host, spec + 1, (size_t)(end - spec - 1));
		port_s = end + 2;
	} else if (strrchr(spec, ':')) {
		const char *colon = strrchr(spec, ':');

		if ((size_t)(colon - spec) >= sizeof(host))
			return sk_err(err, errlen, "'%s' is not [ADDR:]PORT", spec);
		memcpy(host, spec, (size_t)(colon - spec));
		port_s = colon + 1;
	}
	if (!sk_parse_long(port_s, 0, 65535, &port))
		return sk_err(err, errlen, "'%s': port is not a number from 0 to 65535", spec);
	if (!host[0] || strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_ANY);
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
	} else if (strchr(host, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1)
			return sk_err(err, errlen, "'%s': '%s' is not an IPv6 address", spec, host);
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		if (inet_pton(AF_INET, host, &in->sin_addr) != 1)
			return sk_err(err, errlen, "'%s': '%s' is not an IPv4 address", spec, host);
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
	}
	return 0;
}

/* Appends one query argument to the reply's `query`, in the order libmicrohttpd keeps them. */
static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct http_reply *r = cls;
	size_t n = strlen(r->query);

	(void)kind;
	if (!sk_fmt(r->query + n, sizeof(r->query) - n, "%s%s%s%s", n ? "&" : "", key, value ? "=" : "",
		    value ? value : "")) {
		r->query[n] = '\0';
		return MHD_NO;
	}
	return MHD_YES;
}

/* Starts the wait for a request on `c` (under s->mu). */
static void wait_start(struct http_server *s, struct conn *c)
{
	if (c->waiting || c->shut)
		return;
	c->due_us = deadline_now_us() + s->request_timeout_us;
	c->waiting = true;
	c->next = NULL;
	c->prev = s->tail;
	if (s->tail)
		s->tail->next = c;
	else {
		s->head = c;
		pthread_cond_signal(&s->cv);
	}
	s->tail = c;
}

/* Ends the wait for a request on `c`, if it was waiting (under s->mu). */
static void wait_end(struct http_server *s, struct conn *c)
{
	if (!c->waiting)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		s->tail = c->prev;
	c->prev = c->next = NULL;
	c->waiting = false;
}

/* Shuts down the socket of `c` (under s->mu), which wakes libmicrohttpd's poll on it and makes it
 * close the connection; until it reports the close, `c` counts in s->shut. The descriptor cannot
 * belong to another connection yet: libmicrohttpd reports a connection closed (on_connection,
 * which takes s->mu) before it closes its descriptor. */
static void conn_shut(struct http_server *s, struct conn *c)
{
	wait_end(s, c);
	if (c->shut)
		return;
	shutdown(c->fd, SHUT_RDWR);
	c->shut = true;
	s->shut++;
}

/* The watchdog thread: shuts down every connection whose request is late. */
static void *watchdog(void *arg)
{
	struct http_server *s = arg;

	pthread_mutex_lock(&s->mu);
	while (!s->stopping) {
		int64_t now = deadline_now_us();
		struct timespec at;

		while (s->head && s->head->due_us <= now)
			conn_shut(s, s->head);
		if (!s->head) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		at.tv_sec = (time_t)(s->head->due_us / 1000000);
		at.tv_nsec = (long)(s->head->due_us % 1000000) * 1000;
		pthread_cond_timedwait(&s->cv, &s->mu, &at);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The eviction rule, which keeps a slot for a client from a new address however the others
 * behave. libmicrohttpd calls this for each new connection that passed the per-address limit,
 * before it counts it. At the cap (s->open - s->shut connections not shut down yet), the new one
 * takes the place of the connection at the head of the waiting list: the one that has waited
 * longest for its next request, since it opened or since its handler last returned (a kept-alive
 * connection between requests, one that trickles or sends nothing); when every connection is
 * inside its handler the list is empty and the new one is refused. Why a new client is answered:
 * - The agent runs handlers on libmicrohttpd's one thread, the thread that calls this, so at this
 *   moment every connection is on the list and a new one always gets a slot; clustercheck's
 *   handlers are bounded by --timeout, so only that long can every slot refuse.
 * - The list is in the order the waits began, and every eviction takes its head, so a connection
 *   is evicted only after every connection that was waiting before it opened has been closed or
 *   has sent its request. libmicrohttpd accepts one connection per turn of its loop and reads
 *   the connections it accepted in the turns before (or each on its own thread at once), so a
 *   client that sends its request with its connect (a probe) is read long before the hundreds
 *   of arrivals it would take to reach it.
 * - The per-address limit still holds first: an address at its limit cannot evict anybody. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct http_server *s = cls;
	bool room;

	(void)addr;
	(void)addrlen;
	pthread_mutex_lock(&s->mu);
	room = s->open - s->shut < s->max_conns;
	if (!room && s->head) {
		conn_shut(s, s->head);
		room = true;
	}
	pthread_mutex_unlock(&s->mu);
	return room ? MHD_YES : MHD_NO;
}

/* The connection `mc` opened or closed: it is counted, and its waiting list entry made or
 * dropped. */
static void on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	struct conn *c = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);

		c = xcalloc(1, sizeof(*c));
		c->fd = info ? info->connect_fd : -1;
		pthread_mutex_lock(&s->mu);
		s->open++;
		if (c->fd >= 0)
			wait_start(s, c);
		pthread_mutex_unlock(&s->mu);
		*socket_context = c;
	} else if (c) {
		pthread_mutex_lock(&s->mu);
		wait_end(s, c);
		s->open--;
		if (c->shut)
			s->shut--;
		pthread_mutex_unlock(&s->mu);
		free(c);
		*socket_context = NULL;
	}
}

/* The waiting list entry of `mc`, or NULL. */
static struct conn *conn_of(struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

/* Runs the handler for the complete request on `mc` into `r`. Its connection leaves the waiting
 * list meanwhile (no deadline, not evicted) and joins its tail again after; the reply closes the
 * connection once it has answered CONN_MAX_REQUESTS requests. */
static void handle(struct http_server *s, struct MHD_Connection *mc, const char *method, const char *url,
		   struct http_reply *r)
{
	struct conn *conn = conn_of(mc);

	if (conn) {
		pthread_mutex_lock(&s->mu);
		wait_end(s, conn);
		pthread_mutex_unlock(&s->mu);
	}
	r->status = 500;
	r->content_type = "text/plain";
	r->body[0] = '\0';
	r->len = 0;
	r->close = false;
	r->query[0] = '\0';
	MHD_get_connection_values(mc, MHD_GET_ARGUMENT_KIND, add_arg, r);
	s->h(s->ctx, method, url, r);
	if (conn) {
		pthread_mutex_lock(&s->mu);
		if (++conn->requests >= CONN_MAX_REQUESTS)
			r->close = true;
		wait_start(s, conn);
		pthread_mutex_unlock(&s->mu);
	}
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **con_cls)
{
	struct http_server *s = cls;
	struct http_reply reply, *r = &reply; /* on the stack: no allocation per request */
	struct MHD_Response *resp;
	enum MHD_Result ret;

	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		*con_cls = &started; /* first call: headers only; answer once the request is complete */
		return MHD_YES;
	}
	if (*upload_data_size) {
		*upload_data_size = 0; /* bodies are ignored */
		return MHD_YES;
	}
	if (*con_cls == &started) {
		*con_cls = &handled;
		atomic_fetch_add(&s->busy, 1);
	}
	handle(s, c, method, url, r);
	resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_COPY);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	if (r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, (unsigned)r->status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
	struct http_server *s = cls;

	(void)c;
	(void)why;
	if (*con_cls == &handled)
		atomic_fetch_sub(&s->busy, 1);
	*con_cls = NULL;
}

/* Makes room for `conns` connections in RLIMIT_NOFILE, raising the soft limit up to the hard one. */
static int fd_room(unsigned conns, char *err, size_t errlen)
{
	struct rlimit rl;
	rlim_t need = (rlim_t)conns + SPARE_CONNS + FD_MARGIN;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need)
		return sk_err(err, errlen, "%u connections need %lu descriptors, the hard limit is %lu (ulimit -Hn)",
			      conns, (unsigned long)need, (unsigned long)rl.rlim_max);
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return sk_err(err, errlen, "cannot raise the descriptor limit to %lu: %s", (unsigned long)need,
			      strerror(errno));
	return 0;
}

/* Frees a server whose daemon is stopped or was never started. */
static void server_free(struct http_server *s)
{
	if (s->watchdog_running) {
		pthread_mutex_lock(&s->mu);
		s->stopping = true;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->watchdog, NULL);
	}
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* A server for `h` within `lim`, its lock and condition made, its thread and daemon not started. */
static struct http_server *server_new(const struct http_service *svc, const struct http_limits *lim)
{
	struct http_server *s = xcalloc(1, sizeof(*s));
	pthread_condattr_t ca;

	s->h = svc->h;
	s->ctx = svc->ctx;
	s->request_timeout_us = (int64_t)lim->request_timeout_ms * 1000;
	s->max_conns = lim->max_conns;
	pthread_mutex_init(&s->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->cv, &ca);
	pthread_condattr_destroy(&ca);
	return s;
}

struct http_server *http_start(const char *spec, const struct http_service *svc, const struct http_limits *lim,
			       char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct http_server *s;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_SUPPRESS_DATE_NO_CLOCK;
	const union MHD_DaemonInfo *info;
	int rc;

	if (http_parse_listen(spec, &ss, &len, err, errlen) < 0 || fd_room(lim->max_conns, err, errlen) < 0)
		return NULL;
	if (svc->mode == HTTP_HANDLERS_BLOCK)
		flags |= MHD_USE_THREAD_PER_CONNECTION;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s = server_new(svc, lim);
	rc = pthread_create(&s->watchdog, NULL, watchdog, s);
	if (rc != 0) {
		server_free(s);
		sk_err(err, errlen, "cannot start the request deadline thread: %s", strerror(rc));
		return NULL;
	}
	s->watchdog_running = true;
	s->d = MHD_start_daemon(flags, 0, on_accept, s, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, lim->idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT,
				lim->max_conns + SPARE_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, lim->max_conns_per_ip,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
				MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
	if (!s->d) {
		int e = errno;

		server_free(s);
		sk_err(err, errlen, "cannot listen on %s: %s", spec, e ? strerror(e) : "libmicrohttpd failed");
		return NULL;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : 0;
	return s;
}

unsigned http_port(const struct http_server *s)
{
	return s->port;
}

bool http_drain(struct http_server *s, long max_ms)
{
	const struct timespec step = { 0, 5 * 1000 * 1000 };

	for (long waited = 0; atomic_load(&s->busy) > 0; waited += 5) {
		if (waited >= max_ms)
			return false;
		nanosleep(&step, NULL);
	}
	return true;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	MHD_stop_daemon(s->d);
	server_free(s);
}
