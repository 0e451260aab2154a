/* base64.h: strict decoding of standard base64. */
#ifndef SK_BASE64_H
#define SK_BASE64_H

#include <stddef.h>

#include "util.h"

/* Decode canonical standard base64 (the padding required, the bits it throws away zero) into a
 * new buffer with a trailing NUL the caller frees: *out holds *outlen bytes. Returns 0, or -1
 * (nothing allocated) when `in` is not canonical base64. */
int base64_decode(const char *in, char **out, size_t *outlen) SK_MUST_CHECK;

#endif
