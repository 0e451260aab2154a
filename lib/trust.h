/* trust.h: whom this process trusts on the host (root and its own user), and files that must
 * come from them: bypass files, session and lock files, secret files. */
#ifndef SK_TRUST_H
#define SK_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/* Whether `uid` is trusted: root, or this process's effective user. Every other local user, and
 * every other container sharing the host's or the pod's files, is not. */
bool trust_uid(uid_t uid);

/* What trust_path found at a path. */
enum trust_verdict {
	TRUST_ABSENT, /* nothing there (or a dangling trusted symbolic link) */
	TRUST_OK, /* there, and every link on the way and the file belong to a trusted user */
	TRUST_FOREIGN, /* there, but the file or a symbolic link to it belongs to someone else */
};

/* Look at `path` without trusting what another user put there: the entry itself (lstat), then,
 * through at most 8 symbolic links, each link and the final file must belong to root, this
 * process's user, or `also` (another trusted owner, such as the datadir's; (uid_t)-1 for none).
 * On TRUST_FOREIGN, *owner is the first untrusted owner met. `owner` may be NULL. */
enum trust_verdict trust_path(const char *path, uid_t also, uid_t *owner);

/* One line for a file that was there but not honoured, into buf: "PATH ignored: owned by uid N,
 * not root or uid M". Returns buf. */
const char *trust_ignored_msg(char *buf, size_t len, const char *path, uid_t owner);

#endif
