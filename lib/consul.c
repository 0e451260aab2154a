/* consul.c: the Consul HTTP client: config from CONSUL_* variables, requests on one libcurl
 * handle under a deadline, and a strict parser for KV listings. */
#include "consul.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "opt.h"
#include "secret.h"

#define KV_MAX_DEPTH 8
#define WAIT_MARGIN_MS 3000
#define CONSUL_DEFAULT_WAIT_MS 300000 /* what Consul waits when a blocking query gives no wait */

struct consul {
	CURLM *multi;
	CURL *easy;
	char *base; /* scheme://host[:port][/prefix], no trailing slash */
	char *unix_path;
	char *dc;
	char *token_header; /* "X-Consul-Token: ..." (a secret) */
	char *userpwd; /* basic auth (a secret) */
	struct curl_slist *connect_to;
	int cancel_fd;
	bool proxied; /* requests go through a proxy (consul_proxy_for) */
	sk_buf body;
	bool body_overflow;
	size_t error_bytes; /* of a listing's error answer, for the cap */
	struct consul_listing *listing; /* set while a listing is read: 200 answers stream into it */
	bool index_seen;
	struct consul_meta meta;
	char curl_err[CURL_ERROR_SIZE];
};

static const char *listing_error(const struct consul_listing *p, bool *too_large);

/* -- configuration ---------------------------------------------------------------------------- */

void consul_config_set(char **field, const char *value)
{
	if (*field) {
		sk_wipe(*field, strlen(*field));
		free(*field);
		*field = NULL;
	}
	if (value && *value)
		*field = xstrdup(value);
}

void consul_config_free(struct consul_config *c)
{
	char **fields[] = { &c->addr,   &c->token,       &c->token_file, &c->http_auth,       &c->cacert,
			    &c->capath, &c->client_cert, &c->client_key, &c->tls_server_name, &c->datacenter };

	for (size_t i = 0; i < SK_ARRAY_LEN(fields); i++)
		consul_config_set(fields[i], NULL);
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* The first of two variables that is set and not empty (Go's getEnvAny). */
static const char *env_any(const char *a, const char *b)
{
	return env(a) ? env(a) : env(b);
}

/* A boolean as Go's strconv.ParseBool spells it, plus the yes/no/on/off of the other settings. */
static int env_bool(const char *name, bool *out, char *err, size_t errlen)
{
	const char *v = env(name);

	if (!v)
		return 0;
	if (sk_streq_ci(v, "t") || sk_streq_ci(v, "f")) {
		*out = sk_streq_ci(v, "t");
		return 0;
	}
	if (!sk_parse_bool(v, out))
		return sk_err(err, errlen, "%s: not a boolean: '%.40s' (use true or false)", name, v);
	return 0;
}

int consul_config_from_env(struct consul_config *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	c->ssl_verify = true;
	c->max_response = CONSUL_MAX_RESPONSE_DEFAULT;
	consul_config_set(&c->addr, env("CONSUL_HTTP_ADDR") ? env("CONSUL_HTTP_ADDR") : CONSUL_DEFAULT_ADDR);
	consul_config_set(&c->token, env("CONSUL_HTTP_TOKEN"));
	log_add_secret(c->token);
	consul_config_set(&c->token_file, env("CONSUL_HTTP_TOKEN_FILE"));
	consul_config_set(&c->http_auth, env("CONSUL_HTTP_AUTH"));
	if (c->http_auth) {
		const char *colon = strchr(c->http_auth, ':');

		log_add_secret(c->http_auth);
		if (colon)
			log_add_secret(colon + 1);
	}
	consul_config_set(&c->cacert, env("CONSUL_CACERT"));
	consul_config_set(&c->capath, env("CONSUL_CAPATH"));
	consul_config_set(&c->client_cert, env("CONSUL_CLIENT_CERT"));
	consul_config_set(&c->client_key, env("CONSUL_CLIENT_KEY"));
	consul_config_set(&c->tls_server_name, env("CONSUL_TLS_SERVER_NAME"));
	if (env_bool("CONSUL_HTTP_SSL", &c->ssl, err, errlen) < 0 ||
	    env_bool("CONSUL_HTTP_SSL_VERIFY", &c->ssl_verify, err, errlen) < 0)
		return -1;
	if (!c->client_cert != !c->client_key)
		return sk_err(err, errlen,
			      "%s is set without %s: a client certificate needs its key and the other way round",
			      c->client_cert ? "CONSUL_CLIENT_CERT" : "CONSUL_CLIENT_KEY",
			      c->client_cert ? "CONSUL_CLIENT_KEY" : "CONSUL_CLIENT_CERT");
	return 0;
}

const char *consul_consistency_str(enum consul_consistency mode)
{
	switch (mode) {
	case CONSUL_STALE: return "stale";
	case CONSUL_CONSISTENT: return "consistent";
	case CONSUL_DEFAULT: break;
	}
	return "default";
}

bool consul_consistency_parse(const char *s, enum consul_consistency *out)
{
	static const enum consul_consistency all[] = { CONSUL_DEFAULT, CONSUL_STALE, CONSUL_CONSISTENT };

	for (size_t i = 0; i < SK_ARRAY_LEN(all); i++) {
		if (sk_streq_ci(s, consul_consistency_str(all[i]))) {
			*out = all[i];
			return true;
		}
	}
	return false;
}

/* -- proxies, as Consul's own client chooses them -------------------------------------------- */

/* An IP address: family 4 (in b[0..3], IPv4-mapped IPv6 included) or 6. */
struct ipaddr {
	int fam;
	unsigned char b[16];
};

static bool ip_parse(const char *s, struct ipaddr *ip)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	unsigned char buf[16];

	memset(ip, 0, sizeof(*ip));
	if (inet_pton(AF_INET, s, buf) == 1) {
		ip->fam = 4;
		memcpy(ip->b, buf, 4);
		return true;
	}
	if (inet_pton(AF_INET6, s, buf) != 1)
		return false;
	if (memcmp(buf, mapped, sizeof(mapped)) == 0) {
		ip->fam = 4;
		memcpy(ip->b, buf + 12, 4);
	} else {
		ip->fam = 6;
		memcpy(ip->b, buf, 16);
	}
	return true;
}

static bool ip_loopback(const struct ipaddr *ip)
{
	static const unsigned char one[16] = { [15] = 1 };

	return ip->fam == 4 ? ip->b[0] == 127 : memcmp(ip->b, one, 16) == 0;
}

/* Whether `ip` is inside "addr/bits" (`cidr`); false when `cidr` is not one. */
static bool cidr_contains(const char *cidr, const struct ipaddr *ip, bool *is_cidr)
{
	const char *slash = strchr(cidr, '/');
	char addr[64];
	struct ipaddr net;
	long bits;

	*is_cidr = false;
	if (!slash || (size_t)(slash - cidr) >= sizeof(addr))
		return false;
	memcpy(addr, cidr, (size_t)(slash - cidr));
	addr[slash - cidr] = '\0';
	/* An IPv4-mapped network is an IPv6 one to Go: keep the family inet_pton gives. */
	if (!ip_parse(addr, &net) || !slash[1] || strspn(slash + 1, "0123456789") != strlen(slash + 1) ||
	    !sk_parse_long(slash + 1, 0, strchr(addr, ':') ? 128 : 32, &bits))
		return false;
	*is_cidr = true;
	if (strchr(addr, ':') && net.fam == 4) /* ::ffff:a.b.c.d/n: compare as IPv6 */
		return false;
	if (!ip || ip->fam != net.fam)
		return false;
	for (long i = 0; i < bits; i++)
		if (((ip->b[i / 8] ^ net.b[i / 8]) >> (7 - i % 8)) & 1)
			return false;
	return true;
}

/* Go's net.SplitHostPort: "host:port" or "[v6]:port" (the port may be empty). */
static bool split_host_port(const char *s, char *host, size_t hlen, const char **port)
{
	const char *colon = strrchr(s, ':'), *h = s, *hend;

	if (!colon)
		return false;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end || end + 1 != colon)
			return false;
		h = s + 1;
		hend = end;
		if (memchr(h, '[', (size_t)(hend - h)) || strchr(colon, ']') || strchr(colon, '['))
			return false;
	} else {
		hend = colon;
		if (memchr(s, ':', (size_t)(hend - s)) || strpbrk(s, "[]"))
			return false;
	}
	if ((size_t)(hend - h) >= hlen)
		return false;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	*port = colon + 1;
	return true;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return k <= n && memcmp(s + n - k, suffix, k) == 0;
}

/* One NO_PROXY entry (trimmed, lower case) against the request's host (lower case, no brackets),
 * port and address (NULL: a name), as Go's httpproxy config matchers do. */
