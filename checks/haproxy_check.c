/* haproxy_check.c: haproxy-check, drop-in for check_pxc.sh as an HAProxy external-check command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galera.h"
#include "log.h"
#include "probe.h"
#include "proc.h"
#include "secret.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", NULL, "mysqld address [default: the third argument, HAProxy's server address]",
			   "33062", "monitor", "/etc/mysql/mysql-users-secret/monitor", "MONITOR_PASSWORD", NULL),
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL,
	 "One deadline for the whole check [default: the HA_CONNECTION_TIMEOUT file, else 10].", 0},
	{"env-secret-dir", 0, OPT_STRING, "DIR", "/etc/mysql/haproxy-env-secret", NULL, 0, 0, NULL,
	 "Directory of the operator's files HA_CONNECTION_TIMEOUT, OK_IF_DONOR and VERBOSE.", 0},
	{"ok-if-donor", 0, OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "A donor counts as up even when other nodes are available [default: the OK_IF_DONOR file, else 0].", 0},
	{"verbose", 'v', OPT_FLAG, NULL, NULL, NULL, 0, 0, NULL,
	 "Log success lines too [default: the VERBOSE file, else 1]; failures are always logged.", 0},
	{"available-nodes-file", 0, OPT_STRING, "PATH", "/etc/haproxy/pxc/AVAILABLE_NODES", NULL, 0, 0, NULL,
	 "Number of PXC nodes in the backend; a donor is up when it is the only one (default 1 when absent).", 0},
	{"backend", 0, OPT_STRING, "NAME", NULL, "HAPROXY_PROXY_NAME", 0, 0, NULL, "Backend name for the log lines.", 0},
};
/* clang-format on */

/* Read a one-value file of the operator's env secret directory; "" when absent. */
static int read_setting(const char *dir, const char *name, char *buf, size_t len, char *err, size_t errlen)
{
	char path[1024], why[300];
	char *v;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!probe_file_exists(path))
		return 0;
	v = secret_read_file(path, why, sizeof(why));
	if (!v)
		return sk_err(err, errlen, "%s", why);
	sk_strlcpy(buf, v, len);
	sk_trim(buf);
	free(v);
	return 0;
}

static void json_log(const char *ip, unsigned port, const char *message)
{
	char stamp[64], ms[24];
	struct timespec ts;
	struct tm tm;
	sk_buf b;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%d/%b/%Y:%H:%M:%S", &tm);
	snprintf(ms, sizeof(ms), ".%03ld", ts.tv_nsec / 1000000);
	sk_buf_init(&b, 8192);
	if (sk_buf_addf(&b, "{\"time\":\"%s%s\", \"backend_source_ip\": ", stamp, ms) && sk_buf_add_json_str(&b, ip) &&
	    sk_buf_addf(&b, ", \"backend_source_port\": \"%u\", \"message\": ", port) &&
	    sk_buf_add_json_str(&b, message) && sk_buf_add(&b, "}\n", 2))
		fputs(b.data, stdout);
	sk_buf_free(&b);
}

static const char *val(const struct statusmap *m, const char *name)
{
	const char *v = statusmap_get(m, name);

	return v ? v : "";
}

