/* config.c: loading and checking proxysql-sync's configuration (file < environment < flags). */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "consul_login.h"
#include "log.h"
#include "secret.h"

#ifndef SIDEKICK_VERSION
#define SIDEKICK_VERSION "0.1.0"
#endif

/* clang-format off */
const struct opt_def sync_options[] = {
	{"config", 'c', OPT_STRING, "FILE", NULL, "PROXYSQL_SYNC_CONFIG", 0, 0, NULL, "libconfig file with these settings and the clusters and targets lists.", OPT_NO_FILE},
	{"once", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Sync once and exit: 0 only when every target is in the desired state (cron, init containers).", OPT_NO_FILE},
	{"dry-run", 'n', OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Print the plan as SQL (passwords redacted) for every target and exit; change nothing.", OPT_NO_FILE},
	{"check-config", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Check the configuration and exit 0, or 2 with the problem.", OPT_NO_FILE},
	{"lock-file", 0, OPT_STRING, "PATH", NULL, NULL, 0, 0, NULL, "With --once: a lock so overlapping cron runs cannot collide [default: $XDG_RUNTIME_DIR/proxysql-sync.lock, else /run/proxysql-sync.lock when /run is writable (root), else /tmp/proxysql-sync-UID/proxysql-sync.lock in a 0700 directory of this user]. A symbolic link is not followed; a file that is not regular, belongs to another user or has other hard links is refused.", 0},
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
	{"announce-prefix", 0, OPT_STRING, "PREFIX", "", NULL, 0, 0, NULL, "ProxySQL hosts announce themselves as <prefix>/<host>_<port> = {hostname, port, weight, comment}; with proxysql-servers, every target's proxysql_servers follows it ('' to turn off).", 0},
	{"announce-service", 0, OPT_STRING, "NAME", "", NULL, 0, 0, NULL, "Instead of announce-prefix: the ProxySQL fleet is the passing instances of this Consul service (Service.Address, Service.Port, Service.Meta weight and comment), and announce-address registers this ProxySQL as one of them through the Consul agent at consul-addr, with a TTL check ('' to turn off).", 0},
	{"announce-address", 0, OPT_STRING, "HOST:PORT", "", "PROXYSQL_SYNC_ANNOUNCE_ADDRESS", 0, 0, NULL, "Announce this ProxySQL, as its peers reach its admin port: a key under announce-prefix held by a TTL session that ends with the node or the agent, or an instance of announce-service whose TTL check the agent keeps passing ('' to not announce).", 0},
	{"announce-weight", 0, OPT_INT, "N", "0", NULL, 0, 10000000, NULL, "The weight announced with announce-address.", 0},
	{"announce-comment", 0, OPT_STRING, "TEXT", "", NULL, 0, 0, NULL, "The comment announced with announce-address.", 0},
	{"announce-ttl", 0, OPT_NUMBER, "SECONDS", "15", NULL, 1, 86400, NULL, "The TTL of the announce key's session or of the announce-service check (renewed at a third of it).", 0},
	{"proxysql-servers", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "With announce-prefix or announce-service: keep each target's proxysql_servers equal to the announced fleet (the target itself always stays).", 0},
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
	{"admin-timeout", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 600, NULL, "Deadline for each admin round (read, apply, verify).", 0},
	{"save-to-disk", 0, OPT_FLAG, NULL, "1", NULL, 0, 0, NULL, "SAVE ... TO DISK after each LOAD ... TO RUNTIME.", 0},
	{"save-delay", 0, OPT_NUMBER, "SECONDS", "0.2", NULL, 0, 60, NULL, "With save-to-disk, a change on the hot path is LOADed at once and SAVEd at most this long after the first LOAD not yet saved: a burst of changes costs one SAVE, and disk never lags runtime by more (0: SAVE with each LOAD).", 0},
	{"drain-timeout", 0, OPT_NUMBER, "SECONDS", "300", NULL, 0, 86400, NULL, "A removed server stays OFFLINE_SOFT until its used connections reach 0 or this passes (0: delete at once).", 0},
	{"quiescence-min", 0, OPT_NUMBER, "SECONDS", "0.3", NULL, 0, 600, NULL, "Apply only after the KV snapshot has been still this long.", 0},
	{"quiescence-max", 0, OPT_NUMBER, "SECONDS", "3", NULL, 0, 3600, NULL, "...but never wait longer than this after the first change.", 0},
	{"shrink-fraction", 0, OPT_NUMBER, "RATIO", "0.5", NULL, 0, 1, NULL, "A prefix that empties or loses more than this fraction of its keys must be confirmed first.", 0},
	{"confirmations", 0, OPT_INT, "N", "3", NULL, 1, 100, NULL, "Consecutive reads (with a known leader) that confirm an emptied or shrunken prefix.", 0},
	{"allow-empty-writer", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Allow a writer hostgroup to become empty (by default the last writer stays).", 0},
	{"resync-interval", 0, OPT_NUMBER, "SECONDS", "30", NULL, 1, 86400, NULL, "Compare each target with the desired state at least this often.", 0},
	{"adopt-users", 0, OPT_FLAG, NULL, "0", NULL, 0, 0, NULL, "Let a KV user replace a user of the same name that the agent does not own (by default it is reported and left alone).", 0},
	{"foreign-edits", 0, OPT_ENUM, "MODE", "publish", NULL, 0, 0, "publish|hold", "Rows someone else staged in memory without loading them: publish them with the agent's LOAD, or hold (no LOAD of that table while they are there).", 0},
	{"cluster-mode", 0, OPT_ENUM, "MODE", "refuse", NULL, 0, 0, "refuse|disable-pull|single-writer", "A target in a ProxySQL Cluster that pulls a table the agent manages: refuse to write it, disable-pull (set its admin-cluster_<table>_diffs_before_sync to 0), or single-writer (one agent of the cluster writes, elected through cluster-lock-key). A target's cluster_mode overrides it.", 0},
	{"cluster-lock-key", 0, OPT_STRING, "KEY", "proxysql-sync/cluster-lock", NULL, 0, 0, NULL, "With cluster-mode = single-writer: the Consul key whose session lock elects the one agent that writes.", 0},
	{"cluster-lock-ttl", 0, OPT_NUMBER, "SECONDS", "15", NULL, 1, 86400, NULL, "single-writer: the TTL of the lock's session (renewed at a third of it; Consul refuses less than its session_ttl_min, 10 s by default).", 0},
	{"cluster-lock-delay", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0, 60, NULL, "single-writer: Consul's lock-delay on the key after the holder's session ends.", 0},
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
	{"health-listen", 0, OPT_STRING, "[ADDR:]PORT", "127.0.0.1:9901", "PROXYSQL_SYNC_HEALTH_LISTEN", 0, 0, NULL, "Serve /healthz, /readyz and /metrics here ('' to disable).", 0},
	{"health-max-connections", 0, OPT_INT, "N", "512", NULL, 1, 10000, NULL, "Open connections to the health port at most (at the cap a new one takes the place of the one that has waited longest for a request; see docs/proxysql-sync.md).", 0},
	{"health-max-connections-per-ip", 0, OPT_INT, "N", "32", NULL, 1, 10000, NULL, "Open connections to the health port from one client address at most.", 0},
	{"health-idle-timeout", 0, OPT_INT, "SECONDS", "10", NULL, 1, 3600, NULL, "Close a health port connection that sends nothing for this long.", 0},
	{"health-request-timeout", 0, OPT_NUMBER, "SECONDS", "5", NULL, 0.1, 3600, NULL, "A health port request must be complete this long after its connection opened (or its previous answer was ready), however slowly it trickles in; otherwise the connection is closed.", 0},
	{"log-format", 0, OPT_ENUM, "FORMAT", "text", "PROXYSQL_SYNC_LOG_FORMAT", 0, 0, "text|json", "Log line format (stdout).", 0},
	{"log-level", 0, OPT_ENUM, "LEVEL", "info", "PROXYSQL_SYNC_LOG_LEVEL", 0, 0, "debug|info|warn|error", "Lowest level logged.", 0},
};
/* clang-format on */
const size_t sync_noptions = SK_ARRAY_LEN(sync_options);

/* The names of the enum settings' values, in their enums' order. */
static const char *const cluster_modes[] = { "refuse", "disable-pull", "single-writer" };
static const char *const foreign_edits_modes[] = { "publish", "hold" };

const char *sync_cluster_mode_str(enum sync_cluster_mode m)
{
	return (size_t)m < SK_ARRAY_LEN(cluster_modes) ? cluster_modes[m] : "?";
}

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
	s->once = opt_flag(o, "once");
	s->dry_run = opt_flag(o, "dry-run");
	s->check_config = opt_flag(o, "check-config");
	s->lock_file = opt_str(o, "lock-file");
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
	s->announce_prefix = opt_str(o, "announce-prefix");
	s->announce_service = opt_str(o, "announce-service");
	s->announce_service_source = opt_source(o, "announce-service");
	s->announce_address = opt_str(o, "announce-address");
	s->announce_comment = opt_str(o, "announce-comment");
	s->announce_weight = opt_int(o, "announce-weight");
	s->announce_ttl_s = (long)opt_num(o, "announce-ttl");
	s->proxysql_servers = opt_flag(o, "proxysql-servers");
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
	s->admin_timeout_s = opt_num(o, "admin-timeout");
	s->admin_timeout_ms = (int64_t)(s->admin_timeout_s * 1000);
	s->drain_timeout_ms = (int64_t)(opt_num(o, "drain-timeout") * 1000);
	s->resync_interval_us = (int64_t)(opt_num(o, "resync-interval") * 1e6);
	s->save_to_disk = opt_flag(o, "save-to-disk");
	s->save_delay_us = (int64_t)(opt_num(o, "save-delay") * 1e6);
	s->adopt_users = opt_flag(o, "adopt-users");
	s->allow_empty_writer = opt_flag(o, "allow-empty-writer");
	s->quiescence_min_s = opt_num(o, "quiescence-min");
	s->quiescence_max_s = opt_num(o, "quiescence-max");
	s->quiescence_min_us = (int64_t)(s->quiescence_min_s * 1e6);
	s->quiescence_max_us = (int64_t)(s->quiescence_max_s * 1e6);
	s->shrink_fraction = opt_num(o, "shrink-fraction");
	s->confirmations = opt_int(o, "confirmations");
	return 0;
}

/* cluster-mode and the single-writer lock. */
static int load_cluster_settings(struct sync_settings *s, const struct opts *o, char *err, size_t errlen)
{
	int m = name_index(opt_str(o, "cluster-mode"), cluster_modes, SK_ARRAY_LEN(cluster_modes));

	if (m < 0)
		return sk_err(err, errlen, "cluster-mode: '%s' is not refuse, disable-pull or single-writer",
			      opt_str(o, "cluster-mode"));
	s->cluster_mode = (enum sync_cluster_mode)m;
	s->cluster_lock_key = opt_str(o, "cluster-lock-key");
	s->cluster_lock_ttl_s = (long)opt_num(o, "cluster-lock-ttl");
	s->cluster_lock_delay_s = opt_num(o, "cluster-lock-delay");
	s->cluster_converge_timeout_us = (int64_t)(opt_num(o, "cluster-converge-timeout") * 1e6);
	s->cluster_leader_grace_us = (int64_t)(opt_num(o, "cluster-leader-grace") * 1e6);
	return 0;
}

/* The health port and the log. */
static void load_service_settings(struct sync_settings *s, const struct opts *o)
{
	s->health_listen = opt_str(o, "health-listen");
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
	if (load_read_settings(s, o, err, errlen) < 0 || load_apply_settings(s, o, err, errlen) < 0 ||
	    load_cluster_settings(s, o, err, errlen) < 0)
		return -1;
	load_announce_settings(s, o);
	load_service_settings(s, o);
	return 0;
}

/* An error in a list of the config file: "LINE: SETTING: problem" (the config loader puts the
 * file's path in front). */
SK_PRINTF(5, 6) static int at_line(char *err, size_t errlen, int line, const char *setting, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sk_err(err, errlen, "%d: %s: %s", line, setting, msg);
}

/* The line of member `name` of s, else of s itself. */
static int line_of(config_setting_t *s, const char *name)
{
	config_setting_t *m = config_setting_get_member(s, name);

	return config_setting_source_line(m ? m : s);
}

static int setting_str(config_setting_t *s, const char *name, bool required, char **out, char *err, size_t errlen)
{
	const char *v = NULL;

	if (!config_setting_lookup_string(s, name, &v)) {
		if (config_setting_get_member(s, name))
			return at_line(err, errlen, line_of(s, name), name, "must be a string");
		if (required)
			return at_line(err, errlen, config_setting_source_line(s), name, "is missing");
		return 0;
	}
	*out = xstrdup(v);
	return 0;
}

/* A hostgroup setting: a whole number from 0 to 2^31 - 1. */
static int setting_hostgroup(config_setting_t *s, const char *name, bool required, long *out, char *err, size_t errlen)
{
	const long min = 0, max = 2147483647L;
	long long v;

	if (!config_setting_lookup_int64(s, name, &v)) {
		int iv;

		if (config_setting_lookup_int(s, name, &iv)) {
			v = iv;
		} else {
			if (config_setting_get_member(s, name))
				return at_line(err, errlen, line_of(s, name), name, "must be a whole number");
			if (required)
				return at_line(err, errlen, config_setting_source_line(s), name, "is missing");
			return 0;
		}
	}
	if (v < min || v > max)
		return at_line(err, errlen, line_of(s, name), name, "%lld is out of range (%ld..%ld)", v, min, max);
	*out = (long)v;
	return 0;
}

static int check_members(config_setting_t *s, const char *const *allowed, size_t n, char *err, size_t errlen)
{
	for (int i = 0; i < config_setting_length(s); i++) {
		config_setting_t *m = config_setting_get_elem(s, (unsigned)i);
		size_t k;

		for (k = 0; k < n; k++)
			if (strcmp(config_setting_name(m), allowed[k]) == 0)
				break;
		if (k == n)
			return at_line(err, errlen, config_setting_source_line(m), config_setting_name(m),
				       "unknown setting");
	}
	return 0;
}

/* A list of strings ( "a", "b" ) or [ "a", "b" ]; absent: none. */
static int string_list(config_setting_t *s, const char *name, char ***out, size_t *n, char *err, size_t errlen)
{
	config_setting_t *l = config_setting_get_member(s, name);

	*out = NULL;
	*n = 0;
	if (!l)
		return 0;
	if (!config_setting_is_aggregate(l))
		return at_line(err, errlen, config_setting_source_line(l), name, "is a list of strings");
	for (int i = 0; i < config_setting_length(l); i++) {
		const char *v = config_setting_get_string_elem(l, i);

		if (!v || !*v || strlen(v) > 200)
			return at_line(err, errlen, config_setting_source_line(l), name,
				       "holds something other than short strings");
		*out = xrealloc(*out, (*n + 1) * sizeof(char *));
		(*out)[(*n)++] = xstrdup(v);
	}
	return 0;
}

/* A name that can be a Consul service's and sit in a URL path: printable, no '/', at most 200 bytes. */
static bool service_name_ok(const char *name)
{
	return *name && !strchr(name, '/') && strlen(name) <= 200 && !model_check_text(name, 200);
}

/* A service's role: "writer" or "reader" in the services list, none in a cluster's (its own). */
static int load_service_role(struct layout_service *sv, config_setting_t *s, long hostgroup, const char *what,
			     char *err, size_t errlen)
{
	char *role = NULL;

	if (setting_str(s, "role", false, &role, err, errlen) < 0)
		return -1;
	if (role && (hostgroup >= 0 || (strcmp(role, "writer") != 0 && strcmp(role, "reader") != 0))) {
		at_line(err, errlen, line_of(s, "role"), "role", "%s",
			hostgroup >= 0 ? "a cluster's service takes its role from the cluster; no role here"
				       : "must be \"writer\" or \"reader\"");
		free(role);
		return -1;
	}
	/* A writer hostgroup is never emptied: a cluster's writer_service, or role = "writer". */
	sv->writer = (role && strcmp(role, "writer") == 0) || (hostgroup >= 0 && strcmp(what, "writer_service") == 0);
	free(role);
	return 0;
}

/* One service source: { name = "mysql"; tags = ["replica"]; hostgroup = 11; ... } (a cluster's
 * writer_service / reader_service has no hostgroup: the cluster's). */
static int load_service(struct layout_service *sv, config_setting_t *s, long hostgroup, const char *what, char *err,
			size_t errlen)
{
	static const char *const allowed[] = { "name",   "tags",      "hostgroup",   "datacenter", "near",
					       "filter", "node_meta", "meta_prefix", "weights",    "role" };
	char label[300];
	int b = 0;

	if (!config_setting_is_group(s))
		return at_line(err, errlen, config_setting_source_line(s), hostgroup < 0 ? "services" : what,
			       "a service is a group { name = ...; }");
	sv->hostgroup = hostgroup;
	sv->line = config_setting_source_line(s);
	if (check_members(s, allowed, SK_ARRAY_LEN(allowed), err, errlen) < 0 ||
	    setting_str(s, "name", true, &sv->name, err, errlen) < 0 ||
	    string_list(s, "tags", &sv->tags, &sv->ntags, err, errlen) < 0 ||
	    string_list(s, "node_meta", &sv->node_meta, &sv->nnode_meta, err, errlen) < 0 ||
	    setting_str(s, "datacenter", false, &sv->datacenter, err, errlen) < 0 ||
	    setting_str(s, "near", false, &sv->near, err, errlen) < 0 ||
	    setting_str(s, "filter", false, &sv->filter, err, errlen) < 0 ||
	    setting_str(s, "meta_prefix", false, &sv->meta_prefix, err, errlen) < 0)
		return -1;
	if (hostgroup < 0) {
		if (setting_hostgroup(s, "hostgroup", true, &sv->hostgroup, err, errlen) < 0)
			return -1;
	} else if (config_setting_get_member(s, "hostgroup")) {
		return at_line(err, errlen, line_of(s, "hostgroup"), "hostgroup",
			       "%s takes the cluster's hostgroup; no hostgroup here", what);
	}
	if (config_setting_lookup_bool(s, "weights", &b))
		sv->weights = b;
	if (load_service_role(sv, s, hostgroup, what, err, errlen) < 0)
		return -1;
	if (!service_name_ok(sv->name))
		return at_line(err, errlen, line_of(s, "name"), "name", "'%s' is not a Consul service name", sv->name);
	for (size_t i = 0; i < sv->nnode_meta; i++)
		if (!strchr(sv->node_meta[i], ':'))
			return at_line(err, errlen, line_of(s, "node_meta"), "node_meta", "'%s' is not key:value",
				       sv->node_meta[i]);
	snprintf(label, sizeof(label), "service %s%s%s%s", sv->name, sv->ntags ? " [" : "",
		 sv->ntags ? sv->tags[0] : "", sv->ntags ? (sv->ntags > 1 ? ",...]" : "]") : "");
	sv->label = xstrdup(label);
	return 0;
}

static struct layout_service *add_service(struct layout_config *l)
{
	l->services = xrealloc(l->services, (l->nservices + 1) * sizeof(*l->services));
	memset(&l->services[l->nservices], 0, sizeof(*l->services));
	return &l->services[l->nservices++];
}

/* A cluster's roles: "kv" (the default) or "monitor". */
static int load_cluster_roles(struct layout_cluster *cl, config_setting_t *s, char *err, size_t errlen)
{
	char *roles = NULL;

	if (setting_str(s, "roles", false, &roles, err, errlen) < 0)
		return -1;
	if (roles && strcmp(roles, "kv") != 0 && strcmp(roles, "monitor") != 0) {
		at_line(err, errlen, line_of(s, "roles"), "roles", "'%s' is not kv or monitor", roles);
		free(roles);
		return -1;
	}
	cl->monitor_roles = roles && strcmp(roles, "monitor") == 0;
	free(roles);
	return 0;
}

/* A cluster's writer_service and reader_service, added to the services list. */
static int load_cluster_services(struct layout_config *l, struct layout_cluster *cl, config_setting_t *s, char *err,
				 size_t errlen)
{
	for (int role = 0; role < 2; role++) {
		const char *name = role ? "reader_service" : "writer_service";
		config_setting_t *svc = config_setting_get_member(s, name);
		long hg = role ? cl->reader_hostgroup : cl->writer_hostgroup;

		if (!svc)
			continue;
		if (hg < 0)
			return at_line(err, errlen, config_setting_source_line(svc), name, "needs a reader_hostgroup");
		if (l->nservices >= LAYOUT_MAX_SERVICES)
			return at_line(err, errlen, config_setting_source_line(svc), name, "more than %d services",
				       LAYOUT_MAX_SERVICES);
		if (load_service(add_service(l), svc, hg, name, err, errlen) < 0)
			return -1;
		*(role ? &cl->reader_from_service : &cl->writer_from_service) = true;
	}
	return 0;
}

/* remote_readers = ( { region = ...; hostgroup = ...; } ): other regions' replicas, by hostgroup. */
static int load_remote_readers(struct layout_cluster *cl, config_setting_t *s, char *err, size_t errlen)
{
	config_setting_t *remote = config_setting_get_member(s, "remote_readers");

	if (!remote)
		return 0;
	if (!config_setting_is_list(remote))
		return at_line(err, errlen, config_setting_source_line(remote), "remote_readers",
			       "is a list ( { region = ...; hostgroup = ...; } )");
	cl->nremote = (size_t)config_setting_length(remote);
	cl->remote = xcalloc(cl->nremote, sizeof(*cl->remote));
	for (size_t i = 0; i < cl->nremote; i++) {
		config_setting_t *r = config_setting_get_elem(remote, (unsigned)i);

		if (setting_str(r, "region", true, &cl->remote[i].region, err, errlen) < 0 ||
		    setting_hostgroup(r, "hostgroup", true, &cl->remote[i].hostgroup, err, errlen) < 0)
			return -1;
	}
	return 0;
}

static int load_cluster(struct layout_config *l, struct layout_cluster *cl, config_setting_t *s, char *err,
			size_t errlen)
{
	static const char *const allowed[] = {
		"alias", "writer_hostgroup", "reader_hostgroup", "writer_is_reader", "remote_readers",
		"roles", "writer_service",   "reader_service"
	};
	int b = 0;

	cl->reader_hostgroup = -1;
	cl->line = config_setting_source_line(s);
	if (!config_setting_is_group(s))
		return at_line(err, errlen, config_setting_source_line(s), "clusters",
			       "each cluster is a group { alias = ...; }");
	if (check_members(s, allowed, SK_ARRAY_LEN(allowed), err, errlen) < 0 ||
	    setting_str(s, "alias", true, &cl->alias, err, errlen) < 0 ||
	    setting_hostgroup(s, "writer_hostgroup", true, &cl->writer_hostgroup, err, errlen) < 0 ||
	    setting_hostgroup(s, "reader_hostgroup", false, &cl->reader_hostgroup, err, errlen) < 0)
		return -1;
	if (config_setting_lookup_bool(s, "writer_is_reader", &b))
		cl->writer_is_reader = b;
	if (load_cluster_roles(cl, s, err, errlen) < 0 || load_cluster_services(l, cl, s, err, errlen) < 0 ||
	    load_remote_readers(cl, s, err, errlen) < 0)
		return -1;
	if (!cl->alias[0] || strchr(cl->alias, '/'))
		return at_line(err, errlen, line_of(s, "alias"), "alias", "'%s' must be a non-empty KV path segment",
			       cl->alias);
	return 0;
}

/* A target's host and port (6032 when the address names none); NULL, or what is wrong. */
static const char *split_target_address(struct sync_target *t, const char *addr)
{
	char host[256];
	const char *bad = model_split_address(addr, 0, host, sizeof(host), &t->port);

	if (bad)
		return bad;
	t->port_explicit = t->port != 0;
	if (!t->port)
		t->port = 6032;
	t->host = xstrdup(host);
	return NULL;
}

/* A target's address, name and user with their defaults, and its password (password_file wins). */
static int load_target_login(struct sync_target *t, config_setting_t *s, const char *addr, const char *pwfile,
			     char *err, size_t errlen)
{
	char why[300];
	const char *bad;

	if ((bad = split_target_address(t, addr)) != NULL)
		return at_line(err, errlen, line_of(s, "address"), "address", "'%s' %s", addr, bad);
	if (!t->name)
		t->name = xstrdup(addr);
	if (!t->user)
		t->user = xstrdup("admin");
	if (pwfile) {
		free(t->password);
		t->password = secret_read_file(pwfile, why, sizeof(why));
		if (!t->password)
			return at_line(err, errlen, line_of(s, "password_file"), "password_file", "%s (target %s)", why,
				       t->name);
	}
	if (!t->password)
		t->password = xstrdup("");
	log_add_secret(t->password);
	return 0;
}

static int load_target(struct sync_target *t, config_setting_t *s, char *err, size_t errlen)
{
	static const char *const allowed[] = {
		"name", "address", "user",     "password", "password_file", "cluster_mode",
		"tls",  "tls_ca",  "tls_cert", "tls_key",  "tls_verify",    "allow_plaintext_password"
	};
	char *addr = NULL, *pwfile = NULL;
	int b = 0, rc = -1, mode;

	t->line = config_setting_source_line(s);
	if (!config_setting_is_group(s))
		return at_line(err, errlen, config_setting_source_line(s), "targets",
			       "each target is a group { address = ...; }");
	if (check_members(s, allowed, SK_ARRAY_LEN(allowed), err, errlen) < 0 ||
	    setting_str(s, "address", true, &addr, err, errlen) < 0 ||
	    setting_str(s, "name", false, &t->name, err, errlen) < 0 ||
	    setting_str(s, "user", false, &t->user, err, errlen) < 0 ||
	    setting_str(s, "password", false, &t->password, err, errlen) < 0 ||
	    setting_str(s, "password_file", false, &pwfile, err, errlen) < 0 ||
	    setting_str(s, "cluster_mode", false, &t->cluster_mode, err, errlen) < 0 ||
	    setting_str(s, "tls_ca", false, &t->tls_ca, err, errlen) < 0 ||
	    setting_str(s, "tls_cert", false, &t->tls_cert, err, errlen) < 0 ||
	    setting_str(s, "tls_key", false, &t->tls_key, err, errlen) < 0)
		goto out;
	t->tls = config_setting_lookup_bool(s, "tls", &b) && b;
	/* Verified unless written out: tls_verify = false. */
	t->tls_verify_given = config_setting_lookup_bool(s, "tls_verify", &b);
	t->tls_verify = !t->tls_verify_given || b;
	t->allow_plaintext_password = config_setting_lookup_bool(s, "allow_plaintext_password", &b) && b;
	mode = t->cluster_mode ? name_index(t->cluster_mode, cluster_modes, SK_ARRAY_LEN(cluster_modes)) : 0;
	if (mode < 0) {
		at_line(err, errlen, line_of(s, "cluster_mode"), "cluster_mode",
			"'%s' is not refuse, disable-pull or single-writer", t->cluster_mode);
		goto out;
	}
	t->mode = (enum sync_cluster_mode)mode; /* without cluster_mode: the top-level one, once loaded */
	rc = load_target_login(t, s, addr, pwfile, err, errlen);
out:
	free(addr);
	free(pwfile);
	return rc;
}

static int file_hook(void *ctx, config_setting_t *s, char *err, size_t errlen)
{
	struct sync_config *c = ctx;
	const char *name = config_setting_name(s);
	char why[400];

	if (strcmp(name, "clusters") == 0 && config_setting_is_list(s)) {
		size_t n = (size_t)config_setting_length(s);

		c->layout.clusters = xcalloc(n ? n : 1, sizeof(*c->layout.clusters));
		for (size_t i = 0; i < n; i++) {
			c->layout.nclusters = i + 1;
			if (load_cluster(&c->layout, &c->layout.clusters[i], config_setting_get_elem(s, (unsigned)i),
					 why, sizeof(why)) < 0)
				return sk_err(err, errlen, "%s", why);
		}
		return 0;
	}
	if (strcmp(name, "targets") == 0 && config_setting_is_list(s)) {
		size_t n = (size_t)config_setting_length(s);

		c->targets = xcalloc(n ? n : 1, sizeof(*c->targets));
		for (size_t i = 0; i < n; i++) {
			c->ntargets = i + 1;
			if (load_target(&c->targets[i], config_setting_get_elem(s, (unsigned)i), why, sizeof(why)) < 0)
				return sk_err(err, errlen, "%s", why);
		}
		return 0;
	}
	if (strcmp(name, "services") == 0 && config_setting_is_list(s)) {
		for (int i = 0; i < config_setting_length(s); i++) {
			if (c->layout.nservices >= LAYOUT_MAX_SERVICES)
				return at_line(err, errlen, config_setting_source_line(s), "services",
					       "more than %d services", LAYOUT_MAX_SERVICES);
			if (load_service(add_service(&c->layout), config_setting_get_elem(s, (unsigned)i), -1,
					 "a service", why, sizeof(why)) < 0)
				return sk_err(err, errlen, "%s", why);
		}
		return 0;
	}
	return at_line(err, errlen, config_setting_source_line(s), name,
		       "unknown setting (lists: clusters, targets, services)");
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

/* True when `hg` is a writer or reader hostgroup of a cluster or a managed hostgroup. */
static const char *hostgroup_user(const struct layout_config *l, long hg)
{
	for (size_t k = 0; k < l->nclusters; k++)
		if (hg == l->clusters[k].writer_hostgroup || hg == l->clusters[k].reader_hostgroup)
			return l->clusters[k].alias;
	for (size_t i = 0; i < l->nmanaged; i++)
		if (l->managed_hostgroups[i] == hg)
			return "managed-hostgroups";
	return NULL;
}

/* Append one line (and its '\n') to out, cut to len; *used grows. */
SK_PRINTF(4, 5) static void warn_line(char *out, size_t len, size_t *used, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*used + 1 >= len)
		return;
	va_start(ap, fmt);
	w = vsnprintf(out + *used, len - *used, fmt, ap);
	va_end(ap);
	if (w > 0)
		*used += (size_t)w < len - *used ? (size_t)w : len - *used - 1;
	if (*used + 1 < len) {
		out[(*used)++] = '\n';
		out[*used] = '\0';
	}
}

bool sync_target_unverified(const struct sync_target *t, char *buf, size_t len)
{
	if (!t->tls || t->tls_verify)
		return false;
	sk_fmt(buf, len,
	       "target %s: TLS without certificate verification (tls_verify = false): whoever answers %s:%ld "
	       "reads the admin password and the users' passwords the agent writes",
	       t->name, t->host, t->port);
	return true;
}

size_t sync_config_warnings(const struct sync_config *c, char *out, size_t len)
{
	const struct layout_config *l = &c->layout;
	size_t n = 0, used = 0;
	char line[512];

	if (len)
		out[0] = '\0';
	for (size_t i = 0; i < l->nservices; i++) {
		const struct layout_service *sv = &l->services[i];

		if (sv->fleet || sv->writer)
			continue;
		for (size_t k = 0; k < l->nclusters; k++) {
			if (sv->hostgroup != l->clusters[k].writer_hostgroup)
				continue;
			n++;
			warn_line(out, len, &used,
				  "%s: hostgroup %ld is cluster %s's writer hostgroup but the service has no "
				  "role = \"writer\"",
				  sv->label, sv->hostgroup, l->clusters[k].alias);
		}
	}
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct sync_target *t = &c->targets[i];

		if (sync_target_unverified(t, line, sizeof(line))) {
			n++;
			warn_line(out, len, &used, "%s", line);
		}
		if (!t->password || !*t->password) {
			n++;
			warn_line(out, len, &used,
				  "target %s: the admin password is empty (an empty password file, or none given)",
				  t->name);
		}
	}
	return n;
}

/* True for localhost, 127.0.0.0/8 and ::1 (a name is not resolved: any other name is remote). */
static bool is_loopback(const char *host)
{
	unsigned char a[sizeof(struct in6_addr)];

	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, a) == 1)
		return a[0] == 127;
	return inet_pton(AF_INET6, host, a) == 1 && memcmp(a, &in6addr_loopback, sizeof(struct in6_addr)) == 0;
}

