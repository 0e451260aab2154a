/* fuzz_layout_plan.c: libFuzzer harness for the KV -> desired state -> SQL plan pipeline
 * (layout_build, plan_build) with a fixed configuration and a small current state.
 *
 * Input: records "KIND FLAGS suffix \xff value \xfe", repeated. KIND picks where the key lives
 * (orchestrator master key or its /hostname, /port children, replica, generic server, user, any
 * key), FLAGS picks the cluster, region or hostgroup and can blow the key up to 1 MB or the value
 * past 64 KiB. Values may hold any byte but 0xfe/0xff, NULs included.
 *
 * Checked on every input:
 *   - every desired row passes the model's validation again (host, user, password, text);
 *   - entries whose value holds a NUL byte or is larger than 64 KiB contribute nothing: the
 *     desired state with them is a subset of the desired state without them;
 *   - every plan statement is one statement of a known shape: outside its quoted literals it is
 *     one of the templates below (no ';', no comment, no extra clause), quotes are balanced;
 *   - a statement only touches what it may: INSERT/UPDATE a wanted row, UPDATE/DELETE a row
 *     ProxySQL has, in a hostgroup the agent owns; DELETE a user that is the agent's or wanted;
 *   - `shown` equals `sql` except for user passwords, which read '***' there. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "fuzz_sync.h"
#include "config.h"
#include "layout.h"
#include "log.h"
#include "plan.h"

#define MAX_RECORDS 160
#define HUGE_KEY (1024 * 1024)
#define BIG_VALUE (64 * 1024 + 1)

static struct sync_config cfg;
static long owned[64];
static size_t nowned;

static const char config_text[] =
	"admin-addr = \"127.0.0.1:6032\"\n"
	"region = \"eu\"\n"
	"users-prefix = \"proxysql/users\"\n"
	"servers-prefix = \"proxysql/servers\"\n"
	"managed-hostgroups = \"30,31\"\n"
	"clusters = (\n"
	"  { alias = \"shop\"; writer_hostgroup = 10; reader_hostgroup = 11;\n"
	"    remote_readers = ( { region = \"us\"; hostgroup = 21; } ); },\n"
	"  { alias = \"db\"; writer_hostgroup = 40; reader_hostgroup = 41; writer_is_reader = true; }\n"
	");\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_sync_config("fuzz_layout_plan", config_text, &cfg);
	nowned = layout_owned_hostgroups(&cfg.layout, owned, SK_ARRAY_LEN(owned));
	return 0;
}

/* -- input -> KV entries ----------------------------------------------------------------------- */

static const char *const aliases[] = { "shop", "db", "nope", NULL /* from the suffix */ };
static const char *const regions[] = { "eu", "us", "ap", NULL };
static const char *const hostgroups[] = { "30", "31", "77", NULL };

/* `s` (n bytes) repeated to `want` bytes, NUL-terminated. */
static char *repeat_to(const char *s, size_t n, size_t want)
{
	char *out = xmalloc(want + 1);
	size_t have;

	if (n == 0)
		s = "k", n = 1;
	have = n < want ? n : want;
	memcpy(out, s, have);
	while (have < want) {
		size_t more = have < want - have ? have : want - have;

		memcpy(out + have, out, more);
		have += more;
	}
	out[want] = '\0';
	return out;
}

/* Whether the layout must look at an entry: a master key of a configured cluster, a replica of
 * a configured cluster in a routed region, a generic server, a user. */
enum route { R_NONE, R_MASTER, R_OTHER };

/* The 1 MB key: `prefix` then `fill` repeated, in one static buffer (never freed). */
static char huge_buf[64 + HUGE_KEY + 1];
static char huge_fill;

static char *huge_key(const char *prefix, char fill)
{
	size_t n = strlen(prefix);

	if (fill != huge_fill) {
		memset(huge_buf + 64, fill, HUGE_KEY);
		huge_buf[64 + HUGE_KEY] = '\0';
		huge_fill = fill;
	}
	memcpy(huge_buf + 64 - n, prefix, n);
	return huge_buf + 64 - n;
}

