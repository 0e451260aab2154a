/* layout.c: maps orchestrator, replica, generic-server and user keys to the rows ProxySQL should have. */
#include "layout.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patroni.h"

#define LAYOUT_MAX_ROWS 100000

static void reject(struct layout_result *r, const char *key, const char *fmt, ...) SK_PRINTF(3, 4);

static void reject(struct layout_result *r, const char *key, const char *fmt, ...)
{
	char why[300];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	r->rejects = model_grow(r->rejects, r->nrejects, sizeof(*r->rejects));
	r->rejects[r->nrejects].key = xstrndup(key, strlen(key) > 300 ? 300 : strlen(key));
	r->rejects[r->nrejects].reason = xstrdup(why);
	r->nrejects++;
}

/* The part of `key` after "<prefix>/", or NULL when the key is not under the prefix. */
static const char *under(const char *key, const char *prefix)
{
	size_t n;

	if (!prefix || !*prefix)
		return NULL;
	n = strlen(prefix);
	while (n && prefix[n - 1] == '/')
		n--;
	if (strncmp(key, prefix, n) != 0 || key[n] != '/')
		return NULL;
	return key + n + 1;
}

static const struct layout_cluster *find_cluster(const struct layout_config *cfg, const char *alias, size_t len)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		if (strlen(cfg->clusters[i].alias) == len && strncmp(cfg->clusters[i].alias, alias, len) == 0)
			return &cfg->clusters[i];
	return NULL;
}

static const char *json_str_item(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The servers added so far, by (hostgroup, host, port): an open-addressing table of indexes into
 * the result's servers (slot 0: empty, else index + 1), at most half full. */
struct layout_seen {
	size_t *slot;
	size_t cap;
};

static size_t server_hash(long hg, const char *host, long port)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)host; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	h = (h ^ (uint64_t)hg) * 1099511628211ULL;
	h = (h ^ (uint64_t)port) * 1099511628211ULL;
	return (size_t)(h ^ (h >> 29));
}

/* The slot of (hg, host, port): the one that holds it, or the empty one where it would go. */
static size_t *seen_slot(const struct layout_result *r, long hg, const char *host, long port)
{
	size_t mask = r->seen->cap - 1, i = server_hash(hg, host, port) & mask;

	for (;; i = (i + 1) & mask) {
		size_t *slot = &r->seen->slot[i];
		const struct px_server *o = *slot ? &r->servers.v[*slot - 1] : NULL;

		if (!o || (o->hostgroup == hg && o->port == port && strcmp(o->host, host) == 0))
			return slot;
	}
}

/* Room for one more server in the table (grown and rehashed when half full). */
static void seen_reserve(struct layout_result *r)
{
	struct layout_seen *t = r->seen;

	if (!t)
		t = r->seen = xcalloc(1, sizeof(*t));
	if (2 * (r->servers.n + 1) <= t->cap)
		return;
	free(t->slot);
	t->cap = t->cap ? 2 * t->cap : 64;
	t->slot = xcalloc(t->cap, sizeof(*t->slot));
	for (size_t i = 0; i < r->servers.n; i++) {
		const struct px_server *s = &r->servers.v[i];

		*seen_slot(r, s->hostgroup, s->host, s->port) = i + 1;
	}
}

static void seen_free(struct layout_result *r)
{
	if (r->seen)
		free(r->seen->slot);
	free(r->seen);
	r->seen = NULL;
}

static void add_server(struct layout_result *r, const struct px_server *s, const char *key)
{
	size_t *slot;

	seen_reserve(r);
	slot = seen_slot(r, s->hostgroup, s->host, s->port);
	if (*slot)
		return; /* the same server from two sources: the first one stands */
	if (r->servers.n >= LAYOUT_MAX_ROWS) {
		reject(r, key, "more than 100000 servers");
		return;
	}
	model_servers_add(&r->servers, s);
	*slot = r->servers.n;
}

/* Read one integer attribute within [min, max]; returns NULL or a reason. */
static const char *int_attr(const cJSON *v, long min, long max, long *out)
{
	double d;

	if (cJSON_IsBool(v)) {
		d = cJSON_IsTrue(v);
	} else if (cJSON_IsNumber(v)) {
		d = v->valuedouble;
	} else {
		return "is not a number";
	}
	/* In range before the conversion: converting 1e300 to long is undefined behaviour. */
	if (!(d >= (double)min && d <= (double)max) || d != (double)(long)d)
		return "is out of range";
	*out = (long)d;
	return NULL;
}

/* An integer field of a row: its name, its place in the row's struct, its bounds. */
struct int_field {
	const char *name;
	size_t off;
	long min, max;
};

/* The field of `f` (n of them) named `name`, or NULL. */
static const struct int_field *int_field_named(const struct int_field *f, size_t n, const char *name)
{
	for (size_t k = 0; k < n; k++)
		if (strcmp(name, f[k].name) == 0)
			return &f[k];
	return NULL;
}

/* The integer attributes of a server. */
static const struct int_field server_ints[] = {
	{ "weight", offsetof(struct px_server, weight), 0, 10000000 },
	{ "max_connections", offsetof(struct px_server, max_connections), 0, 2147483647L },
	{ "max_replication_lag", offsetof(struct px_server, max_replication_lag), 0, 126144000 },
	{ "use_ssl", offsetof(struct px_server, use_ssl), 0, 1 },
	{ "compression", offsetof(struct px_server, compression), 0, 1 },
	{ "max_latency_ms", offsetof(struct px_server, max_latency_ms), 0, 2147483647L },
};

