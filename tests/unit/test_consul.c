/* test_consul.c: unit tests of lib/consul*.c: the KV listing parser and the index rules from data
 * files, the CONSUL_* environment, addresses, and requests against a canned local HTTP server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "consul.h"
#include "consul_acl.h"
#include "consul_login.h"
#include "log.h"
#include "testdata.h"

/* -- the parser, from tests/data/consul/<case>.json + <case>.expect ------------------------------ */

static void put_escaped(sk_buf *b, const char *s, size_t n)
{
	assert_true(sk_buf_add(b, "\"", 1));
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch >= 0x7f || ch == '"' || ch == '\\')
			assert_true(sk_buf_addf(b, "\\x%02x", ch));
		else
			assert_true(sk_buf_add(b, &s[i], 1));
	}
	assert_true(sk_buf_add(b, "\"", 1));
}

/* The listing as the .expect files spell it. */
static void render(const struct consul_kv_list *l, sk_buf *b)
{
	assert_true(sk_buf_addf(b, "ok %zu\n", l->n));
	for (size_t i = 0; i < l->n; i++) {
		const struct consul_kv *kv = &l->items[i];

		assert_true(sk_buf_add(b, "key=", 4));
		put_escaped(b, kv->key, strlen(kv->key));
		assert_true(sk_buf_addf(b, " create=%" PRIu64 " modify=%" PRIu64 " flags=%" PRIu64 " session=",
					kv->create_index, kv->modify_index, kv->flags));
		if (kv->session)
			put_escaped(b, kv->session, strlen(kv->session));
		else
			assert_true(sk_buf_add(b, "-", 1));
		assert_true(sk_buf_add(b, " value=", 7));
		assert_int_equal(kv->value[kv->len], '\0');
		put_escaped(b, kv->value, kv->len);
		assert_true(sk_buf_add(b, "\n", 1));
	}
}

/* What a parse gave, as the .expect files spell it ("error <why>" or the rendered listing). */
static void outcome(int rc, struct consul_kv_list *l, const char *err, sk_buf *b)
{
	if (rc < 0) {
		assert_int_equal(l->n, 0);
		assert_null(l->items);
		assert_true(sk_buf_addf(b, "error %s\n", err));
	} else {
		render(l, b);
		consul_kv_list_free(l);
	}
}

/* Feed `body` in pieces: cut at `cut` (one split), or one byte at a time (cut == SIZE_MAX). */
static void parse_pieces(enum consul_listing_kind kind, const char *body, size_t len, size_t cut, sk_buf *b)
{
	struct consul_listing *p = consul_listing_new(kind, len ? len : 1);
	struct consul_kv_list l = { 0 };
	char err[256] = "";
	int rc = 0;

	if (cut == SIZE_MAX) {
		for (size_t i = 0; i < len && rc == 0; i++)
			rc = consul_listing_feed(p, body + i, 1);
	} else {
		rc = consul_listing_feed(p, body, cut);
		if (rc == 0)
			rc = consul_listing_feed(p, body + cut, len - cut);
	}
	if (rc == 0)
		rc = consul_listing_finish(p, &l, err, sizeof(err));
	else
		assert_int_equal(consul_listing_finish(p, &l, err, sizeof(err)), -1);
	outcome(rc, &l, err, b);
	consul_listing_free(p);
}

/* Every case, parsed whole and then fed as the network may deliver it: cut at every byte boundary
 * and byte by byte, the answer (the entries, or the error with its byte offsets) is the same. */
static void test_parse_cases(void **state)
{
	char **files;
	size_t n = testdata_list("consul", ".json", &files);
	int failed = 0;

	(void)state;
	assert_true(n >= 40);
	for (size_t i = 0; i < n; i++) {
		char expect_path[2100], err[256], *body = NULL, *expect;
		struct consul_kv_list l = { 7, (struct consul_kv *)&l }; /* garbage: the parser must reset it */
		size_t len = 0;
		sk_buf got;
		int rc;

		assert_int_equal(sk_read_file(files[i], 1 << 20, &body, &len, err, sizeof(err)), 0);
		snprintf(expect_path, sizeof(expect_path), "%.*s.expect", (int)(strlen(files[i]) - 5), files[i]);
		expect = testdata_read(expect_path);
		err[0] = '\0';
		rc = consul_parse_kv_json(body, len, &l, err, sizeof(err));
		sk_buf_init(&got, 1 << 20);
		outcome(rc, &l, err, &got);
		if (strncmp(expect, "error ", 6) == 0) {
			char *want = expect + 6;

			want[strcspn(want, "\n")] = '\0';
			if (rc != -1 || !strstr(err, want)) {
				fprintf(stderr, "%s: want error containing '%s', got rc=%d '%s'\n", files[i], want, rc,
					got.data);
				failed++;
			}
		} else if (strcmp(got.data, expect) != 0) {
			fprintf(stderr, "%s:\n--- want\n%s--- got\n%s", files[i], expect, got.data);
			failed++;
		}
		for (size_t cut = 0; cut <= len + 1; cut++) {
			sk_buf piece;

			sk_buf_init(&piece, 1 << 20);
			parse_pieces(CONSUL_LISTING_KV, body, len, cut > len ? SIZE_MAX : cut, &piece);
			if (strcmp(piece.data, got.data) != 0) {
				fprintf(stderr, "%s cut at %zu:\n--- whole\n%s--- pieces\n%s", files[i], cut, got.data,
					piece.data);
				failed++;
				cut = len + 1;
			}
			sk_buf_free(&piece);
		}
		sk_buf_free(&got);
		free(body);
		free(expect);
		free(files[i]);
	}
	free(files);
	assert_int_equal(failed, 0);
}

/* A health listing split anywhere gives the same instances. */
static void test_stream_health_splits(void **state)
{
	static const char body[] =
		"[{\"Node\":{\"Node\":\"n1\",\"Address\":\"10.0.0.1\"},\"Service\":{\"ID\":\"db\",\"Address\":\"\","
		"\"Port\":3306,\"Weights\":{\"Passing\":3,\"Warning\":1},\"Meta\":{\"zone\":\"a]}\\\"\"}},"
		"\"Checks\":[{\"Output\":\"ok ],\"}]},\n{\"Node\":{\"Node\":\"n2\",\"Address\":\"::1\"},"
		"\"Service\":{\"ID\":\"db2\",\"Port\":3307},\"Checks\":[]}]";
	struct consul_kv_list l;
	char err[256];
	sk_buf whole;

	(void)state;
	assert_int_equal(consul_parse_health_json(body, sizeof(body) - 1, &l, err, sizeof(err)), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.items[0].key, "10.0.0.1:3306");
	assert_string_equal(l.items[1].key, "[::1]:3307");
	assert_non_null(strstr(l.items[0].value, "\"weight\":3"));
	sk_buf_init(&whole, 1 << 20);
	outcome(0, &l, err, &whole);
	for (size_t cut = 0; cut <= sizeof(body); cut++) {
		sk_buf piece;

		sk_buf_init(&piece, 1 << 20);
		parse_pieces(CONSUL_LISTING_HEALTH, body, sizeof(body) - 1, cut >= sizeof(body) ? SIZE_MAX : cut,
			     &piece);
		assert_string_equal(piece.data, whole.data);
		sk_buf_free(&piece);
	}
	sk_buf_free(&whole);
}

