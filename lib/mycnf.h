/* mycnf.h: MySQL option files (my.cnf): the client settings they give, read as the mariadb client
 * reads them. */
#ifndef SK_MYCNF_H
#define SK_MYCNF_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "util.h"

#define DEFAULTS_FILE_MAX (64 * 1024) /* a MySQL option file larger than this is an error */

/* What a MySQL option file's [client] group (and the extra group, e.g. "mysql") says. */
struct mycnf {
	char *user;
	char *password;
	char *host;
	char *socket;
	long port; /* 0 when not given */
};

/* Parse a MySQL option file: [group] headers, key=value or bare keys, '#'/';' comments,
 * single or double quotes, "_" and "-" equivalent in keys; !include directives are ignored.
 * Reads the [client] group and then `extra_group` (may be NULL), the later overriding.
 * Returns 0 (fields the file does not set stay NULL/0) or -1 with err set. */
int mycnf_parse(const char *text, const char *extra_group, struct mycnf *out, char *err, size_t errlen) SK_MUST_CHECK;

/* Read and parse the file at `path` (bounded by DEFAULTS_FILE_MAX). Like every option file read
 * here, it is refused (secret_check) when another user than root or this process's could have
 * written it (it may set password= and host=), and warned about when it sets a password that
 * other users can read. */
int mycnf_read(const char *path, const char *extra_group, struct mycnf *out, char *err, size_t errlen) SK_MUST_CHECK;

/* Which option files a MySQL/MariaDB client reads. */
struct mycnf_sources {
	bool no_defaults; /* --no-defaults: none at all */
	const char *defaults_file; /* --defaults-file: this one only (NULL or "": the usual list) */
	const char *extra_file; /* --defaults-extra-file: after the global files, before ~/.my.cnf */
	const char *group_suffix; /* --defaults-group-suffix: also [client<suffix>] and so on */
	const char *home; /* where ~/.my.cnf is; NULL: not read */
	uid_t trusted_owner; /* an owner trusted besides root and this process's user (the datadir's); 0: none */
};

/* Read the option files the mariadb client reads, in its order (/etc/my.cnf, /etc/mysql/my.cnf,
 * the extra file, ~/.my.cnf; or the defaults file alone), with its groups ([mysql],
 * [mariadb-client], [client], [client-server], [client-mariadb] and their suffixed names),
 * following !include and !includedir. Later settings override earlier ones. Absent default
 * files are skipped; an explicit file that cannot be read is an error. Returns 0 or -1 with
 * err set ("path: reason"); on error `out` is freed. */
int mycnf_load_client(const struct mycnf_sources *s, struct mycnf *out, char *err, size_t errlen) SK_MUST_CHECK;

/* Wipe and free the fields. */
void mycnf_free(struct mycnf *c);

#endif
