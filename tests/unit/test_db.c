/* test_db.c: the pure parts of the MySQL connection: where an address goes (unix socket or TCP),
 * and which authentication method the server's packets ask for (however the reads split them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "db.h"
#include "dbauth.h"

/* A packet: 3-byte length, sequence, payload. Returns its size in out. */
static size_t pkt(unsigned char *out, unsigned seq, const void *payload, size_t n)
{
	out[0] = (unsigned char)(n & 0xff);
	out[1] = (unsigned char)(n >> 8 & 0xff);
	out[2] = (unsigned char)(n >> 16 & 0xff);
	out[3] = (unsigned char)seq;
	memcpy(out + 4, payload, n);
	return n + 4;
}

/* A protocol-10 greeting naming `plugin`, with a nonce of `nonce_len` (part 2: max(13, len - 8)). */
static size_t greeting(unsigned char *out, const char *plugin, unsigned nonce_len)
{
	unsigned char p[512];
	size_t n = 0, rest = nonce_len > 8 + 13 ? nonce_len - 8 : 13;

	p[n++] = 0x0a;
	memcpy(p + n, "11.4.2-MariaDB\0", 15);
	n += 15;
	memset(p + n, 'x', 4 + 8 + 1 + 2 + 1 + 2 + 2); /* id, nonce 1, filler, caps, charset, status, caps */
	n += 20;
	p[n++] = (unsigned char)nonce_len;
	memset(p + n, 0, 10);
	n += 10;
	memset(p + n, 'y', rest); /* may contain anything, even NUL */
	p[n + rest - 1] = 0;
	n += rest;
	memcpy(p + n, plugin, strlen(plugin) + 1);
	n += strlen(plugin) + 1;
	return pkt(out, 0, p, n);
}

static size_t auth_switch(unsigned char *out, const char *plugin)
{
	unsigned char p[128];
	size_t n = 0;

	p[n++] = 0xfe;
	memcpy(p + n, plugin, strlen(plugin) + 1);
	n += strlen(plugin) + 1;
	memcpy(p + n, "0123456789abcdefghij", 21);
	n += 21;
	return pkt(out, 2, p, n);
}

/* Every way of cutting the stream into reads gives the same answer. */
static void expect_asked(const unsigned char *stream, size_t n, const char *want)
{
	for (size_t chunk = 1; chunk <= n; chunk++) {
		struct dbauth_tap tap;

		memset(&tap, 0, sizeof(tap));
		for (size_t at = 0; at < n; at += chunk)
			dbauth_feed(&tap, stream + at, at + chunk <= n ? chunk : n - at);
		if (strcmp(tap.asked, want) != 0)
			fail_msg("reads of %zu bytes: asked '%s', expected '%s'", chunk, tap.asked, want);
	}
}

static void test_dbauth_asked(void **state)
{
	static const unsigned char ok[] = { 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00 };
	static const unsigned char eof_like[] = { 0xfe, 0x00, 0x00, 0x02, 0x00 };
	unsigned char s[2048];
	size_t n;

	(void)state;
	n = greeting(s, "mysql_clear_password", 21);
	expect_asked(s, n, "mysql_clear_password");
	n = greeting(s, "caching_sha2_password", 40); /* a longer nonce: its part 2 is 32 bytes */
	expect_asked(s, n, "caching_sha2_password");
	n = greeting(s, "mysql_native_password", 21);
	n += pkt(s + n, 1, "client answer", 13); /* never parsed: only what the client reads is fed */
	n += auth_switch(s + n, "dialog");
	expect_asked(s, n, "dialog");
	n = greeting(s, "mysql_native_password", 21);
	n += auth_switch(s + n, "sha256_password");
	n += pkt(s + n, 3, ok, sizeof(ok));
	expect_asked(s, n, "sha256_password");
	n = greeting(s, "mysql_native_password", 21);
	n += pkt(s + n, 2, "\xfe", 1); /* the old "use the short scramble" request */
	expect_asked(s, n, "mysql_old_password");
	n = greeting(s, "mysql_native_password", 21);
	n += pkt(s + n, 2, eof_like, sizeof(eof_like)); /* an EOF packet: a switch to "" */
	expect_asked(s, n, "mysql_native_password");
	n = pkt(s, 0, "\x0a", 1); /* a greeting cut short names nothing */
	expect_asked(s, n, "");
}

/* The address decision: host, socket, explicit port, TLS verified -> the TCP host (NULL: socket). */
static void test_db_route(void **state)
{
	static const struct {
		const char *host, *socket;
		bool port_explicit, verified;
		const char *want;
	} rows[] = {
		{ "localhost", NULL, false, false, NULL }, /* the mysql client's rule: the socket */
		{ "localhost", "/run/mysqld/mysqld.sock", false, false, NULL },
		{ "localhost", NULL, true, false, "127.0.0.1" }, /* localhost:6032 is TCP */
		{ "localhost", "/run/mysqld/mysqld.sock", true, false, "127.0.0.1" },
		{ "localhost", NULL, true, true, "localhost" }, /* the name the certificate must match */
		{ "localhost", NULL, false, true, NULL },
		{ "LOCALHOST", NULL, false, false, "LOCALHOST" }, /* the client compares exactly, so do we */
		{ "127.0.0.1", NULL, false, false, "127.0.0.1" },
		{ "127.0.0.1", "/tmp/x.sock", false, false, "127.0.0.1" }, /* a host wins over a socket */
		{ "db1.example", NULL, true, true, "db1.example" },
		{ "::1", NULL, true, false, "::1" },
		{ NULL, "/tmp/x.sock", false, false, NULL }, /* -S alone: the socket */
		{ "", "/tmp/x.sock", true, false, NULL },
		{ NULL, NULL, false, false, "127.0.0.1" }, /* nothing given: loopback TCP */
		{ "", "", true, false, "127.0.0.1" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct db_target t = { .host = rows[i].host,
				       .socket = rows[i].socket,
				       .port = 6032,
				       .port_explicit = rows[i].port_explicit,
				       .tls = rows[i].verified,
				       .tls_verify = rows[i].verified };
		const char *got = db_route(&t);

		if (!rows[i].want ? got != NULL : !got || strcmp(got, rows[i].want) != 0)
			fail_msg("row %zu (%s, %s, port %s): got %s, expected %s", i,
				 rows[i].host ? rows[i].host : "NULL", rows[i].socket ? rows[i].socket : "NULL",
				 rows[i].port_explicit ? "given" : "default", got ? got : "the socket",
				 rows[i].want ? rows[i].want : "the socket");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_db_route),
		cmocka_unit_test(test_dbauth_asked),
	};

	return cmocka_run_group_tests_name("db", tests, NULL, NULL);
}
