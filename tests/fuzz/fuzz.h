/* fuzz.h: what every libFuzzer harness here declares: the entry points and FAIL, which reports a
 * broken invariant and aborts (libFuzzer keeps the input). */
#ifndef SK_FUZZ_H
#define SK_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FAIL(...)                                           \
	do {                                                \
		fprintf(stderr, "INVARIANT: " __VA_ARGS__); \
		fputc('\n', stderr);                        \
		abort();                                    \
	} while (0)

#endif
