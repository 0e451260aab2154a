/* register.h: clustercheck --register (register.c): keep this node's key in Consul KV while it
 * is healthy, bound to a session with a TTL, on a period or once for cron. */
#ifndef SK_REGISTER_H
#define SK_REGISTER_H

#include <stdbool.h>

#include "cc_check.h"
#include "consul.h"
#include "opt.h"

/* --register's settings, read once from clustercheck's options. */
struct register_settings {
	bool once; /* --once: one round for cron */
	long ttl_s; /* --session-ttl */
	long interval_ms; /* --interval */
	const char *session_file; /* --session-file (with --once); NULL: runfile_default */
	const char *state_file_flag; /* --state-file from the command line (the session file's former name), or NULL */
	const char *prefix; /* --consul-prefix */
	const char *advertise; /* --advertise; NULL: the checked host:port */
	bool key_without_port; /* --key-without-port */
	enum consul_agent_mode agent; /* --consul-agent */
	struct consul_config consul; /* CONSUL_* and --consul-* */
	int consul_rc; /* consul_config_from_opts: -1 with consul_err */
	char consul_err[600];
};

/* Read into `r` what --register's options need beyond a copy (--interval, --state-file from the
 * command line, --consul-agent, the Consul client's configuration); the plain rows are bound to
 * its fields by clustercheck's table (OPT_FIELD). */
void register_settings_load(const struct opts *o, struct register_settings *r);
void register_settings_free(struct register_settings *r);

/* --register (register.c): keep the node's key in Consul while it is healthy, on a period or
 * --once. Returns the exit code; *abandoned when a check thread was left on a hung server. */
int register_run(struct cc_checker *c, const struct register_settings *r, bool *abandoned);

#endif
