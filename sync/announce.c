/* announce.c: this ProxySQL announces itself, either under announce-prefix (one key, held by a TTL
 * session that ends when the agent stops renewing it, or with the local Consul agent's node when
 * there is one) or as an instance of announce-service, registered with the local Consul agent
 * under a TTL check that the agent keeps passing (never without a local agent). */
#include "announce.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "cJSON.h"
#include "consul_login.h"
#include "log.h"

/* The announce key's value: {"hostname", "port", "weight", "comment"}, and its key. */
static void announce_entry(const struct sync_settings *s, char *key, size_t keylen, sk_buf *value)
{
	size_t n = strlen(s->announce_prefix);

	while (n && s->announce_prefix[n - 1] == '/')
		n--;
	/* No ':' in the key: some Consul releases refuse it (hashicorp/consul#22822). */
	snprintf(key, keylen, "%.*s/%s_%ld", (int)n, s->announce_prefix, s->announce_host, s->announce_port);
	if (!sk_buf_add(value, "{\"hostname\":", 12) || !sk_buf_add_json_str(value, s->announce_host) ||
	    !sk_buf_addf(value, ",\"port\":%ld,\"weight\":%ld,\"comment\":", s->announce_port, s->announce_weight) ||
	    !sk_buf_add_json_str(value, s->announce_comment) || !sk_buf_add(value, "}", 1))
		log_warn("announce: value too long");
}

/* After a round: nap a third of the TTL; after a failure (err set), log the trouble when it is new
 * and back off. True when the agent is stopping. */
static bool announce_pause(struct agent *ag, const char *err, int *attempt, long ttl_s, const char *what)
{
	if (!err) {
		*attempt = 0;
		return shared_nap(ag, ttl_s * 1000 / 3);
	}
	if (*attempt == 0)
		log_warn("announce %s: %s (retrying)", what, err);
	return shared_nap(ag, shared_backoff_ms((*attempt)++, 5000));
}

/* announce-prefix: the key, its value, and the session that holds it. */
struct announcement {
	char key[600];
	char session[CONSUL_SESSION_ID_MAX]; /* "": none yet */
	sk_buf value;
	bool announced; /* logged since the session was made */
};

/* The session that holds the key: made when there is none, else renewed. Returns 0 while it
 * lives, 1 when it has ended (a new one is to be made at once), -1 with err set. */
static int kv_session(struct agent *ag, struct announcement *an, char *err, size_t errlen)
{
	deadline_t dl = deadline_in_ms(5000);
	bool gone = false;
	enum consul_agent_mode agent;

	/* With a local agent the session ends with its node too; without, with its TTL only. */
	if (!an->session[0])
		return shared_consul_agent(ag, ag->announce_c, &agent, err, errlen) < 0
			       ? -1
			       : consul_session_create(ag->announce_c,
						       &(struct consul_session_spec){ "proxysql-sync announce",
										      ag->cfg->settings.announce_ttl_s,
										      "delete", "0s",
										      agent == CONSUL_AGENT_LOCAL },
						       &dl, an->session, err, errlen);
	if (consul_session_renew(ag->announce_c, an->session, &dl, &gone, err, errlen) < 0)
		return -1;
	if (!gone)
		return 0;
	log_warn("announce %s: its session ended; announcing again", an->key);
	an->session[0] = '\0';
	an->announced = false;
	return 1;
}

/* The key as read holds our value under our session. */
static bool kv_mine(const struct announcement *an, const struct consul_kv_list *cur)
{
	for (size_t i = 0; i < cur->n; i++)
		if (strcmp(cur->items[i].key, an->key) == 0 && cur->items[i].session &&
		    strcmp(cur->items[i].session, an->session) == 0 && cur->items[i].len == an->value.len &&
		    memcmp(cur->items[i].value, an->value.data, an->value.len) == 0)
			return true;
	return false;
}

/* The key written when it is missing or not ours (a steady state reads once a round). Returns 0,
 * or -1 with err set. */
