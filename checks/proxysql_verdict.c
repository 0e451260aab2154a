/* proxysql_verdict.c: proxysql-check's pure part: its hostgroup list and its liveness and readiness
 * verdicts on what the fetch brought back (see proxysql_verdict.h). */
#include "proxysql_verdict.h"

#include <stdio.h>
#include <string.h>

static const char *const probe_names[] = { "proxysql-liveness", "proxysql-readiness", "proxysql-drain" };
static const char *const down_words[] = { "not alive", "not ready", "not drained" };

int proxysql_parse_hostgroups(const char *s, long *ids, int max)
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

const char *proxysql_probe_name(enum proxysql_mode mode)
{
	return probe_names[mode];
}

const char *proxysql_down_word(enum proxysql_mode mode)
{
	return down_words[mode];
}

static void verdict(struct probe_verdict *v, bool up, const char *reason)
{
	v->up = up;
	v->reason = reason;
}

/* The first writer hostgroup without an ONLINE server (a hostgroup the fetch did not reach
 * counts as one), or -1 when each has one. */
static int first_without_writer(const struct proxysql_rules *r, const struct statusmap *online)
{
	for (int i = 0; i < r->nids; i++) {
		char id[32];
		const char *n;
		long count;

		snprintf(id, sizeof(id), "%ld", r->ids[i]);
		n = statusmap_get(online, id);
		if (!n || !sk_parse_long(n, 0, 1L << 40, &count) || count == 0)
			return i;
	}
	return -1;
}

/* --readiness: an ONLINE server in each writer hostgroup, then proxysql-sync's /readyz when asked. */
static void judge_readiness(const struct proxysql_rules *r, const struct probe_fetch *f, struct probe_verdict *v)
{
	int empty = first_without_writer(r, &f->status);

	if (empty >= 0) {
		verdict(v, false, "no_writer");
		snprintf(v->msg, sizeof(v->msg), "not ready: no ONLINE server in writer hostgroup %ld", r->ids[empty]);
		return;
	}
	if (r->sync_readyz) {
		const char *got = statusmap_get(&f->vars, PROXYSQL_READYZ_STATUS);
		const char *why = statusmap_get(&f->vars, PROXYSQL_READYZ_ERROR);
		long status = -1;

		if (!got || !sk_parse_long(got, -1, 999, &status))
			status = -1;
		if (status != 200) {
			verdict(v, false, "sync_not_ready");
			if (status < 0)
				snprintf(v->msg, sizeof(v->msg), "not ready: proxysql-sync %s: %s", r->sync_readyz,
					 why ? why : "");
			else
				snprintf(v->msg, sizeof(v->msg), "not ready: proxysql-sync %s answered %ld",
					 r->sync_readyz, status);
			return;
		}
	}
	verdict(v, true, "ok");
	snprintf(v->msg, sizeof(v->msg), "ready: every writer hostgroup (%s) has an ONLINE server%s",
		 r->writer_hostgroup, r->sync_readyz ? ", proxysql-sync ready" : "");
}

void proxysql_judge(const struct proxysql_rules *r, const struct probe_outcome *o, struct probe_verdict *v)
{
	if (!o->fetched) {
		probe_db_verdict(down_words[r->mode], o->e, o->pc, o->budget_ms, o->setting, v);
		return;
	}
	if (r->mode == PROXYSQL_READINESS) {
		judge_readiness(r, o->f, v);
		return;
	}
	verdict(v, true, "ok");
	snprintf(v->msg, sizeof(v->msg), "alive: admin interface answers");
}