static void free_key(char *key)
{
	if ((uintptr_t)key - (uintptr_t)huge_buf >= sizeof(huge_buf))
		free(key);
}

static size_t decode(const uint8_t *data, size_t size, struct kv_pair *kv, enum route *route)
{
	size_t pos = 0, n = 0, huge = 0, big = 0;

	while (pos + 2 <= size && n < MAX_RECORDS) {
		unsigned kind = data[pos] % 8, flags = data[pos + 1];
		const char *suffix = (const char *)data + pos + 2, *value;
		size_t slen = 0, vlen = 0;
		char *sfx, *key, prefix[64];
		bool want_huge;
		const char *pick, *pre, *post;

		pos += 2;
		while (pos + slen < size && data[pos + slen] != 0xff && data[pos + slen] != 0xfe)
			slen++;
		pos += slen;
		value = (const char *)data + pos;
		if (pos < size && data[pos] == 0xff) {
			value++;
			pos++;
			while (pos + vlen < size && data[pos + vlen] != 0xfe)
				vlen++;
			pos += vlen;
		}
		if (pos < size)
			pos++; /* the 0xfe */
		/* At most one 1 MB key and two oversized values per input: enough to reach those
		 * branches without making every run slow. */
		sfx = xstrndup(suffix, slen);
		/* At most one 1 MB key per input, for the kinds whose key ends in the suffix: its
		 * first byte repeated, in a buffer kept between runs (building 1 MB every run made
		 * the harness ten times slower). */
		want_huge = (flags & 0xf0) == 0x70 && kind >= 3 && huge++ == 0;

		/* The key: a prefix picked by KIND and FLAGS, then the suffix (one allocation). */
		switch (kind) {
		case 0:
		case 1:
		case 2: /* orchestrator: mysql/master/<alias>[/hostname|/port] */
			pick = aliases[flags & 3] ? aliases[flags & 3] : sfx;
			pre = "mysql/master/";
			post = kind == 1 ? "/hostname" : kind == 2 ? "/port" : "";
			break;
		case 3: /* mysql/replica/<alias>/<region>/<suffix> */
			snprintf(prefix, sizeof(prefix), "mysql/replica/%s/%s/",
				 aliases[flags & 3] ? aliases[flags & 3] : "shop",
				 regions[(flags >> 2) & 3] ? regions[(flags >> 2) & 3] : "eu/x");
			pre = prefix, pick = sfx, post = "";
			break;
		case 4: /* proxysql/servers/<hostgroup>/<suffix> */
			snprintf(prefix, sizeof(prefix), "proxysql/servers/%s/",
				 hostgroups[flags & 3] ? hostgroups[flags & 3] : "x1");
			pre = prefix, pick = sfx, post = "";
			break;
		case 5: pre = "proxysql/users/", pick = sfx, post = ""; break;
		case 6: pre = "mysql/replica/", pick = sfx, post = ""; break;
		default: pre = "", pick = sfx, post = ""; break; /* any key */
		}
		if (want_huge) {
			key = huge_key(pre, sfx[0] ? sfx[0] : 'k');
		} else {
			size_t l1 = strlen(pre), l2 = strlen(pick), l3 = strlen(post);

			key = xmalloc(l1 + l2 + l3 + 1);
			memcpy(key, pre, l1);
			memcpy(key + l1, pick, l2);
			memcpy(key + l1 + l2, post, l3 + 1);
		}
		switch (kind) {
		case 0:
		case 1:
		case 2: route[n] = (flags & 3) <= 1 ? R_MASTER : R_NONE; break;
		case 3:
			route[n] = (flags & 3) != 2 && (((flags >> 2) & 3) == 3 ||
							(sfx[0] && (((flags >> 2) & 3) == 0 ||
								    (((flags >> 2) & 3) == 1 && (flags & 3) != 1))))
					   ? R_OTHER
					   : R_NONE;
			break;
		case 4: route[n] = sfx[0] ? R_OTHER : R_NONE; break;
		case 5: route[n] = sfx[0] && !strchr(sfx, '/') ? R_OTHER : R_NONE; break;
		default: route[n] = R_NONE; break;
		}
		free(sfx);
		kv[n].key = key;
		if ((flags & 0xd0) == 0x90 && big++ < 2) { /* past the 64 KiB cap */
			kv[n].value = repeat_to(value, vlen, BIG_VALUE);
			kv[n].len = BIG_VALUE;
		} else {
			kv[n].value = xmalloc(vlen + 1);
			memcpy(kv[n].value, value, vlen);
			kv[n].value[vlen] = '\0';
			kv[n].len = vlen;
		}
		n++;
	}
	return n;
}

