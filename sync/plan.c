/* plan.c: the difference between what ProxySQL has and what it should have, as admin statements. */
#include "plan.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SQL_MAX (1024 * 1024)
#define PLAN_BATCH 100 /* rows per INSERT */
/* Append a string literal (its length known at compile time). */
#define ADD_LIT(b, lit) sk_buf_add((b), (lit), sizeof(lit) - 1)

static bool owned(const struct plan_options *o, long hg)
{
	size_t lo = 0, hi = o->nowned;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->owned_hostgroups[mid] == hg)
			return true;
		if (o->owned_hostgroups[mid] < hg)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static void add_step(struct plan *p, sk_buf *sql, sk_buf *shown)
{
	p->steps = model_grow(p->steps, p->n, sizeof(*p->steps));
	p->steps[p->n].sql = sql->data ? sql->data : xstrdup("");
	/* Without a redacted text the statement shows as it is: one string, not a copy. */
	p->steps[p->n].shown = shown ? (shown->data ? shown->data : xstrdup("")) : p->steps[p->n].sql;
	p->n++;
	sk_buf_init(sql, SQL_MAX);
	if (shown)
		sk_buf_init(shown, SQL_MAX);
}

static void after_server(struct plan *p, const struct px_server *s)
{
	p->after_servers = model_grow(p->after_servers, p->nafter_servers, sizeof(*p->after_servers));
	p->after_servers[p->nafter_servers++] = s;
}

/* The `rows` rows of a user from `first` on. */
static void after_user(struct plan *p, const struct px_user *first, size_t rows)
{
	for (size_t k = 0; k < rows; k++) {
		p->after_users = model_grow(p->after_users, p->nafter_users, sizeof(*p->after_users));
		p->after_users[p->nafter_users++] = &first[k];
	}
}

static void add_literal(struct plan *p, const char *text)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (sk_buf_add(&b, text, strlen(text)))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
}

/* "WHERE hostgroup_id=H AND hostname='h' AND port=P" */
static bool where_server(sk_buf *b, const struct px_server *s)
{
	return sk_buf_addf(b, " WHERE hostgroup_id=%ld AND hostname=", s->hostgroup) && model_sql_quote(b, s->host) &&
	       sk_buf_addf(b, " AND port=%ld", s->port);
}

/* INSERT the rows in batches of PLAN_BATCH: one statement per query still, far fewer round trips
 * (an initial sync of thousands of rows). */
static void server_inserts(struct plan *p, const struct px_server *const *rows, size_t n)
{
	for (size_t at = 0; at < n; at += PLAN_BATCH) {
		size_t end = at + PLAN_BATCH < n ? at + PLAN_BATCH : n;
		bool ok;
		sk_buf b;

		sk_buf_init(&b, SQL_MAX);
		ok = sk_buf_addf(&b,
				 "INSERT INTO %s_servers (hostgroup_id, hostname, port, status, weight, compression, "
				 "max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES ",
				 p->m->name);
		for (size_t i = at; i < end && ok; i++) {
			const struct px_server *s = rows[i];

			ok = sk_buf_addf(&b, "%s(%ld, ", i > at ? ", " : "", s->hostgroup) &&
			     model_sql_quote(&b, s->host) && sk_buf_addf(&b, ", %ld, ", s->port) &&
			     model_sql_quote(&b, s->status) &&
			     sk_buf_addf(&b, ", %ld, %ld, %ld, %ld, %ld, %ld, ", s->weight, s->compression,
					 s->max_connections, s->max_replication_lag, s->use_ssl, s->max_latency_ms) &&
			     model_sql_quote(&b, s->comment) && ADD_LIT(&b, ")");
		}
		if (ok)
			add_step(p, &b, NULL);
		else
			sk_buf_free(&b);
		p->server_inserts += end - at;
	}
}

static void server_update(struct plan *p, const struct px_server *s)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (sk_buf_addf(&b, "UPDATE %s_servers SET status=", p->m->name) && model_sql_quote(&b, s->status) &&
	    sk_buf_addf(&b,
			", weight=%ld, compression=%ld, max_connections=%ld, max_replication_lag=%ld, use_ssl=%ld, "
			"max_latency_ms=%ld, comment=",
			s->weight, s->compression, s->max_connections, s->max_replication_lag, s->use_ssl,
			s->max_latency_ms) &&
	    model_sql_quote(&b, s->comment) && where_server(&b, s))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
	p->server_updates++;
}

