/* plan.c: the difference between what ProxySQL has and what it should have, as admin statements. */
#include "plan.h"

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
	p->steps = xrealloc(p->steps, (p->n + 1) * sizeof(*p->steps));
	p->steps[p->n].sql = sql->data ? sql->data : xstrdup("");
	p->steps[p->n].shown = shown ? (shown->data ? shown->data : xstrdup("")) : xstrdup(p->steps[p->n].sql);
	p->n++;
	sk_buf_init(sql, SQL_MAX);
	if (shown)
		sk_buf_init(shown, SQL_MAX);
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
		ok = ADD_LIT(&b,
			     "INSERT INTO mysql_servers (hostgroup_id, hostname, port, status, weight, compression, "
			     "max_connections, max_replication_lag, use_ssl, max_latency_ms, comment) VALUES ");
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
	if (ADD_LIT(&b, "UPDATE mysql_servers SET status=") && model_sql_quote(&b, s->status) &&
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
	if (ADD_LIT(&b, "UPDATE mysql_servers SET status='OFFLINE_SOFT'") && where_server(&b, s))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
	p->server_drains++;
}

static void server_delete(struct plan *p, const struct px_server *s)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (ADD_LIT(&b, "DELETE FROM mysql_servers") && where_server(&b, s))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
	p->server_deletes++;
}

static const struct plan_drain *find_drain(const struct plan_drain *d, size_t n, const struct px_server *s)
{
	for (size_t i = 0; i < n; i++)
		if (d[i].hostgroup == s->hostgroup && d[i].port == s->port && strcmp(d[i].host, s->host) == 0)
			return &d[i];
	return NULL;
}

/* A server ProxySQL has in an owned hostgroup that is no longer wanted. */
static void server_gone(struct plan *p, const struct px_server *s, const struct plan_drain *d, size_t nd,
			const struct plan_options *o)
{
	const struct plan_drain *info;

	if (sk_streq_ci(s->status, "OFFLINE_HARD") || o->drain_timeout_ms <= 0) {
		server_delete(p, s);
		return;
	}
	if (!sk_streq_ci(s->status, "OFFLINE_SOFT")) {
		server_drain(p, s);
		return;
	}
	info = find_drain(d, nd, s);
	if (!info || info->conn_used <= 0 || info->draining_ms >= o->drain_timeout_ms)
		server_delete(p, s);
	else
		p->draining++;
}

static void user_delete(struct plan *p, const char *username)
{
	sk_buf b;

	sk_buf_init(&b, SQL_MAX);
	if (ADD_LIT(&b, "DELETE FROM mysql_users WHERE username=") && model_sql_quote(&b, username))
		add_step(p, &b, NULL);
	else
		sk_buf_free(&b);
}

