/* mycnf.c: MySQL option files (my.cnf) as the mariadb client reads them: its files, groups,
 * quotes and includes; the user, password, host, socket and port they set. */
#include "mycnf.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "secret.h"

/* An option file's text (bounded by DEFAULTS_FILE_MAX). /dev/null reads as an empty file, as the
 * mariadb client reads it (`--defaults-file=/dev/null` means no options). */
static int read_cnf_text(const char *path, char **text, struct secret_seen *seen, char *err, size_t errlen)
{
	struct stat st, null_st;

	if (stat(path, &st) == 0 && S_ISCHR(st.st_mode) && stat("/dev/null", &null_st) == 0 &&
	    st.st_rdev == null_st.st_rdev) {
		*text = xstrdup("");
		return 0;
	}
	return sk_read_file_checked(&(struct sk_file_read){ path, DEFAULTS_FILE_MAX, secret_check, seen }, text, NULL,
				    err, errlen);
}

/* The warning for an option file that sets a password other users can read. */
static void warn_readable(const char *path, const struct secret_seen *seen, bool password)
{
	char msg[1200];

	if (password && seen->finding == SECRET_FILE_READABLE)
		log_warn("%s", secret_readable_msg(msg, sizeof(msg), path, seen->mode));
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

/* Reading state for one option file and the files it includes. */
struct cnf_reader {
	const char *const *groups; /* the groups whose settings apply, NULL-terminated */
	struct mycnf *out;
	int depth; /* !include nesting; the mariadb client stops at 10 */
	bool includes; /* follow !include and !includedir (the client's option files do) */
	uid_t also; /* an owner trusted besides root and this process's user */
	bool password_set; /* the file being read (not the ones it includes) set password= */
};

static int read_into(struct cnf_reader *r, const char *path, bool required, char *err, size_t errlen);

static bool wanted_group(const struct cnf_reader *r, const char *name)
{
	for (size_t i = 0; r->groups[i]; i++)
		if (strcmp(r->groups[i], name) == 0)
			return true;
	return false;
}

static int filter_cnf(const struct dirent *d)
{
	size_t n = strlen(d->d_name);

	return n > 4 && strcmp(d->d_name + n - 4, ".cnf") == 0;
}

/* !include FILE and !includedir DIR (its *.cnf files in name order), as the mariadb client
 * reads them: a missing file or directory is skipped. */
static int include(struct cnf_reader *r, char *line, char *err, size_t errlen)
{
	bool dir = strncmp(line, "!includedir", 11) == 0 && isspace((unsigned char)line[11]);
	char *arg = sk_trim(line + (dir ? 11 : 8));
	struct dirent **ents = NULL;
	int n, rc = 0;

	if (!dir && !(strncmp(line, "!include", 8) == 0 && isspace((unsigned char)line[8])))
		return 0;
	if (r->depth >= 10)
		return 0;
	r->depth++;
	if (!dir) {
		rc = read_into(r, arg, false, err, errlen);
	} else if ((n = scandir(arg, &ents, filter_cnf, alphasort)) >= 0) {
		for (int i = 0; i < n; i++) {
			char path[1024];

			if (rc == 0 && sk_fmt(path, sizeof(path), "%s/%s", arg, ents[i]->d_name))
				rc = read_into(r, path, false, err, errlen);
			free(ents[i]);
		}
		free(ents);
	}
	r->depth--;
	return rc;
}

/* One "key[=value]" line of a wanted group: user, password, host, socket and port into r->out
 * ('-' and '_' alike in keys); other keys are ignored. */
static int cnf_setting(struct cnf_reader *r, char *line, int lineno, char *err, size_t errlen)
{
	struct mycnf *out = r->out;
	char *key, *val = NULL, *eq = strchr(line, '=');

	if (eq) {
		*eq = '\0';
		val = unquote(sk_trim(eq + 1));
	}
	key = sk_trim(line);
	for (char *p = key; *p; p++)
		if (*p == '-')
			*p = '_';
	if (strcmp(key, "user") == 0 && val) {
		set_field(&out->user, val);
	} else if (strcmp(key, "password") == 0) {
		r->password_set = true;
		set_field(&out->password, val ? val : "");
		log_add_secret(out->password);
	} else if (strcmp(key, "host") == 0 && val) {
		set_field(&out->host, val);
	} else if (strcmp(key, "socket") == 0 && val) {
		set_field(&out->socket, val);
	} else if (strcmp(key, "port") == 0 && val) {
		if (!sk_parse_long(val, 1, 65535, &out->port))
			return sk_err(err, errlen, "line %d: port '%s' is not a number from 1 to 65535", lineno, val);
	}
	return 0;
}

/* One option file's text: its includes followed, its group headers and the settings of the
 * wanted groups read. */
static int parse_into(struct cnf_reader *r, const char *text, char *err, size_t errlen)
{
	char *copy = xstrdup(text);
	char *line, *save = NULL;
	bool in_group = false;
	int lineno = 0, rc = 0;

	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		lineno++;
		sk_trim(line);
		if (*line == '!' && r->includes) {
			if ((rc = include(r, line, err, errlen)) < 0)
				break;
			continue;
		}
		if (!*line || *line == '#' || *line == ';' || *line == '!')
			continue;
		if (*line == '[') {
			char *end = strchr(line, ']');

			if (!end) {
				rc = sk_err(err, errlen, "line %d: unterminated group header", lineno);
				break;
			}
			*end = '\0';
			in_group = wanted_group(r, sk_trim(line + 1));
			continue;
		}
		if (in_group && (rc = cnf_setting(r, line, lineno, err, errlen)) < 0)
			break;
	}
	sk_wipe(copy, strlen(text));
	free(copy);
	return rc;
}

