/* fuzz_mycnf.c: libFuzzer harness for MySQL option files (mycnf_parse).
 *
 * The first byte picks the extra group (none, "mysql", "client-server"); the rest is the file.
 * Checked: an error has a message and leaves every field empty; a port given is in 1..65535;
 * no field holds a newline (one line per setting). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"
#include "mycnf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const groups[] = { NULL, "mysql", "client-server", "" };
	struct mycnf c;
	char err[256] = "", *text;
	const char *fields[4];

	if (size < 1)
		return 0;
	text = xmalloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	if (mycnf_parse(text, groups[data[0] & 3], &c, err, sizeof(err)) < 0) {
		if (!err[0] || c.user || c.password || c.host || c.socket || c.port)
			FAIL("an error without a message, or with fields left set");
	} else {
		if (c.port < 0 || c.port > 65535)
			FAIL("port %ld", c.port);
		fields[0] = c.user, fields[1] = c.password, fields[2] = c.host, fields[3] = c.socket;
		for (size_t i = 0; i < 4; i++)
			if (fields[i] && strchr(fields[i], '\n'))
				FAIL("a value spans lines");
	}
	mycnf_free(&c);
	log_clear_secrets();
	free(text);
	return 0;
}
