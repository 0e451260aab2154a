/* haproxy_check.c: haproxy-check, drop-in for check_pxc.sh as an HAProxy external-check command. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "galera.h"
#include "log.h"
#include "probe_main.h"
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
	v = secret_read_setting(path, why, sizeof(why));
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

struct haproxy_settings {
	struct probe_settings p;
	struct galera_rules rules;
	long nodes; /* the available-nodes file's count (1 when absent) */
	bool verbose;
	const char *backend;
};

/* HAProxy passes <proxy_addr> <proxy_port> <server_addr> <server_port>; the server address is the
 * node to check (the port is the admin port, 33062, as in check_pxc.sh). */
static int host_settings_load(struct opts *o, char *err, size_t errlen)
{
	if (opt_given(o, "host") || opt_given(o, "socket"))
		return 0;
	if (o->nargs < 3 || !o->args[2][0])
		return sk_err(err, errlen,
			      "no server address: expected PROXY_ADDR PROXY_PORT SERVER_ADDR "
			      "[SERVER_PORT] (HAProxy external-check) or --host");
	return opt_set(o, "host", o->args[2], "argument 3", err, errlen);
}

/* A boolean setting of the operator's: its file in the env secret directory and the option that wins. */
struct file_flag {
	const char *file; /* "OK_IF_DONOR" */
	const char *option; /* "ok-if-donor" */
};

/* One boolean of the env secret directory, unless its option is given. */
static int bool_setting_load(const struct opts *o, const char *dir, const struct file_flag *f, bool *out, char *err,
			     size_t errlen)
{
	const char *file = f->file, *option = f->option;
	char setting[64];

	if (read_setting(dir, file, setting, sizeof(setting), err, errlen) < 0)
		return -1;
	if (setting[0] && !sk_parse_bool(setting, out))
		return sk_err(err, errlen, "%s/%s: '%.20s' is not 0 or 1", dir, file, setting);
	if (opt_given(o, option))
		*out = opt_flag(o, option);
	return 0;
}

/* The deadline: --timeout, else the HA_CONNECTION_TIMEOUT file, else 10 s. */
static int timeout_settings_load(const struct opts *o, const char *dir, long *budget_ms, char *err, size_t errlen)
{
	char setting[64];
	double t;

	*budget_ms = 10000;
	if (read_setting(dir, "HA_CONNECTION_TIMEOUT", setting, sizeof(setting), err, errlen) < 0)
		return -1;
	if (setting[0] && !opt_given(o, "timeout")) {
		if (!sk_parse_double(setting, 0.05, 3600, &t))
			return sk_err(err, errlen,
				      "%s/HA_CONNECTION_TIMEOUT: '%.20s' is not a number from 0.05 to 3600", dir,
				      setting);
		*budget_ms = (long)(t * 1000);
	}
	if (opt_given(o, "timeout"))
		*budget_ms = (long)(opt_num(o, "timeout") * 1000);
	return 0;
}

/* The number of nodes in the backend, from the available-nodes file (1 when absent). */
static int nodes_load(const char *path, long *nodes, char *err, size_t errlen)
{
	char *text;

	*nodes = 1;
	if (!probe_file_exists(path))
		return 0;
	text = secret_read_setting(path, err, errlen);
	if (!text || !sk_parse_long(sk_trim(text), 0, 100000, nodes)) {
		if (text)
			sk_fmt(err, errlen, "%s: '%.20s' is not a node count", path, text);
		free(text);
		return -1;
	}
	free(text);
	return 0;
}

/* The operator's settings come as files; explicit options win. */
static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct haproxy_settings *s = settings;
	const char *dir = opt_str(o, "env-secret-dir");
	bool ok_if_donor = false;

	s->verbose = true;
	if (host_settings_load(o, err, errlen) < 0 || timeout_settings_load(o, dir, &s->p.budget_ms, err, errlen) < 0 ||
	    bool_setting_load(o, dir, &(struct file_flag){ "OK_IF_DONOR", "ok-if-donor" }, &ok_if_donor, err, errlen) <
		    0 ||
	    bool_setting_load(o, dir, &(struct file_flag){ "VERBOSE", "verbose" }, &s->verbose, err, errlen) < 0 ||
	    nodes_load(opt_str(o, "available-nodes-file"), &s->nodes, err, errlen) < 0)
		return -1;
	probe_settings_load(o, &s->p);
	s->p.timeout_setting = "--timeout or HA_CONNECTION_TIMEOUT";
	s->rules = (struct galera_rules){ .need_primary = true,
					  .need_synced = true,
					  .readonly_ok = true,
					  .need_maint_disabled = true,
					  .need_not_rejecting = true,
					  .donor_ok = ok_if_donor,
					  .available_nodes = (int)(s->nodes < 1 ? 1 : s->nodes) };
	s->backend = opt_str(o, "backend") ? opt_str(o, "backend") : "";
	return 0;
}