int main(int argc, char **argv)
{
	struct opts o = {
		.prog = "haproxy-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]... PROXY_ADDR PROXY_PORT SERVER_ADDR [SERVER_PORT]",
		.summary =
			"HAProxy external-check for a PXC/Galera node (check_pxc.sh): up when Primary, Synced (or a\n"
			"donor that is the last node or allowed), pxc_maint_mode=DISABLED, wsrep_reject_queries=NONE\n"
			"and the donor does not reject queries. Logs JSON lines on stdout; exit 0 up, 1 down.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 4,
	};
	struct galera_rules rules = { .need_primary = true,
				      .need_synced = true,
				      .readonly_ok = true,
				      .need_maint_disabled = true,
				      .need_not_rejecting = true };
	struct statusmap status = { 0 }, vars = { 0 };
	struct galera_verdict v;
	struct probe_conn pc;
	struct db_err e;
	char err[512], setting[64], status_line[1024], msg[1200], detail[600];
	const char *dir, *backend;
	long nodes = 1, budget_ms = 10000;
	bool verbose = true, up;
	deadline_t dl;
	bool ok_if_donor = false;
	int rc;

	proc_no_dumps(); /* before any password is read */
	log_setup(argv[0], LOG_TEXT, LOG_WARN, stderr);
	if ((rc = opts_parse_main(&o, argc, argv)) >= 0)
		return rc;
	/* HAProxy passes <proxy_addr> <proxy_port> <server_addr> <server_port>; the server address
	 * is the node to check (the port is the admin port, 33062, as in check_pxc.sh). */
	if (!opt_given(&o, "host") && !opt_given(&o, "socket")) {
		if (o.nargs < 3 || !o.args[2][0]) {
			fprintf(stderr, "haproxy-check: no server address: expected PROXY_ADDR PROXY_PORT SERVER_ADDR "
					"[SERVER_PORT] (HAProxy external-check) or --host\n");
			opts_free(&o);
			return 2;
		}
		if (opt_set(&o, "host", o.args[2], "argument 3", err, sizeof(err)) < 0) {
			fprintf(stderr, "haproxy-check: %s\n", err);
			opts_free(&o);
			return 2;
		}
	}

	/* The operator's settings come as files; explicit options win. */
	dir = opt_str(&o, "env-secret-dir");
	if (read_setting(dir, "HA_CONNECTION_TIMEOUT", setting, sizeof(setting), err, sizeof(err)) < 0)
		goto config_error;
	if (setting[0] && !opt_given(&o, "timeout")) {
		double t;

		if (!sk_parse_double(setting, 0.05, 3600, &t)) {
			sk_fmt(err, sizeof(err), "%s/HA_CONNECTION_TIMEOUT: '%.20s' is not a number from 0.05 to 3600",
			       dir, setting);
			goto config_error;
		}
		budget_ms = (long)(t * 1000);
	}
	if (opt_given(&o, "timeout"))
		budget_ms = (long)(opt_num(&o, "timeout") * 1000);
	if (read_setting(dir, "OK_IF_DONOR", setting, sizeof(setting), err, sizeof(err)) < 0)
		goto config_error;
	if (setting[0] && !sk_parse_bool(setting, &ok_if_donor)) {
		sk_fmt(err, sizeof(err), "%s/OK_IF_DONOR: '%.20s' is not 0 or 1", dir, setting);
		goto config_error;
	}
	if (opt_given(&o, "ok-if-donor"))
		ok_if_donor = opt_flag(&o, "ok-if-donor");
	if (read_setting(dir, "VERBOSE", setting, sizeof(setting), err, sizeof(err)) < 0)
		goto config_error;
	if (setting[0] && !sk_parse_bool(setting, &verbose)) {
		sk_fmt(err, sizeof(err), "%s/VERBOSE: '%.20s' is not 0 or 1", dir, setting);
		goto config_error;
	}
	if (opt_given(&o, "verbose"))
		verbose = opt_flag(&o, "verbose");
	{
		char *text = NULL;

		if (probe_file_exists(opt_str(&o, "available-nodes-file"))) {
			text = secret_read_file(opt_str(&o, "available-nodes-file"), err, sizeof(err));
			if (!text || !sk_parse_long(sk_trim(text), 0, 100000, &nodes)) {
				if (text)
					sk_fmt(err, sizeof(err), "%s: '%.20s' is not a node count",
					       opt_str(&o, "available-nodes-file"), text);
				free(text);
				goto config_error;
			}
			free(text);
		}
	}
	rules.donor_ok = ok_if_donor;
	rules.available_nodes = (int)(nodes < 1 ? 1 : nodes);
	backend = opt_str(&o, "backend") ? opt_str(&o, "backend") : "";

	if (probe_conn_setup(&o, &pc, err, sizeof(err)) < 0)
		goto config_error;
	dl = deadline_in_ms(budget_ms);
	if (probe_fetch_galera(&pc, &dl, &status, &vars, &e) == 0) {
		galera_judge(&status, &vars, &rules, &v);
		up = v.up;
		sk_strlcpy(detail, v.detail, sizeof(detail));
	} else {
		up = false;
		probe_describe_error(&e, &pc, budget_ms, "--timeout or HA_CONNECTION_TIMEOUT", detail, sizeof(detail));
	}
	snprintf(status_line, sizeof(status_line),
		 "The following values are used for PXC node %s in backend %s: wsrep_local_state is %s; "
		 "pxc_maint_mod is %s; wsrep_cluster_status is %s; wsrep_reject_queries is %s; "
		 "wsrep_sst_donor_rejects_queries is %s; %ld nodes are available",
		 pc.host ? pc.host : pc.what, backend, val(&status, "wsrep_local_state"), val(&vars, "pxc_maint_mode"),
		 val(&status, "wsrep_cluster_status"), val(&vars, "wsrep_reject_queries"),
		 val(&vars, "wsrep_sst_donor_rejects_queries"), nodes);
	if (up)
		snprintf(msg, sizeof(msg), "PXC node %s for backend %s is ok", pc.host ? pc.host : pc.what, backend);
	else
		snprintf(msg, sizeof(msg), "PXC node %s for backend %s is not ok: %s", pc.host ? pc.host : pc.what,
			 backend, detail);
	log_redact(msg);
	if (!up || verbose) {
		json_log(pc.host ? pc.host : pc.what, pc.t.port, status_line);
		json_log(pc.host ? pc.host : pc.what, pc.t.port, msg);
	}
	fflush(stdout);
	statusmap_free(&status);
	statusmap_free(&vars);
	probe_conn_free(&pc);
	opts_free(&o);
	return up ? 0 : 1;

config_error:
	fprintf(stderr, "haproxy-check: %s\n", err);
	opts_free(&o);
	return 2;
}
