/* sst_proc.c: gathers the SST evidence from the datadir and /proc: this datadir's mysqld and the
 * SST script it runs (the thin adapter under sst.c's pure decision). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sst.h"
#include "sst_proc.h"
#include "trust.h"
#include "util.h"

#define MAX_CHILDREN 64 /* children of one process looked at */
#define MAX_ARGS 64 /* arguments of one command line looked at */

/* Read at most len-1 bytes of a small file (a /proc entry, a pid file); -1 when it cannot be read. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		return -1;
	while ((size_t)got + 1 < len && (n = read(fd, buf + got, len - 1 - (size_t)got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return -1;
		}
		got += n;
	}
	close(fd);
	buf[got] = '\0';
	return got;
}

static void strip_slashes(char *path)
{
	size_t n = strlen(path);

	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
}

static bool is_mysqld_comm(const char *comm)
{
	return strcmp(comm, "mysqld") == 0 || strcmp(comm, "mariadbd") == 0; /* not mysqld_safe */
}

/* The process's name (comm) into buf; false when it does not exist or cannot be read. */
static bool proc_comm(const char *proc, long pid, char *buf, size_t len)
{
	char path[128];

	if (!sk_fmt(path, sizeof(path), "%s/%ld/comm", proc, pid) || read_small(path, buf, len) < 0)
		return false;
	buf[strcspn(buf, "\n")] = '\0';
	return true;
}

/* 1 when the process's cwd is `dir`, 0 when it is another directory, -1 when it cannot be read
 * (another user's process without ptrace rights, or gone). */
static int cwd_is(const char *proc, long pid, const char *dir)
{
	char path[128], target[PATH_MAX];
	ssize_t n;

	if (!sk_fmt(path, sizeof(path), "%s/%ld/cwd", proc, pid))
		return -1;
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return errno == ENOENT ? 0 : -1;
	target[n] = '\0';
	strip_slashes(target);
	return strcmp(target, dir) == 0;
}

/* The command line as arguments (pointers into buf); a "sh -c STRING" is split into the words
 * of STRING with single quotes removed, as mysqld quotes the SST arguments. */
static int proc_args(const char *proc, long pid, char *buf, size_t len, char **argv, int max)
{
	char path[128];
	ssize_t n;
	int argc = 0;

	if (!sk_fmt(path, sizeof(path), "%s/%ld/cmdline", proc, pid) || (n = read_small(path, buf, len)) <= 0)
		return 0;
	for (char *p = buf; p < buf + n && argc < max; p += strlen(p) + 1)
		argv[argc++] = p;
	if (argc >= 3 && strcmp(argv[1], "-c") == 0) {
		const char *sh = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];

		if (strcmp(sh, "sh") == 0 || strcmp(sh, "bash") == 0 || strcmp(sh, "dash") == 0) {
			char *s = argv[2], *w = s;

			argc = 0;
			while (*s && argc < max) {
				while (*s && isspace((unsigned char)*s))
					s++;
				if (!*s)
					break;
				argv[argc++] = w;
				while (*s && !isspace((unsigned char)*s)) {
					if (*s != '\'')
						*w++ = *s;
					s++;
				}
				if (*s)
					s++;
				*w++ = '\0';
			}
		}
	}
	return argc;
}

enum role { ROLE_NONE, ROLE_JOINER, ROLE_DONOR };

/* Is this command line a wsrep_sst_<method> script for `datadir`? Its role, and its name. */
static enum role sst_role(char **argv, int argc, const char *datadir, char *name, size_t len)
{
	const char *script = NULL, *role = NULL;
	char dd[PATH_MAX];

	/* The script itself, or an interpreter and its flags first (#!/bin/bash -ue). */
	for (int i = 0; i < argc && i < 4 && !script; i++) {
		const char *base = strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i];

		if (strncmp(base, "wsrep_sst_", 10) == 0)
			script = base;
	}
	if (!script)
		return ROLE_NONE;
	for (int i = 0; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--role") == 0)
			role = argv[i + 1];
		if (strcmp(argv[i], "--datadir") == 0) {
			sk_strlcpy(dd, argv[i + 1], sizeof(dd));
			strip_slashes(dd);
			if (strcmp(dd, datadir) != 0)
				return ROLE_NONE; /* another datadir's transfer */
		}
	}
	sk_strlcpy(name, script, len);
	if (role && strcmp(role, "joiner") == 0)
		return ROLE_JOINER;
	return role && strcmp(role, "donor") == 0 ? ROLE_DONOR : ROLE_NONE;
}

