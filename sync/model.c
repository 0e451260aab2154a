/* model.c: rows, validation and quoting for what the agent writes to ProxySQL's admin tables. */
#include "model.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"

void *model_grow(void *v, size_t n, size_t size)
{
	if (n == 0)
		return xrealloc(v, 8 * size);
	if (n >= 8 && (n & (n - 1)) == 0)
		return xrealloc(v, 2 * n * size);
	return v;
}

void model_server_defaults(struct px_server *s)
{
	memset(s, 0, sizeof(*s));
	s->port = 3306;
	sk_strlcpy(s->status, "ONLINE", sizeof(s->status));
	s->weight = 1;
	s->max_connections = 1000;
}

void model_user_defaults(struct px_user *u)
{
	memset(u, 0, sizeof(*u));
	u->active = 1;
	u->transaction_persistent = 1;
	u->backend = 1;
	u->frontend = 1;
	u->max_connections = 10000;
}

static char *dup_or_empty(const char *s)
{
	return xstrdup(s ? s : "");
}

struct px_server *model_servers_add(struct px_servers *a, const struct px_server *s)
{
	struct px_server *d;

	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	d = &a->v[a->n++];
	*d = *s;
	d->host = dup_or_empty(s->host);
	d->comment = dup_or_empty(s->comment);
	return d;
}

struct px_user *model_users_add(struct px_users *a, const struct px_user *u)
{
	struct px_user *d;

	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = xrealloc(a->v, a->cap * sizeof(*a->v));
	}
	d = &a->v[a->n++];
	*d = *u;
	d->username = dup_or_empty(u->username);
	d->password = dup_or_empty(u->password);
	d->default_schema = u->default_schema ? xstrdup(u->default_schema) : NULL;
	d->attributes = u->attributes && *u->attributes ? xstrdup(u->attributes) : NULL;
	d->comment = dup_or_empty(u->comment);
	return d;
}

static int server_cmp_key(long hg, const char *host, long port, const struct px_server *b)
{
	int c;

	if (hg != b->hostgroup)
		return hg < b->hostgroup ? -1 : 1;
	c = strcmp(host, b->host);
	if (c)
		return c;
	return port < b->port ? -1 : port > b->port ? 1 : 0;
}

static int server_cmp(const void *x, const void *y)
{
	const struct px_server *a = x;

	return server_cmp_key(a->hostgroup, a->host, a->port, y);
}

static int user_cmp(const void *x, const void *y)
{
	const struct px_user *a = x, *b = y;

	return strcmp(a->username, b->username);
}

void model_servers_sort(struct px_servers *a)
{
	if (a->n > 1)
		qsort(a->v, a->n, sizeof(*a->v), server_cmp);
}

void model_users_sort(struct px_users *a)
{
	if (a->n > 1)
		qsort(a->v, a->n, sizeof(*a->v), user_cmp);
}

struct px_server *model_servers_find(const struct px_servers *a, long hostgroup, const char *host, long port)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = server_cmp_key(hostgroup, host, port, &a->v[mid]);

		if (c == 0)
			return &a->v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

struct px_user *model_users_find(const struct px_users *a, const char *username)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(username, a->v[mid].username);

		if (c == 0)
			return &a->v[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

void model_servers_free(struct px_servers *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->v[i].host);
		free(a->v[i].comment);
	}
	free(a->v);
	memset(a, 0, sizeof(*a));
}

void model_user_free(struct px_user *u)
{
	if (!u->username)
		return;
	sk_wipe(u->password, strlen(u->password));
	free(u->username);
	free(u->password);
	free(u->default_schema);
	free(u->attributes);
	free(u->comment);
	memset(u, 0, sizeof(*u));
}

void model_users_free(struct px_users *a)
{
	for (size_t i = 0; i < a->n; i++)
		model_user_free(&a->v[i]);
	free(a->v);
	memset(a, 0, sizeof(*a));
}

void model_servers_copy(struct px_servers *dst, const struct px_servers *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		model_servers_add(dst, &src->v[i]);
}

void model_users_copy(struct px_users *dst, const struct px_users *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		model_users_add(dst, &src->v[i]);
}

bool model_server_same(const struct px_server *a, const struct px_server *b)
{
	return a->hostgroup == b->hostgroup && strcmp(a->host, b->host) == 0 && a->port == b->port &&
	       sk_streq_ci(a->status, b->status) && a->weight == b->weight && a->compression == b->compression &&
	       a->max_connections == b->max_connections && a->max_replication_lag == b->max_replication_lag &&
	       a->use_ssl == b->use_ssl && a->max_latency_ms == b->max_latency_ms &&
	       strcmp(a->comment, b->comment) == 0;
}

