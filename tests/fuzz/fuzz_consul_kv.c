/* fuzz_consul_kv.c: libFuzzer harness for Consul KV listings (consul_parse_kv_json).
 *
 * The input is the HTTP body, not NUL-terminated. A rejected body must leave the list empty and
 * say why; an accepted one must hold well-formed entries (a non-empty key without NUL, a value
 * with its NUL terminator at len, a non-empty session or none) and survive a round trip:
 * written back as Consul would (base64 values) and parsed again, it gives the same entries. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "consul.h"

static bool add_b64(sk_buf *b, const unsigned char *p, size_t n)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	bool ok = sk_buf_add(b, "\"", 1);

	for (size_t i = 0; i < n && ok; i += 3) {
		unsigned v =
			(unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
		char q[4] = { tab[v >> 18], tab[(v >> 12) & 63], i + 1 < n ? tab[(v >> 6) & 63] : '=',
			      i + 2 < n ? tab[v & 63] : '=' };

		ok = sk_buf_add(b, q, 4);
	}
	return ok && sk_buf_add(b, "\"", 1);
}

static void encode(const struct consul_kv_list *l, sk_buf *b)
{
	bool ok = sk_buf_add(b, "[", 1);

	for (size_t i = 0; i < l->n && ok; i++) {
		const struct consul_kv *kv = &l->items[i];

		ok = sk_buf_addf(b, "%s{\"Key\":", i ? "," : "") && sk_buf_add_json_str(b, kv->key) &&
		     sk_buf_add(b, ",\"Value\":", 9) && add_b64(b, (const unsigned char *)kv->value, kv->len) &&
		     sk_buf_addf(b, ",\"CreateIndex\":%llu,\"ModifyIndex\":%llu,\"Flags\":%llu,\"Session\":",
				 (unsigned long long)kv->create_index, (unsigned long long)kv->modify_index,
				 (unsigned long long)kv->flags) &&
		     (kv->session ? sk_buf_add_json_str(b, kv->session) : sk_buf_add(b, "null", 4)) &&
		     sk_buf_add(b, "}", 1);
	}
	if (!ok || !sk_buf_add(b, "]", 1))
		FAIL("re-encoding failed");
}

static void check_items(const struct consul_kv_list *l)
{
	if (l->n > CONSUL_KV_MAX_ITEMS || (l->n && !l->items))
		FAIL("list of %zu items", l->n);
	for (size_t i = 0; i < l->n; i++) {
		const struct consul_kv *kv = &l->items[i];

		if (!kv->key || !kv->key[0] || !kv->value || kv->value[kv->len] != '\0')
			FAIL("item %zu: malformed key or value", i);
		if (kv->session && !kv->session[0])
			FAIL("item %zu: empty session string instead of none", i);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct consul_kv_list l, again;
	char err[512] = "", err2[512] = "";
	sk_buf b;

	if (consul_parse_kv_json((const char *)data, size, &l, err, sizeof(err)) < 0) {
		if (l.n || l.items || !err[0])
			FAIL("a rejected answer left %zu items or no reason", l.n);
		return 0;
	}
	check_items(&l);

	sk_buf_init(&b, (size_t)64 << 20);
	encode(&l, &b);
	if (consul_parse_kv_json(b.data, b.len, &again, err2, sizeof(err2)) < 0)
		FAIL("the re-encoded answer is rejected: %s\n%.500s", err2, b.data);
	if (again.n != l.n)
		FAIL("round trip: %zu items became %zu", l.n, again.n);
	for (size_t i = 0; i < l.n; i++) {
		const struct consul_kv *x = &l.items[i], *y = &again.items[i];

		if (strcmp(x->key, y->key) != 0 || x->len != y->len || memcmp(x->value, y->value, x->len) != 0 ||
		    x->create_index != y->create_index || x->modify_index != y->modify_index || x->flags != y->flags ||
		    (!x->session != !y->session) || (x->session && strcmp(x->session, y->session) != 0))
			FAIL("round trip: item %zu differs", i);
	}
	consul_kv_list_free(&again);
	consul_kv_list_free(&l);
	sk_buf_free(&b);
	return 0;
}