/* The children of `pid`: /proc/<pid>/task/<tid>/children for each of its threads (a child is
 * listed under the thread that forked it); where the kernel lacks those files, one pass over
 * /proc for processes whose parent is `pid`. Returns how many (at most max). */
static int children_of(const char *proc, long pid, long *out, int max)
{
	char path[160], buf[4096];
	struct dirent *d;
	DIR *dir;
	int n = 0;
	bool have_files = false;

	if (!sk_fmt(path, sizeof(path), "%s/%ld/task", proc, pid) || !(dir = opendir(path)))
		return 0;
	while ((d = readdir(dir)) != NULL && n < max) {
		char *p, *end;

		if (!isdigit((unsigned char)d->d_name[0]) ||
		    !sk_fmt(path, sizeof(path), "%s/%ld/task/%s/children", proc, pid, d->d_name) ||
		    read_small(path, buf, sizeof(buf)) < 0)
			continue;
		have_files = true;
		for (p = buf; n < max; p = end) {
			long c = strtol(p, &end, 10);

			if (end == p)
				break;
			out[n++] = c;
		}
	}
	closedir(dir);
	if (have_files || !(dir = opendir(proc)))
		return n;
	while ((d = readdir(dir)) != NULL && n < max) {
		char *close_paren;
		long ppid;

		if (!isdigit((unsigned char)d->d_name[0]) ||
		    !sk_fmt(path, sizeof(path), "%s/%s/stat", proc, d->d_name) ||
		    read_small(path, buf, sizeof(buf)) < 0 || !(close_paren = strrchr(buf, ')')))
			continue;
		if (sscanf(close_paren + 1, " %*c %ld", &ppid) == 1 && ppid == pid)
			out[n++] = strtol(d->d_name, NULL, 10);
	}
	closedir(dir);
	return n;
}

/* The real and effective user of a process, from the Uid line of /proc/<pid>/status (readable for
 * every process, unlike its cwd or exe); false when it is gone or cannot be read. */
static bool proc_uids(const char *proc, long pid, uid_t *ruid, uid_t *euid)
{
	char path[128], buf[2048], *line;
	unsigned long r, e;

	if (!sk_fmt(path, sizeof(path), "%s/%ld/status", proc, pid) || read_small(path, buf, sizeof(buf)) < 0 ||
	    !(line = strstr(buf, "\nUid:")) || sscanf(line + 5, "%lu %lu", &r, &e) != 2)
		return false;
	*ruid = (uid_t)r;
	*euid = (uid_t)e;
	return true;
}

static bool uid_trusted(uid_t uid, const struct sst_trust *t)
{
	return uid == 0 || uid == t->euid || (t->datadir_owner != (uid_t)-1 && uid == t->datadir_owner);
}

/* Whether a process may be evidence: its real and effective user are each root, the datadir's
 * owner (mysqld's user) or this process's user (mysqld's user where the datadir is a volume
 * root owns). Another user's process, or one whose user cannot be read, is not: anyone can name
 * a process mysqld and chdir to a datadir they can enter. *uid gets its user. */
static bool proc_trusted(const char *proc, long pid, const struct sst_trust *t, uid_t *uid)
{
	uid_t r, e;

	*uid = (uid_t)-1;
	if (!proc_uids(proc, pid, &r, &e))
		return false;
	*uid = r != 0 ? r : e;
	return uid_trusted(r, t) && uid_trusted(e, t);
}

/* Walk mysqld's descendants (three levels: sh -c, the script, what it runs) for SST scripts of
 * this datadir; the deepest joiner script counts, with the number of processes it runs. */
static void find_sst(const char *proc, long pid, const char *datadir, int depth, struct sst_evidence *ev)
{
	long kids[MAX_CHILDREN];
	int n = children_of(proc, pid, kids, MAX_CHILDREN);

	for (int i = 0; i < n; i++) {
		char buf[4096], name[64], *argv[MAX_ARGS];
		uid_t uid;
		int argc;
		enum role r;

		if (!proc_trusted(proc, kids[i], &ev->trust, &uid))
			continue;
		argc = proc_args(proc, kids[i], buf, sizeof(buf), argv, MAX_ARGS);
		r = sst_role(argv, argc, datadir, name, sizeof(name));

		if (r == ROLE_JOINER) {
			long grand[MAX_CHILDREN];

			ev->joiner_pid = kids[i];
			sk_strlcpy(ev->joiner, name, sizeof(ev->joiner));
			ev->joiner_children = children_of(proc, kids[i], grand, MAX_CHILDREN);
			if (depth < 3)
				find_sst(proc, kids[i], datadir, depth + 1, ev);
			return;
		}
		if (r == ROLE_DONOR) {
			ev->donor_pid = kids[i];
			if (depth < 3)
				find_sst(proc, kids[i], datadir, depth + 1, ev);
		}
	}
}

