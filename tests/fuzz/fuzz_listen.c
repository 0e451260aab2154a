/* fuzz_listen.c: libFuzzer harness for address parsers: http_parse_listen ("[ADDR:]PORT" of
 * --listen and health-listen) and model_split_address / model_check_host (host:port values
 * from Consul KV and the targets list).
 *
 * Checked: an accepted listen address is AF_INET or AF_INET6 with the matching length and a
 * port that is the one written; a rejected one says why; a split host fits its buffer and a
 * port is in 1..65535. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"
#include "model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char *spec = xmalloc(size + 1), err[256] = "", host[MODEL_HOST_MAX + 1];
	const char *bad;
	long port = 0;

	memcpy(spec, data, size);
	spec[size] = '\0';
	if (http_parse_listen(spec, &ss, &len, err, sizeof(err)) == 0) {
		const char *colon = strrchr(spec, ':');
		long want = strtol(colon ? colon + 1 : spec, NULL, 10);

		if (ss.ss_family == AF_INET) {
			if (len != sizeof(struct sockaddr_in) || ntohs(((struct sockaddr_in *)&ss)->sin_port) != want)
				FAIL("IPv4 '%s' gave len %u port %u", spec, (unsigned)len,
				     ntohs(((struct sockaddr_in *)&ss)->sin_port));
		} else if (ss.ss_family == AF_INET6) {
			if (len != sizeof(struct sockaddr_in6) ||
			    ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) != want)
				FAIL("IPv6 '%s' gave len %u", spec, (unsigned)len);
		} else {
			FAIL("family %d for '%s'", ss.ss_family, spec);
		}
	} else if (!err[0]) {
		FAIL("a rejected listen address without a reason");
	}

	memset(host, 'X', sizeof(host));
	bad = model_split_address(spec, 3306, host, sizeof(host), &port);
	if (!bad) {
		if (!memchr(host, '\0', sizeof(host)) || port < 1 || port > 65535)
			FAIL("split '%.300s' gave an unterminated host or port %ld", spec, port);
		(void)model_check_host(host);
	}
	free(spec);
	return 0;
}
