/* util.c: memory, string and number helpers shared by every binary: the one file whose exports
 * carry no file name (sk_*, and x* for allocation that aborts on exhaustion). */
#include "util.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void oom(size_t n)
{
	fprintf(stderr, "out of memory (%zu bytes)\n", n);
	abort();
}

void sk_oom(void)
{
	oom(0);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (!q)
		oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

bool sk_strlcpy(char *dst, const char *src, size_t n)
{
	size_t len = strlen(src);

	if (n == 0)
		return false;
	if (len >= n) {
		memcpy(dst, src, n - 1);
		dst[n - 1] = '\0';
		return false;
	}
	memcpy(dst, src, len + 1);
	return true;
}

bool sk_fmt(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(dst, n, fmt, ap);
	va_end(ap);
	return r >= 0 && (size_t)r < n;
}

int sk_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

bool sk_parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return false;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool sk_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

bool sk_has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

bool sk_parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s || isspace((unsigned char)*s))
		return false;
	/* Only plain decimals: no hex floats, inf or nan from strtod. */
	for (const char *p = s; *p; p++)
		if (!isdigit((unsigned char)*p) && *p != '.' && *p != '-' && *p != '+')
			return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return false;
	*out = v;
	return true;
}

bool sk_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on" };
	static const char *const no[] = { "0", "no", "false", "off" };

	for (size_t i = 0; i < SK_ARRAY_LEN(yes); i++) {
		if (sk_streq_ci(s, yes[i])) {
			*out = true;
			return true;
		}
		if (sk_streq_ci(s, no[i])) {
			*out = false;
			return true;
		}
	}
	return false;
}

char *sk_trim(char *s)
{
	size_t len;
	char *p = s;

	while (*p && isspace((unsigned char)*p))
		p++;
	len = strlen(p);
	while (len && isspace((unsigned char)p[len - 1]))
		len--;
	memmove(s, p, len);
	s[len] = '\0';
	return s;
}

bool sk_streq_ci(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

void sk_wipe(void *p, size_t n)
{
	if (p && n)
		explicit_bzero(p, n);
}

static void json_wipe(cJSON *node)
{
	for (; node; node = node->next) {
		if (node->valuestring)
			sk_wipe(node->valuestring, strlen(node->valuestring));
		if (node->child)
			json_wipe(node->child); /* cJSON's parser limits the depth (CJSON_NESTING_LIMIT) */
	}
}

void sk_json_delete_wiped(cJSON *doc)
{
	json_wipe(doc);
	cJSON_Delete(doc);
}

/* Read the rest of `fd` (at most r->max bytes) into a new NUL-terminated buffer; closes fd. */
static int read_all(int fd, const struct sk_file_read *r, char **out, size_t *len, char *err, size_t errlen)
{
	const char *path = r->path;
	size_t max = r->max;
	char *buf = xmalloc(max + 1);
	size_t got = 0;

	for (;;) {
		ssize_t n = read(fd, buf + got, max + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			free(buf);
			return sk_err(err, errlen, "%s: %s", path, strerror(e));
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > max) {
			close(fd);
			sk_wipe(buf, got);
			free(buf);
			return sk_err(err, errlen, "%s: too large (more than %zu bytes)", path, max);
		}
	}
	close(fd);
	buf[got] = '\0';
	*out = buf;
	if (len)
		*len = got;
	return 0;
}

int sk_read_file_checked(const struct sk_file_read *r, char **out, size_t *len, char *err, size_t errlen)
{
	const char *path = r->path;
	size_t max = r->max;
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return sk_err(err, errlen, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return sk_err(err, errlen, "%s: not a regular file", path);
	}
	if (r->check && r->check(path, fd, &st, r->ctx, err, errlen) < 0) {
		close(fd);
		return -1;
	}
	if ((size_t)st.st_size > max) {
		close(fd);
		return sk_err(err, errlen, "%s: too large (%lld bytes, at most %zu)", path, (long long)st.st_size, max);
	}
	return read_all(fd, r, out, len, err, errlen);
}

int sk_read_file(const char *path, size_t max, char **out, size_t *len, char *err, size_t errlen)
{
	return sk_read_file_checked(&(struct sk_file_read){ path, max, NULL, NULL }, out, len, err, errlen);
}

void sk_buf_init(sk_buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

bool sk_buf_add(sk_buf *b, const void *p, size_t n)
{
	if (n > b->max - b->len)
		return false;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 32; /* many buffers end as one short string: no slack */

		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > b->max + 1)
			cap = b->max + 1;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return true;
}

bool sk_buf_addf(sk_buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (r < 0)
		return false;
	if ((size_t)r < sizeof(small))
		return sk_buf_add(b, small, (size_t)r);
	{
		char *big = xmalloc((size_t)r + 1);
		bool ok;

		va_start(ap, fmt);
		vsnprintf(big, (size_t)r + 1, fmt, ap);
		va_end(ap);
		ok = sk_buf_add(b, big, (size_t)r);
		free(big);
		return ok;
	}
}

bool sk_buf_add_json_str(sk_buf *b, const char *s)
{
	if (!sk_buf_add(b, "\"", 1))
		return false;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		char esc[8];

		switch (*p) {
		case '"':
			if (!sk_buf_add(b, "\\\"", 2))
				return false;
			break;
		case '\\':
			if (!sk_buf_add(b, "\\\\", 2))
				return false;
			break;
		case '\n':
			if (!sk_buf_add(b, "\\n", 2))
				return false;
			break;
		case '\r':
			if (!sk_buf_add(b, "\\r", 2))
				return false;
			break;
		case '\t':
			if (!sk_buf_add(b, "\\t", 2))
				return false;
			break;
		default:
			if (*p < 0x20) {
				snprintf(esc, sizeof(esc), "\\u%04x", *p);
				if (!sk_buf_add(b, esc, 6))
					return false;
			} else if (!sk_buf_add(b, p, 1)) {
				return false;
			}
		}
	}
	return sk_buf_add(b, "\"", 1);
}

void sk_buf_free(sk_buf *b)
{
	free(b->data);
	sk_buf_init(b, b->max);
}

void sk_hash_bytes(sk_hash *h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h->a = (h->a ^ c[i]) * 0x100000001b3ULL; /* FNV-1a 64 */
		h->b = (h->b + c[i] + 1) * 0x9e3779b97f4a7c15ULL;
		h->b ^= h->b >> 29;
	}
}

void sk_hash_str(sk_hash *h, const char *s)
{
	uint64_t n = strlen(s);

	sk_hash_bytes(h, &n, sizeof(n));
	sk_hash_bytes(h, s, n);
}

void sk_hash_long(sk_hash *h, long v)
{
	int64_t x = v;

	sk_hash_bytes(h, &x, sizeof(x));
}
