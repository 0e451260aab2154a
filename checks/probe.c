/* probe.c: the shared steps of a MySQL probe: credentials, address, deadline policy, reporting. */
#include "probe.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "mycnf.h"
#include "secret.h"
#include "sst_proc.h"

void probe_conn_settings_load(const struct opts *o, struct probe_conn_settings *cs)
{
	memset(cs, 0, sizeof(*cs));
	cs->host = opt_str(o, "host");
	cs->host_given = opt_given(o, "host");
	cs->port = opt_int(o, "port");
	cs->port_given = opt_given(o, "port");
	cs->socket = opt_str(o, "socket");
	cs->socket_given = opt_given(o, "socket");
	cs->user = opt_str(o, "user");
	cs->user_given = opt_given(o, "user");
	cs->password = opt_str(o, "password");
	cs->password_file = opt_str(o, "password-file");
	cs->password_file_given = opt_given(o, "password-file");
	cs->defaults_extra_file = opt_str(o, "defaults-extra-file");
	/* Only a command-line flag insists on the file; from the environment (the scripts'
	 * DEFAULTS_EXTRA_FILE), a config file or the positional form it is used when
	 * readable and skipped otherwise, as the scripts' `[ -r ]` test does. */
	cs->defaults_extra_file_explicit =
		opt_given(o, "defaults-extra-file") && opt_source(o, "defaults-extra-file")[0] == '-';
	cs->tls = opt_flag(o, "tls");
	cs->tls_ca = opt_str(o, "tls-ca");
	cs->tls_cert = opt_str(o, "tls-cert");
	cs->tls_key = opt_str(o, "tls-key");
	cs->tls_verify = opt_flag(o, "tls-verify");
}

/* The option file applies only when readable, as the scripts did with [ -r ]. An explicit
 * file that is unreadable or malformed is a configuration error. */
static int read_option_file(const struct probe_conn_settings *cs, struct mycnf *cnf, char *err, size_t errlen)
{
	const char *dfile = cs->defaults_extra_file;
	char why[300];

	if (!dfile || !*dfile)
		return 0;
	if (access(dfile, R_OK) == 0 || cs->defaults_extra_file_explicit) {
		if (mycnf_read(dfile, NULL, cnf, why, sizeof(why)) < 0) {
			if (cs->defaults_extra_file_explicit || access(dfile, R_OK) == 0)
				return sk_err(err, errlen, "defaults-extra-file %s", why);
		}
	}
	return 0;
}

/* User and password: options over the option file, a password file over both. */
static int pick_credentials(const struct probe_conn_settings *cs, const struct mycnf *cnf, struct probe_conn *pc,
			    char *err, size_t errlen)
{
	const char *pwfile = cs->password_file;
	char why[300];

	if (cs->user_given || !cnf->user)
		pc->user = xstrdup(cs->user ? cs->user : "");
	else
		pc->user = xstrdup(cnf->user);

	if (pwfile && (cs->password_file_given || probe_file_exists(pwfile))) {
		pc->password = secret_read_file(pwfile, why, sizeof(why));
		if (!pc->password)
			return sk_err(err, errlen, "password file %s", why);
	} else if (cnf->password) {
		pc->password = xstrdup(cnf->password);
	} else if (cs->password) {
		pc->password = xstrdup(cs->password);
	} else {
		pc->password = xstrdup("");
	}
	return 0;
}

/* Socket, host and port: given options over the option file, then this node's first address. */
static long pick_address(const struct probe_conn_settings *cs, const struct mycnf *cnf, struct probe_conn *pc)
{
	if (cs->socket_given || (!cs->host_given && cnf->socket && !cs->host))
		pc->socket = xstrdup(cs->socket_given ? cs->socket : cnf->socket);
	if (cs->host && (cs->host_given || !cnf->host)) {
		pc->host = xstrdup(cs->host);
	} else if (cnf->host) {
		pc->host = xstrdup(cnf->host);
	} else if (!pc->socket) {
		char ip[64];

		probe_node_ip(ip, sizeof(ip));
		pc->host = xstrdup(ip);
	}
	return !cs->port_given && cnf->port ? cnf->port : cs->port;
}

