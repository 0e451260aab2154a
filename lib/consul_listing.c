/* consul_listing.c: the strict parser of Consul's listings (a KV export, a health-checked
 * service), fed as the answer arrives: one entry at a time is checked by a strict JSON scanner,
 * parsed with cJSON and kept as one compact consul_kv. Pure: no I/O, no globals. */
#include "consul_listing.h"

#include <cJSON.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "consul_config.h"

#define KV_MAX_DEPTH 8

void consul_kv_list_free(struct consul_kv_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].key);
		if (l->items[i].value)
			sk_wipe(l->items[i].value, l->items[i].len); /* user passwords */
		free(l->items[i].value);
		free(l->items[i].session);
	}
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* -- the strict JSON scanner ------------------------------------------------------------------ */

/* Where each number literal is in the text, in document order. */
struct numtok {
	size_t off, len;
};

struct scan {
	struct numtok *nums;
	size_t n, cap;
	size_t base; /* where the entry starts in the answer, for the byte offsets of messages */
};

/* One KV entry being parsed: its text, the number literals found in it and its ordinal in the
 * listing, for messages. */
struct entry {
	const char *body;
	const struct scan *s;
	size_t i;
};

/* Length of a valid UTF-8 sequence at p (at most `left` bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	size_t n;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A strict JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number_ok(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9')
		while (i < n && isdigit((unsigned char)s[i]))
			i++;
	else
		return false;
	if (i < n && s[i] == '.') {
		for (d = ++i; i < n && isdigit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = i; i < n && isdigit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	}
	return i == n;
}

/* The string that starts at p[*i] (its opening quote): valid UTF-8, no control character, no
 * \u0000. *i ends past its closing quote. Returns 0 or -1 with err set. */
static int scan_string(const unsigned char *p, size_t len, size_t *i, size_t base, char *err, size_t errlen)
{
	for (++*i;;) {
		size_t n;

		if (*i >= len)
			return sk_err(err, errlen, "unterminated string");
		if (p[*i] == '"') {
			++*i;
			return 0;
		}
		if (p[*i] < 0x20)
			return sk_err(err, errlen, "control character in a string at byte %zu", base + *i);
		if (p[*i] == '\\') {
			if (*i + 1 >= len)
				return sk_err(err, errlen, "unterminated string");
			if (p[*i + 1] == 'u' && *i + 5 < len && memcmp(p + *i + 2, "0000", 4) == 0)
				return sk_err(err, errlen, "NUL character (\\u0000) in a string at byte %zu",
					      base + *i);
			*i += 2;
			continue;
		}
		n = utf8_len(p + *i, len - *i);
		if (n == 0)
			return sk_err(err, errlen, "invalid UTF-8 at byte %zu", base + *i);
		*i += n;
	}
}

/* The number literal that starts at body[*i]: strict syntax, its place recorded in s. *i ends
 * past it. Returns 0 or -1 with err set. */
static int scan_number(const char *body, size_t len, size_t *i, struct scan *s, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)body;
	size_t start = *i;

	while (*i < len &&
	       (isdigit(p[*i]) || p[*i] == '-' || p[*i] == '+' || p[*i] == '.' || p[*i] == 'e' || p[*i] == 'E'))
		++*i;
	if (!json_number_ok(body + start, *i - start))
		return sk_err(err, errlen, "bad number at byte %zu", s->base + start);
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 64;
		s->nums = xrealloc(s->nums, s->cap * sizeof(*s->nums));
	}
	s->nums[s->n].off = start;
	s->nums[s->n].len = *i - start;
	s->n++;
	return 0;
}

/* The lexical checks cJSON does not make, in one pass: only JSON white space between tokens,
 * valid UTF-8 and no control characters or \u0000 in strings, strict number syntax, nesting
 * at most KV_MAX_DEPTH (counting the listing's own array: `body` is one entry of it). Records every
 * number literal so exact 64-bit values can be read; `base` is where the entry starts in the answer,
 * for the byte offsets of messages. */
