/* test_sync.c: table tests of the agent's pure core: config + KV + current rows -> exact SQL plan.
 * One case a directory in tests/data/sync: config.cfg, kv.json, current.json, expect.sql and,
 * when entries must be rejected or a failover is half written, expect.rejects / expect.unsettled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "config_check.h"
#include "layout.h"
#include "plan.h"
#include "proxysql.h"
#include "testdata.h"

static char *read_opt(const char *dir, const char *name)
{
	char path[2048], *text = NULL, err[256];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (access(path, R_OK) != 0)
		return NULL;
	if (sk_read_file(path, 1 << 24, &text, NULL, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	return text;
}

/* kv.json: {"key": "value" or a JSON value that is stored as its text} */
static size_t load_kv(const char *dir, struct kv_pair **out)
{
	char *text = read_opt(dir, "kv.json");
	cJSON *root, *it;
	size_t n = 0;

	*out = NULL;
	if (!text)
		return 0;
	root = cJSON_Parse(text);
	assert_non_null(root);
	cJSON_ArrayForEach(it, root)
	{
		char *v = cJSON_IsString(it) ? xstrdup(it->valuestring) : cJSON_PrintUnformatted(it);

		*out = xrealloc(*out, (n + 1) * sizeof(**out));
		(*out)[n].key = xstrdup(it->string);
		(*out)[n].value = v;
		(*out)[n].len = strlen(v);
		n++;
	}
	cJSON_Delete(root);
	free(text);
	return n;
}

static long jint(const cJSON *o, const char *name, long def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) ? (long)v->valuedouble : def;
}

static const char *jstr(const cJSON *o, const char *name, const char *def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : def;
}

/* A "servers" or "users" array of current.json into rows. */
static void json_servers(const cJSON *arr, struct px_servers *servers)
{
	const cJSON *it;

	memset(servers, 0, sizeof(*servers));
	cJSON_ArrayForEach(it, arr)
	{
		struct px_server s;

		model_server_defaults(&s);
		s.hostgroup = jint(it, "hostgroup", 0);
		s.host = (char *)jstr(it, "host", "");
		s.port = jint(it, "port", 3306);
		sk_strlcpy(s.status, jstr(it, "status", "ONLINE"), sizeof(s.status));
		s.weight = jint(it, "weight", 1);
		s.max_connections = jint(it, "max_connections", 1000);
		s.max_replication_lag = jint(it, "max_replication_lag", 0);
		s.use_ssl = jint(it, "use_ssl", 0);
		s.compression = jint(it, "compression", 0);
		s.max_latency_ms = jint(it, "max_latency_ms", 0);
		s.comment = (char *)jstr(it, "comment", "");
		model_servers_add(servers, &s);
	}
	model_servers_sort(servers);
}

/* A mysql_users row: every column, ProxySQL's defaults where absent (strings are the JSON's). */
static void json_user(const cJSON *it, struct px_user *u)
{
	model_user_defaults(u);
	u->username = (char *)jstr(it, "username", "");
	u->password = (char *)jstr(it, "password", "");
	u->active = jint(it, "active", 1);
	u->use_ssl = jint(it, "use_ssl", 0);
	u->default_hostgroup = jint(it, "default_hostgroup", 0);
	u->default_schema = (char *)jstr(it, "default_schema", NULL);
	u->schema_locked = jint(it, "schema_locked", 0);
	u->transaction_persistent = jint(it, "transaction_persistent", 1);
	u->fast_forward = jint(it, "fast_forward", 0);
	u->backend = jint(it, "backend", 1);
	u->frontend = jint(it, "frontend", 1);
	u->max_connections = jint(it, "max_connections", 10000);
	u->attributes = (char *)jstr(it, "attributes", NULL);
	u->comment = (char *)jstr(it, "comment", "");
}

/* Unsorted: in the array's order. */
static void json_users_as_given(const cJSON *arr, struct px_users *users)
{
	const cJSON *it;

	memset(users, 0, sizeof(*users));
	cJSON_ArrayForEach(it, arr)
	{
		struct px_user u;

		json_user(it, &u);
		model_users_add(users, &u);
	}
}

static void json_users(const cJSON *arr, struct px_users *users)
{
	json_users_as_given(arr, users);
	model_users_sort(users);
}

/* current.json: {"servers": [{hostgroup, host, port, status, ...}], "users": [...], "drains": [...],
 * "save_owed": {"servers": bool, "users": bool} (disk differs from memory), "runtime": {"servers":
 * [...], "users": [...]} (absent: runtime was loaded from memory), "families": [[writer, reader,
 * ...], ...] (monitor hostgroup rows), "protected": ["admin", ...] (the target's own logins)} */