static int kv_write(struct agent *ag, struct announcement *an, char *err, size_t errlen)
{
	struct consul_kv_list cur = { 0 };
	deadline_t dl = deadline_in_ms(5000);
	struct consul_read rd = { .dl = &dl };
	bool mine, done = false;

	if (consul_kv_list(ag->announce_c, an->key, &rd, &cur, err, errlen) < 0)
		return -1;
	mine = kv_mine(an, &cur);
	consul_kv_list_free(&cur);
	if (mine)
		return 0;
	dl = deadline_in_ms(5000);
	if (consul_kv_put(ag->announce_c,
			  &(struct consul_kv_write){ an->key, an->value.data, an->value.len, an->session }, &dl, &done,
			  err, errlen) < 0)
		return -1;
	if (!done)
		return sk_err(err, errlen, "%.300s is held by another session", an->key);
	if (!an->announced)
		log_info("announce: %s = %s (session TTL %lds)", an->key, an->value.data,
			 ag->cfg->settings.announce_ttl_s);
	an->announced = true;
	return 0;
}

static void *announce_kv(struct agent *ag)
{
	struct announcement an = { .session = "" };
	char err[400];
	int attempt = 0;

	sk_buf_init(&an.value, 4096);
	announce_entry(&ag->cfg->settings, an.key, sizeof(an.key), &an.value);
	while (!ag->stop) {
		int r = kv_session(ag, &an, err, sizeof(err));

		if (r > 0)
			continue;
		if (r == 0)
			r = kv_write(ag, &an, err, sizeof(err));
		if (announce_pause(ag, r < 0 ? err : NULL, &attempt, ag->cfg->settings.announce_ttl_s, an.key))
			break;
	}
	consul_set_cancel_fd(ag->announce_c, -1); /* stopping: the key and the session go now */
	if (an.session[0]) {
		deadline_t dl = deadline_in_ms(1000);

		if (consul_kv_delete(ag->announce_c, an.key, false, &dl, err, sizeof(err)) < 0 ||
		    consul_session_destroy(ag->announce_c, an.session, &dl, err, sizeof(err)) < 0)
			log_warn("announce %s: %s (the key goes with its session)", an.key, err);
	}
	sk_buf_free(&an.value);
	return NULL;
}

/* The registration of announce-service: ID "<service>-<host>_<port>" (other characters than
 * letters, digits, '.', '-' and '_' become '_'), weight and comment in Service.Meta (strings, and
 * a weight of 0 is valid for proxysql_servers but not for Weights.Passing), one TTL check that
 * starts passing; Consul removes the instance once that check has been critical for
 * max(1 minute, 4 TTLs) (the agent died without deregistering). */
