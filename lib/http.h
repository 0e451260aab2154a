/* http.h: a small HTTP responder on libmicrohttpd for the binaries that serve HTTP. */
#ifndef SK_HTTP_H
#define SK_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "util.h"

struct http_reply {
	int status; /* e.g. 200, 503 */
	const char *content_type; /* e.g. "text/plain" */
	char body[65536]; /* the handler writes the body here; it starts as "" (/metrics of many targets) */
	size_t len;
	bool close; /* send "Connection: close" and close after the reply */
	/* In: the request's query arguments in their order, '&'-joined and unescaped ("connect&a=b"),
	 * "" when none (a query longer than the buffer is cut at an argument). */
	char query[1024];
};

/* Called once per request, on a thread of the server's (see enum http_mode); fills `r`. Must be
 * thread-safe. */
typedef void (*http_handler)(void *ctx, const char *method, const char *path, struct http_reply *r);

struct http_server;

/* Parse "[ADDR:]PORT" ("9200", "127.0.0.1:9200", "[::1]:9200", ":9200"; no ADDR: every
 * address). Returns 0 or -1 with err set. */
int http_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
		      size_t errlen) SK_MUST_CHECK;

/* How handlers run. HTTP_HANDLERS_BLOCK: one thread per connection, for handlers that wait on
 * something (a check waiting on mysqld) and must not hold up the other connections.
 * HTTP_HANDLERS_QUICK: every connection on one event-loop thread, for handlers that only read
 * memory; a slow client still holds up nobody, and no thread is created per connection (a
 * thread per request cost 5 times the CPU of this mode, 7 times under musl). */
enum http_mode { HTTP_HANDLERS_BLOCK, HTTP_HANDLERS_QUICK };

/* What answers the requests: the handler, its context and how it runs. */
struct http_service {
	enum http_mode mode;
	http_handler h;
	void *ctx;
};

/* The limits that keep a health port answering under hostile clients. */
struct http_limits {
	/* Open connections at most. At the cap a new connection closes the one that has waited
	 * longest for its next request (a kept-alive connection between requests, one that trickles
	 * or sends nothing), or is closed itself when every connection is inside its handler. */
	unsigned max_conns;
	unsigned max_conns_per_ip; /* open connections from one client address at most */
	unsigned idle_timeout_s; /* close a connection that sends nothing for this long */
	/* A request must be complete (headers and body) this long after its connection opened or
	 * its connection's previous answer was handed over, however steadily it trickles; otherwise
	 * the connection is closed unanswered. */
	unsigned request_timeout_ms;
};
/* Whatever the limits, a connection's 100th answer closes it ("Connection: close"). */

/* Start serving `spec` with `svc` within `lim`. Raises the soft RLIMIT_NOFILE when lim->max_conns needs more
 * descriptors (lim->max_conns + 192: 128 connections closing, 64 for the rest). Returns NULL with err set (bad address, port in use, a hard descriptor limit
 * below what lim->max_conns needs). */
struct http_server *http_start(const char *spec, const struct http_service *svc, const struct http_limits *lim,
			       char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *s);

/* Wait until every request whose handler has started has had its reply sent, at most max_ms.
 * Returns false when some were still busy. Call before http_stop to let answers go out. */
bool http_drain(struct http_server *s, long max_ms);

/* Stop accepting, finish or drop open connections, and free everything. */
void http_stop(struct http_server *s);

#endif