/* NULL and '' are one value: a ProxySQL Cluster pull stores '' where the peer has NULL
 * (the rows a peer serves are built with every NULL as ''), so either may stand for "none". */
static bool same_opt(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

bool model_user_same(const struct px_user *a, const struct px_user *b)
{
	return strcmp(a->username, b->username) == 0 && strcmp(a->password, b->password) == 0 &&
	       a->active == b->active && a->use_ssl == b->use_ssl && a->default_hostgroup == b->default_hostgroup &&
	       a->schema_locked == b->schema_locked && a->transaction_persistent == b->transaction_persistent &&
	       a->fast_forward == b->fast_forward && a->backend == b->backend && a->frontend == b->frontend &&
	       a->max_connections == b->max_connections && same_opt(a->default_schema, b->default_schema) &&
	       strcmp(a->comment, b->comment) == 0;
}

const char *model_check_host(const char *host)
{
	size_t n = strlen(host);

	if (n == 0)
		return "is empty";
	if (n > MODEL_HOST_MAX)
		return "is longer than 255 bytes";
	for (const char *p = host; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_' && *p != ':')
			return "has characters other than A-Z a-z 0-9 . - _ :";
	if (host[0] == '-' || host[0] == '.')
		return "starts with '-' or '.'";
	return NULL;
}

const char *model_check_username(const char *user)
{
	size_t n = strlen(user);

	if (n == 0)
		return "is empty";
	if (n > MODEL_USER_MAX)
		return "is longer than 80 bytes";
	for (const char *p = user; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-@$", *p))
			return "has characters other than A-Z a-z 0-9 . _ - @ $";
	return NULL;
}

const char *model_check_password(const char *pw)
{
	if (strlen(pw) > MODEL_PASSWORD_MAX)
		return "is longer than 256 bytes";
	for (const unsigned char *p = (const unsigned char *)pw; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return "has control characters";
	return NULL;
}

/* Valid UTF-8 without control characters. */
const char *model_check_text(const char *s, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;

	if (strlen(s) > max)
		return "is too long";
	while (*p) {
		int extra;

		if (*p < 0x20 || *p == 0x7f)
			return "has control characters";
		if (*p < 0x80)
			extra = 0;
		else if ((*p & 0xe0) == 0xc0 && *p >= 0xc2)
			extra = 1;
		else if ((*p & 0xf0) == 0xe0)
			extra = 2;
		else if ((*p & 0xf8) == 0xf0 && *p <= 0xf4)
			extra = 3;
		else
			return "is not valid UTF-8";
		p++;
		for (int i = 0; i < extra; i++, p++)
			if ((*p & 0xc0) != 0x80)
				return "is not valid UTF-8";
	}
	return NULL;
}

bool model_sql_quote(sk_buf *b, const char *s)
{
	if (!sk_buf_add(b, "'", 1))
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '\'' && !sk_buf_add(b, "''", 2))
			return false;
		if (*p != '\'' && !sk_buf_add(b, p, 1))
			return false;
	}
	return sk_buf_add(b, "'", 1);
}

const char *model_split_address(const char *addr, long default_port, char *host, size_t hostlen, long *port)
{
	const char *colon;

	*port = default_port;
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');

		if (!end || (size_t)(end - addr - 1) >= hostlen || end == addr + 1)
			return "is not [IPv6]:port";
		memcpy(host, addr + 1, (size_t)(end - addr - 1));
		host[end - addr - 1] = '\0';
		if (end[1] == '\0')
			return NULL;
		if (end[1] != ':' || !sk_parse_long(end + 2, 1, 65535, port))
			return "has a port that is not a number from 1 to 65535";
		return NULL;
	}
	colon = strrchr(addr, ':');
	if (colon && strchr(addr, ':') == colon) {
		if ((size_t)(colon - addr) >= hostlen)
			return "is longer than 255 bytes";
		memcpy(host, addr, (size_t)(colon - addr));
		host[colon - addr] = '\0';
		if (!sk_parse_long(colon + 1, 1, 65535, port))
			return "has a port that is not a number from 1 to 65535";
		return NULL;
	}
	if (!sk_strlcpy(host, addr, hostlen))
		return "is longer than 255 bytes";
	return NULL;
}

void model_keeps_add(struct px_keeps *k, long hostgroup, const char *host, long port)
{
	k->v = model_grow(k->v, k->n, sizeof(*k->v));
	k->v[k->n].hostgroup = hostgroup;
	k->v[k->n].host = host ? xstrdup(host) : NULL;
	k->v[k->n].port = port;
	k->n++;
}

void model_keeps_free(struct px_keeps *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].host);
	free(k->v);
	memset(k, 0, sizeof(*k));
}

