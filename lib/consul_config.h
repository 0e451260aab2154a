/* consul_config.h: where the Consul client's settings come from (consul_config.c): the CONSUL_*
 * environment as Consul's own tools read it, the shared consul-* options, and the proxy an address
 * is reached through. */
#ifndef SK_CONSUL_CONFIG_H
#define SK_CONSUL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

#define CONSUL_DEFAULT_ADDR "127.0.0.1:8500"
#define CONSUL_MAX_RESPONSE_DEFAULT ((size_t)16 * 1024 * 1024) /* bytes of one answer, decompressed */

/* How the client reaches Consul and proves who it is. Every string is heap-owned by the
 * config (NULL when unset); set fields with consul_config_set, release with consul_config_free. */
struct consul_config {
	char *addr; /* host:port, http://host:port[/prefix], https://..., or unix:///path */
	char *token; /* ACL token: a secret, sent only as the X-Consul-Token header */
	char *token_file; /* a file holding the token; wins over `token` when set */
	char *http_auth; /* "user[:password]" for HTTP basic auth (a secret), or NULL */
	char *cacert, *capath; /* CA bundle file / directory for verifying the server */
	char *client_cert, *client_key; /* both or neither */
	char *tls_server_name; /* name sent in SNI and checked against the certificate */
	bool ssl; /* https even when addr carries no scheme */
	bool ssl_verify; /* verify the server certificate (default true) */
	char *datacenter; /* ?dc= on every request, or NULL for the agent's own */
	char *login_method; /* consul-login-method: log in with this auth method (consul_login.h) */
	char *login_bearer_file; /* consul-login-bearer-token-file (NULL: the Kubernetes default) */
	char *login_meta; /* consul-login-meta: "key=value,..." */
	size_t max_response; /* a larger answer is an error, never an allocation */
};

/* Fill `c` with the defaults and the environment, as Consul's own tools read it: CONSUL_HTTP_ADDR,
 * CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_AUTH, CONSUL_HTTP_SSL, CONSUL_HTTP_SSL_VERIFY,
 * CONSUL_CACERT, CONSUL_CAPATH, CONSUL_CLIENT_CERT, CONSUL_CLIENT_KEY, CONSUL_TLS_SERVER_NAME.
 * Secrets from the environment are registered with the log redactor. The token file is only
 * named here and read by consul_new, so a caller may still replace it. Returns 0, or -1 with err
 * naming the variable (a boolean that is not one, a client certificate without its key);
 * `c` is then still safe to free. */
int consul_config_from_env(struct consul_config *c, char *err, size_t errlen) SK_MUST_CHECK;

/* Replace one string field of a config (for flags and config files that override the
 * environment): the old value is wiped and freed; NULL or "" unsets the field. */
void consul_config_set(char **field, const char *value);

/* Wipe the secrets and free every field; the struct may be reused after consul_config_from_env. */
void consul_config_free(struct consul_config *c);

struct opts;

/* consul_config_from_env, then the options every Consul-using binary shares (consul-addr,
 * consul-token-file, consul-cacert, consul-client-cert, consul-client-key,
 * consul-tls-server-name, consul-datacenter) override it where set. Returns 0 or -1. */
int consul_config_from_opts(struct consul_config *c, const struct opts *o, char *err, size_t errlen) SK_MUST_CHECK;

/* Whether a request to `host` (a URL's host: a name, an IPv4 address in any spelling inet_aton
 * takes, an IPv6 address with or without brackets and zone) reaches this machine, as libcurl will
 * connect to it: 127.0.0.0/8, 0.0.0.0/8 (connects to this host on Linux), ::1, ::, their
 * IPv4-mapped forms, "localhost" and "*.localhost" (libcurl answers these itself), in any case and
 * with or without one trailing dot. Pure. */
bool consul_host_is_local(const char *host);

/* Where a request goes: the address's scheme ("http", "https"), host and port (0: the scheme's
 * default). */
struct consul_proxy_dest {
	const char *scheme, *host;
	long port;
};

/* The proxy settings, as Go's httpproxy.Config holds them (NULL: unset). */
struct consul_proxy_env {
	const char *http_proxy, *https_proxy, *no_proxy;
};

/* The proxy a request to Consul (d) goes through, chosen as Consul's own Go client chooses it (Go's
 * http.ProxyFromEnvironment, golang.org/x/net/http/httpproxy) from the settings e: `http_proxy` (HTTP_PROXY, else
 * http_proxy) for an http address, `https_proxy` (HTTPS_PROXY, else https_proxy) for an https
 * one; never for a host on this machine (consul_host_is_local: decided on the address connected
 * to, not on its spelling, so a token for a local Consul never reaches a proxy); never when
 * `no_proxy` (NO_PROXY, else no_proxy: a comma-separated list) has "*", an IP address (with an
 * optional port) equal to the host's, a CIDR block holding it, or a name that is the host or one
 * of its parent domains (".example.com" and "*.example.com": subdomains only; "name:port": that
 * port only).
 * On 0, *proxy is the proxy URL for libcurl (a new string the caller wipes and frees: it may hold
 * a password; "http://" prefixed when it has no scheme, an '@' in its user or password
 * percent-encoded) or NULL for a direct connection. -1 with err set, quoting none of the value,
 * when the chosen proxy's user or password holds a '/', '?', '#', space or control character.
 * Pure. */
int consul_proxy_for(const struct consul_proxy_dest *d, const struct consul_proxy_env *e, char **proxy, char *err,
		     size_t errlen) SK_MUST_CHECK;

/* consul_proxy_for with the proxies from the environment as Go reads them (HTTP_PROXY, else
 * http_proxy; HTTPS_PROXY, else https_proxy; NO_PROXY, else no_proxy). The credentials of every
 * proxy variable (ALL_PROXY and all_proxy included) are registered with the log redactor first.
 * For any HTTP client of the project that should pick its proxy the way Consul's client does. */
int consul_proxy_from_env(const char *scheme, const char *host, long port, char **proxy, char *err,
			  size_t errlen) SK_MUST_CHECK;

/* A proxy URL fit to show: everything from after "://" (or the start) to its last '@' becomes
 * "***" (a user and password before "@proxy:3128" are shown as "***"). Returns false, with out "***", when it does not fit. Pure. */
bool consul_proxy_redact(const char *url, char *out, size_t len);

#endif