/* -- invariants -------------------------------------------------------------------------------- */

static bool hostile(const struct kv_pair *kv)
{
	return memchr(kv->value, '\0', kv->len) != NULL || kv->len > 64 * 1024;
}

static bool is_owned(long hg)
{
	for (size_t i = 0; i < nowned; i++)
		if (owned[i] == hg)
			return true;
	return false;
}

static void check_rows(const struct layout_result *r)
{
	const char *bad;

	for (size_t i = 0; i < r->servers.n; i++) {
		const struct px_server *s = &r->servers.v[i];

		if ((bad = model_check_host(s->host)))
			FAIL("desired server host '%.80s' %s", s->host, bad);
		if (s->port < 1 || s->port > 65535 || !is_owned(s->hostgroup))
			FAIL("desired server %ld/%s:%ld out of range", s->hostgroup, s->host, s->port);
		if ((bad = model_check_text(s->comment, MODEL_COMMENT_MAX)))
			FAIL("desired server comment %s", bad);
		if (i && model_server_same(s, &r->servers.v[i - 1]))
			FAIL("desired server %s listed twice", s->host);
	}
	for (size_t i = 0; i < r->users.n; i++) {
		const struct px_user *u = &r->users.v[i];

		if ((bad = model_check_username(u->username)) || (bad = model_check_password(u->password)) ||
		    (bad = model_check_text(u->comment, MODEL_COMMENT_MAX)) ||
		    (u->default_schema && (bad = model_check_text(u->default_schema, MODEL_SCHEMA_MAX))))
			FAIL("desired user '%.80s': %s", u->username, bad);
		if (!u->password[0] || strncmp(u->comment, cfg.layout.user_tag, strlen(cfg.layout.user_tag)) != 0)
			FAIL("desired user '%.80s' without password or owner tag", u->username);
		if (i && strcmp(u->username, r->users.v[i - 1].username) == 0)
			FAIL("desired user '%.80s' listed twice", u->username);
	}
}

static bool rejected(const struct layout_result *r, const char *key)
{
	size_t n = strlen(key) > 300 ? 300 : strlen(key);

	for (size_t i = 0; i < r->nrejects; i++)
		if (strlen(r->rejects[i].key) == n && strncmp(r->rejects[i].key, key, n) == 0)
			return true;
	return false;
}

static const struct kv_pair *first(const struct kv_pair *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return &kv[i];
	return NULL;
}

/* A hostile entry the layout looks at ends as a rejected entry (with its reason logged by the
 * agent). A master's keys count when the cluster has a main or /hostname key (the first of
 * duplicates is the one read). */