static void server_drain(struct plan *p, const struct px_server *s)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (sk_buf_addf(&b, "UPDATE %s_servers SET status='OFFLINE_SOFT'", p->m->name) && where_server(&b, s))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
	p->server_drains++;
}

static void server_delete(struct plan *p, const struct px_server *s)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (sk_buf_addf(&b, "DELETE FROM %s_servers", p->m->name) && where_server(&b, s))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
	p->server_deletes++;
}

static int drain_key_cmp(const struct plan_drain *a, const struct plan_drain *b)
{
	int c;

	if (a->hostgroup != b->hostgroup)
		return a->hostgroup < b->hostgroup ? -1 : 1;
	c = strcmp(a->host, b->host);
	return c ? c : a->port < b->port ? -1 : a->port > b->port;
}

/* By server, then by place in the input: the first of two drains of one server comes first. */
static int drain_cmp(const void *x, const void *y)
{
	const struct plan_drain *a = *(const struct plan_drain *const *)x, *b = *(const struct plan_drain *const *)y;
	int c = drain_key_cmp(a, b);

	return c ? c : a < b ? -1 : a > b;
}

/* The drains sorted by server, for find_drain. Caller frees. */
static const struct plan_drain **drains_sorted(const struct plan_drain *d, size_t n)
{
	const struct plan_drain **v = xcalloc(n ? n : 1, sizeof(*v));

	for (size_t i = 0; i < n; i++)
		v[i] = &d[i];
	if (n > 1)
		qsort(v, n, sizeof(*v), drain_cmp);
	return v;
}

