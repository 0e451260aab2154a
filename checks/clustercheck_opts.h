/* clustercheck_opts.h: clustercheck's option table and its classic positional form
 * (clustercheck_opts.c), shared by its main and the argv fuzzer. */
#ifndef SK_CLUSTERCHECK_OPTS_H
#define SK_CLUSTERCHECK_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include "opt.h"
#include "util.h"

/* Set `o` up for clustercheck's table (name, synopsis, summary, definitions) before opts_parse. */
void clustercheck_opts_init(struct opts *o);

/* The classic positional form, as in xinetd server_args: USER PASS AVAILABLE_WHEN_DONOR LOG_FILE
 * AVAILABLE_WHEN_READONLY DEFAULTS_FILE, applied after opts_parse; an empty argument keeps the
 * default. *password_on_argv tells whether a password came from the command line (the caller
 * warns). Returns 0, or -1 with a one-line reason. */
int clustercheck_opts_apply_positional(struct opts *o, bool *password_on_argv, char *err, size_t errlen) SK_MUST_CHECK;

#endif
