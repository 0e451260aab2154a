/* config.h: proxysql-sync's settings: one option table for scalars, plus the clusters, targets and
 * services lists of the libconfig file (config_lists.h), loaded and checked (config_check.h) by
 * sync_config_load (config.c). */
#ifndef SK_SYNC_CONFIG_H
#define SK_SYNC_CONFIG_H

#include <stdint.h>

#include "consul.h"
#include "layout.h"
#include "log.h"
#include "opt.h"

/* The most hostgroups one agent owns (writer, reader, remote and managed ones together). */
#define AGENT_MAX_HOSTGROUPS 256

/* cluster-mode (and a target's cluster_mode): what the agent does with a target in a ProxySQL
 * Cluster that pulls a table it manages. */
enum sync_cluster_mode { SYNC_CLUSTER_REFUSE, SYNC_CLUSTER_DISABLE_PULL, SYNC_CLUSTER_SINGLE_WRITER };
/* foreign-edits: rows someone else staged without loading them. */
enum sync_foreign_edits { SYNC_FOREIGN_PUBLISH, SYNC_FOREIGN_HOLD };

/* Why announce-service cannot register without a local Consul agent, and what to use instead. */
#define SYNC_ANNOUNCE_SERVICE_REMEDY "use announce-prefix, the KV announcement, when talking to Consul servers"

/* One ProxySQL admin interface to keep in the desired state. */
struct sync_target {
	char *name;
	int line; /* where the config file's targets list has it (0: --admin-addr) */
	char *host;
	long port;
	bool port_explicit; /* the address named its port ("localhost:6032": TCP, not the socket) */
	char *user;
	char *password;
	char *cluster_mode; /* NULL: the top-level cluster-mode */
	enum sync_cluster_mode mode; /* cluster_mode, else the top-level cluster-mode */
	/* TLS to the admin interface (like the probes' --tls*); a password is never sent in clear
	 * text to a target that is not loopback unless allow_plaintext_password. */
	bool tls, tls_verify, allow_plaintext_password;
	bool tls_verify_given; /* written out: tls_verify is true unless so (the system's CAs without tls_ca) */
	char *tls_ca, *tls_cert, *tls_key; /* NULL: not given */
};

/* The scalar settings as the running agent reads them, filled once from the option table by
 * sync_settings_load (at start and at each reload, which loads a whole new configuration): a plain
 * setting by its row's OPT_FIELD (opts_bind), the others converted by the loading code.
 * Durations are in the unit their reader needs; the strings point into the option table (struct
 * sync_config's `o`) and live as long as it. The prefixes, region, user-tag, managed-hostgroups
 * and the server and user defaults are in the layout (struct layout_config), the admin-* flags in
 * the targets, the consul-* ones in the Consul client's settings. */
struct sync_settings {
	/* The mode: --once, --dry-run, --check-config, and --once's lock-file (NULL: the default). */
	bool once, dry_run, check_config;
	const char *lock_file;
	/* Consul: consul-agent as set (auto is resolved at run time: shared_consul_agent), and
	 * the reads: consistency, max-stale, wait, max-response-bytes. */
	enum consul_agent_mode consul_agent;
	enum consul_consistency consistency;
	double max_stale_ms;
	long wait_ms;
	size_t max_response_bytes;
	/* The fleet: announce-prefix, announce-service ("" when off), announce-address ("" when this
	 * ProxySQL is not announced) as host and port (host "" and port 6032 when it does not parse:
	 * sync_config_load refuses that), announce-weight, announce-comment, announce-ttl,
	 * proxysql-servers. */
	const char *announce_prefix, *announce_service, *announce_address, *announce_comment;
	const char *announce_service_source; /* where announce-service was set ("FILE:LINE: announce-service") */
	char announce_host[256];
	long announce_port;
	bool announce_parsed; /* announce-address is set and parses as host[:port] */
	long announce_weight, announce_ttl_s;
	bool proxysql_servers;
	/* Each target's apply: admin-timeout, save-to-disk, save-delay, drain-timeout, adopt-users,
	 * foreign-edits, allow-empty-writer, resync-interval. */
	double admin_timeout_s;
	int64_t admin_timeout_ms, drain_timeout_ms, resync_interval_us, save_delay_us;
	bool save_to_disk, adopt_users, allow_empty_writer;
	enum sync_foreign_edits foreign_edits;
	/* The guards: quiescence-min, quiescence-max, shrink-fraction, confirmations. */
	double quiescence_min_s, quiescence_max_s;
	int64_t quiescence_min_us, quiescence_max_us;
	double shrink_fraction;
	long confirmations;
	/* cluster-mode and single-writer's cluster-lock-key, cluster-lock-ttl, cluster-lock-delay,
	 * cluster-converge-timeout, cluster-leader-grace. */
	enum sync_cluster_mode cluster_mode;
	const char *cluster_lock_key;
	long cluster_lock_ttl_s;
	double cluster_lock_delay_s;
	int64_t cluster_converge_timeout_us, cluster_leader_grace_us;
	/* The health port: health-listen ("" when off) and its limits. */
	const char *health_listen;
	unsigned health_max_connections, health_max_connections_per_ip, health_idle_timeout_s;
	unsigned health_request_timeout_ms;
	/* log-format, log-level. */
	enum log_format log_format;
	enum log_level log_level;
};

struct sync_config {
	struct opts o; /* every setting by name, as parsed: read only by the loading code */
	struct sync_settings settings; /* the scalar settings, typed */
	struct layout_config layout;
	struct layout_config pg_layout; /* the PostgreSQL side */
	struct sync_target *targets;
	size_t ntargets;
	/* The Consul client's settings (environment, then options), with the token already read
	 * from its file: token_file is NULL. */
	struct consul_config consul;
	const char *path; /* the config file (c->o owns it), or NULL */
};

/* Parse argv, the environment and the config file into `c`, then check the whole: at least one
 * target, a prefix to watch, hostgroups that do not collide, Consul settings a client accepts.
 * Every file it names (password files, the Consul token file) is read here, so that a file that
 * cannot be read is a configuration error, not a failure of the running agent. Returns OPTS_OK,
 * OPTS_EXIT (help or version printed) or OPTS_ERROR with one line in err; `c` is to be freed with
 * sync_config_free() in every case. */
enum opts_result sync_config_load(struct sync_config *c, int argc, char **argv, char *err, size_t errlen);

/* Fill `s` from the parsed option table `o` (every scalar the running agent reads; see struct
 * sync_settings). Returns 0, or -1 with err set when an enum's value is not one of its names
 * (opts_parse refuses those first). */
int sync_settings_load(struct sync_settings *s, const struct opts *o, char *err, size_t errlen) SK_MUST_CHECK;

void sync_config_free(struct sync_config *c);

/* The option table, for the docs test and --help. */
extern const struct opt_def sync_options[];
extern const size_t sync_noptions;

#endif