/* Apply one attribute of a server's JSON object; returns NULL or a reason naming it (in `why`). */
static const char *server_attr(const cJSON *it, struct px_server *s, char *why, size_t whylen)
{
	const struct int_field *f = int_field_named(server_ints, SK_ARRAY_LEN(server_ints), it->string);
	const char *bad = NULL;

	if (f) {
		if ((bad = int_attr(it, f->min, f->max, (long *)((char *)s + f->off))) == NULL)
			return NULL;
		snprintf(why, whylen, "attribute %s %s", f->name, bad);
		return why;
	}
	if (strcmp(it->string, "comment") != 0) {
		snprintf(why, whylen, "unknown attribute '%.40s'", it->string);
		return why;
	}
	if (!cJSON_IsString(it) || (bad = model_check_text(it->valuestring, MODEL_COMMENT_MAX))) {
		snprintf(why, whylen, "attribute comment %s", bad ? bad : "is not a string");
		return why;
	}
	free(s->comment);
	s->comment = xstrdup(it->valuestring);
	return NULL;
}

/* Apply a JSON object of server attributes; returns NULL or a reason naming the attribute. */
static const char *server_attrs(const char *value, size_t len, struct px_server *s, char *why, size_t whylen)
{
	cJSON *root, *it;
	const char *bad = NULL;

	if (len == 0 || value[0] != '{')
		return NULL; /* empty, or "host:port" as orchestrator and clustercheck write it */
	root = cJSON_ParseWithLength(value, len);
	if (!root || !cJSON_IsObject(root)) {
		sk_json_delete_wiped(root);
		return "value is not valid JSON";
	}
	cJSON_ArrayForEach(it, root)
	{
		if ((bad = server_attr(it, s, why, whylen)) != NULL)
			break;
	}
	cJSON_Delete(root);
	return bad;
}

static bool value_ok(struct layout_result *r, const struct kv_pair *kv)
{
	if (memchr(kv->value, '\0', kv->len)) {
		reject(r, kv->key, "value contains a NUL byte");
		return false;
	}
	if (kv->len > 64 * 1024) {
		reject(r, kv->key, "value larger than 64 KiB");
		return false;
	}
	return true;
}

/* A server from `addr` into `hg` with attributes from the value; rejects with a reason. A key whose
 * address is valid but whose value is not keeps what the target has for that server. */
static void server_entry(const struct layout_config *cfg, struct layout_result *r, const struct kv_pair *kv, long hg,
			 const char *addr)
{
	char host[MODEL_HOST_MAX + 1], why[200];
	const char *bad;
	struct px_server s = cfg->server_defaults;

	if ((bad = model_split_address(addr, 3306, host, sizeof(host), &s.port)) != NULL ||
	    (bad = model_check_host(host)) != NULL) {
		reject(r, kv->key, "address %s", bad);
		return;
	}
	if (!value_ok(r, kv)) {
		model_keeps_add(&r->keep_servers, hg, host, s.port);
		return;
	}
	/* A key without a port (the form Consul versions that refuse ':' in keys need) takes it from a
	 * "host:port" value, which clustercheck --register writes. */
	if (!strchr(addr, ':') && kv->len && kv->value[0] != '{') {
		char vhost[MODEL_HOST_MAX + 1];
		long vport;

		if ((bad = model_split_address(kv->value, s.port, vhost, sizeof(vhost), &vport)) != NULL) {
			reject(r, kv->key, "value %s", bad);
			return;
		}
		if (!sk_streq_ci(vhost, host)) {
			reject(r, kv->key, "value names host '%.60s', the key '%.60s'", vhost, host);
			return;
		}
		s.port = vport;
	}
	s.comment = xstrdup(cfg->server_defaults.comment ? cfg->server_defaults.comment : "");
	if ((bad = server_attrs(kv->value, kv->len, &s, why, sizeof(why))) != NULL) {
		reject(r, kv->key, "%s", bad);
		model_keeps_add(&r->keep_servers, hg, host, s.port);
	} else {
		s.host = host;
		s.hostgroup = hg;
		sk_strlcpy(s.status, "ONLINE", sizeof(s.status));
		add_server(r, &s, kv->key);
	}
	free(s.comment);
}

/* A cluster's master key and its /hostname and /port children, as found in the snapshot. */
struct master_keys {
	const struct kv_pair *main, *hostname, *port;
};

/* Where `rest` (a key less "<master prefix>/") names `cl`'s alias followed by `suffix` exactly. */
static bool names_alias(const char *rest, size_t len, const struct layout_cluster *cl, const char *suffix)
{
	size_t a = strlen(cl->alias), n = strlen(suffix);

	return len == a + n && strncmp(rest, cl->alias, a) == 0 && memcmp(rest + a, suffix, n) == 0;
}

/* One pass over the snapshot: each cluster's three master keys (the first of a key listed twice
 * stands). Costs the keys times the clusters, never the keys squared. */
static void find_masters(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv,
			 struct master_keys *found)
{
	for (size_t i = 0; i < nkv; i++) {
		const char *rest = under(kv[i].key, cfg->master_prefix);
		size_t len;

		if (!rest)
			continue;
		len = strlen(rest);
		for (size_t c = 0; c < cfg->nclusters; c++) {
			const struct layout_cluster *cl = &cfg->clusters[c];
			struct master_keys *m = &found[c];

			if (!m->main && names_alias(rest, len, cl, ""))
				m->main = &kv[i];
			if (!m->hostname && names_alias(rest, len, cl, "/hostname"))
				m->hostname = &kv[i];
			if (!m->port && names_alias(rest, len, cl, "/port"))
				m->port = &kv[i];
		}
	}
}

static void keep_hostgroup(struct layout_result *r, const struct layout_cluster *cl)
{
	model_keeps_add(&r->keep_servers, cl->writer_hostgroup, NULL, 0);
	if (cl->writer_is_reader && cl->reader_hostgroup >= 0)
		model_keeps_add(&r->keep_servers, cl->reader_hostgroup, NULL, 0);
}

/* The writer's host and port, from the main key or else from its /hostname and /port children.
 * False when one is rejected (the writer the target has is kept). */
