/* consul_http.c: the Consul client's transport: one libcurl handle per client (keep-alive), the
 * address, TLS, token and proxy set up once, and one request at a time under a deadline, with
 * the response size cap, cancellation and the answer's X-Consul-* headers. Every failure is
 * given a reason (enum consul_reason). The endpoints are in consul.c. */
#include "consul_http.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "secret.h"

/* -- the client ------------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The scheme of "[scheme://]rest": *scheme ("http" or "https") and *rest set. Returns 1 for
 * "unix://" (*rest is then the socket's path), 0 for the others, -1 with err set. */
static int addr_scheme(const char *addr, bool ssl, const char **scheme, const char **rest, char *err, size_t errlen)
{
	const char *sep = strstr(addr, "://");
	size_t slen;

	*scheme = ssl ? "https" : "http";
	*rest = addr;
	if (!sep)
		return 0;
	slen = (size_t)(sep - addr);
	*rest = sep + 3;
	if (slen == 5 && strncmp(addr, "https", 5) == 0) {
		*scheme = "https";
		return 0;
	}
	if (slen == 4 && strncmp(addr, "unix", 4) == 0) {
		if ((*rest)[0] != '/')
			return sk_err(err, errlen, "consul address '%.80s': unix:// needs an absolute path", addr);
		return 1;
	}
	/* "http" keeps https when TLS was asked for: Consul never reverts to http. */
	if (slen == 4 && strncmp(addr, "http", 4) == 0)
		return 0;
	return sk_err(err, errlen, "consul address '%.80s': unknown scheme (http, https or unix)", addr);
}

#define ADDR_HOST_MAX 256

/* An address's authority, "host[:port]" or "[v6][:port]": `hlen` is the length of its host part
 * (brackets kept) and `port` the text of its port (inside host[]), or NULL when it has none. */
struct authority {
	char host[ADDR_HOST_MAX];
	size_t hlen;
	const char *port;
};

/* Where the requests of a client go, from its address (parse_addr). `ssl` and `server_name` (the
 * TLS server name, or NULL) are given; the rest is filled. */
struct endpoint {
	bool ssl;
	const char *server_name;
	sk_buf base; /* scheme://authority[/prefix] */
	char *unix_path; /* the socket of a unix:// address, or NULL */
	char *connect_to; /* the CURLOPT_CONNECT_TO entry when a TLS server name is set, or NULL */
	char req_host[ADDR_HOST_MAX]; /* the host and port requests go to, for the proxy's choice */
	long req_port;
};

/* The authority of `rest` (up to its first '/') into *a. Returns 0 or -1 with err set. */
static int addr_authority(const char *addr, const char *rest, struct authority *a, char *err, size_t errlen)
{
	char *host = a->host;
	const char *slash = strchr(rest, '/');
	size_t alen = slash ? (size_t)(slash - rest) : strlen(rest);

	if (alen == 0 || alen >= ADDR_HOST_MAX)
		return sk_err(err, errlen, "consul address '%.80s': no host", addr);
	memcpy(host, rest, alen);
	host[alen] = '\0';
	if (host[0] == '[') {
		char *close = strchr(host, ']');

		if (!close || (close[1] && close[1] != ':'))
			return sk_err(err, errlen, "consul address '%.80s': bad IPv6 address", addr);
		a->port = close[1] ? close + 2 : NULL;
		a->hlen = (size_t)(close - host) + 1;
	} else {
		char *colon = strchr(host, ':');

		/* libcurl decodes "%31%32%37.1" into "127.1": a host is decided on as it is connected to. */
		if (strchr(host, '%'))
			return sk_err(err, errlen, "consul address '%.80s': unexpected character %% in the host", addr);

		a->port = colon ? colon + 1 : NULL;
		a->hlen = colon ? (size_t)(colon - host) : alen;
	}
	return 0;
}

/* The base URL "scheme://authority[/prefix]" (the prefix without trailing slashes) into e->base.
 * With TLS and a server name, that name and the port stand for the authority and e->connect_to
 * sends the connection to the real host (CURLOPT_CONNECT_TO). Returns 0 or -1 with err set. */
