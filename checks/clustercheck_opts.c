/* clustercheck_opts.c: clustercheck's option table and its classic positional form, apart from
 * its main so that the argv fuzzer parses exactly what the binary parses. */
#include <stdio.h>

#include "clustercheck_opts.h"
#include "probe.h"
#include "readiness.h"
#include "util.h"

/* clang-format off */
static const struct opt_def options[] = {
	PROBE_CONN_OPTIONS("mysqld", "localhost", "mysqld address; localhost means the unix socket, as for the mysql client, unless --port is given.",
			   "3306", "clustercheckuser", NULL, "MYSQL_PASSWORD", "clustercheckpassword!"),
	{"timeout", 't', OPT_NUMBER, "SECONDS", "10", NULL, 0.05, 3600, NULL,
	 "One deadline for each check (connect, auth, queries); decimals allowed.", 0},
	{"available-when-donor", 0, OPT_FLAG, NULL, "0", "AVAILABLE_WHEN_DONOR", 0, 0, NULL,
	 "A donor/desynced node (wsrep_local_state=2) counts as synced.", 0},
	{"available-when-readonly", 0, OPT_FLAG, NULL, "1", "AVAILABLE_WHEN_READONLY", 0, 0, NULL,
	 "A read_only=ON node counts as available; 0 answers 503 'read-only'.", 0},
	{"log-file", 0, OPT_STRING, "PATH", "/dev/null", "ERR_FILE", 0, 0, NULL,
	 "Where the one-line reason and warnings go (stderr may be the client socket under xinetd).", 0, OPT_FIELD(struct clustercheck_settings, log_file)},
	{"verbose", 'v', OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "One-shot: also print the reason line on stderr (done anyway when stdout is a terminal; under xinetd "
	 "stderr is the client's socket).", 0, OPT_FIELD(struct clustercheck_settings, verbose)},
	{"disabled-file", 0, OPT_STRING, "PATH", "/var/tmp/clustercheck.disabled", NULL, 0, 0, NULL,
	 "While this file exists the node answers 503 'manually disabled' (only a file of root, this user or the "
	 "--datadir's owner counts).", 0, OPT_FIELD(struct clustercheck_settings, c.disabled_file)},
	{"listen", 'l', OPT_STRING, "[ADDR:]PORT", NULL, NULL, 0, 0, NULL,
	 "Serve HTTP on this address (the classic port is 9200) instead of answering once on stdout.", 0, OPT_FIELD(struct clustercheck_settings, listen)},
	{"cache-ms", 0, OPT_INT, "MS", "0", NULL, 0, 60000, NULL,
	 "With --listen: reuse a result for this long (0: every request checks; concurrent requests share one check).", 0, OPT_FIELD(struct clustercheck_settings, c.cache_ms)},
	{"max-connections", 0, OPT_INT, "N", "512", NULL, 1, 10000, NULL,
	 "With --listen: open HTTP connections at most, each on a thread of its own (at the cap a new one takes the place of the one that has waited longest for a request).", 0},
	{"max-connections-per-ip", 0, OPT_INT, "N", "32", NULL, 1, 10000, NULL,
	 "With --listen: open HTTP connections from one client address at most.", 0},
	{"idle-timeout", 0, OPT_INT, "SECONDS", "10", NULL, 1, 3600, NULL,
	 "With --listen: close a connection that sends nothing for this long.", 0},
	{"request-timeout", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 3600, NULL,
	 "With --listen: a request must be complete this long after its connection opened (or its previous answer was ready), however slowly it trickles in; otherwise the connection is closed.", 0},
	{"datadir", 0, OPT_STRING, "DIR", "/var/lib/mysql", NULL, 0, 0, NULL,
	 "With --listen: the datadir of /liveness and /readiness bypass files and of /healthcheck?mariadbupgrade.", 0, OPT_FIELD(struct clustercheck_settings, c.sst.datadir)},
	{"recovery-file", 0, OPT_STRING, "PATH", "/tmp/recovery-case", NULL, 0, 0, NULL,
	 "With --listen: while this file exists /liveness and /readiness answer 200 (manual recovery; only a file "
	 "of root, this user or the --datadir's owner counts).", 0, OPT_FIELD(struct clustercheck_settings, c.sst.recovery_file)},
	{"state-file", 0, OPT_STRING, "PATH", NULL, "MYSQL_STATE_FILE", 0, 0, NULL,
	 "With --listen: mysqld state file; when it says 'startup' /liveness answers 200 whatever failed.", 0, OPT_FIELD(struct clustercheck_settings, c.state_file)},
	PROBE_SST_OPTIONS("With --listen, for /liveness: ", struct clustercheck_settings, c.sst),
	READINESS_RULE_OPTIONS_PREFIXED
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", NULL, 0, 0, "text|json", "With --listen or --register: log line format.", 0},
	{"log-level", 0, OPT_ENUM, "LEVEL", "info", NULL, 0, 0, "debug|info|warn|error", "With --listen or --register: lowest level logged.", 0},
	{"register", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "Keep this node's key in Consul KV while it is healthy, bound to a session with a TTL (see docs/register.md).", 0, OPT_FIELD(struct clustercheck_settings, registering)},
	{"once", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "With --register: one round for cron; exit 0 when Consul matches the node, 1 when it could not be updated.", 0, OPT_FIELD(struct clustercheck_settings, reg.once)},
	{"interval", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 3600, NULL,
	 "With --register: time between rounds (at most half of --session-ttl); decimals allowed.", 0},
	{"consul-prefix", 0, OPT_STRING, "PREFIX", NULL, NULL, 0, 0, NULL,
	 "With --register: KV prefix of the key, e.g. mysql/replica/<cluster>/<region> (required).", 0, OPT_FIELD(struct clustercheck_settings, reg.prefix)},
	{"advertise", 0, OPT_STRING, "HOST:PORT", NULL, NULL, 0, 0, NULL,
	 "With --register: the key's last segment and its value [default: the checked host:port; the node's IP for localhost or a socket].", 0, OPT_FIELD(struct clustercheck_settings, reg.advertise)},
	{"key-without-port", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL,
	 "With --register: the key's last segment is the host alone (the port stays in the value), for Consul releases that refuse ':' in keys (1.21.5); proxysql-sync reads both forms.", 0, OPT_FIELD(struct clustercheck_settings, reg.key_without_port)},
	{"session-ttl", 0, OPT_INT, "SECONDS", "15", NULL, 10, 86400, NULL,
	 "With --register: TTL of the Consul session holding the key; with --once it must exceed the cron period.", 0, OPT_FIELD(struct clustercheck_settings, reg.ttl_s)},
	{"session-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL,
	 "With --register --once: keeps the session ID between runs (written atomically, mode 0600; a file that is not this user's own is ignored); one per registered node [default: $XDG_RUNTIME_DIR/clustercheck.session, else /run/clustercheck.session (root), else /tmp/clustercheck-UID/clustercheck.session].", 0, OPT_FIELD(struct clustercheck_settings, reg.session_file)},
	{"consul-addr", 0, OPT_STRING, "ADDR", NULL, NULL, 0, 0, NULL,
	 "Consul HTTP address (host:port, http(s)://host:port, unix:///path) [default: CONSUL_HTTP_ADDR, else 127.0.0.1:8500].", 0},
	{"consul-token-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL,
	 "File with the Consul ACL token [default: CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_TOKEN].", 0},
	{"consul-cacert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "CA bundle for Consul over HTTPS [default: CONSUL_CACERT].", 0},
	{"consul-client-cert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client certificate for Consul [default: CONSUL_CLIENT_CERT].", 0},
	{"consul-client-key", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client key for Consul [default: CONSUL_CLIENT_KEY].", 0},
	{"consul-tls-server-name", 0, OPT_STRING, "NAME", NULL, NULL, 0, 0, NULL,
	 "Server name to verify on Consul's certificate [default: CONSUL_TLS_SERVER_NAME].", 0},
	{"consul-datacenter", 0, OPT_STRING, "DC", NULL, NULL, 0, 0, NULL, "Consul datacenter [default: the agent's].", 0},
	{"consul-agent", 0, OPT_ENUM, "MODE", "auto", NULL, 0, 0, "auto|local|none",
	 "With --register: whether a Consul client agent runs beside us at --consul-addr (local), or Consul servers answer directly (none); auto asks once (GET /v1/agent/self) and logs which. The session is bound to its TTL only either way (see docs/register.md).", 0},
	{"consul-login-method", 0, OPT_STRING, "NAME", NULL, NULL, 0, 0, NULL,
	 "With --register: log in to Consul with this ACL auth method (as consul login does) instead of using consul-token-file; logged out at exit.", 0},
	{"consul-login-bearer-token-file", 0, OPT_STRING, "PATH", "/var/run/secrets/kubernetes.io/serviceaccount/token", NULL, 0, 0, NULL,
	 "With --consul-login-method: the bearer token to log in with (a Kubernetes service-account token), read at each login.", 0},
	{"consul-login-meta", 0, OPT_STRING, "KEY=VALUE[,...]", NULL, NULL, 0, 0, NULL,
	 "With --consul-login-method: metadata for the token Consul makes (consul login -meta).", 0},
};
/* clang-format on */

void clustercheck_opts_init(struct opts *o)
{
	*o = (struct opts){
		.prog = "clustercheck",
		.version = SIDEKICK_VERSION,
		.synopsis = "[OPTION]... [USER [PASS [AVAILABLE_WHEN_DONOR [LOG_FILE [AVAILABLE_WHEN_READONLY "
			    "[DEFAULTS_FILE]]]]]]",
		.summary =
			"Answer whether this Galera node should take traffic, as the classic clustercheck does:\n"
			"an HTTP 200/503 response on stdout (xinetd, systemd Accept=yes) and exit 0/1, or serve HTTP\n"
			"itself with --listen. The positional form is accepted for existing xinetd server_args.",
		.defs = options,
		.ndefs = SK_ARRAY_LEN(options),
		.config_opt = "config",
		.max_args = 6,
	};
}

/* See clustercheck_opts.h. */
int clustercheck_opts_apply_positional(struct opts *o, bool *password_on_argv, char *err, size_t errlen)
{
	static const char *const names[] = {
		"user", "password", "available-when-donor", "log-file", "available-when-readonly", "defaults-extra-file"
	};
	char source[32];

	if (o->nargs > (int)SK_ARRAY_LEN(names))
		return sk_err(err, errlen, "too many arguments: at most %zu (see --help)", SK_ARRAY_LEN(names));
	for (int i = 0; i < o->nargs; i++) {
		if (!o->args[i][0] && i != 1)
			continue; /* the scripts' ${N:-default}: an empty argument keeps the default */
		snprintf(source, sizeof(source), "argument %d", i + 1);
		if (opt_set(o, names[i], o->args[i], source, err, errlen) < 0)
			return -1;
	}
	*password_on_argv = o->nargs >= 2 && o->args[1][0];
	return 0;
}