/* Where an entry of a list is: the config file (NULL: none), its line (0: not from the file), the
 * list's name. */
struct entry_at {
	const char *path;
	int line;
	const char *list;
};

/* An error about an entry of a list in the config file (a cluster, a service, a target): "PATH:LINE:
 * LIST: problem" when the file gave it, else "problem". */
SK_PRINTF(4, 5)
static int entry_err(const struct entry_at *at, char *err, size_t errlen, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (at->path && at->line > 0)
		return sk_err(err, errlen, "%s:%d: %s: %s", at->path, at->line, at->list, msg);
	return sk_err(err, errlen, "%s", msg);
}

/* At least one target; TLS settings that go together; no password in clear text over the network. */
static int check_targets(const struct sync_config *c, char *err, size_t errlen)
{
	if (c->ntargets == 0)
		return sk_err(err, errlen, "no ProxySQL target: set --admin-addr or a targets list in the config file");
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct sync_target *t = &c->targets[i];

		if ((t->tls_ca || t->tls_cert || t->tls_key || t->tls_verify_given) && !t->tls)
			return entry_err(&(struct entry_at){ c->path, t->line, "targets" }, err, errlen,
					 "target %s: tls_ca, tls_cert, tls_key and tls_verify need tls = true",
					 t->name);
		/* Its INSERTs carry mysql_users passwords too, not only the login. */
		if (*t->password && !t->tls && !t->allow_plaintext_password && !is_loopback(t->host))
			return entry_err(
				&(struct entry_at){ c->path, t->line, "targets" }, err, errlen,
				"target %s: the admin password (and the users' passwords the agent writes) "
				"would cross the network in clear text to %s: set tls = true (--admin-tls), or "
				"allow_plaintext_password = true (--admin-allow-plaintext-password)",
				t->name, t->host);
	}
	return 0;
}

