/* secret.h: passwords and tokens from secret files, refused when other users could have written
 * them; never from argv (MySQL option files: mycnf.h). */
#ifndef SK_SECRET_H
#define SK_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

#define SECRET_MAX 4096 /* a password or token file larger than this is an error */

/* What is known of a file that holds a secret, from its descriptor (fstat) and its path. */
struct secret_facts {
	mode_t mode; /* st_mode */
	bool owner_trusted; /* owned by root or this process's effective user (trust_uid) */
	bool owner_root;
	bool group_ours; /* its group is this process's effective group or one of its supplementary groups */
	bool k8s_layout; /* reached through a kubelet "..data" link (a Kubernetes Secret volume) */
	bool readonly_mount; /* on a read-only mount */
};

/* What secret_judge finds. The refusals first: a file another user could have written is not
 * this host's secret (and a MySQL option file that can be rewritten can redirect host=). */
enum secret_finding {
	SECRET_FILE_OK,
	SECRET_FILE_READABLE, /* other users can read it: a warning */
	SECRET_FILE_FOREIGN, /* owned by another user than root or this process's: refused */
	SECRET_FILE_WORLD_WRITABLE, /* every user can write it: refused */
	SECRET_FILE_GROUP_WRITABLE, /* its group can write it and that group is not one of ours: refused */
};

/* The rule, pure: an untrusted owner, then the world write bit, then the group write bit when the
 * group is not one of this process's (a Kubernetes fsGroup is: the pod's processes carry it) are
 * refusals; the world read bit is a warning, except for a file Kubernetes manages (k8s_layout, or
 * root-owned on a read-only mount: a Secret volume, whose mode the Pod spec's defaultMode sets,
 * 0644 by default), which would otherwise warn at every probe run. */
enum secret_finding secret_judge(const struct secret_facts *f);

/* "ok", "readable", "foreign", "world_writable", "group_writable". */
const char *secret_finding_str(enum secret_finding f);

/* True for the findings that refuse the file. */
bool secret_finding_refuses(enum secret_finding f);

/* secret_check's context: an owner trusted besides root and this process's user (`also`: the
 * datadir's owner for a MySQL option file in the datadir; 0 for none), and what it found, for the
 * caller to warn about (SECRET_FILE_READABLE) after the read. */
struct secret_seen {
	uid_t also;
	enum secret_finding finding;
	mode_t mode;
};

/* An sk_file_check (ctx: a struct secret_seen, may be NULL): gathers the facts of the file just
 * opened (fstat, fstatvfs, the path's "..data" link) and refuses it, with err
 * "PATH: refused: why (what to do)", when secret_judge refuses it. Only the file itself is
 * judged, not the directories or links on its path. */
int secret_check(const char *path, int fd, const struct stat *st, void *ctx, char *err, size_t errlen);

/* The warning line for a readable file, into buf: "PATH: other users can read it (mode 0644;
 * chmod o-r PATH)". Returns buf. */
const char *secret_readable_msg(char *buf, size_t len, const char *path, mode_t mode);

/* Read a secret file (a Kubernetes secret mount: the value, maybe with a trailing newline).
 * One trailing "\n" or "\r\n" is removed. Refused (secret_check) when another user could have
 * written it; logs one warning (secret_readable_msg) when other users can read it. Returns a
 * heap string the caller wipes and frees, or NULL with err set (missing, unreadable, refused, too
 * large, contains a NUL byte). The value is registered with the log redactor. */
char *secret_read_file(const char *path, char *err, size_t errlen) SK_MUST_CHECK;

/* A one-value setting from the same kind of file (haproxy-check's HA_CONNECTION_TIMEOUT,
 * OK_IF_DONOR, AVAILABLE_NODES): refused like a secret when another user could have written it,
 * but never warned about readers and not registered as a secret. Trimmed as secret_read_file. */
char *secret_read_setting(const char *path, char *err, size_t errlen) SK_MUST_CHECK;

#endif
