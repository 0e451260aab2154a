/* fuzz_consul_login.c: libFuzzer harness for what a Consul login reads: the answer of
 * POST /v1/acl/login (consul_login_parse_answer, with its RFC 3339 times) and the
 * consul-login-meta setting (consul_login_meta_json).
 *
 * The input's first byte picks the parser (modulo 3: "0" the answer, "1" a time, "2" the
 * metadata, so the seeds are text), the rest is its text. Checked: no read or write out of
 * bounds; an accepted answer has a NUL-terminated SecretID and AccessorID and a life that is -1 or
 * positive; a refused one leaves no SecretID behind; accepted metadata is a JSON object. */
#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "consul_login.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

static void answer(const char *text, size_t len)
{
	struct consul_login_answer a;
	char err[256];

	if (consul_login_parse_answer(text, len, 1796342399000LL, &a, err, sizeof(err)) < 0) {
		if (a.secret[0])
			FAIL("a refused answer left a SecretID");
		return;
	}
	if (!memchr(a.secret, '\0', sizeof(a.secret)) || !memchr(a.accessor, '\0', sizeof(a.accessor)))
		FAIL("an ID is not NUL-terminated");
	if (!a.secret[0] || !a.accessor[0])
		FAIL("an accepted answer without its IDs");
	if (a.life_ms == 0 || a.life_ms < -1)
		FAIL("a life of %lld ms", (long long)a.life_ms);
}

static void meta(const char *text)
{
	sk_buf out;
	char err[256];

	sk_buf_init(&out, 65536);
	if (consul_login_meta_json(text, &out, err, sizeof(err)) == 0) {
		cJSON *doc = cJSON_Parse(out.data);

		if (!cJSON_IsObject(doc))
			FAIL("metadata that is not a JSON object: %s", out.data);
		cJSON_Delete(doc);
	}
	sk_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	int64_t ms;

	if (size < 1 || size > 65536)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 3) {
	case 0: answer(text, size - 1); break;
	case 1: (void)consul_login_parse_time(text, &ms); break;
	default: meta(text); break;
	}
	free(text);
	return 0;
}