static bool user_values(sk_buf *t, const struct px_user *u, bool redact)
{
	return ADD_LIT(t, "(") && model_sql_quote(t, u->username) && ADD_LIT(t, ", ") &&
	       (redact ? ADD_LIT(t, "'***'") : model_sql_quote(t, u->password)) &&
	       sk_buf_addf(t, ", %ld, %ld, %ld, ", u->active, u->use_ssl, u->default_hostgroup) &&
	       (u->default_schema ? model_sql_quote(t, u->default_schema) : ADD_LIT(t, "NULL")) &&
	       sk_buf_addf(t, ", %ld, %ld, %ld, %ld, %ld, %ld, ", u->schema_locked, u->transaction_persistent,
			   u->fast_forward, u->backend, u->frontend, u->max_connections) &&
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

			ok = ADD_LIT(t,
				     "INSERT INTO mysql_users (username, password, active, use_ssl, default_hostgroup, "
				     "default_schema, schema_locked, transaction_persistent, fast_forward, backend, "
				     "frontend, max_connections, comment) VALUES ");
			for (size_t i = at; i < end && ok; i++)
				ok = (i == at || ADD_LIT(t, ", ")) && user_values(t, rows[i], pass == 1);
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

static void plan_servers(const struct px_servers *want, const struct px_servers *have, const struct plan_drain *d,
			 size_t nd, const struct plan_options *o, struct plan *p)
{
	size_t i = 0, j = 0, before = p->n, nins = 0;
	const struct px_server **ins = xcalloc(want->n ? want->n : 1, sizeof(*ins));

	/* Merge the two sorted lists; rows outside owned hostgroups are someone else's. */
	while (i < want->n || j < have->n) {
		const struct px_server *w = i < want->n ? &want->v[i] : NULL;
		const struct px_server *h = j < have->n ? &have->v[j] : NULL;
		int c;

		if (h && !owned(o, h->hostgroup)) {
			j++;
			continue;
		}
		c = !w ? 1 : !h ? -1 : server_key_cmp(w, h);
		if (c < 0) {
			ins[nins++] = w;
			i++;
		} else if (c > 0) {
			server_gone(p, h, d, nd, o);
			j++;
		} else {
			if (!px_server_same(w, h))
				server_update(p, w);
			i++;
			j++;
		}
	}
	server_inserts(p, ins, nins);
	free(ins);
	if (p->n > before) {
		p->servers_changed = true;
		add_literal(p, "LOAD MYSQL SERVERS TO RUNTIME");
		if (o->save_to_disk)
			add_literal(p, "SAVE MYSQL SERVERS TO DISK");
	} else if (o->save_to_disk && o->save_owed_servers) {
		add_literal(p, "SAVE MYSQL SERVERS TO DISK");
	}
}

static bool tagged(const struct px_user *u, const char *tag)
{
	size_t n = strlen(tag);

	return n && strncmp(u->comment, tag, n) == 0 && (u->comment[n] == '\0' || u->comment[n] == ':');
}

static void plan_users(const struct px_users *want, const struct px_users *have, const struct plan_options *o,
		       struct plan *p)
{
	size_t i = 0, j = 0, before = p->n, nins = 0;
	const struct px_user **ins = xcalloc(want->n ? want->n : 1, sizeof(*ins));

	/* `have` may hold two rows for a user (frontend-only and backend-only): compare the group. */
	while (i < want->n || j < have->n) {
		const struct px_user *w = i < want->n ? &want->v[i] : NULL;
		const struct px_user *h = j < have->n ? &have->v[j] : NULL;
		int c = !w ? 1 : !h ? -1 : strcmp(w->username, h->username);
		size_t rows = 0;

		if (h)
			while (j + rows < have->n && strcmp(have->v[j + rows].username, h->username) == 0)
				rows++;
		if (c < 0) {
			ins[nins++] = w;
			p->user_inserts++;
			i++;
		} else if (c > 0) {
			if (tagged(h, o->user_tag)) {
				user_delete(p, h->username);
				p->user_deletes++;
			}
			j += rows;
		} else {
			if (rows != 1 || !px_user_same(w, h)) {
				user_delete(p, w->username); /* replaced: deleted now, inserted with the new ones */
				ins[nins++] = w;
				p->user_updates++;
			}
			i++;
			j += rows;
		}
	}
	user_inserts(p, ins, nins);
	free(ins);
	if (p->n > before) {
		p->users_changed = true;
		add_literal(p, "LOAD MYSQL USERS TO RUNTIME");
		if (o->save_to_disk)
			add_literal(p, "SAVE MYSQL USERS TO DISK");
	} else if (o->save_to_disk && o->save_owed_users) {
		add_literal(p, "SAVE MYSQL USERS TO DISK");
	}
}

void plan_build(const struct px_servers *want_servers, const struct px_users *want_users,
		const struct px_servers *have_servers, const struct px_users *have_users,
		const struct plan_drain *drains, size_t ndrains, const struct plan_options *o, struct plan *out)
{
	memset(out, 0, sizeof(*out));
	if (want_servers && have_servers)
		plan_servers(want_servers, have_servers, drains, ndrains, o, out);
	if (want_users && have_users)
		plan_users(want_users, have_users, o, out);
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

void plan_free(struct plan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		sk_wipe(p->steps[i].sql, strlen(p->steps[i].sql));
		free(p->steps[i].sql);
		free(p->steps[i].shown);
	}
	free(p->steps);
	memset(p, 0, sizeof(*p));
}
