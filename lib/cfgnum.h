/* cfgnum.h: the numbers of a libconfig file checked as written, before libconfig reads them. */
#ifndef SK_CFGNUM_H
#define SK_CFGNUM_H

#include <stddef.h>

#include "util.h"

/* Debian's libconfig (1.5) keeps an integer written without an L suffix in 32 bits and wraps it
 * silently (4294967306 reads as 10, 0xFFFFFFFF as -1), clamps one with the suffix to the 64-bit
 * range, and reads 1e400 as infinity. Scan `text` (a whole file that libconfig accepted) for its
 * number literals, skipping comments and strings, and refuse the first one that libconfig would
 * not read as written: "PATH:LINE: NAME: LITERAL is out of range (...)", NAME being the setting
 * it belongs to. Returns 0, or -1 with err set. */
int cfgnum_check(const char *text, const char *path, char *err, size_t errlen) SK_MUST_CHECK;

#endif