static bool no_proxy_entry_matches(const char *p, const char *host, const char *port, const struct ipaddr *ip)
{
	char phost[256], dom[258];
	const char *pport = "";
	struct ipaddr pip;
	bool match_host, is_cidr, in = cidr_contains(p, ip, &is_cidr);

	if (is_cidr)
		return in;
	if (split_host_port(p, phost, sizeof(phost), &pport)) {
		if (!phost[0])
			return false; /* no host part: malformed, ignored */
	} else if (!sk_strlcpy(phost, p, sizeof(phost))) {
		return false;
	}
	if (ip_parse(phost, &pip))
		return ip && pip.fam == ip->fam && memcmp(pip.b, ip->b, pip.fam == 4 ? 4 : 16) == 0 &&
		       (!*pport || strcmp(pport, port) == 0);
	/* A name: "example.com" matches it and its subdomains, ".example.com" and "*.example.com"
	 * only the subdomains. */
	if (strncmp(phost, "*.", 2) == 0)
		memmove(phost, phost + 1, strlen(phost));
	match_host = phost[0] != '.';
	snprintf(dom, sizeof(dom), "%s%s", match_host ? "." : "", phost);
	if (!(ends_with(host, dom) || (match_host && strcmp(host, dom + 1) == 0)))
		return false;
	return !*pport || strcmp(pport, port) == 0;
}

/* A proxy's credentials (scheme://user:password@host) are secrets to the log. */
static void proxy_secrets(const char *url)
{
	const char *a = strstr(url, "://"), *at, *slash;
	char *userinfo, *colon;

	a = a ? a + 3 : url;
	at = strchr(a, '@');
	slash = strchr(a, '/');
	if (!at || (slash && slash < at))
		return;
	userinfo = xmalloc((size_t)(at - a) + 1);
	memcpy(userinfo, a, (size_t)(at - a));
	userinfo[at - a] = '\0';
	log_add_secret(userinfo);
	if ((colon = strchr(userinfo, ':')))
		log_add_secret(colon + 1);
	sk_wipe(userinfo, strlen(userinfo));
	free(userinfo);
}

char *consul_proxy_for(const char *scheme, const char *host, long port, const char *http_proxy, const char *https_proxy,
		       const char *no_proxy)
{
	const char *proxy = strcmp(scheme, "https") == 0  ? https_proxy
			    : strcmp(scheme, "http") == 0 ? http_proxy
							  : NULL;
	char h[256], portstr[24], *list, *save = NULL, *out;
	struct ipaddr ip;
	bool is_ip, direct = false;
	size_t n;

	if (!proxy || !*proxy || !host)
		return NULL;
	n = strlen(host);
	if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
		host++, n -= 2;
	if (n == 0 || n >= sizeof(h))
		return NULL;
	for (size_t i = 0; i < n; i++)
		h[i] = (char)tolower((unsigned char)host[i]);
	h[n] = '\0';
	snprintf(portstr, sizeof(portstr), "%ld", port > 0 ? port : strcmp(scheme, "https") == 0 ? 443L : 80L);
	is_ip = ip_parse(h, &ip);
	if (strcmp(h, "localhost") == 0 || (is_ip && ip_loopback(&ip)))
		return NULL;
	list = xstrdup(no_proxy ? no_proxy : "");
	for (char *p = strtok_r(list, ",", &save); p && !direct; p = strtok_r(NULL, ",", &save)) {
		char *end;

		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f')
			p++;
		end = p + strlen(p);
		while (end > p && isspace((unsigned char)end[-1]))
			*--end = '\0';
		for (char *q = p; *q; q++)
			*q = (char)tolower((unsigned char)*q);
		if (!*p)
			continue;
		direct = strcmp(p, "*") == 0 || no_proxy_entry_matches(p, h, portstr, is_ip ? &ip : NULL);
	}
	free(list);
	if (direct)
		return NULL;
	/* Go reads a value without a scheme ("proxy:3128") as http://. */
	if (strstr(proxy, "://"))
		return xstrdup(proxy);
	n = strlen(proxy) + sizeof("http://");
	out = xmalloc(n);
	snprintf(out, n, "http://%s", proxy);
	return out;
}

char *consul_proxy_from_env(const char *scheme, const char *host, long port)
{
	char *proxy = consul_proxy_for(scheme, host, port, env_any("HTTP_PROXY", "http_proxy"),
				       env_any("HTTPS_PROXY", "https_proxy"), env_any("NO_PROXY", "no_proxy"));

	if (proxy)
		proxy_secrets(proxy);
	return proxy;
}

/* -- the client ------------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* Split an address the way Consul's api.NewClient does: "[scheme://]authority[/prefix]" or
 * "unix:///path". Fills the base URL (with `url_host` in place of the authority's host when
 * set, for TLS server names), the socket path and the CURLOPT_CONNECT_TO entry. */
static int parse_addr(const char *addr, bool ssl, const char *server_name, sk_buf *base, char **unix_path,
		      char **connect_to, char *req_host, long *req_port, char *err, size_t errlen)
{
	const char *sep = strstr(addr, "://"), *rest = addr, *slash, *port = NULL;
	const char *scheme = ssl ? "https" : "http";
	char host[256];
	size_t alen, hlen;

	if (has_ctl(addr) || strpbrk(addr, " @?#\\"))
		return sk_err(err, errlen, "consul address '%.80s': unexpected character (spaces, @, ?, # or \\)",
			      addr);
	if (sep) {
		size_t slen = (size_t)(sep - addr);

		rest = sep + 3;
		if (slen == 5 && strncmp(addr, "https", 5) == 0) {
			scheme = "https";
		} else if (slen == 4 && strncmp(addr, "unix", 4) == 0) {
			if (rest[0] != '/')
				return sk_err(err, errlen, "consul address '%.80s': unix:// needs an absolute path",
					      addr);
			*unix_path = xstrdup(rest);
			if (!sk_buf_addf(base, "%s://%s", scheme, server_name && ssl ? server_name : "localhost"))
				return sk_err(err, errlen, "consul address too long");
			return 0;
		} else if (!(slen == 4 && strncmp(addr, "http", 4) == 0)) {
			/* "http" keeps https when TLS was asked for: Consul never reverts to http. */
			return sk_err(err, errlen, "consul address '%.80s': unknown scheme (http, https or unix)",
				      addr);
		}
	}
	slash = strchr(rest, '/');
	alen = slash ? (size_t)(slash - rest) : strlen(rest);
	if (alen == 0 || alen >= sizeof(host))
		return sk_err(err, errlen, "consul address '%.80s': no host", addr);
	memcpy(host, rest, alen);
	host[alen] = '\0';
	if (host[0] == '[') {
		char *close = strchr(host, ']');

		if (!close || (close[1] && close[1] != ':'))
			return sk_err(err, errlen, "consul address '%.80s': bad IPv6 address", addr);
		port = close[1] ? close + 2 : NULL;
		hlen = (size_t)(close - host) + 1;
	} else {
		char *colon = strchr(host, ':');

		port = colon ? colon + 1 : NULL;
		hlen = colon ? (size_t)(colon - host) : alen;
	}
	if (port && !sk_parse_long(port, 1, 65535, req_port))
		return sk_err(err, errlen, "consul address '%.80s': bad port", addr);
	memcpy(req_host, host, hlen);
	req_host[hlen] = '\0';
	if (server_name && ssl) {
		const char *pt = port ? port : strcmp(scheme, "https") == 0 ? "443" : "80";

		if (!sk_buf_addf(base, "%s://%s:%s", scheme, server_name, pt))
			return sk_err(err, errlen, "consul address too long");
		*connect_to = xmalloc(strlen(server_name) + hlen + 2 * strlen(pt) + 4);
		snprintf(*connect_to, strlen(server_name) + hlen + 2 * strlen(pt) + 4, "%s:%s:%.*s:%s", server_name, pt,
			 (int)hlen, host, pt);
	} else if (!sk_buf_addf(base, "%s://%s", scheme, host)) {
		return sk_err(err, errlen, "consul address too long");
	}
	if (slash) {
		size_t plen = strlen(slash);

		while (plen > 0 && slash[plen - 1] == '/')
			plen--;
		if (plen && !sk_buf_add(base, slash, plen))
			return sk_err(err, errlen, "consul address too long");
	}
	return 0;
}

#define ERROR_BODY_MAX 4096 /* what is kept of a listing's answer that is not a 200: its message */

static size_t on_body(char *ptr, size_t size, size_t n, void *ud)
{
	struct consul *c = ud;

	if (c->listing) {
		long status = 0;
		size_t keep = size * n;

		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status == 200)
			return consul_listing_feed(c->listing, ptr, size * n) == 0 ? size * n : 0;
		/* An error answer: its first ERROR_BODY_MAX bytes are kept for the message, and the
		 * rest counted against max-response-bytes like any answer. */
		c->error_bytes += size * n;
		if (c->error_bytes > c->body.max) {
			c->body_overflow = true;
			return 0;
		}
		if (keep > ERROR_BODY_MAX - c->body.len)
			keep = ERROR_BODY_MAX - c->body.len;
		if (keep && !sk_buf_add(&c->body, ptr, keep))
			return 0; /* cannot be: ERROR_BODY_MAX is below the cap */
		return size * n;
	}
	if (!sk_buf_add(&c->body, ptr, size * n)) {
		c->body_overflow = true;
		return 0;
	}
	return size * n;
}

/* A listing of a large prefix grows the answer buffer to megabytes; the entries have been
 * copied out by now, so give that memory back instead of keeping it between wake-ups. */
