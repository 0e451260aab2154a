/* consul_config.c: where the Consul client's settings come from: the CONSUL_* environment as
 * Consul's own tools read it, the shared consul-* options, and the proxy for an address as
 * Consul's Go client chooses it (HTTP_PROXY, HTTPS_PROXY, NO_PROXY). No I/O besides getenv. */
#include "consul_config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "opt.h"

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
	char **fields[] = { &c->addr,        &c->token,        &c->token_file,
			    &c->http_auth,   &c->cacert,       &c->capath,
			    &c->client_cert, &c->client_key,   &c->tls_server_name,
			    &c->datacenter,  &c->login_method, &c->login_bearer_file,
			    &c->login_meta };

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
		{ "consul-login-method", offsetof(struct consul_config, login_method) },
		{ "consul-login-bearer-token-file", offsetof(struct consul_config, login_bearer_file) },
		{ "consul-login-meta", offsetof(struct consul_config, login_meta) },
	};

	if (consul_config_from_env(c, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < SK_ARRAY_LEN(map); i++)
		if (opt_str(o, map[i].opt))
			consul_config_set((char **)((char *)c + map[i].off), opt_str(o, map[i].opt));
	return 0;
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

/* Whether NO_PROXY (a comma-separated list, NULL: empty) names the host: "*" or an entry that
 * matches it (no_proxy_entry_matches), each entry trimmed and in lower case. */
static bool no_proxy_lists(const char *no_proxy, const char *host, const char *port, const struct ipaddr *ip)
{
	char *list = xstrdup(no_proxy ? no_proxy : ""), *save = NULL;
	bool direct = false;

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
		direct = strcmp(p, "*") == 0 || no_proxy_entry_matches(p, host, port, ip);
	}
	free(list);
	return direct;
}

/* The host as libcurl will connect to it, into h[256] (lower case, no brackets, no IPv6 zone,
 * no trailing dot; an IPv4 address in any spelling inet_aton takes - "127.1", "0x7f000001",
 * "2130706433", "0177.0.0.1", which libcurl's URL parser and the resolver take too - rewritten
 * dotted). *is_ip and *ip say whether it is an address. False when it does not fit. */
static bool connect_host(const char *host, char *h, struct ipaddr *ip, bool *is_ip)
{
	size_t n = strlen(host);
	struct in_addr a4;
	char *zone;

	if (n >= 2 && host[0] == '[' && host[n - 1] == ']')
		host++, n -= 2;
	if (n == 0 || n >= 256)
		return false;
	for (size_t i = 0; i < n; i++)
		h[i] = (char)tolower((unsigned char)host[i]);
	h[n] = '\0';
	if (strchr(h, ':') && (zone = strchr(h, '%')))
		*zone = '\0'; /* fe80::1%25eth0: the zone picks an interface, not another host */
	else if (n > 1 && h[n - 1] == '.')
		h[n - 1] = '\0'; /* "localhost.", "127.0.0.1.": libcurl resolves the name without it */
	*is_ip = ip_parse(h, ip);
	if (!*is_ip && !strchr(h, ':') && inet_aton(h, &a4) == 1) {
		inet_ntop(AF_INET, &a4, h, 256);
		*is_ip = ip_parse(h, ip);
	}
	return true;
}

bool consul_host_is_local(const char *host)
{
	static const unsigned char any6[16] = { 0 };
	char h[256];
	struct ipaddr ip;
	bool is_ip;

	if (!host || !connect_host(host, h, &ip, &is_ip))
		return false;
	if (is_ip)
		return ip_loopback(&ip) || (ip.fam == 4 ? ip.b[0] == 0 : memcmp(ip.b, any6, 16) == 0);
	/* libcurl answers "localhost" and "*.localhost" with loopback itself, without resolving. */
	return strcmp(h, "localhost") == 0 || ends_with(h, ".localhost");
}

/* Where the user and password of a proxy URL are: from after "://" (or the start: libcurl and Go
 * take "user:pw@host:3128") to the LAST '@' (a password may hold '@'). False when it has none. */
static bool proxy_userinfo(const char *url, size_t *start, size_t *end)
{
	const char *a = strstr(url, "://"), *at;

	a = a ? a + 3 : url;
	at = strrchr(a, '@');
	if (!at)
		return false;
	*start = (size_t)(a - url);
	*end = (size_t)(at - url);
	return true;
}

bool consul_proxy_redact(const char *url, char *out, size_t len)
{
	size_t start, end;

	bool fits;

	if (!url || !proxy_userinfo(url, &start, &end))
		fits = sk_strlcpy(out, url ? url : "", len);
	else
		fits = sk_fmt(out, len, "%.*s***%s", (int)start, url, url + end);
	if (!fits)
		sk_strlcpy(out, "***", len); /* never a cut that could end inside the password */
	return fits;
}

