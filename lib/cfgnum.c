/* cfgnum.c: the numbers of a libconfig file checked as written (libconfig 1.5 wraps them). */
#include "cfgnum.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct scan {
	const char *p;
	int line;
	char name[64]; /* the setting the next value belongs to */
};

/* Past a comment or a string at s->p (counting lines); false when there is none. */
static bool skip_comment_or_string(struct scan *s)
{
	const char *p = s->p;

	if (*p == '#' || (p[0] == '/' && p[1] == '/')) {
		while (*p && *p != '\n')
			p++;
	} else if (p[0] == '/' && p[1] == '*') {
		for (p += 2; *p && !(p[0] == '*' && p[1] == '/'); p++)
			s->line += *p == '\n';
		p += *p ? 2 : 0;
	} else if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			s->line += *p == '\n';
		}
		p += *p ? 1 : 0;
	} else {
		return false;
	}
	s->p = p;
	return true;
}

static bool name_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '*';
}

/* A setting name at s->p: remembered when '=' or ':' follows it. */
static void take_name(struct scan *s)
{
	const char *start = s->p, *q;
	size_t n;

	while (name_char(*s->p))
		s->p++;
	for (q = s->p; *q == ' ' || *q == '\t'; q++)
		;
	n = (size_t)(s->p - start);
	if ((*q == '=' || *q == ':') && n < sizeof(s->name)) {
		memcpy(s->name, start, n);
		s->name[n] = '\0';
	}
}

/* Why the literal [lit, lit+n) does not read as written, or NULL when it does: an integer must fit
 * in 32 bits (64 with an L suffix; a hexadecimal one up to 0x7FFFFFFF without it), a float must be
 * finite. */
static const char *literal_problem(const char *lit, size_t n)
{
	static const char *const integer = "a number is -2147483648..2147483647, or 64-bit with an L suffix";
	char buf[80], *end;
	bool wide = n > 1 && lit[n - 1] == 'L', hex = false, flt = false;
	long long v;

	if (n >= sizeof(buf))
		return integer;
	memcpy(buf, lit, n);
	buf[n] = '\0';
	while (n && buf[n - 1] == 'L')
		buf[--n] = '\0';
	for (size_t i = 0; i < n; i++) {
		hex |= buf[i] == 'x' || buf[i] == 'X';
		flt |= !hex && (buf[i] == '.' || buf[i] == 'e' || buf[i] == 'E');
	}
	errno = 0;
	if (flt) {
		double d = strtod(buf, &end);

		return errno == ERANGE || !isfinite(d) ? "not a finite number" : NULL;
	}
	v = strtoll(buf, &end, hex ? 16 : 10);
	if (errno == ERANGE || (!wide && (v < INT32_MIN || v > INT32_MAX)))
		return integer;
	return NULL;
}

/* The end of the number literal at p (sign, digits, hexadecimal, fraction, exponent, L suffix). */
static const char *literal_end(const char *p)
{
	if (*p == '+' || *p == '-')
		p++;
	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		for (p += 2; isxdigit((unsigned char)*p); p++)
			;
	} else {
		while (isdigit((unsigned char)*p) || *p == '.')
			p++;
		if ((*p == 'e' || *p == 'E') && (isdigit((unsigned char)p[1]) || p[1] == '-' || p[1] == '+'))
			for (p += 2; isdigit((unsigned char)*p); p++)
				;
	}
	while (*p == 'L')
		p++;
	return p;
}

static bool number_start(const char *p)
{
	if (*p == '+' || *p == '-')
		p++;
	return isdigit((unsigned char)*p) || (*p == '.' && isdigit((unsigned char)p[1]));
}

int cfgnum_check(const char *text, const char *path, char *err, size_t errlen)
{
	struct scan s = { .p = text, .line = 1, .name = "" };

	while (*s.p) {
		if (skip_comment_or_string(&s))
			continue;
		if (isalpha((unsigned char)*s.p) || *s.p == '*') {
			take_name(&s);
		} else if (number_start(s.p)) {
			const char *end = literal_end(s.p);
			const char *why = literal_problem(s.p, (size_t)(end - s.p));
			int n = (int)(end - s.p > 40 ? 40 : end - s.p);

			if (why)
				return sk_err(err, errlen, "%s:%d: %s: %.*s is out of range (%s)", path, s.line,
					      s.name[0] ? s.name : "value", n, s.p, why);
			s.p = end;
		} else {
			s.line += *s.p == '\n';
			s.p++;
		}
	}
	return 0;
}