/* announce-address with a port and a source to announce in; one fleet source. */
static int check_announce(const struct sync_settings *s, char *err, size_t errlen)
{
	if (*s->announce_address) {
		char host[256];
		long port;
		const char *bad = model_split_address(s->announce_address, 6032, host, sizeof(host), &port);

		if (bad || !strchr(s->announce_address, ':'))
			return sk_err(err, errlen, "announce-address '%s' %s", s->announce_address,
				      bad ? bad : "needs a port (HOST:PORT)");
		if (!*s->announce_prefix && !*s->announce_service)
			return sk_err(err, errlen, "announce-address needs an announce-prefix or an announce-service");
		if (model_check_text(s->announce_comment, MODEL_COMMENT_MAX))
			return sk_err(err, errlen, "announce-comment is not printable text of at most 255 bytes");
	}
	if (*s->announce_prefix && *s->announce_service)
		return sk_err(err, errlen,
			      "announce-prefix and announce-service are both set: the fleet has one source");
	if (*s->announce_service && !service_name_ok(s->announce_service))
		return sk_err(err, errlen, "announce-service '%s' is not a Consul service name", s->announce_service);
	/* The registration goes through /v1/agent/: a server would keep it as its own, and a
	 * load-balanced address would send the check's passes to other servers. */
	if (*s->announce_service && *s->announce_address && s->consul_agent == CONSUL_AGENT_NONE)
		return sk_err(err, errlen, "%s: needs a local Consul agent (consul-agent = \"none\"): %s",
			      s->announce_service_source, SYNC_ANNOUNCE_SERVICE_REMEDY);
	return 0;
}