static void check_rejected(const struct layout_result *r, const struct kv_pair *kv, size_t n, const enum route *route)
{
	for (size_t i = 0; i < n; i++)
		if (route[i] == R_OTHER && hostile(&kv[i]) && !rejected(r, kv[i].key))
			FAIL("hostile entry %.200s was not rejected", kv[i].key);
	for (size_t a = 0; a < 2; a++) {
		char k[3][64];
		const struct kv_pair *m[3];

		snprintf(k[0], sizeof(k[0]), "mysql/master/%s", aliases[a]);
		snprintf(k[1], sizeof(k[1]), "mysql/master/%s/hostname", aliases[a]);
		snprintf(k[2], sizeof(k[2]), "mysql/master/%s/port", aliases[a]);
		for (size_t j = 0; j < 3; j++)
			m[j] = first(kv, n, k[j]);
		if (!m[0] && !m[1])
			continue;
		for (size_t j = 0; j < 3; j++)
			if (m[j] && hostile(m[j]) && !rejected(r, m[j]->key))
				FAIL("hostile master key %s was not rejected", m[j]->key);
	}
}

/* Hostile entries add nothing: every row built with them is also built without them. */
static void check_subset(const struct layout_result *all, const struct kv_pair *kv, size_t n)
{
	struct kv_pair *clean = xcalloc(n ? n : 1, sizeof(*clean));
	struct layout_result r;
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (!hostile(&kv[i]))
			clean[k++] = kv[i];
	if (k < n) {
		layout_build(&cfg.layout, clean, k, &r);
		for (size_t i = 0; i < all->servers.n; i++) {
			const struct px_server *s = &all->servers.v[i];
			const struct px_server *o = model_servers_find(&r.servers, s->hostgroup, s->host, s->port);

			if (!o || !model_server_same(s, o))
				FAIL("server %ld/%.80s:%ld comes from a NUL or oversized value", s->hostgroup, s->host,
				     s->port);
		}
		for (size_t i = 0; i < all->users.n; i++) {
			const struct px_user *o = model_users_find(&r.users, all->users.v[i].username);

			if (!o || !model_user_same(&all->users.v[i], o))
				FAIL("user %.80s comes from a NUL or oversized value", all->users.v[i].username);
		}
		layout_result_free(&r);
	}
	free(clean);
}

/* One statement, lexed: its shape (literals as ?, numbers as N, NULL kept), and its values. */
struct lexed {
	sk_buf shape;
	char **lit;
	size_t nlit;
	long *num;
	size_t nnum;
};

static void lexed_free(struct lexed *x)
{
	for (size_t i = 0; i < x->nlit; i++)
		free(x->lit[i]);
	free(x->lit);
	free(x->num);
	sk_buf_free(&x->shape);
}

static void shape_add(struct lexed *x, char c)
{
	if (!sk_buf_add(&x->shape, &c, 1))
		FAIL("statement shape too long");
}

