/* fuzz_patroni.c: libFuzzer harness for the PostgreSQL side's layout: Patroni's keys and pgsql users
 * (layout_build on the pg_layout of a fixed configuration), then the plan for ProxySQL's pgsql tables.
 *
 * Input: records "suffix \xff value \xfe", repeated. A suffix whose first byte is 'u' is a user
 * (pgsql/users/<rest>), any other is a key of the Patroni cluster (service/pgdemo/<rest>); the
 * fuzzer finds "leader", "status" and "members/<name>" by itself from the corpus. The raw input
 * also goes through patroni_conn_url and model_scram_secret_ok on its own.
 *
 * Checked on every input:
 *   - every desired server is in hostgroup 20 or 21, has a valid host, a port from 1 to 65535 and
 *     a comment "pgdemo/<member>"; hostgroup 20 has at most one server (one leader);
 *   - every desired user passes the model's validation again, and a password that starts with
 *     "SCRAM-" is a valid SCRAM secret;
 *   - every statement of the plan names pgsql_servers or pgsql_users (never a mysql_ table) or is a
 *     LOAD / SAVE PGSQL, and carries no ';'. */
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
#include "patroni.h"
#include "plan.h"

#define MAX_RECORDS 64

static struct sync_config cfg;

static const char config_text[] =
	"admin-addr = \"127.0.0.1:6032\"\n"
	"pgsql-users-prefix = \"pgsql/users\"\n"
	"patroni = ( { scope = \"pgdemo\"; writer_hostgroup = 20; reader_hostgroup = 21; max_lag_bytes = 1000; } );\n";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_sync_config("fuzz_patroni", config_text, &cfg);
	return 0;
}

/* The records of the input as KV pairs (strings allocated). */
static size_t records(const uint8_t *data, size_t size, struct kv_pair *kv)
{
	size_t n = 0, at = 0;

	while (at < size && n < MAX_RECORDS) {
		const uint8_t *sep = memchr(data + at, 0xff, size - at), *end;
		size_t klen, vlen;
		const char *prefix;

		if (!sep)
			break;
		end = memchr(sep + 1, 0xfe, size - (size_t)(sep + 1 - data));
		if (!end)
			end = data + size;
		klen = (size_t)(sep - (data + at));
		vlen = (size_t)(end - (sep + 1));
		prefix = klen && data[at] == 'u' ? "pgsql/users/" : "service/pgdemo/";
		kv[n].key = malloc(strlen(prefix) + klen + 1);
		memcpy(kv[n].key, prefix, strlen(prefix));
		memcpy(kv[n].key + strlen(prefix), data + at + (klen && data[at] == 'u'),
		       klen - (klen && data[at] == 'u'));
		kv[n].key[strlen(prefix) + klen - (klen && data[at] == 'u')] = '\0';
		kv[n].value = malloc(vlen + 1);
		memcpy(kv[n].value, sep + 1, vlen);
		kv[n].value[vlen] = '\0';
		kv[n].len = vlen;
		n++;
		at = (size_t)(end - data) + 1;
	}
	return n;
}

static void check_rows(const struct layout_result *lr)
{
	size_t writers = 0;

	for (size_t i = 0; i < lr->servers.n; i++) {
		const struct px_server *s = &lr->servers.v[i];

		if ((s->hostgroup != 20 && s->hostgroup != 21) || model_check_host(s->host) || s->port < 1 ||
		    s->port > 65535 || strncmp(s->comment, "pgdemo/", 7) != 0)
			FAIL("server %ld %s:%ld '%s'", s->hostgroup, s->host, s->port, s->comment);
		writers += s->hostgroup == 20;
	}
	if (writers > 1)
		FAIL("%zu writers", writers);
	for (size_t i = 0; i < lr->users.n; i++) {
		const struct px_user *u = &lr->users.v[i];

		if (model_check_username(u->username) || model_check_password(u->password) || u->default_schema ||
		    (strncmp(u->password, "SCRAM-", 6) == 0 && !model_scram_secret_ok(u->password)))
			FAIL("user %s", u->username);
	}
}

/* `sql` outside its single-quoted literals (a doubled quote stays inside), into `out`. */
static void outside_literals(const char *sql, char *out, size_t len)
{
	size_t k = 0;
	int quoted = 0;

	for (const char *p = sql; *p && k + 1 < len; p++) {
		if (*p == '\'') {
			if (quoted && p[1] == '\'') {
				p++;
				continue;
			}
			quoted = !quoted;
			continue;
		}
		if (!quoted)
			out[k++] = *p;
	}
	out[k] = '\0';
}

static void check_plan(const struct layout_result *lr)
{
	static const long owned[] = { 20, 21 };
	struct px_servers have_s = { 0 };
	struct px_users have_u = { 0 };
	struct plan_options po = { .module = &px_pgsql,
				   .owned_hostgroups = owned,
				   .nowned = 2,
				   .user_tag = cfg.pg_layout.user_tag,
				   .save_to_disk = true,
				   .keep_servers = &lr->keep_servers,
				   .keep_users = &lr->keep_users };
	struct plan_inputs in = {
		.want_servers = &lr->servers, .have_servers = &have_s, .want_users = &lr->users, .have_users = &have_u
	};
	struct plan p;

	plan_build(&in, &po, &p);
	for (size_t i = 0; i < p.n; i++) {
		const char *sql = p.steps[i].sql;
		static char bare[1 << 20];

		outside_literals(sql, bare, sizeof(bare));
		if (strstr(bare, "mysql_") || strchr(bare, ';') ||
		    (strncmp(sql, "INSERT INTO pgsql_servers ", 26) != 0 &&
		     strncmp(sql, "INSERT INTO pgsql_users ", 24) != 0 && strncmp(sql, "LOAD PGSQL ", 11) != 0 &&
		     strncmp(sql, "SAVE PGSQL ", 11) != 0))
			FAIL("statement %.200s", sql);
	}
	plan_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kv_pair kv[MAX_RECORDS];
	struct layout_result lr;
	char text[512], host[MODEL_HOST_MAX + 1];
	size_t n = records(data, size, kv);
	long port;

	layout_build(&cfg.pg_layout, kv, n, &lr);
	check_rows(&lr);
	check_plan(&lr);
	layout_result_free(&lr);
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	if (size < sizeof(text)) {
		memcpy(text, data, size);
		text[size] = '\0';
		if (!patroni_conn_url(text, host, sizeof(host), &port) && (port < 1 || port > 65535 || !*host))
			FAIL("conn_url %s gave %s:%ld", text, host, port);
		(void)model_scram_secret_ok(text);
	}
	return 0;
}
