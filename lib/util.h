/* util.h: small helpers every module uses: memory that aborts on exhaustion, bounded strings, number parsing. */
#ifndef SK_UTIL_H
#define SK_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SK_MUST_CHECK __attribute__((warn_unused_result))
#define SK_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* Allocation that never returns NULL: on exhaustion it prints one line and aborts (one OOM policy). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* The same policy for a library allocation (cJSON) that returned NULL. */
void sk_oom(void) __attribute__((noreturn));

/* Copy src into dst of size n, always NUL-terminated. Returns false when src was truncated. */
bool sk_strlcpy(char *dst, const char *src, size_t n);

/* snprintf into dst that reports truncation as false instead of a silent cut. */
bool sk_fmt(char *dst, size_t n, const char *fmt, ...) SK_PRINTF(3, 4);

/* Set a caller-owned error buffer (may be NULL); always returns -1 so callers can `return sk_err(...)`. */
int sk_err(char *err, size_t errlen, const char *fmt, ...) SK_PRINTF(3, 4);

/* Parse a whole string as a base-10 integer in [min, max]. Leading/trailing blanks are not accepted. */
bool sk_parse_long(const char *s, long min, long max, long *out) SK_MUST_CHECK;

/* Parse a whole string of decimal digits (no sign, no blanks) as a uint64_t; false when it is
 * empty, holds anything else or overflows. */
bool sk_parse_u64(const char *s, uint64_t *out) SK_MUST_CHECK;

/* Whether `s` holds an ASCII control character (below 0x20, or DEL). */
bool sk_has_ctl(const char *s);

/* Parse a whole string as a finite decimal number in [min, max]. */
bool sk_parse_double(const char *s, double min, double max, double *out) SK_MUST_CHECK;

/* Parse a boolean the way shell scripts and env vars spell it: 1/0, yes/no, true/false, on/off. */
bool sk_parse_bool(const char *s, bool *out) SK_MUST_CHECK;

/* Remove ASCII white space at both ends, in place; returns s. */
char *sk_trim(char *s);

/* Case-insensitive ASCII string equality. */
bool sk_streq_ci(const char *a, const char *b);

/* Overwrite memory that held a secret, in a way the compiler keeps (explicit_bzero). */
void sk_wipe(void *p, size_t n);

/* cJSON_Delete after wiping every string value of the tree (a KV document may hold passwords). */
struct cJSON;
void sk_json_delete_wiped(struct cJSON *doc);

/* Read a whole regular file of at most `max` bytes into a NUL-terminated heap buffer.
 * Returns 0 and sets *out / *len, or -1 with a reason in err (missing, unreadable, too large,
 * not a regular file). The caller frees *out. */
int sk_read_file(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen) SK_MUST_CHECK;

/* A check of a file just opened for reading, on its descriptor and fstat (so it judges the very
 * file read, whatever symbolic links led to it): 0 to read it, -1 with err set to refuse it. */
struct stat;
typedef int (*sk_file_check)(const char *path, int fd, const struct stat *st, void *ctx, char *err, size_t errlen);

/* A file to read: its path, the most bytes it may hold, and the check (NULL: none) run on it
 * after the open and before the read, with its context. */
struct sk_file_read {
	const char *path;
	size_t max;
	sk_file_check check;
	void *ctx;
};

/* sk_read_file of the file r names, with its check. */
int sk_read_file_checked(const struct sk_file_read *r, char **out, size_t *len, char *err, size_t errlen) SK_MUST_CHECK;

/* A growing byte buffer with a hard cap; appends past the cap fail instead of growing. */
typedef struct sk_buf {
	char *data;
	size_t len, cap, max;
} sk_buf;

void sk_buf_init(sk_buf *b, size_t max);
bool sk_buf_add(sk_buf *b, const void *p, size_t n) SK_MUST_CHECK;
bool sk_buf_addf(sk_buf *b, const char *fmt, ...) SK_PRINTF(2, 3) SK_MUST_CHECK;
bool sk_buf_add_json_str(sk_buf *b, const char *s) SK_MUST_CHECK;
void sk_buf_free(sk_buf *b);

/* A 128-bit hash of a sequence of fields (FNV-1a 64 and a multiply-xorshift lane side by side),
 * to compare rows without keeping them. Start from any two constants; a string goes in with its
 * length first, so fields cannot run into each other. */
typedef struct sk_hash {
	uint64_t a, b;
} sk_hash;

void sk_hash_bytes(sk_hash *h, const void *p, size_t n);
void sk_hash_str(sk_hash *h, const char *s);
void sk_hash_long(sk_hash *h, long v);

#endif