static void service_def(const struct sync_settings *s, char *id, size_t idlen, char **json, size_t *len)
{
	const char *name = s->announce_service, *host = s->announce_host;
	long ttl_s = s->announce_ttl_s, port = s->announce_port;
	char text[64];
	cJSON *def = cJSON_CreateObject(), *meta, *check;

	snprintf(id, idlen, "%.200s-%s_%ld", name, host, port);
	for (char *p = id; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
			*p = '_';
	if (!def || !cJSON_AddStringToObject(def, "ID", id) || !cJSON_AddStringToObject(def, "Name", name) ||
	    !cJSON_AddStringToObject(def, "Address", host) || !cJSON_AddNumberToObject(def, "Port", (double)port) ||
	    !(meta = cJSON_AddObjectToObject(def, "Meta")) || !(check = cJSON_AddObjectToObject(def, "Check")))
		sk_oom();
	snprintf(text, sizeof(text), "%ld", s->announce_weight);
	if (!cJSON_AddStringToObject(meta, "weight", text) ||
	    (*s->announce_comment && !cJSON_AddStringToObject(meta, "comment", s->announce_comment)))
		sk_oom();
	snprintf(text, sizeof(text), "%lds", ttl_s);
	if (!cJSON_AddStringToObject(check, "Name", "proxysql-sync announce") ||
	    !cJSON_AddStringToObject(check, "TTL", text) || !cJSON_AddStringToObject(check, "Status", "passing"))
		sk_oom();
	snprintf(text, sizeof(text), "%lds", ttl_s * 4 > 60 ? ttl_s * 4 : 60);
	if (!cJSON_AddStringToObject(check, "DeregisterCriticalServiceAfter", text))
		sk_oom();
	*json = cJSON_PrintUnformatted(def);
	cJSON_Delete(def);
	if (!*json)
		sk_oom();
	*len = strlen(*json);
}

/* Whether the Consul agent at consul-addr can take the registration: a local one. Waits for the
 * answer (consul-agent = auto); with none, says so (log and /readyz) and returns false. */
static bool service_agent_ok(struct agent *ag)
{
	enum consul_agent_mode agent;
	char err[400];
	int attempt = 0;

	while (shared_consul_agent(ag, ag->announce_c, &agent, err, sizeof(err)) < 0)
		if (announce_pause(ag, err, &attempt, ag->cfg->settings.announce_ttl_s, "service"))
			return false;
	if (agent == CONSUL_AGENT_LOCAL)
		return true;
	log_error("announce: announce-service %s needs a local Consul agent, and none answers at %s "
		  "(consul-agent = auto): " SYNC_ANNOUNCE_SERVICE_REMEDY "; this ProxySQL is not announced",
		  ag->cfg->settings.announce_service, consul_url(ag->announce_c));
	pthread_mutex_lock(&ag->pub_mu);
	snprintf(ag->announce_why, sizeof(ag->announce_why),
		 "announce-service needs a local Consul agent, and none answers at "
		 "consul-addr: " SYNC_ANNOUNCE_SERVICE_REMEDY);
	pthread_mutex_unlock(&ag->pub_mu);
	return false;
}

/* One instance of announce-service as the loop holds it. */
struct instance {
	char id[480], check[500];
	char *def; /* the registration's JSON */
	size_t len;
	bool registered, tried;
	uint64_t token_gen; /* the login token it was registered with (consul_login_generation) */
};

/* One round: register the instance (again) or pass its TTL check. 1: register again at once, 0:
 * done, -1: failed (err set). */
static int service_round(struct agent *ag, struct instance *in, char *err, size_t errlen)
{
	const struct sync_settings *s = &ag->cfg->settings;
	deadline_t dl = deadline_in_ms(5000);
	int unknown;

	if (in->registered && ag->login && consul_login_generation(ag->login) != in->token_gen) {
		/* The local agent syncs the instance to the catalog with the token it was registered
		 * with, and a token replaced by a new login ends: register again with the new one. */
		log_info("announce: %s registered again with the new login token", in->id);
		in->registered = false;
	}
	if (!in->registered) {
		in->tried = true;
		if (consul_agent_service_register(ag->announce_c, in->def, in->len, &dl, err, errlen) < 0)
			return -1;
		log_info("announce: %s registered as an instance of service %s (TTL check %lds)", in->id,
			 s->announce_service, s->announce_ttl_s);
		in->registered = true;
		in->token_gen = ag->login ? consul_login_generation(ag->login) : 0;
		return 0;
	}
	unknown = consul_agent_check_pass(ag->announce_c, in->check, "proxysql-sync is running", &dl, err, errlen);
	if (unknown < 0)
		return -1;
	if (!unknown)
		return 0;
	log_warn("announce: the Consul agent no longer knows %s (restarted without it, or deregistered by hand); "
		 "registering again",
		 in->check);
	in->registered = false;
	return 1;
}

static void *announce_service(struct agent *ag)
{
	long ttl_s = ag->cfg->settings.announce_ttl_s;
	struct instance in = { .registered = false };
	char err[400];
	int attempt = 0;

	service_def(&ag->cfg->settings, in.id, sizeof(in.id), &in.def, &in.len);
	snprintf(in.check, sizeof(in.check), "service:%s", in.id);
	while (!ag->stop) {
		int rc = service_round(ag, &in, err, sizeof(err));

		if (rc > 0)
			continue;
		if (announce_pause(ag, rc < 0 ? err : NULL, &attempt, ttl_s, in.id))
			break;
	}
	consul_set_cancel_fd(ag->announce_c, -1); /* stopping: the instance goes now */
	if (in.tried) {
		deadline_t dl = deadline_in_ms(1000);

		if (consul_agent_service_deregister(ag->announce_c, in.id, &dl, err, sizeof(err)) < 0)
			log_warn("announce %s: %s (its check turns critical after %lds)", in.id, err, ttl_s);
	}
	cJSON_free(in.def);
	return NULL;
}

void *announce_main(void *arg)
{
	struct agent *ag = arg;

	if (!*ag->cfg->settings.announce_service)
		return announce_kv(ag);
	return service_agent_ok(ag) ? announce_service(ag) : NULL;
}
