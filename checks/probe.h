/* probe.h: what every probe main shares: connection options, credentials, the deadline policy,
 * bypass files and the one-line verdict. */
#ifndef SK_PROBE_H
#define SK_PROBE_H

#include <stdbool.h>

#include "db.h"
#include "deadline.h"
#include "galera.h"
#include "log.h"
#include "opt.h"
#include "sst.h"

#ifndef SIDEKICK_VERSION
#define SIDEKICK_VERSION "0.1.0"
#endif

/* clang-format off */
/* Option rows every MySQL probe has. SERVER names what the probe connects to ("mysqld",
 * "ProxySQL's admin interface"); defaults differ per probe, so they are parameters too. */
#define PROBE_CONN_OPTIONS(SERVER, HOST_DEF, HOST_HELP, PORT_DEF, USER_DEF, PWFILE_DEF, PW_ENV, PW_DEF)                  \
	{"host", 'H', OPT_STRING, "HOST", HOST_DEF, NULL, 0, 0, NULL, HOST_HELP, 0},                              \
	{"port", 'P', OPT_INT, "PORT", PORT_DEF, NULL, 1, 65535, NULL, "TCP port of " SERVER ".", 0},             \
	{"socket", 'S', OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL,                                              \
	 "Connect to " SERVER " over this unix socket instead of TCP.", 0},                                       \
	{"user", 'u', OPT_STRING, "USER", USER_DEF, "MYSQL_USERNAME", 0, 0, NULL,                                 \
	 "User to log in to " SERVER " as.", 0},                                                                  \
	{"password-file", 0, OPT_STRING, "PATH", PWFILE_DEF, NULL, 0, 0, NULL,                                   \
	 "Read the password from this file (a Kubernetes secret mount); the default is used only when it exists.", \
	 0},                                                                                                      \
	{"password", 0, OPT_STRING, "PASSWORD", PW_DEF, PW_ENV, 0, 0, NULL,                                        \
	 "Password from the environment or config file, used when no password file or option file gives one.",   \
	 OPT_SECRET | OPT_NO_ARGV},                                                                               \
	{"defaults-extra-file", 0, OPT_STRING, "PATH", "/etc/my.cnf", "DEFAULTS_EXTRA_FILE", 0, 0, NULL,         \
	 "MySQL option file whose [client] user/password/host/port/socket for " SERVER " apply when readable "     \
	 "(/dev/null: none).", 0},                                                                                \
	{"tls", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Require TLS to " SERVER ".", 0},                        \
	{"tls-ca", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "CA certificate for --tls.", 0},               \
	{"tls-cert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client certificate for --tls.", 0},          \
	{"tls-key", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client key for --tls.", 0},                   \
	{"tls-verify", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL,                                                \
	 "Verify the server certificate (against --tls-ca, else the system's CA store) and host name; "           \
	 "--tls-verify=0 connects to any certificate, with a warning.", 0},                                       \
	{"config", 'c', OPT_STRING, "FILE", NULL, NULL, 0, 0, NULL,                                              \
	 "libconfig file with any of these options (file < environment < command line).", OPT_NO_FILE},          \
	{"json", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Print the verdict as one JSON object on stdout.", 0}
/* clang-format on */

/* Connection settings resolved from options, the option file and secret files. */
struct probe_conn {
	struct db_target t;
	char *user;
	char *password;
	char *host;
	char *socket;
	char what[300]; /* "host:port" or the socket path, for messages */
};

/* The connection options as given (PROBE_CONN_OPTIONS), before any file is read: pointers into
 * the parsed options, which outlive them. */
struct probe_conn_settings {
	const char *host, *socket, *user, *password, *password_file, *defaults_extra_file;
	bool host_given, socket_given, user_given, port_given, password_file_given;
	bool defaults_extra_file_explicit; /* a command-line flag: the file must be readable */
	long port;
	bool tls, tls_verify;
	const char *tls_ca, *tls_cert, *tls_key;
};

/* Read the PROBE_CONN_OPTIONS rows of `o` into `cs`. */
void probe_conn_settings_load(const struct opts *o, struct probe_conn_settings *cs);

/* Resolve credentials and address. Password order: --password-file (when given, or the
 * default file when it exists), the option file's [client] password, the `password` option
 * (environment). Returns 0 or -1 with a one-line reason (exit 2). */
int probe_conn_setup(const struct probe_conn_settings *cs, struct probe_conn *pc, char *err,
		     size_t errlen) SK_MUST_CHECK;
void probe_conn_free(struct probe_conn *pc);

/* With --tls --tls-verify=0: the warning that names the server into buf and true. */
bool probe_tls_unverified(const struct probe_conn *pc, char *buf, size_t len);

/* The deadline for a probe whose kubelet timeoutSeconds is `k8s_seconds`: below it by a margin
 * of 20% capped at 1 s, so it is never 0 and never unlimited (the scripts' T-1 gave 0 for T=1). */
long probe_k8s_deadline_ms(long k8s_seconds);

/* The node's first non-loopback IPv4 address (like `hostname -I | awk '{print $1}'`), or the
 * first global IPv6 one, or "127.0.0.1". */
void probe_node_ip(char *buf, size_t len);

/* True when `path` exists (any file type). */
bool probe_file_exists(const char *path);

/* Read a state file (mysql.state), drop NUL bytes and white space; "" when absent. */
void probe_read_state_file(const char *path, char *buf, size_t len);

/* Where and how a verdict is printed: the "probe" of the JSON object, --json, the stream of the
 * text line (NULL: none) and when the check started (the JSON object's elapsed_ms). */
struct probe_out {
	const char *probe;
	bool json;
	FILE *text_stream;
	int64_t started_us;
};

/* Print the verdict: text to out->text_stream ("ready" / "not ready: reason"), or one JSON object
 * on stdout when out->json is set. Returns the exit code (0 up, 1 down). */
int probe_report(const struct probe_out *out, bool up, const char *reason, const char *message);

/* Connect, turn off wsrep_sync_wait for the session (ignored where the variable does not
 * exist) and read the wsrep status, plus the variables the rules need (`vars` may be NULL
 * when none are needed). One connection, two or three round trips, all under `dl`. */
int probe_fetch_galera(const struct probe_conn *pc, const deadline_t *dl, struct statusmap *status,
		       struct statusmap *vars, struct db_err *e) SK_MUST_CHECK;

/* The two halves of probe_fetch_galera, for callers that keep the connection (clustercheck
 * --listen): connect and set the session up; then read status (and vars) on it. */
int probe_galera_connect(struct db *db, const struct probe_conn *pc, const deadline_t *dl,
			 struct db_err *e) SK_MUST_CHECK;
int probe_galera_read(struct db *db, const deadline_t *dl, struct statusmap *status, struct statusmap *vars,
		      struct db_err *e) SK_MUST_CHECK;

/* Format a connection or query failure for the verdict line, naming the setting that bounds
 * the time on a timeout: "timeout after 2.0s connecting to 10.0.0.1:33062 (--timeout)". */
void probe_describe_error(const struct db_err *e, const struct probe_conn *pc, long budget_ms,
			  const char *timeout_setting, char *buf, size_t len);

/* A verdict of the operator's scripts' rules, for a probe's report or an HTTP answer. */
struct probe_verdict {
	bool up;
	const char *reason; /* "ok", "bypass", "startup", "timeout", a galera or db reason */
	char msg[600]; /* "alive: wsrep_cluster_status=Primary", "not ready: ..." */
};

/* What one fetch brought back: wsrep status and variables, or a replica's status row (or what a
 * kind of its own puts there: proxysql_verdict.h). */
struct probe_fetch {
	struct statusmap status, vars, row;
	unsigned long nrows;
};

/* What a judge sees of one fetch: what came back, or why nothing did, and what the message of a
 * failure names (the server, the deadline and the setting that sets it). */
struct probe_outcome {
	bool fetched;
	const struct probe_fetch *f; /* the answers, when fetched */
	const struct db_err *e; /* why not, when not fetched */
	const struct probe_conn *pc;
	long budget_ms;
	const char *setting; /* "--timeout", "LIVENESS_CHECK_TIMEOUT" */
};

/* What a liveness probe knows about the node's files and processes before it asks mysqld. */
struct probe_sst {
	const char *datadir; /* where sleep-forever, sst_in_progress, wsrep_recovery_verbose.log are */
	const char *pid_file; /* mysqld's pid file; NULL: the usual places (see sst_gather) */
	const char *recovery_file; /* /tmp/recovery-case */
	struct sst_policy policy;
	struct sst_evidence ev; /* filled by probe_liveness_before, and by probe_liveness_judge when needed */
	bool procs_read; /* ev holds the /proc evidence too (sst_gather_procs) */
};

/* Gather the evidence and decide what it can: true with the verdict filled when the node is alive
 * without asking mysqld (bypass files, a joiner SST of this mysqld, --wsrep-recover, a young
 * sst_in_progress), false when mysqld must answer. The files are always read; mysqld's processes
 * in /proc only when the files leave them first in line (sst_procs_needed): else
 * probe_liveness_judge reads them when mysqld's answer fails. */
bool probe_liveness_before(struct probe_sst *s, struct probe_verdict *v);

/* clang-format off */
/* The liveness options every probe with a liveness verdict shares (rows of its option table),
 * bound to the struct probe_sst `SST` of the settings struct `TYPE` (its datadir and
 * recovery_file are bound by the probe's own rows, whose help differs). */
#define PROBE_SST_OPTIONS(PREFIX, TYPE, SST)                                                                           \
	{"pid-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL,                                                    \
	 PREFIX "mysqld's pid file [default: $datadir/$(hostname).pid, $datadir/mysqld.pid, /run/mysqld/mysqld.pid; "  \
	 "else mysqld is found by its cwd in /proc]; only a mysqld running in the datadir counts.", 0,                  \
	 OPT_FIELD(TYPE, SST.pid_file)},                                                                                \
	{"sst-file-grace", 0, OPT_INT, "SECONDS", "300", NULL, 0, 31536000, NULL,                                      \
	 PREFIX "A sst_in_progress file older than this, with no SST process of mysqld, no longer means alive.", 0,     \
	 OPT_FIELD(TYPE, SST.policy.grace_s)},                                                                          \
	{"trust-sst-file", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,                                                   \
	 PREFIX "sst_in_progress means alive whatever its age (the operator script's rule).", 0,                        \
	 OPT_FIELD(TYPE, SST.policy.trust_file)}
/* clang-format on */

/* readiness-check.sh's bypass: `recovery_file` or `datadir`/sleep-forever exists, from root, this
 * process's user or the datadir's owner. `ignored` gets the files there from anyone else
 * (sst_foreign_note; "" when none): they count as absent, and the verdict that follows names them
 * (probe_verdict_note). */
bool probe_readiness_bypass(const char *recovery_file, const char *datadir, struct probe_verdict *v, char *ignored,
			    size_t len);

/* Append "; note" to the verdict's message when note is not empty. */
void probe_verdict_note(struct probe_verdict *v, const char *note);

/* Liveness from a fetch of the wsrep status (o->f->status; o->fetched false: o->e says why): alive in a Primary
 * component; when that fails, alive on the SST evidence (mysqld's processes are read now when
 * probe_liveness_before left them), or whatever failed while the state file (from a trusted owner:
 * sst_trusted_file) says startup. A stale sst_in_progress the evidence let go, and any file ignored
 * for its owner, are named in the message. */
void probe_liveness_judge(const struct probe_outcome *o, const char *state_file, struct probe_sst *s,
			  struct probe_verdict *v);

/* A failed connection or query as a verdict: "<down_word>: <why>", reason "timeout" or the db reason. */
void probe_db_verdict(const char *down_word, const struct db_err *e, const struct probe_conn *pc, long budget_ms,
		      const char *setting, struct probe_verdict *v);

/* The settings every MySQL probe shares; each kind's settings struct starts with one. */
struct probe_settings {
	struct probe_conn_settings conn;
	bool json; /* --json */
	long budget_ms; /* the deadline of one check */
	const char *timeout_setting; /* named in a timeout message: "--timeout", "LIVENESS_CHECK_TIMEOUT" */
	bool abandoned; /* set by a run that left a thread using the settings: they are not freed */
};

/* Read the connection rows and --json of `o` into `p` (the budget is the kind's to set). */
void probe_settings_load(const struct opts *o, struct probe_settings *p);

/* The budget of a Kubernetes probe: --timeout when given, else `k8s_option`'s seconds less the
 * margin (probe_k8s_deadline_ms), named by `env` in a timeout message. */
void probe_k8s_settings_load(const struct opts *o, const char *env, struct probe_settings *p);

void probe_fetch_free(struct probe_fetch *f);

#endif
