/* clustercheck_opts.h: clustercheck's settings, its option table and its classic positional form
 * (clustercheck_opts.c), shared by its main and the argv fuzzer. */
#ifndef SK_CLUSTERCHECK_OPTS_H
#define SK_CLUSTERCHECK_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "cc_check.h"
#include "http.h"
#include "log.h"
#include "opt.h"
#include "probe.h"
#include "register.h"
#include "util.h"

/* clustercheck's settings: what its option table's rows are bound to (OPT_FIELD), and what its
 * settings_load reads from the rest. */
struct clustercheck_settings {
	struct probe_settings p;
	struct cc_checker c; /* the check's settings, and --listen's shared connection */
	bool password_on_argv;
	const char *log_file;
	const char *listen; /* --listen; NULL: one-shot or --register */
	bool registering; /* --register */
	bool verbose; /* one-shot: the reason on stderr too */
	enum log_level log_level; /* --log-level and --log-format, for --listen and --register */
	enum log_format log_format;
	struct http_limits limits;
	struct register_settings reg; /* --register's, --once among them */
};

/* Set `o` up for clustercheck's table (name, synopsis, summary, definitions) before opts_parse. */
void clustercheck_opts_init(struct opts *o);

/* The classic positional form, as in xinetd server_args: USER PASS AVAILABLE_WHEN_DONOR LOG_FILE
 * AVAILABLE_WHEN_READONLY DEFAULTS_FILE, applied after opts_parse; an empty argument keeps the
 * default. *password_on_argv tells whether a password came from the command line (the caller
 * warns). Returns 0, or -1 with a one-line reason. */
int clustercheck_opts_apply_positional(struct opts *o, bool *password_on_argv, char *err, size_t errlen) SK_MUST_CHECK;

#endif