static bool master_read(struct layout_result *r, const struct layout_cluster *cl, const struct master_keys *m,
			char *host, size_t hostlen, long *port)
{
	const char *bad;

	if (m->main) {
		if ((bad = model_split_address(m->main->value, 3306, host, hostlen, port)) == NULL)
			return true;
		reject(r, m->main->key, "address %s", bad);
	} else if (!sk_strlcpy(host, m->hostname->value, hostlen)) {
		reject(r, m->hostname->key, "address is longer than 255 bytes");
	} else if (m->port && !sk_parse_long(m->port->value, 1, 65535, port)) {
		reject(r, m->port->key, "port is not a number from 1 to 65535");
	} else {
		return true;
	}
	keep_hostgroup(r, cl);
	return false;
}

/* Cluster `cl`'s writer from its master keys `m`. False when it is left out: no key, a key that
 * cannot be read (the writer the target has is kept), or a failover being written right now. */
static bool master_writer(struct layout_result *r, const struct layout_cluster *cl, const struct master_keys *m,
			  char *host, size_t hostlen, long *port)
{
	const char *bad;
	bool ok;

	if (!m->main && !m->hostname)
		return false;
	/* Any of the three with a NUL byte or an oversized value leaves the cluster out (each such
	 * key gets its own reject line). */
	ok = !m->main || value_ok(r, m->main);
	ok = (!m->hostname || value_ok(r, m->hostname)) && ok;
	ok = (!m->port || value_ok(r, m->port)) && ok;
	if (!ok) {
		keep_hostgroup(r, cl);
		return false;
	}
	if (!master_read(r, cl, m, host, hostlen, port))
		return false;
	/* orchestrator writes the five keys one by one: children that disagree with the main key mean
	 * a failover is being written right now. */
	if (m->main && m->hostname &&
	    (strcmp(m->hostname->value, host) != 0 || (m->port && strtol(m->port->value, NULL, 10) != *port))) {
		r->unsettled = model_grow(r->unsettled, r->nunsettled, sizeof(char *));
		r->unsettled[r->nunsettled++] = xstrdup(cl->alias);
		return false;
	}
	if ((bad = model_check_host(host)) != NULL) {
		reject(r, m->main ? m->main->key : m->hostname->key, "address %s", bad);
		keep_hostgroup(r, cl);
		return false;
	}
	return true;
}

/* orchestrator: <prefix>/<alias> = host:port, with /hostname and /port children. */
static void masters(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv, struct layout_result *r)
{
	struct master_keys *found = xcalloc(cfg->nclusters ? cfg->nclusters : 1, sizeof(*found));
	size_t n = strlen(cfg->master_prefix);

	while (n && cfg->master_prefix[n - 1] == '/')
		n--;
	find_masters(cfg, kv, nkv, found);
	for (size_t c = 0; c < cfg->nclusters; c++) {
		const struct layout_cluster *cl = &cfg->clusters[c];
		char key[1024], host[MODEL_HOST_MAX + 1], addr[MODEL_HOST_MAX + 16];
		long port = 3306;
		struct px_server s = cfg->server_defaults;

		if (cl->writer_from_service || !master_writer(r, cl, &found[c], host, sizeof(host), &port))
			continue;
		snprintf(key, sizeof(key), "%.*s/%s/port", (int)n, cfg->master_prefix, cl->alias);
		snprintf(addr, sizeof(addr), "%s", host);
		s.host = addr;
		s.port = port;
		s.comment = cfg->server_defaults.comment ? cfg->server_defaults.comment : "";
		s.hostgroup = cl->writer_hostgroup;
		sk_strlcpy(s.status, "ONLINE", sizeof(s.status));
		add_server(r, &s, key);
		if (cl->writer_is_reader && cl->reader_hostgroup >= 0) {
			s.hostgroup = cl->reader_hostgroup;
			add_server(r, &s, key);
		}
	}
	free(found);
}

/* <prefix>/<alias>/<region>/<host[:port]> */
static void replica(const struct layout_config *cfg, const struct kv_pair *kv, struct layout_result *r,
		    const char *rest)
{
	const char *slash1 = strchr(rest, '/'), *slash2, *addr;
	const struct layout_cluster *cl;
	long hg = -1;
	bool local;

	if (!slash1)
		return; /* a folder key or the cluster level */
	slash2 = strchr(slash1 + 1, '/');
	if (!slash2 || !slash2[1])
		return;
	addr = slash2 + 1;
	cl = find_cluster(cfg, rest, (size_t)(slash1 - rest));
	if (!cl)
		return; /* another agent's cluster */
	if (strchr(addr, '/')) {
		reject(r, kv->key, "deeper than <alias>/<region>/<host:port>");
		return;
	}
	local = cfg->region && strlen(cfg->region) == (size_t)(slash2 - slash1 - 1) &&
		strncmp(cfg->region, slash1 + 1, (size_t)(slash2 - slash1 - 1)) == 0;
	if (local) {
		if (cl->reader_from_service)
			return; /* its local readers come from reader_service */
		hg = cl->reader_hostgroup;
	} else {
		for (size_t i = 0; i < cl->nremote; i++)
			if (strlen(cl->remote[i].region) == (size_t)(slash2 - slash1 - 1) &&
			    strncmp(cl->remote[i].region, slash1 + 1, (size_t)(slash2 - slash1 - 1)) == 0)
				hg = cl->remote[i].hostgroup;
	}
	/* roles = "monitor": a member of a configured region goes into the writer hostgroup once; the
	 * monitor moves it to a reader hostgroup when it is read-only. */
	if (cl->monitor_roles && (local || hg >= 0))
		hg = cl->writer_hostgroup;
	if (hg < 0)
		return; /* a region this agent does not route to */
	server_entry(cfg, r, kv, hg, addr);
}

/* ---- Patroni (the PostgreSQL side) ---- */

/* Where `key` is under Patroni cluster `cl`'s <namespace>/<scope>/: the rest, else NULL. */
static const char *under_patroni(const struct layout_cluster *cl, const char *key)
{
	size_t n = strlen(cl->patroni_namespace), a = strlen(cl->alias);

	if (strncmp(key, cl->patroni_namespace, n) != 0 || key[n] != '/' || strncmp(key + n + 1, cl->alias, a) != 0 ||
	    key[n + 1 + a] != '/')
		return NULL;
	return key + n + a + 2;
}