/* Something to watch; orchestrator's prefixes need clusters. */
static int check_sources(const struct layout_config *l, char *err, size_t errlen)
{
	if (!*l->master_prefix && !*l->replica_prefix && !*l->servers_prefix && !*l->users_prefix && !l->nservices &&
	    !*l->announce_prefix)
		return sk_err(err, errlen, "nothing to watch: every prefix is empty");
	if ((*l->master_prefix || *l->replica_prefix) && l->nclusters == 0)
		return sk_err(err, errlen,
			      "master-prefix/replica-prefix need a clusters list (alias, writer_hostgroup, ...) in the "
			      "config file; set both prefixes to '' to use only generic servers or users");
	return 0;
}

/* A remote hostgroup that is also a writer, reader or managed one would put replicas of another
 * region into it (a replica in the writer hostgroup). */
static int check_remote_readers(const struct sync_config *c, const struct layout_cluster *a, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	for (size_t r = 0; r < a->nremote; r++) {
		const char *who = hostgroup_user(l, a->remote[r].hostgroup);

		if (who)
			return entry_err(
				&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
				"cluster %s: remote_readers hostgroup %ld (region %s) is also a hostgroup of %s",
				a->alias, a->remote[r].hostgroup, a->remote[r].region, who);
		if (strcmp(a->remote[r].region, l->region) == 0)
			return entry_err(&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
					 "cluster %s: remote_readers region %s is this ProxySQL's own region (region)",
					 a->alias, l->region);
	}
	return 0;
}