static cJSON *load_current(const char *dir, struct px_servers *servers, struct px_users *users,
			   struct plan_drain **drains, size_t *ndrains)
{
	char *text = read_opt(dir, "current.json");
	cJSON *root, *it;

	memset(servers, 0, sizeof(*servers));
	memset(users, 0, sizeof(*users));
	*drains = NULL;
	*ndrains = 0;
	root = cJSON_Parse(text ? text : "{}");
	free(text);
	assert_non_null(root);
	json_servers(cJSON_GetObjectItem(root, "servers"), servers);
	json_users(cJSON_GetObjectItem(root, "users"), users);
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(root, "drains"))
	{
		*drains = xrealloc(*drains, (*ndrains + 1) * sizeof(**drains));
		(*drains)[*ndrains].hostgroup = jint(it, "hostgroup", 0);
		(*drains)[*ndrains].host = jstr(it, "host", "");
		(*drains)[*ndrains].port = jint(it, "port", 3306);
		(*drains)[*ndrains].conn_used = jint(it, "conn_used", 0);
		(*drains)[*ndrains].draining_ms = jint(it, "draining_ms", 0);
		(*ndrains)++;
	}
	return root; /* owns the strings the drains point to */
}

static void compare(const char *dir, const char *name, const char *got)
{
	char *want = read_opt(dir, name);

	if (!want)
		want = xstrdup("");
	if (strcmp(got, want) != 0)
		fail_msg("%s/%s differs.\n--- got:\n%s--- want:\n%s", dir, name, got, want);
	free(want);
}

/* Compared only where the case has the file (older cases do not report). */
static void compare_if_present(const char *dir, const char *name, const char *got)
{
	char *want = read_opt(dir, name);

	if (want) {
		free(want);
		compare(dir, name, got);
	}
}

/* The rows a plan says memory holds once it has run need nothing more: planned again from them
 * (no LOAD or SAVE owed now), the same desired state gives no statement. */
static void after_is_fixed_point(const struct plan_inputs *in, const struct plan_options *o, const struct plan *p)
{
	struct px_servers s = { 0 };
	struct px_users u = { 0 };
	struct plan_options again = *o;
	struct plan q;
	char *text;

	if (!p->after_exact)
		return;
	for (size_t i = 0; i < p->nafter_servers; i++)
		model_servers_add(&s, p->after_servers[i]);
	for (size_t i = 0; i < p->nafter_users; i++)
		model_users_add(&u, p->after_users[i]);
	model_servers_sort(&s);
	again.load_owed_servers = again.load_owed_users = false;
	again.save_owed_servers = again.save_owed_users = false;
	again.foreign_servers = again.foreign_users = 0;
	plan_build(&(struct plan_inputs){ .want_servers = in->want_servers,
					  .have_servers = in->have_servers ? &s : NULL,
					  .want_users = in->want_users,
					  .have_users = in->want_users ? &u : NULL,
					  .drains = in->drains,
					  .ndrains = in->ndrains },
		   &again, &q);
	text = plan_text(&q);
	if (q.n)
		fail_msg("planned again from the rows after the plan, still:\n%s", text);
	free(text);
	plan_free(&q);
	model_servers_free(&s);
	model_users_free(&u);
}