/* One Patroni cluster's build: the layout, the cluster, the snapshot, the result, and its leader
 * and status keys. */
struct patroni_pass {
	const struct layout_config *cfg;
	const struct layout_cluster *cl;
	const struct kv_pair *kv;
	size_t nkv;
	struct layout_result *r;
	const struct kv_pair *leader, *status;
};

static void patroni_find(struct patroni_pass *p)
{
	for (size_t i = 0; i < p->nkv; i++) {
		const char *rest = under_patroni(p->cl, p->kv[i].key);

		if (rest && !p->leader && strcmp(rest, "leader") == 0)
			p->leader = &p->kv[i];
		else if (rest && !p->status && strcmp(rest, "status") == 0)
			p->status = &p->kv[i];
	}
}

/* A member's server row in hostgroup `hg`, commented "<scope>/<name>". */
static void patroni_row(const struct patroni_pass *p, const struct patroni_member *m, const char *name,
			const struct kv_pair *kv, long hg)
{
	struct px_server s = p->cfg->server_defaults;
	char host[MODEL_HOST_MAX + 1], comment[MODEL_COMMENT_MAX + 1];

	snprintf(host, sizeof(host), "%s", m->host);
	snprintf(comment, sizeof(comment), "%s/%s", p->cl->alias, name);
	s.host = host;
	s.port = m->port;
	s.comment = comment;
	s.hostgroup = hg;
	sk_strlcpy(s.status, "ONLINE", sizeof(s.status));
	add_server(p->r, &s, kv->key);
}

/* The leader: the member the leader key names, parsed into `m`. False (the writer hostgroup kept as
 * each target has it) when there is none (a failover), it has no entry, or its entry is rejected. */
static bool patroni_leader(const struct patroni_pass *p, struct patroni_member *m)
{
	char why[200];
	const char *bad;

	if (!p->leader || !value_ok(p->r, p->leader) || !*p->leader->value)
		return false;
	for (size_t i = 0; i < p->nkv; i++) {
		const struct kv_pair *kv = &p->kv[i];
		const char *rest = under_patroni(p->cl, kv->key);

		if (!rest || strncmp(rest, "members/", 8) != 0 || strcmp(rest + 8, p->leader->value) != 0)
			continue;
		if (!value_ok(p->r, kv))
			break;
		if ((bad = patroni_member_parse(kv->value, kv->len, m, why, sizeof(why))) == NULL)
			return true;
		reject(p->r, kv->key, "%s", bad);
		break;
	}
	keep_hostgroup(p->r, p->cl);
	return false;
}

/* The members other than the leader (named `leader`, NULL: none) that read (patroni_is_reader),
 * each into the reader hostgroup (the writer's with roles = "monitor"); an entry that cannot be
 * read is rejected alone. */
static void patroni_readers(const struct patroni_pass *p, const char *leader, long long leader_pos)
{
	long hg = p->cl->monitor_roles ? p->cl->writer_hostgroup : p->cl->reader_hostgroup;

	for (size_t i = 0; i < p->nkv; i++) {
		const struct kv_pair *kv = &p->kv[i];
		const char *rest = under_patroni(p->cl, kv->key), *bad;
		struct patroni_member m;
		char why[200];

		if (!rest || strncmp(rest, "members/", 8) != 0 || !rest[8] || strchr(rest + 8, '/') ||
		    (leader && strcmp(rest + 8, leader) == 0) || !value_ok(p->r, kv))
			continue;
		if ((bad = patroni_member_parse(kv->value, kv->len, &m, why, sizeof(why))) != NULL)
			reject(p->r, kv->key, "%s", bad);
		else if (hg >= 0 && patroni_is_reader(p->cl, &m, leader_pos))
			patroni_row(p, &m, rest + 8, kv, hg);
	}
}

/* Patroni cluster `cl`: the leader into writer_hostgroup, the readers into reader_hostgroup. */
static void patroni_cluster(const struct layout_config *cfg, const struct layout_cluster *cl, const struct kv_pair *kv,
			    size_t nkv, struct layout_result *r)
{
	struct patroni_pass p = { cfg, cl, kv, nkv, r, NULL, NULL };
	struct patroni_member leader;
	long long pos = -1;
	bool have;

	patroni_find(&p);
	have = patroni_leader(&p, &leader);
	if (have) {
		patroni_row(&p, &leader, p.leader->value, p.leader, cl->writer_hostgroup);
		pos = leader.xlog;
	}
	if (p.status && value_ok(r, p.status)) { /* also while no leader is known: the last position */
		long long optime = patroni_status_optime(p.status->value, p.status->len);

		pos = optime > pos ? optime : pos;
	}
	patroni_readers(&p, p.leader && !memchr(p.leader->value, '\0', p.leader->len) ? p.leader->value : NULL, pos);
}

/* Which parts a key of a Patroni cluster feeds: the leader and the members the servers, the status
 * those only where the lag is bounded, the rest (config, history, ...) nothing. */
static unsigned patroni_key_parts(const struct layout_config *cfg, const char *key)
{
	for (size_t c = 0; c < cfg->nclusters; c++) {
		const struct layout_cluster *cl = &cfg->clusters[c];
		const char *rest = cl->patroni_namespace ? under_patroni(cl, key) : NULL;

		if (rest && (strcmp(rest, "leader") == 0 || strncmp(rest, "members/", 8) == 0 ||
			     (strcmp(rest, "status") == 0 && cl->max_lag_bytes >= 0)))
			return LAYOUT_PART_SERVERS;
	}
	return 0;
}

static void announced(const struct kv_pair *kv, struct layout_result *r);

/* A KV pair made from a JSON object (consumed), as if Consul had held it; the caller frees the
 * value with cJSON_free. */