/* A proxy's credentials are secrets to the log: the user and password as written and as handed
 * to libcurl (whose messages quote the proxy URL), and the password alone. */
static void proxy_secrets(const char *url)
{
	size_t start, end;
	char *userinfo, *colon;

	if (!proxy_userinfo(url, &start, &end))
		return;
	userinfo = xmalloc(end - start + 1);
	memcpy(userinfo, url + start, end - start);
	userinfo[end - start] = '\0';
	log_add_secret(userinfo);
	if ((colon = strchr(userinfo, ':')))
		log_add_secret(colon + 1);
	sk_wipe(userinfo, strlen(userinfo));
	free(userinfo);
}

/* The proxy URL libcurl is given for `value` (HTTP_PROXY's, say): "http://" prefixed when it has
 * no scheme (as Go reads it), and an '@' in the user or password percent-encoded (Go splits at
 * the last '@'; libcurl refuses a second one). A '/', '?', '#', space or control character in the
 * user or password is refused, with a message that quotes none of the value: libcurl would
 * refuse it too, quoting the whole URL in its error. NULL with err set. */
static char *proxy_url(const char *value, const char *var, char *err, size_t errlen)
{
	bool scheme = strstr(value, "://") != NULL;
	size_t start = 0, end = 0, n, k;
	char *out;

	if (proxy_userinfo(value, &start, &end)) {
		for (size_t i = start; i < end; i++)
			if (strchr("/?# ", value[i]) || (unsigned char)value[i] < 0x20 || value[i] == 0x7f) {
				sk_err(err, errlen,
				       "%s: not a proxy URL (a '/', '?', '#', space or control character in its user "
				       "or password: percent-encode it, e.g. %%2F for '/'); the value is not shown",
				       var);
				return NULL;
			}
	}
	n = strlen(value) + 2 * (end - start) + sizeof("http://");
	out = xmalloc(n);
	k = scheme ? 0 : (size_t)snprintf(out, n, "http://");
	for (size_t i = 0; value[i]; i++) {
		if (value[i] == '@' && i >= start && i < end) {
			memcpy(out + k, "%40", 3);
			k += 3;
		} else {
			out[k++] = value[i];
		}
	}
	out[k] = '\0';
	return out;
}

int consul_proxy_for(const struct consul_proxy_dest *d, const struct consul_proxy_env *e, char **out, char *err,
		     size_t errlen)
{
	const char *host = d->host;
	bool https = strcmp(d->scheme, "https") == 0;
	const char *proxy = https ? e->https_proxy : strcmp(d->scheme, "http") == 0 ? e->http_proxy : NULL;
	long port = d->port;
	char h[256], portstr[24];
	struct ipaddr ip;
	bool is_ip;

	*out = NULL;
	/* Decided on the address libcurl will connect to, never on its spelling: "127.1",
	 * "localhost.", "0.0.0.0", "[::1]" and the like are this machine, and a token for a Consul on
	 * this machine is never handed to a proxy, whatever NO_PROXY says. */
	if (!proxy || !*proxy || !host || consul_host_is_local(host) || !connect_host(host, h, &ip, &is_ip))
		return 0;
	snprintf(portstr, sizeof(portstr), "%ld", port > 0 ? port : https ? 443L : 80L);
	if (no_proxy_lists(e->no_proxy, h, portstr, is_ip ? &ip : NULL))
		return 0;
	*out = proxy_url(proxy, https ? "HTTPS_PROXY (or https_proxy)" : "HTTP_PROXY (or http_proxy)", err, errlen);
	return *out ? 0 : -1;
}

int consul_proxy_from_env(const char *scheme, const char *host, long port, char **proxy, char *err, size_t errlen)
{
	static const char *const vars[] = { "HTTP_PROXY",  "http_proxy", "HTTPS_PROXY",
					    "https_proxy", "ALL_PROXY",  "all_proxy" };
	struct consul_proxy_env e = { .http_proxy = env_any("HTTP_PROXY", "http_proxy"),
				      .https_proxy = env_any("HTTPS_PROXY", "https_proxy"),
				      .no_proxy = env_any("NO_PROXY", "no_proxy") };

	/* Registered before anything is decided, ALL_PROXY's too (libcurl's own variable, never read
	 * here: CURLOPT_PROXY is always set): whatever happens next, no log line shows them. */
	for (size_t i = 0; i < SK_ARRAY_LEN(vars); i++)
		if (env(vars[i]))
			proxy_secrets(env(vars[i]));
	if (consul_proxy_for(&(struct consul_proxy_dest){ scheme, host, port }, &e, proxy, err, errlen) < 0)
		return -1;
	if (*proxy)
		proxy_secrets(*proxy);
	return 0;
}
