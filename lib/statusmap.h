/* statusmap.h: a small name -> value map for SHOW GLOBAL STATUS / VARIABLES and replica status. */
#ifndef SK_STATUSMAP_H
#define SK_STATUSMAP_H

#include <stddef.h>

#include "util.h"

#define STATUSMAP_MAX 4096 /* entries; more is an error, not growth without bound */

struct statusmap {
	size_t n, cap;
	struct statusmap_item {
		char *name;
		char *value; /* NULL for SQL NULL */
	} * items;
};

/* Add or replace an entry (names compare case-insensitively). Returns -1 when full. */
int statusmap_set(struct statusmap *m, const char *name, const char *value) SK_MUST_CHECK;

/* The value for `name` (case-insensitive), or NULL when absent or SQL NULL. */
const char *statusmap_get(const struct statusmap *m, const char *name);

/* True when `name` is present (even with a NULL value). */
int statusmap_has(const struct statusmap *m, const char *name);

/* Parse a text dump: one "name<TAB or spaces>value" pair a line, as `mysql -N` prints
 * SHOW GLOBAL STATUS; "#" lines are comments; a value spelled NULL is SQL NULL; a line
 * with a name only has the empty value. Returns 0 or -1 with err set (line too long, too
 * many entries, a NUL byte). Used by the table tests and the fuzzer. */
int statusmap_parse(struct statusmap *m, const char *text, size_t len, char *err, size_t errlen) SK_MUST_CHECK;

void statusmap_free(struct statusmap *m);

#endif
