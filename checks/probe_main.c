/* probe_main.c: the one driver of every probe binary: options, settings, then a kind's steps
 * (decide without the server, fetch under one deadline, judge, print) or its own run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "probe_main.h"
#include "proc.h"

/* Parse the options the kind reads. Returns -1 to go on, else the exit code (help, version, error). */
static int parse(const struct probe_kind *k, struct opts *o, int argc, char **argv)
{
	char **args = argv, err[512];
	enum opts_result r;
	int n = argc;

	if (k->own_args) {
		args = xcalloc((size_t)argc + 1, sizeof(char *));
		n = k->own_args(argc, argv, args);
	}
	r = opts_parse(o, n, args, err, sizeof(err));
	if (args != argv)
		free(args);
	if (r == OPTS_OK)
		return -1;
	if (r == OPTS_ERROR)
		fprintf(stderr, "%s: %s\n", o->prog, err);
	opts_free(o);
	return r == OPTS_EXIT ? 0 : k->usage_exit ? k->usage_exit : 2;
}

/* The kind's settings from the parsed options: its positional arguments, the bound rows, then
 * what settings_load reads. 0, or -1 with err. */
static int load(const struct probe_kind *k, struct opts *o, void *s, char *err, size_t errlen)
{
	if (k->positional && k->positional(o, s, err, errlen) < 0)
		return -1;
	opts_bind(o, s);
	return k->settings_load(o, s, err, errlen);
}

/* A one-shot check: connect, fetch and judge within the deadline, then print the verdict. */
static int check(const struct probe_kind *k, void *s, const char *prog, int64_t started)
{
	const struct probe_settings *p = s;
	struct probe_out out = { .probe = k->name, .json = p->json, .text_stream = stdout, .started_us = started };
	struct probe_fetch f = { 0 };
	struct probe_verdict v;
	struct probe_conn pc;
	struct db_err e;
	char err[512];
	deadline_t dl;
	int rc;

	if (k->before && k->before(s, &v))
		return probe_report(&out, v.up, v.reason, v.msg);
	if (probe_conn_setup(&p->conn, &pc, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		return k->usage_exit ? k->usage_exit : 2;
	}
	if (probe_tls_unverified(&pc, err, sizeof(err)))
		fprintf(stderr, "%s: %s\n", prog, err);
	dl = deadline_since_start_ms(p->budget_ms);
	memset(&e, 0, sizeof(e));
	k->judge(s,
		 &(struct probe_outcome){ .fetched = k->fetch(s, &pc, &dl, &f, &e) == 0,
					  .f = &f,
					  .e = &e,
					  .pc = &pc,
					  .budget_ms = p->budget_ms,
					  .setting = p->timeout_setting },
		 &v);
	if (k->print)
		rc = k->print(s, &pc, &f, &v, started);
	else
		rc = probe_report(&out, v.up, v.reason, v.msg);
	probe_fetch_free(&f);
	probe_conn_free(&pc);
	return rc;
}

int probe_main(const struct probe_kind *k, int argc, char **argv)
{
	int64_t started = deadline_now_us();
	struct opts o;
	char err[512];
	void *s;
	int rc;

	proc_no_dumps(); /* before any password is read */
	log_setup(argv[0], LOG_TEXT, k->log_level, stderr);
	if (k->opts_init)
		k->opts_init(&o);
	else
		o = k->opts;
	if ((rc = parse(k, &o, argc, argv)) >= 0)
		return rc;
	if (k->ignored_args && o.nargs)
		fprintf(stderr,
			"%s: warning: positional arguments are ignored (%s); never pass a password on the "
			"command line\n",
			o.prog, k->ignored_args);
	s = xcalloc(1, k->settings_size);
	if (load(k, &o, s, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", o.prog, err);
		rc = k->usage_exit ? k->usage_exit : 2;
	} else {
		rc = k->run && (!k->runs_own || k->runs_own(s)) ? k->run(s, argc, argv, started)
								: check(k, s, o.prog, started);
	}
	if (((struct probe_settings *)s)->abandoned)
		return rc; /* a thread hangs on the server with these settings (bounded by its deadline) */
	if (k->settings_free)
		k->settings_free(s);
	free(s);
	opts_free(&o);
	return rc;
}
