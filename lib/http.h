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
	char body[8192]; /* the handler writes the body here */
	size_t len;
	bool close; /* send "Connection: close" and close after the reply */
};

/* Called once per request on the connection's own thread; fills `r`. Must be thread-safe. */
typedef void (*http_handler)(void *ctx, const char *method, const char *path, struct http_reply *r);

struct http_server;

/* Parse "[ADDR:]PORT" ("9200", "127.0.0.1:9200", "[::1]:9200", ":9200"; no ADDR: every
 * address). Returns 0 or -1 with err set. */
int http_parse_listen(const char *spec, struct sockaddr_storage *ss, socklen_t *len, char *err,
		      size_t errlen) SK_MUST_CHECK;

/* Start serving `spec` with one thread per connection, so a slow client never holds up
 * another; idle connections are closed after `idle_timeout_s`, and at most `max_conns` are
 * open at once. Returns NULL with err set (bad address, port in use). */
struct http_server *http_start(const char *spec, http_handler h, void *ctx, unsigned idle_timeout_s, unsigned max_conns,
			       char *err, size_t errlen);

/* The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *s);

/* Wait until every request whose handler has started has had its reply sent, at most max_ms.
 * Returns false when some were still busy. Call before http_stop to let answers go out. */
bool http_drain(struct http_server *s, long max_ms);

/* Stop accepting, finish or drop open connections, and free everything. */
void http_stop(struct http_server *s);

#endif
