/* fuzz_consul_kv.c: libFuzzer harness for Consul KV listings (consul_parse_kv_json and the
 * streaming consul_listing_* it is built on).
 *
 * The input is the HTTP body, not NUL-terminated. A rejected body must leave the list empty and
 * say why; an accepted one must hold well-formed entries (a non-empty key without NUL, a value
 * with its NUL terminator at len, a non-empty session or none) and survive a round trip:
 * written back as Consul would (base64 values) and parsed again, it gives the same entries.
 * Fed in pieces as the network delivers it (cut where the input's own bytes say), the body gives
 * the same verdict, the same error text and the same entries. */
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

static bool same_entries(const struct consul_kv_list *a, const struct consul_kv_list *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct consul_kv *x = &a->items[i], *y = &b->items[i];

		if (strcmp(x->key, y->key) != 0 || x->len != y->len || memcmp(x->value, y->value, x->len) != 0 ||
		    x->create_index != y->create_index || x->modify_index != y->modify_index || x->flags != y->flags ||
		    (!x->session != !y->session) || (x->session && strcmp(x->session, y->session) != 0))
			return false;
	}
	return true;
}

/* Parse `data` fed in pieces whose lengths come from the data itself (1 to 16 bytes, then the
 * rest), as a network read might cut it; compare with the whole parse. */
static void check_pieces(const uint8_t *data, size_t size, int whole_rc, const struct consul_kv_list *whole,
			 const char *whole_err)
{
	struct consul_listing *p = consul_listing_new(CONSUL_LISTING_KV, size ? size : 1);
	struct consul_kv_list l = { 0 };
	char err[512] = "";
	size_t at = 0;
	int rc = 0;

	for (unsigned k = 0; at < size && rc == 0; k++) {
		size_t n = k < 64 ? (size_t)(data[(k * 7) % size] & 15) + 1 : size - at;

		if (n > size - at)
			n = size - at;
		rc = consul_listing_feed(p, (const char *)data + at, n);
		at += n;
	}
	if (rc == 0)
		rc = consul_listing_finish(p, &l, err, sizeof(err));
	else if (consul_listing_finish(p, &l, err, sizeof(err)) != -1)
		FAIL("a listing that failed a feed finished well");
	if (rc != whole_rc)
		FAIL("in pieces: %d, whole: %d (%s / %s)", rc, whole_rc, err, whole_err);
	if (rc < 0 && strcmp(err, whole_err) != 0)
		FAIL("in pieces the error is '%s', whole '%s'", err, whole_err);
	if (rc == 0 && !same_entries(&l, whole))
		FAIL("in pieces the entries differ");
	consul_kv_list_free(&l);
	consul_listing_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct consul_kv_list l, again;
	char err[512] = "", err2[512] = "";
	sk_buf b;

	if (consul_parse_kv_json((const char *)data, size, &l, err, sizeof(err)) < 0) {
		if (l.n || l.items || !err[0])
			FAIL("a rejected answer left %zu items or no reason", l.n);
		check_pieces(data, size, -1, &l, err);
		return 0;
	}
	check_pieces(data, size, 0, &l, err);
	check_items(&l);

	sk_buf_init(&b, (size_t)64 << 20);
	encode(&l, &b);
	if (consul_parse_kv_json(b.data, b.len, &again, err2, sizeof(err2)) < 0)
		FAIL("the re-encoded answer is rejected: %s\n%.500s", err2, b.data);
	if (!same_entries(&l, &again))
		FAIL("round trip: %zu items became %zu, or an item differs", l.n, again.n);
	consul_kv_list_free(&again);
	consul_kv_list_free(&l);
	sk_buf_free(&b);
	return 0;
}