static void run_case(void **state)
{
	const char *dir = *state;
	char cfgpath[2048], err[512];
	char *argv[] = { "proxysql-sync", "-c", cfgpath, NULL };
	struct sync_config cfg;
	struct kv_pair *kv;
	size_t nkv, ndrains;
	struct layout_result lr;
	struct px_servers have_s;
	struct px_users have_u;
	struct plan_drain *drains;
	struct plan_options po;
	struct plan_inputs in = { 0 };
	struct plan_drift ds = { 0 }, du = { 0 };
	struct px_servers rt_s;
	struct px_users rt_u;
	struct plan_rowset rt_set = { 0 };
	struct px_families fam = { 0 };
	struct px_names prot = { 0 };
	const cJSON *rt, *it;
	struct plan plan = { 0 };
	long owned[256];
	sk_buf b;
	cJSON *cur;
	char *text;
	const struct layout_config *L;

	snprintf(cfgpath, sizeof(cfgpath), "%s/config.cfg", dir);
	if (sync_config_load(&cfg, 3, argv, err, sizeof(err)) != OPTS_OK)
		fail_msg("%s: %s", cfgpath, err);
	/* A case configures one side: the PostgreSQL one when it lists patroni or pgsql users. */
	L = sync_config_has_pgsql(&cfg) ? &cfg.pg_layout : &cfg.layout;
	nkv = load_kv(dir, &kv);
	layout_build(L, kv, nkv, &lr);

	sk_buf_init(&b, 1 << 20);
	for (size_t i = 0; i < lr.nrejects; i++)
		assert_true(sk_buf_addf(&b, "%s: %s\n", lr.rejects[i].key, lr.rejects[i].reason));
	compare(dir, "expect.rejects", b.data ? b.data : "");
	sk_buf_free(&b);
	for (size_t i = 0; i < lr.nunsettled; i++)
		assert_true(sk_buf_addf(&b, "%s\n", lr.unsettled[i]));
	compare(dir, "expect.unsettled", b.data ? b.data : "");
	sk_buf_free(&b);

	for (size_t i = 0; i < lr.peers.n; i++)
		assert_true(sk_buf_addf(&b, "%s:%ld weight %ld comment '%s'\n", lr.peers.v[i].host, lr.peers.v[i].port,
					lr.peers.v[i].weight, lr.peers.v[i].comment ? lr.peers.v[i].comment : ""));
	compare_if_present(dir, "expect.peers", b.data ? b.data : "");
	sk_buf_free(&b);

	cur = load_current(dir, &have_s, &have_u, &drains, &ndrains);
	rt = cJSON_GetObjectItem(cur, "runtime");
	json_servers(cJSON_GetObjectItem(rt, "servers"), &rt_s);
	json_users(cJSON_GetObjectItem(rt, "users"), &rt_u);
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(cur, "families"))
	{
		struct px_family f = { .table = "mysql_replication_hostgroups" };
		const cJSON *hg;

		cJSON_ArrayForEach(hg, it) if (f.n < SK_ARRAY_LEN(f.hg)) f.hg[f.n++] = (long)hg->valuedouble;
		fam.v = xrealloc(fam.v, (fam.n + 1) * sizeof(*fam.v));
		fam.v[fam.n++] = f;
	}
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(cur, "protected")) model_names_add(&prot, it->valuestring);
	model_names_sort(&prot);
	memset(&po, 0, sizeof(po));
	po.module = L->pgsql ? &px_pgsql : &px_mysql;
	po.nowned = layout_owned_hostgroups(L, owned, SK_ARRAY_LEN(owned));
	if (!opt_flag(&cfg.o, "allow-empty-writer")) /* the never-empty rule, as the agent applies it */
		layout_keep_writers(L, owned, po.nowned, &lr.servers, &have_s);
	po.owned_hostgroups = owned;
	po.user_tag = L->user_tag;
	po.drain_timeout_ms = (int64_t)(opt_num(&cfg.o, "drain-timeout") * 1000);
	po.save_to_disk = opt_flag(&cfg.o, "save-to-disk");
	po.keep_servers = &lr.keep_servers;
	po.keep_users = &lr.keep_users;
	po.protected_users = &prot;
	po.adopt_users = opt_flag(&cfg.o, "adopt-users");
	po.hold_foreign = strcmp(opt_str(&cfg.o, "foreign-edits"), "hold") == 0;
	in.want_servers = &lr.servers;
	in.have_servers = &have_s;
	in.runtime_servers = rt ? &rt_s : NULL;
	if (*L->users_prefix) {
		in.want_users = &lr.users;
		in.have_users = &have_u;
		/* Runtime's users as the agent keeps them: a set of row hashes. */
		for (size_t i = 0; i < (rt ? &rt_u : &have_u)->n; i++)
			plan_rowset_user(&rt_set, &(rt ? &rt_u : &have_u)->v[i], L->user_tag);
		plan_rowset_seal(&rt_set);
		in.runtime_users = &rt_set;
	}
	in.families = &fam;
	in.servers_disk_differs = jint(cJSON_GetObjectItem(cur, "save_owed"), "servers", 0) != 0;
	in.users_disk_differs = jint(cJSON_GetObjectItem(cur, "save_owed"), "users", 0) != 0;
	in.drains = drains;
	in.ndrains = ndrains;
	if (lr.nunsettled == 0)
		plan_target(&in, &po, &plan, &ds, &du);
	sk_buf_init(&b, 1 << 20);
	assert_true(sk_buf_addf(&b,
				"foreign staged: servers %zu, users %zu\nleft alone: conflicts %zu, protected %zu\n",
				ds.foreign, du.foreign, plan.user_conflicts, plan.user_protected));
	compare_if_present(dir, "expect.report", b.data);
	sk_buf_free(&b);
	text = plan_text(&plan);
	compare(dir, "expect.sql", text);
	free(text);
	if (lr.nunsettled == 0)
		after_is_fixed_point(&in, &po, &plan);

	plan_free(&plan);
	free(drains);
	free(fam.v);
	model_names_free(&prot);
	model_servers_free(&rt_s);
	model_users_free(&rt_u);
	plan_rowset_free(&rt_set);
	cJSON_Delete(cur);
	model_servers_free(&have_s);
	model_users_free(&have_u);
	layout_result_free(&lr);
	for (size_t i = 0; i < nkv; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
	sync_config_free(&cfg);
}

