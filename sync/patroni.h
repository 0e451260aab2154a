/* patroni.h: what Patroni writes into Consul, read for the PostgreSQL side's layout (patroni.c):
 * a member's entry (<namespace>/<scope>/members/<name>), the leader's WAL position, and which
 * members serve reads. Pure: no I/O, no globals. */
#ifndef SK_SYNC_PATRONI_H
#define SK_SYNC_PATRONI_H

#include <stdbool.h>
#include <stddef.h>

#include "layout.h"
#include "model.h"

/* One member as its JSON entry says (conn_url, role, state, xlog_location, tags). */
struct patroni_member {
	char host[MODEL_HOST_MAX + 1];
	long port;
	bool replica; /* role "replica" or "sync_standby" */
	bool running; /* state "running" or "streaming" */
	bool noloadbalance; /* tags.noloadbalance is true */
	char region[64]; /* tags.region, "" when none */
	long long xlog; /* xlog_location, -1 when none */
};

/* Read a member's entry. Returns NULL, or why it is rejected (into `why`). */
const char *patroni_member_parse(const char *value, size_t len, struct patroni_member *m, char *why, size_t whylen);

/* Host and port of a libpq URL (postgres:// or postgresql://, user info and database left out,
 * port 5432 when none). Returns NULL or why it is not one. */
const char *patroni_conn_url(const char *url, char *host, size_t hostlen, long *port);

/* The optime of the <scope>/status entry ({"optime": N}), -1 when it has none. */
long long patroni_status_optime(const char *value, size_t len);

/* Whether member `m` (not the leader) serves reads for cluster `cl`, the leader being at WAL
 * position `leader_pos` (-1: unknown). */
bool patroni_is_reader(const struct layout_cluster *cl, const struct patroni_member *m, long long leader_pos);

#endif
