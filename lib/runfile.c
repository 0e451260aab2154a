/* runfile.c: files a binary keeps for itself between runs, where no other user can plant them. */
#include "runfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trust.h"

int runfile_open(const char *path, int flags, bool *absent, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0600);

	if (absent)
		*absent = fd < 0 && errno == ENOENT;
	if (fd < 0)
		return sk_err(err, errlen, "%s", errno == ELOOP ? "a symbolic link, not followed" : strerror(errno));
	if (fstat(fd, &st) < 0)
		sk_fmt(err, errlen, "%s", strerror(errno));
	else if (!S_ISREG(st.st_mode))
		sk_fmt(err, errlen, "not a regular file");
	else if (st.st_uid != geteuid())
		sk_fmt(err, errlen, "belongs to uid %u, not to this user (uid %u)", (unsigned)st.st_uid,
		       (unsigned)geteuid());
	else if (st.st_nlink != 1)
		sk_fmt(err, errlen, "has %lu hard links, not 1", (unsigned long)st.st_nlink);
	else
		return fd;
	close(fd);
	return -1;
}

/* A directory (not a link) of this user or root that no group or other user can write. */
static bool dir_private(const char *dir, struct stat *st)
{
	return lstat(dir, st) == 0 && S_ISDIR(st->st_mode) && trust_uid(st->st_uid) && !(st->st_mode & 022);
}

/* tmp/prefix-EUID: made 0700 when missing; kept when it is this user's own and private. */
static int tmp_dir(const struct runfile_dirs *d, char *dir, size_t len, char *err, size_t errlen)
{
	const char *prefix = d->prefix;
	struct stat st;

	if (!sk_fmt(dir, len, "%s/%s-%u", d->tmp, prefix, (unsigned)geteuid()))
		return sk_err(err, errlen, "%s/%s-%u: path too long", d->tmp, prefix, (unsigned)geteuid());
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sk_err(err, errlen, "%s: %s", dir, strerror(errno));
	if (lstat(dir, &st) < 0)
		return sk_err(err, errlen, "%s: %s", dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return sk_err(err, errlen, "%s: not a directory (planted by uid %u?)", dir, (unsigned)st.st_uid);
	if (st.st_uid != geteuid())
		return sk_err(err, errlen, "%s: belongs to uid %u, not to this user (uid %u)", dir, (unsigned)st.st_uid,
			      (unsigned)geteuid());
	if (st.st_mode & 022)
		return sk_err(err, errlen, "%s: others can write it (mode %03o)", dir, (unsigned)(st.st_mode & 0777));
	return 0;
}

int runfile_pick(const struct runfile_dirs *d, const char *name, char *buf, size_t len, char *err, size_t errlen)
{
	char dir[4096];
	struct stat st;

	if (d->xdg && d->xdg[0] == '/' && dir_private(d->xdg, &st) && sk_fmt(buf, len, "%s/%s", d->xdg, name))
		return 0;
	if (d->run && access(d->run, W_OK) == 0 && dir_private(d->run, &st) && sk_fmt(buf, len, "%s/%s", d->run, name))
		return 0;
	if (tmp_dir(d, dir, sizeof(dir), err, errlen) < 0)
		return -1;
	if (!sk_fmt(buf, len, "%s/%s", dir, name))
		return sk_err(err, errlen, "%s/%s: path too long", dir, name);
	return 0;
}

int runfile_default(const char *prefix, const char *name, char *buf, size_t len, char *err, size_t errlen)
{
	const struct runfile_dirs d = {
		.xdg = getenv("XDG_RUNTIME_DIR"), .run = "/run", .tmp = "/tmp", .prefix = prefix
	};

	return runfile_pick(&d, name, buf, len, err, errlen);
}
