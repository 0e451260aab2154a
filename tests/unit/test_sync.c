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
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "layout.h"
#include "plan.h"
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

		px_server_defaults(&s);
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
		px_servers_add(servers, &s);
	}
	px_servers_sort(servers);
}

static void json_users(const cJSON *arr, struct px_users *users)
{
	const cJSON *it;

	memset(users, 0, sizeof(*users));
	cJSON_ArrayForEach(it, arr)
	{
		struct px_user u;

		px_user_defaults(&u);
		u.username = (char *)jstr(it, "username", "");
		u.password = (char *)jstr(it, "password", "");
		u.default_hostgroup = jint(it, "default_hostgroup", 0);
		u.max_connections = jint(it, "max_connections", 10000);
		u.frontend = jint(it, "frontend", 1);
		u.backend = jint(it, "backend", 1);
		u.active = jint(it, "active", 1);
		u.default_schema = (char *)jstr(it, "default_schema", NULL);
		u.comment = (char *)jstr(it, "comment", "");
		px_users_add(users, &u);
	}
	px_users_sort(users);
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
	struct px_families fam = { 0 };
	struct px_names prot = { 0 };
	const cJSON *rt, *it;
	struct plan plan = { 0 };
	long owned[256];
	sk_buf b;
	cJSON *cur;
	char *text;

	snprintf(cfgpath, sizeof(cfgpath), "%s/config.cfg", dir);
	if (sync_config_load(&cfg, 3, argv, err, sizeof(err)) != OPTS_OK)
		fail_msg("%s: %s", cfgpath, err);
	nkv = load_kv(dir, &kv);
	layout_build(&cfg.layout, kv, nkv, &lr);

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
	cJSON_ArrayForEach(it, cJSON_GetObjectItem(cur, "protected")) px_names_add(&prot, it->valuestring);
	px_names_sort(&prot);
	memset(&po, 0, sizeof(po));
	po.nowned = layout_owned_hostgroups(&cfg.layout, owned, SK_ARRAY_LEN(owned));
	if (!opt_flag(&cfg.o, "allow-empty-writer")) /* the never-empty rule, as the agent applies it */
		layout_keep_writers(&cfg.layout, owned, po.nowned, &lr.servers, &have_s);
	po.owned_hostgroups = owned;
	po.user_tag = cfg.layout.user_tag;
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
	if (*cfg.layout.users_prefix) {
		in.want_users = &lr.users;
		in.have_users = &have_u;
		in.runtime_users = rt ? &rt_u : &have_u;
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

	plan_free(&plan);
	free(drains);
	free(fam.v);
	px_names_free(&prot);
	px_servers_free(&rt_s);
	px_users_free(&rt_u);
	cJSON_Delete(cur);
	px_servers_free(&have_s);
	px_users_free(&have_u);
	layout_result_free(&lr);
	for (size_t i = 0; i < nkv; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
	sync_config_free(&cfg);
}

int main(void)
{
	char dir[1024];
	struct dirent **ents = NULL;
	struct CMUnitTest *tests;
	char **paths;
	size_t n = 0;
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
	rc = _cmocka_run_group_tests("sync", tests, n, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free(paths[i]);
	free(paths);
	free(tests);
	return rc;
}