/* What the drains say of `s` (the first one given for it), or NULL. */
static const struct plan_drain *find_drain(const struct plan_drain *const *sorted, size_t n, const struct px_server *s)
{
	struct plan_drain key = { .hostgroup = s->hostgroup, .host = s->host, .port = s->port };
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (drain_key_cmp(sorted[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && drain_key_cmp(sorted[lo], &key) == 0 ? sorted[lo] : NULL;
}

/* A server ProxySQL has in an owned hostgroup that is no longer wanted. */
static void server_gone(struct plan *p, const struct px_server *s, const struct plan_drain *const *d, size_t nd,
			const struct plan_options *o)
{
	const struct plan_drain *info;

	if (sk_streq_ci(s->status, "OFFLINE_HARD") || o->drain_timeout_ms <= 0) {
		server_delete(p, s);
		return;
	}
	if (!sk_streq_ci(s->status, "OFFLINE_SOFT")) {
		server_drain(p, s);
		p->after_exact = false; /* the row stays with another status */
		return;
	}
	info = find_drain(d, nd, s);
	if (!info || info->conn_used <= 0 || info->draining_ms >= o->drain_timeout_ms) {
		server_delete(p, s);
	} else {
		p->draining++;
		after_server(p, s);
	}
}

static void user_delete(struct plan *p, const char *username)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (sk_buf_addf(&b, "DELETE FROM %s_users WHERE username=", p->m->name) && model_sql_quote(&b, username))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
}

/* default_schema and schema_locked, for a users table that has them. */
static bool user_schema(sk_buf *t, const struct px_user *u, bool schema)
{
	return !schema || (((u->default_schema ? model_sql_quote(t, u->default_schema) : ADD_LIT(t, "NULL")) &&
			    sk_buf_addf(t, ", %ld, ", u->schema_locked)));
}

static bool user_values(sk_buf *t, const struct px_user *u, bool redact, bool schema)
{
	return ADD_LIT(t, "(") && model_sql_quote(t, u->username) && ADD_LIT(t, ", ") &&
	       (redact ? ADD_LIT(t, "'***'") : model_sql_quote(t, u->password)) &&
	       sk_buf_addf(t, ", %ld, %ld, %ld, ", u->active, u->use_ssl, u->default_hostgroup) &&
	       user_schema(t, u, schema) &&
	       sk_buf_addf(t, "%ld, %ld, %ld, %ld, %ld, ", u->transaction_persistent, u->fast_forward, u->backend,
			   u->frontend, u->max_connections) &&
	       model_sql_quote(t, u->comment) && ADD_LIT(t, ")");
}

static void user_inserts(struct plan *p, const struct px_user *const *rows, size_t n)
{
	for (size_t at = 0; at < n; at += PLAN_BATCH) {
		size_t end = at + PLAN_BATCH < n ? at + PLAN_BATCH : n;
		sk_buf b, shown;
		bool ok = true;

		sk_buf_init(&b, SQL_MAX);
		sk_buf_init(&shown, SQL_MAX);
		for (int pass = 0; pass < 2 && ok; pass++) {
			sk_buf *t = pass ? &shown : &b;

			ok = sk_buf_addf(
				t,
				"INSERT INTO %s_users (username, password, active, use_ssl, default_hostgroup, %s"
				"transaction_persistent, fast_forward, backend, frontend, max_connections, "
				"comment) VALUES ",
				p->m->name, p->m->schema ? "default_schema, schema_locked, " : "");
			for (size_t i = at; i < end && ok; i++)
				ok = (i == at || ADD_LIT(t, ", ")) && user_values(t, rows[i], pass == 1, p->m->schema);
		}
		if (ok) {
			add_step(p, &b, &shown);
		} else {
			sk_buf_free(&b);
			sk_buf_free(&shown);
		}
	}
}

static int server_key_cmp(const struct px_server *a, const struct px_server *b)
{
	int c;

	if (a->hostgroup != b->hostgroup)
		return a->hostgroup < b->hostgroup ? -1 : 1;
	c = strcmp(a->host, b->host);
	if (c)
		return c;
	return a->port < b->port ? -1 : a->port > b->port;
}

/* Keeps in order: by hostgroup, a whole hostgroup (host NULL) first, then by host and port. */
static int keep_cmp(const struct px_keep *a, const struct px_keep *b)
{
	int c;

	if (a->hostgroup != b->hostgroup)
		return a->hostgroup < b->hostgroup ? -1 : 1;
	if (!a->host || !b->host)
		return !a->host && !b->host ? 0 : !a->host ? -1 : 1;
	c = strcmp(a->host, b->host);
	return c ? c : a->port < b->port ? -1 : a->port > b->port;
}

static int keep_ptr_cmp(const void *x, const void *y)
{
	return keep_cmp(*(const struct px_keep *const *)x, *(const struct px_keep *const *)y);
}

/* The keeps sorted (keep_cmp), for kept_server. Caller frees. */
static const struct px_keep **keeps_sorted(const struct px_keeps *k, size_t *n)
{
	const struct px_keep **v;

	*n = k ? k->n : 0;
	v = xcalloc(*n ? *n : 1, sizeof(*v));
	for (size_t i = 0; i < *n; i++)
		v[i] = &k->v[i];
	if (*n > 1)
		qsort(v, *n, sizeof(*v), keep_ptr_cmp);
	return v;
}

static bool keeps_have(const struct px_keep *const *v, size_t n, const struct px_keep *key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = keep_cmp(v[mid], key);

		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/* A rejected key keeps `s`: its whole hostgroup, or the server itself. */
static bool kept_server(const struct px_keep *const *v, size_t n, const struct px_server *s)
{
	struct px_keep group = { .hostgroup = s->hostgroup }, one = { s->hostgroup, s->host, s->port };

	return n && (keeps_have(v, n, &group) || keeps_have(v, n, &one));
}

/* One table's end of a plan: what it owes (plan_options' fields for that table) and its LOAD and
 * SAVE statements. */
struct table_end {
	bool load_owed, save_owed;
	size_t foreign;
	const char *table; /* "SERVERS", "USERS" */
};

/* The LOAD and SAVE that close a table's plan: a LOAD after statements or when one is owed, a SAVE
 * with it; else a SAVE when one is owed and saving would not put rows on disk that nobody loaded. */
static void finish_table(struct plan *p, size_t before, const struct plan_options *o, const struct table_end *t)
{
	char load[40], save[40];

	sk_fmt(load, sizeof(load), "LOAD %s %s TO RUNTIME", p->m->cmd, t->table);
	sk_fmt(save, sizeof(save), "SAVE %s %s TO DISK", p->m->cmd, t->table);
	if (p->n > before || t->load_owed) {
		add_literal(p, load);
		if (o->save_to_disk)
			add_literal(p, save);
	} else if (o->save_to_disk && t->save_owed && t->foreign == 0) {
		add_literal(p, save);
	}
}

/* What the servers' merge needs besides the two lists: the keeps and the drains sorted, and the
 * inserts gathered for one multi-row INSERT. */
struct server_merge {
	const struct plan_options *o;
	const struct px_keep **keeps;
	size_t nkeeps;
	const struct plan_drain **drains;
	size_t nd;
	const struct px_server **ins;
	size_t nins;
};

/* Merge the two sorted lists; rows outside owned hostgroups are someone else's. */
static void merge_servers(const struct px_servers *want, const struct px_servers *have, struct server_merge *m,
			  struct plan *p)
{
	size_t i = 0, j = 0;

	while (i < want->n || j < have->n) {
		const struct px_server *w = i < want->n ? &want->v[i] : NULL;
		const struct px_server *h = j < have->n ? &have->v[j] : NULL;
		int c;

		if (h && !owned(m->o, h->hostgroup)) {
			after_server(p, h);
			j++;
			continue;
		}
		c = !w ? 1 : !h ? -1 : server_key_cmp(w, h);
		if (c < 0) {
			m->ins[m->nins++] = w;
			after_server(p, w);
			i++;
		} else if (c > 0) {
			if (kept_server(m->keeps, m->nkeeps, h))
				after_server(p, h);
			else
				server_gone(p, h, m->drains, m->nd, m->o);
			j++;
		} else {
			if (!model_server_same(w, h))
				server_update(p, w);
			after_server(p, w);
			i++;
			j++;
		}
	}
}

static void plan_servers(const struct px_servers *want, const struct px_servers *have, const struct plan_drain *d,
			 size_t nd, const struct plan_options *o, struct plan *p)
{
	size_t before = p->n;
	struct server_merge m = { .o = o, .nd = nd };

	if (o->hold_foreign && o->foreign_servers) {
		p->servers_held = true;
		p->after_exact = false;
		return;
	}
	m.ins = xcalloc(want->n ? want->n : 1, sizeof(*m.ins));
	m.keeps = keeps_sorted(o->keep_servers, &m.nkeeps);
	m.drains = drains_sorted(d, nd);
	merge_servers(want, have, &m, p);
	server_inserts(p, m.ins, m.nins);
	free(m.ins);
	free(m.keeps);
	free(m.drains);
	p->servers_changed = p->n > before;
	finish_table(p, before, o,
		     &(struct table_end){ o->load_owed_servers, o->save_owed_servers, o->foreign_servers, "SERVERS" });
}

static bool tagged(const struct px_user *u, const char *tag)
{
	size_t n = strlen(tag);

	return n && strncmp(u->comment, tag, n) == 0 && (u->comment[n] == '\0' || u->comment[n] == ':');
}

/* Every row of the user that starts at have[j] (rows of them) carries the tag. */
static bool group_tagged(const struct px_users *have, size_t j, size_t rows, const char *tag)
{
	for (size_t k = 0; k < rows; k++)
		if (!tagged(&have->v[j + k], tag))
			return false;
	return rows > 0;
}

static bool is_protected(const struct plan_options *o, const char *name, struct plan *p)
{
	if (!o->protected_users || !model_names_has(o->protected_users, name))
		return false;
	if (!p->user_protected++)
		p->first_protected = name;
	return true;
}

/* The users gathered for one multi-row INSERT. */
struct user_ins {
	const struct px_user **v;
	size_t n;
};

/* A user only in KV: inserted, unless named like one of ProxySQL's own logins. */
static void user_new(const struct plan_options *o, struct plan *p, const struct px_user *w, struct user_ins *ins)
{
	if (is_protected(o, w->username, p))
		return;
	ins->v[ins->n++] = w;
	after_user(p, w, 1);
	p->user_inserts++;
}

/* A user gone from KV (its `rows` rows at `h`): the agent's users go (kept ones, whose key was
 * rejected, stay). */
static void user_gone(const struct plan_options *o, struct plan *p, const struct px_user *h, size_t rows, bool mine)
{
	if (mine && !(o->keep_users && model_names_has(o->keep_users, h->username))) {
		user_delete(p, h->username);
		p->user_deletes++;
	} else {
		after_user(p, h, rows);
	}
}

/* A user's rows on the target: `rows` of them at `h`, `mine` when they carry the tag. */
struct user_rows {
	const struct px_user *h;
	size_t rows;
	bool mine;
};

/* A user in KV (`w`) and on the target (`have`). */
static void user_both(const struct plan_options *o, struct plan *p, const struct px_user *w,
		      const struct user_rows *have, struct user_ins *ins)
{
	const struct px_user *h = have->h;
	size_t rows = have->rows;
	bool mine = have->mine;

	if (is_protected(o, w->username, p)) {
		if (mine) { /* an earlier row of the agent's that locks a login out: removed */
			user_delete(p, w->username);
			p->user_deletes++;
		} else {
			after_user(p, h, rows);
		}
	} else if (!mine && !o->adopt_users) {
		if (!p->user_conflicts++)
			p->first_conflict = w->username;
		after_user(p, h, rows);
	} else if (rows != 1 || !model_user_same(w, h)) {
		user_delete(p, w->username); /* replaced: deleted now, inserted with the new ones */
		ins->v[ins->n++] = w;
		after_user(p, w, 1);
		p->user_updates++;
	} else {
		after_user(p, h, rows);
	}
}

static void plan_users(const struct px_users *want, const struct px_users *have, const struct plan_options *o,
		       struct plan *p)
{
	size_t i = 0, j = 0, before = p->n;
	struct user_ins ins = { 0 };

	if (o->hold_foreign && o->foreign_users) {
		p->users_held = true;
		p->after_exact = false;
		return;
	}
	ins.v = xcalloc(want->n ? want->n : 1, sizeof(*ins.v));
	/* `have` may hold two rows for a user (frontend-only and backend-only): compare the group. */
	while (i < want->n || j < have->n) {
		const struct px_user *w = i < want->n ? &want->v[i] : NULL;
		const struct px_user *h = j < have->n ? &have->v[j] : NULL;
		int c = !w ? 1 : !h ? -1 : strcmp(w->username, h->username);
		size_t rows = 0;
		bool mine;

		if (h)
			while (j + rows < have->n && strcmp(have->v[j + rows].username, h->username) == 0)
				rows++;
		mine = h && group_tagged(have, j, rows, o->user_tag);
		if (c < 0)
			user_new(o, p, w, &ins);
		else if (c > 0)
			user_gone(o, p, h, rows, mine);
		else
			user_both(o, p, w, &(struct user_rows){ h, rows, mine }, &ins);
		if (c <= 0)
			i++;
		if (c >= 0)
			j += rows;
	}
	user_inserts(p, ins.v, ins.n);
	free(ins.v);
	p->users_changed = p->n > before;
	finish_table(p, before, o,
		     &(struct table_end){ o->load_owed_users, o->save_owed_users, o->foreign_users, "USERS" });
}

void plan_build(const struct plan_inputs *in, const struct plan_options *o, struct plan *out)
{
	memset(out, 0, sizeof(*out));
	out->m = o->module ? o->module : &px_mysql;
	out->after_exact = true;
	if (in->want_servers && in->have_servers)
		plan_servers(in->want_servers, in->have_servers, in->drains, in->ndrains, o, out);
	if (in->want_users && in->have_users)
		plan_users(in->want_users, in->have_users, o, out);
}

char *plan_text(const struct plan *p)
{
	sk_buf b;

	sk_buf_init(&b, (size_t)1 << 30);
	for (size_t i = 0; i < p->n; i++)
		if (!sk_buf_addf(&b, "%s;\n", p->steps[i].shown))
			break;
	return b.data ? b.data : xstrdup("");
}

void plan_drop_text(struct plan *p)
{
	for (size_t i = 0; p->steps && i < p->n; i++) {
		if (p->steps[i].shown != p->steps[i].sql)
			free(p->steps[i].shown);
		if (p->steps[i].sql) {
			sk_wipe(p->steps[i].sql, strlen(p->steps[i].sql));
			free(p->steps[i].sql);
		}
		p->steps[i].sql = p->steps[i].shown = NULL;
	}
	free(p->steps);
	p->steps = NULL;
	free(p->after_servers);
	free(p->after_users);
	p->after_servers = NULL;
	p->after_users = NULL;
	p->nafter_servers = p->nafter_users = 0;
	p->after_exact = false;
}

/* ", N THING(s) WHAT" onto buf when n is not 0. */
static void describe_count(char *buf, size_t len, size_t n, const char *thing, const char *what)
{
	size_t used = strlen(buf);

	if (n)
		snprintf(buf + used, len - used, "%s%zu %s%s %s", used ? ", " : "", n, thing, n == 1 ? "" : "s", what);
}

/* A plan with no row changed: which of LOAD and SAVE it sends. */
static const char *describe_owed(const struct plan *p)
{
	bool load = false, save = false;

	if (!p->steps) /* the text was dropped once the statements ran (plan_drop_text) */
		return "no row changed: a LOAD or SAVE owed from earlier (a SAVE put off by save-delay, or a runtime "
		       "behind memory)";
	for (size_t i = 0; i < p->n; i++) {
		const char *sql = p->steps[i].shown ? p->steps[i].shown : p->steps[i].sql;

		load = load || (sql && strncmp(sql, "LOAD ", 5) == 0);
		save = save || (sql && strncmp(sql, "SAVE ", 5) == 0);
	}
	if (save && !load)
		return "no row changed: saved to disk what was loaded before (a SAVE put off by save-delay, or owed)";
	if (load && save)
		return "no row changed: loaded to runtime and saved to disk what memory already held";
	if (load)
		return "no row changed: loaded to runtime what memory already held";
	return "no row changed";
}

const char *plan_describe(const struct plan *p, char *buf, size_t len)
{
	if (!len)
		return buf;
	buf[0] = '\0';
	describe_count(buf, len, p->server_inserts, "server", "added");
	describe_count(buf, len, p->server_updates, "server", "changed");
	describe_count(buf, len, p->server_drains, "server", "set OFFLINE_SOFT to drain");
	describe_count(buf, len, p->server_deletes, "server", "removed");
	describe_count(buf, len, p->user_inserts, "user", "added");
	describe_count(buf, len, p->user_updates, "user", "changed");
	describe_count(buf, len, p->user_deletes, "user", "removed");
	describe_count(buf, len, p->peer_inserts, "ProxySQL peer", "added");
	describe_count(buf, len, p->peer_updates, "ProxySQL peer", "changed");
	describe_count(buf, len, p->peer_deletes, "ProxySQL peer", "removed");
	if (!buf[0])
		snprintf(buf, len, "%s", describe_owed(p));
	return buf;
}

void plan_free(struct plan *p)
{
	plan_drop_text(p);
	memset(p, 0, sizeof(*p));
}

/* ---- drift: memory against runtime ---------------------------------------------------- */

/* A row is compared by a 128-bit hash of its normalised columns (each one length-prefixed), not
 * by its text: a set of 100,000 runtime rows takes 2.4 MB instead of 25 MB. Two different rows
 * have one hash with a probability near 2^-128; the worst it could do is miss a drift. */
static void set_add(struct plan_rowset *s, const sk_hash *h, bool owned)
{
	s->v = model_grow(s->v, s->n, sizeof(*s->v));
	s->v[s->n].h[0] = h->a;
	s->v[s->n].h[1] = h->b;
	s->v[s->n].owned = owned;
	s->n++;
	s->sealed = false;
}

static int rowhash_cmp(const void *x, const void *y)
{
	const struct plan_rowhash *a = x, *b = y;

	if (a->h[0] != b->h[0])
		return a->h[0] < b->h[0] ? -1 : 1;
	return a->h[1] < b->h[1] ? -1 : a->h[1] > b->h[1];
}

void plan_rowset_seal(struct plan_rowset *s)
{
	size_t k = 0;

	if (s->sealed)
		return;
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), rowhash_cmp);
	for (size_t i = 0; i < s->n; i++) {
		if (k && rowhash_cmp(&s->v[k - 1], &s->v[i]) == 0) {
			s->v[k - 1].owned = s->v[k - 1].owned || s->v[i].owned;
			continue;
		}
		s->v[k++] = s->v[i];
	}
	s->n = k;
	s->sealed = true;
}

void plan_rowset_free(struct plan_rowset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* Count the rows of each sealed side that the other lacks. */
static void set_diff(const struct plan_rowset *a, const struct plan_rowset *b, struct plan_drift *d)
{
	size_t i = 0, j = 0;

	memset(d, 0, sizeof(*d));
	while (i < a->n || j < b->n) {
		int c = i >= a->n ? 1 : j >= b->n ? -1 : rowhash_cmp(&a->v[i], &b->v[j]);
		const struct plan_rowhash *r = c < 0 ? &a->v[i] : c > 0 ? &b->v[j] : NULL;

		if (r)
			*(r->owned ? &d->owned : &d->foreign) += 1;
		i += c <= 0;
		j += c >= 0;
	}
}

static void server_side(const struct px_servers *rows, const struct px_families *fam, const struct plan_options *o,
			struct plan_rowset *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < rows->n; i++) {
		const struct px_server *s = &rows->v[i];
		const struct px_family *f = model_family_of(fam, s->hostgroup);
		char status[sizeof(s->status)];
		sk_hash h = { 0xcbf29ce484222325ULL, 0x243f6a8885a308d3ULL };

		if (sk_streq_ci(s->status, "OFFLINE_HARD"))
			continue;
		/* Runtime upper-cases what memory may hold in any case; SHUNNED is the monitor's. */
		for (size_t k = 0; k < sizeof(status); k++)
			status[k] = (char)toupper((unsigned char)s->status[k]);
		status[sizeof(status) - 1] = '\0';
		if (strncmp(status, "SHUNNED", 7) == 0)
			sk_strlcpy(status, "ONLINE", sizeof(status));
		sk_hash_long(&h, f ? f->hg[0] : s->hostgroup);
		sk_hash_str(&h, s->host);
		sk_hash_long(&h, s->port);
		sk_hash_str(&h, status);
		sk_hash_long(&h, s->weight);
		sk_hash_long(&h, s->compression);
		sk_hash_long(&h, s->max_connections);
		sk_hash_long(&h, s->max_replication_lag);
		sk_hash_long(&h, s->use_ssl);
		sk_hash_long(&h, s->max_latency_ms);
		sk_hash_str(&h, s->comment);
		set_add(out, &h, owned(o, s->hostgroup));
	}
	plan_rowset_seal(out);
}

void plan_drift_servers(const struct px_servers *memory, const struct px_servers *runtime,
			const struct px_families *families, const struct plan_options *o, struct plan_drift *d)
{
	struct plan_rowset a, b;

	server_side(memory, families, o, &a);
	server_side(runtime, families, o, &b);
	set_diff(&a, &b, d);
	plan_rowset_free(&a);
	plan_rowset_free(&b);
}

/* Runtime keeps one row per role: a memory row becomes one per role it has, a runtime row is one. */
void plan_rowset_user(struct plan_rowset *s, const struct px_user *u, const char *user_tag)
{
	for (int role = 0; role < 2 && u->active; role++) {
		sk_hash h = { 0xcbf29ce484222325ULL, 0x13198a2e03707344ULL };

		if (!(role ? u->backend : u->frontend))
			continue;
		sk_hash_str(&h, u->username);
		sk_hash_long(&h, role);
		sk_hash_str(&h, u->password ? u->password : "");
		sk_hash_long(&h, u->use_ssl);
		sk_hash_long(&h, u->default_hostgroup);
		sk_hash_str(&h, u->default_schema ? u->default_schema : "");
		sk_hash_long(&h, u->schema_locked);
		sk_hash_long(&h, u->transaction_persistent);
		sk_hash_long(&h, u->fast_forward);
		sk_hash_long(&h, u->max_connections);
		sk_hash_str(&h, u->comment);
		set_add(s, &h, tagged(u, user_tag));
	}
}

static void user_side(const struct px_users *rows, const char *user_tag, struct plan_rowset *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < rows->n; i++)
		plan_rowset_user(out, &rows->v[i], user_tag);
	plan_rowset_seal(out);
}

