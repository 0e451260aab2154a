/* proxysql_check.c: proxysql-check, liveness and readiness probes for a ProxySQL container. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "probe.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("ProxySQL's admin interface", "127.0.0.1", "ProxySQL admin address (admin users may only log in locally).",
			   "6032", "admin", NULL, "PROXYSQL_ADMIN_PASSWORD", NULL),
	{"liveness", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Alive when the admin interface answers within the deadline.", 0},
	{"readiness", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Ready when every --writer-hostgroup has an ONLINE server in runtime_mysql_servers.", 0},
	{"writer-hostgroup", 'w', OPT_STRING, "ID[,ID...]", "0", "PROXYSQL_WRITER_HOSTGROUPS", 0, 0, NULL,
	 "Hostgroups that must each have an ONLINE server for --readiness.", 0},
	{"sync-readyz", 0, OPT_STRING, "URL", NULL, NULL, 0, 0, NULL,
	 "With --readiness: also require this proxysql-sync /readyz URL to answer 200.", 0},
	{"timeout", 't', OPT_NUMBER, "SECONDS", "2", NULL, 0.05, 3600, NULL, "One deadline for the whole check.", 0},
};
/* clang-format on */

/* Parse "10,20" into ids; returns the count or -1. */
static int parse_hostgroups(const char *s, long *ids, int max)
{
	char buf[256], *save = NULL, *tok;
	int n = 0;

	if (!sk_strlcpy(buf, s, sizeof(buf)))
		return -1;
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		if (n == max || !sk_parse_long(tok, 0, 2147483647L, &ids[n]))
			return -1;
		n++;
	}
	return n > 0 ? n : -1;
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
	(void)p;
	(void)ctx;
	return size * n;
}

/* GET url within the deadline; returns the HTTP status or -1 with why set. */
static long http_status(const char *url, const deadline_t *dl, char *why, size_t len)
{
	CURL *c = curl_easy_init();
	long status = -1;
	CURLcode rc;

	if (!c) {
		sk_fmt(why, len, "cannot start libcurl");
		return -1;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)deadline_left_ms(dl));
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else
		sk_fmt(why, len, "%s", curl_easy_strerror(rc));
	curl_easy_cleanup(c);
	return status;
}

int main(int argc, char **argv)
{
	struct opts o = {
		.prog = "proxysql-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "--liveness|--readiness [OPTION]...",
		.summary =
			"Probe a ProxySQL instance through its admin interface: --liveness (the admin answers) or\n"
			"--readiness (an ONLINE server in each writer hostgroup, and optionally proxysql-sync ready).",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
	};
	struct probe_conn pc;
	struct db db = { 0 };
	struct db_err e;
	MYSQL_RES *res = NULL;
	MYSQL_ROW row;
	long ids[32];
	int nids = 0, rc;
	char err[512], sql[1024], msg[1024];
	int64_t started = deadline_now_us();
	long budget_ms;
	deadline_t dl;
	bool json, ready;
	const char *probe;

	log_setup(argv[0], LOG_TEXT, LOG_WARN, stderr);
	if ((rc = opts_parse_main(&o, argc, argv)) >= 0)
		return rc;
	ready = opt_flag(&o, "readiness");
	if (opt_flag(&o, "liveness") == ready) {
		fprintf(stderr, "proxysql-check: give exactly one of --liveness and --readiness\n");
		opts_free(&o);
		return 2;
	}
	if (ready && (nids = parse_hostgroups(opt_str(&o, "writer-hostgroup"), ids, 32)) < 0) {
		fprintf(stderr, "proxysql-check: %s: '%s' is not a list of hostgroup ids (like 10,20)\n",
			opt_source(&o, "writer-hostgroup")[0] ? opt_source(&o, "writer-hostgroup")
							      : "--writer-hostgroup",
			opt_str(&o, "writer-hostgroup"));
		opts_free(&o);
		return 2;
	}
	if (probe_conn_setup(&o, &pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "proxysql-check: %s\n", err);
		opts_free(&o);
		return 2;
	}
	json = opt_flag(&o, "json");
	probe = ready ? "proxysql-readiness" : "proxysql-liveness";
	budget_ms = (long)(opt_num(&o, "timeout") * 1000);
	dl = deadline_in_ms(budget_ms);

	if (db_connect(&db, &pc.t, &dl, &e) < 0 || db_query(&db, "SELECT 1", &dl, &res, &e) < 0) {
		rc = probe_report_db_error(probe, ready ? "not ready" : "not alive", json, &e, &pc, budget_ms,
					   "--timeout", stdout, started);
		goto out;
	}
	if (res)
		mysql_free_result(res);
	res = NULL;
	if (!ready) {
		rc = probe_report(probe, json, true, "ok", "alive: admin interface answers", stdout, started);
		goto out;
	}
	for (int i = 0; i < nids; i++) {
		long online = 0;

		snprintf(sql, sizeof(sql),
			 "SELECT COUNT(*) FROM runtime_mysql_servers WHERE hostgroup_id=%ld AND status='ONLINE'",
			 ids[i]);
		if (db_query(&db, sql, &dl, &res, &e) < 0) {
			rc = probe_report_db_error(probe, "not ready", json, &e, &pc, budget_ms, "--timeout", stdout,
						   started);
			goto out;
		}
		row = res ? mysql_fetch_row(res) : NULL;
		if (!row || !row[0] || !sk_parse_long(row[0], 0, 1L << 40, &online))
			online = 0;
		mysql_free_result(res);
		res = NULL;
		if (online == 0) {
			snprintf(msg, sizeof(msg), "not ready: no ONLINE server in writer hostgroup %ld", ids[i]);
			rc = probe_report(probe, json, false, "no_writer", msg, stdout, started);
			goto out;
		}
	}
	if (opt_str(&o, "sync-readyz")) {
		char why[256] = "";
		long status = http_status(opt_str(&o, "sync-readyz"), &dl, why, sizeof(why));

		if (status != 200) {
			if (status < 0)
				snprintf(msg, sizeof(msg), "not ready: proxysql-sync %s: %s",
					 opt_str(&o, "sync-readyz"), why);
			else
				snprintf(msg, sizeof(msg), "not ready: proxysql-sync %s answered %ld",
					 opt_str(&o, "sync-readyz"), status);
			rc = probe_report(probe, json, false, "sync_not_ready", msg, stdout, started);
			goto out;
		}
	}
	snprintf(msg, sizeof(msg), "ready: every writer hostgroup (%s) has an ONLINE server%s",
		 opt_str(&o, "writer-hostgroup"), opt_str(&o, "sync-readyz") ? ", proxysql-sync ready" : "");
	rc = probe_report(probe, json, true, "ok", msg, stdout, started);
out:
	db_close(&db);
	probe_conn_free(&pc);
	opts_free(&o);
	return rc;
}
