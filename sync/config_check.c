/* config_check.c: the checks of a loaded configuration as a whole, which no single setting can
 * make: a target to write, TLS settings that go together, no password in clear text, one fleet
 * source, something to watch, hostgroups with one source each, durations in order, a health port
 * that parses; and the advice on a configuration that loads but may not do what was meant. An
 * error names the file and line of the list entry at fault. */
#include "config_check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_lists.h"
#include "http.h"

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
	if (*s->announce_service && !config_lists_service_name_ok(s->announce_service))
		return sk_err(err, errlen, "announce-service '%s' is not a Consul service name", s->announce_service);
	/* The registration goes through /v1/agent/: a server would keep it as its own, and a
	 * load-balanced address would send the check's passes to other servers. */
	if (*s->announce_service && *s->announce_address && s->consul_agent == CONSUL_AGENT_NONE)
		return sk_err(err, errlen, "%s: needs a local Consul agent (consul-agent = \"none\"): %s",
			      s->announce_service_source, SYNC_ANNOUNCE_SERVICE_REMEDY);
	return 0;
}

bool sync_config_has_pgsql(const struct sync_config *c)
{
	return c->pg_layout.nclusters > 0 || (c->pg_layout.users_prefix && *c->pg_layout.users_prefix);
}

/* Something to watch; orchestrator's prefixes need clusters. */
static int check_sources(const struct sync_config *c, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	if (!*l->master_prefix && !*l->replica_prefix && !*l->servers_prefix && !*l->users_prefix && !l->nservices &&
	    !*l->announce_prefix && !sync_config_has_pgsql(c))
		return sk_err(err, errlen, "nothing to watch: every prefix is empty and no patroni entry is listed");
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
/* The same cluster twice: the same alias, or for Patroni the same namespace and scope. */
static bool same_cluster(const struct layout_cluster *a, const struct layout_cluster *b)
{
	return strcmp(a->alias, b->alias) == 0 && (!a->patroni_namespace || !b->patroni_namespace ||
						   strcmp(a->patroni_namespace, b->patroni_namespace) == 0);
}

/* The clusters of `l`, listed as `list` ("clusters", or "patroni" for the PostgreSQL side's). */
static int check_clusters(const struct sync_config *c, const struct layout_config *l, const char *list, char *err,
			  size_t errlen)
{
	for (size_t i = 0; i < l->nclusters; i++) {
		const struct layout_cluster *a = &l->clusters[i];

		if (a->reader_hostgroup == a->writer_hostgroup)
			return entry_err(&(struct entry_at){ c->path, a->line, list }, err, errlen,
					 "cluster %s: reader_hostgroup equals writer_hostgroup", a->alias);
		if (a->monitor_roles && a->writer_is_reader)
			return entry_err(
				&(struct entry_at){ c->path, a->line, "clusters" }, err, errlen,
				"cluster %s: writer_is_reader with roles = \"monitor\": the monitor decides who "
				"reads",
				a->alias);
		for (size_t j = 0; j < i; j++) {
			const struct layout_cluster *b = &l->clusters[j];

			if (same_cluster(a, b))
				return entry_err(&(struct entry_at){ c->path, a->line, list }, err, errlen,
						 "cluster %s is listed twice", a->alias);
			if (a->writer_hostgroup == b->writer_hostgroup || a->writer_hostgroup == b->reader_hostgroup ||
			    (a->reader_hostgroup >= 0 && (a->reader_hostgroup == b->writer_hostgroup ||
							  a->reader_hostgroup == b->reader_hostgroup)))
				return entry_err(&(struct entry_at){ c->path, a->line, list }, err, errlen,
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
int config_check_whole(const struct sync_config *c, char *err, size_t errlen)
{
	const struct layout_config *l = &c->layout;

	if (check_targets(c, err, errlen) < 0 || check_announce(&c->settings, err, errlen) < 0 ||
	    check_sources(c, err, errlen) < 0 || check_clusters(c, l, "clusters", err, errlen) < 0 ||
	    check_clusters(c, &c->pg_layout, "patroni", err, errlen) < 0 ||
	    check_owned(&c->pg_layout, err, errlen) < 0 || check_services(c, err, errlen) < 0 ||
	    check_owned(l, err, errlen) < 0 || check_timing(c, err, errlen) < 0 ||
	    check_health(&c->settings, err, errlen) < 0)
		return -1;
	return 0;
}
