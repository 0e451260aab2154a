/* config.h: proxysql-sync's settings: one option table for scalars, plus the clusters and
 * targets lists of the libconfig file. */
#ifndef SK_SYNC_CONFIG_H
#define SK_SYNC_CONFIG_H

#include "consul.h"
#include "layout.h"
#include "opt.h"

/* The most hostgroups one agent owns (writer, reader, remote and managed ones together). */
#define AGENT_MAX_HOSTGROUPS 256

/* One ProxySQL admin interface to keep in the desired state. */
struct sync_target {
	char *name;
	char *host;
	long port;
	char *user;
	char *password;
	char *cluster_mode; /* NULL: the top-level cluster-mode */
	/* TLS to the admin interface (like the probes' --tls*); a password is never sent in clear
	 * text to a target that is not loopback unless allow_plaintext_password. */
	bool tls, tls_verify, allow_plaintext_password;
	char *tls_ca, *tls_cert, *tls_key; /* NULL: not given */
};

struct sync_config {
	struct opts o; /* every scalar setting, by name: opt_str(&c->o, "consul-addr") ... */
	struct layout_config layout;
	struct sync_target *targets;
	size_t ntargets;
	/* The Consul client's settings (environment, then options), with the token already read
	 * from its file: token_file is NULL. */
	struct consul_config consul;
};

/* Parse argv, the environment and the config file into `c`, then check the whole: at least one
 * target, a prefix to watch, hostgroups that do not collide, Consul settings a client accepts.
 * Every file it names (password files, the Consul token file) is read here, so that a file that
 * cannot be read is a configuration error, not a failure of the running agent. Returns OPTS_OK,
 * OPTS_EXIT (help or version printed) or OPTS_ERROR with one line in err; `c` is to be freed with
 * sync_config_free() in every case. */
enum opts_result sync_config_load(struct sync_config *c, int argc, char **argv, char *err, size_t errlen);

/* Advice on a configuration that loads but may not do what was meant (a services hostgroup that is a
 * cluster's writer hostgroup without role = "writer"): one line per finding, each ending in '\n',
 * written to `out` (cut to `len`). Returns how many there are. */
size_t sync_config_warnings(const struct sync_config *c, char *out, size_t len);

void sync_config_free(struct sync_config *c);

/* The option table, for the docs test and --help. */
extern const struct opt_def sync_options[];
extern const size_t sync_noptions;

#endif