/* ---- a target's TLS and address settings ------------------------------------------------ */

/* plan_describe: the apply's log line says what changed in words, and what a plan of LOADs and SAVEs
 * only does (a put-off SAVE). */
static void plan_described_in_words(void **state)
{
	struct plan_step save = { .sql = "SAVE MYSQL SERVERS TO DISK" },
			 load = { .sql = "LOAD MYSQL USERS TO RUNTIME" };
	struct plan_step both[] = { { .sql = "LOAD MYSQL SERVERS TO RUNTIME" },
				    { .sql = "SAVE MYSQL SERVERS TO DISK" } };
	struct plan p = { 0 };
	char buf[400];

	(void)state;
	p.server_inserts = 1;
	p.server_drains = 2;
	p.user_updates = 3;
	assert_string_equal(plan_describe(&p, buf, sizeof(buf)),
			    "1 server added, 2 servers set OFFLINE_SOFT to drain, 3 users changed");
	memset(&p, 0, sizeof(p));
	p.steps = &save;
	p.n = 1;
	assert_string_equal(
		plan_describe(&p, buf, sizeof(buf)),
		"no row changed: saved to disk what was loaded before (a SAVE put off by save-delay, or owed)");
	p.steps = &load;
	assert_string_equal(plan_describe(&p, buf, sizeof(buf)),
			    "no row changed: loaded to runtime what memory already held");
	p.steps = both;
	p.n = 2;
	assert_string_equal(plan_describe(&p, buf, sizeof(buf)),
			    "no row changed: loaded to runtime and saved to disk what memory already held");
	p.steps = NULL; /* the text dropped after the apply, as when the line is logged */
	assert_string_equal(
		plan_describe(&p, buf, sizeof(buf)),
		"no row changed: a LOAD or SAVE owed from earlier (a SAVE put off by save-delay, or a runtime "
		"behind memory)");
	p.n = 0;
	p.user_deletes = 1;
	p.peer_inserts = 2;
	assert_string_equal(plan_describe(&p, buf, sizeof(buf)), "1 user removed, 2 ProxySQL peers added");
}

/* Certificates are verified unless tls_verify = false is written out, which warns; localhost with
 * a port is TCP (port_explicit), without one the socket. */
static void target_tls_and_address(void **state)
{
	static const struct {
		const char *address, *settings;
		const char *error; /* a piece of the load error, or NULL */
		bool verify, warns, port_explicit;
	} rows[] = {
		{ "127.0.0.1:6032", "", NULL, true, false, true },
		{ "127.0.0.1:6032", "tls = true;", NULL, true, false, true },
		{ "127.0.0.1:6032", "tls = true; tls_verify = true; tls_ca = \"/ca.pem\";", NULL, true, false, true },
		{ "127.0.0.1:6032", "tls = true; tls_verify = false;", NULL, false, true, true },
		{ "127.0.0.1:6032", "tls_verify = false;", "need tls = true", false, false, false },
		{ "127.0.0.1:6032", "tls_verify = true;", "need tls = true", false, false, false },
		{ "localhost:6032", "", NULL, true, false, true },
		{ "localhost", "", NULL, true, false, false },
		{ "[::1]:6033", "", NULL, true, false, true },
	};
	char dir[] = "/tmp/sk-tls-XXXXXX", path[64], err[512], warnings[1024];
	char *argv[] = { "proxysql-sync", "-c", path, NULL };

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/c.cfg", dir);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct sync_config cfg;
		FILE *f = fopen(path, "w");
		enum opts_result r;

		assert_non_null(f);
		fprintf(f,
			"region = \"eu\";\nclusters = ( { alias = \"shop\"; writer_hostgroup = 10; "
			"reader_hostgroup = 11; } );\ntargets = ( { name = \"t\"; address = \"%s\"; %s } );\n",
			rows[i].address, rows[i].settings);
		fclose(f);
		r = sync_config_load(&cfg, 3, argv, err, sizeof(err));
		if (rows[i].error) {
			if (r != OPTS_ERROR || !strstr(err, rows[i].error))
				fail_msg("row %zu: expected an error with '%s', got %d '%s'", i, rows[i].error, r, err);
			sync_config_free(&cfg); /* as proxysql-sync's main does after an error */
			continue;
		}
		if (r != OPTS_OK)
			fail_msg("row %zu: %s", i, err);
		assert_int_equal(cfg.targets[0].tls_verify, rows[i].verify);
		assert_int_equal(cfg.targets[0].port_explicit, rows[i].port_explicit);
		assert_int_equal(cfg.targets[0].port, strstr(rows[i].address, "6033") ? 6033 : 6032);
		sync_config_warnings(&cfg, warnings, sizeof(warnings));
		if (rows[i].warns != (strstr(warnings, "target t: TLS without certificate verification") != NULL))
			fail_msg("row %zu: warnings '%s'", i, warnings);
		sync_config_free(&cfg);
	}
	unlink(path);
	rmdir(dir);
}