int probe_conn_setup(const struct probe_conn_settings *cs, struct probe_conn *pc, char *err, size_t errlen)
{
	struct mycnf cnf = { 0 };
	long port;

	memset(pc, 0, sizeof(*pc));
	if (read_option_file(cs, &cnf, err, errlen) < 0)
		return -1;
	if (pick_credentials(cs, &cnf, pc, err, errlen) < 0) {
		mycnf_free(&cnf);
		probe_conn_free(pc);
		return -1;
	}
	port = pick_address(cs, &cnf, pc);
	mycnf_free(&cnf);

	pc->t.host = pc->host;
	pc->t.port = (unsigned)port;
	pc->t.port_explicit = cs->port_given; /* "localhost" with --port: TCP */
	pc->t.socket = pc->socket;
	pc->t.user = pc->user;
	pc->t.password = pc->password;
	pc->t.tls = cs->tls;
	pc->t.tls_ca = cs->tls_ca;
	pc->t.tls_cert = cs->tls_cert;
	pc->t.tls_key = cs->tls_key;
	pc->t.tls_verify = cs->tls_verify;
	if (pc->socket && !db_route(&pc->t))
		snprintf(pc->what, sizeof(pc->what), "%s", pc->socket);
	else if (pc->host && strchr(pc->host, ':'))
		snprintf(pc->what, sizeof(pc->what), "[%s]:%ld", pc->host, port);
	else
		snprintf(pc->what, sizeof(pc->what), "%s:%ld", pc->host ? pc->host : "?", port);
	pc->t.what = pc->what;
	return 0;
}

bool probe_tls_unverified(const struct probe_conn *pc, char *buf, size_t len)
{
	if (!pc->t.tls || pc->t.tls_verify)
		return false;
	sk_fmt(buf, len,
	       "warning: TLS to %s without certificate verification (--tls-verify=0): whoever answers there "
	       "can read the password and forge the answers",
	       pc->what);
	return true;
}

void probe_conn_free(struct probe_conn *pc)
{
	if (pc->password) {
		sk_wipe(pc->password, strlen(pc->password));
		free(pc->password);
	}
	free(pc->user);
	free(pc->host);
	free(pc->socket);
	memset(pc, 0, sizeof(*pc));
}

long probe_k8s_deadline_ms(long k8s_seconds)
{
	long total = k8s_seconds * 1000;
	long margin = total / 5;

	if (margin > 1000)
		margin = 1000;
	if (total - margin < 100)
		return 100;
	return total - margin;
}

void probe_node_ip(char *buf, size_t len)
{
	struct ifaddrs *ifa = NULL, *p;
	char v6[INET6_ADDRSTRLEN] = "";

	sk_strlcpy(buf, "127.0.0.1", len);
	if (getifaddrs(&ifa) < 0)
		return;
	for (p = ifa; p; p = p->ifa_next) {
		if (!p->ifa_addr || (p->ifa_flags & IFF_LOOPBACK) || !(p->ifa_flags & IFF_UP))
			continue;
		if (p->ifa_addr->sa_family == AF_INET) {
			char a[INET_ADDRSTRLEN];

			if (inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, a, sizeof(a))) {
				sk_strlcpy(buf, a, len);
				freeifaddrs(ifa);
				return;
			}
		} else if (p->ifa_addr->sa_family == AF_INET6 && !v6[0]) {
			struct in6_addr *in6 = &((struct sockaddr_in6 *)p->ifa_addr)->sin6_addr;

			if (!IN6_IS_ADDR_LINKLOCAL(in6))
				inet_ntop(AF_INET6, in6, v6, sizeof(v6));
		}
	}
	if (v6[0])
		sk_strlcpy(buf, v6, len);
	freeifaddrs(ifa);
}

bool probe_file_exists(const char *path)
{
	struct stat st;

	return path && *path && stat(path, &st) == 0;
}

void probe_read_state_file(const char *path, char *buf, size_t len)
{
	char *text = NULL, err[256];
	size_t n = 0, k = 0;

	buf[0] = '\0';
	if (!path || !*path || sk_read_file(path, 4096, &text, &n, err, sizeof(err)) < 0)
		return;
	for (size_t i = 0; i < n && k + 1 < len; i++)
		if (text[i] != '\0')
			buf[k++] = text[i];
	buf[k] = '\0';
	sk_trim(buf);
	free(text);
}