static struct kv_pair json_pair(char *key, cJSON *obj)
{
	struct kv_pair one = { .key = key, .value = cJSON_PrintUnformatted(obj) };

	cJSON_Delete(obj);
	if (!one.value)
		sk_oom();
	one.len = strlen(one.value);
	return one;
}

/* A passing instance of the announce-service: one ProxySQL of the fleet at <address>:<port>, its
 * weight and comment from Service.Meta (strings: "weight" a number), checked like an announce key. */
static void fleet_instance(const struct layout_service *sv, const struct kv_pair *kv, struct layout_result *r,
			   const char *addr)
{
	char host[MODEL_HOST_MAX + 1], label[400];
	long port = 0, weight = 0;
	const char *bad = model_split_address(addr, 6032, host, sizeof(host), &port), *w, *comment;
	cJSON *doc = cJSON_ParseWithLength(kv->value, kv->len), *entry, *meta;
	struct kv_pair one;

	snprintf(label, sizeof(label), "%s: %s", sv->label, addr);
	meta = doc ? cJSON_GetObjectItemCaseSensitive(doc, "meta") : NULL;
	w = cJSON_IsObject(meta) ? json_str_item(meta, "weight") : NULL;
	comment = cJSON_IsObject(meta) ? json_str_item(meta, "comment") : NULL;
	if (!bad && w && !sk_parse_long(w, 0, 10000000L, &weight))
		bad = "Service.Meta.weight is not a number from 0 to 10000000";
	if (bad) {
		reject(r, label, "%s", bad);
		cJSON_Delete(doc);
		return;
	}
	entry = cJSON_CreateObject();
	if (!entry || !cJSON_AddStringToObject(entry, "hostname", host) ||
	    !cJSON_AddNumberToObject(entry, "port", (double)port) ||
	    !cJSON_AddNumberToObject(entry, "weight", (double)weight) ||
	    (comment && !cJSON_AddStringToObject(entry, "comment", comment)))
		sk_oom();
	cJSON_Delete(doc);
	one = json_pair(label, entry);
	announced(&one, r);
	cJSON_free(one.value);
}

/* A service instance's attributes from Service.Meta "<meta_prefix><attribute>" into `attrs`.
 * Service.Meta values are strings: numbers are read as numbers, then validated like KV values.
 * Returns NULL or the reason (in `why`). */
static const char *service_meta(const struct layout_service *sv, const cJSON *meta, cJSON *attrs, char *why,
				size_t whylen)
{
	static const char *const ints[] = { "weight",  "max_connections", "max_replication_lag",
					    "use_ssl", "compression",     "max_latency_ms" };

	for (size_t k = 0; sv->meta_prefix && cJSON_IsObject(meta) && k < SK_ARRAY_LEN(ints) + 1; k++) {
		const char *attr = k < SK_ARRAY_LEN(ints) ? ints[k] : "comment";
		char mkey[200];
		const char *v;
		long n;

		snprintf(mkey, sizeof(mkey), "%s%s", sv->meta_prefix, attr);
		v = json_str_item(meta, mkey);
		if (!v)
			continue;
		if (k == SK_ARRAY_LEN(ints)) {
			cJSON_AddStringToObject(attrs, "comment", v);
		} else if (sk_parse_long(v, 0, 2147483647L, &n)) {
			cJSON_DeleteItemFromObjectCaseSensitive(attrs, attr);
			cJSON_AddNumberToObject(attrs, attr, (double)n);
		} else {
			snprintf(why, whylen, "Service.Meta.%.60s '%.40s' is not a number", mkey, v);
			return why;
		}
	}
	return NULL;
}

/* SERVICE_KEY_PREFIX<index>/<address>:<port> = {"node", "id", "weight", "meta"}: a passing instance. */
static void service_instance(const struct layout_config *cfg, const struct kv_pair *kv, struct layout_result *r,
			     const char *rest)
{
	char *end = NULL, label[400], why[200];
	long i = strtol(rest, &end, 10);
	const struct layout_service *sv;
	cJSON *doc, *attrs, *weight;
	struct kv_pair one;
	const char *bad;

	if (!end || *end != '/' || i < 0 || (size_t)i >= cfg->nservices)
		return;
	sv = &cfg->services[i];
	if (sv->fleet) {
		fleet_instance(sv, kv, r, end + 1);
		return;
	}
	snprintf(label, sizeof(label), "%s: %s", sv->label, end + 1);
	doc = cJSON_ParseWithLength(kv->value, kv->len);
	attrs = cJSON_CreateObject();
	if (!attrs)
		sk_oom();
	weight = doc ? cJSON_GetObjectItemCaseSensitive(doc, "weight") : NULL;
	if (sv->weights && cJSON_IsNumber(weight))
		cJSON_AddNumberToObject(attrs, "weight", weight->valuedouble);
	bad = service_meta(sv, doc ? cJSON_GetObjectItemCaseSensitive(doc, "meta") : NULL, attrs, why, sizeof(why));
	cJSON_Delete(doc);
	if (bad) {
		char host[MODEL_HOST_MAX + 1];
		long port;

		reject(r, label, "%s", bad);
		if (!model_split_address(end + 1, 3306, host, sizeof(host), &port))
			model_keeps_add(&r->keep_servers, sv->hostgroup, host, port);
		cJSON_Delete(attrs);
		return;
	}
	one = json_pair(label, attrs);
	server_entry(cfg, r, &one, sv->hostgroup, end + 1);
	cJSON_free(one.value);
}

