/* copy-probes.c: install the static probes from an image into a shared volume, with no shell in the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef SIDEKICK_VERSION
#define SIDEKICK_VERSION "0.0.0"
#endif

#define PROG "copy-probes"

static const char usage[] =
	"Usage: " PROG " [--from DIR] DEST_DIR\n"
	"\n"
	"Copy every regular file of DIR (default /probes) into DEST_DIR with mode 0755, each through a\n"
	"temporary file and rename(2), so a probe that runs meanwhile sees the old or the new binary,\n"
	"never half of one. Made for a Kubernetes init container that fills a shared volume.\n"
	"\n"
	"Options:\n"
	"      --from DIR    Directory to copy from. [default: /probes]\n"
	"  -h, --help        Print this help and exit.\n"
	"      --version     Print the version and exit.\n"
	"\n"
	"Exit status: 0 all copied, 1 a copy failed, 2 usage error.\n";

/* Write all of buf to fd. Returns 0, or -1 with errno set. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Copy file `name` from dir fd `from` into dir fd `to` atomically. Returns 0, or -1 after one
 * message on stderr naming the file and the failing step. */
static int copy_one(int from, int to, const char *name, const char *dest)
{
	char tmp[256], buf[65536];
	const char *step = "open";
	int in = -1, out = -1, rc = -1;

	if (snprintf(tmp, sizeof tmp, ".%s.%ld.tmp", name, (long)getpid()) >= (int)sizeof tmp) {
		errno = ENAMETOOLONG;
		goto out;
	}
	in = openat(from, name, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		goto out;
	step = "create";
	out = openat(to, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
	if (out < 0)
		goto out;
	for (;;) {
		step = "read";
		ssize_t n = read(in, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto out;
		if (n == 0)
			break;
		step = "write";
		if (write_all(out, buf, (size_t)n) < 0)
			goto out;
	}
	step = "chmod";
	if (fchmod(out, 0755) < 0) /* the umask must not take the execute bits away */
		goto out;
	step = "fsync";
	if (fsync(out) < 0)
		goto out;
	step = "close";
	rc = close(out);
	out = -1;
	if (rc < 0)
		goto out;
	step = "rename";
	rc = renameat(to, tmp, to, name);
out:
	if (rc < 0) {
		fprintf(stderr, PROG ": %s %s/%s: %s\n", step, dest, name, strerror(errno));
		if (out >= 0)
			close(out);
		unlinkat(to, tmp, 0);
	} else {
		printf(PROG ": installed %s/%s\n", dest, name);
	}
	if (in >= 0)
		close(in);
	return rc;
}

int main(int argc, char **argv)
{
	const char *from = "/probes", *dest = NULL;
	int failed = 0, copied = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(usage, stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			puts(PROG " (sidekick) " SIDEKICK_VERSION);
			return 0;
		} else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
			from = argv[++i];
		} else if (strncmp(argv[i], "--from=", 7) == 0) {
			from = argv[i] + 7;
		} else if (argv[i][0] == '-' || dest != NULL) {
			fprintf(stderr, PROG ": unexpected argument '%s' (see --help)\n", argv[i]);
			return 2;
		} else {
			dest = argv[i];
		}
	}
	if (dest == NULL) {
		fputs(PROG ": missing DEST_DIR (see --help)\n", stderr);
		return 2;
	}

	DIR *d = opendir(from);
	if (d == NULL) {
		fprintf(stderr, PROG ": open %s: %s (--from)\n", from, strerror(errno));
		return 1;
	}
	int to = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (to < 0) {
		fprintf(stderr, PROG ": open %s: %s (DEST_DIR)\n", dest, strerror(errno));
		closedir(d);
		return 1;
	}
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
			continue;
		if (copy_one(dirfd(d), to, e->d_name, dest) < 0)
			failed++;
		else
			copied++;
	}
	closedir(d);
	close(to);
	if (copied == 0 && failed == 0) {
		fprintf(stderr, PROG ": no files in %s (--from)\n", from);
		return 1;
	}
	return failed ? 1 : 0;
}
