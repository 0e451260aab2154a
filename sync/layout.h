/* layout.h: KV snapshot -> desired mysql_servers and mysql_users (a pure function). */
#ifndef SK_LAYOUT_H
#define SK_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* The key a service watcher gives its instances: SERVICE_KEY_PREFIX "<service index>/<address>:<port>"
 * (a Consul key never starts with '/'). */
#define SERVICE_KEY_PREFIX "/service/"
#define LAYOUT_MAX_SERVICES 16

/* One Consul KV entry as the layout sees it. */
struct kv_pair {
	char *key;
	char *value; /* NUL-terminated copy; may contain NUL bytes before len (then rejected) */
	size_t len;
};

struct layout_remote {
	char *region;
	long hostgroup;
};

/* A health-checked Consul service as a source of servers (the instances whose checks all pass). */
struct layout_service {
	char *name;
	int line; /* where the config file lists it (0: not from a file) */
	char **tags; /* every one must match */
	size_t ntags;
	char **node_meta; /* "key:value" */
	size_t nnode_meta;
	char *near, *filter, *datacenter; /* NULL: not given */
	long hostgroup;
	char *meta_prefix; /* Service.Meta "<prefix>weight", "<prefix>max_connections"... become attributes; NULL: none */
	bool weights; /* weight from Service.Weights.Passing */
	char *label; /* for logs and /metrics: "service mysql [replica]" */
	bool fleet; /* announce-service: the instances are the ProxySQL fleet (Service.Meta weight, comment), no hostgroup */
	bool writer; /* role = "writer" (and a cluster's writer_service): its hostgroup is never emptied */
};

/* One orchestrator cluster alias and where its servers go. */
struct layout_cluster {
	char *alias;
	int line; /* where the config file lists it (0: not from a file) */
	long writer_hostgroup;
	long reader_hostgroup; /* < 0: the local region's replicas are not used */
	bool writer_is_reader; /* the writer also serves reads in reader_hostgroup */
	/* roles = "monitor": KV decides membership only; every member goes into writer_hostgroup and
	 * ProxySQL's monitor (a mysql_*_hostgroups row) moves it between its hostgroups. */
	bool monitor_roles;
	/* The writer / the local readers come from a service (writer_service, reader_service), not
	 * from the master key / the replica prefix. */
	bool writer_from_service, reader_from_service;
	struct layout_remote *remote;
	size_t nremote;
	/* A Patroni cluster (the patroni list, the PostgreSQL side's layout): alias is its scope, its
	 * keys are <namespace>/<scope>/leader and /members/<name> (patroni.h); NULL: orchestrator's. */
	char *patroni_namespace;
	long long max_lag_bytes; /* a replica further behind the leader's WAL reads nothing; < 0: no bound */
	char *patroni_region; /* only members whose tags.region is this read; NULL: any */
};

struct layout_config {
	char *master_prefix; /* orchestrator: <prefix>/<alias> = host:port, plus /hostname, /port; "" = off */
	char *replica_prefix; /* <prefix>/<alias>/<region>/<host[:port]>; "" = off */
	char *servers_prefix; /* <prefix>/<hostgroup>/<host[:port]> = optional JSON attributes; "" = off */
	char *users_prefix; /* <prefix>/<username> = JSON; "" = off */
	char *announce_prefix; /* <prefix>/<id> = {"hostname", "port", "weight", "comment"}: the ProxySQL fleet; "" = off */
	char *region; /* the local region (replicas of other regions need a remote mapping) */
	struct layout_cluster *clusters;
	size_t nclusters;
	struct layout_service *services; /* the services list, then the clusters' writer/reader services */
	size_t nservices;
	long *managed_hostgroups; /* hostgroups the generic servers prefix may fill */
	size_t nmanaged;
	struct px_server server_defaults; /* weight, max_connections, ... for every server */
	struct px_user user_defaults;
	char *user_tag; /* users the agent owns carry this comment prefix */
	bool pgsql; /* the PostgreSQL side's layout: pgsql_users rows (no schema; SCRAM secrets) */
};

struct layout_reject {
	char *key;
	char *reason;
};

struct layout_result {
	struct px_servers servers; /* sorted, unique */
	struct px_users users; /* sorted, unique */
	struct layout_reject *rejects;
	size_t nrejects;
	/* Clusters whose master key and its /hostname, /port children disagree: orchestrator is half
	 * way through a failover. Such a snapshot must not be applied. */
	char **unsettled;
	size_t nunsettled;
	/* Rejected means kept: what the rejected keys describe (a server of a hostgroup, a whole
	 * writer hostgroup, a user), to be left as each target has it. */
	struct px_keeps keep_servers;
	struct px_names keep_users; /* sorted */
	struct px_peers peers; /* the announced ProxySQL fleet (proxysql_servers); sorted */
	struct layout_seen *seen; /* layout.c's own, while building: the servers added so far, hashed */
};

/* Build the desired state from `kv` (any order). Invalid entries are rejected one by one with a
 * reason; everything else is kept. Pure: no I/O, no globals; the caller frees with
 * layout_result_free. */
void layout_build(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv, struct layout_result *out);
void layout_result_free(struct layout_result *r);

/* The desired state in two parts that come from different keys, so that a change rebuilds only
 * the part its keys feed: the servers (servers, keep_servers, peers, unsettled) and the users
 * (users, keep_users). Each part's rejects are its keys'. */
enum { LAYOUT_PART_SERVERS = 1, LAYOUT_PART_USERS = 2, LAYOUT_PARTS = 3 };

/* The parts a key feeds (0: none): what layout_build does with it, decided on its name alone. */
unsigned layout_key_parts(const struct layout_config *cfg, const char *key);

/* layout_build for `parts` only: the keys of the other part are left out (its fields stay empty). */
void layout_build_parts(const struct layout_config *cfg, const struct kv_pair *kv, size_t nkv, unsigned parts,
			struct layout_result *out);

/* The hostgroups the agent owns (writer, reader, remote, managed), for the plan. Sorted, unique.
 * Returns how many there are; the lowest `max` of them are written to `out`. */
size_t layout_owned_hostgroups(const struct layout_config *cfg, long *out, size_t max);

/* True when proxysql_servers follows an announced fleet (announce-prefix or announce-service). */
bool layout_has_fleet(const struct layout_config *cfg);

/* True when `hg` is a writer hostgroup: a cluster's, or that of a service with role = "writer". */
bool layout_is_writer_hostgroup(const struct layout_config *cfg, long hg);

/* The never-empty rule: for each writer hostgroup (layout_is_writer_hostgroup) among `owned` in
 * which `want` has no server but `have` has some (OFFLINE_HARD aside), add those to `want` and
 * sort it again. Returns how many hostgroups were held. Pure. */
int layout_keep_writers(const struct layout_config *cfg, const long *owned, size_t nowned, struct px_servers *want,
			const struct px_servers *have);

void layout_config_free(struct layout_config *cfg);
void layout_service_free(struct layout_service *sv);

#endif