/* <announce prefix>/<id> = {"hostname": ..., "port": ..., "weight": ..., "comment": ...} */
static void announced(const struct kv_pair *kv, struct layout_result *r)
{
	cJSON *doc;
	const cJSON *port, *weight;
	const char *host, *comment, *bad = NULL;
	long w = 0;

	if (!value_ok(r, kv))
		return;
	doc = cJSON_ParseWithLength(kv->value, kv->len);
	host = doc ? json_str_item(doc, "hostname") : NULL;
	port = doc ? cJSON_GetObjectItemCaseSensitive(doc, "port") : NULL;
	weight = doc ? cJSON_GetObjectItemCaseSensitive(doc, "weight") : NULL;
	comment = doc ? json_str_item(doc, "comment") : NULL;
	if (!cJSON_IsObject(doc))
		bad = "value is not a JSON object";
	else if (!host || (bad = model_check_host(host)) != NULL)
		bad = bad ? bad : "has no hostname";
	else if (!cJSON_IsNumber(port) || !(port->valuedouble >= 1 && port->valuedouble <= 65535) ||
		 port->valuedouble != (double)(long)port->valuedouble)
		bad = "port is not a number from 1 to 65535";
	else if (weight && (int_attr(weight, 0, 10000000, &w) != NULL))
		bad = "weight is not a number from 0 to 10000000";
	else if (comment && model_check_text(comment, MODEL_COMMENT_MAX))
		bad = "comment is not printable text";
	if (bad)
		reject(r, kv->key, "%s", bad);
	else
		model_peers_add(&r->peers, host, (long)port->valuedouble, w, comment);
	cJSON_Delete(doc);
}

static bool managed(const struct layout_config *cfg, long hg)
{
	for (size_t i = 0; i < cfg->nmanaged; i++)
		if (cfg->managed_hostgroups[i] == hg)
			return true;
	return false;
}

/* <prefix>/<hostgroup>/<host[:port]> = optional JSON attributes */
static void generic(const struct layout_config *cfg, const struct kv_pair *kv, struct layout_result *r,
		    const char *rest)
{
	const char *slash = strchr(rest, '/');
	char hgtext[32];
	long hg;

	if (!slash || !slash[1])
		return;
	if ((size_t)(slash - rest) >= sizeof(hgtext)) {
		reject(r, kv->key, "hostgroup is not a number");
		return;
	}
	memcpy(hgtext, rest, (size_t)(slash - rest));
	hgtext[slash - rest] = '\0';
	if (!sk_parse_long(hgtext, 0, 2147483647L, &hg)) {
		reject(r, kv->key, "hostgroup '%s' is not a number", hgtext);
		return;
	}
	if (!managed(cfg, hg)) {
		reject(r, kv->key, "hostgroup %s is not in managed_hostgroups", hgtext);
		return;
	}
	if (strchr(slash + 1, '/')) {
		reject(r, kv->key, "deeper than <hostgroup>/<host:port>");
		return;
	}
	server_entry(cfg, r, kv, hg, slash + 1);
}

/* The integer fields of a user. */
static const struct int_field user_ints[] = {
	{ "active", offsetof(struct px_user, active), 0, 1 },
	{ "use_ssl", offsetof(struct px_user, use_ssl), 0, 1 },
	{ "default_hostgroup", offsetof(struct px_user, default_hostgroup), 0, 2147483647L },
	{ "schema_locked", offsetof(struct px_user, schema_locked), 0, 1 },
	{ "transaction_persistent", offsetof(struct px_user, transaction_persistent), 0, 1 },
	{ "fast_forward", offsetof(struct px_user, fast_forward), 0, 1 },
	{ "backend", offsetof(struct px_user, backend), 0, 1 },
	{ "frontend", offsetof(struct px_user, frontend), 0, 1 },
	{ "max_connections", offsetof(struct px_user, max_connections), 0, 2147483647L },
};

/* A text field of a user (password, default_schema, comment), checked and copied. Returns NULL or
 * the reason (in `why`). */
static const char *user_text(const cJSON *it, struct px_user *u, char *why, size_t whylen)
{
	char **field = strcmp(it->string, "password") == 0  ? &u->password
		       : strcmp(it->string, "comment") == 0 ? &u->comment
							    : &u->default_schema;
	const char *bad;

	if (!cJSON_IsString(it)) {
		snprintf(why, whylen, "%s is not a string", it->string);
		return why;
	}
	bad = field == &u->password  ? model_check_password(it->valuestring)
	      : field == &u->comment ? model_check_text(it->valuestring, MODEL_COMMENT_MAX - 40)
				     : model_check_text(it->valuestring, MODEL_SCHEMA_MAX);
	if (bad) {
		snprintf(why, whylen, "%s %s", it->string, bad);
		return why;
	}
	free(*field);
	*field = xstrdup(it->valuestring);
	return NULL;
}

/* One field of a user's JSON object; returns NULL or the reason (in `why`). */
static const char *user_field(const cJSON *it, struct px_user *u, char *why, size_t whylen)
{
	const struct int_field *f = int_field_named(user_ints, SK_ARRAY_LEN(user_ints), it->string);
	const char *bad;

	if (f) {
		if ((bad = int_attr(it, f->min, f->max, (long *)((char *)u + f->off))) == NULL)
			return NULL;
		snprintf(why, whylen, "%s %s", f->name, bad);
		return why;
	}
	if (strcmp(it->string, "password") == 0 || strcmp(it->string, "default_schema") == 0 ||
	    strcmp(it->string, "comment") == 0)
		return user_text(it, u, why, whylen);
	snprintf(why, whylen, "unknown field '%.40s'", it->string);
	return why;
}

/* A password that names a hash must be one: mysql_native_password's "*" and 40 hex digits, or for
 * pgsql_users a SCRAM secret (patroni.h). Clear text is anything else. */
static const char *password_form(const char *pw, bool pgsql)
{
	if (pgsql)
		return strncmp(pw, "SCRAM-", 6) == 0 && !model_scram_secret_ok(pw)
			       ? "password starting with 'SCRAM-' is not a "
				 "SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:"
				 "<ServerKey> secret"
			       : NULL;
	if (pw[0] == '*' && (strlen(pw) != 41 || strspn(pw + 1, "0123456789ABCDEFabcdef") != 40))
		return "password starting with '*' is not a mysql_native_password hash (* and 40 hex digits)";
	return NULL;
}