/* Each cluster once, with hostgroups of its own. */
static int check_clusters(const struct sync_config *c, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	for (size_t i = 0; i < l->nclusters; i++) {
		const struct layout_cluster *a = &l->clusters[i];

		if (a->reader_hostgroup == a->writer_hostgroup)
			return entry_err(&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
					 "cluster %s: reader_hostgroup equals writer_hostgroup", a->alias);
		if (a->monitor_roles && a->writer_is_reader)
			return entry_err(
				&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
				"cluster %s: writer_is_reader with roles = \"monitor\": the monitor decides who "
				"reads",
				a->alias);
		for (size_t j = 0; j < i; j++) {
			const struct layout_cluster *b = &l->clusters[j];

			if (strcmp(a->alias, b->alias) == 0)
				return entry_err(&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
						 "cluster %s is listed twice", a->alias);
			if (a->writer_hostgroup == b->writer_hostgroup || a->writer_hostgroup == b->reader_hostgroup ||
			    (a->reader_hostgroup >= 0 && (a->reader_hostgroup == b->writer_hostgroup ||
							  a->reader_hostgroup == b->reader_hostgroup)))
				return entry_err(&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
						 "clusters %s and %s share a hostgroup", b->alias, a->alias);
		}
		if (check_remote_readers(c, a, err, errlen) < 0)
			return -1;
	}
	for (size_t i = 0; i < l->nmanaged; i++)
		for (size_t k = 0; k < l->nclusters; k++)
			if (l->managed_hostgroups[i] == l->clusters[k].writer_hostgroup ||
			    l->managed_hostgroups[i] == l->clusters[k].reader_hostgroup)
				return sk_err(err, errlen, "managed hostgroup %ld is also a hostgroup of cluster %s",
					      l->managed_hostgroups[i], l->clusters[k].alias);
	return 0;
}