/* SQLite / ProxySQL admin lexing: '...' with '' for a quote, backslash literal. */
static void lex(const char *sql, struct lexed *x)
{
	memset(x, 0, sizeof(*x));
	sk_buf_init(&x->shape, 1 << 22);
	for (const char *p = sql; *p;) {
		if (*p == '\'') {
			sk_buf v;

			sk_buf_init(&v, 1 << 22);
			for (p++;; p++) {
				if (!*p)
					FAIL("unbalanced quote in: %.300s", sql);
				if (*p == '\'' && p[1] == '\'') {
					p++;
				} else if (*p == '\'') {
					p++;
					break;
				}
				if (!sk_buf_add(&v, p, 1))
					FAIL("literal too long");
			}
			x->lit = xrealloc(x->lit, (x->nlit + 1) * sizeof(*x->lit));
			x->lit[x->nlit++] = v.data ? v.data : xstrdup("");
			shape_add(x, '?');
		} else if ((*p == '-' && p[1] >= '0' && p[1] <= '9') ||
			   (*p >= '0' && *p <= '9' &&
			    (p == sql || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'))))) {
			char *end;

			x->num = xrealloc(x->num, (x->nnum + 1) * sizeof(*x->num));
			x->num[x->nnum++] = strtol(p, &end, 10);
			p = end;
			shape_add(x, 'N');
		} else {
			shape_add(x, *p++);
		}
	}
	shape_add(x, '\0');
}

enum kind { K_INSERT_SERVERS, K_UPDATE_SERVER, K_DRAIN_SERVER, K_DELETE_SERVER, K_DELETE_USER, K_INSERT_USERS, K_LOAD };

/* Statement templates after lexing. INSERTs take one or more row tuples after VALUES. */
static const struct {
	enum kind kind;
	const char *shape;
	const char *tuples[2]; /* the row shapes an INSERT accepts */
} shapes[] = {
	{ K_INSERT_SERVERS,
	  "INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight, compression, max_connections, "
	  "max_replication_lag, use_ssl, max_latency_ms, comment) VALUES ",
	  { "(N, ?, N, ?, N, N, N, N, N, N, ?)", NULL } },
	{ K_UPDATE_SERVER,
	  "UPDATE mysql_servers SET status=?, weight=N, compression=N, max_connections=N, max_replication_lag=N, "
	  "use_ssl=N, max_latency_ms=N, comment=? WHERE hostgroup_id=N AND hostname=? AND port=N",
	  { NULL, NULL } },
	{ K_DRAIN_SERVER,
	  "UPDATE mysql_servers SET status=? WHERE hostgroup_id=N AND hostname=? AND port=N",
	  { NULL, NULL } },
	{ K_DELETE_SERVER, "DELETE FROM mysql_servers WHERE hostgroup_id=N AND hostname=? AND port=N", { NULL, NULL } },
	{ K_DELETE_USER, "DELETE FROM mysql_users WHERE username=?", { NULL, NULL } },
	{ K_INSERT_USERS,
	  "INSERT INTO mysql_users (username, password, active, use_ssl, default_hostgroup, default_schema, "
	  "schema_locked, transaction_persistent, fast_forward, backend, frontend, max_connections, comment) VALUES ",
	  { "(?, ?, N, N, N, ?, N, N, N, N, N, N, ?)", "(?, ?, N, N, N, NULL, N, N, N, N, N, N, ?)" } },
	{ K_LOAD, "LOAD MYSQL SERVERS TO RUNTIME", { NULL, NULL } },
	{ K_LOAD, "SAVE MYSQL SERVERS TO DISK", { NULL, NULL } },
	{ K_LOAD, "LOAD MYSQL USERS TO RUNTIME", { NULL, NULL } },
	{ K_LOAD, "SAVE MYSQL USERS TO DISK", { NULL, NULL } },
};

/* One row of an INSERT: where its literals and numbers start. */
struct row {
	size_t lit, num;
};

/* Match the lexed shape against the templates; fills rows[] for INSERTs. Returns the index. */
static size_t match(const struct lexed *x, struct row **rows, size_t *nrows)
{
	const char *shape = x->shape.data;

	*rows = NULL;
	*nrows = 0;
	for (size_t k = 0; k < SK_ARRAY_LEN(shapes); k++) {
		size_t n = strlen(shapes[k].shape), lit = 0, num = 0;
		const char *p = shape + n;

		if (!shapes[k].tuples[0]) {
			if (strcmp(shape, shapes[k].shape) == 0)
				return k;
			continue;
		}
		if (strncmp(shape, shapes[k].shape, n) != 0)
			continue;
		for (;;) {
			size_t t;

			for (t = 0; t < 2 && shapes[k].tuples[t]; t++)
				if (strncmp(p, shapes[k].tuples[t], strlen(shapes[k].tuples[t])) == 0)
					break;
			if (t == 2 || !shapes[k].tuples[t])
				break;
			*rows = xrealloc(*rows, (*nrows + 1) * sizeof(**rows));
			(*rows)[*nrows].lit = lit;
			(*rows)[*nrows].num = num;
			(*nrows)++;
			for (const char *q = shapes[k].tuples[t]; *q; q++) {
				lit += *q == '?';
				num += *q == 'N';
			}
			p += strlen(shapes[k].tuples[t]);
			if (*p == '\0')
				return k;
			if (strncmp(p, ", ", 2) != 0)
				break;
			p += 2;
		}
		free(*rows);
		*rows = NULL;
		*nrows = 0;
	}
	return SK_ARRAY_LEN(shapes);
}

static bool user_is_agents(const struct px_user *u)
{
	size_t n = strlen(cfg.layout.user_tag);

	return strncmp(u->comment, cfg.layout.user_tag, n) == 0 && (u->comment[n] == '\0' || u->comment[n] == ':');
}

static void check_server_ref(const char *sql, long hg, const char *host)
{
	if (!is_owned(hg) || model_check_host(host))
		FAIL("statement outside the owned hostgroups or with a bad host: %.300s", sql);
}

static void check_plan(const struct plan *p, const struct layout_result *want, const struct px_servers *have_s,
		       const struct px_users *have_u)
{
	for (size_t i = 0; i < p->n; i++) {
		const char *sql = p->steps[i].sql, *shown = p->steps[i].shown;
		struct lexed x, y;
		struct row *rows;
		size_t k, nrows;
		long hg, port;
		const char *host;

		lex(sql, &x);
		k = match(&x, &rows, &nrows);
		if (k == SK_ARRAY_LEN(shapes))
			FAIL("statement of unknown shape:\n  %.500s\n  shape %.500s", sql, x.shape.data);
		switch (shapes[k].kind) {
		case K_INSERT_SERVERS:
			for (size_t r = 0; r < nrows; r++) {
				hg = x.num[rows[r].num], host = x.lit[rows[r].lit], port = x.num[rows[r].num + 1];
				check_server_ref(sql, hg, host);
				if (!model_servers_find(&want->servers, hg, host, port) ||
				    model_servers_find(have_s, hg, host, port))
					FAIL("INSERT of a server that is not wanted or already there: %.300s", sql);
			}
			break;
		case K_UPDATE_SERVER:
			hg = x.num[6], host = x.lit[2], port = x.num[7];
			check_server_ref(sql, hg, host);
			if (!model_servers_find(&want->servers, hg, host, port) ||
			    !model_servers_find(have_s, hg, host, port))
				FAIL("UPDATE of a server not both wanted and present: %.300s", sql);
			break;
		case K_DRAIN_SERVER:
		case K_DELETE_SERVER:
			hg = x.num[0], host = x.lit[shapes[k].kind == K_DRAIN_SERVER ? 1 : 0], port = x.num[1];
			check_server_ref(sql, hg, host);
			if (shapes[k].kind == K_DRAIN_SERVER && strcmp(x.lit[0], "OFFLINE_SOFT") != 0)
				FAIL("drain to status '%s'", x.lit[0]);
			if (!model_servers_find(have_s, hg, host, port) ||
			    model_servers_find(&want->servers, hg, host, port))
				FAIL("drain/delete of a server that is wanted or absent: %.300s", sql);
			break;
		case K_DELETE_USER: {
			const struct px_user *h = model_users_find(have_u, x.lit[0]);

			if (!h || (!user_is_agents(h) && !model_users_find(&want->users, x.lit[0])))
				FAIL("DELETE of a user that is neither the agent's nor wanted: %.300s", sql);
			break;
		}
		case K_INSERT_USERS:
			/* shown: the same statement with each password as '***' */
			lex(shown, &y);
			if (strcmp(x.shape.data, y.shape.data) != 0 || y.nlit != x.nlit || y.nnum != x.nnum ||
			    memcmp(x.num, y.num, x.nnum * sizeof(long)) != 0)
				FAIL("shown is not the statement with the passwords redacted:\n  %.300s", shown);
			for (size_t r = 0; r < nrows; r++) {
				const struct px_user *w = model_users_find(&want->users, x.lit[rows[r].lit]);

				if (!w || strcmp(w->password, x.lit[rows[r].lit + 1]) != 0)
					FAIL("INSERT of a user that is not wanted, or with another password: %.300s",
					     sql);
				if (strcmp(y.lit[rows[r].lit + 1], "***") != 0)
					FAIL("a password is not redacted in shown: %.300s", shown);
			}
			for (size_t j = 0; j < x.nlit; j++) {
				bool password = false;

				for (size_t r = 0; r < nrows; r++)
					password = password || j == rows[r].lit + 1;
				if (!password && strcmp(x.lit[j], y.lit[j]) != 0)
					FAIL("shown differs from the statement beyond the passwords: %.300s", shown);
			}
			lexed_free(&y);
			break;
		case K_LOAD: break;
		}
		if (shapes[k].kind != K_INSERT_USERS && strcmp(sql, shown) != 0)
			FAIL("shown differs from the statement: %.300s", shown);
		free(rows);
		lexed_free(&x);
	}
}

/* -- the current state ProxySQL has ------------------------------------------------------------ */

/* The rows a plan says memory holds after it ran need nothing more: planned again from them, the
 * same desired state gives no statement. */
static void check_after(const struct plan *p, const struct layout_result *want, const struct plan_drain *d, size_t nd,
			const struct plan_options *o)
{
	struct px_servers s = { 0 };
	struct px_users u = { 0 };
	struct plan q;

	if (!p->after_exact)
		return;
	for (size_t i = 0; i < p->nafter_servers; i++)
		model_servers_add(&s, p->after_servers[i]);
	model_servers_sort(&s);
	for (size_t i = 0; i < p->nafter_users; i++)
		model_users_add(&u, p->after_users[i]);
	plan_build(&(struct plan_inputs){ .want_servers = &want->servers,
					  .have_servers = &s,
					  .want_users = &want->users,
					  .have_users = &u,
					  .drains = d,
					  .ndrains = nd },
		   o, &q);
	if (q.n)
		FAIL("the rows after a plan are not its fixed point: %s", q.steps[0].shown);
	plan_free(&q);
	model_servers_free(&s);
	model_users_free(&u);
}

static void current(unsigned sel, struct px_servers *s, struct px_users *u)
{
	static const struct {
		long hg;
		const char *host, *status;
	} rows[] = {
		{ 10, "db1", "ONLINE" },       { 11, "db2", "ONLINE" },     { 11, "db3", "OFFLINE_SOFT" },
		{ 21, "old", "OFFLINE_HARD" }, { 99, "foreign", "ONLINE" }, { 30, "gen1", "ONLINE" },
		{ 41, "db1", "ONLINE" },
	};
	static const struct {
		const char *name, *password, *comment;
		long frontend, backend;
	} users[] = {
		{ "app", "pw-app", "proxysql-sync", 1, 1 },           { "human", "x", "added by hand", 1, 1 },
		{ "split", "pw", "proxysql-sync: old", 1, 0 },        { "split", "pw", "proxysql-sync: old", 0, 1 },
		{ "proxysql-syncer", "pw", "proxysql-syncer", 1, 1 },
	};

	memset(s, 0, sizeof(*s));
	memset(u, 0, sizeof(*u));
	for (size_t i = 0; i < SK_ARRAY_LEN(rows); i++) {
		struct px_server r;

		if (!(sel & (1u << i)))
			continue;
		model_server_defaults(&r);
		r.hostgroup = rows[i].hg;
		r.host = (char *)rows[i].host;
		r.comment = "";
		sk_strlcpy(r.status, rows[i].status, sizeof(r.status));
		model_servers_add(s, &r);
	}
	for (size_t i = 0; i < SK_ARRAY_LEN(users); i++) {
		struct px_user r;

		model_user_defaults(&r);
		r.username = (char *)users[i].name;
		r.password = (char *)users[i].password;
		r.comment = (char *)users[i].comment;
		r.frontend = users[i].frontend;
		r.backend = users[i].backend;
		model_users_add(u, &r);
	}
	model_servers_sort(s);
	model_users_sort(u);
}

/* The two parts built alone are the whole built at once: the same rows, keeps and rejects
 * (layout_build_parts, which the coordinator uses to rebuild only what a change feeds). */
static void check_parts(const struct layout_result *all, const struct kv_pair *kv, size_t n)
{
	struct layout_result s, u;

	layout_build_parts(&cfg.layout, kv, n, LAYOUT_PART_SERVERS, &s);
	layout_build_parts(&cfg.layout, kv, n, LAYOUT_PART_USERS, &u);
	if (s.servers.n != all->servers.n || u.users.n != all->users.n || s.users.n || u.servers.n ||
	    s.peers.n != all->peers.n || s.keep_servers.n != all->keep_servers.n ||
	    u.keep_users.n != all->keep_users.n || s.nunsettled != all->nunsettled ||
	    s.nrejects + u.nrejects != all->nrejects)
		FAIL("the parts built alone differ from the whole in their counts");
	for (size_t i = 0; i < s.servers.n; i++)
		if (!model_server_same(&s.servers.v[i], &all->servers.v[i]))
			FAIL("server %zu differs between the servers part and the whole", i);
	for (size_t i = 0; i < u.users.n; i++)
		if (!model_user_same(&u.users.v[i], &all->users.v[i]))
			FAIL("user %zu differs between the users part and the whole", i);
	for (size_t i = 0; i < u.nrejects; i++)
		if (layout_key_parts(&cfg.layout, u.rejects[i].key) != LAYOUT_PART_USERS)
			FAIL("the users part rejected a key that feeds the servers: %s", u.rejects[i].key);
	layout_result_free(&s);
	layout_result_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kv_pair kv[MAX_RECORDS];
	enum route route[MAX_RECORDS];
	struct layout_result lr;
	struct px_servers have_s;
	struct px_users have_u;
	struct plan_drain drains[] = { { 11, "db3", 3306, 2, 10 } };
	struct plan_options po = { 0 };
	struct plan plan;
	unsigned sel = size ? data[0] : 0;
	size_t n;
	char *text;

	if (size < 1)
		return 0;
	n = decode(data + 1, size - 1, kv, route);
	layout_build(&cfg.layout, kv, n, &lr);
	check_rows(&lr);
	check_subset(&lr, kv, n);
	check_rejected(&lr, kv, n, route);
	check_parts(&lr, kv, n);
	for (size_t i = 0; i < lr.nrejects; i++)
		if (!lr.rejects[i].key || !lr.rejects[i].reason || strlen(lr.rejects[i].key) > 300)
			FAIL("reject without a key or reason, or a key longer than 300 bytes");

	current(sel & 0x7f, &have_s, &have_u);
	po.owned_hostgroups = owned;
	po.nowned = nowned;
	po.user_tag = cfg.layout.user_tag;
	po.drain_timeout_ms = (sel & 0x80) ? 0 : 60000;
	po.save_to_disk = (sel & 0x40) != 0;
	plan_build(&(struct plan_inputs){ .want_servers = &lr.servers,
					  .have_servers = &have_s,
					  .want_users = &lr.users,
					  .have_users = &have_u,
					  .drains = drains,
					  .ndrains = SK_ARRAY_LEN(drains) },
		   &po, &plan);
	check_plan(&plan, &lr, &have_s, &have_u);
	check_after(&plan, &lr, drains, SK_ARRAY_LEN(drains), &po);
	text = plan_text(&plan);
	free(text);

	plan_free(&plan);
	model_servers_free(&have_s);
	model_users_free(&have_u);
	layout_result_free(&lr);
	for (size_t i = 0; i < n; i++) {
		free_key(kv[i].key);
		free(kv[i].value);
	}
	return 0;
}