/* ---- at scale: generated snapshots (the cases above are small by design) ---------------- */

static void scale_config(struct sync_config *cfg)
{
	char path[2048], err[512];
	char *argv[] = { "proxysql-sync", "-c", path, NULL };

	snprintf(path, sizeof(path), "%s/sync/first-sync/config.cfg", testdata_dir());
	if (sync_config_load(cfg, 3, argv, err, sizeof(err)) != OPTS_OK)
		fail_msg("%s: %s", path, err);
}

static void kv_push(struct kv_pair **kv, size_t *n, const char *key, const char *value)
{
	*kv = model_grow(*kv, *n, sizeof(**kv)); /* doubling: a pair at a time would be quadratic */
	(*kv)[*n].key = xstrdup(key);
	(*kv)[*n].value = xstrdup(value);
	(*kv)[*n].len = strlen(value);
	(*n)++;
}

static void kv_free(struct kv_pair *kv, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

/* A fixed-seed shuffle (the same on every run). */
static void kv_shuffle(struct kv_pair *kv, size_t n, uint64_t seed)
{
	for (size_t i = n; i > 1; i--) {
		struct kv_pair t;
		size_t j;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		j = (size_t)(seed >> 33) % i;
		t = kv[i - 1];
		kv[i - 1] = kv[j];
		kv[j] = t;
	}
}

/* n hosts, each listed twice in hostgroup 30 ("h:3306" weight 5, "h" weight `second`), once as a
 * local replica (hostgroup 11), and n users each listed twice; plus n/10 rejected server keys in
 * hostgroup 31 (they keep what the target has). */
static size_t scale_kv(size_t n, long second, struct kv_pair **kv)
{
	size_t nkv = 0;
	char key[128], value[64];

	*kv = NULL;
	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "proxysql/servers/30/h%06zu:3306", i);
		kv_push(kv, &nkv, key, "{\"weight\": 5}");
		snprintf(key, sizeof(key), "proxysql/servers/30/h%06zu", i);
		snprintf(value, sizeof(value), "{\"weight\": %ld}", second);
		kv_push(kv, &nkv, key, value);
		snprintf(key, sizeof(key), "mysql/replica/shop/eu/h%06zu:3306", i);
		kv_push(kv, &nkv, key, "");
		snprintf(key, sizeof(key), "proxysql/users/u%06zu", i);
		kv_push(kv, &nkv, key, "{\"password\": \"pw\"}");
		kv_push(kv, &nkv, key, "{\"password\": \"pw\"}");
		if (i % 10 == 0) {
			snprintf(key, sizeof(key), "proxysql/servers/31/k%06zu:3306", i);
			kv_push(kv, &nkv, key, "{not json");
		}
	}
	return nkv;
}

/* Duplicates at scale: the first key of a server stands, wherever the shuffle put it. */
/* Drift compares rows by a hash of their columns: where one column ends and the next begins
 * counts ("ab" + "c" is not "a" + "bc"), a row is one per role, and a duplicate counts once. */