static int fetch(const void *settings, const struct probe_conn *pc, const deadline_t *dl, struct probe_fetch *f,
		 struct db_err *e)
{
	(void)settings;
	return probe_fetch_galera(pc, dl, &f->status, &f->vars, e);
}

/* The verdict's message is the detail of the log line: the rule that failed, or why it could not be told. */
static void judge(void *settings, const struct probe_outcome *o, struct probe_verdict *v)
{
	const struct haproxy_settings *s = settings;
	struct galera_verdict gv;

	if (!o->fetched) {
		v->up = false;
		v->reason = o->e->reason == DB_TIMEOUT ? "timeout" : db_reason_str(o->e->reason);
		probe_describe_error(o->e, o->pc, o->budget_ms, o->setting, v->msg, sizeof(v->msg));
		return;
	}
	galera_judge(&o->f->status, &o->f->vars, &s->rules, &gv);
	v->up = gv.up;
	v->reason = galera_reason_str(gv.reason);
	sk_strlcpy(v->msg, gv.detail, sizeof(v->msg));
}

/* check_pxc.sh's two JSON lines on stdout: the values used, then the verdict (only failures
 * unless verbose). */
static int print(const void *settings, const struct probe_conn *pc, const struct probe_fetch *f,
		 const struct probe_verdict *v, int64_t started)
{
	const struct haproxy_settings *s = settings;
	const char *node = pc->host ? pc->host : pc->what;
	char status_line[1024], msg[1200];

	(void)started;
	snprintf(status_line, sizeof(status_line),
		 "The following values are used for PXC node %s in backend %s: wsrep_local_state is %s; "
		 "pxc_maint_mod is %s; wsrep_cluster_status is %s; wsrep_reject_queries is %s; "
		 "wsrep_sst_donor_rejects_queries is %s; %ld nodes are available",
		 node, s->backend, val(&f->status, "wsrep_local_state"), val(&f->vars, "pxc_maint_mode"),
		 val(&f->status, "wsrep_cluster_status"), val(&f->vars, "wsrep_reject_queries"),
		 val(&f->vars, "wsrep_sst_donor_rejects_queries"), s->nodes);
	if (v->up)
		snprintf(msg, sizeof(msg), "PXC node %s for backend %s is ok", node, s->backend);
	else
		snprintf(msg, sizeof(msg), "PXC node %s for backend %s is not ok: %s", node, s->backend, v->msg);
	log_redact(msg);
	if (!v->up || s->verbose) {
		json_log(node, pc->t.port, status_line);
		json_log(node, pc->t.port, msg);
	}
	fflush(stdout);
	return v->up ? 0 : 1;
}

static const struct probe_kind haproxy_kind = {
	.name = "haproxy",
	.opts = {
		.prog = "haproxy-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]... PROXY_ADDR PROXY_PORT SERVER_ADDR [SERVER_PORT]",
		.summary =
			"HAProxy external-check for a PXC/Galera node (check_pxc.sh): up when Primary, Synced (or a\n"
			"donor that is the last node or allowed), pxc_maint_mode=DISABLED, wsrep_reject_queries=NONE\n"
			"and the donor does not reject queries. Logs JSON lines on stdout; exit 0 up, 1 down.\n"
			"SERVER_PORT is accepted and ignored, as check_pxc.sh does: mysqld's port is --port.\n"
			"\"N nodes are available\" in the first line is the backend's node count (AVAILABLE_NODES),\n"
			"not how many are up: check_pxc.sh's words, kept for log parsers; the verdict line says why.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 4,
	},
	.log_level = LOG_WARN,
	.settings_size = sizeof(struct haproxy_settings),
	.settings_load = settings_load,
	.fetch = fetch,
	.judge = judge,
	.print = print,
};

int main(int argc, char **argv)
{
	return probe_main(&haproxy_kind, argc, argv);
}
