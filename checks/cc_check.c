/* cc_check.c: clustercheck's check of a Galera node (the classic answers), shared by its one-shot,
 * --listen and --register modes (clustercheck.c, register.c). */
#include <string.h>

#include "cc_check.h"
#include "sst_proc.h"
#include "trust.h"

const char *const cc_check_answer_names[] = { "synced", "not synced", "read-only", "manually disabled" };

void cc_check_once(struct cc_checker *c, struct db *db, const deadline_t *dl, struct cc_result *r)
{
	struct statusmap status = { 0 }, vars = { 0 };
	struct galera_verdict v;
	struct db_err e;

	if (!db->connected && probe_galera_connect(db, &c->pc, dl, &e) < 0)
		goto failed;
	if (probe_galera_read(db, dl, &status, galera_rules_need_vars(&c->rules) ? &vars : NULL, &e) < 0) {
		db_close(db);
		goto failed;
	}
	galera_judge(&status, &vars, &c->rules, &v);
	r->answer = v.up ? CC_SYNCED : v.reason == GALERA_READ_ONLY ? CC_READ_ONLY : CC_NOT_SYNCED;
	r->reason = galera_reason_str(v.reason);
	sk_fmt(r->detail, sizeof(r->detail), "%s: %s", v.up ? "synced" : "not synced", v.detail);
	goto done;
failed:
	r->answer = CC_NOT_SYNCED;
	r->reason = e.reason == DB_TIMEOUT ? "timeout" : db_reason_str(e.reason);
	probe_describe_error(&e, &c->pc, c->timeout_ms, "--timeout", r->detail + 12, sizeof(r->detail) - 12);
	memcpy(r->detail, "not synced: ", 12);
done:
	if (r->ignored[0])
		sk_fmt(r->detail + strlen(r->detail), sizeof(r->detail) - strlen(r->detail), "; %s", r->ignored);
	statusmap_free(&status);
	statusmap_free(&vars);
}

bool cc_check_disabled(const struct cc_checker *c, struct cc_result *r)
{
	struct sst_trust t;
	uid_t owner = 0;
	enum trust_verdict tv;

	r->ignored[0] = '\0';
	sst_trust_of(c->sst.datadir, &t);
	tv = c->disabled_file && *c->disabled_file ? trust_path(c->disabled_file, t.datadir_owner, &owner)
						   : TRUST_ABSENT;
	if (tv == TRUST_FOREIGN)
		sst_ignored_line(r->ignored, sizeof(r->ignored), c->disabled_file, owner, &t);
	if (tv != TRUST_OK)
		return false;
	r->answer = CC_DISABLED;
	r->reason = "disabled";
	sk_fmt(r->detail, sizeof(r->detail), "manually disabled: %s exists", c->disabled_file);
	return true;
}
