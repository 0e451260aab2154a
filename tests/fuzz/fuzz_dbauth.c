/* fuzz_dbauth.c: libFuzzer harness for the login tap (dbauth_feed), which reads the method a
 * server asks for out of whatever bytes come back from the port (a squatter's included).
 *
 * The input is the byte stream the client reads; the first byte picks how it is cut into reads.
 * Checked: the tap never reads or writes out of bounds, its name is always a NUL-terminated
 * string of at most 63 bytes, and the result does not depend on how the stream was cut. */
#include <string.h>

#include "dbauth.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dbauth_tap whole, cut;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 7 + 1;
	data++;
	size--;
	memset(&whole, 0, sizeof(whole));
	memset(&cut, 0, sizeof(cut));
	dbauth_feed(&whole, data, size);
	for (size_t at = 0; at < size; at += step)
		dbauth_feed(&cut, data + at, size - at < step ? size - at : step);
	if (memchr(whole.asked, '\0', sizeof(whole.asked)) == NULL)
		FAIL("the asked method is not NUL-terminated");
	if (strcmp(whole.asked, cut.asked) != 0)
		FAIL("the result depends on how the reads were cut: '%s' against '%s'", whole.asked, cut.asked);
	return 0;
}
