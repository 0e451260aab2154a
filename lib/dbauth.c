/* dbauth.c: no MySQL login reveals the password to whatever answers the port.
 *
 * What each of libmariadb's client plugins sends (plugins/auth/ of Connector/C 3.3, read for
 * this): mysql_native_password and client_ed25519 send SHA1(password) mixed with the server's
 * nonce, or an Ed25519 signature of the nonce: the server learns no password (a squatter can
 * still try to guess a weak one offline). mysql_clear_password sends it as it is; dialog sends
 * it as the answer to the server's "password" question. sha256_password and
 * caching_sha2_password (after its hashed fast path, when the server answers "full
 * authentication") send it in clear over TLS, verified or not, and over a unix socket, and
 * otherwise RSA-encrypted with a public key THE SERVER SENDS when asked, which a squatter makes
 * itself. So without TLS whose certificate was verified, only the first two (and parsec, a
 * signature too, from 3.4.1) are allowed.
 *
 * MARIADB_OPT_RESTRICTED_AUTH is checked in run_plugin_auth() at its `retry:` label, before a
 * plugin runs, for the greeting's method and again after every AuthSwitchRequest (the `goto
 * retry`): a refused method never sends a byte. The check is strstr(list, name), so a name that
 * is part of the list ("password", "") passes it; no plugin has such a name, and the library's
 * fallback for an unknown one answers each packet with an empty one, never the password. Its
 * error message (CR_PLUGIN_NOT_ALLOWED) names the greeting's method even after a switch in 3.3
 * (fixed in 3.4.0), so the method is read from the server's packets as they arrive
 * (ma_pvio_register_callback: the bytes each read returned, decrypted under TLS). */
#include "dbauth.h"

#include <errmsg.h>
#include <string.h>

#include "util.h"

/* Connector/C's hook on every read and write of every connection (mode 0: read); exported by
 * libmariadb 3 (ma_pvio.c) but not declared in its public headers. */
extern int ma_pvio_register_callback(my_bool register_callback,
				     void (*callback_function)(int mode, MYSQL *mysql, const unsigned char *buffer,
							       size_t length));

#define AUTH_SWITCH 0xfe
#define GREETING_V10 0x0a

/* The name byte `c` of the method the packet asks for: kept until its NUL (or the packet's end). */
static void name_byte(struct dbauth_tap *tap, unsigned char c)
{
	if (c == 0) {
		if (tap->cur_len)
			sk_strlcpy(tap->asked, tap->cur, sizeof(tap->asked));
		tap->kind = 0;
		return;
	}
	if (tap->cur_len + 1 < sizeof(tap->cur)) {
		tap->cur[tap->cur_len++] = (char)c;
		tap->cur[tap->cur_len] = '\0';
	}
}

/* A greeting's byte at payload position `pos`: protocol 10 is version NUL, then 31 bytes of
 * fixed fields (the nonce's length at the 21st), the nonce's rest, then the method's name. */
static void greeting_byte(struct dbauth_tap *tap, unsigned char c)
{
	size_t pos = tap->pos;

	if (tap->nul == 0) {
		if (c == 0)
			tap->nul = pos + 1; /* where the fixed fields start */
		return;
	}
	if (pos == tap->nul + 20) {
		size_t rest = c > 8 ? (size_t)c - 8 : 0;

		tap->name_at = tap->nul + 31 + (rest > 13 ? rest : 13);
	}
	if (tap->name_at && pos >= tap->name_at)
		name_byte(tap, c);
}

/* One byte of a packet's payload. */
static void payload_byte(struct dbauth_tap *tap, unsigned char c)
{
	if (tap->first) {
		tap->first = false;
		tap->kind = c == AUTH_SWITCH ? 2 : c == GREETING_V10 && !tap->packets ? 1 : 0;
		tap->packets = true;
		tap->cur_len = 0;
		tap->cur[0] = '\0';
		tap->nul = 0;
		tap->name_at = 0;
	} else if (tap->kind == 2) {
		name_byte(tap, c);
	} else if (tap->kind == 1) {
		greeting_byte(tap, c);
	}
	tap->pos++;
	if (--tap->left == 0) {
		if (tap->kind == 2 && tap->pos == 1) /* the old "use the short scramble" request */
			sk_strlcpy(tap->asked, "mysql_old_password", sizeof(tap->asked));
		else if (tap->kind && tap->cur_len)
			sk_strlcpy(tap->asked, tap->cur, sizeof(tap->asked));
		tap->hdr_have = 0;
	}
}

void dbauth_feed(struct dbauth_tap *tap, const unsigned char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (tap->hdr_have < 4) {
			tap->hdr[tap->hdr_have++] = buf[i];
			if (tap->hdr_have < 4)
				continue;
			tap->left = tap->hdr[0] | (size_t)tap->hdr[1] << 8 | (size_t)tap->hdr[2] << 16;
			tap->first = true;
			tap->pos = 0;
			if (tap->left == 0)
				tap->hdr_have = 0;
			continue;
		}
		payload_byte(tap, buf[i]);
	}
}

/* The connection this thread is logging in, and its tap (one login at a time per thread: the
 * non-blocking calls run their reads on the caller's thread). */
static _Thread_local MYSQL *watched;
static _Thread_local struct dbauth_tap tap;

static void on_io(int mode, MYSQL *m, const unsigned char *buf, size_t len)
{
	if (mode != 0 || m != watched || !buf || len == 0 || len > (size_t)1 << 30)
		return; /* a write, another connection, or a failed read (-1 as size_t) */
	dbauth_feed(&tap, buf, len);
}

void dbauth_init(void)
{
	(void)ma_pvio_register_callback(1, on_io);
}

void dbauth_prepare(MYSQL *m, bool verified_tls)
{
	static const char safe[] = DBAUTH_SAFE;

	memset(&tap, 0, sizeof(tap));
	watched = m;
	if (verified_tls)
		return;
	mysql_optionsv(m, MARIADB_OPT_RESTRICTED_AUTH, safe);
	/* Answer first as mysql_native_password whatever the greeting names: a MySQL 8 server whose
	 * greeting names caching_sha2_password then asks an account of that method to switch back
	 * (one more round trip), where the greeting's method would be refused before a word. */
	mysql_optionsv(m, MYSQL_DEFAULT_AUTH, "mysql_native_password");
}

void dbauth_done(void)
{
	watched = NULL;
}

bool dbauth_refusal(MYSQL *m, char *msg, size_t len)
{
	const char *asked = tap.asked;

	if (mysql_errno(m) != CR_PLUGIN_NOT_ALLOWED)
		return false;
	sk_fmt(msg, len,
	       "server asked for authentication method '%s': refused, it would reveal the password "
	       "(allowed without verified TLS: %s)",
	       *asked ? asked : "?", DBAUTH_SAFE_TEXT);
	return true;
}
