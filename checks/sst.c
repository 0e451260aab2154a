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

const char *sst_ignored_line(char *buf, size_t len, const char *path, uid_t owner, const struct sst_trust *t)
{
	if (t->datadir_owner == (uid_t)-1 || t->datadir_owner == t->euid || t->datadir_owner == 0)
		sk_fmt(buf, len, "%s ignored: owned by uid %u, not root or uid %u", path, (unsigned)owner,
		       (unsigned)t->euid);
	else
		sk_fmt(buf, len, "%s ignored: owned by uid %u, not root, uid %u or the datadir's owner uid %u", path,
		       (unsigned)owner, (unsigned)t->euid, (unsigned)t->datadir_owner);
	return buf;
}

bool sst_foreign_note(const struct sst_evidence *ev, char *note, size_t len)
{
	size_t n = 0;

	note[0] = '\0';
	for (int i = 0; i < ev->nforeign && n < len; i++) {
		char line[400];

		sst_ignored_line(line, sizeof(line), ev->foreign[i].path, ev->foreign[i].owner, &ev->trust);
		sk_fmt(note + n, len - n, "%s%s", i ? "; " : "", line);
		n += strlen(note + n);
	}
	return ev->nforeign > 0;
}

static bool alive(const struct sst_evidence *ev, struct sst_verdict *v, const char *reason, const char *msg)
{
	char note[400];

	v->up = true;
	v->reason = reason;
	sk_strlcpy(v->msg, msg, sizeof(v->msg));
	if (sst_foreign_note(ev, note, sizeof(note)))
		sk_fmt(v->msg + strlen(v->msg), sizeof(v->msg) - strlen(v->msg), "; %s", note);
	return true;
}

bool sst_liveness_before(const struct sst_evidence *ev, const char *datadir, const struct sst_policy *p,
			 struct sst_verdict *v)
{
	char m[600];

	if (ev->recovery_file)
		return alive(ev, v, "bypass", "alive: recovery file present");
	if (ev->sleep_forever) {
		snprintf(m, sizeof(m), "alive: %s/sleep-forever present", datadir);
		return alive(ev, v, "bypass", m);
	}
	if (ev->joiner_pid > 0) {
		snprintf(m, sizeof(m),
			 "alive: receiving an SST: %s --role joiner (pid %ld, running %d process%s) under mysqld pid "
			 "%ld (%s)%s",
			 ev->joiner, ev->joiner_pid, ev->joiner_children, ev->joiner_children == 1 ? "" : "es",
			 ev->mysqld_pid, ev->found_by, ev->sst_file ? "; sst_in_progress present" : "");
		return alive(ev, v, "sst", m);
	}
	if (ev->recovering) {
		snprintf(m, sizeof(m), "alive: mysqld pid %ld runs --wsrep-recover (%s)", ev->mysqld_pid, ev->found_by);
		return alive(ev, v, "recovering", m);
	}
	if (ev->recovery_log) {
		snprintf(m, sizeof(m), "alive: %s/wsrep_recovery_verbose.log present", datadir);
		return alive(ev, v, "bypass", m);
	}
	if (!ev->sst_file)
		return false;
	if (p->trust_file) {
		snprintf(m, sizeof(m), "alive: %s/sst_in_progress present (--trust-sst-file)", datadir);
		return alive(ev, v, "bypass", m);
	}
	if (ev->sst_file_age_s < p->grace_s) {
		snprintf(m, sizeof(m), "alive: %s/sst_in_progress present (%lds old, under --sst-file-grace %lds)",
			 datadir, ev->sst_file_age_s, p->grace_s);
		return alive(ev, v, "bypass", m);
	}
	if (ev->mysqld == SST_MYSQLD_UNKNOWN) {
		/* No proof that the transfer is over: the file wins, as in the operator's script. */
		snprintf(m, sizeof(m),
			 "alive: %s/sst_in_progress present (%lds old; mysqld's processes cannot be seen: %s)", datadir,
			 ev->sst_file_age_s, ev->found_by);
		return alive(ev, v, "bypass", m);
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
