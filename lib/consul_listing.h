/* consul_listing.h: Consul's listings (a KV export, a health-checked service) and their strict
 * parser (consul_listing.c), fed as the answer arrives. Pure: no I/O, no globals. */
#ifndef SK_CONSUL_LISTING_H
#define SK_CONSUL_LISTING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define CONSUL_KV_MAX_ITEMS 100000 /* entries in one KV listing */
#define CONSUL_ENTRY_MAX_BYTES (2 * 1024 * 1024) /* one entry of a listing (Consul's values: 512 KiB) */
#define CONSUL_ENTRY_MAX_VALUES 16384 /* JSON values (objects, arrays, members) in one entry */

/* One KV entry. `value` holds `len` decoded bytes and one extra NUL (it may contain NULs);
 * `session` is NULL when the key is not locked. */
struct consul_kv {
	char *key;
	char *value;
	size_t len;
	uint64_t modify_index, create_index, flags;
	char *session;
};

struct consul_kv_list {
	size_t n;
	struct consul_kv *items;
};

/* Free every entry; the list is left empty ({0, NULL}). */
void consul_kv_list_free(struct consul_kv_list *l);

/* The parsing half of consul_health_service (pure; fuzzed). */
int consul_parse_health_json(const char *body, size_t len, struct consul_kv_list *out, char *err,
			     size_t errlen) SK_MUST_CHECK;

/* Parse a KV listing (the JSON array of GET /v1/kv/?recurse) into *out. Pure: no I/O, no
 * globals. Rejects, with err naming the item and field: anything that is not an array of
 * objects, a missing or non-string Key, a Value that is neither null nor canonical base64,
 * a Session that is not a string, an index or Flags that is not a whole number in uint64,
 * duplicate fields, NUL characters in strings, nesting deeper than 8, more than
 * CONSUL_KV_MAX_ITEMS entries, an entry larger than CONSUL_ENTRY_MAX_BYTES or holding more than
 * CONSUL_ENTRY_MAX_VALUES values, trailing garbage. Unknown fields are ignored. Returns 0 or -1
 * (then *out is empty). */
int consul_parse_kv_json(const char *body, size_t len, struct consul_kv_list *out, char *err,
			 size_t errlen) SK_MUST_CHECK;

/* A listing parsed as its bytes arrive (what consul_kv_list and consul_health_service use), so that
 * memory follows the entries kept, never the size or shape of the answer: one entry at a time
 * (at most CONSUL_ENTRY_MAX_BYTES and CONSUL_ENTRY_MAX_VALUES) is checked and parsed as
 * consul_parse_kv_json / consul_parse_health_json describe, and only its compact consul_kv stays.
 * More than max_bytes fed in all is an error ("answer larger than ... (the response size cap)").
 * Errors are sticky: once feed returns -1 the rest is ignored. */
enum consul_listing_kind { CONSUL_LISTING_KV, CONSUL_LISTING_HEALTH };
struct consul_listing;

/* A new parser (free with consul_listing_free); max_bytes 0 means CONSUL_MAX_RESPONSE_DEFAULT. */
struct consul_listing *consul_listing_new(enum consul_listing_kind kind, size_t max_bytes);
/* Feed the next `len` bytes of the answer. Returns 0, or -1 once the answer is known bad. */
int consul_listing_feed(struct consul_listing *p, const char *data, size_t len) SK_MUST_CHECK;
/* The answer is complete: on success moves the entries into *out (free with consul_kv_list_free)
 * and returns 0; otherwise -1 with err saying why and *out empty. */
int consul_listing_finish(struct consul_listing *p, struct consul_kv_list *out, char *err, size_t errlen) SK_MUST_CHECK;
void consul_listing_free(struct consul_listing *p);
/* Why the listing failed so far (NULL: it has not; the text is the parser's), and whether it was
 * the size cap (*too_large). */
const char *consul_listing_error(const struct consul_listing *p, bool *too_large);

#endif
