/* plan.h: (desired, current) -> the admin statements that make ProxySQL match (a pure function). */
#ifndef SK_PLAN_H
#define SK_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* What the pool says about a server that is being drained (OFFLINE_SOFT and no longer wanted). */
struct plan_drain {
	long hostgroup;
	const char *host;
	long port;
	long conn_used; /* ConnUsed in stats_mysql_connection_pool; 0 when absent */
	int64_t draining_ms; /* how long the agent has seen it draining */
};

struct plan_options {
	const long *owned_hostgroups; /* sorted; servers in other hostgroups are left alone */
	size_t nowned;
	const char *user_tag; /* users whose comment starts with this are the agent's */
	int64_t drain_timeout_ms; /* a draining server is deleted after this even with used connections */
	bool save_to_disk; /* SAVE ... TO DISK after each LOAD */
	/* An earlier apply loaded but did not save (its SAVE failed or was never sent): with
	 * save_to_disk, SAVE again even when nothing else differs. */
	bool save_owed_servers, save_owed_users;
};

struct plan_step {
	char *sql; /* sent to the admin, one statement */
	char *shown; /* the same with passwords replaced by '***', for logs and --dry-run */
};

struct plan {
	struct plan_step *steps;
	size_t n;
	/* Counts for logs and metrics. */
	size_t server_inserts, server_updates, server_drains, server_deletes, draining;
	size_t user_inserts, user_updates, user_deletes;
	bool servers_changed, users_changed;
};

/* Compute the statements: per server INSERT / UPDATE / drain (UPDATE status='OFFLINE_SOFT') /
 * DELETE once drained, then LOAD MYSQL SERVERS TO RUNTIME (and SAVE ... TO DISK); per user
 * DELETE + INSERT when it differs, DELETE when gone; then LOAD MYSQL USERS TO RUNTIME (and SAVE).
 * Nothing at all when nothing differs, but an owed SAVE (plan_options). Arrays must be sorted (px_*_sort). Values must already
 * be validated (layout does it); everything is quoted anyway. Pure; free with plan_free. */
void plan_build(const struct px_servers *want_servers, const struct px_users *want_users,
		const struct px_servers *have_servers, const struct px_users *have_users,
		const struct plan_drain *drains, size_t ndrains, const struct plan_options *o, struct plan *out);

/* The plan as text, one statement a line ending in ";", passwords redacted. Caller frees. */
char *plan_text(const struct plan *p);

void plan_free(struct plan *p);

#endif