static const char *user_json(const cJSON *root, struct px_user *u, bool pgsql, char *why, size_t whylen)
{
	const cJSON *it;
	const char *bad;

	cJSON_ArrayForEach(it, root)
	{
		if (pgsql && (strcmp(it->string, "default_schema") == 0 || strcmp(it->string, "schema_locked") == 0)) {
			snprintf(why, whylen, "pgsql_users has no %s", it->string);
			return why;
		}
		if ((bad = user_field(it, u, why, whylen)) != NULL)
			return bad;
	}
	if (!u->password || !u->password[0])
		return "has no password";
	return password_form(u->password, pgsql);
}

/* Add user `u`, its comment tagged: the owner tag marks the rows this agent may delete later. */
static void add_user(const struct layout_config *cfg, struct layout_result *r, struct px_user *u)
{
	char comment[MODEL_COMMENT_MAX + 1];

	if (u->comment && *u->comment)
		snprintf(comment, sizeof(comment), "%s: %s", cfg->user_tag, u->comment);
	else
		snprintf(comment, sizeof(comment), "%s", cfg->user_tag);
	free(u->comment);
	u->comment = comment;
	model_users_add(&r->users, u);
	u->comment = NULL;
}

/* <prefix>/<username> = {"password": ..., ...} */
static void user(const struct layout_config *cfg, const struct kv_pair *kv, struct layout_result *r, const char *name)
{
	struct px_user u = cfg->user_defaults;
	const char *bad;
	char why[200];
	cJSON *root;

	if (!*name || strchr(name, '/'))
		return;
	if ((bad = model_check_username(name)) != NULL) {
		reject(r, kv->key, "username %s", bad);
		return;
	}
	if (!value_ok(r, kv)) {
		model_names_add(&r->keep_users, name);
		return;
	}
	root = cJSON_ParseWithLength(kv->value, kv->len);
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		reject(r, kv->key, "value is not a JSON object");
		model_names_add(&r->keep_users, name);
		return;
	}
	u.username = (char *)name;
	u.password = NULL;
	u.comment = NULL;
	u.default_schema = cfg->user_defaults.default_schema ? xstrdup(cfg->user_defaults.default_schema) : NULL;
	bad = user_json(root, &u, cfg->pgsql, why, sizeof(why));
	sk_json_delete_wiped(root); /* the password */
	if (bad) {
		reject(r, kv->key, "%s", bad);
		model_names_add(&r->keep_users, name);
	} else if (r->users.n >= LAYOUT_MAX_ROWS) {
		reject(r, kv->key, "more than 100000 users");
		model_names_add(&r->keep_users, name);
	} else {
		add_user(cfg, r, &u);
	}
	if (u.password)
		sk_wipe(u.password, strlen(u.password));
	free(u.password);
	free(u.comment);
	free(u.default_schema);
}

/* Watched prefixes that nest (a master prefix around the users prefix) list a key twice: keep
 * one row per user, or the plan would insert it twice and every apply would fail. Sorted input. */
static void unique_users(struct px_users *a)
{
	size_t k = 0;

	for (size_t i = 0; i < a->n; i++) {
		struct px_user *u = &a->v[i];

		if (k && strcmp(a->v[k - 1].username, u->username) == 0) {
			sk_wipe(u->password, strlen(u->password));
			free(u->username);
			free(u->password);
			free(u->default_schema);
			free(u->comment);
			continue;
		}
		a->v[k++] = *u;
	}
	a->n = k;
}

/* What layout_build does with a key: the one branch it takes (the first that matches). */
enum key_use { USE_NONE, USE_SERVICE, USE_REPLICA, USE_GENERIC, USE_USER, USE_ANNOUNCED };

static enum key_use key_use(const struct layout_config *cfg, const char *key, const char **rest)
{
	if (strncmp(key, SERVICE_KEY_PREFIX, sizeof(SERVICE_KEY_PREFIX) - 1) == 0) {
		*rest = key + sizeof(SERVICE_KEY_PREFIX) - 1;
		return USE_SERVICE;
	}
	if ((*rest = under(key, cfg->replica_prefix)) != NULL)
		return USE_REPLICA;
	if ((*rest = under(key, cfg->servers_prefix)) != NULL)
		return USE_GENERIC;
	if ((*rest = under(key, cfg->users_prefix)) != NULL)
		return USE_USER;
	if ((*rest = under(key, cfg->announce_prefix)) != NULL && **rest && !strchr(*rest, '/'))
		return USE_ANNOUNCED;
	return USE_NONE;
}

unsigned layout_key_parts(const struct layout_config *cfg, const char *key)
{
	const char *rest;
	enum key_use use = key_use(cfg, key, &rest);
	unsigned parts = use == USE_USER ? LAYOUT_PART_USERS : use == USE_NONE ? 0 : LAYOUT_PART_SERVERS;

	/* masters() reads every key under the master prefix, whatever else reads it too. */
	if (cfg->master_prefix && *cfg->master_prefix && under(key, cfg->master_prefix))
		parts |= LAYOUT_PART_SERVERS;
	return parts | patroni_key_parts(cfg, key);
}

void layout_build(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv, struct layout_result *out)
{
	layout_build_parts(cfg, kv, nkv, LAYOUT_PARTS, out);
}

void layout_build_parts(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv, unsigned parts,
			struct layout_result *out)
{
	bool servers = parts & LAYOUT_PART_SERVERS, users = parts & LAYOUT_PART_USERS;