void model_keeps_copy(struct px_keeps *dst, const struct px_keeps *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		model_keeps_add(dst, src->v[i].hostgroup, src->v[i].host, src->v[i].port);
}

void model_names_add(struct px_names *l, const char *name)
{
	l->v = model_grow(l->v, l->n, sizeof(*l->v));
	l->v[l->n++] = xstrdup(name);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void model_names_sort(struct px_names *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), name_cmp);
}

bool model_names_has(const struct px_names *l, const char *name)
{
	return l->n && bsearch(&name, l->v, l->n, sizeof(*l->v), name_cmp) != NULL;
}

void model_names_free(struct px_names *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void model_names_copy(struct px_names *dst, const struct px_names *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		model_names_add(dst, src->v[i]);
}

const struct px_family *model_family_of(const struct px_families *f, long hg)
{
	for (size_t i = 0; f && i < f->n; i++)
		for (size_t k = 0; k < f->v[i].n; k++)
			if (f->v[i].hg[k] == hg)
				return &f->v[i];
	return NULL;
}

void model_peers_add(struct px_peers *a, const char *host, long port, long weight, const char *comment)
{
	a->v = model_grow(a->v, a->n, sizeof(*a->v));
	a->v[a->n].host = xstrdup(host);
	a->v[a->n].port = port;
	a->v[a->n].weight = weight;
	a->v[a->n].comment = xstrdup(comment ? comment : "");
	a->n++;
}

static int peer_cmp(const void *x, const void *y)
{
	const struct px_peer *a = x, *b = y;
	int c = strcmp(a->host, b->host);

	return c ? c : a->port < b->port ? -1 : a->port > b->port;
}

void model_peers_sort(struct px_peers *a)
{
	size_t k = 0;

	if (a->n > 1)
		qsort(a->v, a->n, sizeof(*a->v), peer_cmp);
	for (size_t i = 0; i < a->n; i++) {
		if (k && peer_cmp(&a->v[k - 1], &a->v[i]) == 0) {
			free(a->v[i].host);
			free(a->v[i].comment);
			continue;
		}
		a->v[k++] = a->v[i];
	}
	a->n = k;
}

const struct px_peer *model_peers_find(const struct px_peers *a, const char *host, long port)
{
	struct px_peer key = { .host = (char *)host, .port = port };

	return a->n ? bsearch(&key, a->v, a->n, sizeof(*a->v), peer_cmp) : NULL;
}

void model_peers_copy(struct px_peers *dst, const struct px_peers *src)
{
	memset(dst, 0, sizeof(*dst));
	for (size_t i = 0; i < src->n; i++)
		model_peers_add(dst, src->v[i].host, src->v[i].port, src->v[i].weight, src->v[i].comment);
}

void model_peers_free(struct px_peers *a)
{
	for (size_t i = 0; i < a->n; i++) {
		free(a->v[i].host);
		free(a->v[i].comment);
	}
	free(a->v);
	memset(a, 0, sizeof(*a));
}

/* `len` bytes of `s` as canonical base64 of `want` bytes (0: any but none). */
static bool base64_part(const char *s, size_t len, size_t want)
{
	char buf[200], *out = NULL;
	size_t n = 0;
	bool ok;

	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	ok = base64_decode(buf, &out, &n) == 0 && n > 0 && (want == 0 || n == want);
	free(out);
	return ok;
}

bool model_scram_secret_ok(const char *s)
{
	const char *p = s + 14, *salt_end, *keys, *colon;
	long iterations;
	char num[12];
	size_t nd;

	if (strncmp(s, "SCRAM-SHA-256$", 14) != 0)
		return false;
	nd = strspn(p, "0123456789");
	if (nd == 0 || nd >= sizeof(num) || p[nd] != ':')
		return false;
	memcpy(num, p, nd);
	num[nd] = '\0';
	if (!sk_parse_long(num, 1, 100000000L, &iterations))
		return false;
	salt_end = strchr(p + nd + 1, '$');
	if (!salt_end || !base64_part(p + nd + 1, (size_t)(salt_end - p - nd - 1), 0))
		return false;
	keys = salt_end + 1;
	colon = strchr(keys, ':');
	return colon && base64_part(keys, (size_t)(colon - keys), 32) && base64_part(colon + 1, strlen(colon + 1), 32);
}
