/* config_lists.h: the config file's lists (clusters, targets, services), read into struct
 * sync_config by opts_parse's file hook (config_lists.c). */
#ifndef SK_SYNC_CONFIG_LISTS_H
#define SK_SYNC_CONFIG_LISTS_H

#include <libconfig.h>
#include <stdbool.h>

#include "config.h"

/* opts_parse's file hook (ctx: the struct sync_config): a clusters, targets or services list into
 * c->layout and c->targets. Returns 0, or -1 with err set to "LINE: SETTING: problem". */
int config_lists_hook(void *ctx, config_setting_t *s, char *err, size_t errlen);

/* A new zeroed service at the end of l->services (the caller checks LAYOUT_MAX_SERVICES). */
struct layout_service *config_lists_add_service(struct layout_config *l);

/* A target's host and port (6032 when the address names none) into t; NULL, or what is wrong. */
const char *config_lists_split_address(struct sync_target *t, const char *addr);

/* A name that can be a Consul service's and sit in a URL path. */
bool config_lists_service_name_ok(const char *name);

/* The names of the cluster-mode values ("refuse", ...); `v` as a cluster-mode (false: not one). */
const char *sync_cluster_mode_str(enum sync_cluster_mode m);
bool sync_cluster_mode_parse(const char *v, enum sync_cluster_mode *out) SK_MUST_CHECK;

#endif
