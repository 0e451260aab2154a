/* proc.c: process-wide duties of the binaries: no core dump of a secret, and PID 1's reaping. */
#include "proc.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

void proc_no_dumps(void)
{
	struct rlimit none = { 0, 0 };

	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	(void)setrlimit(RLIMIT_CORE, &none);
}

/* Never runs (SIGCHLD stays blocked in every thread); its presence makes the kernel queue SIGCHLD
 * for a PID 1, which otherwise drops signals it has no handler for. */
static void on_sigchld(int sig)
{
	(void)sig;
}

static void reap_all(void)
{
	int status;

	for (;;) {
		pid_t pid = waitpid(-1, &status, WNOHANG);

		if (pid < 0 && errno == EINTR)
			continue;
		if (pid <= 0)
			return; /* 0: the others still run; ECHILD: no child at all */
	}
}

static void *reaper_main(void *arg)
{
	sigset_t set;
	int sig;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	reap_all(); /* children that ended before this thread started */
	for (;;) {
		if (sigwait(&set, &sig) == 0)
			reap_all();
	}
	return NULL;
}

int proc_reaper_start(char *err, size_t errlen)
{
	struct sigaction sa;
	pthread_attr_t attr;
	pthread_t thread;
	sigset_t chld, all, old;
	int rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigchld;
	sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGCHLD, &sa, NULL) < 0)
		return sk_err(err, errlen, "cannot handle SIGCHLD: %s", strerror(errno));
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	/* The thread starts with every signal blocked (it inherits this mask), so that it never takes
	 * a stop signal meant for the thread that waits for those. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&thread, &attr, reaper_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return sk_err(err, errlen, "cannot start the thread that reaps children: %s", strerror(rc));
	return 0;
}