static void release_big_body(struct consul *c)
{
	if (c->body.cap > 65536) {
		sk_wipe(c->body.data, c->body.len); /* KV values: user passwords */
		sk_buf_free(&c->body); /* keeps the size cap */
	}
}

static bool parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return true;
}

static bool header_is(const char *line, size_t namelen, const char *name)
{
	return namelen == strlen(name) && strncasecmp(line, name, namelen) == 0;
}

static size_t on_header(char *line, size_t size, size_t n, void *ud)
{
	struct consul *c = ud;
	size_t len = size * n, namelen, vlen;
	const char *colon, *v;
	char value[64];

	if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
		/* A new response (after a 100 Continue, say): forget the last one's headers. */
		memset(&c->meta, 0, sizeof(c->meta));
		c->index_seen = false;
		return len;
	}
	colon = memchr(line, ':', len);
	if (!colon)
		return len;
	namelen = (size_t)(colon - line);
	v = colon + 1;
	vlen = len - namelen - 1;
	while (vlen && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen && isspace((unsigned char)v[vlen - 1]))
		vlen--;
	if (vlen >= sizeof(value))
		return len; /* no header we read is that long */
	memcpy(value, v, vlen);
	value[vlen] = '\0';
	if (header_is(line, namelen, "X-Consul-Index")) {
		c->index_seen = parse_u64(value, &c->meta.index);
	} else if (header_is(line, namelen, "X-Consul-KnownLeader")) {
		c->meta.known_leader = sk_streq_ci(value, "true");
	} else if (header_is(line, namelen, "X-Consul-LastContact")) {
		if (!sk_parse_long(value, 0, INT32_MAX, &c->meta.last_contact_ms))
			c->meta.last_contact_ms = 0;
	} else if (header_is(line, namelen, "X-Consul-Results-Filtered-By-ACLs")) {
		c->meta.filtered_by_acls = sk_streq_ci(value, "true");
	}
	return len;
}

struct consul *consul_new(const struct consul_config *cfg, char *err, size_t errlen)
{
	struct consul *c = xcalloc(1, sizeof(*c));
	sk_buf base;
	char *token = NULL, *connect_to = NULL, *proxy = NULL, req_host[256] = "";
	long req_port = 0;
	bool ssl;

	sk_buf_init(&base, 4096);
	c->cancel_fd = -1;
	sk_buf_init(&c->body, cfg->max_response ? cfg->max_response : CONSUL_MAX_RESPONSE_DEFAULT);
	if (!cfg->client_cert != !cfg->client_key) {
		sk_err(err, errlen, "a consul client certificate needs its key and the other way round");
		goto fail;
	}
	ssl = cfg->ssl || (cfg->addr && strncmp(cfg->addr, "https://", 8) == 0);
	if (parse_addr(cfg->addr && *cfg->addr ? cfg->addr : CONSUL_DEFAULT_ADDR, ssl, cfg->tls_server_name, &base,
		       &c->unix_path, &connect_to, req_host, &req_port, err, errlen) < 0)
		goto fail;
	c->base = xstrdup(base.data);
	if (cfg->token_file) {
		char why[300];

		token = secret_read_file(cfg->token_file, why, sizeof(why));
		if (!token) {
			sk_err(err, errlen, "consul token file %s", why);
			goto fail;
		}
	} else if (cfg->token) {
		token = xstrdup(cfg->token);
		log_add_secret(token);
	}
	if (token && *token) {
		size_t n = strlen(token) + sizeof("X-Consul-Token: ");

		if (has_ctl(token)) {
			sk_err(err, errlen, "the consul token contains a control character");
			goto fail;
		}
		c->token_header = xmalloc(n);
		snprintf(c->token_header, n, "X-Consul-Token: %s", token);
	}
	if (cfg->http_auth) {
		if (has_ctl(cfg->http_auth)) {
			sk_err(err, errlen, "CONSUL_HTTP_AUTH contains a control character");
			goto fail;
		}
		c->userpwd = xstrdup(cfg->http_auth);
	}
	if (cfg->datacenter) {
		if (has_ctl(cfg->datacenter)) {
			sk_err(err, errlen, "the consul datacenter name contains a control character");
			goto fail;
		}
		c->dc = xstrdup(cfg->datacenter);
	}

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK || !(c->multi = curl_multi_init()) || !(c->easy = curl_easy_init())) {
		sk_err(err, errlen, "cannot start libcurl");
		goto fail;
	}
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->curl_err);
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c->easy, CURLOPT_HEADERDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_ACCEPT_ENCODING, ""); /* the cap applies after decompression */
	curl_easy_setopt(c->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c->easy, CURLOPT_USERAGENT, "sidekick");
	if (c->unix_path)
		curl_easy_setopt(c->easy, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
	/* The proxy is decided here, never by libcurl's own reading of the environment (which
	 * proxies loopback too, and would hand the token to the proxy). "" means direct; an empty
	 * CURLOPT_NOPROXY makes libcurl ignore NO_PROXY: the decision above already applied it. */
	if (!c->unix_path)
		proxy = consul_proxy_from_env(ssl ? "https" : "http", req_host, req_port);
	curl_easy_setopt(c->easy, CURLOPT_PROXY, proxy ? proxy : "");
	curl_easy_setopt(c->easy, CURLOPT_NOPROXY, "");
	c->proxied = proxy != NULL;
	if (c->userpwd)
		curl_easy_setopt(c->easy, CURLOPT_USERPWD, c->userpwd);
	if (ssl) {
		if (cfg->cacert)
			curl_easy_setopt(c->easy, CURLOPT_CAINFO, cfg->cacert);
		if (cfg->capath)
			curl_easy_setopt(c->easy, CURLOPT_CAPATH, cfg->capath);
		if (cfg->client_cert) {
			curl_easy_setopt(c->easy, CURLOPT_SSLCERT, cfg->client_cert);
			curl_easy_setopt(c->easy, CURLOPT_SSLKEY, cfg->client_key);
		}
		curl_easy_setopt(c->easy, CURLOPT_SSL_VERIFYPEER, cfg->ssl_verify ? 1L : 0L);
		curl_easy_setopt(c->easy, CURLOPT_SSL_VERIFYHOST, cfg->ssl_verify ? 2L : 0L);
		if (connect_to) {
			c->connect_to = curl_slist_append(NULL, connect_to);
			if (!c->connect_to) {
				sk_err(err, errlen, "out of memory");
				goto fail;
			}
			curl_easy_setopt(c->easy, CURLOPT_CONNECT_TO, c->connect_to);
		}
	}
	free(connect_to);
	if (token) {
		sk_wipe(token, strlen(token));
		free(token);
	}
	if (proxy) {
		sk_wipe(proxy, strlen(proxy));
		free(proxy);
	}
	sk_buf_free(&base);
	return c;
fail:
	free(connect_to);
	if (proxy) { /* may hold user:password */
		sk_wipe(proxy, strlen(proxy));
		free(proxy);
	}
	if (token) {
		sk_wipe(token, strlen(token));
		free(token);
	}
	sk_buf_free(&base);
	consul_free(c);
	return NULL;
}

void consul_free(struct consul *c)
{
	if (!c)
		return;
	if (c->easy)
		curl_easy_cleanup(c->easy);
	if (c->multi)
		curl_multi_cleanup(c->multi);
	curl_slist_free_all(c->connect_to);
	if (c->token_header)
		sk_wipe(c->token_header, strlen(c->token_header));
	if (c->userpwd)
		sk_wipe(c->userpwd, strlen(c->userpwd));
	free(c->token_header);
	free(c->userpwd);
	free(c->base);
	free(c->unix_path);
	free(c->dc);
	sk_wipe(c->body.data, c->body.len);
	sk_buf_free(&c->body);
	free(c);
}

const char *consul_url(const struct consul *c)
{
	return c->base;
}

void consul_set_cancel_fd(struct consul *c, int fd)
{
	c->cancel_fd = fd;
}

const struct consul_meta *consul_last_meta(const struct consul *c)
{
	return &c->meta;
}

/* -- requests --------------------------------------------------------------------------------- */

/* Percent-encode `s` for a URL path (keep_slash) or a query value. */
static bool add_escaped(sk_buf *b, const char *s, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/')) {
			if (!sk_buf_add(b, p, 1))
				return false;
		} else {
			char e[3] = { '%', hex[*p >> 4], hex[*p & 15] };

			if (!sk_buf_add(b, e, 3))
				return false;
		}
	}
	return true;
}

/* A key (or prefix) we are willing to put in a URL: no leading '/', no "." or ".." segment
 * (which URL normalisation would resolve to another key), no control characters. */
static int check_key(const char *key, bool allow_empty, char *err, size_t errlen)
{
	const char *seg = key;

	if (!*key && !allow_empty)
		return sk_err(err, errlen, "empty consul key");
	if (*key == '/')
		return sk_err(err, errlen, "consul key '%.200s' starts with '/'", key);
	if (has_ctl(key))
		return sk_err(err, errlen, "consul key contains a control character");
	for (;;) {
		size_t n = strcspn(seg, "/");

		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return sk_err(err, errlen, "consul key '%.200s' has a '.' or '..' segment", key);
		if (!seg[n])
			break;
		seg += n + 1;
	}
	return 0;
}