static int scan_json(const char *body, size_t len, size_t base, struct scan *s, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)body;
	int depth = 1;

	s->base = base;
	for (size_t i = 0; i < len;) {
		unsigned char ch = p[i];

		if (ch == '"') {
			if (scan_string(p, len, &i, base, err, errlen) < 0)
				return -1;
		} else if (ch == '-' || (ch >= '0' && ch <= '9')) {
			if (scan_number(body, len, &i, s, err, errlen) < 0)
				return -1;
		} else if (ch == '[' || ch == '{') {
			if (++depth > KV_MAX_DEPTH)
				return sk_err(err, errlen, "nested deeper than %d levels", KV_MAX_DEPTH);
			i++;
		} else if (ch == ']' || ch == '}') {
			depth--;
			i++;
		} else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == ',' || ch == ':' ||
			   (ch >= 'a' && ch <= 'z')) {
			i++; /* structure, white space and the letters of true/false/null: cJSON checks them */
		} else {
			return sk_err(err, errlen, "unexpected byte 0x%02x at byte %zu", ch, base + i);
		}
	}
	return 0;
}

/* -- KV entries ------------------------------------------------------------------------------- */

/* Give every number node its literal's ordinal (kept in valueint), in document order. */
static void number_ordinals(cJSON *node, size_t *next)
{
	for (; node; node = node->next) {
		if (cJSON_IsNumber(node))
			node->valueint = (int)(*next)++;
		if (node->child)
			number_ordinals(node->child, next);
	}
}

static int field_u64(const struct entry *e, const cJSON *node, const char *name, uint64_t *out, char *err,
		     size_t errlen)
{
	size_t item = e->i;
	const struct numtok *t;
	char text[32];

	if (!cJSON_IsNumber(node))
		return sk_err(err, errlen, "item %zu: %s is not a number", item, name);
	t = &e->s->nums[node->valueint];
	if (t->len >= sizeof(text))
		return sk_err(err, errlen, "item %zu: %s is out of range", item, name);
	memcpy(text, e->body + t->off, t->len);
	text[t->len] = '\0';
	if (strspn(text, "0123456789") != t->len)
		return sk_err(err, errlen, "item %zu: %s %s is not a whole number", item, name, text);
	if (!sk_parse_u64(text, out))
		return sk_err(err, errlen, "item %zu: %s %s is out of range", item, name, text);
	if ((double)*out != node->valuedouble)
		return sk_err(err, errlen, "item %zu: %s: number literal mismatch", item, name);
	return 0;
}

static int parse_item(const struct entry *e, const cJSON *obj, struct consul_kv *kv, char *err, size_t errlen)
{
	size_t i = e->i;
	enum { F_KEY, F_VALUE, F_SESSION, F_CREATE, F_MODIFY, F_FLAGS, F_N };
	static const char *const names[F_N] = { "Key", "Value", "Session", "CreateIndex", "ModifyIndex", "Flags" };
	const cJSON *f[F_N] = { 0 };

	if (!cJSON_IsObject(obj))
		return sk_err(err, errlen, "item %zu is not an object", i);
	for (const cJSON *m = obj->child; m; m = m->next) {
		for (int k = 0; k < F_N; k++) {
			if (strcmp(m->string, names[k]) != 0)
				continue;
			if (f[k])
				return sk_err(err, errlen, "item %zu: %s appears twice", i, names[k]);
			f[k] = m;
		}
	}
	if (!f[F_KEY])
		return sk_err(err, errlen, "item %zu: no Key", i);
	if (!cJSON_IsString(f[F_KEY]) || !*f[F_KEY]->valuestring)
		return sk_err(err, errlen, "item %zu: Key is not a non-empty string", i);
	if (!f[F_CREATE] || !f[F_MODIFY])
		return sk_err(err, errlen, "item %zu (%.100s): no %s", i, f[F_KEY]->valuestring,
			      f[F_CREATE] ? "ModifyIndex" : "CreateIndex");
	if (field_u64(e, f[F_CREATE], "CreateIndex", &kv->create_index, err, errlen) < 0 ||
	    field_u64(e, f[F_MODIFY], "ModifyIndex", &kv->modify_index, err, errlen) < 0 ||
	    (f[F_FLAGS] && field_u64(e, f[F_FLAGS], "Flags", &kv->flags, err, errlen) < 0))
		return -1;
	if (f[F_SESSION] && !cJSON_IsNull(f[F_SESSION]) && !cJSON_IsString(f[F_SESSION]))
		return sk_err(err, errlen, "item %zu (%.100s): Session is not a string", i, f[F_KEY]->valuestring);
	if (f[F_VALUE] && !cJSON_IsNull(f[F_VALUE]) && !cJSON_IsString(f[F_VALUE]))
		return sk_err(err, errlen, "item %zu (%.100s): Value is not a string or null", i,
			      f[F_KEY]->valuestring);
	if (f[F_VALUE] && cJSON_IsString(f[F_VALUE])) {
		if (base64_decode(f[F_VALUE]->valuestring, &kv->value, &kv->len) < 0)
			return sk_err(err, errlen, "item %zu (%.100s): Value is not valid base64", i,
				      f[F_KEY]->valuestring);
	} else {
		kv->value = xstrdup("");
		kv->len = 0;
	}
	kv->key = xstrdup(f[F_KEY]->valuestring);
	if (f[F_SESSION] && cJSON_IsString(f[F_SESSION]) && *f[F_SESSION]->valuestring)
		kv->session = xstrdup(f[F_SESSION]->valuestring);
	return 0;
}