int probe_report(const struct probe_out *out, bool up, const char *reason, const char *message)
{
	char line[512];

	sk_strlcpy(line, message, sizeof(line));
	log_redact(line);
	if (out->json) {
		sk_buf b;

		sk_buf_init(&b, 4096);
		if (sk_buf_addf(&b, "{\"probe\":\"%s\",\"up\":%s,\"reason\":", out->probe, up ? "true" : "false") &&
		    sk_buf_add_json_str(&b, reason) && sk_buf_add(&b, ",\"message\":", 11) &&
		    sk_buf_add_json_str(&b, line) &&
		    sk_buf_addf(&b, ",\"elapsed_ms\":%.1f}\n", (double)(deadline_now_us() - out->started_us) / 1000.0))
			fputs(b.data, stdout);
		sk_buf_free(&b);
	} else if (out->text_stream) {
		fprintf(out->text_stream, "%s\n", line);
	}
	fflush(stdout);
	return up ? 0 : 1;
}

#define GALERA_STATUS_SQL                                                                             \
	"SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_local_state','wsrep_local_state_comment'," \
	"'wsrep_cluster_status','wsrep_ready','wsrep_connected','wsrep_cluster_size')"
#define GALERA_VARS_SQL                                                                                      \
	"SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only','pxc_maint_mode','wsrep_reject_queries'," \
	"'wsrep_sst_donor_rejects_queries')"

int probe_galera_connect(struct db *db, const struct probe_conn *pc, const deadline_t *dl, struct db_err *e)
{
	if (db_connect(db, &pc->t, dl, e) < 0)
		return -1;
	/* A DDL or backup must not block the check (wsrep_sync_wait); servers without Galera
	 * do not know the variable (1193), which is fine. */
	if (db_exec(db, "SET SESSION wsrep_sync_wait=0", dl, e) < 0 && e->code != 1193) {
		db_close(db);
		return -1;
	}
	return 0;
}

int probe_galera_read(struct db *db, const deadline_t *dl, struct statusmap *status, struct statusmap *vars,
		      struct db_err *e)
{
	if (db_query_pairs(db, GALERA_STATUS_SQL, dl, status, e) < 0)
		return -1;
	if (vars && db_query_pairs(db, GALERA_VARS_SQL, dl, vars, e) < 0)
		return -1;
	return 0;
}

int probe_fetch_galera(const struct probe_conn *pc, const deadline_t *dl, struct statusmap *status,
		       struct statusmap *vars, struct db_err *e)
{
	struct db db = { 0 };
	int rc;

	if (probe_galera_connect(&db, pc, dl, e) < 0)
		return -1;
	rc = probe_galera_read(&db, dl, status, vars, e);
	db_close(&db);
	return rc;
}

void probe_describe_error(const struct db_err *e, const struct probe_conn *pc, long budget_ms,
			  const char *timeout_setting, char *buf, size_t len)
{
	if (e->reason == DB_TIMEOUT)
		snprintf(buf, len, "timeout after %.1fs %s (%s, %s)", (double)budget_ms / 1000.0,
			 e->msg + (strncmp(e->msg, "timed out ", 10) == 0 ? 10 : 0), pc->what, timeout_setting);
	else
		snprintf(buf, len, "%s (%s): %s", db_reason_str(e->reason), pc->what, e->msg);
}

static void verdict_set(struct probe_verdict *v, bool up, const char *reason, const char *msg)
{
	v->up = up;
	v->reason = reason;
	sk_strlcpy(v->msg, msg, sizeof(v->msg));
}

/* mysqld's processes into the evidence, once. */
static void read_procs(struct probe_sst *s)
{
	if (s->procs_read)
		return;
	sst_gather_procs("/proc", s->datadir, s->pid_file, &s->ev);
	s->procs_read = true;
}

/* The verdict of the whole evidence before asking mysqld, when it decides. */
static bool sst_decides(const struct probe_sst *s, struct probe_verdict *v)
{
	struct sst_verdict sv;

	if (!sst_liveness_before(&s->ev, s->datadir, &s->policy, &sv))
		return false;
	verdict_set(v, sv.up, sv.reason, sv.msg);
	return true;
}

