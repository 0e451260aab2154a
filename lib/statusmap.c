/* statusmap.c: status and variable maps, filled from a query result or a text dump. */
#include "statusmap.h"

#include <stdlib.h>
#include <string.h>

static long find(const struct statusmap *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (sk_streq_ci(m->items[i].name, name))
			return (long)i;
	return -1;
}

int statusmap_set(struct statusmap *m, const char *name, const char *value)
{
	long i = find(m, name);

	if (i >= 0) {
		free(m->items[i].value);
		m->items[i].value = value ? xstrdup(value) : NULL;
		return 0;
	}
	if (m->n >= STATUSMAP_MAX)
		return -1;
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->items = xrealloc(m->items, m->cap * sizeof(*m->items));
	}
	m->items[m->n].name = xstrdup(name);
	m->items[m->n].value = value ? xstrdup(value) : NULL;
	m->n++;
	return 0;
}

const char *statusmap_get(const struct statusmap *m, const char *name)
{
	long i = find(m, name);

	return i < 0 ? NULL : m->items[i].value;
}

int statusmap_has(const struct statusmap *m, const char *name)
{
	return find(m, name) >= 0;
}

int statusmap_parse(struct statusmap *m, const char *text, size_t len, char *err, size_t errlen)
{
	size_t pos = 0;
	int lineno = 0;

	while (pos < len) {
		char line[1024];
		size_t end = pos, n;
		char *name, *value, *p;

		while (end < len && text[end] != '\n')
			end++;
		n = end - pos;
		lineno++;
		if (n >= sizeof(line))
			return sk_err(err, errlen, "line %d: longer than %zu bytes", lineno, sizeof(line) - 1);
		if (memchr(text + pos, '\0', n))
			return sk_err(err, errlen, "line %d: contains a NUL byte", lineno);
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = end + 1;
		sk_trim(line);
		if (!line[0] || line[0] == '#')
			continue;
		name = line;
		p = name + strcspn(name, " \t");
		if (*p) {
			*p++ = '\0';
			value = sk_trim(p);
		} else {
			value = p;
		}
		if (statusmap_set(m, name, strcmp(value, "NULL") == 0 ? NULL : value) < 0)
			return sk_err(err, errlen, "line %d: more than %d entries", lineno, STATUSMAP_MAX);
	}
	return 0;
}

void statusmap_free(struct statusmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->items[i].name);
		free(m->items[i].value);
	}
	free(m->items);
	m->items = NULL;
	m->n = m->cap = 0;
}