static int addr_base(const char *scheme, const struct authority *a, const char *prefix, struct endpoint *e, char *err,
		     size_t errlen)
{
	const char *server_name = e->ssl ? e->server_name : NULL, *port = a->port, *authority = a->host;
	sk_buf *base = &e->base;
	size_t hlen = a->hlen;

	if (server_name) {
		const char *pt = port ? port : strcmp(scheme, "https") == 0 ? "443" : "80";
		size_t n = strlen(server_name) + hlen + 2 * strlen(pt) + 4;

		if (!sk_buf_addf(base, "%s://%s:%s", scheme, server_name, pt))
			return sk_err(err, errlen, "consul address too long");
		e->connect_to = xmalloc(n);
		snprintf(e->connect_to, n, "%s:%s:%.*s:%s", server_name, pt, (int)hlen, authority, pt);
	} else if (!sk_buf_addf(base, "%s://%s", scheme, authority)) {
		return sk_err(err, errlen, "consul address too long");
	}
	if (prefix) {
		size_t plen = strlen(prefix);

		while (plen > 0 && prefix[plen - 1] == '/')
			plen--;
		if (plen && !sk_buf_add(base, prefix, plen))
			return sk_err(err, errlen, "consul address too long");
	}
	return 0;
}

/* Split an address the way Consul's api.NewClient does: "[scheme://]authority[/prefix]" or
 * "unix:///path". Fills e's base URL (with the TLS server name in place of the authority's host
 * when one is set and TLS is on), socket path, CURLOPT_CONNECT_TO entry and the host and port
 * requests go to (for the proxy's choice). */