/* The first line of the body, printable, for error messages. */
static void body_line(const struct consul *c, char *out, size_t len)
{
	size_t i = 0;

	for (size_t k = 0; k < c->body.len && i + 1 < len && i < 200; k++) {
		unsigned char ch = (unsigned char)c->body.data[k];

		if (ch == '\n' || ch == '\r')
			break;
		out[i++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	out[i] = '\0';
}

static int status_error(const struct consul *c, const char *what, char *err, size_t errlen)
{
	char line[256];

	body_line(c, line, sizeof(line));
	if (*line)
		return sk_err(err, errlen, "%s: HTTP %ld: %s", what, c->meta.http_status, line);
	return sk_err(err, errlen, "%s: HTTP %ld", what, c->meta.http_status);
}

/* Run the transfer on the multi handle, watching the cancel descriptor. */
static CURLcode perform(struct consul *c, bool *cancelled)
{
	CURLcode rc = CURLE_OK;
	CURLMsg *msg;
	int left;

	*cancelled = false;
	if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	for (;;) {
		struct curl_waitfd wfd = { .fd = c->cancel_fd, .events = CURL_WAIT_POLLIN, .revents = 0 };
		int running = 0, numfds = 0;

		if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (!running)
			break;
		if (curl_multi_poll(c->multi, c->cancel_fd >= 0 ? &wfd : NULL, c->cancel_fd >= 0 ? 1 : 0, 1000,
				    &numfds) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (c->cancel_fd >= 0 && (wfd.revents & CURL_WAIT_POLLIN)) {
			*cancelled = true;
			break;
		}
	}
	while ((msg = curl_multi_info_read(c->multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == c->easy)
			rc = msg->data.result;
	curl_multi_remove_handle(c->multi, c->easy);
	return rc;
}

/* One request: `path` is already escaped and may carry a query; `what` names it in errors.
 * On return 0 the answer is in c->body and c->meta (any status); -1: no answer. */
static int request(struct consul *c, const char *method, const char *path, const char *what, const char *content_type,
		   const void *body, size_t len, const deadline_t *dl, char *err, size_t errlen)
{
	struct curl_slist *hdrs = NULL, *h;
	sk_buf url;
	char ctype[64];
	const char *why;
	bool cancelled;
	CURLcode rc;
	int ret = -1;
	long left;

	sk_wipe(c->body.data, c->body.len); /* the last answer's KV values: user passwords */
	c->body.len = 0;
	if (c->body.data)
		c->body.data[0] = '\0';
	c->body_overflow = false;
	c->error_bytes = 0;
	c->index_seen = false;
	memset(&c->meta, 0, sizeof(c->meta));
	c->curl_err[0] = '\0';

	sk_buf_init(&url, 16384);
	if (!sk_buf_addf(&url, "%s%s", c->base, path) ||
	    (c->dc &&
	     (!sk_buf_add(&url, strchr(path, '?') ? "&dc=" : "?dc=", 4) || !add_escaped(&url, c->dc, false)))) {
		sk_err(err, errlen, "%s: URL too long", what);
		goto out;
	}
	left = deadline_timeout_ms(dl); /* never 0 below: libcurl reads a 0 timeout as "none" */
	if (left < 0) {
		sk_err(err, errlen, "%s: no time left before the request (deadline)", what);
		goto out;
	}
	if (c->token_header) {
		if (!(h = curl_slist_append(hdrs, c->token_header)))
			goto oom;
		hdrs = h;
	}
	if (!(h = curl_slist_append(hdrs, "Expect:")))
		goto oom;
	hdrs = h;
	if (content_type) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
		if (!(h = curl_slist_append(hdrs, ctype)))
			goto oom;
		hdrs = h;
	}

	curl_easy_setopt(c->easy, CURLOPT_URL, url.data);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, left);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, left);
	curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, NULL);
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
		curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, "PUT");
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	}

	rc = perform(c, &cancelled);
	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->meta.http_status);
	if (cancelled) {
		c->meta.http_status = 0;
		sk_err(err, errlen, "%s: cancelled", what);
	} else if (rc == CURLE_WRITE_ERROR && c->body_overflow) {
		c->meta.too_large = true;
		sk_err(err, errlen, "%s: answer larger than %zu bytes (the response size cap)", what, c->body.max);
	} else if (rc == CURLE_WRITE_ERROR && c->listing && (why = listing_error(c->listing, &c->meta.too_large))) {
		sk_err(err, errlen, c->meta.too_large ? "%s: %s" : "%s: bad answer: %s", what, why);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		c->meta.http_status = 0;
		sk_err(err, errlen, "%s: timeout after %ld ms (deadline)", what, left);
	} else if (rc != CURLE_OK) {
		c->meta.http_status = 0;
		sk_err(err, errlen, "%s: %s%s", what, c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc),
		       c->proxied ? " (through the proxy of HTTP_PROXY or HTTPS_PROXY; NO_PROXY lists hosts reached "
				    "directly)"
				  : "");
	} else {
		ret = 0;
	}
	goto out;
oom:
	sk_err(err, errlen, "%s: out of memory", what);
out:
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
	for (h = hdrs; h; h = h->next)
		sk_wipe(h->data, strlen(h->data));
	curl_slist_free_all(hdrs);
	sk_buf_free(&url);
	return ret;
}

/* A "true"/"false" answer (KV writes, session destroy). */
static int bool_answer(const struct consul *c, const char *what, bool *out, char *err, size_t errlen)
{
	char line[16];
	size_t n = c->body.len;
	const char *p = c->body.data ? c->body.data : "";

	while (n && isspace((unsigned char)*p))
		p++, n--;
	while (n && isspace((unsigned char)p[n - 1]))
		n--;
	if (n >= sizeof(line))
		return sk_err(err, errlen, "%s: unexpected answer (not true or false)", what);
	memcpy(line, p, n);
	line[n] = '\0';
	if (strcmp(line, "true") == 0)
		*out = true;
	else if (strcmp(line, "false") == 0)
		*out = false;
	else
		return sk_err(err, errlen, "%s: unexpected answer '%s' (not true or false)", what, line);
	return 0;
}

long consul_wait_budget_ms(long wait_ms)
{
	if (wait_ms <= 0)
		wait_ms = CONSUL_DEFAULT_WAIT_MS;
	return wait_ms + wait_ms / 16 + WAIT_MARGIN_MS;
}

/* The index, wait and consistency parameters of a blocking read (after a first parameter). */
static bool add_blocking(sk_buf *path, uint64_t index, long wait_ms, enum consul_consistency mode)
{
	return (index == 0 || sk_buf_addf(path, "&index=%" PRIu64, index)) &&
	       (index == 0 || wait_ms <= 0 || sk_buf_addf(path, "&wait=%ldms", wait_ms)) &&
	       (mode == CONSUL_DEFAULT || sk_buf_addf(path, "&%s", consul_consistency_str(mode)));
}

/* GET a blocking listing (a 404 is an empty one where `empty_404`), parsed as it arrives: the
 * status and the index checked, the entries into out, the answer's headers into meta. */
static int blocking_list(struct consul *c, const char *path, const char *what, bool empty_404,
			 enum consul_listing_kind kind, const deadline_t *dl, struct consul_kv_list *out,
			 struct consul_meta *meta, char *err, size_t errlen)
{
	struct consul_listing *l = consul_listing_new(kind, c->body.max);
	char why[240];
	int ret = -1, rc;

	c->listing = l;
	rc = request(c, "GET", path, what, NULL, NULL, 0, dl, err, errlen);
	c->listing = NULL;
	if (rc < 0)
		goto out;
	if (c->meta.http_status != 200 && !(empty_404 && c->meta.http_status == 404)) {
		status_error(c, what, err, errlen);
		goto out;
	}
	if (!c->index_seen) {
		sk_err(err, errlen, "%s: answer without a valid X-Consul-Index header", what);
		goto out;
	}
	if (c->meta.http_status == 200 && consul_listing_finish(l, out, why, sizeof(why)) < 0) {
		sk_err(err, errlen, "%s: bad answer: %s", what, why);
		goto out;
	}
	ret = 0;
out:
	consul_listing_free(l);
	*meta = c->meta;
	release_big_body(c);
	return ret;
}

int consul_kv_list(struct consul *c, const char *prefix, uint64_t index, long wait_ms, enum consul_consistency mode,
		   const deadline_t *dl, struct consul_kv_list *out, struct consul_meta *meta, char *err, size_t errlen)
{
	sk_buf path;
	char what[300];
	int ret = -1;

	out->n = 0;
	out->items = NULL;
	memset(meta, 0, sizeof(*meta));
	snprintf(what, sizeof(what), "GET /v1/kv/%.200s?recurse", prefix);
	if (check_key(prefix, true, err, errlen) < 0)
		return -1;
	sk_buf_init(&path, 16384);
	if (!sk_buf_add(&path, "/v1/kv/", 7) || !add_escaped(&path, prefix, true) ||
	    !sk_buf_add(&path, "?recurse", 8) || !add_blocking(&path, index, wait_ms, mode))
		sk_err(err, errlen, "%s: key too long", what);
	else
		ret = blocking_list(c, path.data, what, true, CONSUL_LISTING_KV, dl, out, meta, err, errlen);
	sk_buf_free(&path);
	return ret;
}

