/* test_checks.c: table tests of the Galera and replica verdicts; one case a file in tests/data/checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "galera.h"
#include "replica.h"
#include "statusmap.h"
#include "testdata.h"

struct tcase {
	struct statusmap head, status, vars, row;
};

/* Split a case file into "key = value" header lines and [status] / [vars] / [row] sections. */
static void parse_case(const char *path, struct tcase *c)
{
	char *text = testdata_read(path), *p = text, err[256];
	struct statusmap *cur = &c->head;

	memset(c, 0, sizeof(*c));
	while (*p) {
		char *nl = strchr(p, '\n'), *eq;
		char line[1024];

		if (nl)
			*nl = '\0';
		sk_strlcpy(line, p, sizeof(line));
		p = nl ? nl + 1 : p + strlen(p);
		sk_trim(line);
		if (!line[0] || line[0] == '#')
			continue;
		if (strcmp(line, "[status]") == 0) {
			cur = &c->status;
			continue;
		}
		if (strcmp(line, "[vars]") == 0) {
			cur = &c->vars;
			continue;
		}
		if (strcmp(line, "[row]") == 0) {
			cur = &c->row;
			continue;
		}
		if (cur == &c->head) {
			eq = strchr(line, '=');
			assert_non_null(eq);
			*eq = '\0';
			assert_int_equal(statusmap_set(cur, sk_trim(line), sk_trim(eq + 1)), 0);
		} else {
			/* Sections go through the same text parser the fuzzer exercises. */
			if (statusmap_parse(cur, line, strlen(line), err, sizeof(err)) != 0)
				fail_msg("%s: %s", path, err);
		}
	}
	free(text);
}

static long head_long(const struct tcase *c, const char *key, long def)
{
	const char *v = statusmap_get(&c->head, key);
	long n;

	if (!v)
		return def;
	assert_true(sk_parse_long(v, -1000000, 1000000000, &n));
	return n;
}

static void rules_for(const struct tcase *c, struct galera_rules *r)
{
	const char *preset = statusmap_get(&c->head, "rules");

	memset(r, 0, sizeof(*r));
	r->readonly_ok = true;
	assert_non_null(preset);
	if (strcmp(preset, "liveness") == 0) {
		r->need_primary = true;
	} else if (strcmp(preset, "readiness") == 0) {
		r->need_primary = r->need_synced = r->donor_ok = true;
	} else if (strcmp(preset, "clustercheck") == 0) {
		r->need_primary = r->need_synced = true;
	} else if (strcmp(preset, "haproxy") == 0) {
		r->need_primary = r->need_synced = r->need_maint_disabled = r->need_not_rejecting = true;
		r->available_nodes = 1;
	} else {
		fail_msg("unknown rules preset '%s'", preset);
	}
	r->donor_ok = head_long(c, "donor_ok", r->donor_ok) != 0;
	r->readonly_ok = head_long(c, "readonly_ok", r->readonly_ok) != 0;
	r->available_nodes = (int)head_long(c, "available_nodes", r->available_nodes);
}

static void run_case(void **state)
{
	const char *path = *state;
	struct tcase c;
	const char *kind, *want_reason, *want_detail;
	bool up;
	const char *reason, *detail;
	struct galera_verdict gv;
	struct replica_verdict rv;

	parse_case(path, &c);
	kind = statusmap_get(&c.head, "kind");
	want_reason = statusmap_get(&c.head, "expect_reason");
	want_detail = statusmap_get(&c.head, "expect_detail");
	assert_non_null(want_reason);
	if (kind && strcmp(kind, "replica") == 0) {
		struct replica_rules rr = {
			.max_lag = head_long(&c, "max_lag", -1),
			.read_only = (int)head_long(&c, "read_only_rule", -1),
		};

		replica_judge(&c.row, (unsigned long)head_long(&c, "nrows", 1), statusmap_get(&c.vars, "read_only"),
			      &rr, &rv);
		up = rv.up;
		reason = replica_reason_str(rv.reason);
		detail = rv.detail;
	} else {
		struct galera_rules gr;

		rules_for(&c, &gr);
		galera_judge(&c.status, c.vars.n ? &c.vars : NULL, &gr, &gv);
		up = gv.up;
		reason = galera_reason_str(gv.reason);
		detail = gv.detail;
	}
	if ((long)up != head_long(&c, "expect_up", -1) || strcmp(reason, want_reason) != 0 ||
	    (want_detail && strcmp(detail, want_detail) != 0))
		fail_msg("%s: got up=%d reason=%s detail='%s'; want up=%ld reason=%s detail='%s'", path, up, reason,
			 detail, head_long(&c, "expect_up", -1), want_reason, want_detail ? want_detail : "(any)");
	statusmap_free(&c.head);
	statusmap_free(&c.status);
	statusmap_free(&c.vars);
	statusmap_free(&c.row);
}

int main(void)
{
	char **files;
	size_t n = testdata_list("checks", ".case", &files);
	struct CMUnitTest *tests = xcalloc(n ? n : 1, sizeof(*tests));
	int rc;

	if (n == 0) {
		fprintf(stderr, "no cases found under %s/checks\n", testdata_dir());
		return 1;
	}
	for (size_t i = 0; i < n; i++) {
		tests[i].name = strrchr(files[i], '/') + 1;
		tests[i].test_func = run_case;
		tests[i].initial_state = files[i];
	}
	rc = _cmocka_run_group_tests("checks", tests, n, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		free(files[i]);
	free(files);
	free(tests);
	return rc;
}
