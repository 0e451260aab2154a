/* fuzz_statusmap.c: libFuzzer harness for status dumps (statusmap_parse) and the pure verdicts
 * over them (galera_judge for every probe's rules, replica_judge).
 *
 * The input is a `mysql -N` style dump; the first byte picks the rules. Checked: a parse error
 * has a message; every entry has a non-empty name without white space; a verdict's detail is a
 * terminated string and its reason has a name; up exactly when the reason is OK. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "galera.h"
#include "replica.h"
#include "statusmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct statusmap m = { 0 };
	struct galera_rules gr = { 0 };
	struct galera_verdict gv;
	struct replica_rules rr;
	struct replica_verdict rv;
	char err[256] = "";
	unsigned sel;

	if (size < 1)
		return 0;
	sel = data[0];
	if (statusmap_parse(&m, (const char *)data + 1, size - 1, err, sizeof(err)) < 0) {
		if (!err[0])
			FAIL("a parse error without a message");
		statusmap_free(&m);
		return 0;
	}
	for (size_t i = 0; i < m.n; i++)
		if (!m.items[i].name[0] || strpbrk(m.items[i].name, " \t\n"))
			FAIL("entry name '%s'", m.items[i].name);

	gr.need_primary = sel & 1;
	gr.need_synced = sel & 2;
	gr.donor_ok = sel & 4;
	gr.readonly_ok = sel & 8;
	gr.need_maint_disabled = sel & 16;
	gr.need_not_rejecting = sel & 32;
	gr.available_nodes = (sel >> 6) & 3;
	/* The same map serves as status and variables: both are name -> value. */
	galera_judge(&m, galera_rules_need_vars(&gr) ? &m : NULL, &gr, &gv);
	if (!memchr(gv.detail, '\0', sizeof(gv.detail)) || !galera_reason_str(gv.reason) ||
	    gv.up != (gv.reason == GALERA_OK))
		FAIL("galera verdict up=%d reason=%d", gv.up, gv.reason);

	rr.max_lag = (long)(sel % 7) - 1;
	rr.read_only = (int)((sel >> 3) % 3) - 1;
	replica_judge(&m, sel & 0x80 ? 0 : 1, statusmap_get(&m, "read_only"), &rr, &rv);
	if (!memchr(rv.detail, '\0', sizeof(rv.detail)) || !replica_reason_str(rv.reason) ||
	    rv.up != (rv.reason == REPLICA_OK))
		FAIL("replica verdict up=%d reason=%d", rv.up, rv.reason);
	statusmap_free(&m);
	return 0;
}