/* -- health-checked services ------------------------------------------------------------------ */

static const char *json_str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One entry of /v1/health/service/<name> as a KV pair: key "<address>:<port>" (Service.Address,
 * else Node.Address; "[v6]:port"), value a JSON object {"node", "id", "weight" (Weights.Passing),
 * "meta" (Service.Meta)}. */
static int health_item(const cJSON *it, size_t n, struct consul_kv *out, char *err, size_t errlen)
{
	const cJSON *node = cJSON_GetObjectItemCaseSensitive(it, "Node");
	const cJSON *svc = cJSON_GetObjectItemCaseSensitive(it, "Service");
	const cJSON *port = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Port") : NULL;
	const cJSON *weights = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Weights") : NULL;
	const cJSON *passing = weights ? cJSON_GetObjectItemCaseSensitive(weights, "Passing") : NULL;
	const cJSON *meta = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Meta") : NULL;
	const char *addr = svc ? json_str(svc, "Address") : NULL;
	cJSON *value;
	char *text, key[400];

	if (!cJSON_IsObject(it) || !cJSON_IsObject(node) || !cJSON_IsObject(svc))
		return sk_err(err, errlen, "entry %zu: not an object with Node and Service", n);
	if (!addr || !*addr)
		addr = json_str(node, "Address");
	if (!addr || !*addr || strlen(addr) > 255)
		return sk_err(err, errlen, "entry %zu: no Service.Address or Node.Address", n);
	if (!cJSON_IsNumber(port) || !(port->valuedouble >= 1 && port->valuedouble <= 65535) ||
	    port->valuedouble != (double)(long)port->valuedouble)
		return sk_err(err, errlen, "entry %zu: Service.Port is not a port number", n);
	snprintf(key, sizeof(key), strchr(addr, ':') ? "[%s]:%ld" : "%s:%ld", addr, (long)port->valuedouble);
	value = cJSON_CreateObject();
	if (!value)
		sk_oom();
	if (json_str(node, "Node"))
		cJSON_AddStringToObject(value, "node", json_str(node, "Node"));
	if (json_str(svc, "ID"))
		cJSON_AddStringToObject(value, "id", json_str(svc, "ID"));
	if (cJSON_IsNumber(passing))
		cJSON_AddNumberToObject(value, "weight", passing->valuedouble);
	if (cJSON_IsObject(meta))
		cJSON_AddItemToObject(value, "meta", cJSON_Duplicate(meta, true));
	text = cJSON_PrintUnformatted(value);
	cJSON_Delete(value);
	if (!text)
		sk_oom();
	memset(out, 0, sizeof(*out));
	out->key = xstrdup(key);
	out->len = strlen(text);
	out->value = xstrdup(text);
	cJSON_free(text);
	return 0;
}

/* -- listings, parsed as they arrive ---------------------------------------------------------- */

/* A listing is read one entry at a time: the bytes of the entry in progress are gathered (at most
 * CONSUL_ENTRY_MAX_BYTES), checked, parsed on their own and turned into one compact consul_kv;
 * nothing else of the answer is kept. So what a listing costs is its entries' keys and values
 * plus one entry's parse, never a tree of the whole answer. */