/* The limits that bound memory whatever the answer: the answer's size cap (exact: a byte less
 * passes), an entry's bytes, an entry's JSON values. Each refuses before storing more. */
static void test_stream_limits(void **state)
{
	static const char head[] = "[{\"Key\":\"k\",\"CreateIndex\":1,\"ModifyIndex\":1,\"X\":";
	struct {
		const char *fill; /* repeated to make the unknown field X */
		size_t times;
		const char *open, *close, *error;
	} cases[] = {
		{ "AAAA", CONSUL_ENTRY_MAX_BYTES / 4, "\"", "\"", "is larger than 2097152 bytes" },
		{ "AAAA", CONSUL_ENTRY_MAX_BYTES / 4 - 20, "\"", "\"", NULL },
		{ "0,", CONSUL_ENTRY_MAX_VALUES, "[", "0]", "holds more than 16384 JSON values" },
		{ "0,", CONSUL_ENTRY_MAX_VALUES - 10, "[", "0]", NULL },
		{ "{},", 9000, "[", "{}]", "holds more than 16384 JSON values" },
	};
	struct consul_kv_list l;
	char err[256];

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		sk_buf b;
		int rc;

		sk_buf_init(&b, 8u << 20);
		assert_true(sk_buf_add(&b, head, sizeof(head) - 1) && sk_buf_addf(&b, "%s", cases[i].open));
		for (size_t k = 0; k < cases[i].times; k++)
			assert_true(sk_buf_addf(&b, "%s", cases[i].fill));
		assert_true(sk_buf_addf(&b, "%s}]", cases[i].close));
		err[0] = '\0';
		rc = consul_parse_kv_json(b.data, b.len, &l, err, sizeof(err));
		if (cases[i].error) {
			if (rc != -1 || !strstr(err, cases[i].error))
				fail_msg("case %zu: want '%s', got rc %d '%s'", i, cases[i].error, rc, err);
		} else {
			if (rc != 0)
				fail_msg("case %zu: want success, got '%s'", i, err);
			assert_int_equal(l.n, 1);
			consul_kv_list_free(&l);
		}
		sk_buf_free(&b);
	}

	/* The answer's cap counts every byte fed, white space included. */
	{
		static const char body[] = "[{\"Key\":\"k\",\"CreateIndex\":1,\"ModifyIndex\":1}]   ";
		size_t len = sizeof(body) - 1;
		struct consul_listing *p = consul_listing_new(CONSUL_LISTING_KV, len);

		assert_int_equal(consul_listing_feed(p, body, len), 0);
		assert_int_equal(consul_listing_finish(p, &l, err, sizeof(err)), 0);
		assert_int_equal(l.n, 1);
		consul_kv_list_free(&l);
		consul_listing_free(p);

		p = consul_listing_new(CONSUL_LISTING_KV, len - 1);
		assert_int_equal(consul_listing_feed(p, body, 10), 0);
		assert_int_equal(consul_listing_feed(p, body + 10, len - 10), -1);
		assert_int_equal(consul_listing_feed(p, "", 0), -1); /* sticky */
		assert_int_equal(consul_listing_finish(p, &l, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "answer larger than 47 bytes (the response size cap)"));
		assert_int_equal(l.n, 0);
		consul_listing_free(p);
	}
}

static void test_parse_item_cap(void **state)
{
	static const char item[] = "{\"Key\":\"k\",\"CreateIndex\":1,\"ModifyIndex\":1},";
	struct consul_kv_list l;
	char err[256];
	sk_buf b;

	(void)state;
	sk_buf_init(&b, 64u << 20);
	assert_true(sk_buf_add(&b, "[", 1));
	for (int i = 0; i < CONSUL_KV_MAX_ITEMS; i++)
		assert_true(sk_buf_add(&b, item, sizeof(item) - 1));
	b.data[b.len - 1] = ']';
	assert_int_equal(consul_parse_kv_json(b.data, b.len, &l, err, sizeof(err)), 0);
	assert_int_equal(l.n, CONSUL_KV_MAX_ITEMS);
	consul_kv_list_free(&l);

	b.data[b.len - 1] = ',';
	assert_true(sk_buf_add(&b, item, sizeof(item) - 1));
	b.data[b.len - 1] = ']';
	assert_int_equal(consul_parse_kv_json(b.data, b.len, &l, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "more than 100000 entries"));
	assert_null(l.items);
	sk_buf_free(&b);
}

/* -- the index rules, from tests/data/consul/next-index.table ------------------------------------- */

static void test_next_index_table(void **state)
{
	char path[1024], *text, *line, *save = NULL;
	int rows = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/consul/next-index.table", testdata_dir());
	text = testdata_read(path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long prev, got, want;

		if (line[0] == '#' || !line[strspn(line, " \t")])
			continue;
		assert_int_equal(sscanf(line, "%llu %llu %llu", &prev, &got, &want), 3);
		if (consul_next_index(prev, got) != want)
			fail_msg("%s: got %" PRIu64, line, consul_next_index(prev, got));
		rows++;
	}
	assert_true(rows >= 8);
	free(text);
}

/* -- configuration ---------------------------------------------------------------------------------- */

static const char *const env_names[] = { "CONSUL_HTTP_ADDR",  "CONSUL_HTTP_TOKEN",     "CONSUL_HTTP_TOKEN_FILE",
					 "CONSUL_HTTP_AUTH",  "CONSUL_HTTP_SSL",       "CONSUL_HTTP_SSL_VERIFY",
					 "CONSUL_CACERT",     "CONSUL_CAPATH",         "CONSUL_CLIENT_CERT",
					 "CONSUL_CLIENT_KEY", "CONSUL_TLS_SERVER_NAME" };

static void clear_env(void)
{
	for (size_t i = 0; i < SK_ARRAY_LEN(env_names); i++)
		unsetenv(env_names[i]);
}

/* -- proxies, from tests/data/consul/proxy.table ---------------------------------------------------- */