/* The service is a cluster's writer_service or reader_service. */
static bool of_cluster(const struct layout_config *l, const struct layout_service *a)
{
	for (size_t k = 0; k < l->nclusters; k++)
		if ((l->clusters[k].writer_from_service && a->hostgroup == l->clusters[k].writer_hostgroup) ||
		    (l->clusters[k].reader_from_service && a->hostgroup == l->clusters[k].reader_hostgroup))
			return true;
	return false;
}

/* A hostgroup has exactly one source: a service of the services list owns its hostgroup alone. */
static int check_services(const struct sync_config *c, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	for (size_t i = 0; i < l->nservices; i++) {
		const struct layout_service *a = &l->services[i];
		const char *who;

		if (a->fleet || of_cluster(l, a))
			continue; /* the ProxySQL fleet, not a hostgroup; or the cluster's own */
		if ((who = hostgroup_user(l, a->hostgroup)) != NULL)
			return entry_err(&(struct entry_at){ c->path, a->line, "services" }, err, errlen,
					 "%s: hostgroup %ld is also a hostgroup of %s (one source per hostgroup)",
					 a->label, a->hostgroup, who);
		for (size_t k = 0; k < l->nclusters; k++)
			for (size_t r = 0; r < l->clusters[k].nremote; r++)
				if (l->clusters[k].remote[r].hostgroup == a->hostgroup)
					return entry_err(&(struct entry_at){ c->path, a->line, "services" }, err,
							 errlen,
							 "%s: hostgroup %ld is also a remote_readers hostgroup of %s",
							 a->label, a->hostgroup, l->clusters[k].alias);
		for (size_t j = 0; j < i; j++)
			if (l->services[j].hostgroup == a->hostgroup)
				return entry_err(&(struct entry_at){ c->path, a->line, "services" }, err, errlen,
						 "%s and %s share hostgroup %ld (one source per hostgroup)",
						 l->services[j].label, a->label, a->hostgroup);
	}
	return 0;
}

