/* config.h: proxysql-sync's settings: one option table for scalars, plus the clusters and
 * targets lists of the libconfig file. */
#ifndef SK_SYNC_CONFIG_H
#define SK_SYNC_CONFIG_H

#include "layout.h"
#include "opt.h"

/* One ProxySQL admin interface to keep in the desired state. */
struct sync_target {
	char *name;
	char *host;
	long port;
	char *user;
	char *password;
};

struct sync_config {
	struct opts o; /* every scalar setting, by name: opt_str(&c->o, "consul-addr") ... */
	struct layout_config layout;
	struct sync_target *targets;
	size_t ntargets;
};

/* Parse argv, the environment and the config file into `c`, then check the whole: at least one
 * target, a prefix to watch, hostgroups that do not collide. Returns OPTS_OK, OPTS_EXIT (help or
 * version printed) or OPTS_ERROR with one line in err. */
enum opts_result sync_config_load(struct sync_config *c, int argc, char **argv, char *err, size_t errlen);

void sync_config_free(struct sync_config *c);

/* The option table, for the docs test and --help. */
extern const struct opt_def sync_options[];
extern const size_t sync_noptions;

#endif
