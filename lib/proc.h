/* proc.h: process-wide duties of the binaries: no core dump of a secret, and PID 1's reaping. */
#ifndef SK_PROC_H
#define SK_PROC_H

#include <stddef.h>

#include "util.h"

/* Keep this process's memory (passwords, tokens) out of core dumps and away from other processes
 * of the same user: PR_SET_DUMPABLE 0 (no core file, no ptrace or /proc/PID/mem by non-root
 * users) and RLIMIT_CORE 0. Call first thing in main(), before any secret is read. Cannot fail on
 * Linux with these arguments; a failure is ignored (the process still runs). */
void proc_no_dumps(void);

/* Reap every child that ends, orphans included: a PID 1 (a container's first process) inherits
 * every orphan of its namespace, and no one else would wait for them. Blocks SIGCHLD in the
 * calling thread, so call it from main() before any other thread starts (threads inherit the
 * mask); a detached thread, which blocks every other signal, then waits for SIGCHLD and calls
 * waitpid(-1, WNOHANG) until no ended child is left. Nothing in these binaries starts a child of its own to wait for: such a wait
 * would race with this one. Returns 0, or -1 with err set when the thread cannot start. */
int proc_reaper_start(char *err, size_t errlen) SK_MUST_CHECK;

#endif