/* Replicas need a region to go anywhere; the owned hostgroups fit the agent's tables. */
static int check_owned(const struct layout_config *l, char *err, size_t errlen)
{
	long hgs[1];
	size_t owned;

	if (*l->replica_prefix && !*l->region)
		for (size_t k = 0; k < l->nclusters; k++)
			if (l->clusters[k].reader_hostgroup >= 0)
				return sk_err(err, errlen,
					      "region is empty but replica-prefix is set and cluster %s has a "
					      "reader_hostgroup: no replica would be read, every reader removed (set "
					      "region, or replica-prefix = \"\")",
					      l->clusters[k].alias);
	owned = layout_owned_hostgroups(l, hgs, 0);
	if (owned == 0 && *l->servers_prefix)
		return sk_err(err, errlen, "servers-prefix is set but managed-hostgroups is empty");
	if (owned > AGENT_MAX_HOSTGROUPS)
		return sk_err(err, errlen,
			      "%zu hostgroups owned (writer, reader, remote and managed hostgroups); at most %d", owned,
			      AGENT_MAX_HOSTGROUPS);
	return 0;
}

/* Durations that must be in order. */
static int check_timing(const struct sync_config *c, char *err, size_t errlen)
{
	const struct sync_settings *s = &c->settings;
	bool single_writer = s->cluster_mode == SYNC_CLUSTER_SINGLE_WRITER;

	for (size_t i = 0; i < c->ntargets; i++)
		single_writer = single_writer || c->targets[i].mode == SYNC_CLUSTER_SINGLE_WRITER;
	/* A writer that lost its session may still be inside an apply: Consul's lock-delay must cover
	 * that apply before another agent can start one. */
	if (single_writer && s->cluster_lock_delay_s < s->admin_timeout_s)
		return sk_err(
			err, errlen,
			"cluster-lock-delay (%.0fs) is shorter than admin-timeout (%.1fs): a writer that lost the "
			"lock could still be applying when the next one starts",
			s->cluster_lock_delay_s, s->admin_timeout_s);
	if (s->quiescence_max_s < s->quiescence_min_s)
		return sk_err(err, errlen, "quiescence-max is smaller than quiescence-min");
	return 0;
}

