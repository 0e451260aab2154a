/* probe_main.h: the one driver of every probe binary (probe_main.c) and the kinds of probe it
 * runs, each described as data: options, settings, then the steps of a one-shot check or a run
 * of its own. A probe's main() is one call of probe_main. */
#ifndef SK_PROBE_MAIN_H
#define SK_PROBE_MAIN_H

#include "probe.h"

/* A kind of probe, as data: its option table, how it reads its settings, and either the steps of
 * a one-shot check (before, fetch, judge, print) or a run of its own. `s` is the kind's settings
 * struct (settings_size bytes, zeroed, starting with struct probe_settings). */
struct probe_kind {
	const char *name; /* the verdict's "probe": "liveness" */
	struct opts opts; /* option table and help text: prog, synopsis, summary, defs */
	void (*opts_init)(struct opts *o); /* instead of `opts`, when the table lives elsewhere */
	enum log_level log_level; /* until the settings choose one */
	int usage_exit; /* exit code for bad arguments and settings (0: 2) */
	const char *ignored_args; /* positional arguments are only warned about: "as by liveness-check.sh" */
	/* The arguments opts_parse reads (NULL: all); `out` has room for argc + 1. */
	int (*own_args)(int argc, char **argv, char **out);
	size_t settings_size;
	/* The positional arguments into options, before the rows are bound (clustercheck's classic
	 * form); NULL: none. 0, or -1 with err as for settings_load. */
	int (*positional)(struct opts *o, void *s, char *err, size_t errlen);
	/* Options into settings, once; -1 with err: "<prog>: err", exit usage_exit. The rows bound to a
	 * field of the settings struct (OPT_FIELD) are copied there first (opts_bind): settings_load
	 * reads only what takes more than a copy. */
	int (*settings_load)(struct opts *o, void *s, char *err, size_t errlen);
	void (*settings_free)(void *s); /* NULL: nothing to free */
	/* A one-shot check: decide without the server (NULL: never); fetch on a new connection within
	 * the deadline (0 or -1 with e); judge; print (NULL: probe_report on stdout) and give the exit code. */
	bool (*before)(void *s, struct probe_verdict *v);
	int (*fetch)(const void *s, const struct probe_conn *pc, const deadline_t *dl, struct probe_fetch *f,
		     struct db_err *e);
	void (*judge)(void *s, const struct probe_outcome *o, struct probe_verdict *v);
	int (*print)(const void *s, const struct probe_conn *pc, const struct probe_fetch *f,
		     const struct probe_verdict *v, int64_t started);
	/* Or a run of its own (modes, servers, ordered tests): returns the exit code. */
	int (*run)(void *s, int argc, char **argv, int64_t started);
	/* With both: true when these settings take `run` (proxysql-check --drain); NULL: run when set. */
	bool (*runs_own)(const void *s);
};

/* The whole of a probe binary: core dumps off, logging, options, settings, then the kind's steps or
 * run. Returns the exit code (0 up, 1 down, 2 bad usage unless the kind says otherwise). */
int probe_main(const struct probe_kind *k, int argc, char **argv);

#endif