static char *table_field(char **cur)
{
	char *f = *cur, *bar = strchr(f, '|'), *end;

	if (bar) {
		*bar = '\0';
		*cur = bar + 1;
	} else {
		*cur = f + strlen(f);
	}
	while (*f == ' ' || *f == '\t')
		f++;
	end = f + strlen(f);
	while (end > f && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return strcmp(f, "-") == 0 ? NULL : f;
}

static void test_proxy_table(void **state)
{
	char path[1024], *text, *line, *save = NULL;
	int rows = 0;

	(void)state;
	snprintf(path, sizeof(path), "%s/consul/proxy.table", testdata_dir());
	text = testdata_read(path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char scheme[16], host[128], err[256], *cur = line, *target, *http, *https, *no, *want, *why, *got;
		const char *shown;
		long port;
		int rc;

		if (line[0] == '#' || !line[strspn(line, " \t")])
			continue;
		/* NO_PROXY is kept untrimmed: the function trims its entries itself. */
		target = table_field(&cur);
		http = table_field(&cur);
		https = table_field(&cur);
		no = cur;
		cur = strchr(cur, '|');
		assert_non_null(cur);
		*cur++ = '\0';
		if (strcmp(no, " - ") == 0)
			no = NULL;
		want = table_field(&cur);
		why = table_field(&cur);
		assert_non_null(target);
		assert_non_null(want);
		assert_int_equal(sscanf(target, "%15s %127s %ld", scheme, host, &port), 3);
		err[0] = '\0';
		rc = consul_proxy_for(&(struct consul_proxy_dest){ scheme, host, port },
				      &(struct consul_proxy_env){ http, https, no }, &got, err, sizeof(err));
		shown = rc < 0 ? "error" : got ? got : "direct";
		if (strcmp(shown, want) != 0)
			fail_msg("%s %s %ld, NO_PROXY '%s' (%s): want %s, got %s %s", scheme, host, port, no ? no : "",
				 why, want, shown, err);
		/* A refusal names the variable and quotes nothing of the value. */
		if (rc < 0 && (!strstr(err, "_PROXY") || strstr(err, "@") || strstr(err, "p:3128")))
			fail_msg("%s: the refusal '%s' quotes the value or names no variable", why, err);
		free(got);
		rows++;
	}
	assert_true(rows >= 70);
	free(text);
}

/* Each row of tests/data/consul/<name> ("a | b | c", '#' comments) given to the row function
 * (ctx) as its first two fields and the third (NULL when absent). Returns the number of rows. */
typedef void (*three_fields)(const char *a, const char *b, const char *c);

static void split_row(char *line, void *ctx)
{
	char *cur = line, *a = table_field(&cur), *b = table_field(&cur);

	assert_non_null(a);
	assert_non_null(b);
	(*(three_fields *)ctx)(a, b, table_field(&cur));
}

static int each_row(const char *name, three_fields row)
{
	char path[256];

	snprintf(path, sizeof(path), "consul/%s", name);
	return testdata_each_line(path, split_row, &row);
}

static void local_host_row(const char *host, const char *want, const char *why)
{
	if (consul_host_is_local(host) != (strcmp(want, "local") == 0))
		fail_msg("%s (%s): want %s", host, why ? why : "", want);
}

/* consul_host_is_local never follows the text: every spelling of this machine, from a table. */
static void test_local_host_table(void **state)
{
	(void)state;
	assert_true(each_row("local-host.table", local_host_row) >= 30);
}

static void acl_rule_row(const char *request, const char *want, const char *why)
{
	char method[16], rule[300];
	size_t m = strcspn(request, " ");

	snprintf(method, sizeof(method), "%.*s", (int)m, request);
	consul_acl_rule(method, request[m] ? request + m + 1 : "", rule, sizeof(rule));
	if (strcmp(rule, want) != 0)
		fail_msg("%s (%s): want %s, got %s", request, why ? why : "", want, rule);
}

/* consul_acl_rule: the rule a 403 names, per endpoint the project calls, from a table. */
static void test_acl_rule_table(void **state)
{
	char small[8];

	(void)state;
	assert_true(each_row("acl-rule.table", acl_rule_row) >= 20);
	assert_string_equal(consul_acl_rule("GET", "/v1/agent/self", small, sizeof(small)), "agent_p");
}

static void redact_row(const char *url, const char *want, const char *unused)
{
	char out[128];
	bool fits = consul_proxy_redact(url, out, sizeof(out));

	(void)unused;
	if (strcmp(out, want) != 0)
		fail_msg("%s: want %s, got %s", url, want, out);
	if (!fits)
		assert_string_equal(want, "***");
}

/* consul_proxy_redact: a proxy URL as it may be shown, from a table (input | shown). */
static void test_proxy_redact_table(void **state)
{
	(void)state;
	assert_true(each_row("proxy-redact.table", redact_row) >= 10);
}

static void test_config_defaults(void **state)
{
	struct consul_config c;
	char err[256];

	(void)state;
	clear_env();
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), 0);
	assert_string_equal(c.addr, "127.0.0.1:8500");
	assert_null(c.token);
	assert_null(c.token_file);
	assert_false(c.ssl);
	assert_true(c.ssl_verify);
	assert_int_equal(c.max_response, CONSUL_MAX_RESPONSE_DEFAULT);
	consul_config_free(&c);
	assert_null(c.addr);
}

static void test_config_env(void **state)
{
	struct consul_config c;
	char err[256], line[128];

	(void)state;
	clear_env();
	setenv("CONSUL_HTTP_ADDR", "https://consul.example:8501", 1);
	setenv("CONSUL_HTTP_TOKEN", "tok-1234-secret", 1);
	setenv("CONSUL_HTTP_TOKEN_FILE", "/run/secrets/consul-token", 1);
	setenv("CONSUL_HTTP_SSL", "true", 1);
	setenv("CONSUL_HTTP_SSL_VERIFY", "0", 1);
	setenv("CONSUL_CACERT", "/ca.pem", 1);
	setenv("CONSUL_CAPATH", "/ca.d", 1);
	setenv("CONSUL_CLIENT_CERT", "/c.pem", 1);
	setenv("CONSUL_CLIENT_KEY", "/k.pem", 1);
	setenv("CONSUL_TLS_SERVER_NAME", "server.dc1.consul", 1);
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), 0);
	assert_string_equal(c.addr, "https://consul.example:8501");
	assert_string_equal(c.token, "tok-1234-secret");
	assert_string_equal(c.token_file, "/run/secrets/consul-token");
	assert_true(c.ssl);
	assert_false(c.ssl_verify);
	assert_string_equal(c.cacert, "/ca.pem");
	assert_string_equal(c.capath, "/ca.d");
	assert_string_equal(c.client_cert, "/c.pem");
	assert_string_equal(c.client_key, "/k.pem");
	assert_string_equal(c.tls_server_name, "server.dc1.consul");
	/* The token from the environment is never printed. */
	snprintf(line, sizeof(line), "token=tok-1234-secret");
	log_redact(line);
	assert_string_equal(line, "token=***");
	consul_config_set(&c.addr, "10.0.0.9:8500");
	assert_string_equal(c.addr, "10.0.0.9:8500");
	consul_config_set(&c.token, NULL);
	assert_null(c.token);
	consul_config_free(&c);
	clear_env();
}

static void test_config_env_errors(void **state)
{
	struct consul_config c;
	char err[256];

	(void)state;
	clear_env();
	setenv("CONSUL_HTTP_SSL", "maybe", 1);
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "CONSUL_HTTP_SSL: not a boolean"));
	consul_config_free(&c);
	clear_env();

	setenv("CONSUL_HTTP_SSL_VERIFY", "F", 1);
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), 0);
	assert_false(c.ssl_verify);
	consul_config_free(&c);
	clear_env();

	setenv("CONSUL_CLIENT_CERT", "/c.pem", 1);
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "CONSUL_CLIENT_CERT is set without CONSUL_CLIENT_KEY"));
	consul_config_free(&c);
	clear_env();

	setenv("CONSUL_CLIENT_KEY", "/k.pem", 1);
	assert_int_equal(consul_config_from_env(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "CONSUL_CLIENT_KEY is set without CONSUL_CLIENT_CERT"));
	consul_config_free(&c);
	clear_env();
}