void plan_drift_users_set(const struct px_users *memory, const struct plan_rowset *runtime,
			  const struct plan_options *o, struct plan_drift *d)
{
	struct plan_rowset a;

	user_side(memory, o->user_tag, &a);
	set_diff(&a, runtime, d);
	plan_rowset_free(&a);
}

void plan_drift_users(const struct px_users *memory, const struct px_users *runtime, const struct plan_options *o,
		      struct plan_drift *d)
{
	struct plan_rowset b;

	user_side(runtime, o->user_tag, &b);
	plan_drift_users_set(memory, &b, o, d);
	plan_rowset_free(&b);
}

void plan_target(const struct plan_inputs *in, struct plan_options *o, struct plan *out, struct plan_drift *ds,
		 struct plan_drift *du)
{
	bool users = in->want_users && in->have_users;

	memset(ds, 0, sizeof(*ds));
	memset(du, 0, sizeof(*du));
	if (in->runtime_servers)
		plan_drift_servers(in->have_servers, in->runtime_servers, in->families, o, ds);
	if (users && in->runtime_users)
		plan_drift_users_set(in->have_users, in->runtime_users, o, du);
	o->load_owed_servers = ds->owned > 0;
	o->load_owed_users = du->owned > 0;
	o->foreign_servers = ds->foreign;
	o->foreign_users = du->foreign;
	o->save_owed_servers = o->save_to_disk && in->servers_disk_differs;
	o->save_owed_users = o->save_to_disk && users && in->users_disk_differs;
	plan_build(in, o, out); /* users only when both want_users and have_users are set, as `users` */
}