/* What a pid is to this datadir. */
enum ours {
	OURS_NO, /* gone, not a mysqld, a zombie, or another datadir's */
	OURS_YES, /* this datadir's mysqld */
	OURS_UNREADABLE, /* a mysqld of a trusted user whose cwd cannot be read */
	OURS_FOREIGN, /* a process named mysqld of another user: never evidence */
};

/* Is `pid` this datadir's mysqld, run by a user `t` trusts (proc_trusted)? *uid gets the user of
 * a process named mysqld. */
static enum ours our_mysqld(const char *proc, long pid, const char *datadir, const struct sst_trust *t, uid_t *uid)
{
	char comm[64], path[128], stat[512], *close_paren;
	int cwd;

	if (pid <= 0 || !proc_comm(proc, pid, comm, sizeof(comm)) || !is_mysqld_comm(comm))
		return OURS_NO;
	if (!proc_trusted(proc, pid, t, uid))
		return OURS_FOREIGN;
	/* A zombie (exited, not yet reaped) is not a running mysqld. */
	if (sk_fmt(path, sizeof(path), "%s/%ld/stat", proc, pid) && read_small(path, stat, sizeof(stat)) > 0 &&
	    (close_paren = strrchr(stat, ')')) && close_paren[1] == ' ' && close_paren[2] &&
	    strchr("ZX", close_paren[2]))
		return OURS_NO;
	cwd = cwd_is(proc, pid, datadir);
	return cwd < 0 ? OURS_UNREADABLE : cwd ? OURS_YES : OURS_NO;
}

/* The SST script in $datadir/wsrep_sst.pid (MariaDB's wsrep_sst_common writes it) names its
 * mysqld with --parent: true when that is this datadir's mysqld. */
static bool sst_script_parent(const char *proc, const char *datadir, struct sst_evidence *ev)
{
	char path[PATH_MAX], text[64], buf[4096], name[64], *argv[MAX_ARGS];
	long script, parent;
	uid_t uid;
	int argc;

	if (!sk_fmt(path, sizeof(path), "%s/wsrep_sst.pid", datadir) || read_small(path, text, sizeof(text)) < 0 ||
	    !sk_parse_long(sk_trim(text), 1, INT_MAX, &script))
		return false;
	if (!proc_trusted(proc, script, &ev->trust, &uid))
		return false;
	argc = proc_args(proc, script, buf, sizeof(buf), argv, MAX_ARGS);
	if (sst_role(argv, argc, datadir, name, sizeof(name)) == ROLE_NONE)
		return false;
	for (int i = 0; i + 1 < argc; i++) {
		if (strcmp(argv[i], "--parent") == 0 && sk_parse_long(argv[i + 1], 1, INT_MAX, &parent) &&
		    our_mysqld(proc, parent, datadir, &ev->trust, &uid) == OURS_YES) {
			ev->mysqld = SST_MYSQLD_RUNNING;
			ev->mysqld_pid = parent;
			sk_fmt(ev->found_by, sizeof(ev->found_by), "the --parent of %s in %s", name, path);
			return true;
		}
	}
	return false;
}

/* The pid files that may name mysqld: --pid-file, else the usual places. Returns the count. */
static size_t pid_file_candidates(const char *datadir, const char *pid_file, char cand[2][PATH_MAX],
				  const char *candidates[4])
{
	char host[256] = "";
	size_t nc = 0;

	if (pid_file && *pid_file) {
		candidates[nc++] = pid_file;
		return nc;
	}
	if (gethostname(host, sizeof(host) - 1) == 0 && host[0] &&
	    sk_fmt(cand[0], sizeof(cand[0]), "%s/%s.pid", datadir, host))
		candidates[nc++] = cand[0];
	if (sk_fmt(cand[1], sizeof(cand[1]), "%s/mysqld.pid", datadir))
		candidates[nc++] = cand[1];
	candidates[nc++] = "/run/mysqld/mysqld.pid";
	candidates[nc++] = "/var/run/mysqld/mysqld.pid";
	return nc;
}

/* What the pid files said when none named our mysqld, for the search by cwd that follows. */
struct pid_file_miss {
	char why[200]; /* what the files held ("" when nothing) */
	long unreadable; /* a mysqld whose cwd cannot be read (0: none) */
};

/* mysqld from a pid file that names a mysqld of this datadir: true with ev filled; else `miss`
 * says what the files held. */
