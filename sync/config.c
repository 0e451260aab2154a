/* config.c: loading proxysql-sync's configuration (file < environment < flags): the option table,
 * and the parsed table turned into the typed structs the agent reads (struct sync_settings, the
 * layout's prefixes and defaults, --admin-addr's target, the Consul client's settings), once, so
 * that no running code looks a setting up by name. The config file's lists (clusters, targets,
 * services) are config_lists.c's; the checks of the whole are config_check.c's. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_check.h"
#include "config_lists.h"
#include "consul_login.h"
#include "log.h"
#include "secret.h"

#ifndef SIDEKICK_VERSION
#define SIDEKICK_VERSION "0.1.0"
#endif

/* clang-format off */
const struct opt_def sync_options[] = {
	{"config", 'c', OPT_STRING, "FILE", NULL, "PROXYSQL_SYNC_CONFIG", 0, 0, NULL, "libconfig file with these settings and the clusters and targets lists.", OPT_NO_FILE},
	{"once", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Sync once and exit: 0 only when every target is in the desired state (cron, init containers).", OPT_NO_FILE, OPT_FIELD(struct sync_settings, once)},
	{"dry-run", 'n', OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Print the plan as SQL (passwords redacted) for every target and exit; change nothing.", OPT_NO_FILE, OPT_FIELD(struct sync_settings, dry_run)},
	{"check-config", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Check the configuration and exit 0, or 2 with the problem.", OPT_NO_FILE, OPT_FIELD(struct sync_settings, check_config)},
	{"lock-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "With --once: a lock so overlapping cron runs cannot collide [default: $XDG_RUNTIME_DIR/proxysql-sync.lock, else /run/proxysql-sync.lock when /run is writable (root), else /tmp/proxysql-sync-UID/proxysql-sync.lock in a 0700 directory of this user]. A symbolic link is not followed; a file that is not regular, belongs to another user or has other hard links is refused.", 0, OPT_FIELD(struct sync_settings, lock_file)},
	{"consul-addr", 0, OPT_STRING, "ADDR", NULL, NULL, 0, 0, NULL, "Consul HTTP address (host:port, http(s)://host:port, unix:///path) [default: CONSUL_HTTP_ADDR, else 127.0.0.1:8500].", 0},
	{"consul-token-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "File with the ACL token [default: CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_TOKEN].", 0},
	{"consul-cacert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "CA bundle for HTTPS [default: CONSUL_CACERT].", 0},
	{"consul-client-cert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client certificate [default: CONSUL_CLIENT_CERT].", 0},
	{"consul-client-key", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client key [default: CONSUL_CLIENT_KEY].", 0},
	{"consul-tls-server-name", 0, OPT_STRING, "NAME", NULL, NULL, 0, 0, NULL, "Server name to verify [default: CONSUL_TLS_SERVER_NAME].", 0},
	{"consul-datacenter", 0, OPT_STRING, "DC", NULL, NULL, 0, 0, NULL, "Datacenter to read [default: the agent's].", 0},
	{"consul-agent", 0, OPT_ENUM, "MODE", "auto", NULL, 0, 0, "auto|local|none", "Whether a Consul client agent runs beside this agent at consul-addr: local (sessions also end with its node's health; announce-service registers through it), none (Consul servers answer directly, perhaps through a load-balanced address: sessions are bound to their TTL only, and announce-service cannot register), or auto (asked once, GET /v1/agent/self; a token without agent:read counts as none).", 0},
	{"consul-login-method", 0, OPT_STRING, "NAME", NULL, NULL, 0, 0, NULL, "Log in to Consul with this ACL auth method (POST /v1/acl/login, as consul login does) and use the token it gives instead of consul-token-file; logged in again before the token expires and when Consul no longer knows it, logged out at exit.", 0},
	{"consul-login-bearer-token-file", 0, OPT_STRING, "PATH", "/var/run/secrets/kubernetes.io/serviceaccount/token", NULL, 0, 0, NULL, "With consul-login-method: the bearer token to log in with (a Kubernetes service-account token), read again at each login.", 0},
	{"consul-login-meta", 0, OPT_STRING, "KEY=VALUE[,...]", NULL, NULL, 0, 0, NULL, "With consul-login-method: metadata for the token Consul makes (consul login -meta).", 0},
	{"consistency", 0, OPT_ENUM, "MODE", "default", NULL, 0, 0, "default|stale|consistent", "Consul read consistency.", 0},
	{"max-stale", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0, 3600, NULL, "With consistency=stale: an answer whose server last heard from the leader longer ago is read again at once from the leader (default consistency), and that answer is believed.", 0},
	{"wait", 0, OPT_NUMBER, "SECONDS", "60", NULL, 1, 600, NULL, "Blocking query wait (Consul caps it at 600).", 0},
	{"max-response-bytes", 0, OPT_INT, "BYTES", "16777216", NULL, 4096, 1073741824, NULL, "A larger Consul answer is refused (the last good state kept). Listings are parsed as they arrive: memory follows the keys kept, not this cap.", 0},
	{"master-prefix", 0, OPT_STRING, "PREFIX", "mysql/master", NULL, 0, 0, NULL, "orchestrator's KVClusterMasterPrefix ('' to ignore).", 0},
	{"replica-prefix", 0, OPT_STRING, "PREFIX", "mysql/replica", NULL, 0, 0, NULL, "Replicas as <prefix>/<alias>/<region>/<host:port> ('' to ignore).", 0},
	{"servers-prefix", 0, OPT_STRING, "PREFIX", "", NULL, 0, 0, NULL, "Generic servers as <prefix>/<hostgroup>/<host:port> = JSON attributes ('' to ignore).", 0},
	{"users-prefix", 0, OPT_STRING, "PREFIX", "", NULL, 0, 0, NULL, "Users as <prefix>/<username> = JSON ('' to ignore).", 0},
	{"pgsql-users-prefix", 0, OPT_STRING, "PREFIX", "", NULL, 0, 0, NULL, "PostgreSQL users for pgsql_users (ProxySQL 3), as <prefix>/<username> = JSON like users-prefix's, without default_schema and schema_locked; the password clear or a SCRAM-SHA-256 secret ('' to ignore; docs/postgresql.md).", 0},
	{"announce-prefix", 0, OPT_STRING, "PREFIX", "", NULL, 0, 0, NULL, "ProxySQL hosts announce themselves as <prefix>/<host>_<port> = {hostname, port, weight, comment}; with proxysql-servers, every target's proxysql_servers follows it ('' to turn off).", 0, OPT_FIELD(struct sync_settings, announce_prefix)},
	{"announce-service", 0, OPT_STRING, "NAME", "", NULL, 0, 0, NULL, "Instead of announce-prefix: the ProxySQL fleet is the passing instances of this Consul service (Service.Address, Service.Port, Service.Meta weight and comment), and announce-address registers this ProxySQL as one of them through the Consul agent at consul-addr, with a TTL check ('' to turn off).", 0, OPT_FIELD(struct sync_settings, announce_service)},
	{"announce-address", 0, OPT_STRING, "HOST:PORT", "", "PROXYSQL_SYNC_ANNOUNCE_ADDRESS", 0, 0, NULL, "Announce this ProxySQL, as its peers reach its admin port: a key under announce-prefix held by a TTL session that ends with the node or the agent, or an instance of announce-service whose TTL check the agent keeps passing ('' to not announce).", 0, OPT_FIELD(struct sync_settings, announce_address)},
	{"announce-weight", 0, OPT_INT, "N", "0", NULL, 0, 10000000, NULL, "The weight announced with announce-address.", 0, OPT_FIELD(struct sync_settings, announce_weight)},
	{"announce-comment", 0, OPT_STRING, "TEXT", "", NULL, 0, 0, NULL, "The comment announced with announce-address.", 0, OPT_FIELD(struct sync_settings, announce_comment)},
	{"announce-ttl", 0, OPT_NUMBER, "SECONDS", "15", NULL, 1, 86400, NULL, "The TTL of the announce key's session or of the announce-service check (renewed at a third of it).", 0},
	{"proxysql-servers", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "With announce-prefix or announce-service: keep each target's proxysql_servers equal to the announced fleet (the target itself always stays).", 0, OPT_FIELD(struct sync_settings, proxysql_servers)},
	{"region", 0, OPT_STRING, "NAME", "", "PROXYSQL_SYNC_REGION", 0, 0, NULL, "This ProxySQL's region: its replicas go to each cluster's reader_hostgroup.", 0},
	{"managed-hostgroups", 0, OPT_STRING, "ID[,ID...]", "", NULL, 0, 0, NULL, "Hostgroups the generic servers prefix may fill.", 0},
	{"admin-addr", 0, OPT_STRING, "HOST:PORT", NULL, "PROXYSQL_ADMIN_ADDR", 0, 0, NULL, "One ProxySQL admin target (more in the config file's targets list).", 0},
	{"admin-user", 0, OPT_STRING, "USER", "admin", "PROXYSQL_ADMIN_USER", 0, 0, NULL, "Admin user for --admin-addr.", 0},
	{"admin-password-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "File with the admin password for --admin-addr.", 0},
	{"admin-password", 0, OPT_STRING, "PASSWORD", NULL, "PROXYSQL_ADMIN_PASSWORD", 0, 0, NULL, "Admin password for --admin-addr (environment or config file only).", OPT_SECRET | OPT_NO_ARGV},
	{"admin-tls", 0, OPT_FLAG, NULL, "0", "PROXYSQL_ADMIN_TLS", 0, 0, NULL, "Require TLS to --admin-addr (a targets entry says tls = true).", 0},
	{"admin-tls-ca", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "CA certificate for --admin-tls (tls_ca).", 0},
	{"admin-tls-cert", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client certificate for --admin-tls (tls_cert).", 0},
	{"admin-tls-key", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "Client key for --admin-tls (tls_key).", 0},
	{"admin-tls-verify", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "Verify the admin interface's certificate (against --admin-tls-ca, else the system's CA store) and host name (tls_verify); 0 connects to any certificate, with a warning.", 0},
	{"admin-allow-plaintext-password", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Send the admin password to a --admin-addr that is not loopback without TLS (allow_plaintext_password); refused otherwise.", 0},
	{"admin-timeout", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 600, NULL, "Deadline for each admin round (read, apply, verify).", 0, OPT_FIELD(struct sync_settings, admin_timeout_s)},
	{"save-to-disk", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "SAVE ... TO DISK after each LOAD ... TO RUNTIME.", 0, OPT_FIELD(struct sync_settings, save_to_disk)},
	{"save-delay", 0, OPT_NUMBER, "SECONDS", "0.2", NULL, 0, 60, NULL, "With save-to-disk, a change on the hot path is LOADed at once and SAVEd at most this long after the first LOAD not yet saved: a burst of changes costs one SAVE, and disk never lags runtime by more (0: SAVE with each LOAD).", 0},
	{"drain-timeout", 0, OPT_NUMBER, "SECONDS", "300", NULL, 0, 86400, NULL, "A removed server stays OFFLINE_SOFT until its used connections reach 0 or this passes (0: delete at once).", 0},
	{"quiescence-min", 0, OPT_NUMBER, "SECONDS", "0.3", NULL, 0, 600, NULL, "Apply only after the KV snapshot has been still this long.", 0, OPT_FIELD(struct sync_settings, quiescence_min_s)},
	{"quiescence-max", 0, OPT_NUMBER, "SECONDS", "3", NULL, 0, 3600, NULL, "...but never wait longer than this after the first change.", 0, OPT_FIELD(struct sync_settings, quiescence_max_s)},
	{"shrink-fraction", 0, OPT_NUMBER, "RATIO", "0.5", NULL, 0, 1, NULL, "A prefix that empties or loses more than this fraction of its keys must be confirmed first.", 0, OPT_FIELD(struct sync_settings, shrink_fraction)},
	{"confirmations", 0, OPT_INT, "N", "3", NULL, 1, 100, NULL, "Consecutive reads (with a known leader) that confirm an emptied or shrunken prefix.", 0, OPT_FIELD(struct sync_settings, confirmations)},
	{"allow-empty-writer", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Allow a writer hostgroup to become empty (by default the last writer stays).", 0, OPT_FIELD(struct sync_settings, allow_empty_writer)},
	{"resync-interval", 0, OPT_NUMBER, "SECONDS", "30", NULL, 1, 86400, NULL, "Compare each target with the desired state at least this often.", 0},
	{"adopt-users", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Let a KV user replace a user of the same name that the agent does not own (by default it is reported and left alone).", 0, OPT_FIELD(struct sync_settings, adopt_users)},
	{"foreign-edits", 0, OPT_ENUM, "MODE", "publish", NULL, 0, 0, "publish|hold", "Rows someone else staged in memory without loading them: publish them with the agent's LOAD, or hold (no LOAD of that table while they are there).", 0},
	{"cluster-mode", 0, OPT_ENUM, "MODE", "refuse", NULL, 0, 0, "refuse|disable-pull|single-writer", "A target in a ProxySQL Cluster that pulls a table the agent manages: refuse to write it, disable-pull (set its admin-cluster_<table>_diffs_before_sync to 0), or single-writer (one agent of the cluster writes, elected through cluster-lock-key). A target's cluster_mode overrides it.", 0},
	{"cluster-lock-key", 0, OPT_STRING, "KEY", "proxysql-sync/cluster-lock", NULL, 0, 0, NULL, "With cluster-mode = single-writer: the Consul key whose session lock elects the one agent that writes.", 0, OPT_FIELD(struct sync_settings, cluster_lock_key)},
	{"cluster-lock-ttl", 0, OPT_NUMBER, "SECONDS", "15", NULL, 1, 86400, NULL, "single-writer: the TTL of the lock's session (renewed at a third of it; Consul refuses less than its session_ttl_min, 10 s by default).", 0},
	{"cluster-lock-delay", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0, 60, NULL, "single-writer: Consul's lock-delay on the key after the holder's session ends.", 0, OPT_FIELD(struct sync_settings, cluster_lock_delay_s)},
	{"cluster-converge-timeout", 0, OPT_NUMBER, "SECONDS", "30", NULL, 1, 86400, NULL, "single-writer: a follower whose target stays different from the desired state this long is not ready.", 0},
	{"cluster-leader-grace", 0, OPT_NUMBER, "SECONDS", "20", NULL, 1, 86400, NULL, "single-writer: the holder gives the lock up when its own target has been unreachable this long.", 0},
	{"user-tag", 0, OPT_STRING, "TEXT", "proxysql-sync", NULL, 0, 0, NULL, "Comment prefix marking the users this agent owns (and may delete).", 0},
	{"default-weight", 0, OPT_INT, "N", "1", NULL, 0, 10000000, NULL, "Server weight unless KV says otherwise.", 0},
	{"default-max-connections", 0, OPT_INT, "N", "1000", NULL, 0, 2147483647, NULL, "Server max_connections unless KV says otherwise.", 0},
	{"default-max-replication-lag", 0, OPT_INT, "SECONDS", "0", NULL, 0, 126144000, NULL, "Server max_replication_lag unless KV says otherwise.", 0},
	{"default-use-ssl", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Server use_ssl unless KV says otherwise.", 0},
	{"default-compression", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Server compression unless KV says otherwise.", 0},
	{"default-max-latency-ms", 0, OPT_INT, "MS", "0", NULL, 0, 2147483647, NULL, "Server max_latency_ms unless KV says otherwise.", 0},
	{"default-comment", 0, OPT_STRING, "TEXT", "", NULL, 0, 0, NULL, "Server comment unless KV says otherwise.", 0},
	{"user-default-hostgroup", 0, OPT_INT, "ID", "0", NULL, 0, 2147483647, NULL, "User default_hostgroup unless KV says otherwise.", 0},
	{"user-max-connections", 0, OPT_INT, "N", "10000", NULL, 0, 2147483647, NULL, "User max_connections unless KV says otherwise.", 0},
	{"health-listen", 0, OPT_STRING, "[ADDR:]PORT", "127.0.0.1:9901", "PROXYSQL_SYNC_HEALTH_LISTEN", 0, 0, NULL, "Serve /healthz, /readyz and /metrics here ('' to disable).", 0, OPT_FIELD(struct sync_settings, health_listen)},
	{"health-max-connections", 0, OPT_INT, "N", "512", NULL, 1, 10000, NULL, "Open connections to the health port at most (at the cap a new one takes the place of the one that has waited longest for a request; see docs/proxysql-sync.md).", 0},
	{"health-max-connections-per-ip", 0, OPT_INT, "N", "32", NULL, 1, 10000, NULL, "Open connections to the health port from one client address at most.", 0},
	{"health-idle-timeout", 0, OPT_INT, "SECONDS", "10", NULL, 1, 3600, NULL, "Close a health port connection that sends nothing for this long.", 0},
	{"health-request-timeout", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 3600, NULL, "A health port request must be complete this long after its connection opened (or its previous answer was ready), however slowly it trickles in; otherwise the connection is closed.", 0},
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", "PROXYSQL_SYNC_LOG_FORMAT", 0, 0, "text|json", "Log line format (stdout).", 0},
	{"log-level", 0, OPT_ENUM, "LEVEL", "info", "PROXYSQL_SYNC_LOG_LEVEL", 0, 0, "debug|info|warn|error", "Lowest level logged.", 0},
};
/* clang-format on */
const size_t sync_noptions = SK_ARRAY_LEN(sync_options);

/* The names of foreign-edits' values, in the enum's order. */
static const char *const foreign_edits_modes[] = { "publish", "hold" };

/* The index of `v` in `names`, or -1. */
static int name_index(const char *v, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v, names[i]) == 0)
			return (int)i;
	return -1;
}

/* The mode flags, lock-file and the Consul reads. */
static int load_read_settings(struct sync_settings *s, const struct opts *o, char *err, size_t errlen)
{
	if (!consul_consistency_parse(opt_str(o, "consistency"), &s->consistency))
		return sk_err(err, errlen, "consistency: '%s' is not default, stale or consistent",
			      opt_str(o, "consistency"));
	if (!consul_agent_mode_parse(opt_str(o, "consul-agent"), &s->consul_agent))
		return sk_err(err, errlen, "consul-agent: '%s' is not auto, local or none", opt_str(o, "consul-agent"));
	s->max_stale_ms = opt_num(o, "max-stale") * 1000;
	s->wait_ms = (long)(opt_num(o, "wait") * 1000);
	s->max_response_bytes = (size_t)opt_int(o, "max-response-bytes");
	return 0;
}

/* announce-* and proxysql-servers, announce-address split into host and port once. */
static void load_announce_settings(struct sync_settings *s, const struct opts *o)
{
	s->announce_service_source = opt_source(o, "announce-service");
	s->announce_ttl_s = (long)opt_num(o, "announce-ttl");
	s->announce_parsed = *s->announce_address && !model_split_address(s->announce_address, 6032, s->announce_host,
									  sizeof(s->announce_host), &s->announce_port);
	if (!s->announce_parsed) {
		s->announce_host[0] = '\0';
		s->announce_port = 6032;
	}
}

/* What each target's apply and the guards read. */
static int load_apply_settings(struct sync_settings *s, const struct opts *o, char *err, size_t errlen)
{
	int fe = name_index(opt_str(o, "foreign-edits"), foreign_edits_modes, SK_ARRAY_LEN(foreign_edits_modes));

	if (fe < 0)
		return sk_err(err, errlen, "foreign-edits: '%s' is not publish or hold", opt_str(o, "foreign-edits"));
	s->foreign_edits = (enum sync_foreign_edits)fe;
	s->admin_timeout_ms = (int64_t)(s->admin_timeout_s * 1000);
	s->drain_timeout_ms = (int64_t)(opt_num(o, "drain-timeout") * 1000);
	s->resync_interval_us = (int64_t)(opt_num(o, "resync-interval") * 1e6);
	s->save_delay_us = (int64_t)(opt_num(o, "save-delay") * 1e6);
	s->quiescence_min_us = (int64_t)(s->quiescence_min_s * 1e6);
	s->quiescence_max_us = (int64_t)(s->quiescence_max_s * 1e6);
	return 0;
}

/* cluster-mode and the single-writer lock. */
static int load_cluster_settings(struct sync_settings *s, const struct opts *o, char *err, size_t errlen)
{
	if (!sync_cluster_mode_parse(opt_str(o, "cluster-mode"), &s->cluster_mode))
		return sk_err(err, errlen, "cluster-mode: '%s' is not refuse, disable-pull or single-writer",
			      opt_str(o, "cluster-mode"));
	s->cluster_lock_ttl_s = (long)opt_num(o, "cluster-lock-ttl");
	s->cluster_converge_timeout_us = (int64_t)(opt_num(o, "cluster-converge-timeout") * 1e6);
	s->cluster_leader_grace_us = (int64_t)(opt_num(o, "cluster-leader-grace") * 1e6);
	return 0;
}

/* The health port and the log. */
static void load_service_settings(struct sync_settings *s, const struct opts *o)
{
	s->health_max_connections = (unsigned)opt_int(o, "health-max-connections");
	s->health_max_connections_per_ip = (unsigned)opt_int(o, "health-max-connections-per-ip");
	s->health_idle_timeout_s = (unsigned)opt_int(o, "health-idle-timeout");
	s->health_request_timeout_ms = (unsigned)(opt_num(o, "health-request-timeout") * 1000);
	s->log_format = LOG_TEXT;
	s->log_level = LOG_INFO;
	if (!log_format_parse(opt_str(o, "log-format"), &s->log_format) ||
	    !log_level_parse(opt_str(o, "log-level"), &s->log_level))
		s->log_format = LOG_TEXT;
}

int sync_settings_load(struct sync_settings *s, const struct opts *o, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	opts_bind(o, s); /* the plain settings (the rows with OPT_FIELD); the rest below */
	if (load_read_settings(s, o, err, errlen) < 0 || load_apply_settings(s, o, err, errlen) < 0 ||
	    load_cluster_settings(s, o, err, errlen) < 0)
		return -1;
	load_announce_settings(s, o);
	load_service_settings(s, o);
	return 0;
}

static int parse_id_list(const char *s, long **out, size_t *n)
{
	char *buf = xstrdup(s), *save = NULL, *tok;
	int rc = 0;

	*out = NULL;
	*n = 0;
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		long v;

		if (!sk_parse_long(tok, 0, 2147483647L, &v)) {
			rc = -1;
			break;
		}
		*out = xrealloc(*out, (*n + 1) * sizeof(long));
		(*out)[(*n)++] = v;
	}
	free(buf);
	return rc;
}

/* consul-login-method's settings, checked as the agent will build its login. */
static int load_consul_login(struct sync_config *c, char *err, size_t errlen)
{
	const struct consul_config *cc = &c->consul;
	char why[300];
	sk_buf meta;
	int rc;

	if (!cc->login_method)
		return 0;
	sk_buf_init(&meta, 16384);
	rc = consul_login_meta_json(cc->login_meta, &meta, why, sizeof(why));
	sk_buf_free(&meta);
	if (rc < 0)
		return sk_err(err, errlen, "%s: %s", opt_source(&c->o, "consul-login-meta"), why);
	if (sk_has_ctl(cc->login_method))
		return sk_err(err, errlen, "%s: holds a control character", opt_source(&c->o, "consul-login-method"));
	if (cc->token)
		log_warn("consul-login-method is set: the token of %s is not used",
			 opt_str(&c->o, "consul-token-file") ? "consul-token-file" : "CONSUL_HTTP_TOKEN(_FILE)");
	return 0;
}

/* The Consul client's settings, with the token file read now, checked by making (and dropping) a
 * client: what the agent would refuse at start is refused here. */
static int load_consul(struct sync_config *c, char *err, size_t errlen)
{
	struct consul_config *cc = &c->consul;
	struct consul *probe;
	char why[400];

	if (consul_config_from_opts(cc, &c->o, why, sizeof(why)) < 0)
		return sk_err(err, errlen, "%s", why);
	cc->max_response = c->settings.max_response_bytes;
	if (cc->token_file) {
		char *token = secret_read_file(cc->token_file, why, sizeof(why));

		if (!token)
			return sk_err(err, errlen, "%s %s",
				      opt_str(&c->o, "consul-token-file") ? "consul-token-file"
									  : "CONSUL_HTTP_TOKEN_FILE",
				      why);
		consul_config_set(&cc->token, token); /* the file wins over CONSUL_HTTP_TOKEN */
		consul_config_set(&cc->token_file, NULL);
		sk_wipe(token, strlen(token));
		free(token);
	}
	probe = consul_new(cc, why, sizeof(why));
	if (!probe)
		return sk_err(err, errlen, "consul: %s", why);
	consul_free(probe);
	return load_consul_login(c, err, errlen);
}

/* The options from the file, the environment and argv into c->o. */
static enum opts_result parse_options(struct sync_config *c, int argc, char **argv, char *err, size_t errlen)
{
	c->o.prog = "proxysql-sync";
	c->o.version = SIDEKICK_VERSION;
	c->o.synopsis = "[OPTION]...";
	c->o.summary = "Watch Consul KV (orchestrator's masters, replicas, generic servers, users) and keep\n"
		       "ProxySQL's mysql_servers and mysql_users in that state through its admin interface.";
	c->o.defs = sync_options;
	c->o.ndefs = sync_noptions;
	c->o.config_opt = "config";
	c->o.file_hook = config_lists_hook;
	c->o.hook_ctx = c;
	return opts_parse(&c->o, argc, argv, err, errlen);
}

/* announce-service, when proxysql-servers follows it: a service watched for the fleet. */
static int load_fleet_service(struct sync_config *c, char *err, size_t errlen)
{
	struct layout_config *l = &c->layout;
	struct layout_service *sv;
	char label[260];

	if (!*c->settings.announce_service || !c->settings.proxysql_servers)
		return 0;
	if (l->nservices >= LAYOUT_MAX_SERVICES)
		return sk_err(err, errlen, "more than %d services (announce-service is one)", LAYOUT_MAX_SERVICES);
	sv = config_lists_add_service(l);
	sv->name = xstrdup(c->settings.announce_service);
	sv->hostgroup = -1;
	sv->fleet = true;
	snprintf(label, sizeof(label), "fleet service %.200s", sv->name);
	sv->label = xstrdup(label);
	return 0;
}

/* What the layout reads besides the lists: the prefixes, region, managed-hostgroups, user-tag and
 * the defaults of servers and users. */
static int load_layout(struct sync_config *c, char *err, size_t errlen)
{
	struct layout_config *l = &c->layout;
	const struct opts *o = &c->o;

	l->master_prefix = xstrdup(opt_str(o, "master-prefix"));
	l->replica_prefix = xstrdup(opt_str(o, "replica-prefix"));
	l->servers_prefix = xstrdup(opt_str(o, "servers-prefix"));
	l->users_prefix = xstrdup(opt_str(o, "users-prefix"));
	l->announce_prefix = xstrdup(c->settings.proxysql_servers ? c->settings.announce_prefix : "");
	if (load_fleet_service(c, err, errlen) < 0)
		return -1;
	l->region = xstrdup(opt_str(o, "region"));
	l->user_tag = xstrdup(opt_str(o, "user-tag"));
	if (parse_id_list(opt_str(o, "managed-hostgroups"), &l->managed_hostgroups, &l->nmanaged) < 0)
		return sk_err(err, errlen, "%s: '%s' is not a list of hostgroup ids",
			      opt_given(o, "managed-hostgroups") ? opt_source(o, "managed-hostgroups")
								 : "managed-hostgroups",
			      opt_str(o, "managed-hostgroups"));
	model_server_defaults(&l->server_defaults);
	l->server_defaults.weight = opt_int(o, "default-weight");
	l->server_defaults.max_connections = opt_int(o, "default-max-connections");
	l->server_defaults.max_replication_lag = opt_int(o, "default-max-replication-lag");
	l->server_defaults.use_ssl = opt_flag(o, "default-use-ssl");
	l->server_defaults.compression = opt_flag(o, "default-compression");
	l->server_defaults.max_latency_ms = opt_int(o, "default-max-latency-ms");
	l->server_defaults.comment = xstrdup(opt_str(o, "default-comment"));
	if (model_check_text(l->server_defaults.comment, MODEL_COMMENT_MAX) || model_check_text(l->user_tag, 40) ||
	    !l->user_tag[0])
		return sk_err(err, errlen, "default-comment or user-tag is not printable text of a sensible length");
	model_user_defaults(&l->user_defaults);
	l->user_defaults.default_hostgroup = opt_int(o, "user-default-hostgroup");
	l->user_defaults.max_connections = opt_int(o, "user-max-connections");
	return 0;
}

/* The PostgreSQL side's layout: its clusters are the patroni list (config_lists.c), its users come
 * from pgsql-users-prefix; no orchestrator, generic or announce prefix; the MySQL side's defaults. */
static int load_pg_layout(struct sync_config *c)
{
	struct layout_config *p = &c->pg_layout;
	const struct layout_config *l = &c->layout;

	p->pgsql = true;
	p->master_prefix = xstrdup("");
	p->replica_prefix = xstrdup("");
	p->servers_prefix = xstrdup("");
	p->announce_prefix = xstrdup("");
	p->users_prefix = xstrdup(opt_str(&c->o, "pgsql-users-prefix"));
	p->region = xstrdup(l->region);
	p->user_tag = xstrdup(l->user_tag);
	p->server_defaults = l->server_defaults;
	p->server_defaults.port = 5432;
	p->server_defaults.host = NULL;
	p->server_defaults.comment = xstrdup(l->server_defaults.comment);
	p->user_defaults = l->user_defaults;
	p->user_defaults.default_schema = NULL;
	p->user_defaults.schema_locked = 0;
	p->user_defaults.username = p->user_defaults.password = p->user_defaults.comment = NULL;
	/* Only the PostgreSQL side configured: orchestrator's default prefixes are not watched. */
	if (sync_config_has_pgsql(c) && c->layout.nclusters == 0) {
		if (!opt_given(&c->o, "master-prefix"))
			c->layout.master_prefix[0] = '\0';
		if (!opt_given(&c->o, "replica-prefix"))
			c->layout.replica_prefix[0] = '\0';
	}
	return 0;
}

/* --admin-addr and the admin-* settings: one more target. */
static int load_admin_target(struct sync_config *c, char *err, size_t errlen)
{
	const struct opts *o = &c->o;
	struct sync_target *t;
	char why[300];
	const char *bad;

	if (!opt_str(o, "admin-addr"))
		return 0;
	c->targets = xrealloc(c->targets, (c->ntargets + 1) * sizeof(*c->targets));
	t = &c->targets[c->ntargets++];
	memset(t, 0, sizeof(*t));
	if ((bad = config_lists_split_address(t, opt_str(o, "admin-addr"))))
		return sk_err(err, errlen, "%s: '%s' %s", opt_source(o, "admin-addr"), opt_str(o, "admin-addr"), bad);
	t->name = xstrdup(opt_str(o, "admin-addr"));
	t->user = xstrdup(opt_str(o, "admin-user"));
	t->tls = opt_flag(o, "admin-tls");
	t->tls_verify = opt_flag(o, "admin-tls-verify");
	t->tls_verify_given = opt_given(o, "admin-tls-verify");
	t->allow_plaintext_password = opt_flag(o, "admin-allow-plaintext-password");
	t->tls_ca = opt_str(o, "admin-tls-ca") ? xstrdup(opt_str(o, "admin-tls-ca")) : NULL;
	t->tls_cert = opt_str(o, "admin-tls-cert") ? xstrdup(opt_str(o, "admin-tls-cert")) : NULL;
	t->tls_key = opt_str(o, "admin-tls-key") ? xstrdup(opt_str(o, "admin-tls-key")) : NULL;
	if (!opt_str(o, "admin-password-file")) {
		t->password = xstrdup(opt_str(o, "admin-password") ? opt_str(o, "admin-password") : "");
		return 0;
	}
	t->password = secret_read_file(opt_str(o, "admin-password-file"), why, sizeof(why));
	if (!t->password)
		return sk_err(err, errlen, "admin-password-file %s", why);
	return 0;
}

enum opts_result sync_config_load(struct sync_config *c, int argc, char **argv, char *err, size_t errlen)
{
	enum opts_result r;

	memset(c, 0, sizeof(*c));
	r = parse_options(c, argc, argv, err, errlen);
	if (r != OPTS_OK)
		return r;
	c->path = opt_str(&c->o, "config");
	if (sync_settings_load(&c->settings, &c->o, err, errlen) < 0 || load_layout(c, err, errlen) < 0 ||
	    load_pg_layout(c) < 0 || load_admin_target(c, err, errlen) < 0)
		return OPTS_ERROR;
	for (size_t i = 0; i < c->ntargets; i++) /* a target's own cluster_mode was read with it */
		if (!c->targets[i].cluster_mode)
			c->targets[i].mode = c->settings.cluster_mode;
	if (config_check_whole(c, err, errlen) < 0 || load_consul(c, err, errlen) < 0)
		return OPTS_ERROR;
	return OPTS_OK;
}

void sync_config_free(struct sync_config *c)
{
	for (size_t i = 0; i < c->ntargets; i++) {
		free(c->targets[i].name);
		free(c->targets[i].host);
		free(c->targets[i].user);
		free(c->targets[i].cluster_mode);
		free(c->targets[i].tls_ca);
		free(c->targets[i].tls_cert);
		free(c->targets[i].tls_key);
		if (c->targets[i].password)
			sk_wipe(c->targets[i].password, strlen(c->targets[i].password));
		free(c->targets[i].password);
	}
	free(c->targets);
	consul_config_free(&c->consul);
	layout_config_free(&c->layout);
	layout_config_free(&c->pg_layout);
	opts_free(&c->o);
	memset(c, 0, sizeof(*c));
}
