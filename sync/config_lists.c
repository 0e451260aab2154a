/* config_lists.c: the config file's lists, which no option table can hold: clusters (alias,
 * hostgroups, roles, remote_readers, their services), targets (address, login, TLS, cluster_mode)
 * and services (Consul service sources), each a libconfig group checked member by member with the
 * line it is on. opts_parse hands every group or list of the file to config_lists_hook. Also the
 * names of cluster-mode's values, which a target's cluster_mode shares. */
#include "config_lists.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "secret.h"

/* The names of the cluster-mode values, in the enum's order. */
static const char *const cluster_modes[] = { "refuse", "disable-pull", "single-writer" };

const char *sync_cluster_mode_str(enum sync_cluster_mode m)
{
	return (size_t)m < SK_ARRAY_LEN(cluster_modes) ? cluster_modes[m] : "?";
}

bool sync_cluster_mode_parse(const char *v, enum sync_cluster_mode *out)
{
	for (size_t i = 0; i < SK_ARRAY_LEN(cluster_modes); i++)
		if (strcmp(v, cluster_modes[i]) == 0) {
			*out = (enum sync_cluster_mode)i;
			return true;
		}
	return false;
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
bool config_lists_service_name_ok(const char *name)
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
	if (!config_lists_service_name_ok(sv->name))
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

struct layout_service *config_lists_add_service(struct layout_config *l)
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
		if (load_service(config_lists_add_service(l), svc, hg, name, err, errlen) < 0)
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

/* max_lag_bytes: a whole number of bytes, 0 or more (absent: -1, no bound). */
static int setting_lag(config_setting_t *s, long long *out, char *err, size_t errlen)
{
	long long v;
	int iv;

	*out = -1;
	if (!config_setting_get_member(s, "max_lag_bytes"))
		return 0;
	if (config_setting_lookup_int64(s, "max_lag_bytes", &v))
		*out = v;
	else if (config_setting_lookup_int(s, "max_lag_bytes", &iv))
		*out = iv;
	else
		return at_line(err, errlen, line_of(s, "max_lag_bytes"), "max_lag_bytes", "must be a whole number");
	if (*out < 0)
		return at_line(err, errlen, line_of(s, "max_lag_bytes"), "max_lag_bytes", "must be 0 or more");
	return 0;
}

/* A name that can be one segment of a KV path: not empty, no '/', printable, not too long. */
static int kv_segment(config_setting_t *s, const char *name, const char *v, char *err, size_t errlen)
{
	if (!*v || strchr(v, '/') || strlen(v) > 200 || model_check_text(v, 200))
		return at_line(err, errlen, line_of(s, name), name, "'%s' must be a non-empty KV path segment", v);
	return 0;
}

/* Patroni's namespace as its YAML writes it ("/service/"): without the slashes at either end. */
static char *patroni_namespace(const char *ns)
{
	size_t n;

	ns += strspn(ns, "/");
	n = strlen(ns);
	while (n && ns[n - 1] == '/')
		n--;
	return xstrndup(ns, n);
}

/* One entry of the patroni list: a Patroni cluster, as a cluster of the PostgreSQL side's layout. */
static int load_patroni(struct layout_cluster *cl, config_setting_t *s, char *err, size_t errlen)
{
	static const char *const allowed[] = {
		"scope", "namespace", "writer_hostgroup", "reader_hostgroup", "max_lag_bytes", "region", "roles"
	};
	char *ns = NULL;

	cl->reader_hostgroup = -1;
	cl->line = config_setting_source_line(s);
	if (!config_setting_is_group(s))
		return at_line(err, errlen, cl->line, "patroni", "each entry is a group { scope = ...; }");
	if (check_members(s, allowed, SK_ARRAY_LEN(allowed), err, errlen) < 0 ||
	    setting_str(s, "scope", true, &cl->alias, err, errlen) < 0 ||
	    setting_str(s, "namespace", false, &ns, err, errlen) < 0)
		return -1;
	cl->patroni_namespace = patroni_namespace(ns ? ns : "service");
	free(ns);
	if (setting_str(s, "region", false, &cl->patroni_region, err, errlen) < 0 ||
	    setting_hostgroup(s, "writer_hostgroup", true, &cl->writer_hostgroup, err, errlen) < 0 ||
	    setting_hostgroup(s, "reader_hostgroup", false, &cl->reader_hostgroup, err, errlen) < 0 ||
	    setting_lag(s, &cl->max_lag_bytes, err, errlen) < 0 || load_cluster_roles(cl, s, err, errlen) < 0 ||
	    kv_segment(s, "scope", cl->alias, err, errlen) < 0 ||
	    kv_segment(s, "namespace", cl->patroni_namespace, err, errlen) < 0)
		return -1;
	return 0;
}

/* A target's host and port (6032 when the address names none); NULL, or what is wrong. */
const char *config_lists_split_address(struct sync_target *t, const char *addr)
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

	if ((bad = config_lists_split_address(t, addr)) != NULL)
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
	enum sync_cluster_mode mode = SYNC_CLUSTER_REFUSE;
	int b = 0, rc = -1;

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
	if (t->cluster_mode && !sync_cluster_mode_parse(t->cluster_mode, &mode)) {
		at_line(err, errlen, line_of(s, "cluster_mode"), "cluster_mode",
			"'%s' is not refuse, disable-pull or single-writer", t->cluster_mode);
		goto out;
	}
	t->mode = mode; /* without cluster_mode: the top-level one, once loaded */
	rc = load_target_login(t, s, addr, pwfile, err, errlen);
out:
	free(addr);
	free(pwfile);
	return rc;
}

/* The patroni list into the PostgreSQL side's layout: one cluster per entry. */
static int load_patroni_list(struct layout_config *l, config_setting_t *s, char *err, size_t errlen)
{
	size_t n = (size_t)config_setting_length(s);
	char why[400];

	if (n > LAYOUT_MAX_SERVICES)
		return at_line(err, errlen, config_setting_source_line(s), "patroni", "more than %d entries",
			       LAYOUT_MAX_SERVICES);
	l->clusters = xcalloc(n ? n : 1, sizeof(*l->clusters));
	for (size_t i = 0; i < n; i++) {
		l->nclusters = i + 1;
		if (load_patroni(&l->clusters[i], config_setting_get_elem(s, (unsigned)i), why, sizeof(why)) < 0)
			return sk_err(err, errlen, "%s", why);
	}
	return 0;
}

int config_lists_hook(void *ctx, config_setting_t *s, char *err, size_t errlen)
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
	if (strcmp(name, "patroni") == 0 && config_setting_is_list(s))
		return load_patroni_list(&c->pg_layout, s, err, errlen);
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
			if (load_service(config_lists_add_service(&c->layout), config_setting_get_elem(s, (unsigned)i),
					 -1, "a service", why, sizeof(why)) < 0)
				return sk_err(err, errlen, "%s", why);
		}
		return 0;
	}
	return at_line(err, errlen, config_setting_source_line(s), name,
		       "unknown setting (lists: clusters, patroni, targets, services)");
}