/* PUT/DELETE on a key, expecting true/false. */
static int kv_write(struct consul *c, const char *method, const char *key, const char *query_name,
		    const char *query_value, const void *value, size_t len, const deadline_t *dl, bool *done, char *err,
		    size_t errlen)
{
	sk_buf path;
	char what[300];
	int ret = -1;

	snprintf(what, sizeof(what), "%s /v1/kv/%.200s", method, key);
	if (check_key(key, false, err, errlen) < 0)
		return -1;
	sk_buf_init(&path, 16384);
	if (!sk_buf_add(&path, "/v1/kv/", 7) || !add_escaped(&path, key, true) ||
	    (query_name &&
	     (!sk_buf_addf(&path, "?%s", query_name) ||
	      (query_value && (!sk_buf_add(&path, "=", 1) || !add_escaped(&path, query_value, false)))))) {
		sk_err(err, errlen, "%s: key too long", what);
		goto out;
	}
	if (request(c, method, path.data, what, value ? "application/octet-stream" : NULL, value, len, dl, err,
		    errlen) < 0)
		goto out;
	if (c->meta.http_status != 200) {
		status_error(c, what, err, errlen);
		goto out;
	}
	ret = bool_answer(c, what, done, err, errlen);
out:
	sk_buf_free(&path);
	return ret;
}

int consul_kv_put(struct consul *c, const char *key, const void *value, size_t len, const char *acquire_session,
		  const deadline_t *dl, bool *done, char *err, size_t errlen)
{
	*done = false;
	if (acquire_session && !*acquire_session)
		return sk_err(err, errlen, "PUT /v1/kv/%.200s: empty session ID", key);
	return kv_write(c, "PUT", key, acquire_session ? "acquire" : NULL, acquire_session, value ? value : "", len, dl,
			done, err, errlen);
}

int consul_kv_release(struct consul *c, const char *key, const char *session, const deadline_t *dl, bool *done,
		      char *err, size_t errlen)
{
	*done = false;
	if (!session || !*session)
		return sk_err(err, errlen, "PUT /v1/kv/%.200s: empty session ID", key);
	return kv_write(c, "PUT", key, "release", session, "", 0, dl, done, err, errlen);
}

int consul_kv_delete(struct consul *c, const char *key, bool recurse, const deadline_t *dl, char *err, size_t errlen)
{
	bool done;

	return kv_write(c, "DELETE", key, recurse ? "recurse" : NULL, NULL, NULL, 0, dl, &done, err, errlen);
}

static bool session_id_ok(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n >= CONSUL_SESSION_ID_MAX)
		return false;
	for (; *id; id++)
		if (!isxdigit((unsigned char)*id) && *id != '-')
			return false;
	return true;
}

int consul_session_create(struct consul *c, const char *name, long ttl_s, const char *behavior, const char *lock_delay,
			  bool node_health, const deadline_t *dl, char *id, size_t idlen, char *err, size_t errlen)
{
	const char *what = "PUT /v1/session/create";
	cJSON *doc = NULL, *jid;
	sk_buf body;
	int ret = -1;

	if (idlen)
		id[0] = '\0';
	if (behavior && strcmp(behavior, "delete") != 0 && strcmp(behavior, "release") != 0)
		return sk_err(err, errlen, "%s: behavior must be delete or release", what);
	if (lock_delay && (!*lock_delay || strspn(lock_delay, "0123456789.nsumh") != strlen(lock_delay)))
		return sk_err(err, errlen, "%s: bad lock delay '%.40s'", what, lock_delay);
	if (ttl_s < 0 || ttl_s > 86400)
		return sk_err(err, errlen, "%s: TTL %lds out of range", what, ttl_s);
	sk_buf_init(&body, 4096);
	if (!sk_buf_add(&body, "{\"Name\":", 8) || !sk_buf_add_json_str(&body, name ? name : "") ||
	    (ttl_s > 0 && !sk_buf_addf(&body, ",\"TTL\":\"%lds\"", ttl_s)) ||
	    (behavior && !sk_buf_addf(&body, ",\"Behavior\":\"%s\"", behavior)) ||
	    (lock_delay && !sk_buf_addf(&body, ",\"LockDelay\":\"%s\"", lock_delay)) ||
	    (!node_health && !sk_buf_addf(&body, ",\"NodeChecks\":[],\"Checks\":[]")) || !sk_buf_add(&body, "}", 1)) {
		sk_err(err, errlen, "%s: session name too long", what);
		goto out;
	}
	if (request(c, "PUT", "/v1/session/create", what, "application/json", body.data, body.len, dl, err, errlen) < 0)
		goto out;
	if (c->meta.http_status != 200) {
		status_error(c, what, err, errlen);
		goto out;
	}
	doc = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	jid = doc ? cJSON_GetObjectItemCaseSensitive(doc, "ID") : NULL;
	if (!cJSON_IsString(jid) || !session_id_ok(jid->valuestring)) {
		sk_err(err, errlen, "%s: answer without a session ID", what);
		goto out;
	}
	if (!sk_strlcpy(id, jid->valuestring, idlen)) {
		sk_err(err, errlen, "%s: session ID too long", what);
		goto out;
	}
	ret = 0;
out:
	cJSON_Delete(doc);
	sk_buf_free(&body);
	return ret;
}

/* PUT <path><id>[?note=...]: the endpoints that name a session, a service or a check. */
static int put_named(struct consul *c, const char *path, const char *id, const char *note, const deadline_t *dl,
		     char *what, size_t wlen, char *err, size_t errlen)
{
	sk_buf url;
	int ret = -1;

	snprintf(what, wlen, "PUT %s%.120s", path, id);
	if (!*id || has_ctl(id) || (note && has_ctl(note)))
		return sk_err(err, errlen, "%s: not an ID", what);
	sk_buf_init(&url, 1024);
	if (!sk_buf_add(&url, path, strlen(path)) || !add_escaped(&url, id, false) ||
	    (note && (!sk_buf_add(&url, "?note=", 6) || !add_escaped(&url, note, false)))) {
		sk_err(err, errlen, "%s: too long", what);
		goto out;
	}
	ret = request(c, "PUT", url.data, what, NULL, NULL, 0, dl, err, errlen);
out:
	sk_buf_free(&url);
	return ret;
}

/* PUT /v1/session/<verb>/<id>. */
static int session_op(struct consul *c, const char *verb, const char *id, const deadline_t *dl, char *what, size_t wlen,
		      char *err, size_t errlen)
{
	char path[64];

	snprintf(path, sizeof(path), "/v1/session/%s/", verb);
	if (!session_id_ok(id)) {
		snprintf(what, wlen, "PUT %s%.80s", path, id);
		return sk_err(err, errlen, "%s: not a session ID", what);
	}
	return put_named(c, path, id, NULL, dl, what, wlen, err, errlen);
}

int consul_session_renew(struct consul *c, const char *id, const deadline_t *dl, bool *gone, char *err, size_t errlen)
{
	char what[160];

	*gone = false;
	if (session_op(c, "renew", id, dl, what, sizeof(what), err, errlen) < 0)
		return -1;
	if (c->meta.http_status == 404) {
		*gone = true;
		return 0;
	}
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	return 0;
}

int consul_session_destroy(struct consul *c, const char *id, const deadline_t *dl, char *err, size_t errlen)
{
	char what[160];
	bool ok;

	if (session_op(c, "destroy", id, dl, what, sizeof(what), err, errlen) < 0)
		return -1;
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	if (bool_answer(c, what, &ok, err, errlen) < 0)
		return -1;
	if (!ok)
		return sk_err(err, errlen, "%s: refused", what);
	return 0;
}

int consul_agent_service_register(struct consul *c, const char *json, size_t len, const deadline_t *dl, char *err,
				  size_t errlen)
{
	const char *what = "PUT /v1/agent/service/register";

	if (request(c, "PUT", "/v1/agent/service/register", what, "application/json", json, len, dl, err, errlen) < 0)
		return -1;
	return c->meta.http_status == 200 ? 0 : status_error(c, what, err, errlen);
}

int consul_agent_service_deregister(struct consul *c, const char *id, const deadline_t *dl, char *err, size_t errlen)
{
	char what[200];

	if (put_named(c, "/v1/agent/service/deregister/", id, NULL, dl, what, sizeof(what), err, errlen) < 0)
		return -1;
	return c->meta.http_status == 200 ? 0 : status_error(c, what, err, errlen);
}