static int parse_addr(const char *addr, struct endpoint *e, char *err, size_t errlen)
{
	const char *scheme, *rest;
	struct authority a = { .hlen = 0, .port = NULL };
	int kind;

	if (sk_has_ctl(addr) || strpbrk(addr, " @?#\\"))
		return sk_err(err, errlen, "consul address '%.80s': unexpected character (spaces, @, ?, # or \\)",
			      addr);
	kind = addr_scheme(addr, e->ssl, &scheme, &rest, err, errlen);
	if (kind < 0)
		return -1;
	if (kind == 1) {
		e->unix_path = xstrdup(rest);
		if (!sk_buf_addf(&e->base, "%s://%s", scheme, e->server_name && e->ssl ? e->server_name : "localhost"))
			return sk_err(err, errlen, "consul address too long");
		return 0;
	}
	if (addr_authority(addr, rest, &a, err, errlen) < 0)
		return -1;
	if (a.port && !sk_parse_long(a.port, 1, 65535, &e->req_port))
		return sk_err(err, errlen, "consul address '%.80s': bad port", addr);
	memcpy(e->req_host, a.host, a.hlen);
	e->req_host[a.hlen] = '\0';
	return addr_base(scheme, &a, strchr(rest, '/'), e, err, errlen);
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

void consul_http_release_body(struct consul *c)
{
	if (c->body.cap > 65536) {
		sk_wipe(c->body.data, c->body.len); /* KV values: user passwords */
		sk_buf_free(&c->body); /* keeps the size cap */
	}
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
		c->index_seen = sk_parse_u64(value, &c->meta.index);
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

/* The token header "X-Consul-Token: ..." from the token file (it wins) or the token. */
static int take_token(struct consul *c, const struct consul_config *cfg, char *err, size_t errlen)
{
	char *token = NULL;
	int ret = 0;

	if (cfg->token_file) {
		char why[300];

		token = secret_read_file(cfg->token_file, why, sizeof(why));
		if (!token)
			return sk_err(err, errlen, "consul token file %s", why);
	} else if (cfg->token) {
		token = xstrdup(cfg->token);
		log_add_secret(token);
	}
	if (token && *token) {
		size_t n = strlen(token) + sizeof("X-Consul-Token: ");

		if (sk_has_ctl(token)) {
			ret = sk_err(err, errlen, "the consul token contains a control character");
		} else {
			c->token_header = xmalloc(n);
			snprintf(c->token_header, n, "X-Consul-Token: %s", token);
		}
	}
	if (token) {
		sk_wipe(token, strlen(token));
		free(token);
	}
	return ret;
}

/* Who the client says it is and where it asks: the token, basic auth, the datacenter. */
static int take_credentials(struct consul *c, const struct consul_config *cfg, char *err, size_t errlen)
{
	if (take_token(c, cfg, err, errlen) < 0)
		return -1;
	if (cfg->http_auth) {
		if (sk_has_ctl(cfg->http_auth))
			return sk_err(err, errlen, "CONSUL_HTTP_AUTH contains a control character");
		c->userpwd = xstrdup(cfg->http_auth);
	}
	if (cfg->datacenter) {
		if (sk_has_ctl(cfg->datacenter))
			return sk_err(err, errlen, "the consul datacenter name contains a control character");
		c->dc = xstrdup(cfg->datacenter);
	}
	return 0;
}

/* The options every request shares: callbacks, protocols, compression, keep-alive. */
static void set_common(struct consul *c)
{
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
}

/* The proxy is decided here, never by libcurl's own reading of the environment (which proxies
 * loopback too, and would hand the token to the proxy). "" means direct; an empty CURLOPT_NOPROXY
 * makes libcurl ignore NO_PROXY: consul_proxy_from_env already applied it. */
static int set_proxy(struct consul *c, const struct endpoint *e, char *err, size_t errlen)
{
	char *proxy = NULL;

	if (!c->unix_path &&
	    consul_proxy_from_env(e->ssl ? "https" : "http", e->req_host, e->req_port, &proxy, err, errlen) < 0)
		return -1;
	curl_easy_setopt(c->easy, CURLOPT_PROXY, proxy ? proxy : "");
	curl_easy_setopt(c->easy, CURLOPT_NOPROXY, "");
	if (proxy) { /* may hold user:password */
		char shown[256];

		consul_proxy_redact(proxy, shown, sizeof(shown));
		c->proxy_shown = xstrdup(shown);
		sk_wipe(proxy, strlen(proxy));
		free(proxy);
	}
	return 0;
}

/* Verification, the client certificate and the server name's connection entry. */
static int set_tls(struct consul *c, const struct consul_config *cfg, const char *connect_to, char *err, size_t errlen)
{
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
		if (!c->connect_to)
			return sk_err(err, errlen, "out of memory");
		curl_easy_setopt(c->easy, CURLOPT_CONNECT_TO, c->connect_to);
	}
	return 0;
}

/* libcurl's handles, set up for this client. */
static int start_handle(struct consul *c, const struct consul_config *cfg, const struct endpoint *e, char *err,
			size_t errlen)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK || !(c->multi = curl_multi_init()) || !(c->easy = curl_easy_init()))
		return sk_err(err, errlen, "cannot start libcurl");
	set_common(c);
	if (set_proxy(c, e, err, errlen) < 0)
		return -1;
	if (c->userpwd)
		curl_easy_setopt(c->easy, CURLOPT_USERPWD, c->userpwd);
	return e->ssl ? set_tls(c, cfg, e->connect_to, err, errlen) : 0;
}

struct consul *consul_new(const struct consul_config *cfg, char *err, size_t errlen)
{
	struct consul *c = xcalloc(1, sizeof(*c));
	struct endpoint e = {
		.ssl = cfg->ssl || (cfg->addr && strncmp(cfg->addr, "https://", 8) == 0),
		.server_name = cfg->tls_server_name,
	};
	int rc = -1;