enum { L_BEFORE, L_OPEN, L_ENTRY, L_COMMA, L_DONE, L_FAILED };

struct consul_listing {
	enum consul_listing_kind kind;
	int state;
	size_t max_bytes, seen; /* the answer's size cap; bytes fed so far */
	bool too_large;
	/* the entry being gathered */
	char *entry;
	size_t elen, ecap, estart, values;
	int depth;
	bool in_str, esc;
	struct consul_kv_list out;
	size_t cap;
	char err[240];
};

struct consul_listing *consul_listing_new(enum consul_listing_kind kind, size_t max_bytes)
{
	struct consul_listing *p = xcalloc(1, sizeof(*p));

	p->kind = kind;
	p->max_bytes = max_bytes ? max_bytes : CONSUL_MAX_RESPONSE_DEFAULT;
	return p;
}

void consul_listing_free(struct consul_listing *p)
{
	if (!p)
		return;
	consul_kv_list_free(&p->out);
	if (p->entry)
		sk_wipe(p->entry, p->elen);
	free(p->entry);
	free(p);
}

static int listing_fail(struct consul_listing *p, const char *fmt, ...) SK_PRINTF(2, 3);

static int listing_fail(struct consul_listing *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	p->state = L_FAILED;
	consul_kv_list_free(&p->out);
	p->cap = 0;
	return -1;
}

