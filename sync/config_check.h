/* config_check.h: the checks of a loaded configuration as a whole, and the advice on one that
 * loads but may not do what was meant (config_check.c). */
#ifndef SK_SYNC_CONFIG_CHECK_H
#define SK_SYNC_CONFIG_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Whole-config checks that no single setting can make (targets, announce, sources, clusters,
 * services, owned hostgroups, timing, health-listen). Returns 0, or -1 with one line in err. */
int config_check_whole(const struct sync_config *c, char *err, size_t errlen);

/* Advice on a configuration that loads but may not do what was meant (a services hostgroup that is a
 * cluster's writer hostgroup without role = "writer"): one line per finding, each ending in '\n',
 * written to `out` (cut to `len`). Returns how many there are. */
size_t sync_config_warnings(const struct sync_config *c, char *out, size_t len);

/* When target `t` uses TLS without verifying the certificate (tls_verify = false), the warning
 * that names it into buf and true; false otherwise. */
bool sync_target_unverified(const struct sync_target *t, char *buf, size_t len);

/* The PostgreSQL side is configured: a patroni entry or pgsql-users-prefix. */
bool sync_config_has_pgsql(const struct sync_config *c);

#endif
