/* secret.c: reading passwords from secret files and MySQL option files, with size limits. */
#include "secret.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

char *secret_read_file(const char *path, char *err, size_t errlen)
{
	char *buf;
	size_t len;

	if (sk_read_file(path, SECRET_MAX, &buf, &len, err, errlen) < 0)
		return NULL;
	if (strlen(buf) != len) {
		sk_wipe(buf, len);
		free(buf);
		sk_err(err, errlen, "%s: contains a NUL byte", path);
		return NULL;
	}
	if (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	if (len && buf[len - 1] == '\r')
		buf[--len] = '\0';
	log_add_secret(buf);
	return buf;
}

static void set_field(char **field, const char *v)
{
	if (*field) {
		sk_wipe(*field, strlen(*field));
		free(*field);
	}
	*field = xstrdup(v);
}

/* Strip one level of matching quotes from a value, in place. */
static char *unquote(char *v)
{
	size_t n = strlen(v);

	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
		v[n - 1] = '\0';
		return v + 1;
	}
	/* An unquoted value ends at a comment that follows white space. */
	for (char *p = v; *p; p++) {
		if ((*p == '#' || *p == ';') && p > v && isspace((unsigned char)p[-1])) {
			*p = '\0';
			sk_trim(v);
			break;
		}
	}
	return v;
}

int mycnf_parse(const char *text, const char *extra_group, struct mycnf *out, char *err, size_t errlen)
{
	char *copy = xstrdup(text);
	char *line, *save = NULL;
	int in_group = 0; /* 0: not ours, 1: [client], 2: extra group */
	int lineno = 0, rc = 0;

	memset(out, 0, sizeof(*out));
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *key, *val, *eq;

		lineno++;
		sk_trim(line);
		if (!*line || *line == '#' || *line == ';' || *line == '!')
			continue;
		if (*line == '[') {
			char *end = strchr(line, ']');

			if (!end) {
				rc = sk_err(err, errlen, "line %d: unterminated group header", lineno);
				break;
			}
			*end = '\0';
			key = sk_trim(line + 1);
			in_group = strcmp(key, "client") == 0                       ? 1
				   : (extra_group && strcmp(key, extra_group) == 0) ? 2
										    : 0;
			continue;
		}
		if (!in_group)
			continue;
		eq = strchr(line, '=');
		if (eq) {
			*eq = '\0';
			val = unquote(sk_trim(eq + 1));
		} else {
			val = NULL;
		}
		key = sk_trim(line);
		for (char *p = key; *p; p++)
			if (*p == '-')
				*p = '_';
		if (strcmp(key, "user") == 0 && val) {
			set_field(&out->user, val);
		} else if (strcmp(key, "password") == 0) {
			set_field(&out->password, val ? val : "");
			log_add_secret(out->password);
		} else if (strcmp(key, "host") == 0 && val) {
			set_field(&out->host, val);
		} else if (strcmp(key, "socket") == 0 && val) {
			set_field(&out->socket, val);
		} else if (strcmp(key, "port") == 0 && val) {
			if (!sk_parse_long(val, 1, 65535, &out->port)) {
				rc = sk_err(err, errlen, "line %d: port '%s' is not a number from 1 to 65535", lineno,
					    val);
				break;
			}
		}
	}
	sk_wipe(copy, strlen(text));
	free(copy);
	if (rc < 0)
		mycnf_free(out);
	return rc;
}

int mycnf_read(const char *path, const char *extra_group, struct mycnf *out, char *err, size_t errlen)
{
	char *text;
	char why[256];
	int rc;

	memset(out, 0, sizeof(*out));
	if (sk_read_file(path, DEFAULTS_FILE_MAX, &text, NULL, err, errlen) < 0)
		return -1;
	rc = mycnf_parse(text, extra_group, out, why, sizeof(why));
	if (rc < 0)
		sk_err(err, errlen, "%s: %s", path, why);
	sk_wipe(text, strlen(text));
	free(text);
	return rc;
}

void mycnf_free(struct mycnf *c)
{
	char **fields[] = { &c->user, &c->password, &c->host, &c->socket };

	for (size_t i = 0; i < SK_ARRAY_LEN(fields); i++) {
		if (*fields[i]) {
			sk_wipe(*fields[i], strlen(*fields[i]));
			free(*fields[i]);
			*fields[i] = NULL;
		}
	}
	c->port = 0;
}
