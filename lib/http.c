/* http.c: libmicrohttpd glue: address parsing, a thread per connection or one event loop, replies
 * from a handler. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct http_server {
	struct MHD_Daemon *d;
	http_handler h;
	void *ctx;
	unsigned port;
	atomic_int busy; /* requests between their handler's start and their reply's last byte */
};

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
	r->status = 500;
	r->content_type = "text/plain";
	r->body[0] = '\0';
	r->len = 0;
	r->close = false;
	r->query[0] = '\0';
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, r);
	s->h(s->ctx, method, url, r);
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

struct http_server *http_start(const char *spec, enum http_mode mode, http_handler h, void *ctx,
			       unsigned idle_timeout_s, unsigned max_conns, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct http_server *s;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_SUPPRESS_DATE_NO_CLOCK;
	const union MHD_DaemonInfo *info;

	if (http_parse_listen(spec, &ss, &len, err, errlen) < 0)
		return NULL;
	if (mode == HTTP_HANDLERS_BLOCK)
		flags |= MHD_USE_THREAD_PER_CONNECTION;
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	s = xcalloc(1, sizeof(*s));
	s->h = h;
	s->ctx = ctx;
	s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_TIMEOUT, idle_timeout_s, MHD_OPTION_CONNECTION_LIMIT, max_conns,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
				MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
				MHD_OPTION_END);
	if (!s->d) {
		free(s);
		sk_err(err, errlen, "cannot listen on %s: %s", spec, errno ? strerror(errno) : "libmicrohttpd failed");
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
	free(s);
}