static void drift_hash_keeps_columns_apart(void **state)
{
	struct px_users mem = { 0 }, rt = { 0 };
	struct plan_options o = { .user_tag = "proxysql-sync" };
	struct plan_drift d;
	struct px_user u;

	(void)state;
	model_user_defaults(&u);
	u.username = "ab";
	u.password = "c";
	u.comment = "proxysql-sync";
	model_users_add(&mem, &u);
	model_user_defaults(&u);
	u.username = "a";
	u.password = "bc";
	u.comment = "proxysql-sync";
	for (int role = 0; role < 2; role++) {
		u.frontend = role == 0;
		u.backend = role == 1;
		model_users_add(&rt, &u);
		model_users_add(&rt, &u); /* twice: a set */
	}
	plan_drift_users(&mem, &rt, &o, &d);
	assert_int_equal(d.owned, 4);
	assert_int_equal(d.foreign, 0);
	/* The same user on both sides: no drift. */
	model_users_free(&rt);
	model_user_defaults(&u);
	u.username = "ab";
	u.password = "c";
	u.comment = "proxysql-sync";
	u.frontend = 1;
	u.backend = 0;
	model_users_add(&rt, &u);
	u.frontend = 0;
	u.backend = 1;
	model_users_add(&rt, &u);
	plan_drift_users(&mem, &rt, &o, &d);
	assert_int_equal(d.owned + d.foreign, 0);
	model_users_free(&mem);
	model_users_free(&rt);
}

static void scale_duplicates_first_stands(void **state)
{
	enum { N = 20000 };
	struct sync_config cfg;
	struct kv_pair *kv;
	size_t nkv = scale_kv(N, 7, &kv), hg30 = 0;
	struct layout_result lr;
	static signed char first[N]; /* the weight of the key of host i met first */

	(void)state;
	scale_config(&cfg);
	kv_shuffle(kv, nkv, 42);
	memset(first, 0, sizeof(first));
	for (size_t i = 0; i < nkv; i++) {
		unsigned long h;

		if (sscanf(kv[i].key, "proxysql/servers/30/h%lu", &h) == 1 && h < N && !first[h])
			first[h] = strchr(kv[i].key + 20, ':') ? 5 : 7;
	}
	layout_build(&cfg.layout, kv, nkv, &lr);
	assert_int_equal(lr.users.n, N);
	assert_int_equal(lr.servers.n, 2 * N);
	assert_int_equal(lr.nrejects, N / 10);
	assert_int_equal(lr.keep_servers.n, N / 10);
	for (size_t i = 0; i < lr.servers.n; i++) {
		const struct px_server *s = &lr.servers.v[i];
		unsigned long h;

		if (i)
			assert_true(lr.servers.v[i - 1].hostgroup < s->hostgroup ||
				    strcmp(lr.servers.v[i - 1].host, s->host) < 0);
		if (s->hostgroup != 30)
			continue;
		hg30++;
		assert_int_equal(sscanf(s->host, "h%lu", &h), 1);
		if (s->weight != first[h])
			fail_msg("%s: weight %ld, the first key said %d", s->host, s->weight, first[h]);
	}
	assert_int_equal(hg30, N);
	layout_result_free(&lr);
	kv_free(kv, nkv);
	sync_config_free(&cfg);
}

/* The plan against a target with half the servers, a drained one per ten, and every kept one. */
static char *scale_plan(struct sync_config *cfg, const struct kv_pair *kv, size_t nkv, size_t n)
{
	struct layout_result lr;
	struct px_servers have = { 0 };
	struct px_users have_u = { 0 };
	struct plan_drain *drains = xcalloc(n / 10 + 1, sizeof(*drains));
	size_t nd = 0;
	long owned[256];
	struct plan_options po = { 0 };
	struct plan plan;
	char host[64], *text;

	layout_build(&cfg->layout, kv, nkv, &lr);
	for (size_t i = 0; i < n; i += 2) {
		struct px_server s;

		model_server_defaults(&s);
		s.hostgroup = 30;
		s.host = host;
		s.comment = "";
		snprintf(host, sizeof(host), "h%06zu", i);
		model_servers_add(&have, &s);
		if (i % 10 == 0) { /* kept: its key was rejected */
			s.hostgroup = 31;
			snprintf(host, sizeof(host), "k%06zu", i);
			model_servers_add(&have, &s);
		}
		if (i % 20 == 0) { /* gone from KV, draining */
			s.hostgroup = 30;
			snprintf(host, sizeof(host), "gone%06zu", i);
			sk_strlcpy(s.status, "OFFLINE_SOFT", sizeof(s.status));
			model_servers_add(&have, &s);
		}
	}
	model_servers_sort(&have);
	for (size_t i = 0; i < have.n; i++)
		if (strncmp(have.v[i].host, "gone", 4) == 0)
			drains[nd++] = (struct plan_drain){ 30, have.v[i].host, 3306, 1, 0 };
	po.nowned = layout_owned_hostgroups(&cfg->layout, owned, SK_ARRAY_LEN(owned));
	po.owned_hostgroups = owned;
	po.user_tag = cfg->layout.user_tag;
	po.drain_timeout_ms = 60000;
	po.keep_servers = &lr.keep_servers;
	po.keep_users = &lr.keep_users;
	plan_build(&(struct plan_inputs){ .want_servers = &lr.servers,
					  .have_servers = &have,
					  .want_users = &lr.users,
					  .have_users = &have_u,
					  .drains = drains,
					  .ndrains = nd },
		   &po, &plan);
	assert_int_equal(plan.server_deletes, 0);
	assert_int_equal(plan.draining, nd);
	text = plan_text(&plan);
	plan_free(&plan);
	free(drains);
	model_servers_free(&have);
	layout_result_free(&lr);
	return text;
}