static void test_addresses(void **state)
{
	static const struct {
		const char *addr;
		bool ssl;
		const char *server_name;
		const char *url; /* NULL: an error containing `error` */
		const char *error;
	} cases[] = {
		{ NULL, false, NULL, "http://127.0.0.1:8500", NULL },
		{ "127.0.0.1:8500", false, NULL, "http://127.0.0.1:8500", NULL },
		{ "consul.service:8500", true, NULL, "https://consul.service:8500", NULL },
		{ "http://10.1.2.3:8500", false, NULL, "http://10.1.2.3:8500", NULL },
		{ "http://10.1.2.3:8500", true, NULL, "https://10.1.2.3:8500", NULL },
		{ "https://10.1.2.3:8501", false, NULL, "https://10.1.2.3:8501", NULL },
		{ "https://proxy.example/consul/", false, NULL, "https://proxy.example/consul", NULL },
		{ "[::1]:8500", false, NULL, "http://[::1]:8500", NULL },
		{ "unix:///run/consul/http.sock", false, NULL, "http://localhost", NULL },
		{ "https://10.1.2.3:8501", false, "server.dc1.consul", "https://server.dc1.consul:8501", NULL },
		{ "10.1.2.3:8500", false, "server.dc1.consul", "http://10.1.2.3:8500", NULL },
		{ "ftp://10.1.2.3", false, NULL, NULL, "unknown scheme" },
		{ "unix://relative.sock", false, NULL, NULL, "absolute path" },
		{ "10.1.2.3:0", false, NULL, NULL, "bad port" },
		{ "10.1.2.3:http", false, NULL, NULL, "bad port" },
		{ "user:pw@10.1.2.3:8500", false, NULL, NULL, "unexpected character" },
		{ "10.1.2.3:8500?x=1", false, NULL, NULL, "unexpected character" },
		{ "http://", false, NULL, NULL, "no host" },
		{ "[::1:8500", false, NULL, NULL, "bad IPv6" },
	};

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		struct consul_config cfg = { 0 };
		struct consul *c;
		char err[256] = "";

		cfg.ssl = cases[i].ssl;
		cfg.ssl_verify = true;
		consul_config_set(&cfg.addr, cases[i].addr);
		consul_config_set(&cfg.tls_server_name, cases[i].server_name);
		c = consul_new(&cfg, err, sizeof(err));
		if (cases[i].url) {
			if (!c)
				fail_msg("%s: %s", cases[i].addr, err);
			assert_string_equal(consul_url(c), cases[i].url);
		} else {
			if (c || !strstr(err, cases[i].error))
				fail_msg("%s: want error '%s', got '%s'", cases[i].addr, cases[i].error, err);
		}
		consul_free(c);
		consul_config_free(&cfg);
	}
}

static void test_new_token_file(void **state)
{
	struct consul_config cfg = { 0 };
	char err[256];

	(void)state;
	consul_config_set(&cfg.token_file, "/nonexistent/consul-token");
	assert_null(consul_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "consul token file /nonexistent/consul-token"));
	consul_config_free(&cfg);

	consul_config_set(&cfg.client_key, "/k.pem");
	assert_null(consul_new(&cfg, err, sizeof(err)));
	assert_non_null(strstr(err, "client certificate"));
	consul_config_free(&cfg);
}

static void test_consistency_names(void **state)
{
	enum consul_consistency m;

	(void)state;
	assert_true(consul_consistency_parse("stale", &m));
	assert_int_equal(m, CONSUL_STALE);
	assert_true(consul_consistency_parse("consistent", &m));
	assert_int_equal(m, CONSUL_CONSISTENT);
	assert_true(consul_consistency_parse("default", &m));
	assert_int_equal(m, CONSUL_DEFAULT);
	assert_false(consul_consistency_parse("leader", &m));
	assert_int_equal(consul_wait_budget_ms(16000), 16000 + 1000 + 3000);
}

/* -- requests against a canned HTTP server ----------------------------------------------------------- */

struct canned {
	int lfd;
	unsigned port;
	pthread_t thread;
	const char *response; /* written after the request; NULL: never answer, wait for the client to go */
	char request[16384];
	size_t reqlen;
};

static void *serve_one(void *arg)
{
	struct canned *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	long want = -1;

	s->reqlen = 0;
	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t r = read(fd, s->request + s->reqlen, sizeof(s->request) - 1 - s->reqlen);
		char *end;

		if (r <= 0)
			break;
		s->reqlen += (size_t)r;
		s->request[s->reqlen] = '\0';
		end = strstr(s->request, "\r\n\r\n");
		if (end && want < 0) {
			char *cl = strcasestr(s->request, "\r\nContent-Length:");

			want = (long)(end + 4 - s->request) + (cl && cl < end ? strtol(cl + 17, NULL, 10) : 0);
		}
		if (want >= 0 && (long)s->reqlen >= want)
			break;
	}
	if (s->response) {
		size_t n = strlen(s->response);

		if (write(fd, s->response, n) != (ssize_t)n)
			fprintf(stderr, "canned server: short write\n");
	} else {
		char sink[256];

		while (read(fd, sink, sizeof(sink)) > 0)
			;
	}
	close(fd);
	return NULL;
}

static void canned_start(struct canned *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	memset(s, 0, sizeof(*s));
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(s->lfd, 8), 0);
	assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &len), 0);
	s->port = ntohs(a.sin_port);
}

static void canned_expect(struct canned *s, const char *response)
{
	s->response = response;
	assert_int_equal(pthread_create(&s->thread, NULL, serve_one, s), 0);
}

static void canned_wait(struct canned *s)
{
	pthread_join(s->thread, NULL);
}

static struct consul *client_for(const struct canned *s, const char *token, const char *dc, size_t max_response)
{
	struct consul_config cfg = { 0 };
	struct consul *c;
	char addr[64], err[256];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s->port);
	consul_config_set(&cfg.addr, addr);
	consul_config_set(&cfg.token, token);
	consul_config_set(&cfg.datacenter, dc);
	cfg.max_response = max_response;
	c = consul_new(&cfg, err, sizeof(err));
	if (!c)
		fail_msg("consul_new: %s", err);
	consul_config_free(&cfg);
	return c;
}

/* consul_kv_list with the read given by value and its meta copied out. */
static int kv_list(struct consul *c, const char *prefix, struct consul_read r, struct consul_kv_list *out,
		   struct consul_meta *m, char *err, size_t errlen)
{
	int rc = consul_kv_list(c, prefix, &r, out, err, errlen);

	*m = r.meta;
	return rc;
}

static const char kv_answer[] =
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: 7\r\nX-Consul-Knownleader: true\r\n"
	"X-Consul-Lastcontact: 12\r\nX-Consul-Results-Filtered-By-Acls: true\r\nContent-Length: 76\r\n"
	"Connection: close\r\n\r\n"
	"[{\"Key\":\"a b/c:1\",\"Value\":\"dg==\",\"CreateIndex\":3,\"ModifyIndex\":7,\"Flags\":0}]";