int consul_agent_check_pass(struct consul *c, const char *check_id, const char *note, const deadline_t *dl,
			    bool *unknown, char *err, size_t errlen)
{
	char what[200], line[256];

	*unknown = false;
	if (put_named(c, "/v1/agent/check/pass/", check_id, note, dl, what, sizeof(what), err, errlen) < 0)
		return -1;
	if (c->meta.http_status == 200)
		return 0;
	body_line(c, line, sizeof(line));
	if (c->meta.http_status == 404 ||
	    (c->meta.http_status == 500 &&
	     (strstr(line, "does not have associated TTL") || strstr(line, "Unknown check")))) {
		*unknown = true;
		return 0;
	}
	return status_error(c, what, err, errlen);
}

int consul_leader(struct consul *c, const deadline_t *dl, char *out, size_t len, char *err, size_t errlen)
{
	const char *what = "GET /v1/status/leader";
	cJSON *doc;
	int ret = -1;

	if (len)
		out[0] = '\0';
	if (request(c, "GET", "/v1/status/leader", what, NULL, NULL, 0, dl, err, errlen) < 0)
		return -1;
	if (c->meta.http_status != 200)
		return status_error(c, what, err, errlen);
	doc = cJSON_ParseWithLength(c->body.data ? c->body.data : "", c->body.len);
	if (!cJSON_IsString(doc))
		sk_err(err, errlen, "%s: answer is not a JSON string", what);
	else if (has_ctl(doc->valuestring) || !sk_strlcpy(out, doc->valuestring, len))
		sk_err(err, errlen, "%s: unexpected leader address", what);
	else
		ret = 0;
	cJSON_Delete(doc);
	return ret;
}

/* -- the KV listing parser -------------------------------------------------------------------- */

uint64_t consul_next_index(uint64_t prev, uint64_t got)
{
	if (got < prev)
		return 0;
	if (got == 0)
		return 1;
	return got;
}

void consul_kv_list_free(struct consul_kv_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->items[i].key);
		if (l->items[i].value)
			sk_wipe(l->items[i].value, l->items[i].len); /* user passwords */
		free(l->items[i].value);
		free(l->items[i].session);
	}
	free(l->items);
	l->items = NULL;
	l->n = 0;
}

/* Where each number literal is in the text, in document order. */
struct numtok {
	size_t off, len;
};

struct scan {
	struct numtok *nums;
	size_t n, cap;
};

/* Length of a valid UTF-8 sequence at p (at most `left` bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t left)
{
	size_t n;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A strict JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool json_number_ok(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9')
		while (i < n && isdigit((unsigned char)s[i]))
			i++;
	else
		return false;
	if (i < n && s[i] == '.') {
		for (d = ++i; i < n && isdigit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = i; i < n && isdigit((unsigned char)s[i]); i++)
			;
		if (i == d)
			return false;
	}
	return i == n;
}

/* The lexical checks cJSON does not make, in one pass: only JSON white space between tokens,
 * valid UTF-8 and no control characters or \u0000 in strings, strict number syntax, nesting
 * at most KV_MAX_DEPTH (counting the listing's own array: `body` is one entry of it). Records every
 * number literal so exact 64-bit values can be read; `base` is where the entry starts in the answer,
 * for the byte offsets of messages. */
static int scan_json(const char *body, size_t len, size_t base, struct scan *s, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)body;
	int depth = 1;

	for (size_t i = 0; i < len;) {
		unsigned char ch = p[i];

		if (ch == '"') {
			for (i++;;) {
				size_t n;

				if (i >= len)
					return sk_err(err, errlen, "unterminated string");
				if (p[i] == '"') {
					i++;
					break;
				}
				if (p[i] < 0x20)
					return sk_err(err, errlen, "control character in a string at byte %zu",
						      base + i);
				if (p[i] == '\\') {
					if (i + 1 >= len)
						return sk_err(err, errlen, "unterminated string");
					if (p[i + 1] == 'u' && i + 5 < len && memcmp(p + i + 2, "0000", 4) == 0)
						return sk_err(err, errlen,
							      "NUL character (\\u0000) in a string at byte %zu",
							      base + i);
					i += 2;
					continue;
				}
				n = utf8_len(p + i, len - i);
				if (n == 0)
					return sk_err(err, errlen, "invalid UTF-8 at byte %zu", base + i);
				i += n;
			}
		} else if (ch == '-' || (ch >= '0' && ch <= '9')) {
			size_t start = i;

			while (i < len && (isdigit(p[i]) || p[i] == '-' || p[i] == '+' || p[i] == '.' || p[i] == 'e' ||
					   p[i] == 'E'))
				i++;
			if (!json_number_ok(body + start, i - start))
				return sk_err(err, errlen, "bad number at byte %zu", base + start);
			if (s->n == s->cap) {
				s->cap = s->cap ? s->cap * 2 : 64;
				s->nums = xrealloc(s->nums, s->cap * sizeof(*s->nums));
			}
			s->nums[s->n].off = start;
			s->nums[s->n].len = i - start;
			s->n++;
		} else if (ch == '[' || ch == '{') {
			if (++depth > KV_MAX_DEPTH)
				return sk_err(err, errlen, "nested deeper than %d levels", KV_MAX_DEPTH);
			i++;
		} else if (ch == ']' || ch == '}') {
			depth--;
			i++;
		} else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == ',' || ch == ':' ||
			   (ch >= 'a' && ch <= 'z')) {
			i++; /* structure, white space and the letters of true/false/null: cJSON checks them */
		} else {
			return sk_err(err, errlen, "unexpected byte 0x%02x at byte %zu", ch, base + i);
		}
	}
	return 0;
}

/* Give every number node its literal's ordinal (kept in valueint), in document order. */
static void number_ordinals(cJSON *node, size_t *next)
{
	for (; node; node = node->next) {
		if (cJSON_IsNumber(node))
			node->valueint = (int)(*next)++;
		if (node->child)
			number_ordinals(node->child, next);
	}
}

static int field_u64(const char *body, const struct scan *s, const cJSON *node, const char *name, size_t item,
		     uint64_t *out, char *err, size_t errlen)
{
	const struct numtok *t;
	char text[32];

	if (!cJSON_IsNumber(node))
		return sk_err(err, errlen, "item %zu: %s is not a number", item, name);
	t = &s->nums[node->valueint];
	if (t->len >= sizeof(text))
		return sk_err(err, errlen, "item %zu: %s is out of range", item, name);
	memcpy(text, body + t->off, t->len);
	text[t->len] = '\0';
	if (strspn(text, "0123456789") != t->len)
		return sk_err(err, errlen, "item %zu: %s %s is not a whole number", item, name, text);
	if (!parse_u64(text, out))
		return sk_err(err, errlen, "item %zu: %s %s is out of range", item, name, text);
	if ((double)*out != node->valuedouble)
		return sk_err(err, errlen, "item %zu: %s: number literal mismatch", item, name);
	return 0;
}

static int b64_value(int ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	if (ch == '+')
		return 62;
	if (ch == '/')
		return 63;
	return -1;
}

/* Decode canonical standard base64 (with padding) into a new buffer with a trailing NUL. */
static int b64_decode(const char *in, char **out, size_t *outlen)
{
	size_t n = strlen(in), pad = 0, o = 0;
	unsigned char *buf;

	if (n % 4)
		return -1;
	if (n && in[n - 1] == '=')
		pad++;
	if (n > 1 && in[n - 2] == '=')
		pad++;
	buf = xmalloc(n / 4 * 3 + 1);
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;

		for (int k = 0; k < 4; k++) {
			v[k] = last && k >= 4 - (int)pad ? 0 : b64_value((unsigned char)in[i + k]);
			if (v[k] < 0)
				goto bad;
		}
		buf[o++] = (unsigned char)(v[0] << 2 | v[1] >> 4);
		if (!last || pad < 2)
			buf[o++] = (unsigned char)((v[1] & 15) << 4 | v[2] >> 2);
		if (!last || pad < 1)
			buf[o++] = (unsigned char)((v[2] & 3) << 6 | v[3]);
		/* Canonical: the bits padding throws away are zero. */
		if (last && ((pad == 2 && (v[1] & 15)) || (pad == 1 && (v[2] & 3))))
			goto bad;
	}
	buf[o] = '\0';
	*out = (char *)buf;
	*outlen = o;
	return 0;
bad:
	free(buf);
	return -1;
}

