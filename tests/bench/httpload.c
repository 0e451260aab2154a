/* httpload.c: a bounded HTTP load generator for the benchmarks in tests/bench/ (loopback only).
 *
 *   httpload HOST PORT TOTAL CONCURRENCY [MAX_SECONDS [PATH]]
 *
 * CONCURRENCY threads share TOTAL requests; each request is a new TCP connection with
 * "GET PATH HTTP/1.1" (PATH defaults to /) and "Connection: close", read to EOF, as HAProxy's
 * httpchk does. Stops after TOTAL requests or MAX_SECONDS (default 120). Prints one line of
 * key=value results: requests, ok (status 200), non200, errors, seconds, rps, p50/p90/p99/max
 * latency in ms, and bytes (mean response size, headers included). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_in addr;
static long total;
static char request[512];
static size_t request_len;
static atomic_long next_ticket, recorded, ok_count, non200, errors, bytes;
static double *lat_ms; /* one slot per finished request */
static double stop_at;
static atomic_bool quit; /* a worker could not start: the others stop */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One request; returns 1 on 200, 0 on another status, -1 on error. Keeps the first bytes of
 * the response for the status line and reads the rest to EOF. */
static int one_request(void)
{
	char buf[4096], sink[4096];
	size_t got = 0, total_read = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	struct timeval tv = { 10, 0 };

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    send(fd, request, request_len, MSG_NOSIGNAL) != (ssize_t)request_len) {
		close(fd);
		return -1;
	}
	for (;;) {
		bool keep = got < sizeof(buf) - 1;
		ssize_t r = keep ? recv(fd, buf + got, sizeof(buf) - 1 - got, 0) : recv(fd, sink, sizeof(sink), 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		if (keep)
			got += (size_t)r;
		total_read += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	atomic_fetch_add(&bytes, (long)total_read);
	if (got < 12)
		return -1;
	return strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 1 : 0;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		long t = atomic_fetch_add(&next_ticket, 1);
		double t0;
		int rc;

		if (t >= total || now() > stop_at || atomic_load(&quit))
			return NULL;
		t0 = now();
		rc = one_request();
		lat_ms[atomic_fetch_add(&recorded, 1)] = (now() - t0) * 1000.0;
		if (rc == 1)
			atomic_fetch_add(&ok_count, 1);
		else if (rc == 0)
			atomic_fetch_add(&non200, 1);
		else
			atomic_fetch_add(&errors, 1);
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double p)
{
	long i = (long)(p * (double)(n - 1) + 0.5);

	return n ? v[i] : 0.0;
}

int main(int argc, char **argv)
{
	long conc, done;
	double max_s = 120, t0, secs;
	const char *path = "/";
	pthread_t *th;
	int n;

	if (argc < 5 || argc > 7) {
		fprintf(stderr, "usage: httpload HOST PORT TOTAL CONCURRENCY [MAX_SECONDS [PATH]]\n");
		return 2;
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((unsigned short)strtol(argv[2], NULL, 10));
	total = strtol(argv[3], NULL, 10);
	conc = strtol(argv[4], NULL, 10);
	if (argc >= 6)
		max_s = strtod(argv[5], NULL);
	if (argc == 7)
		path = argv[6];
	n = snprintf(request, sizeof(request), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
	if (path[0] != '/' || strpbrk(path, " \r\n") || n < 0 || (size_t)n >= sizeof(request)) {
		fprintf(stderr,
			"httpload: PATH must start with / and hold no space or line break (at most 400 bytes)\n");
		return 2;
	}
	request_len = (size_t)n;
	if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 || (ntohl(addr.sin_addr.s_addr) >> 24) != 127 ||
	    total < 1 || total > 1000000 || conc < 1 || conc > 256 || max_s <= 0) {
		fprintf(stderr,
			"httpload: HOST must be a 127.x.x.x address, 1 <= TOTAL <= 1e6, 1 <= CONCURRENCY <= 256\n");
		return 2;
	}
	lat_ms = calloc((size_t)total, sizeof(double));
	th = calloc((size_t)conc, sizeof(pthread_t));
	if (!lat_ms || !th)
		return 1;
	t0 = now();
	stop_at = t0 + max_s;
	for (long i = 0; i < conc; i++) {
		int e = pthread_create(&th[i], NULL, worker, NULL);

		if (e != 0) { /* no figures for a concurrency that never ran */
			fprintf(stderr, "httpload: cannot start worker %ld of %ld: %s\n", i + 1, conc, strerror(e));
			atomic_store(&quit, true);
			conc = i;
		}
	}
	for (long i = 0; i < conc; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&quit)) {
		free(lat_ms);
		free(th);
		return 1;
	}
	secs = now() - t0;
	done = atomic_load(&recorded);
	qsort(lat_ms, (size_t)done, sizeof(double), cmp);
	printf("requests=%ld ok=%ld non200=%ld errors=%ld seconds=%.3f rps=%.0f p50=%.3f p90=%.3f p99=%.3f max=%.3f "
	       "bytes=%.0f\n",
	       done, atomic_load(&ok_count), atomic_load(&non200), atomic_load(&errors), secs, (double)done / secs,
	       pct(lat_ms, done, 0.50), pct(lat_ms, done, 0.90), pct(lat_ms, done, 0.99), done ? lat_ms[done - 1] : 0.0,
	       done ? (double)atomic_load(&bytes) / (double)done : 0.0);
	free(lat_ms);
	free(th);
	return 0;
}
