/* runfile.h: files a binary keeps for itself between runs (proxysql-sync --once's lock,
 * clustercheck --register --once's session ID): where they go by default, in a directory no other
 * user can write, and how they are opened, never trusting what another user put there. */
#ifndef SK_RUNFILE_H
#define SK_RUNFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* Open `path` as this process's own file: a symbolic link is never followed (O_NOFOLLOW), and
 * only a regular file that belongs to this process's effective user and has one hard link is
 * kept. `flags`: O_RDONLY or O_RDWR, with O_CREAT to create it (mode 0600); O_NOFOLLOW,
 * O_CLOEXEC, O_NOCTTY and O_NONBLOCK are added (a FIFO never blocks). Returns the descriptor, or
 * -1 with why in err, without the path ("a symbolic link, not followed", "belongs to uid N, not to
 * this user (uid M)", "not a regular file", "has N hard links, not 1", or the system's error);
 * *absent (may be NULL) tells that nothing was there (ENOENT). */
int runfile_open(const char *path, int flags, bool *absent, char *err, size_t errlen) SK_MUST_CHECK;

/* The directories runfile_pick chooses from. */
struct runfile_dirs {
	const char *xdg; /* $XDG_RUNTIME_DIR; NULL or "": none */
	const char *run; /* "/run" */
	const char *tmp; /* "/tmp" */
	const char *prefix; /* names this user's directory in tmp: prefix-EUID */
};

/* The default path of the file `name` this user keeps between runs, into buf:
 *   `xdg`/name, when that is a directory of this user (or root) that no one else can write;
 *   else `run`/name, when this process may write there (root) and no one else can;
 *   else `tmp`/`prefix`-EUID/name, that directory created (mode 0700) when missing, and kept only
 *   when it is a directory (not a link) of this user that no one else can write.
 * Returns 0, or -1 with a one-line reason in err when the last one belongs to someone else or
 * cannot be made (the caller names its option for another path). */
int runfile_pick(const struct runfile_dirs *d, const char *name, char *buf, size_t len, char *err,
		 size_t errlen) SK_MUST_CHECK;

/* runfile_pick from $XDG_RUNTIME_DIR, /run and /tmp. */
int runfile_default(const char *prefix, const char *name, char *buf, size_t len, char *err,
		    size_t errlen) SK_MUST_CHECK;

#endif