static int parse_item(const char *body, const struct scan *s, const cJSON *obj, size_t i, struct consul_kv *kv,
		      char *err, size_t errlen)
{
	enum { F_KEY, F_VALUE, F_SESSION, F_CREATE, F_MODIFY, F_FLAGS, F_N };
	static const char *const names[F_N] = { "Key", "Value", "Session", "CreateIndex", "ModifyIndex", "Flags" };
	const cJSON *f[F_N] = { 0 };

	if (!cJSON_IsObject(obj))
		return sk_err(err, errlen, "item %zu is not an object", i);
	for (const cJSON *m = obj->child; m; m = m->next) {
		for (int k = 0; k < F_N; k++) {
			if (strcmp(m->string, names[k]) != 0)
				continue;
			if (f[k])
				return sk_err(err, errlen, "item %zu: %s appears twice", i, names[k]);
			f[k] = m;
		}
	}
	if (!f[F_KEY])
		return sk_err(err, errlen, "item %zu: no Key", i);
	if (!cJSON_IsString(f[F_KEY]) || !*f[F_KEY]->valuestring)
		return sk_err(err, errlen, "item %zu: Key is not a non-empty string", i);
	if (!f[F_CREATE] || !f[F_MODIFY])
		return sk_err(err, errlen, "item %zu (%.100s): no %s", i, f[F_KEY]->valuestring,
			      f[F_CREATE] ? "ModifyIndex" : "CreateIndex");
	if (field_u64(body, s, f[F_CREATE], "CreateIndex", i, &kv->create_index, err, errlen) < 0 ||
	    field_u64(body, s, f[F_MODIFY], "ModifyIndex", i, &kv->modify_index, err, errlen) < 0 ||
	    (f[F_FLAGS] && field_u64(body, s, f[F_FLAGS], "Flags", i, &kv->flags, err, errlen) < 0))
		return -1;
	if (f[F_SESSION] && !cJSON_IsNull(f[F_SESSION]) && !cJSON_IsString(f[F_SESSION]))
		return sk_err(err, errlen, "item %zu (%.100s): Session is not a string", i, f[F_KEY]->valuestring);
	if (f[F_VALUE] && !cJSON_IsNull(f[F_VALUE]) && !cJSON_IsString(f[F_VALUE]))
		return sk_err(err, errlen, "item %zu (%.100s): Value is not a string or null", i,
			      f[F_KEY]->valuestring);
	if (f[F_VALUE] && cJSON_IsString(f[F_VALUE])) {
		if (b64_decode(f[F_VALUE]->valuestring, &kv->value, &kv->len) < 0)
			return sk_err(err, errlen, "item %zu (%.100s): Value is not valid base64", i,
				      f[F_KEY]->valuestring);
	} else {
		kv->value = xstrdup("");
		kv->len = 0;
	}
	kv->key = xstrdup(f[F_KEY]->valuestring);
	if (f[F_SESSION] && cJSON_IsString(f[F_SESSION]) && *f[F_SESSION]->valuestring)
		kv->session = xstrdup(f[F_SESSION]->valuestring);
	return 0;
}

int consul_config_from_opts(struct consul_config *c, const struct opts *o, char *err, size_t errlen)
{
	static const struct {
		const char *opt;
		size_t off;
	} map[] = {
		{ "consul-addr", offsetof(struct consul_config, addr) },
		{ "consul-token-file", offsetof(struct consul_config, token_file) },
		{ "consul-cacert", offsetof(struct consul_config, cacert) },
		{ "consul-client-cert", offsetof(struct consul_config, client_cert) },
		{ "consul-client-key", offsetof(struct consul_config, client_key) },
		{ "consul-tls-server-name", offsetof(struct consul_config, tls_server_name) },
		{ "consul-datacenter", offsetof(struct consul_config, datacenter) },
	};

	if (consul_config_from_env(c, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < SK_ARRAY_LEN(map); i++)
		if (opt_str(o, map[i].opt))
			consul_config_set((char **)((char *)c + map[i].off), opt_str(o, map[i].opt));
	return 0;
}

/* ---- health-checked services ---------------------------------------------------------------- */

static const char *json_str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* One entry of /v1/health/service/<name> as a KV pair: key "<address>:<port>" (Service.Address,
 * else Node.Address; "[v6]:port"), value a JSON object {"node", "id", "weight" (Weights.Passing),
 * "meta" (Service.Meta)}. */
static int health_item(const cJSON *it, size_t n, struct consul_kv *out, char *err, size_t errlen)
{
	const cJSON *node = cJSON_GetObjectItemCaseSensitive(it, "Node");
	const cJSON *svc = cJSON_GetObjectItemCaseSensitive(it, "Service");
	const cJSON *port = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Port") : NULL;
	const cJSON *weights = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Weights") : NULL;
	const cJSON *passing = weights ? cJSON_GetObjectItemCaseSensitive(weights, "Passing") : NULL;
	const cJSON *meta = svc ? cJSON_GetObjectItemCaseSensitive(svc, "Meta") : NULL;
	const char *addr = svc ? json_str(svc, "Address") : NULL;
	cJSON *value;
	char *text, key[400];

	if (!cJSON_IsObject(it) || !cJSON_IsObject(node) || !cJSON_IsObject(svc))
		return sk_err(err, errlen, "entry %zu: not an object with Node and Service", n);
	if (!addr || !*addr)
		addr = json_str(node, "Address");
	if (!addr || !*addr || strlen(addr) > 255)
		return sk_err(err, errlen, "entry %zu: no Service.Address or Node.Address", n);
	if (!cJSON_IsNumber(port) || !(port->valuedouble >= 1 && port->valuedouble <= 65535) ||
	    port->valuedouble != (double)(long)port->valuedouble)
		return sk_err(err, errlen, "entry %zu: Service.Port is not a port number", n);
	snprintf(key, sizeof(key), strchr(addr, ':') ? "[%s]:%ld" : "%s:%ld", addr, (long)port->valuedouble);
	value = cJSON_CreateObject();
	if (!value)
		sk_oom();
	if (json_str(node, "Node"))
		cJSON_AddStringToObject(value, "node", json_str(node, "Node"));
	if (json_str(svc, "ID"))
		cJSON_AddStringToObject(value, "id", json_str(svc, "ID"));
	if (cJSON_IsNumber(passing))
		cJSON_AddNumberToObject(value, "weight", passing->valuedouble);
	if (cJSON_IsObject(meta))
		cJSON_AddItemToObject(value, "meta", cJSON_Duplicate(meta, true));
	text = cJSON_PrintUnformatted(value);
	cJSON_Delete(value);
	if (!text)
		sk_oom();
	memset(out, 0, sizeof(*out));
	out->key = xstrdup(key);
	out->len = strlen(text);
	out->value = xstrdup(text);
	cJSON_free(text);
	return 0;
}

/* ---- listings, parsed as they arrive -------------------------------------------------------- */

/* A listing is read one entry at a time: the bytes of the entry in progress are gathered (at most
 * CONSUL_ENTRY_MAX_BYTES), checked, parsed on their own and turned into one compact consul_kv;
 * nothing else of the answer is kept. So what a listing costs is its entries' keys and values
 * plus one entry's parse, never a tree of the whole answer. */

enum { L_BEFORE, L_OPEN, L_ENTRY, L_COMMA, L_DONE, L_FAILED };

struct consul_listing {
	enum consul_listing_kind kind;
	int state;
	size_t max_bytes, seen; /* the answer's size cap; bytes fed so far */
	bool too_large;
	/* the entry being gathered */
	char *entry;
	size_t elen, ecap, estart, values;
	int depth;
	bool in_str, esc;
	struct consul_kv_list out;
	size_t cap;
	char err[240];
};

struct consul_listing *consul_listing_new(enum consul_listing_kind kind, size_t max_bytes)
{
	struct consul_listing *p = xcalloc(1, sizeof(*p));

	p->kind = kind;
	p->max_bytes = max_bytes ? max_bytes : CONSUL_MAX_RESPONSE_DEFAULT;
	return p;
}

void consul_listing_free(struct consul_listing *p)
{
	if (!p)
		return;
	consul_kv_list_free(&p->out);
	if (p->entry)
		sk_wipe(p->entry, p->elen);
	free(p->entry);
	free(p);
}

static int listing_fail(struct consul_listing *p, const char *fmt, ...) SK_PRINTF(2, 3);

static int listing_fail(struct consul_listing *p, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->err, sizeof(p->err), fmt, ap);
	va_end(ap);
	p->state = L_FAILED;
	consul_kv_list_free(&p->out);
	p->cap = 0;
	return -1;
}