/* ---- proxysql_servers ------------------------------------------------------------------- */

static bool where_peer(sk_buf *b, const struct px_peer *x)
{
	return ADD_LIT(b, " WHERE hostname=") && model_sql_quote(b, x->host) &&
	       sk_buf_addf(b, " AND port=%ld", x->port);
}

static void peer_step(struct plan *p, const char *verb, const struct px_peer *x)
{
	sk_buf b;
	bool ok;

	sk_buf_init(&b, SQL_MAX);
	if (strcmp(verb, "INSERT") == 0)
		ok = ADD_LIT(&b, "INSERT INTO proxysql_servers (hostname, port, weight, comment) VALUES (") &&
		     model_sql_quote(&b, x->host) && sk_buf_addf(&b, ", %ld, %ld, ", x->port, x->weight) &&
		     model_sql_quote(&b, x->comment) && ADD_LIT(&b, ")");
	else if (strcmp(verb, "UPDATE") == 0)
		ok = sk_buf_addf(&b, "UPDATE proxysql_servers SET weight=%ld, comment=", x->weight) &&
		     model_sql_quote(&b, x->comment) && where_peer(&b, x);
	else
		ok = ADD_LIT(&b, "DELETE FROM proxysql_servers") && where_peer(&b, x);
	if (ok)
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
}