/* The same snapshot in another order gives the same plan, byte for byte. */
static void scale_order_independent(void **state)
{
	enum { N = 5000 };
	struct sync_config cfg;
	struct kv_pair *kv;
	size_t nkv = scale_kv(N, 5, &kv);
	char *a, *b;

	(void)state;
	scale_config(&cfg);
	a = scale_plan(&cfg, kv, nkv, N);
	kv_shuffle(kv, nkv, 7);
	b = scale_plan(&cfg, kv, nkv, N);
	assert_string_equal(a, b);
	kv_shuffle(kv, nkv, 1234);
	free(b);
	b = scale_plan(&cfg, kv, nkv, N);
	assert_string_equal(a, b);
	free(a);
	free(b);
	kv_free(kv, nkv);
	sync_config_free(&cfg);
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of the layout + plan of n hosts (the best of three runs). */
static double scale_seconds(struct sync_config *cfg, size_t n)
{
	struct kv_pair *kv;
	size_t nkv = scale_kv(n, 7, &kv);
	double best = 1e9;

	kv_shuffle(kv, nkv, 3);
	for (int run = 0; run < 3; run++) {
		double t0 = cpu_seconds();

		free(scale_plan(cfg, kv, nkv, n));
		if (cpu_seconds() - t0 < best)
			best = cpu_seconds() - t0;
	}
	kv_free(kv, nkv);
	return best;
}

/* Linear time: four times the keys cost about four times as much (a scan per item would cost
 * sixteen). The bound leaves room for a busy machine; each size is its best of three runs. */
static void scale_linear(void **state)
{
	struct sync_config cfg;
	double small, big;

	(void)state;
	scale_config(&cfg);
	small = scale_seconds(&cfg, 10000);
	big = scale_seconds(&cfg, 40000);
	if (big > 10 * small)
		fail_msg("layout + plan: %.3f s for 40,000 hosts, %.3f s for 10,000 (more than 10 times)", big, small);
	print_message("layout + plan CPU: %.3f s for 10,000 hosts, %.3f s for 40,000\n", small, big);
	sync_config_free(&cfg);
}

/* The hot path's vouchers: every row present and unchanged, or the facts are read again. */
static void vouchers_need_every_row_unchanged(void **state)
{
	static const struct {
		struct px_vouchers then, now;
		bool vouched;
	} cases[] = {
		{ { 1, 2, 3, 0, 0xf }, { 1, 2, 3, 0, 0xf }, true }, /* 0: an empty proxysql_servers */
		{ { 1, 2, 3, 4, 0xf }, { 9, 2, 3, 4, 0xf }, false },
		{ { 1, 2, 3, 4, 0xf }, { 1, 9, 3, 4, 0xf }, false },
		{ { 1, 2, 3, 4, 0xf }, { 1, 2, 9, 4, 0xf }, false },
		{ { 1, 2, 3, 4, 0xf }, { 1, 2, 3, 9, 0xf }, false },
		{ { 1, 2, 0, 4, 0xb }, { 1, 2, 0, 4, 0xb }, false }, /* no mysql_servers_v2 (before 2.6) */
		{ { 1, 2, 3, 4, 0xf }, { 1, 2, 3, 4, 0x7 }, false },
		{ { 0 }, { 0 }, false },
	};

	(void)state;
	for (size_t i = 0; i < SK_ARRAY_LEN(cases); i++) {
		if (pxadmin_vouched(&cases[i].then, &cases[i].now) != cases[i].vouched)
			fail_msg("case %zu", i);
	}
}

/* Facts compare on everything a plan reads of them. */
static void facts_equal_compares_what_plans_read(void **state)
{
	struct px_family fam = { .table = "mysql_galera_hostgroups", .hg = { 10, 11 }, .n = 2 };
	struct px_facts a = { 0 }, b = { 0 };

	(void)state;
	model_names_add(&a.protected_users, "admin");
	model_names_add(&b.protected_users, "admin");
	assert_true(pxadmin_facts_equal(&a, &b));
	model_names_add(&b.protected_users, "ops");
	assert_false(pxadmin_facts_equal(&a, &b));
	model_names_add(&a.protected_users, "ops");
	assert_true(pxadmin_facts_equal(&a, &b));
	a.families.v = &fam;
	a.families.n = 1;
	assert_false(pxadmin_facts_equal(&a, &b));
	b.families = a.families;
	assert_true(pxadmin_facts_equal(&a, &b));
	b.cluster_peers = 1;
	assert_false(pxadmin_facts_equal(&a, &b));
	b.cluster_peers = 0;
	b.users_diffs_before_sync = 3;
	assert_false(pxadmin_facts_equal(&a, &b));
	a.families.n = b.families.n = 0;
	model_names_free(&a.protected_users);
	model_names_free(&b.protected_users);
}

/* checksum/mysql-users.json: the agent's hash of a users table is the CHECKSUM the ProxySQL double
 * answers for it (real SQLite, 2.7.1's DDL), whatever order the rows come in. */
static void users_checksum_is_proxysqls(void **state)
{
	char dir[1024], *text;
	cJSON *root;
	const cJSON *c;
	int cases = 0;

	(void)state;
	snprintf(dir, sizeof(dir), "%s/checksum", testdata_dir());
	text = read_opt(dir, "mysql-users.json");
	assert_non_null(text);
	root = cJSON_Parse(text);
	assert_non_null(root);
	cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases"))
	{
		struct px_users users;
		const struct px_user **fwd, **rev;
		char want[24];

		json_users_as_given(cJSON_GetObjectItem(c, "rows"), &users);
		fwd = xcalloc(users.n + 1, sizeof(*fwd));
		rev = xcalloc(users.n + 1, sizeof(*rev));
		for (size_t i = 0; i < users.n; i++)
			fwd[i] = rev[users.n - 1 - i] = &users.v[i];
		/* compared as the agent compares an answer: the CHECKSUM's text read as a number */
		snprintf(want, sizeof(want), "%s", jstr(c, "checksum", ""));
		for (int order = 0; order < 2; order++) {
			uint64_t got = pxadmin_users_checksum(order ? rev : fwd, users.n);

			if (got != pxadmin_checksum_value(want))
				fail_msg("%s (%s order): got %016llx, want %s", jstr(c, "name", "?"),
					 order ? "reversed" : "file", (unsigned long long)got, want);
		}
		free(fwd);
		free(rev);
		model_users_free(&users);
		cases++;
	}
	assert_true(cases >= 8);
	cJSON_Delete(root);
	free(text);
}

int main(void)
{
	char dir[1024];
	struct dirent **ents = NULL;
	struct CMUnitTest *tests;
	char **paths;
	size_t n = 0, ncases;
	int k, rc;

	snprintf(dir, sizeof(dir), "%s/sync", testdata_dir());
	k = scandir(dir, &ents, NULL, alphasort);
	if (k <= 0) {
		fprintf(stderr, "no cases under %s\n", dir);
		return 1;
	}
	tests = xcalloc((size_t)k, sizeof(*tests));
	paths = xcalloc((size_t)k, sizeof(*paths));
	for (int i = 0; i < k; i++) {
		if (ents[i]->d_name[0] != '.') {
			char p[2048];

			snprintf(p, sizeof(p), "%s/%s", dir, ents[i]->d_name);
			paths[n] = xstrdup(p);
			tests[n].name = strrchr(paths[n], '/') + 1;
			tests[n].test_func = run_case;
			tests[n].initial_state = paths[n];
			n++;
		}
		free(ents[i]);
	}
	free(ents);
	ncases = n;
	tests = xrealloc(tests, (n + 9) * sizeof(*tests));
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(drift_hash_keeps_columns_apart);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(scale_duplicates_first_stands);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(scale_order_independent);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(scale_linear);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(vouchers_need_every_row_unchanged);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(facts_equal_compares_what_plans_read);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(target_tls_and_address);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(plan_described_in_words);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(users_checksum_is_proxysqls);
	rc = _cmocka_run_group_tests("sync", tests, n, NULL, NULL);
	for (size_t i = 0; i < ncases; i++)
		free(paths[i]);
	free(paths);
	free(tests);
	return rc;
}
