/* fuzz_log.c: libFuzzer harness for log redaction (log_redact) and line writing (log_msg).
 *
 * Input: the first byte picks how many secrets (0..3) and the format; that many NUL-terminated
 * secrets follow, and the rest, up to a NUL, is the message. Checked: redaction ends, never
 * grows the text, leaves it unchanged when no secret occurs in it, and leaves no secret without a
 * '*' in it (a marker next to other bytes may spell one that has); a line, in either format, is
 * exactly one line, at most 8192 bytes, without a control byte; a JSON line parses, and unless
 * it was cut its "msg" is the redacted message byte for byte. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "log.h"

static void check_line(const char *line, size_t n, const char *redacted, bool json)
{
	static const char mark[] = "[cut: line longer than 8192 bytes]";
	cJSON *doc, *msg;

	if (n == 0 || n > 8192 || line[n - 1] != '\n')
		FAIL("line of %zu bytes not ending in a newline", n);
	for (size_t i = 0; i + 1 < n; i++)
		if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
			FAIL("control byte 0x%02x at %zu", (unsigned char)line[i], i);
	if (!json)
		return;
	doc = cJSON_ParseWithLength(line, n);
	msg = doc ? cJSON_GetObjectItemCaseSensitive(doc, "msg") : NULL;
	if (!cJSON_IsString(msg))
		FAIL("not a JSON line with a msg: %.200s", line);
	if (!strstr(line, mark) && strcmp(msg->valuestring, redacted) != 0)
		FAIL("msg differs from the redacted message");
	cJSON_Delete(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1, *end = (const char *)data + size;
	char *secrets[3], *msg, *redacted, *out = NULL;
	size_t nsecrets, outlen = 0;
	bool json, any = false;
	FILE *mem;

	if (size < 1)
		return 0;
	nsecrets = data[0] % 4;
	json = data[0] & 4;
	for (size_t i = 0; i < nsecrets; i++) {
		size_t len = strnlen(p, (size_t)(end - p));

		secrets[i] = strndup(p, len);
		p += len < (size_t)(end - p) ? len + 1 : len;
	}
	msg = strndup(p, (size_t)(end - p));
	for (size_t i = 0; i < nsecrets; i++) {
		log_add_secret(secrets[i]);
		if (strlen(secrets[i]) >= 3 && strstr(msg, secrets[i]))
			any = true;
	}

	redacted = strdup(msg);
	log_redact(redacted);
	if (strlen(redacted) > strlen(msg))
		FAIL("redaction grew the text from %zu to %zu bytes", strlen(msg), strlen(redacted));
	if (!any && strcmp(redacted, msg) != 0)
		FAIL("redaction changed a text that holds no secret");
	for (size_t i = 0; i < nsecrets; i++)
		if (strlen(secrets[i]) >= 3 && !strchr(secrets[i], '*') && strstr(redacted, secrets[i]))
			FAIL("secret %zu left in the text", i);

	mem = open_memstream(&out, &outlen);
	if (!mem)
		abort();
	log_setup("fuzz", json ? LOG_JSON : LOG_TEXT, LOG_INFO, mem);
	log_info("%s", msg);
	fclose(mem);
	log_setup("fuzz", LOG_TEXT, LOG_INFO, stderr);
	check_line(out, outlen, redacted, json);

	free(out);
	free(redacted);
	free(msg);
	for (size_t i = 0; i < nsecrets; i++)
		free(secrets[i]);
	log_clear_secrets();
	return 0;
}
