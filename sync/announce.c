/* announce.c: this ProxySQL announces itself under announce-prefix: one key, held by a TTL session
 * that ends with the node (serfHealth) or when the agent stops renewing it. */
#include "agent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* The announce key's value: {"hostname", "port", "weight", "comment"}, and its key. */
static void announce_entry(const struct opts *o, char *key, size_t keylen, sk_buf *value)
{
	char host[256];
	long port = 6032;
	size_t n = strlen(opt_str(o, "announce-prefix"));

	if (model_split_address(opt_str(o, "announce-address"), 6032, host, sizeof(host), &port))
		host[0] = '\0';
	while (n && opt_str(o, "announce-prefix")[n - 1] == '/')
		n--;
	/* No ':' in the key: some Consul releases refuse it (hashicorp/consul#22822). */
	snprintf(key, keylen, "%.*s/%s_%ld", (int)n, opt_str(o, "announce-prefix"), host, port);
	if (!sk_buf_add(value, "{\"hostname\":", 12) || !sk_buf_add_json_str(value, host) ||
	    !sk_buf_addf(value, ",\"port\":%ld,\"weight\":%ld,\"comment\":", port, opt_int(o, "announce-weight")) ||
	    !sk_buf_add_json_str(value, opt_str(o, "announce-comment")) || !sk_buf_add(value, "}", 1))
		log_warn("announce: value too long");
}

void *announce_main(void *arg)
{
	struct agent *ag = arg;
	const struct opts *o = &ag->cfg->o;
	long ttl_s = (long)opt_num(o, "announce-ttl");
	char key[600], session[CONSUL_SESSION_ID_MAX] = "", err[400];
	struct consul_kv_list cur = { 0 };
	bool announced = false;
	int attempt = 0;
	sk_buf value;

	sk_buf_init(&value, 4096);
	announce_entry(o, key, sizeof(key), &value);
	while (!ag->stop) {
		deadline_t dl = deadline_in_ms(5000);
		struct consul_meta meta;
		bool gone = false, done = false, mine;

		if (!session[0]) {
			if (consul_session_create(ag->announce_c, "proxysql-sync announce", ttl_s, "delete", "0s", true,
						  &dl, session, sizeof(session), err, sizeof(err)) < 0)
				goto retry;
		} else if (consul_session_renew(ag->announce_c, session, &dl, &gone, err, sizeof(err)) < 0) {
			goto retry;
		} else if (gone) {
			log_warn("announce %s: its session ended; announcing again", key);
			session[0] = '\0';
			announced = false;
			continue;
		}
		/* Written when missing or not ours (a steady state reads once a round). */
		dl = deadline_in_ms(5000);
		if (consul_kv_list(ag->announce_c, key, 0, 0, CONSUL_DEFAULT, &dl, &cur, &meta, err, sizeof(err)) < 0)
			goto retry;
		mine = false;
		for (size_t i = 0; i < cur.n; i++)
			mine = mine || (strcmp(cur.items[i].key, key) == 0 && cur.items[i].session &&
					strcmp(cur.items[i].session, session) == 0 && cur.items[i].len == value.len &&
					memcmp(cur.items[i].value, value.data, value.len) == 0);
		consul_kv_list_free(&cur);
		if (!mine) {
			dl = deadline_in_ms(5000);
			if (consul_kv_put(ag->announce_c, key, value.data, value.len, session, &dl, &done, err,
					  sizeof(err)) < 0)
				goto retry;
			if (!done) {
				snprintf(err, sizeof(err), "%.300s is held by another session", key);
				goto retry;
			}
			if (!announced)
				log_info("announce: %s = %s (session TTL %lds)", key, value.data, ttl_s);
			announced = true;
		}
		attempt = 0;
		if (agent_nap(ag, ttl_s * 1000 / 3))
			break;
		continue;
	retry:
		if (attempt == 0)
			log_warn("announce %s: %s (retrying)", key, err);
		if (agent_nap(ag, agent_backoff_ms(attempt++, 5000)))
			break;
	}
	consul_set_cancel_fd(ag->announce_c, -1); /* stopping: the key and the session go now */
	if (session[0]) {
		deadline_t dl = deadline_in_ms(1000);

		if (consul_kv_delete(ag->announce_c, key, false, &dl, err, sizeof(err)) < 0 ||
		    consul_session_destroy(ag->announce_c, session, &dl, err, sizeof(err)) < 0)
			log_warn("announce %s: %s (the key goes with its session)", key, err);
	}
	sk_buf_free(&value);
	return NULL;
}