static void test_kv_list_request(void **state)
{
	struct canned s;
	struct consul *c;
	struct consul_kv_list l;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(5000);
	char err[256];

	(void)state;
	canned_start(&s);
	c = client_for(&s, "the-acl-token", "dc 2", 0);
	canned_expect(&s, kv_answer);
	assert_int_equal(
		kv_list(c, "a b/", (struct consul_read){ 5, 1000, CONSUL_STALE, &dl }, &l, &m, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_non_null(
		strstr(s.request, "GET /v1/kv/a%20b/?recurse&index=5&wait=1000ms&stale&dc=dc%202 HTTP/1.1\r\n"));
	assert_non_null(strstr(s.request, "\r\nX-Consul-Token: the-acl-token\r\n"));
	assert_null(strstr(s.request, "token="));
	assert_int_equal(l.n, 1);
	assert_string_equal(l.items[0].key, "a b/c:1");
	assert_string_equal(l.items[0].value, "v");
	assert_int_equal(m.index, 7);
	assert_true(m.known_leader);
	assert_int_equal(m.last_contact_ms, 12);
	assert_true(m.filtered_by_acls);
	assert_int_equal(m.http_status, 200);
	consul_kv_list_free(&l);

	/* No index: a plain read, no wait; consistent mode. */
	canned_expect(&s, kv_answer);
	assert_int_equal(
		kv_list(c, "x", (struct consul_read){ 0, 1000, CONSUL_CONSISTENT, &dl }, &l, &m, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_non_null(strstr(s.request, "GET /v1/kv/x?recurse&consistent&dc=dc%202 HTTP/1.1\r\n"));
	consul_kv_list_free(&l);
	consul_free(c);
	close(s.lfd);
}

static void test_kv_list_answers(void **state)
{
	struct canned s;
	struct consul *c;
	struct consul_kv_list l;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(5000);
	char err[256];

	(void)state;
	canned_start(&s);
	c = client_for(&s, NULL, NULL, 300);

	/* 404: an empty prefix, with its index. */
	canned_expect(&s,
		      "HTTP/1.1 404 Not Found\r\nX-Consul-Index: 9\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
	assert_int_equal(
		kv_list(c, "none/", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_null(strstr(s.request, "X-Consul-Token"));
	assert_int_equal(l.n, 0);
	assert_int_equal(m.index, 9);
	assert_int_equal(m.http_status, 404);
	assert_int_equal(m.reason, CONSUL_OK);
	assert_false(m.known_leader);

	/* 500: the status and the first line of the body. */
	canned_expect(&s, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 24\r\nConnection: close\r\n\r\n"
			  "No cluster leader\nsecond");
	assert_int_equal(kv_list(c, "p/", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)),
			 -1);
	canned_wait(&s);
	assert_string_equal(err, "GET /v1/kv/p/?recurse: HTTP 500: No cluster leader");
	assert_int_equal(m.http_status, 500);
	assert_int_equal(m.reason, CONSUL_HTTP_ERROR);
	assert_string_equal(consul_reason_str(m.reason), "http_error");
	assert_int_equal(l.n, 0);

	/* 200 without X-Consul-Index. */
	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]");
	assert_int_equal(kv_list(c, "p/", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)),
			 -1);
	canned_wait(&s);
	assert_non_null(strstr(err, "X-Consul-Index"));
	assert_int_equal(m.reason, CONSUL_BAD_ANSWER);

	/* A malformed body. */
	canned_expect(&s, "HTTP/1.1 200 OK\r\nX-Consul-Index: 3\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}");
	assert_int_equal(kv_list(c, "p/", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)),
			 -1);
	canned_wait(&s);
	assert_non_null(strstr(err, "bad answer: not a JSON array"));
	assert_int_equal(m.reason, CONSUL_BAD_ANSWER);

	/* Bigger than the cap (300 bytes here): an error, not an allocation. */
	{
		static char big[2048];
		int n = snprintf(
			big, sizeof(big),
			"HTTP/1.1 200 OK\r\nX-Consul-Index: 3\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n");

		memset(big + n, ' ', 1000);
		big[n + 1000] = '\0';
		canned_expect(&s, big);
		assert_int_equal(
			kv_list(c, "p/", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)),
			-1);
		canned_wait(&s);
		assert_non_null(strstr(err, "answer larger than 300 bytes"));
		assert_int_equal(m.reason, CONSUL_TOO_LARGE);
	}

	/* Keys that URL normalisation would turn into other keys never leave the process. */
	assert_int_equal(
		kv_list(c, "a/../b", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "'..' segment"));
	assert_int_equal(m.reason, CONSUL_CLIENT_ERROR);
	assert_int_equal(m.http_status, 0);
	assert_int_equal(
		kv_list(c, "/abs", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "starts with '/'"));
	consul_free(c);
	close(s.lfd);
}

static void test_deadline_and_cancel(void **state)
{
	struct canned s;
	struct consul *c;
	struct consul_kv_list l;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(200);
	int64_t t0 = deadline_now_us();
	char err[256];
	int p[2];

	(void)state;
	canned_start(&s);
	c = client_for(&s, NULL, NULL, 0);

	/* A server that never answers: the deadline ends it. */
	canned_expect(&s, NULL);
	assert_int_equal(
		kv_list(c, "p/", (struct consul_read){ 1, 60000, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), -1);
	assert_true(deadline_now_us() - t0 < 450 * 1000);
	canned_wait(&s);
	assert_non_null(strstr(err, "timeout after"));
	assert_int_equal(m.http_status, 0);
	assert_int_equal(m.reason, CONSUL_TIMEOUT);

	/* An expired deadline: no request at all. */
	assert_int_equal(
		kv_list(c, "p/", (struct consul_read){ 1, 60000, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "no time left"));
	assert_int_equal(m.reason, CONSUL_TIMEOUT);

	/* A readable cancel descriptor stops a request at once. */
	assert_int_equal(pipe(p), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	consul_set_cancel_fd(c, p[0]);
	dl = deadline_in_ms(5000);
	t0 = deadline_now_us();
	canned_expect(&s, NULL);
	assert_int_equal(
		kv_list(c, "p/", (struct consul_read){ 1, 60000, CONSUL_DEFAULT, &dl }, &l, &m, err, sizeof(err)), -1);
	assert_true(deadline_now_us() - t0 < 300 * 1000);
	assert_non_null(strstr(err, "cancelled"));
	assert_int_equal(m.reason, CONSUL_CANCELLED);
	consul_free(c); /* closes the connection: the server thread ends */
	canned_wait(&s);
	close(p[0]);
	close(p[1]);
	close(s.lfd);
}

static void test_writes_and_sessions(void **state)
{
	static const char sid[] = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";
	struct canned s;
	struct consul *c;
	deadline_t dl = deadline_in_ms(5000);
	char err[256], id[CONSUL_SESSION_ID_MAX], leader[64];
	bool done, gone;

	(void)state;
	canned_start(&s);
	c = client_for(&s, "tok-abcdef", NULL, 0);

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ntrue");
	assert_int_equal(consul_kv_put(c, &(struct consul_kv_write){ "svc/h:3306", "h:3306", 6, sid }, &dl, &done, err,
				       sizeof(err)),
			 0);
	canned_wait(&s);
	assert_true(done);
	assert_non_null(strstr(s.request, "PUT /v1/kv/svc/h%3A3306?acquire=adf4238a-882b-9ddc-4a9d-5b6758e4159e HTTP"));
	assert_non_null(strstr(s.request, "\r\n\r\nh:3306"));
	assert_non_null(strstr(s.request, "X-Consul-Token: tok-abcdef\r\n"));

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nfalse");
	assert_int_equal(consul_kv_put(c, &(struct consul_kv_write){ "svc/h:3306", "h:3306", 6, sid }, &dl, &done, err,
				       sizeof(err)),
			 0);
	canned_wait(&s);
	assert_false(done);

	canned_expect(&s, "HTTP/1.1 403 Forbidden\r\nContent-Length: 17\r\nConnection: close\r\n\r\nPermission denied");
	assert_int_equal(
		consul_kv_put(c, &(struct consul_kv_write){ "svc/x", "v", 1, NULL }, &dl, &done, err, sizeof(err)), -1);
	canned_wait(&s);
	assert_string_equal(err, "PUT /v1/kv/svc/x denied: the token needs key_prefix \"svc/x\" write (see "
				 "docs/consul-acl.md)");
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_FORBIDDEN);
	assert_non_null(strstr(s.request, "PUT /v1/kv/svc/x HTTP/1.1\r\n"));

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ntrue");
	assert_int_equal(consul_kv_delete(c, "svc/", true, &dl, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_non_null(strstr(s.request, "DELETE /v1/kv/svc/?recurse HTTP/1.1\r\n"));
	assert_int_equal(consul_kv_delete(c, "", true, &dl, err, sizeof(err)), -1);

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 47\r\nConnection: close\r\n\r\n"
			  "{\"ID\":\"adf4238a-882b-9ddc-4a9d-5b6758e4159e\"}\n  ");
	assert_int_equal(consul_session_create(
				 c, &(struct consul_session_spec){ "clustercheck \"h\"", 15, "delete", "0s", false },
				 &dl, id, err, sizeof(err)),
			 0);
	canned_wait(&s);
	assert_string_equal(id, sid);
	assert_non_null(strstr(s.request, "PUT /v1/session/create HTTP/1.1\r\n"));
	assert_non_null(strstr(s.request, "\r\n\r\n{\"Name\":\"clustercheck "
					  "\\\"h\\\"\",\"TTL\":\"15s\",\"Behavior\":\"delete\",\"LockDelay\":\"0s\","
					  "\"NodeChecks\":[],\"Checks\":[]}"));
	assert_int_equal(consul_session_create(c, &(struct consul_session_spec){ "n", 15, "explode", "0s", true }, &dl,
					       id, err, sizeof(err)),
			 -1);

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]");
	assert_int_equal(consul_session_renew(c, sid, &dl, &gone, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_false(gone);
	assert_non_null(strstr(s.request, "PUT /v1/session/renew/adf4238a-882b-9ddc-4a9d-5b6758e4159e HTTP/1.1\r\n"));

	canned_expect(&s, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
	assert_int_equal(consul_session_renew(c, sid, &dl, &gone, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_true(gone);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_OK);
	assert_int_equal(consul_session_renew(c, "../../kv/x", &dl, &gone, err, sizeof(err)), -1);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_CLIENT_ERROR);

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nConnection: close\r\n\r\ntrue");
	assert_int_equal(consul_session_destroy(c, sid, &dl, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_non_null(strstr(s.request, "PUT /v1/session/destroy/adf4238a-882b-9ddc-4a9d-5b6758e4159e HTTP/1.1\r\n"));

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 17\r\nConnection: close\r\n\r\n\"10.1.10.12:8300\"");
	assert_int_equal(consul_leader(c, &dl, leader, sizeof(leader), err, sizeof(err)), 0);
	canned_wait(&s);
	assert_string_equal(leader, "10.1.10.12:8300");
	assert_int_equal(consul_last_meta(c)->http_status, 200);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_OK);
	consul_free(c);
	close(s.lfd);
}

static void test_connection_refused(void **state)
{
	struct canned s;
	struct consul *c;
	deadline_t dl = deadline_in_ms(3000);
	char err[256], leader[64];

	(void)state;
	canned_start(&s);
	c = client_for(&s, NULL, NULL, 0);
	close(s.lfd); /* nobody listens any more */
	assert_int_equal(consul_leader(c, &dl, leader, sizeof(leader), err, sizeof(err)), -1);
	assert_non_null(strstr(err, "GET /v1/status/leader: "));
	assert_int_equal(consul_last_meta(c)->http_status, 0);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_UNREACHABLE);
	assert_string_equal(consul_reason_str(CONSUL_UNREACHABLE), "unreachable");
	consul_free(c);
}

/* -- the login (consul_login.h) -------------------------------------------------------------- */

static void meta_row(const char *input, const char *want, const char *unused)
{
	sk_buf out;
	char err[256] = "";
	int rc;

	(void)unused;
	sk_buf_init(&out, 4096);
	rc = consul_login_meta_json(input, &out, err, sizeof(err));
	if (strncmp(want, "error: ", 7) == 0) {
		if (rc == 0 || !strstr(err, want + 7))
			fail_msg("%s: want %s, got rc %d '%s'", input ? input : "(none)", want, rc, err);
	} else if (rc != 0 || strcmp(out.data, want) != 0) {
		fail_msg("%s: want %s, got rc %d '%s' %s", input ? input : "(none)", want, rc, out.data ? out.data : "",
			 err);
	}
	sk_buf_free(&out);
}

/* consul-login-meta into the login's Meta object, from a table. */
static void test_login_meta_table(void **state)
{
	(void)state;
	assert_true(each_row("login-meta.table", meta_row) >= 10);
}

static void time_row(const char *input, const char *want, const char *unused)
{
	int64_t ms = 0;
	bool ok = consul_login_parse_time(input, &ms);

	(void)unused;
	if (strcmp(want, "bad") == 0 ? ok : !ok || ms != strtoll(want, NULL, 10))
		fail_msg("%s: want %s, got %s %lld", input, want, ok ? "ok" : "bad", (long long)ms);
}

/* ExpirationTime and CreateTime as RFC 3339 times, from a table. */
static void test_login_time_table(void **state)
{
	(void)state;
	assert_true(each_row("login-time.table", time_row) >= 10);
}

static void renew_row(const char *life, const char *want, const char *unused)
{
	(void)unused;
	if (consul_login_renew_after_ms(strtoll(life, NULL, 10)) != strtoll(want, NULL, 10))
		fail_msg("life %s: want %s, got %lld", life, want,
			 (long long)consul_login_renew_after_ms(strtoll(life, NULL, 10)));
}

/* When a login is renewed: at 3/4 of the token's life, 5 s before its end at the latest, never
 * within 1 s; and the backoff after a failed login. */
static void test_login_renew_table(void **state)
{
	long b = 0;

	(void)state;
	assert_true(each_row("login-renew.table", renew_row) >= 5);
	for (int i = 0; i < 10; i++)
		b = consul_login_next_backoff_ms(b);
	assert_int_equal(b, CONSUL_LOGIN_BACKOFF_MAX_MS);
	assert_int_equal(consul_login_next_backoff_ms(0), CONSUL_LOGIN_BACKOFF_MIN_MS);
	assert_int_equal(consul_login_next_backoff_ms(1000), 2000);
}

static void answer_row(const char *body, const char *want, const char *unused)
{
	struct consul_login_answer a;
	char err[256] = "", got[256];
	int rc = consul_login_parse_answer(body, strlen(body), 1796342399000LL, &a, err, sizeof(err));

	(void)unused;
	if (strncmp(want, "error: ", 7) == 0) {
		if (rc == 0 || !strstr(err, want + 7))
			fail_msg("%s: want %s, got rc %d '%s'", body, want, rc, err);
		if (strstr(err, "45a3bd52"))
			fail_msg("%s: the error quotes the SecretID: %s", body, err);
		return;
	}
	if (rc != 0)
		fail_msg("%s: want %s, got '%s'", body, want, err);
	snprintf(got, sizeof(got), "ok %s %lld", a.accessor, (long long)a.life_ms);
	if (strcmp(got, want) != 0)
		fail_msg("%s: want %s, got %s", body, want, got);
	assert_string_equal(a.secret, "45a3bd52-07c7-47a4-52fd-0745e0cfe967");
}

/* The answer of POST /v1/acl/login, from a table. */
static void test_login_answer_table(void **state)
{
	(void)state;
	assert_true(each_row("login-answer.table", answer_row) >= 10);
}

/* A server that answers `n` connections in turn with answers[i], keeping each request. */
struct canned_seq {
	struct canned s;
	const char *const *answers;
	size_t n;
	char requests[6][16384];
};

static void *serve_seq(void *arg)
{
	struct canned_seq *q = arg;

	for (size_t i = 0; i < q->n; i++) {
		q->s.response = q->answers[i];
		serve_one(&q->s);
		snprintf(q->requests[i], sizeof(q->requests[i]), "%s", q->s.request);
	}
	return NULL;
}

#define LOGIN_OK(secret)                                                                 \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" \
	"{\"AccessorID\":\"6a1253d2-1785-24fd-91c2-f8e78c745511\",\"SecretID\":\"" secret "\",\"AuthMethod\":\"k8s\"}"

/* Write `text` as the whole content of the file at `path`. */
static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A login (auth method "k8s", bearer token file `path` holding `jwt`, `meta`) and a client that
 * carries it, against a server answering q's answers in turn (its thread in *t). */
static struct consul *login_rig(struct canned_seq *q, char *path, const char *jwt, const char *meta,
				struct consul_login **l, pthread_t *t)
{
	char err[256] = "";
	struct consul *c;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	close(fd);
	put_file(path, jwt);
	*l = consul_login_new("k8s", path, meta, err, sizeof(err));
	assert_non_null(*l);
	canned_start(&q->s);
	assert_int_equal(pthread_create(t, NULL, serve_seq, q), 0);
	c = client_for(&q->s, "static-token", NULL, 0);
	consul_set_login(c, *l);
	return c;
}

/* The login as the clients see it: the first request logs in (the bearer token file's content in
 * the body, no token header), requests carry the SecretID, an answer 403 "ACL not found" logs in
 * again (the file read anew) and sends the request once more, and the logout sends the token it
 * destroys. Nothing of either secret reaches an error. */
static void test_login_flow(void **state)
{
	static const char kv_ok[] = "HTTP/1.1 200 OK\r\nX-Consul-Index: 9\r\nX-Consul-Knownleader: true\r\n"
				    "Connection: close\r\nContent-Length: 2\r\n\r\n[]";
	static const char *const answers[] = {
		LOGIN_OK("11111111-1111-1111-1111-111111111111"),
		kv_ok,
		"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 13\r\n\r\nACL not found",
		LOGIN_OK("22222222-2222-2222-2222-222222222222"),
		kv_ok,
		"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 4\r\n\r\ntrue",
	};
	struct canned_seq q = { .answers = answers, .n = SK_ARRAY_LEN(answers) };
	char path[] = "/tmp/sk-login-XXXXXX", err[512] = "", secret[128], line[256];
	struct consul_login *l;
	struct consul_kv_list kv;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(5000);
	pthread_t t;
	uint64_t ok, failed;
	struct consul *c = login_rig(&q, path, "jwt-one\n", "pod=p-0", &l, &t);

	(void)state;
	if (kv_list(c, "p", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &kv, &m, err, sizeof(err)) < 0)
		fail_msg("first read: %s", err);
	consul_kv_list_free(&kv);
	put_file(path, "jwt-two"); /* kubelet rotated it: the next login reads this */
	if (kv_list(c, "p", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &kv, &m, err, sizeof(err)) < 0)
		fail_msg("read after the token was revoked: %s", err);
	consul_kv_list_free(&kv);
	/* The token in use is redacted; the replaced one and the bearer tokens, which nothing holds
	 * any more, are not (rotation never fills the redactor). */
	snprintf(line, sizeof(line),
		 "22222222-2222-2222-2222-222222222222 11111111-1111-1111-1111-111111111111 "
		 "jwt-one jwt-two");
	log_redact(line);
	assert_string_equal(line, "*** 11111111-1111-1111-1111-111111111111 jwt-one jwt-two");
	assert_int_equal(consul_logout(c, &dl, err, sizeof(err)), 0);
	snprintf(line, sizeof(line), "22222222-2222-2222-2222-222222222222");
	log_redact(line);
	assert_string_equal(line, "22222222-2222-2222-2222-222222222222");
	pthread_join(t, NULL);

	assert_non_null(strstr(q.requests[0], "POST /v1/acl/login "));
	assert_non_null(strstr(q.requests[0],
			       "{\"AuthMethod\":\"k8s\",\"BearerToken\":\"jwt-one\",\"Meta\":{\"pod\":\"p-0\"}}"));
	assert_null(strcasestr(q.requests[0], "X-Consul-Token"));
	assert_non_null(strstr(q.requests[1], "GET /v1/kv/p?recurse"));
	assert_non_null(strstr(q.requests[1], "X-Consul-Token: 11111111-1111-1111-1111-111111111111\r\n"));
	assert_non_null(strstr(q.requests[2], "X-Consul-Token: 11111111-1111-1111-1111-111111111111\r\n"));
	assert_non_null(strstr(q.requests[3], "\"BearerToken\":\"jwt-two\""));
	assert_null(strcasestr(q.requests[3], "X-Consul-Token"));
	assert_non_null(strstr(q.requests[4], "X-Consul-Token: 22222222-2222-2222-2222-222222222222\r\n"));
	assert_non_null(strstr(q.requests[5], "POST /v1/acl/logout "));
	assert_non_null(strstr(q.requests[5], "X-Consul-Token: 22222222-2222-2222-2222-222222222222\r\n"));
	for (size_t i = 0; i < q.n; i++)
		assert_null(strstr(q.requests[i], "static-token"));
	consul_login_counts(l, &ok, &failed);
	assert_int_equal(ok, 2);
	assert_int_equal(failed, 0);
	assert_false(consul_login_take(l, secret, sizeof(secret)));
	consul_free(c);
	consul_login_free(l);
	close(q.s.lfd);
	unlink(path);
}

/* A login refused (403 from /v1/acl/login) fails the request with the reason "forbidden" and sets
 * a backoff: the next request fails at once, sending nothing. */
static void test_login_refused(void **state)
{
	static const char *const answers[] = {
		"HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 17\r\n\r\nPermission denied",
	};
	struct canned_seq q = { .answers = answers, .n = SK_ARRAY_LEN(answers) };
	char path[] = "/tmp/sk-login-XXXXXX", err[512] = "";
	struct consul_login *l;
	struct consul_kv_list kv;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(5000);
	pthread_t t;
	uint64_t ok, failed;
	struct consul *c = login_rig(&q, path, "jwt-secret-value", NULL, &l, &t);

	(void)state;
	assert_int_equal(kv_list(c, "p", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &kv, &m, err, sizeof(err)),
			 -1);
	pthread_join(t, NULL);
	assert_non_null(strstr(err, "POST /v1/acl/login: HTTP 403: Permission denied"));
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_FORBIDDEN);
	assert_int_equal(kv_list(c, "p", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &kv, &m, err, sizeof(err)),
			 -1);
	assert_non_null(strstr(err, "failed; next try in"));
	assert_null(strstr(err, "jwt-secret-value"));
	consul_login_counts(l, &ok, &failed);
	assert_int_equal(ok, 0);
	assert_int_equal(failed, 1);
	consul_free(c);
	consul_login_free(l);
	close(q.s.lfd);
	unlink(path);
}

/* A login that gets no answer ends at CONSUL_LOGIN_TIMEOUT_MS even when the request that needs
 * it (a blocking query) may wait longer: other threads may be waiting for that login. */
static void test_login_bounded(void **state)
{
	static const char *const answers[] = { NULL };
	struct canned_seq q = { .answers = answers, .n = 1 };
	char path[] = "/tmp/sk-login-XXXXXX", err[512] = "";
	struct consul_login *l;
	struct consul_kv_list kv;
	struct consul_meta m;
	deadline_t dl = deadline_in_ms(30000);
	pthread_t t;
	struct consul *c = login_rig(&q, path, "jwt-x", NULL, &l, &t);
	int64_t t0 = deadline_now_us(), took_ms;

	(void)state;
	assert_int_equal(kv_list(c, "p", (struct consul_read){ 0, 0, CONSUL_DEFAULT, &dl }, &kv, &m, err, sizeof(err)),
			 -1);
	took_ms = (deadline_now_us() - t0) / 1000;
	assert_true(took_ms >= CONSUL_LOGIN_TIMEOUT_MS - 100 && took_ms < CONSUL_LOGIN_TIMEOUT_MS + 2000);
	assert_non_null(strstr(err, "POST /v1/acl/login: timeout"));
	consul_free(c); /* the canned server sees the client go */
	pthread_join(t, NULL);
	consul_login_free(l);
	close(q.s.lfd);
	unlink(path);
}

/* GET /v1/agent/self: Config.Server decides consul-agent = auto; a 403 is "none", saying why; an
 * unknown token is named as such; anything else is no answer yet. */
static void test_agent_self(void **state)
{
	struct canned s;
	struct consul *c;
	deadline_t dl = deadline_in_ms(5000);
	enum consul_agent_mode mode = CONSUL_AGENT_AUTO;
	char err[300];
	const char *why = NULL;
	bool server = true;

	(void)state;
	canned_start(&s);
	c = client_for(&s, "tok-abcdef", NULL, 0);
	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 41\r\nConnection: close\r\n\r\n"
			  "{\"Config\": {\"Server\": false, \"Other\": 1}}");
	assert_int_equal(consul_agent_self(c, &dl, &server, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_false(server);
	assert_non_null(strstr(s.request, "GET /v1/agent/self HTTP/1.1\r\n"));

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 28\r\nConnection: close\r\n\r\n"
			  "{\"Config\": {\"Server\": true}}");
	assert_int_equal(consul_agent_detect(c, &dl, &mode, &why, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_int_equal(mode, CONSUL_AGENT_NONE);
	assert_string_equal(why, "Consul servers answer directly");

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 29\r\nConnection: close\r\n\r\n"
			  "{\"Config\": {\"Server\": false}}");
	assert_int_equal(consul_agent_detect(c, &dl, &mode, &why, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_int_equal(mode, CONSUL_AGENT_LOCAL);
	assert_string_equal(why, "a Consul client agent answers");

	canned_expect(&s, "HTTP/1.1 403 Forbidden\r\nContent-Length: 17\r\nConnection: close\r\n\r\nPermission denied");
	assert_int_equal(consul_agent_detect(c, &dl, &mode, &why, err, sizeof(err)), 0);
	canned_wait(&s);
	assert_int_equal(mode, CONSUL_AGENT_NONE);
	assert_non_null(strstr(why, "agent_prefix \"\" read"));
	assert_string_equal(err, "GET /v1/agent/self denied: the token needs agent_prefix \"\" read (see "
				 "docs/consul-acl.md)");

	canned_expect(&s, "HTTP/1.1 403 Forbidden\r\nContent-Length: 13\r\nConnection: close\r\n\r\nACL not found");
	assert_int_equal(consul_agent_self(c, &dl, &server, err, sizeof(err)), -1);
	canned_wait(&s);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_FORBIDDEN);
	assert_string_equal(err, "GET /v1/agent/self denied: Consul does not know the token (ACL not found: unknown, "
				 "revoked or expired) (see docs/consul-acl.md)");
	assert_null(strstr(err, "tok-abcdef"));

	canned_expect(&s, "HTTP/1.1 200 OK\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{\"Config\": {}}");
	assert_int_equal(consul_agent_self(c, &dl, &server, err, sizeof(err)), -1);
	canned_wait(&s);
	assert_int_equal(consul_last_meta(c)->reason, CONSUL_BAD_ANSWER);

	mode = CONSUL_AGENT_LOCAL;
	canned_expect(&s, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 17\r\nConnection: close\r\n\r\n"
			  "No cluster leader");
	assert_int_equal(consul_agent_detect(c, &dl, &mode, &why, err, sizeof(err)), -1);
	canned_wait(&s);
	assert_int_equal(mode, CONSUL_AGENT_LOCAL);
	assert_string_equal(err, "GET /v1/agent/self: HTTP 500: No cluster leader");
	consul_free(c);
}

static void test_agent_mode_names(void **state)
{
	enum consul_agent_mode m = CONSUL_AGENT_AUTO;

	(void)state;
	assert_true(consul_agent_mode_parse("none", &m));
	assert_int_equal(m, CONSUL_AGENT_NONE);
	assert_true(consul_agent_mode_parse("local", &m));
	assert_int_equal(m, CONSUL_AGENT_LOCAL);
	assert_true(consul_agent_mode_parse("auto", &m));
	assert_int_equal(m, CONSUL_AGENT_AUTO);
	assert_false(consul_agent_mode_parse("server", &m));
	assert_string_equal(consul_agent_mode_str(CONSUL_AGENT_NONE), "none");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_cases),          cmocka_unit_test(test_parse_item_cap),
		cmocka_unit_test(test_stream_health_splits), cmocka_unit_test(test_stream_limits),
		cmocka_unit_test(test_proxy_table),          cmocka_unit_test(test_next_index_table),
		cmocka_unit_test(test_local_host_table),     cmocka_unit_test(test_proxy_redact_table),
		cmocka_unit_test(test_config_defaults),      cmocka_unit_test(test_config_env),
		cmocka_unit_test(test_config_env_errors),    cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_new_token_file),       cmocka_unit_test(test_consistency_names),
		cmocka_unit_test(test_kv_list_request),      cmocka_unit_test(test_kv_list_answers),
		cmocka_unit_test(test_deadline_and_cancel),  cmocka_unit_test(test_writes_and_sessions),
		cmocka_unit_test(test_connection_refused),   cmocka_unit_test(test_login_meta_table),
		cmocka_unit_test(test_login_time_table),     cmocka_unit_test(test_login_renew_table),
		cmocka_unit_test(test_login_answer_table),   cmocka_unit_test(test_login_flow),
		cmocka_unit_test(test_login_refused),        cmocka_unit_test(test_login_bounded),
		cmocka_unit_test(test_acl_rule_table),       cmocka_unit_test(test_agent_self),
		cmocka_unit_test(test_agent_mode_names),
	};

	log_setup("test_consul", LOG_TEXT, LOG_OFF, stderr);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
