/* sst.h: is this mysqld receiving a state transfer or recovering? The evidence (files in the
 * datadir, this mysqld's processes in /proc) and the pure liveness decision over it (sst.c); the
 * thin adapter that gathers it is sst_proc.h. */
#ifndef SK_SST_H
#define SK_SST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

/* Whether the mysqld of the datadir runs, as far as /proc shows. */
enum sst_mysqld {
	SST_MYSQLD_UNKNOWN, /* it cannot be told: /proc unreadable, or a mysqld whose datadir is unknown */
	SST_MYSQLD_NONE, /* no mysqld of this datadir runs */
	SST_MYSQLD_RUNNING, /* mysqld_pid is this datadir's mysqld */
};

const char *sst_mysqld_str(enum sst_mysqld m);

/* Whom a bypass file (or a process, for the datadir's owner) is trusted from besides root: this
 * process's user, and the datadir's owner, who runs mysqld and so controls it anyway. */
struct sst_trust {
	uid_t euid; /* this process's effective user */
	uid_t datadir_owner; /* (uid_t)-1 when the datadir cannot be looked at */
};

/* A bypass file that is there but belongs to someone else (or is reached through someone else's
 * symbolic link): it counts as absent, and the verdict names it. */
struct sst_foreign {
	char path[256];
	uid_t owner;
};

#define SST_MAX_FOREIGN 6

/* Everything a liveness verdict looks at before it asks mysqld. Plain data: the table tests fill
 * it from files, sst_gather from the system. A file counts (true) only when a trusted user owns
 * it; one that is there from anyone else is in `foreign` instead. */
struct sst_evidence {
	bool recovery_file; /* the manual recovery file (/tmp/recovery-case) exists */
	bool sleep_forever; /* $datadir/sleep-forever */
	bool recovery_log; /* $datadir/wsrep_recovery_verbose.log */
	bool sst_file; /* $datadir/sst_in_progress */
	struct sst_trust trust;
	int nforeign;
	struct sst_foreign foreign[SST_MAX_FOREIGN];
	long sst_file_age_s; /* from its mtime; 0 when the mtime is in the future */
	enum sst_mysqld mysqld;
	long mysqld_pid;
	char found_by[320]; /* how mysqld was found, or why it was not ("no pid file, no mysqld with cwd ...") */
	bool recovering; /* that mysqld runs --wsrep-recover */
	long joiner_pid; /* its joiner SST script (--role joiner, this datadir); 0: none */
	char joiner[64]; /* the script's name, "wsrep_sst_rsync" */
	int joiner_children; /* processes the script runs (rsync --daemon, ...) */
	long donor_pid; /* a donor SST script of this mysqld (never evidence of life); 0: none */
};

/* How far a sst_in_progress file is trusted. */
struct sst_policy {
	long grace_s; /* a file older than this, with no SST process of mysqld, is ignored */
	bool trust_file; /* the operator script's rule: the file alone means alive, whatever its age */
};

struct sst_verdict {
	bool up;
	const char *reason; /* "bypass", "sst", "recovering" */
	char msg[600];
};

/* Liveness before mysqld is asked: true when the evidence decides (v filled: the node is alive
 * and v->msg says what was found, then any file ignored: sst_foreign_note), false when mysqld
 * must answer. In order: the recovery and
 * sleep-forever files; a joiner SST process of this mysqld; mysqld running --wsrep-recover;
 * wsrep_recovery_verbose.log; sst_in_progress while younger than the grace period, trusted
 * by policy, or when mysqld's processes cannot be seen. Pure. */
bool sst_liveness_before(const struct sst_evidence *ev, const char *datadir, const struct sst_policy *p,
			 struct sst_verdict *v);

/* When sst_liveness_before let a sst_in_progress file go (stale: older than the grace period
 * and no SST process of mysqld): true and `note` says so, for the verdict that follows. Pure. */
bool sst_stale_note(const struct sst_evidence *ev, const struct sst_policy *p, char *note, size_t len);

/* "PATH ignored: owned by uid N, not root or uid M" (", not root, uid M or the datadir's owner uid
 * D" when the datadir's owner is another user) into buf: why a bypass file did not count. Pure. */
const char *sst_ignored_line(char *buf, size_t len, const char *path, uid_t owner, const struct sst_trust *t);

/* The files of ev->foreign, one sst_ignored_line each, joined with "; " into note; false (note
 * "") when there are none. Pure. */
bool sst_foreign_note(const struct sst_evidence *ev, char *note, size_t len);

/* What a liveness probe knows of mysqld when it decides whether to read /proc. */
enum sst_asked {
	SST_NOT_ASKED, /* mysqld has not been asked yet */
	SST_ANSWER_OK, /* mysqld answered and its answer passes the rule */
	SST_ANSWER_FAILED, /* mysqld could not be asked, or its answer fails the rule */
};

/* Whether mysqld's processes must be read now for the verdict sst_liveness_before would give on
 * the whole evidence, given the files (`files`, from sst_gather_files) and what mysqld said.
 * Never when the recovery or sleep-forever file decides; before asking when sst_in_progress or
 * wsrep_recovery_verbose.log is there (the processes come first in the order and name the
 * stale file); otherwise only once mysqld's answer fails. Pure. */
bool sst_procs_needed(const struct sst_evidence *files, enum sst_asked asked);

#endif
