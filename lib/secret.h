/* secret.h: passwords and tokens from secret files; never from argv (MySQL option files: mycnf.h). */
#ifndef SK_SECRET_H
#define SK_SECRET_H

#include <stddef.h>

#include "util.h"

#define SECRET_MAX 4096 /* a password or token file larger than this is an error */

/* Read a secret file (a Kubernetes secret mount: the value, maybe with a trailing newline).
 * One trailing "\n" or "\r\n" is removed. Returns a heap string the caller wipes and frees,
 * or NULL with err set (missing, unreadable, too large, contains a NUL byte). */
char *secret_read_file(const char *path, char *err, size_t errlen) SK_MUST_CHECK;

#endif
