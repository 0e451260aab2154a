/* replica.h: pure verdict over SHOW REPLICA STATUS for an async replica. */
#ifndef SK_REPLICA_H
#define SK_REPLICA_H

#include <stdbool.h>

#include "statusmap.h"

enum replica_reason {
	REPLICA_OK,
	REPLICA_NOT_REPLICA, /* SHOW REPLICA STATUS returned no row */
	REPLICA_IO_STOPPED, /* IO thread not running (primary down, auth failure, stopped) */
	REPLICA_SQL_STOPPED, /* SQL thread not running (stopped or failed) */
	REPLICA_LAG_UNKNOWN, /* Seconds_Behind_Master is NULL */
	REPLICA_LAGGING, /* lag above the limit */
	REPLICA_WRITABLE, /* read_only=OFF but read-only was required */
	REPLICA_READ_ONLY, /* read_only=ON but writable was required */
};

const char *replica_reason_str(enum replica_reason r);

struct replica_rules {
	long max_lag; /* seconds; < 0: lag is not checked (a NULL lag still fails) */
	int read_only; /* 1: require read_only=ON, 0: require OFF, -1: do not check */
};

struct replica_verdict {
	bool up;
	enum replica_reason reason;
	char detail[200];
};

/* Judge from the first row of SHOW REPLICA STATUS (`row`, column -> value; `nrows` rows seen)
 * and, when rules->read_only >= 0, the value of @@read_only (`read_only`, may be NULL).
 * Both MariaDB (Slave_*, Seconds_Behind_Master) and MySQL 8 (Replica_*, Seconds_Behind_Source)
 * column names are understood. */
void replica_judge(const struct statusmap *row, unsigned long nrows, const char *read_only,
		   const struct replica_rules *r, struct replica_verdict *v);

#endif
