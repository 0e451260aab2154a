/* fuzz_http.c: libFuzzer harness for the HTTP request path of the health port and clustercheck
 * --listen: lib/http.c on libmicrohttpd, started once on 127.0.0.1 (a free port), fed each
 * input as raw bytes over a loopback connection.
 *
 * Each run connects, sends the input, closes its sending side and reads the answer for at most
 * 300 ms, so a run is bounded whatever the bytes say (a huge Content-Length, a half request).
 * The handler answers like proxysql-sync's (/healthz, /readyz, /metrics, else 404) and checks
 * what it is given: a method and a path that are terminated strings. Checked on the client side:
 * whatever comes back starts as an HTTP/1.x status line. The server's threads run under the same
 * ASan and UBSan, so a memory error while parsing the request is caught too. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "deadline.h"
#include "http.h"
#include "log.h"

#define RUN_MS 300

static struct http_server *srv;
static struct sockaddr_in addr;

static void on_request(void *ctx, const char *method, const char *path, struct http_reply *r)
{
	size_t ml = strlen(method), pl = strlen(path);

	(void)ctx;
	r->content_type = "text/plain; charset=utf-8";
	if (strcmp(path, "/healthz") == 0) {
		r->status = 200;
		snprintf(r->body, sizeof(r->body), "ok\n");
	} else if (strcmp(path, "/readyz") == 0) {
		r->status = 503;
		snprintf(r->body, sizeof(r->body), "starting\n");
	} else if (strcmp(path, "/metrics") == 0) {
		r->status = 200;
		r->content_type = "text/plain; version=0.0.4";
		snprintf(r->body, sizeof(r->body), "up 1\n");
	} else {
		snprintf(r->body, sizeof(r->body), "not found: %s %s\n", method, path);
		r->status = 404;
		r->close = (ml + pl) & 1;
	}
	log_redact(r->body);
	r->len = strlen(r->body); /* redacting may have shortened it */
}

static void stop_server(void)
{
	http_stop(srv);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const struct http_limits lim = {
		.max_conns = 64, .max_conns_per_ip = 64, .idle_timeout_s = 1, .request_timeout_ms = 1000
	};
	char err[256];

	(void)argc;
	(void)argv;
	log_setup("fuzz", LOG_TEXT, LOG_OFF, stderr);
	log_add_secret("s3cret-in-path");
	srv = http_start("127.0.0.1:0", &(struct http_service){ HTTP_HANDLERS_QUICK, on_request, NULL }, &lim, err,
			 sizeof(err));
	if (!srv) {
		fprintf(stderr, "fuzz_http: %s\n", err);
		abort();
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)http_port(srv));
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	atexit(stop_server);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	deadline_t dl = deadline_in_ms(RUN_MS);
	char buf[4096], head[16];
	size_t sent = 0, got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct pollfd p;

	if (fd < 0)
		abort();
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return 0;
	}
	p.fd = fd;
	while (sent < size && !deadline_expired(&dl)) {
		ssize_t n;

		p.events = POLLOUT;
		if (poll(&p, 1, deadline_left_ms(&dl)) <= 0)
			break;
		n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (n > 0)
			sent += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	while (!deadline_expired(&dl)) {
		ssize_t n;

		p.events = POLLIN;
		if (poll(&p, 1, deadline_left_ms(&dl)) <= 0)
			break;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		if (got < sizeof(head))
			memcpy(head + got, buf, (size_t)n < sizeof(head) - got ? (size_t)n : sizeof(head) - got);
		got += (size_t)n;
	}
	close(fd);
	if (got >= 8 && memcmp(head, "HTTP/1.", 7) != 0)
		FAIL("the answer does not start with a status line: %.8s", head);
	return 0;
}