static bool json_ws(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* The entry gathered (its first `len` bytes), checked by the strict scanner and parsed: *doc
 * (the caller deletes it) and its number literals in *s. Returns 0 or -1 (the listing failed). */
static int entry_doc(struct consul_listing *p, size_t len, struct scan *s, cJSON **doc)
{
	const char *end = NULL;
	size_t ord = 0;
	char why[200];

	if (scan_json(p->entry, len, p->estart, s, why, sizeof(why)) < 0)
		return listing_fail(p, "not valid JSON: %s", why);
	*doc = cJSON_ParseWithLengthOpts(p->entry, len, &end, false);
	if (!*doc || end != p->entry + len) {
		size_t at = end && end >= p->entry && end <= p->entry + len ? (size_t)(end - p->entry) : 0;

		return listing_fail(p, "not valid JSON (near byte %zu)", p->estart + at);
	}
	number_ordinals(*doc, &ord);
	if (ord != s->n)
		return listing_fail(p, "number literals do not match the document");
	return 0;
}

/* The parsed entry as one more consul_kv of the listing. Returns 0 or -1 (the listing failed). */
static int keep_entry(struct consul_listing *p, const cJSON *doc, const struct scan *s)
{
	size_t i = p->out.n;
	struct consul_kv *kv;
	char why[200];

	if (p->out.n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16;
		if (p->cap > CONSUL_KV_MAX_ITEMS)
			p->cap = CONSUL_KV_MAX_ITEMS;
		p->out.items = xrealloc(p->out.items, p->cap * sizeof(*p->out.items));
	}
	kv = &p->out.items[i];
	memset(kv, 0, sizeof(*kv));
	if ((p->kind == CONSUL_LISTING_KV ? parse_item(&(struct entry){ p->entry, s, i }, doc, kv, why, sizeof(why))
					  : health_item(doc, i, kv, why, sizeof(why))) < 0) {
		free(kv->key);
		if (kv->value)
			sk_wipe(kv->value, kv->len); /* user passwords */
		free(kv->value);
		free(kv->session);
		return listing_fail(p, "%s", why);
	}
	p->out.n++;
	return 0;
}

/* The entry gathered is complete: check it, parse it and keep it as one consul_kv. */
static int listing_entry(struct consul_listing *p)
{
	struct scan s = { 0 };
	cJSON *doc = NULL;
	size_t len = p->elen;
	int rc;

	while (len && json_ws((unsigned char)p->entry[len - 1]))
		len--;
	rc = entry_doc(p, len, &s, &doc) == 0 ? keep_entry(p, doc, &s) : -1;
	sk_json_delete_wiped(doc); /* base64 of the values: user passwords */
	sk_wipe(p->entry, p->elen); /* the entry's text, the same */
	free(s.nums);
	return rc;
}

/* The first byte of an entry (not white space, not ']'). */
static int listing_start_entry(struct consul_listing *p, size_t at)
{
	if (p->out.n >= CONSUL_KV_MAX_ITEMS)
		return listing_fail(p, "more than %d entries", CONSUL_KV_MAX_ITEMS);
	p->elen = 0;
	p->estart = at;
	p->values = 0;
	p->depth = 0;
	p->in_str = p->esc = false;
	p->state = L_ENTRY;
	return 0;
}

/* Follow strings, nesting and values through one byte of an entry. Returns 1 when the byte ends
 * the entry (a ',' or the listing's ']' at its top level; the state says which), 0 when the byte
 * belongs to it, -1 on error. */
static int entry_track(struct consul_listing *p, unsigned char ch, size_t at)
{
	if (p->in_str) {
		if (p->esc)
			p->esc = false;
		else if (ch == '\\')
			p->esc = true;
		else if (ch == '"')
			p->in_str = false;
	} else if (ch == '"') {
		p->in_str = true;
	} else if (ch == '[' || ch == '{') {
		p->values++;
		if (++p->depth + 1 > KV_MAX_DEPTH)
			return listing_fail(p, "not valid JSON: nested deeper than %d levels at byte %zu", KV_MAX_DEPTH,
					    at);
	} else if (ch == ']' || ch == '}') {
		if (p->depth == 0) {
			if (ch == '}')
				return listing_fail(p, "not valid JSON: unexpected '}' at byte %zu", at);
			p->state = L_DONE;
			return 1;
		}
		p->depth--;
	} else if (ch == ',') {
		if (p->depth == 0) {
			p->state = L_COMMA;
			return 1;
		}
		p->values++;
	}
	return 0;
}

/* Append n bytes to the entry's text, growing it up to CONSUL_ENTRY_MAX_BYTES. */
static int entry_append(struct consul_listing *p, const unsigned char *bytes, size_t n)
{
	if (n > CONSUL_ENTRY_MAX_BYTES - p->elen)
		return listing_fail(p, "entry %zu (at byte %zu) is larger than %d bytes", p->out.n, p->estart,
				    CONSUL_ENTRY_MAX_BYTES);
	if (p->elen + n > p->ecap) {
		size_t cap = p->ecap ? p->ecap : 1024;
		char *bigger;

		while (cap < p->elen + n)
			cap *= 2;
		p->ecap = cap > CONSUL_ENTRY_MAX_BYTES ? CONSUL_ENTRY_MAX_BYTES : cap;
		bigger = xmalloc(p->ecap); /* not realloc: the old text is wiped, not left behind */
		if (p->elen)
			memcpy(bigger, p->entry, p->elen);
		if (p->entry)
			sk_wipe(p->entry, p->elen);
		free(p->entry);
		p->entry = bigger;
	}
	memcpy(p->entry + p->elen, bytes, n);
	p->elen += n;
	return 0;
}

/* Inside a string of an entry, the bytes up to the next '"' or '\\' change nothing the tracker
 * follows: they are appended at once (most of a listing is its keys and base64 values). Returns
 * how many were taken (0: none), or -1 (the entry grew too large). */
static long entry_string_run(struct consul_listing *p, const unsigned char *d, size_t len)
{
	const unsigned char *quote, *slash;
	size_t n;

	if (p->state != L_ENTRY || !p->in_str || p->esc)
		return 0;
	quote = memchr(d, '"', len); /* memchr twice, the second within the first's span: linear */
	n = quote ? (size_t)(quote - d) : len;
	slash = memchr(d, '\\', n);
	if (slash)
		n = (size_t)(slash - d);
	return n && entry_append(p, d, n) < 0 ? -1 : (long)n;
}

/* One byte of an entry; `at` is its offset in the answer. */
static int listing_entry_byte(struct consul_listing *p, unsigned char ch, size_t at)
{
	int rc = entry_track(p, ch, at);

	if (rc != 0)
		return rc < 0 ? -1 : listing_entry(p);
	if (p->values > CONSUL_ENTRY_MAX_VALUES)
		return listing_fail(p, "entry %zu (at byte %zu) holds more than %d JSON values", p->out.n, p->estart,
				    CONSUL_ENTRY_MAX_VALUES);
	return entry_append(p, &ch, 1);
}

/* One byte of the answer, by where the parser stands; `at` is its offset. */
static int listing_byte(struct consul_listing *p, unsigned char ch, size_t at)
{
	switch (p->state) {
	case L_BEFORE:
		if (json_ws(ch))
			return 0;
		if (ch != '[')
			return strchr("{\"-0123456789tfn", ch) && ch
				       ? listing_fail(p, "not a JSON array")
				       : listing_fail(p, "not valid JSON: unexpected byte 0x%02x at byte %zu", ch, at);
		p->state = L_OPEN;
		return 0;
	case L_OPEN:
	case L_COMMA:
		if (json_ws(ch))
			return 0;
		if (ch == ']') {
			if (p->state == L_COMMA)
				return listing_fail(p, "not valid JSON: ',' before ']' at byte %zu", at);
			p->state = L_DONE;
			return 0;
		}
		if (listing_start_entry(p, at) < 0)
			return -1;
		return listing_entry_byte(p, ch, at);
	case L_ENTRY: return listing_entry_byte(p, ch, at);
	case L_DONE:
		if (!json_ws(ch))
			return listing_fail(p,
					    "not valid JSON: unexpected byte 0x%02x at byte %zu (trailing data after "
					    "the JSON value)",
					    ch, at);
		return 0;
	default: return -1;
	}
}

int consul_listing_feed(struct consul_listing *p, const char *data, size_t len)
{
	const unsigned char *d = (const unsigned char *)data;

	if (p->state == L_FAILED)
		return -1;
	if (len > p->max_bytes - p->seen) {
		p->too_large = true;
		return listing_fail(p, "answer larger than %zu bytes (the response size cap)", p->max_bytes);
	}
	for (size_t i = 0; i < len;) {
		long run = entry_string_run(p, d + i, len - i);

		if (run < 0)
			return -1;
		if (run > 0) {
			i += (size_t)run;
			continue;
		}
		if (listing_byte(p, d[i], p->seen + i) < 0)
			return -1;
		i++;
	}
	p->seen += len;
	return 0;
}

int consul_listing_finish(struct consul_listing *p, struct consul_kv_list *out, char *err, size_t errlen)
{
	out->n = 0;
	out->items = NULL;
	switch (p->state) {
	case L_DONE:
		*out = p->out;
		if (out->n == 0) {
			free(out->items);
			out->items = NULL;
		} else if (p->cap > out->n) {
			out->items = xrealloc(out->items, out->n * sizeof(*out->items));
		}
		memset(&p->out, 0, sizeof(p->out));
		p->cap = 0;
		return 0;
	case L_BEFORE: listing_fail(p, "empty answer"); break;
	case L_ENTRY: listing_fail(p, p->in_str ? "unterminated string" : "not valid JSON: truncated"); break;
	case L_OPEN:
	case L_COMMA: listing_fail(p, "not valid JSON: truncated"); break;
	default: break;
	}
	return sk_err(err, errlen, "%s", p->err);
}

const char *consul_listing_error(const struct consul_listing *p, bool *too_large)
{
	*too_large = p->too_large;
	return p->state == L_FAILED ? p->err : NULL;
}

static int parse_whole(enum consul_listing_kind kind, const char *body, size_t len, struct consul_kv_list *out,
		       char *err, size_t errlen)
{
	struct consul_listing *p = consul_listing_new(kind, len ? len : 1);
	int rc = -1;

	out->n = 0;
	out->items = NULL;
	if (consul_listing_feed(p, body, len) == 0)
		rc = consul_listing_finish(p, out, err, errlen);
	else
		sk_err(err, errlen, "%s", p->err);
	consul_listing_free(p);
	return rc;
}

int consul_parse_kv_json(const char *body, size_t len, struct consul_kv_list *out, char *err, size_t errlen)
{
	return parse_whole(CONSUL_LISTING_KV, body, len, out, err, errlen);
}

int consul_parse_health_json(const char *body, size_t len, struct consul_kv_list *out, char *err, size_t errlen)
{
	return parse_whole(CONSUL_LISTING_HEALTH, body, len, out, err, errlen);
}