static bool from_pid_files(const char *proc, const char *datadir, const char *pid_file, struct sst_evidence *ev,
			   struct pid_file_miss *miss)
{
	char *why = miss->why;
	size_t whylen = sizeof(miss->why);
	char cand[2][PATH_MAX], text[64];
	const char *candidates[4];
	size_t nc = pid_file_candidates(datadir, pid_file, cand, candidates);

	for (size_t i = 0; i < nc; i++) {
		long pid;
		uid_t uid = 0;
		enum ours ours;

		if (read_small(candidates[i], text, sizeof(text)) < 0)
			continue;
		if (!sk_parse_long(sk_trim(text), 1, INT_MAX, &pid)) {
			sk_fmt(why, whylen, "pid file %s holds no pid; ", candidates[i]);
			continue;
		}
		ours = our_mysqld(proc, pid, datadir, &ev->trust, &uid);
		if (ours == OURS_YES ||
		    (ours == OURS_UNREADABLE &&
		     (candidates[i] == pid_file || strncmp(candidates[i], datadir, strlen(datadir)) == 0))) {
			ev->mysqld = SST_MYSQLD_RUNNING;
			ev->mysqld_pid = pid;
			sk_fmt(ev->found_by, sizeof(ev->found_by), "pid file %s", candidates[i]);
			return true;
		}
		if (ours == OURS_UNREADABLE)
			miss->unreadable = pid;
		else if (ours == OURS_FOREIGN) /* pid reuse, or a planted process: not ours */
			sk_fmt(why, whylen,
			       "pid file %s names pid %ld, a mysqld of uid %u, not root, the probe's user or the "
			       "datadir's owner; ",
			       candidates[i], pid, (unsigned)uid);
		else
			sk_fmt(why, whylen, "pid file %s names pid %ld, not a mysqld of this datadir; ", candidates[i],
			       pid);
	}
	return false;
}

/* One pass over /proc, reading only the name of each process and the user and cwd of each
 * mysqld. Another user's mysqld is passed over: it neither ends nor blocks the pass, and when no
 * mysqld is found found_by names it. */
static void by_cwd(const char *proc, const char *datadir, struct sst_evidence *ev, const char *why, long unreadable)
{
	struct dirent *d;
	DIR *dir;
	long foreign = 0;
	uid_t foreign_uid = 0;

	if (!(dir = opendir(proc))) {
		ev->mysqld = SST_MYSQLD_UNKNOWN;
		sk_fmt(ev->found_by, sizeof(ev->found_by), "%scannot read %s: %s", why, proc, strerror(errno));
		return;
	}
	ev->mysqld = SST_MYSQLD_NONE;
	while ((d = readdir(dir)) != NULL && ev->mysqld != SST_MYSQLD_RUNNING) {
		long pid;
		uid_t uid = 0;
		enum ours ours;

		if (!isdigit((unsigned char)d->d_name[0]) || !sk_parse_long(d->d_name, 1, INT_MAX, &pid))
			continue;
		ours = our_mysqld(proc, pid, datadir, &ev->trust, &uid);
		if (ours == OURS_YES) {
			ev->mysqld = SST_MYSQLD_RUNNING;
			ev->mysqld_pid = pid;
			sk_fmt(ev->found_by, sizeof(ev->found_by), "%sfound by its cwd in %s", why, proc);
		} else if (ours == OURS_UNREADABLE) {
			unreadable = pid;
		} else if (ours == OURS_FOREIGN && cwd_is(proc, pid, datadir) != 0) {
			foreign = pid; /* in the datadir, or cannot be told: worth naming */
			foreign_uid = uid;
		}
	}
	closedir(dir);
	if (ev->mysqld != SST_MYSQLD_RUNNING && unreadable) {
		ev->mysqld = SST_MYSQLD_UNKNOWN;
		sk_fmt(ev->found_by, sizeof(ev->found_by), "%sthe cwd of mysqld pid %ld cannot be read", why,
		       unreadable);
	} else if (ev->mysqld != SST_MYSQLD_RUNNING)
		sk_fmt(ev->found_by, sizeof(ev->found_by), "%sno mysqld process has its cwd in %s", why, datadir);
	if (foreign && ev->mysqld != SST_MYSQLD_RUNNING)
		sk_fmt(ev->found_by + strlen(ev->found_by), sizeof(ev->found_by) - strlen(ev->found_by),
		       "; mysqld pid %ld of uid %u passed over: not root, the probe's user or the datadir's owner",
		       foreign, (unsigned)foreign_uid);
}