static bool same_peers(const struct px_peers *a, const struct px_peers *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i].host, b->v[i].host) != 0 || a->v[i].port != b->v[i].port ||
		    a->v[i].weight != b->v[i].weight || strcmp(a->v[i].comment, b->v[i].comment) != 0)
			return false;
	return true;
}

void plan_peers(const struct px_peers *want, const struct px_peers *have, const struct px_peers *runtime,
		const struct px_peer *self, bool save_to_disk, struct plan *p)
{
	size_t before = p->n;

	for (size_t i = 0; i < want->n; i++) {
		const struct px_peer *h = model_peers_find(have, want->v[i].host, want->v[i].port);

		if (!h) {
			peer_step(p, "INSERT", &want->v[i]);
			p->peer_inserts++;
		} else if (h->weight != want->v[i].weight || strcmp(h->comment, want->v[i].comment) != 0) {
			peer_step(p, "UPDATE", &want->v[i]);
			p->peer_updates++;
		}
	}
	for (size_t i = 0; i < have->n; i++) {
		const struct px_peer *h = &have->v[i];

		if (model_peers_find(want, h->host, h->port) ||
		    (self && strcmp(self->host, h->host) == 0 && self->port == h->port))
			continue;
		peer_step(p, "DELETE", h);
		p->peer_deletes++;
	}
	if (p->n > before || (runtime && !same_peers(have, runtime))) {
		add_literal(p, "LOAD PROXYSQL SERVERS TO RUNTIME");
		if (save_to_disk)
			add_literal(p, "SAVE PROXYSQL SERVERS TO DISK");
	}
}
