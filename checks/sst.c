/* sst.c: the liveness decision over SST and recovery evidence, as a pure function. */
#include "sst.h"

#include <stdio.h>
#include <string.h>

#include "util.h"

static const char *const mysqld_names[] = { "unknown", "none", "running" };

const char *sst_mysqld_str(enum sst_mysqld m)
{
	return mysqld_names[m];
}

static bool alive(struct sst_verdict *v, const char *reason, const char *msg)
{
	v->up = true;
	v->reason = reason;
	sk_strlcpy(v->msg, msg, sizeof(v->msg));
	return true;
}

bool sst_liveness_before(const struct sst_evidence *ev, const char *datadir, const struct sst_policy *p,
			 struct sst_verdict *v)
{
	char m[600];

	if (ev->recovery_file)
		return alive(v, "bypass", "alive: recovery file present");
	if (ev->sleep_forever) {
		snprintf(m, sizeof(m), "alive: %s/sleep-forever present", datadir);
		return alive(v, "bypass", m);
	}
	if (ev->joiner_pid > 0) {
		snprintf(m, sizeof(m),
			 "alive: receiving an SST: %s --role joiner (pid %ld, running %d process%s) under mysqld pid "
			 "%ld (%s)%s",
			 ev->joiner, ev->joiner_pid, ev->joiner_children, ev->joiner_children == 1 ? "" : "es",
			 ev->mysqld_pid, ev->found_by, ev->sst_file ? "; sst_in_progress present" : "");
		return alive(v, "sst", m);
	}
	if (ev->recovering) {
		snprintf(m, sizeof(m), "alive: mysqld pid %ld runs --wsrep-recover (%s)", ev->mysqld_pid, ev->found_by);
		return alive(v, "recovering", m);
	}
	if (ev->recovery_log) {
		snprintf(m, sizeof(m), "alive: %s/wsrep_recovery_verbose.log present", datadir);
		return alive(v, "bypass", m);
	}
	if (!ev->sst_file)
		return false;
	if (p->trust_file) {
		snprintf(m, sizeof(m), "alive: %s/sst_in_progress present (--trust-sst-file)", datadir);
		return alive(v, "bypass", m);
	}
	if (ev->sst_file_age_s < p->grace_s) {
		snprintf(m, sizeof(m), "alive: %s/sst_in_progress present (%lds old, under --sst-file-grace %lds)",
			 datadir, ev->sst_file_age_s, p->grace_s);
		return alive(v, "bypass", m);
	}
	if (ev->mysqld == SST_MYSQLD_UNKNOWN) {
		/* No proof that the transfer is over: the file wins, as in the operator's script. */
		snprintf(m, sizeof(m),
			 "alive: %s/sst_in_progress present (%lds old; mysqld's processes cannot be seen: %s)", datadir,
			 ev->sst_file_age_s, ev->found_by);
		return alive(v, "bypass", m);
	}
	return false;
}

bool sst_stale_note(const struct sst_evidence *ev, const struct sst_policy *p, char *note, size_t len)
{
	if (!ev->sst_file || p->trust_file || ev->sst_file_age_s < p->grace_s || ev->mysqld == SST_MYSQLD_UNKNOWN ||
	    ev->joiner_pid > 0)
		return false;
	if (ev->mysqld == SST_MYSQLD_RUNNING)
		snprintf(
			note, len,
			"sst_in_progress ignored: %lds old (--sst-file-grace %lds) and mysqld pid %ld (%s) runs no SST",
			ev->sst_file_age_s, p->grace_s, ev->mysqld_pid, ev->found_by);
	else
		snprintf(note, len, "sst_in_progress ignored: %lds old (--sst-file-grace %lds) and no mysqld runs (%s)",
			 ev->sst_file_age_s, p->grace_s, ev->found_by);
	return true;
}

bool sst_procs_needed(const struct sst_evidence *files, enum sst_asked asked)
{
	if (files->recovery_file || files->sleep_forever)
		return false;
	if (files->sst_file || files->recovery_log)
		return asked == SST_NOT_ASKED;
	return asked == SST_ANSWER_FAILED;
}