	sk_buf_init(&e.base, 4096);
	c->cancel_fd = -1;
	sk_buf_init(&c->body, cfg->max_response ? cfg->max_response : CONSUL_MAX_RESPONSE_DEFAULT);
	if (!cfg->client_cert != !cfg->client_key) {
		sk_err(err, errlen, "a consul client certificate needs its key and the other way round");
		goto out;
	}
	rc = parse_addr(cfg->addr && *cfg->addr ? cfg->addr : CONSUL_DEFAULT_ADDR, &e, err, errlen);
	c->unix_path = e.unix_path;
	if (rc < 0)
		goto out;
	rc = -1;
	c->base = xstrdup(e.base.data);
	if (take_credentials(c, cfg, err, errlen) < 0 || start_handle(c, cfg, &e, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	free(e.connect_to);
	sk_buf_free(&e.base);
	if (rc < 0) {
		consul_free(c);
		return NULL;
	}
	return c;
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
	free(c->proxy_shown);
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

const char *consul_reason_str(enum consul_reason r)
{
	switch (r) {
	case CONSUL_OK: return "ok";
	case CONSUL_CLIENT_ERROR: return "client_error";
	case CONSUL_UNREACHABLE: return "unreachable";
	case CONSUL_TIMEOUT: return "timeout";
	case CONSUL_CANCELLED: return "cancelled";
	case CONSUL_FORBIDDEN: return "forbidden";
	case CONSUL_NOT_FOUND: return "not_found";
	case CONSUL_HTTP_ERROR: return "http_error";
	case CONSUL_TOO_LARGE: return "too_large";
	case CONSUL_BAD_ANSWER: return "bad_answer";
	}
	return "unknown";
}

/* -- requests --------------------------------------------------------------------------------- */

/* Percent-encode `s` for a URL path (keep_slash) or a query value. */
bool consul_http_escape(sk_buf *b, const char *s, bool keep_slash)
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

static int vfail(struct consul *c, enum consul_reason r, char *err, size_t errlen, const char *fmt, va_list ap)
	SK_PRINTF(5, 0);

static int vfail(struct consul *c, enum consul_reason r, char *err, size_t errlen, const char *fmt, va_list ap)
{
	c->meta.reason = r;
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	return -1;
}

int consul_http_fail(struct consul *c, enum consul_reason r, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfail(c, r, err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int consul_http_refuse(struct consul *c, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	memset(&c->meta, 0, sizeof(c->meta));
	va_start(ap, fmt);
	vfail(c, CONSUL_CLIENT_ERROR, err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Forget the last answer: its body (the KV values: user passwords), headers and errors. */
static void reset_answer(struct consul *c)
{
	sk_wipe(c->body.data, c->body.len);
	c->body.len = 0;
	if (c->body.data)
		c->body.data[0] = '\0';
	c->body_overflow = false;
	c->error_bytes = 0;
	c->index_seen = false;
	memset(&c->meta, 0, sizeof(c->meta));
	c->curl_err[0] = '\0';
}

/* The request's headers: the token, no "Expect: 100-continue", the content type. False when out
 * of memory (what was added is in *hdrs all the same, for the caller to wipe and free). */
static bool add_headers(const char *token_header, const char *content_type, struct curl_slist **hdrs)
{
	const char *lines[3];
	char ctype[64];
	size_t n = 0;

	if (token_header)
		lines[n++] = token_header;
	lines[n++] = "Expect:";
	if (content_type) {
		snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
		lines[n++] = ctype;
	}
	for (size_t i = 0; i < n; i++) {
		struct curl_slist *h = curl_slist_append(*hdrs, lines[i]);

		if (!h)
			return false;
		*hdrs = h;
	}
	return true;
}

/* Point the handle at one request: its URL, headers, method and body, and the time left. */
static void set_request(struct consul *c, const char *url, struct curl_slist *hdrs, long left,
			const struct consul_call *call)
{
	const char *method = call->method;

	curl_easy_setopt(c->easy, CURLOPT_URL, url);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c->easy, CURLOPT_TIMEOUT_MS, left);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, left);
	curl_easy_setopt(c->easy, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, NULL);
	if (strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0) {
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, call->body ? call->body : "");
		curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->len);
		curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c->easy, CURLOPT_CUSTOMREQUEST, method);
	}
}

/* One transfer as perform() ended it, and the time it was given. */
struct transfer {
	CURLcode rc;
	bool cancelled;
	long left;
};

/* How the transfer ended: 0 when an answer arrived (any status), else -1 with err and the reason
 * set; http_status is 0 when no answer came. */
static int transfer_outcome(struct consul *c, const struct transfer *t, const char *what, char *err, size_t errlen)
{
	const char *why;
	bool too_large = false;
	CURLcode rc = t->rc;

	curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &c->meta.http_status);
	if (t->cancelled) {
		c->meta.http_status = 0;
		return consul_http_fail(c, CONSUL_CANCELLED, err, errlen, "%s: cancelled", what);
	}
	if (rc == CURLE_WRITE_ERROR && c->body_overflow)
		return consul_http_fail(c, CONSUL_TOO_LARGE, err, errlen,
					"%s: answer larger than %zu bytes (the response size cap)", what, c->body.max);
	if (rc == CURLE_WRITE_ERROR && c->listing && (why = consul_listing_error(c->listing, &too_large)))
		return consul_http_fail(c, too_large ? CONSUL_TOO_LARGE : CONSUL_BAD_ANSWER, err, errlen,
					too_large ? "%s: %s" : "%s: bad answer: %s", what, why);
	if (rc == CURLE_OK)
		return 0;
	c->meta.http_status = 0;
	if (rc == CURLE_OPERATION_TIMEDOUT)
		return consul_http_fail(c, CONSUL_TIMEOUT, err, errlen, "%s: timeout after %ld ms (deadline)", what,
					t->left);
	if (c->proxy_shown)
		return consul_http_fail(
			c, CONSUL_UNREACHABLE, err, errlen,
			"%s: %s (through the proxy %s of HTTP_PROXY or HTTPS_PROXY; NO_PROXY lists hosts "
			"reached directly)",
			what, c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc), c->proxy_shown);
	return consul_http_fail(c, CONSUL_UNREACHABLE, err, errlen, "%s: %s", what,
				c->curl_err[0] ? c->curl_err : curl_easy_strerror(rc));
}

