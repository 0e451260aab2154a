/* proxysql_verdict.h: proxysql-check's liveness and readiness rules and their pure judge, apart from the
 * binary (proxysql_check.c fetches from ProxySQL's admin interface) so that the unit tests judge
 * canned answers (tests/data/checks/proxysql-*.case). */
#ifndef SK_PROXYSQL_VERDICT_H
#define SK_PROXYSQL_VERDICT_H

#include "probe.h"

enum proxysql_mode { PROXYSQL_LIVENESS, PROXYSQL_READINESS, PROXYSQL_DRAIN };

/* The writer hostgroups --writer-hostgroup may name, at most. */
#define PROXYSQL_MAX_HOSTGROUPS 32

/* What a verdict of proxysql-check asks. */
struct proxysql_rules {
	enum proxysql_mode mode;
	long ids[PROXYSQL_MAX_HOSTGROUPS]; /* --writer-hostgroup */
	int nids;
	const char *writer_hostgroup; /* as given, for the verdict */
	const char *sync_readyz; /* proxysql-sync's /readyz URL; NULL: not asked */
};

/* What a fetch for --readiness puts in struct probe_fetch (--liveness: nothing; the admin
 * answered). `status`: one entry per writer hostgroup asked, in the order of ids, its id ->
 * the number of its ONLINE servers in runtime_mysql_servers; the fetch stops after the first
 * with none. `vars`, when sync_readyz was asked (every hostgroup had an ONLINE server):
 * PROXYSQL_READYZ_STATUS -> the HTTP status, or "-1" with PROXYSQL_READYZ_ERROR -> why. */
#define PROXYSQL_READYZ_STATUS "sync_readyz_status"
#define PROXYSQL_READYZ_ERROR "sync_readyz_error"

/* Parse "10,20" (commas or spaces) into ids; returns the count, or -1 for anything else. */
int proxysql_parse_hostgroups(const char *s, long *ids, int max);

/* The verdict's "probe" ("proxysql-readiness") and down word ("not ready") of a mode. */
const char *proxysql_probe_name(enum proxysql_mode mode);
const char *proxysql_down_word(enum proxysql_mode mode);

/* --liveness or --readiness from a fetch (o->fetched false: o->e says why): "alive: ...",
 * "ready: ..." or "not ready: ..." with reason ok, no_writer, sync_not_ready or the db reason. */
void proxysql_judge(const struct proxysql_rules *r, const struct probe_outcome *o, struct probe_verdict *v);

#endif