int mycnf_parse(const char *text, const char *extra_group, struct mycnf *out, char *err, size_t errlen)
{
	const char *groups[] = { "client", extra_group, NULL };
	struct cnf_reader r = { .groups = groups, .out = out };
	int rc;

	memset(out, 0, sizeof(*out));
	rc = parse_into(&r, text, err, errlen);
	if (rc < 0)
		mycnf_free(out);
	return rc;
}

static int read_into(struct cnf_reader *r, const char *path, bool required, char *err, size_t errlen)
{
	struct secret_seen seen = { .also = r->also };
	bool outer = r->password_set;
	char *text;
	char why[256];
	int rc;

	if (!required && access(path, F_OK) != 0)
		return 0;
	if (read_cnf_text(path, &text, &seen, err, errlen) < 0)
		return -1;
	r->password_set = false;
	rc = parse_into(r, text, why, sizeof(why));
	if (rc < 0)
		sk_err(err, errlen, "%s: %s", path, why);
	else
		warn_readable(path, &seen, r->password_set);
	r->password_set = outer;
	sk_wipe(text, strlen(text));
	free(text);
	return rc;
}

int mycnf_load_client(const struct mycnf_sources *s, struct mycnf *out, char *err, size_t errlen)
{
	static const char *const base[] = { "mysql", "mariadb-client", "client", "client-server", "client-mariadb" };
	char suffixed[SK_ARRAY_LEN(base)][96];
	const char *groups[2 * SK_ARRAY_LEN(base) + 1];
	struct cnf_reader r = { .groups = groups, .out = out, .includes = true, .also = s->trusted_owner };
	size_t n = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < SK_ARRAY_LEN(base); i++) {
		groups[n++] = base[i];
		if (s->group_suffix && *s->group_suffix &&
		    sk_fmt(suffixed[i], sizeof(suffixed[i]), "%s%s", base[i], s->group_suffix))
			groups[n++] = suffixed[i];
	}
	groups[n] = NULL;
	if (s->no_defaults)
		return 0;
	if (s->defaults_file && *s->defaults_file) {
		rc = read_into(&r, s->defaults_file, true, err, errlen);
	} else {
		char home[1024];

		if ((rc = read_into(&r, "/etc/my.cnf", false, err, errlen)) == 0)
			rc = read_into(&r, "/etc/mysql/my.cnf", false, err, errlen);
		if (rc == 0 && s->extra_file && *s->extra_file)
			rc = read_into(&r, s->extra_file, true, err, errlen);
		if (rc == 0 && s->home && *s->home && sk_fmt(home, sizeof(home), "%s/.my.cnf", s->home))
			rc = read_into(&r, home, false, err, errlen);
	}
	if (rc < 0)
		mycnf_free(out);
	return rc;
}

int mycnf_read(const char *path, const char *extra_group, struct mycnf *out, char *err, size_t errlen)
{
	struct secret_seen seen = { 0, SECRET_FILE_OK, 0 };
	char *text;
	char why[256];
	int rc;

	memset(out, 0, sizeof(*out));
	if (read_cnf_text(path, &text, &seen, err, errlen) < 0)
		return -1;
	rc = mycnf_parse(text, extra_group, out, why, sizeof(why));
	if (rc < 0)
		sk_err(err, errlen, "%s: %s", path, why);
	else
		warn_readable(path, &seen, out->password != NULL);
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
