/* replica.c: async replica verdict: threads running, lag known and under the limit, read_only as required. */
#include "replica.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

static const char *const reason_names[] = {
	"ok",          "not_replica", "io_thread_stopped", "sql_thread_stopped",
	"lag_unknown", "lagging",     "writable",          "read_only",
};

const char *replica_reason_str(enum replica_reason r)
{
	return reason_names[r];
}

static const char *either(const struct statusmap *m, const char *a, const char *b)
{
	const char *v = statusmap_get(m, a);

	return v ? v : statusmap_get(m, b);
}

static void set(struct replica_verdict *v, bool up, enum replica_reason reason, const char *detail)
{
	v->up = up;
	v->reason = reason;
	sk_strlcpy(v->detail, detail, sizeof(v->detail));
}

/* The IO and SQL threads run: false with the verdict filled when one does not. */
static bool threads_running(const struct statusmap *row, struct replica_verdict *v)
{
	const char *io = either(row, "Slave_IO_Running", "Replica_IO_Running");
	const char *sql = either(row, "Slave_SQL_Running", "Replica_SQL_Running");
	const char *ioerr = either(row, "Last_IO_Errno", "Last_IO_Errno");
	const char *sqlerr = either(row, "Last_SQL_Errno", "Last_SQL_Errno");
	char d[200];

	if (!io || strcmp(io, "Yes") != 0) {
		snprintf(d, sizeof(d), "IO thread %s%s%s", io ? io : "(missing)",
			 ioerr && strcmp(ioerr, "0") ? ", Last_IO_Errno=" : "",
			 ioerr && strcmp(ioerr, "0") ? ioerr : "");
		set(v, false, REPLICA_IO_STOPPED, d);
		return false;
	}
	if (!sql || strcmp(sql, "Yes") != 0) {
		snprintf(d, sizeof(d), "SQL thread %s%s%s", sql ? sql : "(missing)",
			 sqlerr && strcmp(sqlerr, "0") ? ", Last_SQL_Errno=" : "",
			 sqlerr && strcmp(sqlerr, "0") ? sqlerr : "");
		set(v, false, REPLICA_SQL_STOPPED, d);
		return false;
	}
	return true;
}

/* read_only as required (rules->read_only 1: ON, 0: OFF, -1: either). */
static bool read_only_as_required(const char *read_only, const struct replica_rules *r, struct replica_verdict *v)
{
	bool ro = read_only && (sk_streq_ci(read_only, "ON") || strcmp(read_only, "1") == 0);

	if (r->read_only == 1 && !ro) {
		set(v, false, REPLICA_WRITABLE, "read_only=OFF, read-only required");
		return false;
	}
	if (r->read_only == 0 && ro) {
		set(v, false, REPLICA_READ_ONLY, "read_only=ON, writable required");
		return false;
	}
	return true;
}

void replica_judge(const struct statusmap *row, unsigned long nrows, const char *read_only,
		   const struct replica_rules *r, struct replica_verdict *v)
{
	const char *lag = either(row, "Seconds_Behind_Master", "Seconds_Behind_Source");
	char d[200];
	long secs;

	if (nrows == 0) {
		set(v, false, REPLICA_NOT_REPLICA, "not a replica (SHOW REPLICA STATUS is empty)");
		return;
	}
	if (!threads_running(row, v))
		return;
	if (!lag || !sk_parse_long(lag, 0, 1L << 40, &secs)) {
		set(v, false, REPLICA_LAG_UNKNOWN, "Seconds_Behind_Master is NULL");
		return;
	}
	if (r->max_lag >= 0 && secs > r->max_lag) {
		snprintf(d, sizeof(d), "lag %lds > max %lds", secs, r->max_lag);
		set(v, false, REPLICA_LAGGING, d);
		return;
	}
	if (!read_only_as_required(read_only, r, v))
		return;
	snprintf(d, sizeof(d), "IO and SQL threads running, lag %lds", secs);
	set(v, true, REPLICA_OK, d);
}
