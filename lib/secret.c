/* secret.c: reading a password or token from a secret file, with a size limit, refused when
 * another user could have written it and warned about when other users can read it. */
#include "secret.h"

#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "trust.h"

enum secret_finding secret_judge(const struct secret_facts *f)
{
	if (!f->owner_trusted)
		return SECRET_FILE_FOREIGN;
	if (f->mode & S_IWOTH)
		return SECRET_FILE_WORLD_WRITABLE;
	if ((f->mode & S_IWGRP) && !f->group_ours)
		return SECRET_FILE_GROUP_WRITABLE;
	if ((f->mode & S_IROTH) && !f->k8s_layout && !(f->owner_root && f->readonly_mount))
		return SECRET_FILE_READABLE;
	return SECRET_FILE_OK;
}

const char *secret_finding_str(enum secret_finding f)
{
	switch (f) {
	case SECRET_FILE_OK: return "ok";
	case SECRET_FILE_READABLE: return "readable";
	case SECRET_FILE_FOREIGN: return "foreign";
	case SECRET_FILE_WORLD_WRITABLE: return "world_writable";
	case SECRET_FILE_GROUP_WRITABLE: return "group_writable";
	}
	return "unknown";
}

bool secret_finding_refuses(enum secret_finding f)
{
	return f == SECRET_FILE_FOREIGN || f == SECRET_FILE_WORLD_WRITABLE || f == SECRET_FILE_GROUP_WRITABLE;
}

static bool group_is_ours(gid_t gid)
{
	gid_t groups[NGROUPS_MAX];
	int n = getgroups(NGROUPS_MAX, groups);

	if (gid == getegid())
		return true;
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

/* The kubelet's atomic writer: "name -> ..data/name", "..data -> ..2024_01_01_...". */
static bool k8s_layout(const char *path)
{
	char target[PATH_MAX];
	ssize_t n = readlink(path, target, sizeof(target) - 1);

	if (strstr(path, "/..data/") || strncmp(path, "..data/", 7) == 0)
		return true;
	if (n <= 0)
		return false;
	target[n] = '\0';
	return strncmp(target, "..data/", 7) == 0;
}

int secret_check(const char *path, int fd, const struct stat *st, void *ctx, char *err, size_t errlen)
{
	struct secret_seen *seen = ctx;
	struct statvfs vfs;
	struct secret_facts f = {
		.mode = st->st_mode,
		.owner_trusted = trust_uid(st->st_uid) || (seen && st->st_uid == seen->also),
		.owner_root = st->st_uid == 0,
		.group_ours = group_is_ours(st->st_gid),
		.k8s_layout = k8s_layout(path),
		.readonly_mount = fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY),
	};
	enum secret_finding found = secret_judge(&f);
	unsigned mode = (unsigned)(st->st_mode & 07777);

	if (seen) {
		seen->finding = found;
		seen->mode = st->st_mode & 07777;
	}
	switch (found) {
	case SECRET_FILE_FOREIGN:
		return sk_err(err, errlen, "%s: refused: owned by uid %u, not root or uid %u (chown it)", path,
			      (unsigned)st->st_uid, (unsigned)geteuid());
	case SECRET_FILE_WORLD_WRITABLE:
		return sk_err(err, errlen, "%s: refused: other users can write it (mode %04o; chmod go-w it)", path,
			      mode);
	case SECRET_FILE_GROUP_WRITABLE:
		return sk_err(err, errlen,
			      "%s: refused: group %u can write it and this process is not in that group (mode %04o; "
			      "chmod g-w it)",
			      path, (unsigned)st->st_gid, mode);
	default: return 0;
	}
}

const char *secret_readable_msg(char *buf, size_t len, const char *path, mode_t mode)
{
	sk_fmt(buf, len, "%s: other users can read it (mode %04o; chmod o-r %s)", path, (unsigned)(mode & 07777), path);
	return buf;
}

/* The file's value, trimmed of one trailing newline; *seen says what secret_check found. */
static char *read_value(const char *path, struct secret_seen *seen, char *err, size_t errlen)
{
	char *buf;
	size_t len;

	if (sk_read_file_checked(&(struct sk_file_read){ path, SECRET_MAX, secret_check, seen }, &buf, &len, err,
				 errlen) < 0)
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
	return buf;
}

char *secret_read_file(const char *path, char *err, size_t errlen)
{
	struct secret_seen seen = { 0, SECRET_FILE_OK, 0 };
	char *buf = read_value(path, &seen, err, errlen);

	if (!buf)
		return NULL;
	log_add_secret(buf);
	if (seen.finding == SECRET_FILE_READABLE) {
		char msg[PATH_MAX * 2 + 96];

		log_warn("%s", secret_readable_msg(msg, sizeof(msg), path, seen.mode));
	}
	return buf;
}

char *secret_read_setting(const char *path, char *err, size_t errlen)
{
	return read_value(path, NULL, err, errlen);
}