static bool json_ws(unsigned char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* The entry gathered is complete: check it, parse it and keep it as one consul_kv. */
static int listing_entry(struct consul_listing *p)
{
	struct scan s = { 0 };
	const char *end = NULL;
	cJSON *doc = NULL;
	size_t len = p->elen, ord = 0, i = p->out.n;
	struct consul_kv *kv;
	char why[200];
	int rc = -1;

	while (len && json_ws((unsigned char)p->entry[len - 1]))
		len--;
	if (scan_json(p->entry, len, p->estart, &s, why, sizeof(why)) < 0) {
		listing_fail(p, "not valid JSON: %s", why);
		goto out;
	}
	doc = cJSON_ParseWithLengthOpts(p->entry, len, &end, false);
	if (!doc || end != p->entry + len) {
		size_t at = end && end >= p->entry && end <= p->entry + len ? (size_t)(end - p->entry) : 0;

		listing_fail(p, "not valid JSON (near byte %zu)", p->estart + at);
		goto out;
	}
	number_ordinals(doc, &ord);
	if (ord != s.n) {
		listing_fail(p, "number literals do not match the document");
		goto out;
	}
	if (p->out.n == p->cap) {
		p->cap = p->cap ? p->cap * 2 : 16;
		if (p->cap > CONSUL_KV_MAX_ITEMS)
			p->cap = CONSUL_KV_MAX_ITEMS;
		p->out.items = xrealloc(p->out.items, p->cap * sizeof(*p->out.items));
	}
	kv = &p->out.items[i];
	memset(kv, 0, sizeof(*kv));
	if ((p->kind == CONSUL_LISTING_KV ? parse_item(p->entry, &s, doc, i, kv, why, sizeof(why))
					  : health_item(doc, i, kv, why, sizeof(why))) < 0) {
		free(kv->key);
		if (kv->value)
			sk_wipe(kv->value, kv->len); /* user passwords */
		free(kv->value);
		free(kv->session);
		listing_fail(p, "%s", why);
		goto out;
	}
	p->out.n++;
	rc = 0;
out:
	sk_json_delete_wiped(doc); /* base64 of the values: user passwords */
	sk_wipe(p->entry, p->elen); /* the entry's text, the same */
	free(s.nums);
	return rc;
}

/* The first byte of an entry (not white space, not ']'). */
static int listing_start_entry(struct consul_listing *p, size_t at)
{
	if (p->out.n >= CONSUL_KV_MAX_ITEMS)
		return listing_fail(p, "more than %d entries", CONSUL_KV_MAX_ITEMS);
	p->elen = 0;
	p->estart = at;
	p->values = 0;
	p->depth = 0;
	p->in_str = p->esc = false;
	p->state = L_ENTRY;
	return 0;
}

/* One byte of an entry; `at` is its offset in the answer. */
static int listing_entry_byte(struct consul_listing *p, unsigned char ch, size_t at)
{
	if (p->in_str) {
		if (p->esc)
			p->esc = false;
		else if (ch == '\\')
			p->esc = true;
		else if (ch == '"')
			p->in_str = false;
	} else if (ch == '"') {
		p->in_str = true;
	} else if (ch == '[' || ch == '{') {
		p->values++;
		if (++p->depth + 1 > KV_MAX_DEPTH)
			return listing_fail(p, "not valid JSON: nested deeper than %d levels at byte %zu", KV_MAX_DEPTH,
					    at);
	} else if (ch == ']' || ch == '}') {
		if (p->depth == 0) {
			if (ch == '}')
				return listing_fail(p, "not valid JSON: unexpected '}' at byte %zu", at);
			p->state = L_DONE;
			return listing_entry(p);
		}
		p->depth--;
	} else if (ch == ',') {
		if (p->depth == 0) {
			p->state = L_COMMA;
			return listing_entry(p);
		}
		p->values++;
	}
	if (p->values > CONSUL_ENTRY_MAX_VALUES)
		return listing_fail(p, "entry %zu (at byte %zu) holds more than %d JSON values", p->out.n, p->estart,
				    CONSUL_ENTRY_MAX_VALUES);
	if (p->elen == p->ecap) {
		if (p->elen >= CONSUL_ENTRY_MAX_BYTES)
			return listing_fail(p, "entry %zu (at byte %zu) is larger than %d bytes", p->out.n, p->estart,
					    CONSUL_ENTRY_MAX_BYTES);
		char *bigger;

		p->ecap = p->ecap ? p->ecap * 2 : 1024;
		if (p->ecap > CONSUL_ENTRY_MAX_BYTES)
			p->ecap = CONSUL_ENTRY_MAX_BYTES;
		bigger = xmalloc(p->ecap); /* not realloc: the old text is wiped, not left behind */
		if (p->elen)
			memcpy(bigger, p->entry, p->elen);
		if (p->entry)
			sk_wipe(p->entry, p->elen);
		free(p->entry);
		p->entry = bigger;
	}
	p->entry[p->elen++] = (char)ch;
	return 0;
}

int consul_listing_feed(struct consul_listing *p, const char *data, size_t len)
{
	const unsigned char *d = (const unsigned char *)data;

	if (p->state == L_FAILED)
		return -1;
	if (len > p->max_bytes - p->seen) {
		p->too_large = true;
		return listing_fail(p, "answer larger than %zu bytes (the response size cap)", p->max_bytes);
	}
	for (size_t i = 0; i < len; i++) {
		size_t at = p->seen + i;
		unsigned char ch = d[i];

		switch (p->state) {
		case L_BEFORE:
			if (json_ws(ch))
				break;
			if (ch != '[')
				return strchr("{\"-0123456789tfn", ch) && ch
					       ? listing_fail(p, "not a JSON array")
					       : listing_fail(p, "not valid JSON: unexpected byte 0x%02x at byte %zu",
							      ch, at);
			p->state = L_OPEN;
			break;
		case L_OPEN:
		case L_COMMA:
			if (json_ws(ch))
				break;
			if (ch == ']') {
				if (p->state == L_COMMA)
					return listing_fail(p, "not valid JSON: ',' before ']' at byte %zu", at);
				p->state = L_DONE;
				break;
			}
			if (listing_start_entry(p, at) < 0 || listing_entry_byte(p, ch, at) < 0)
				return -1;
			break;
		case L_ENTRY:
			if (listing_entry_byte(p, ch, at) < 0)
				return -1;
			break;
		case L_DONE:
			if (!json_ws(ch))
				return listing_fail(p,
						    "not valid JSON: unexpected byte 0x%02x at byte %zu (trailing data "
						    "after the JSON value)",
						    ch, at);
			break;
		default: return -1;
		}
	}
	p->seen += len;
	return 0;
}

int consul_listing_finish(struct consul_listing *p, struct consul_kv_list *out, char *err, size_t errlen)
{
	out->n = 0;
	out->items = NULL;
	switch (p->state) {
	case L_DONE:
		*out = p->out;
		if (out->n == 0) {
			free(out->items);
			out->items = NULL;
		} else if (p->cap > out->n) {
			out->items = xrealloc(out->items, out->n * sizeof(*out->items));
		}
		memset(&p->out, 0, sizeof(p->out));
		p->cap = 0;
		return 0;
	case L_BEFORE: listing_fail(p, "empty answer"); break;
	case L_ENTRY: listing_fail(p, p->in_str ? "unterminated string" : "not valid JSON: truncated"); break;
	case L_OPEN:
	case L_COMMA: listing_fail(p, "not valid JSON: truncated"); break;
	default: break;
	}
	return sk_err(err, errlen, "%s", p->err);
}

/* Why the listing failed so far (NULL: it has not), and whether it was the size cap. */
static const char *listing_error(const struct consul_listing *p, bool *too_large)
{
	*too_large = p->too_large;
	return p->state == L_FAILED ? p->err : NULL;
}

static int parse_whole(enum consul_listing_kind kind, const char *body, size_t len, struct consul_kv_list *out,
		       char *err, size_t errlen)
{
	struct consul_listing *p = consul_listing_new(kind, len ? len : 1);
	int rc = -1;

	out->n = 0;
	out->items = NULL;
	if (consul_listing_feed(p, body, len) == 0)
		rc = consul_listing_finish(p, out, err, errlen);
	else
		sk_err(err, errlen, "%s", p->err);
	consul_listing_free(p);
	return rc;
}

int consul_parse_kv_json(const char *body, size_t len, struct consul_kv_list *out, char *err, size_t errlen)
{
	return parse_whole(CONSUL_LISTING_KV, body, len, out, err, errlen);
}

int consul_parse_health_json(const char *body, size_t len, struct consul_kv_list *out, char *err, size_t errlen)
{
	return parse_whole(CONSUL_LISTING_HEALTH, body, len, out, err, errlen);
}

int consul_health_service(struct consul *c, const struct consul_service_query *q, uint64_t index, long wait_ms,
			  enum consul_consistency mode, const deadline_t *dl, struct consul_kv_list *out,
			  struct consul_meta *meta, char *err, size_t errlen)
{
	sk_buf path;
	char what[300];
	int ret = -1;
	bool ok;

	out->n = 0;
	out->items = NULL;
	memset(meta, 0, sizeof(*meta));
	snprintf(what, sizeof(what), "GET /v1/health/service/%.200s", q->name);
	if (!q->name || !*q->name || strchr(q->name, '/'))
		return sk_err(err, errlen, "%s: bad service name", what);
	sk_buf_init(&path, 16384);
	ok = sk_buf_add(&path, "/v1/health/service/", 19) && add_escaped(&path, q->name, false) &&
	     sk_buf_add(&path, "?passing", 8);
	for (size_t i = 0; ok && i < q->ntags; i++)
		ok = sk_buf_add(&path, "&tag=", 5) && add_escaped(&path, q->tags[i], false);
	for (size_t i = 0; ok && i < q->nnode_meta; i++)
		ok = sk_buf_add(&path, "&node-meta=", 11) && add_escaped(&path, q->node_meta[i], false);
	ok = ok && (!q->near || (sk_buf_add(&path, "&near=", 6) && add_escaped(&path, q->near, false))) &&
	     (!q->filter || (sk_buf_add(&path, "&filter=", 8) && add_escaped(&path, q->filter, false))) &&
	     (!q->datacenter || (sk_buf_add(&path, "&dc=", 4) && add_escaped(&path, q->datacenter, false))) &&
	     add_blocking(&path, index, wait_ms, mode);
	if (!ok)
		sk_err(err, errlen, "%s: query too long", what);
	else
		ret = blocking_list(c, path.data, what, false, CONSUL_LISTING_HEALTH, dl, out, meta, err, errlen);
	sk_buf_free(&path);
	return ret;
}