/* mysqld chdirs to its datadir at start, before any SST: its cwd identifies it. */
static void find_mysqld(const char *proc, const char *datadir, const char *pid_file, struct sst_evidence *ev)
{
	struct pid_file_miss miss = { .why = "" };

	if (from_pid_files(proc, datadir, pid_file, ev, &miss))
		return;
	/* A joiner writes its pid file only after the transfer; MariaDB's SST scripts write theirs
	 * ($datadir/wsrep_sst.pid) and name mysqld with --parent. */
	if (sst_script_parent(proc, datadir, ev))
		return;
	by_cwd(proc, datadir, ev, miss.why, miss.unreadable);
}

/* The datadir as /proc shows mysqld's cwd: resolved, without trailing slashes. */
static void real_datadir(const char *datadir, char *real, size_t len)
{
	if (!realpath(datadir, real))
		sk_strlcpy(real, datadir, len);
	strip_slashes(real);
}

void sst_trust_of(const char *datadir, struct sst_trust *t)
{
	struct stat st;

	t->euid = geteuid();
	t->datadir_owner = datadir && *datadir && stat(datadir, &st) == 0 ? st.st_uid : (uid_t)-1;
}

/* Whether bypass file `path` (or `dir`/`name` when dir is set) counts: there from a trusted owner
 * (st filled); there from another user is recorded in ev->foreign and does not count. */
static bool trusted_file(const char *dir, const char *path, struct sst_evidence *ev, struct stat *st)
{
	char full[PATH_MAX];
	uid_t owner = 0;

	if (!path || !*path || (dir && !sk_fmt(full, sizeof(full), "%s/%s", dir, path)))
		return false;
	if (dir)
		path = full;
	switch (trust_path(path, ev->trust.datadir_owner, &owner)) {
	case TRUST_OK: return stat(path, st) == 0;
	case TRUST_FOREIGN:
		if (ev->nforeign < SST_MAX_FOREIGN) {
			sk_strlcpy(ev->foreign[ev->nforeign].path, path, sizeof(ev->foreign[0].path));
			ev->foreign[ev->nforeign++].owner = owner;
		}
		return false;
	default: return false;
	}
}

bool sst_trusted_file(const char *path, struct sst_evidence *ev)
{
	struct stat st;

	return trusted_file(NULL, path, ev, &st);
}

void sst_gather_bypass(const char *datadir, const char *recovery_file, struct sst_evidence *ev)
{
	char real[PATH_MAX];
	struct stat st;

	memset(ev, 0, sizeof(*ev));
	real_datadir(datadir, real, sizeof(real));
	sst_trust_of(real, &ev->trust);
	ev->recovery_file = trusted_file(NULL, recovery_file, ev, &st);
	ev->sleep_forever = trusted_file(real, "sleep-forever", ev, &st);
}

void sst_gather_files(const char *datadir, const char *recovery_file, time_t now, struct sst_evidence *ev)
{
	char real[PATH_MAX];
	struct stat st;

	sst_gather_bypass(datadir, recovery_file, ev);
	real_datadir(datadir, real, sizeof(real));
	ev->recovery_log = trusted_file(real, "wsrep_recovery_verbose.log", ev, &st);
	if (trusted_file(real, "sst_in_progress", ev, &st)) {
		ev->sst_file = true;
		ev->sst_file_age_s = now > st.st_mtime ? (long)(now - st.st_mtime) : 0;
	}
}

void sst_gather_procs(const char *proc, const char *datadir, const char *pid_file, struct sst_evidence *ev)
{
	char real[PATH_MAX], buf[4096], *argv[MAX_ARGS];
	int argc;

	real_datadir(datadir, real, sizeof(real));
	sst_trust_of(real, &ev->trust);
	find_mysqld(proc, real, pid_file, ev);
	if (ev->mysqld != SST_MYSQLD_RUNNING)
		return;
	argc = proc_args(proc, ev->mysqld_pid, buf, sizeof(buf), argv, MAX_ARGS);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--wsrep-recover") == 0 || strcmp(argv[i], "--wsrep_recover") == 0)
			ev->recovering = true;
	find_sst(proc, ev->mysqld_pid, real, 1, ev);
}

void sst_gather(const char *proc, const char *datadir, const char *pid_file, const char *recovery_file, time_t now,
		struct sst_evidence *ev)
{
	sst_gather_files(datadir, recovery_file, now, ev);
	if (ev->recovery_file || ev->sleep_forever)
		return; /* decided already: no need to look at processes */
	sst_gather_procs(proc, datadir, pid_file, ev);
}