/* health-listen as the start will read it (a port out of range, a bad address), so that
 * --check-config refuses what the start would. */
static int check_health(const struct sync_settings *s, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char why[256];

	if (*s->health_listen && http_parse_listen(s->health_listen, &ss, &len, why, sizeof(why)) < 0)
		return sk_err(err, errlen, "health-listen: %s", why);
	return 0;
}

/* Whole-config checks that no single setting can make. */
static int check_whole(const struct sync_config *c, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	if (check_targets(c, err, errlen) < 0 || check_announce(&c->settings, err, errlen) < 0 ||
	    check_sources(l, err, errlen) < 0 || check_clusters(c, err, errlen) < 0 ||
	    check_services(c, err, errlen) < 0 || check_owned(l, err, errlen) < 0 || check_timing(c, err, errlen) < 0 ||
	    check_health(&c->settings, err, errlen) < 0)
		return -1;
	return 0;
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
	c->o.file_hook = file_hook;
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
	sv = add_service(l);
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
	if ((bad = split_target_address(t, opt_str(o, "admin-addr"))))
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
	    load_admin_target(c, err, errlen) < 0)
		return OPTS_ERROR;
	for (size_t i = 0; i < c->ntargets; i++) /* a target's own cluster_mode was read with it */
		if (!c->targets[i].cluster_mode)
			c->targets[i].mode = c->settings.cluster_mode;
	if (check_whole(c, err, errlen) < 0 || load_consul(c, err, errlen) < 0)
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
	opts_free(&c->o);
	memset(c, 0, sizeof(*c));
}
