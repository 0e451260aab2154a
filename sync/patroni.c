/* patroni.c: Patroni's member entries and who of the members reads (patroni.h). The entry is the
 * JSON Patroni's touch_member writes: {"conn_url": "postgres://host:port/db", "api_url": ...,
 * "state": "running", "role": "master"|"replica", "xlog_location": N, "timeline": N, "tags":
 * {...}}; recorded from Patroni 3.0.2 (consul-facts.md). Newer Patroni says "streaming" for a
 * replica's state and may say "sync_standby" for its role: both are read the same way. */
#include "patroni.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

const char *patroni_conn_url(const char *url, char *host, size_t hostlen, long *port)
{
	const char *rest, *end, *at, *bad;
	char authority[MODEL_HOST_MAX + 16];
	size_t n;

	if (strncmp(url, "postgres://", 11) == 0)
		rest = url + 11;
	else if (strncmp(url, "postgresql://", 13) == 0)
		rest = url + 13;
	else
		return "is not a postgres:// URL";
	end = rest + strcspn(rest, "/?#");
	for (at = end; at > rest && at[-1] != '@'; at--)
		; /* user info ends at the last '@' before the path */
	n = (size_t)(end - at);
	if (n == 0 || n >= sizeof(authority))
		return "has no host, or one longer than 255 bytes";
	memcpy(authority, at, n);
	authority[n] = '\0';
	if (strchr(authority, ','))
		return "names several hosts";
	if ((bad = model_split_address(authority, 5432, host, hostlen, port)) != NULL)
		return bad;
	return *host ? NULL : "has no host";
}

static long long json_ll(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 9e18 ? (long long)v->valuedouble : -1;
}

static bool json_is(const cJSON *o, const char *name, const char *a, const char *b)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) && (strcmp(v->valuestring, a) == 0 || strcmp(v->valuestring, b) == 0);
}

/* The member's tags: noloadbalance and region. */
static void member_tags(const cJSON *tags, struct patroni_member *m)
{
	const cJSON *nolb = cJSON_GetObjectItemCaseSensitive(tags, "noloadbalance");
	const cJSON *region = cJSON_GetObjectItemCaseSensitive(tags, "region");

	/* Set the way Patroni reads a tag (Python's truth): true, a number other than 0, a string
	 * that is not empty ("false" included). */
	m->noloadbalance = cJSON_IsTrue(nolb) || (cJSON_IsNumber(nolb) && nolb->valuedouble != 0) ||
			   (cJSON_IsString(nolb) && *nolb->valuestring);
	if (cJSON_IsString(region))
		snprintf(m->region, sizeof(m->region), "%s", region->valuestring);
}

const char *patroni_member_parse(const char *value, size_t len, struct patroni_member *m, char *why, size_t whylen)
{
	cJSON *root = cJSON_ParseWithLength(value, len);
	const cJSON *url;
	const char *bad;

	memset(m, 0, sizeof(*m));
	m->xlog = -1;
	if (!root || !cJSON_IsObject(root)) {
		cJSON_Delete(root);
		return "value is not a JSON object";
	}
	url = cJSON_GetObjectItemCaseSensitive(root, "conn_url");
	if (!cJSON_IsString(url))
		bad = "has no conn_url";
	else if ((bad = patroni_conn_url(url->valuestring, m->host, sizeof(m->host), &m->port)) != NULL ||
		 (bad = model_check_host(m->host)) != NULL) {
		snprintf(why, whylen, "conn_url %s", bad);
		bad = why;
	}
	m->replica = json_is(root, "role", "replica", "sync_standby");
	m->running = json_is(root, "state", "running", "streaming");
	m->xlog = json_ll(root, "xlog_location");
	member_tags(cJSON_GetObjectItemCaseSensitive(root, "tags"), m);
	sk_json_delete_wiped(root); /* conn_url may carry a password */
	return bad;
}

long long patroni_status_optime(const char *value, size_t len)
{
	cJSON *root = cJSON_ParseWithLength(value, len);
	long long v = cJSON_IsObject(root) ? json_ll(root, "optime") : -1;

	cJSON_Delete(root);
	return v;
}

bool patroni_is_reader(const struct layout_cluster *cl, const struct patroni_member *m, long long leader_pos)
{
	if (!m->replica || !m->running || m->noloadbalance)
		return false;
	if (cl->patroni_region && strcmp(cl->patroni_region, m->region) != 0)
		return false;
	if (cl->max_lag_bytes >= 0 && (m->xlog < 0 || leader_pos < 0 || leader_pos - m->xlog > cl->max_lag_bytes))
		return false;
	return true;
}
