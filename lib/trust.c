/* trust.c: whom this process trusts on the host, and files that must come from them. */
#include "trust.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool trust_uid(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

static bool trusted_by(uid_t uid, uid_t also)
{
	return trust_uid(uid) || (also != (uid_t)-1 && uid == also);
}

/* The target of symbolic link `link`, resolved against the link's directory, into out. */
static bool link_target(const char *link, char *out, size_t len)
{
	char target[PATH_MAX];
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	const char *slash;

	if (n < 0)
		return false;
	target[n] = '\0';
	slash = strrchr(link, '/');
	if (target[0] == '/' || !slash)
		return sk_strlcpy(out, target, len);
	return sk_fmt(out, len, "%.*s/%s", (int)(slash - link), link, target);
}

enum trust_verdict trust_path(const char *path, uid_t also, uid_t *owner)
{
	char cur[PATH_MAX], next[PATH_MAX];
	struct stat st;

	if (!path || !*path || !sk_strlcpy(cur, path, sizeof(cur)))
		return TRUST_ABSENT;
	for (int hops = 0; hops <= 8; hops++) {
		if (lstat(cur, &st) < 0)
			return TRUST_ABSENT;
		if (!trusted_by(st.st_uid, also)) {
			if (owner)
				*owner = st.st_uid;
			return TRUST_FOREIGN;
		}
		if (!S_ISLNK(st.st_mode))
			return TRUST_OK;
		if (!link_target(cur, next, sizeof(next)))
			return TRUST_ABSENT;
		memcpy(cur, next, sizeof(cur));
	}
	return TRUST_ABSENT; /* a loop, or too deep: not a file anyone can rely on */
}

const char *trust_ignored_msg(char *buf, size_t len, const char *path, uid_t owner)
{
	sk_fmt(buf, len, "%s ignored: owned by uid %u, not root or uid %u", path, (unsigned)owner, (unsigned)geteuid());
	return buf;
}
