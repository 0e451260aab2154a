/* secret.c: reading a password or token from a secret file, with a size limit. */
#include "secret.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

char *secret_read_file(const char *path, char *err, size_t errlen)
{
	char *buf;
	size_t len;

	if (sk_read_file(path, SECRET_MAX, &buf, &len, err, errlen) < 0)
		return NULL;
	if (strlen(buf) != len) {
		sk_wipe(buf, len);
		free(buf);
		sk_err(err, errlen, "%s: contains a NUL byte", path);
		return NULL;
	}
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len && buf[len - 1] == '\r')
		buf[--len] = '\0';
	log_add_secret(buf);
	return buf;
}
