/* deadline.h: one absolute monotonic deadline per check, and the time left on it. */
#ifndef SK_DEADLINE_H
#define SK_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

/* A point on CLOCK_MONOTONIC, in microseconds. A zero `at` means "no deadline". */
typedef struct deadline {
	int64_t at;
} deadline_t;

/* Current CLOCK_MONOTONIC time in microseconds. */
int64_t deadline_now_us(void);

/* A deadline `ms` milliseconds from now (ms <= 0 gives an already expired deadline). */
deadline_t deadline_in_ms(int64_t ms);

/* A one-shot check's deadline: `ms` from the moment this process started, not from now, so that
 * the time spent loading shared libraries and reading settings before the check counts (the
 * caller's clock, a kubelet's or xinetd's, started then). Loading some thirty libraries takes
 * tens of milliseconds on a busy host. At most DEADLINE_STARTUP_MAX_US of start-up is counted: a
 * process that was a shell script before it exec'd the probe keeps its budget. */
#define DEADLINE_STARTUP_MAX_US 250000
deadline_t deadline_since_start_ms(int64_t ms);

/* The age in microseconds that the process whose /proc/PID/stat text is `stat` has at least (its
 * starttime, in `hz` clock ticks since boot, counted from the end of its tick, so that a deadline
 * never ends before the budget has passed), at `boot_now_us` on CLOCK_BOOTTIME; 0 when the text
 * does not parse. Pure: deadline_since_start_ms reads the inputs. */
int64_t deadline_age_from_stat(const char *stat, long hz, int64_t boot_now_us);

/* A deadline that never expires. Only long-running loops use it, never a check. */
deadline_t deadline_never(void);

/* Milliseconds left, rounded up, never negative; INT32_MAX when there is no deadline. */
int deadline_left_ms(const deadline_t *d);

/* The time left for a library that reads 0 as "no timeout" (libcurl's CURLOPT_TIMEOUT_MS): at
 * least 1 ms while the deadline has not passed, -1 once it has (the caller then fails the step
 * rather than start it with no limit); INT32_MAX when there is no deadline. */
long deadline_timeout_ms(const deadline_t *d);

/* True once the deadline has passed. */
bool deadline_expired(const deadline_t *d);

/* The earlier of two deadlines. */
deadline_t deadline_min(deadline_t a, deadline_t b);

#endif