static int request_with(struct consul *c, const char *token_header, const struct consul_call *call, char *err,
			size_t errlen)
{
	const char *path = call->path, *what = call->what;
	struct curl_slist *hdrs = NULL;
	struct transfer t;
	sk_buf url;
	int ret = -1;

	reset_answer(c);
	sk_buf_init(&url, 16384);
	if (!sk_buf_addf(&url, "%s%s", c->base, path) ||
	    (c->dc &&
	     (!sk_buf_add(&url, strchr(path, '?') ? "&dc=" : "?dc=", 4) || !consul_http_escape(&url, c->dc, false)))) {
		consul_http_fail(c, CONSUL_CLIENT_ERROR, err, errlen, "%s: URL too long", what);
		goto out;
	}
	t.left = deadline_timeout_ms(call->dl); /* never 0 below: libcurl reads a 0 timeout as "none" */
	if (t.left < 0) {
		consul_http_fail(c, CONSUL_TIMEOUT, err, errlen, "%s: no time left before the request (deadline)",
				 what);
		goto out;
	}
	if (!add_headers(token_header, call->content_type, &hdrs)) {
		consul_http_fail(c, CONSUL_CLIENT_ERROR, err, errlen, "%s: out of memory", what);
		goto out;
	}
	set_request(c, url.data, hdrs, t.left, call);
	t.rc = perform(c, &t.cancelled);
	ret = transfer_outcome(c, &t, what, err, errlen);
out:
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, NULL);
	for (struct curl_slist *h = hdrs; h; h = h->next)
		sk_wipe(h->data, strlen(h->data));
	curl_slist_free_all(hdrs);
	sk_buf_free(&url);
	return ret;
}

int consul_http_request(struct consul *c, const struct consul_call *call, char *err, size_t errlen)
{
	return request_with(c, c->token_header, call, err, errlen);
}

int consul_http_request_as(struct consul *c, const char *token, const struct consul_call *call, char *err,
			   size_t errlen)
{
	const char *what = call->what;
	sk_buf hdr;
	int rc;

	if (!token)
		return request_with(c, NULL, call, err, errlen);
	if (sk_has_ctl(token))
		return consul_http_refuse(c, err, errlen, "%s: the consul token contains a control character", what);
	sk_buf_init(&hdr, 4096);
	if (!sk_buf_addf(&hdr, "X-Consul-Token: %s", token)) {
		sk_buf_free(&hdr);
		return consul_http_refuse(c, err, errlen, "%s: the consul token is too long", what);
	}
	rc = request_with(c, hdr.data, call, err, errlen);
	sk_wipe(hdr.data, hdr.len);
	sk_buf_free(&hdr);
	return rc;
}

bool consul_http_acl_not_found(const struct consul *c)
{
	static const char text[] = "ACL not found";

	return c->meta.http_status == 403 && c->body.data && c->body.len >= sizeof(text) - 1 &&
	       memmem(c->body.data, c->body.len < 256 ? c->body.len : 256, text, sizeof(text) - 1) != NULL;
}

/* The first line of the body, printable, for error messages. */
void consul_http_body_line(const struct consul *c, char *out, size_t len)
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
