/* sst_proc.h: the evidence of a liveness verdict as read from the machine (sst_proc.c): the
 * datadir's files, whom they are trusted from, and mysqld's processes in /proc. The verdict on
 * that evidence is pure (sst.h). */
#ifndef SK_SST_PROC_H
#define SK_SST_PROC_H

#include <stdbool.h>
#include <time.h>

#include "sst.h"

/* Gather the evidence for `datadir` at time `now`: the files, then this datadir's mysqld (the
 * pid file `pid_file`, or when NULL $datadir/<hostname>.pid, $datadir/mysqld.pid,
 * /run/mysqld/mysqld.pid and /var/run/mysqld/mysqld.pid; a pid counts only when its process is
 * a mysqld or mariadbd whose cwd is the datadir; when none does, one pass over /proc for such
 * a process), then its children and theirs (/proc/<pid>/task/<tid>/children) for a
 * wsrep_sst_<method> script with --role joiner and this datadir. Only processes whose real and
 * effective user (the Uid line of /proc/<pid>/status) is root, this process's user or the
 * datadir's owner (ev->trust, filled here) are evidence: another user's is passed over, whatever its name, cwd or pid file, and an
 * unreadable one of another user does not make mysqld "unknown". `proc` is "/proc" (a test
 * may point elsewhere). Never fails: what cannot be read is left out and found_by says why. */
void sst_gather(const char *proc, const char *datadir, const char *pid_file, const char *recovery_file, time_t now,
		struct sst_evidence *ev);

/* sst_gather's two halves: the files of the datadir (a few lstat calls; `ev` is reset first), and
 * mysqld's processes in /proc (a children file per mysqld thread: its cost grows with them).
 * A file counts only from root, this process's user or the datadir's owner (trust_path: through
 * symbolic links of those users only); another user's goes to ev->foreign. */
void sst_gather_files(const char *datadir, const char *recovery_file, time_t now, struct sst_evidence *ev);
void sst_gather_procs(const char *proc, const char *datadir, const char *pid_file, struct sst_evidence *ev);

/* The bypass files only (recovery file, sleep-forever), as sst_gather_files reads them, for
 * readiness-check; `ev` is reset first. */
void sst_gather_bypass(const char *datadir, const char *recovery_file, struct sst_evidence *ev);

/* Whom files are trusted from for `datadir` (this process's user, the datadir's owner): pass
 * t->datadir_owner to trust_path as `also`. */
void sst_trust_of(const char *datadir, struct sst_trust *t);

/* Whether `path` is there from root, this process's user or ev's datadir owner (trust_path);
 * another user's file is added to ev->foreign and is not. For a file outside the evidence whose
 * content decides (mysqld's state file). */
bool sst_trusted_file(const char *path, struct sst_evidence *ev);

#endif