bool probe_liveness_before(struct probe_sst *s, struct probe_verdict *v)
{
	sst_gather_files(s->datadir, s->recovery_file, time(NULL), &s->ev);
	s->procs_read = false;
	if (sst_procs_needed(&s->ev, SST_NOT_ASKED))
		read_procs(s);
	return sst_decides(s, v);
}

void probe_verdict_note(struct probe_verdict *v, const char *note)
{
	if (note && *note)
		sk_fmt(v->msg + strlen(v->msg), sizeof(v->msg) - strlen(v->msg), "; %s", note);
}

bool probe_readiness_bypass(const char *recovery_file, const char *datadir, struct probe_verdict *v, char *ignored,
			    size_t len)
{
	struct sst_evidence ev;

	sst_gather_bypass(datadir, recovery_file, &ev);
	sst_foreign_note(&ev, ignored, len);
	if (!ev.recovery_file && !ev.sleep_forever)
		return false;
	verdict_set(v, true, "bypass", "ready: recovery or sleep-forever file present");
	probe_verdict_note(v, ignored);
	return true;
}

void probe_db_verdict(const char *down_word, const struct db_err *e, const struct probe_conn *pc, long budget_ms,
		      const char *setting, struct probe_verdict *v)
{
	char why[400];

	probe_describe_error(e, pc, budget_ms, setting, why, sizeof(why));
	v->up = false;
	v->reason = e->reason == DB_TIMEOUT ? "timeout" : db_reason_str(e->reason);
	snprintf(v->msg, sizeof(v->msg), "%s: %s", down_word, why);
}

void probe_liveness_judge(const struct probe_outcome *o, const char *state_file, struct probe_sst *s,
			  struct probe_verdict *v)
{
	struct galera_rules rules = { .need_primary = true, .readonly_ok = true };
	struct galera_verdict gv;
	char state[64], note[400];
	bool startup = false;

	if (o->fetched)
		galera_judge(&o->f->status, NULL, &rules, &gv);
	if (o->fetched && gv.up) {
		v->up = true;
		v->reason = "ok";
		snprintf(v->msg, sizeof(v->msg), "alive: %s", gv.detail);
	} else {
		/* mysqld's processes may say alive where mysqld did not (a joiner, --wsrep-recover). */
		if (s && !s->procs_read && sst_procs_needed(&s->ev, SST_ANSWER_FAILED)) {
			read_procs(s);
			if (sst_decides(s, v))
				return;
		}
		/* Whatever failed, a node that is still starting up is not killed (by a state file from a
		 * trusted owner only). */
		state[0] = '\0';
		if (!s || sst_trusted_file(state_file, &s->ev))
			probe_read_state_file(state_file, state, sizeof(state));
		if ((startup = strcmp(state, "startup") == 0))
			verdict_set(v, true, "startup", "MySQL is starting up, not killing it...");
		else if (!o->fetched)
			probe_db_verdict("not alive", o->e, o->pc, o->budget_ms, o->setting, v);
		else {
			v->up = false;
			v->reason = galera_reason_str(gv.reason);
			snprintf(v->msg, sizeof(v->msg), "not alive: %s", gv.detail);
		}
	}
	if (s && !startup && sst_stale_note(&s->ev, &s->policy, note, sizeof(note)))
		probe_verdict_note(v, note);
	if (s && sst_foreign_note(&s->ev, note, sizeof(note)))
		probe_verdict_note(v, note);
}

void probe_settings_load(const struct opts *o, struct probe_settings *p)
{
	probe_conn_settings_load(o, &p->conn);
	p->json = opt_flag(o, "json");
}

void probe_k8s_settings_load(const struct opts *o, const char *env, struct probe_settings *p)
{
	bool given = opt_given(o, "timeout");

	p->budget_ms = given ? (long)(opt_num(o, "timeout") * 1000) : probe_k8s_deadline_ms(opt_int(o, "k8s-timeout"));
	p->timeout_setting = given ? "--timeout" : env;
}

void probe_fetch_free(struct probe_fetch *f)
{
	statusmap_free(&f->status);
	statusmap_free(&f->vars);
	statusmap_free(&f->row);
}
