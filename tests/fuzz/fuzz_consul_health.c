/* fuzz_consul_health.c: libFuzzer harness for /v1/health/service answers (consul_parse_health_json),
 * and the layout that maps them to servers (layout_build with a services source).
 *
 * The input is the HTTP body. A rejected body must leave the list empty and say why; an accepted
 * one must hold keys "<address>:<port>" with a port from 1 to 65535 and JSON object values, and
 * the layout must take every instance or reject it with a reason, never crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "consul.h"
#include "fuzz.h"
#include "layout.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct consul_kv_list l = { 0 };
	char err[300] = "";
	struct layout_service sv = {
		.name = "mysql", .hostgroup = 31, .meta_prefix = "p_", .weights = true, .label = "service mysql"
	};
	struct layout_config cfg = { .master_prefix = "",
				     .replica_prefix = "",
				     .servers_prefix = "",
				     .users_prefix = "",
				     .announce_prefix = "",
				     .region = "",
				     .user_tag = "t",
				     .services = &sv,
				     .nservices = 1 };
	struct layout_result r;
	struct kv_pair *kv;

	if (consul_parse_health_json((const char *)data, size, &l, err, sizeof(err)) < 0) {
		if (l.n || l.items || !err[0])
			FAIL("a rejected answer left entries or no reason");
		return 0;
	}
	model_server_defaults(&cfg.server_defaults);
	kv = calloc(l.n ? l.n : 1, sizeof(*kv));
	if (!kv)
		abort();
	for (size_t i = 0; i < l.n; i++) {
		const char *colon = strrchr(l.items[i].key, ':');
		char *end = NULL;
		long port = colon ? strtol(colon + 1, &end, 10) : 0;
		char key[600];

		if (!colon || !end || *end || port < 1 || port > 65535)
			FAIL("entry %zu: key '%s' is not <address>:<port>", i, l.items[i].key);
		if (l.items[i].len == 0 || l.items[i].value[0] != '{' || l.items[i].value[l.items[i].len] != '\0')
			FAIL("entry %zu: the value is not a JSON object", i);
		snprintf(key, sizeof(key), SERVICE_KEY_PREFIX "0/%s", l.items[i].key);
		kv[i].key = strdup(key);
		kv[i].value = l.items[i].value;
		kv[i].len = l.items[i].len;
		if (!kv[i].key)
			abort();
	}
	layout_build(&cfg, kv, l.n, &r);
	if (l.n > 0 && r.servers.n == 0 && r.nrejects == 0)
		FAIL("instances neither taken nor rejected");
	for (size_t i = 0; i < r.servers.n; i++)
		if (r.servers.v[i].hostgroup != 31)
			FAIL("an instance outside the service's hostgroup");
	layout_result_free(&r);
	for (size_t i = 0; i < l.n; i++)
		free(kv[i].key);
	free(kv);
	consul_kv_list_free(&l);
	return 0;
}
