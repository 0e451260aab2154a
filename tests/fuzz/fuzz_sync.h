/* fuzz_sync.h: what the agent's harnesses share: their fixed configuration loaded the way the
 * agent loads a file (a private memfd, through sync_config_load), once, at initialisation. */
#ifndef SK_FUZZ_SYNC_H
#define SK_FUZZ_SYNC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "log.h"

/* Load `text` into `cfg` with logging off; abort with `who` and the reason when it is refused. */
static inline void fuzz_sync_config(const char *who, const char *text, struct sync_config *cfg)
{
	char path[64], err[512];
	char *args[] = { "proxysql-sync", "-c", path, NULL };
	int fd = memfd_create("sync.cfg", 0);
	size_t n = strlen(text);

	log_setup("fuzz", LOG_TEXT, LOG_OFF, stderr);
	if (fd < 0 || fchmod(fd, 0600) < 0 || write(fd, text, n) != (ssize_t)n)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (sync_config_load(cfg, 3, args, err, sizeof(err)) != OPTS_OK) {
		fprintf(stderr, "%s: fixed config: %s\n", who, err);
		abort();
	}
	close(fd);
}

#endif
