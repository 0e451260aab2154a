/* readiness.c: readiness-check, drop-in for the PXC operator's readiness-check.sh plus --replica:
 * its options, its rules and the judge clustercheck --listen's /readiness shares. */
#include "readiness.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

struct readiness_settings {
	struct probe_settings p;
	struct readiness_rules rules;
	const char *datadir, *recovery_file;
	char ignored[400]; /* bypass files there from an untrusted owner, named in the verdict */
};

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", NULL, "mysqld address [default: this node's first IP, like hostname -I]", "33062",
			   "monitor", "/etc/mysql/mysql-users-secret/monitor", "MONITOR_PASSWORD", NULL),
	{"timeout", 't', OPT_NUMBER, "SECONDS", NULL, NULL, 0.05, 3600, NULL,
	 "One deadline for the whole check; decimals allowed. Overrides READINESS_CHECK_TIMEOUT.", 0},
	{"k8s-timeout", 0, OPT_INT, "SECONDS", "10", "READINESS_CHECK_TIMEOUT", 1, 3600, NULL,
	 "The probe's timeoutSeconds; the deadline stays below it by 20% (at most 1 s).", 0},
	READINESS_RULE_OPTIONS
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", NULL, 0, 0, NULL,
	 "Where the bypass file sleep-forever lives.", 0, OPT_FIELD(struct readiness_settings, datadir)},
	{"recovery-file", 0, OPT_STRING, "PATH", "/tmp/recovery-case", NULL, 0, 0, NULL,
	 "When this file exists the node is in manual recovery: report ready (only a file of root, this user or "
	 "the datadir's owner counts, as for sleep-forever).", 0, OPT_FIELD(struct readiness_settings, recovery_file)},
};
/* clang-format on */

int readiness_rules_load(const struct opts *o, const char *prefix, struct readiness_rules *r, char *err, size_t errlen)
{
	char donor[64], replica[64], max_lag[64], ro[64], rw[64];
	bool require_ro, require_rw;

	snprintf(donor, sizeof(donor), "%savailable-when-donor", prefix);
	snprintf(replica, sizeof(replica), "%sreplica", prefix);
	snprintf(max_lag, sizeof(max_lag), "%smax-lag", prefix);
	snprintf(ro, sizeof(ro), "%srequire-read-only", prefix);
	snprintf(rw, sizeof(rw), "%srequire-writable", prefix);
	require_ro = opt_flag(o, ro);
	require_rw = opt_flag(o, rw);
	if (require_ro && require_rw)
		return sk_err(err, errlen, "--%s and --%s exclude each other", ro, rw);
	memset(r, 0, sizeof(*r));
	r->replica = opt_flag(o, replica);
	r->galera = (struct galera_rules){
		.need_primary = true,
		.need_synced = true,
		.donor_ok = opt_flag(o, donor),
		.readonly_ok = !require_rw,
		.need_read_only = require_ro,
	};
	r->rep.max_lag = opt_int(o, max_lag);
	r->rep.read_only = require_ro ? 1 : require_rw ? 0 : -1;
	return 0;
}

int readiness_fetch(struct db *db, const struct readiness_rules *r, const deadline_t *dl, struct probe_fetch *f,
		    struct db_err *e)
{
	if (!r->replica)
		return probe_galera_read(db, dl, &f->status, galera_rules_need_vars(&r->galera) ? &f->vars : NULL, e);
	if (db_query_row(db, "SHOW REPLICA STATUS", dl, &f->row, &f->nrows, e) < 0)
		return -1;
	if (r->rep.read_only >= 0 && db_query_pairs(db, "SHOW GLOBAL VARIABLES LIKE 'read_only'", dl, &f->vars, e) < 0)
		return -1;
	return 0;
}

void readiness_judge(const struct readiness_rules *r, const struct probe_outcome *o, struct probe_verdict *v)
{
	const struct probe_fetch *f = o->f;
	const char *detail;

	if (!o->fetched) {
		probe_db_verdict("not ready", o->e, o->pc, o->budget_ms, o->setting, v);
		return;
	}
	if (r->replica) {
		struct replica_verdict rv;

		replica_judge(&f->row, f->nrows, statusmap_get(&f->vars, "read_only"), &r->rep, &rv);
		v->up = rv.up;
		v->reason = replica_reason_str(rv.reason);
		detail = rv.detail;
		snprintf(v->msg, sizeof(v->msg), "%s: %s", v->up ? "ready" : "not ready", detail);
	} else {
		struct galera_verdict gv;

		galera_judge(&f->status, &f->vars, &r->galera, &gv);
		v->up = gv.up;
		v->reason = galera_reason_str(gv.reason);
		snprintf(v->msg, sizeof(v->msg), "%s: %s", v->up ? "ready" : "not ready", gv.detail);
	}
}

/* ---- readiness-check ------------------------------------------------------------------------ */

static int settings_load(struct opts *o, void *settings, char *err, size_t errlen)
{
	struct readiness_settings *s = settings;

	if (readiness_rules_load(o, "", &s->rules, err, errlen) < 0)
		return -1;
	probe_settings_load(o, &s->p);
	probe_k8s_settings_load(o, "READINESS_CHECK_TIMEOUT", &s->p);
	return 0;
}

/* Manual recovery: the operator's scripts report ready so nothing restarts the pod. */
static bool before(void *settings, struct probe_verdict *v)
{
	struct readiness_settings *s = settings;

	return probe_readiness_bypass(s->recovery_file, s->datadir, v, s->ignored, sizeof(s->ignored));
}

static int fetch(const void *settings, const struct probe_conn *pc, const deadline_t *dl, struct probe_fetch *f,
		 struct db_err *e)
{
	const struct readiness_settings *s = settings;
	struct db db = { 0 };
	int rc;

	/* A replica is asked as it is; a Galera node with wsrep_sync_wait off. */
	if ((s->rules.replica ? db_connect(&db, &pc->t, dl, e) : probe_galera_connect(&db, pc, dl, e)) < 0)
		return -1;
	rc = readiness_fetch(&db, &s->rules, dl, f, e);
	db_close(&db);
	return rc;
}

static void judge(void *settings, const struct probe_outcome *o, struct probe_verdict *v)
{
	const struct readiness_settings *s = settings;

	readiness_judge(&s->rules, o, v);
	probe_verdict_note(v, s->ignored);
}

const struct probe_kind readiness_kind = {
	.name = "readiness",
	.opts = {
		.prog = "readiness-check",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]...",
		.summary = "Exit 0 when this MySQL node should take traffic: Galera Primary and Synced (or Donor when\n"
			   "allowed), or with --replica an async replica whose threads run and whose lag is known.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 2,
	},
	.log_level = LOG_WARN,
	.ignored_args = "as by readiness-check.sh",
	.settings_size = sizeof(struct readiness_settings),
	.settings_load = settings_load,
	.before = before,
	.fetch = fetch,
	.judge = judge,
};
