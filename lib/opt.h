/* opt.h: one option table per binary drives parsing (config file < environment < command line),
 * --help and the Markdown reference in docs/. */
#ifndef SK_OPT_H
#define SK_OPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "util.h"

enum opt_type {
	OPT_FLAG, /* boolean: --name, --name=0|1|yes|no|true|false|on|off */
	OPT_STRING, /* any text */
	OPT_INT, /* whole number within [min, max] */
	OPT_NUMBER, /* decimal number within [min, max] (seconds with a fraction, ratios) */
	OPT_ENUM, /* one word of `choices` ("a|b|c") */
};

enum {
	OPT_SECRET = 1 << 0, /* the value is a secret: registered with the log redactor, never printed */
	OPT_NO_ARGV = 1 << 1, /* not accepted on the command line (secrets) */
	OPT_NO_FILE = 1 << 2, /* not accepted in the config file */
	OPT_HIDDEN = 1 << 3, /* left out of --help (compatibility spellings); still documented */
};

/* Where opts_bind puts an option's value: a field of the binary's settings struct. Written with
 * OPT_FIELD, which also records the field's C type (a mismatch with the row's type is caught at the
 * first opts_bind, see there). `at` is the field's offset plus one: 0 means "not bound". */
struct opt_bind {
	size_t at;
	enum opt_type as;
};

/* The field `field` of `type` as an opt_bind: bool, long, double or const char *, nothing else
 * (any other field type does not compile). */
#define OPT_FIELD(type, field)                                                                                           \
	{                                                                                                                \
		offsetof(type, field) + 1, _Generic(((type *)0)->field, bool: OPT_FLAG, long: OPT_INT,                 \
						    double: OPT_NUMBER, const char *: OPT_STRING) \
	}

struct opt_def {
	const char *name; /* long option; also the config-file setting name */
	char short_name; /* 0 when none */
	enum opt_type type;
	const char *arg; /* metavariable for help, e.g. "SECONDS" */
	const char *def; /* default as text, or NULL for "unset" */
	const char *env; /* environment variable, or NULL */
	double min, max; /* bounds for OPT_INT and OPT_NUMBER */
	const char *choices; /* for OPT_ENUM: "text|json" */
	const char *help; /* one sentence */
	unsigned flags;
	struct opt_bind bind; /* OPT_FIELD(struct, field): opts_bind copies the value there; {0}: not bound */
};

/* Where a value came from, for error messages ("--port", "env MYSQL_PORT", "file.cfg:3"). */
struct opt_val {
	bool set;
	char *text;
	char source[96];
	long i;
	double d;
	bool b;
};

struct config_setting_t;

struct opts {
	const char *prog;
	const char *version;
	const char *synopsis; /* "[OPTION]... [USER PASS ...]" */
	const char *summary; /* one paragraph for --help */
	const char *exit_status; /* the --help line about exit codes; NULL: 0 / 1 / 2 usage error */
	const struct opt_def *defs;
	size_t ndefs;
	/* Name of the option that holds the config-file path, or NULL when the binary takes none. */
	const char *config_opt;
	/* Maximum number of positional arguments (0: none accepted). */
	int max_args;
	/* Called for a config-file setting that is a group or list (structured settings);
	 * returns 0 or -1 with err set to "LINE: setting: problem" (the loader puts the file's path
	 * in front). NULL: such settings are errors. */
	int (*file_hook)(void *ctx, struct config_setting_t *s, char *err, size_t errlen);
	void *hook_ctx;

	/* Filled by opts_parse. */
	struct opt_val *vals;
	char **args;
	int nargs;
	bool argv_secret_warning; /* set by callers that accept a compat password positional */
};

enum opts_result { OPTS_OK = 0, OPTS_EXIT = 1, OPTS_ERROR = -1 };

/* Parse defaults, the config file (when config_opt is set and given), the environment and argv,
 * in that order, each overriding the last. Converts and range-checks every value.
 * OPTS_EXIT: --help or --version was printed to stdout, exit 0. OPTS_ERROR: err holds one line
 * naming the option, its source and the problem; exit 2. */
enum opts_result opts_parse(struct opts *o, int argc, char **argv, char *err, size_t errlen);

/* opts_parse for a main: on --help/--version, or on an error (printed as "<prog>: <reason>" on
 * stderr), free `o` and return the exit code, 0 or 2; return -1 when the program goes on. */
int opts_parse_main(struct opts *o, int argc, char **argv);

/* Load a config file over the current values (used by opts_parse and on SIGHUP reload). */
int opts_load_file(struct opts *o, const char *path, char *err, size_t errlen) SK_MUST_CHECK;

/* Release everything opts_parse allocated. */
void opts_free(struct opts *o);

/* Accessors by option name. Asking for a name not in the table aborts (a programming error). */
const char *opt_str(const struct opts *o, const char *name); /* NULL when unset */
long opt_int(const struct opts *o, const char *name);
double opt_num(const struct opts *o, const char *name);
bool opt_flag(const struct opts *o, const char *name);
bool opt_given(const struct opts *o, const char *name); /* set by file, env or argv (not default) */
const char *opt_source(const struct opts *o, const char *name);

/* Copy the value of every bound option (OPT_FIELD) into the settings struct at dst: a flag as
 * bool, a whole number as long, a decimal number as double, a text or an enum word as a const char *
 * into o's storage (NULL when unset; valid until opts_free or the next reload). A row whose field's
 * type does not match its own type aborts (a programming error, caught by any run of the binary). */
void opts_bind(const struct opts *o, void *dst);

/* Set a value as if it came from `source`; converts and checks it like any other. */
int opt_set(struct opts *o, const char *name, const char *text, const char *source, char *err,
	    size_t errlen) SK_MUST_CHECK;

/* Print --help text / the Markdown option table (docs are generated from this). */
void opts_help(const struct opts *o, FILE *out);
void opts_markdown(const struct opts *o, FILE *out);

#endif