	memset(out, 0, sizeof(*out));
	if (servers && cfg->master_prefix && *cfg->master_prefix)
		masters(cfg, kv, nkv, out);
	for (size_t c = 0; servers && c < cfg->nclusters; c++)
		if (cfg->clusters[c].patroni_namespace)
			patroni_cluster(cfg, &cfg->clusters[c], kv, nkv, out);
	for (size_t i = 0; i < nkv; i++) {
		const char *rest;

		switch (key_use(cfg, kv[i].key, &rest)) {
		case USE_SERVICE:
			if (servers)
				service_instance(cfg, &kv[i], out, rest);
			break;
		case USE_REPLICA:
			if (servers)
				replica(cfg, &kv[i], out, rest);
			break;
		case USE_GENERIC:
			if (servers)
				generic(cfg, &kv[i], out, rest);
			break;
		case USE_USER:
			if (users)
				user(cfg, &kv[i], out, rest);
			break;
		case USE_ANNOUNCED:
			if (servers)
				announced(&kv[i], out);
			break;
		case USE_NONE: break;
		}
	}
	seen_free(out);
	model_servers_sort(&out->servers);
	model_users_sort(&out->users);
	unique_users(&out->users);
	model_names_sort(&out->keep_users);
	model_peers_sort(&out->peers);
}

void layout_result_free(struct layout_result *r)
{
	model_servers_free(&r->servers);
	model_users_free(&r->users);
	for (size_t i = 0; i < r->nrejects; i++) {
		free(r->rejects[i].key);
		free(r->rejects[i].reason);
	}
	free(r->rejects);
	for (size_t i = 0; i < r->nunsettled; i++)
		free(r->unsettled[i]);
	free(r->unsettled);
	model_keeps_free(&r->keep_servers);
	model_names_free(&r->keep_users);
	model_peers_free(&r->peers);
	seen_free(r);
	memset(r, 0, sizeof(*r));
}

static int long_cmp(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return x < y ? -1 : x > y;
}

size_t layout_owned_hostgroups(const struct layout_config *cfg, long *out, size_t max)
{
	size_t n = 0, k = 0, cap = cfg->nmanaged + cfg->nservices + 1;
	long *all;

	for (size_t i = 0; i < cfg->nclusters; i++)
		cap += 2 + cfg->clusters[i].nremote;
	all = xcalloc(cap, sizeof(long));
#define PUSH(v)                         \
	do {                            \
		if ((v) >= 0)           \
			all[n++] = (v); \
	} while (0)
	for (size_t i = 0; i < cfg->nclusters; i++) {
		PUSH(cfg->clusters[i].writer_hostgroup);
		if (cfg->clusters[i].monitor_roles)
			continue; /* its other hostgroups are the monitor's */
		PUSH(cfg->clusters[i].reader_hostgroup);
		for (size_t j = 0; j < cfg->clusters[i].nremote; j++)
			PUSH(cfg->clusters[i].remote[j].hostgroup);
	}
	for (size_t i = 0; i < cfg->nmanaged; i++)
		PUSH(cfg->managed_hostgroups[i]);
	for (size_t i = 0; i < cfg->nservices; i++)
		PUSH(cfg->services[i].hostgroup);
#undef PUSH
	qsort(all, n, sizeof(long), long_cmp);
	for (size_t i = 0; i < n; i++)
		if (k == 0 || all[k - 1] != all[i])
			all[k++] = all[i];
	for (size_t i = 0; i < k && i < max; i++)
		out[i] = all[i];
	free(all);
	return k;
}

bool layout_has_fleet(const struct layout_config *cfg)
{
	if (cfg->announce_prefix && *cfg->announce_prefix)
		return true;
	for (size_t i = 0; i < cfg->nservices; i++)
		if (cfg->services[i].fleet)
			return true;
	return false;
}

bool layout_is_writer_hostgroup(const struct layout_config *cfg, long hg)
{
	for (size_t i = 0; i < cfg->nclusters; i++)
		if (cfg->clusters[i].writer_hostgroup == hg)
			return true;
	for (size_t i = 0; i < cfg->nservices; i++)
		if (cfg->services[i].writer && cfg->services[i].hostgroup == hg)
			return true;
	return false;
}

int layout_keep_writers(const struct layout_config *cfg, const long *owned, size_t nowned, struct px_servers *want,
			const struct px_servers *have)
{
	int held = 0;

	for (size_t o = 0; o < nowned; o++) {
		long hg = owned[o];
		bool any = false;

		if (!layout_is_writer_hostgroup(cfg, hg))
			continue;
		for (size_t i = 0; i < want->n && !any; i++)
			any = want->v[i].hostgroup == hg;
		if (any)
			continue;
		for (size_t i = 0; i < have->n; i++) {
			if (have->v[i].hostgroup == hg && !sk_streq_ci(have->v[i].status, "OFFLINE_HARD")) {
				model_servers_add(want, &have->v[i]);
				any = true;
			}
		}
		if (any)
			held++;
	}
	if (held)
		model_servers_sort(want);
	return held;
}

void layout_config_free(struct layout_config *cfg)
{
	free(cfg->master_prefix);
	free(cfg->replica_prefix);
	free(cfg->servers_prefix);
	free(cfg->users_prefix);
	free(cfg->announce_prefix);
	free(cfg->region);
	for (size_t i = 0; i < cfg->nclusters; i++) {
		free(cfg->clusters[i].alias);
		free(cfg->clusters[i].patroni_namespace);
		free(cfg->clusters[i].patroni_region);
		for (size_t j = 0; j < cfg->clusters[i].nremote; j++)
			free(cfg->clusters[i].remote[j].region);
		free(cfg->clusters[i].remote);
	}
	free(cfg->clusters);
	for (size_t i = 0; i < cfg->nservices; i++)
		layout_service_free(&cfg->services[i]);
	free(cfg->services);
	free(cfg->managed_hostgroups);
	free(cfg->server_defaults.comment);
	free(cfg->user_defaults.default_schema);
	free(cfg->user_tag);
	memset(cfg, 0, sizeof(*cfg));
}

void layout_service_free(struct layout_service *sv)
{
	free(sv->name);
	for (size_t i = 0; i < sv->ntags; i++)
		free(sv->tags[i]);
	free(sv->tags);
	for (size_t i = 0; i < sv->nnode_meta; i++)
		free(sv->node_meta[i]);
	free(sv->node_meta);
	free(sv->near);
	free(sv->filter);
	free(sv->datacenter);
	free(sv->meta_prefix);
	free(sv->label);
	memset(sv, 0, sizeof(*sv));
}
