/* dbauth.h: which authentication methods a MySQL login may use, so that no server sees the password. */
#ifndef SK_DBAUTH_H
#define SK_DBAUTH_H

#include <mysql.h>
#include <stdbool.h>
#include <stddef.h>

/* The methods that never reveal the password to the server, whoever answers the port: the
 * server sees a hash of it mixed with its own nonce, or a signature. The comma-separated list
 * given to MARIADB_OPT_RESTRICTED_AUTH; "parsec" only where the library knows it (3.4.1). */
#if MARIADB_PACKAGE_VERSION_ID >= 30401
#define DBAUTH_SAFE "mysql_native_password,client_ed25519,parsec"
#define DBAUTH_SAFE_TEXT "mysql_native_password, client_ed25519, parsec"
#else
#define DBAUTH_SAFE "mysql_native_password,client_ed25519"
#define DBAUTH_SAFE_TEXT "mysql_native_password, client_ed25519"
#endif

/* The state of one connection's incoming byte stream while it logs in: which authentication
 * method the server asked for last (the greeting's, then any AuthSwitchRequest's). */
struct dbauth_tap {
	unsigned char hdr[4];
	size_t hdr_have; /* bytes of the packet header seen */
	size_t left; /* payload bytes still to come */
	bool first; /* the next payload byte is the packet's first */
	int kind; /* 0 other, 1 greeting (protocol 10), 2 AuthSwitchRequest (0xFE) */
	size_t pos; /* position in the payload */
	size_t nul; /* greeting: where the fields after the server version start (0: not yet) */
	size_t name_at; /* greeting: where the method's name starts (0: not known yet) */
	char cur[64]; /* the method name being read */
	size_t cur_len;
	bool packets; /* at least one packet seen (the greeting comes first) */
	char asked[64]; /* the last method the server asked for, "" when none yet */
};

/* Feed `n` bytes the client read from the server (before TLS: clear; after: decrypted) to the
 * tap. Pure: no I/O. Never fails; a name longer than 63 bytes is cut. */
void dbauth_feed(struct dbauth_tap *tap, const unsigned char *buf, size_t n);

/* Watch every connection's reads (once, before any thread starts: from db_library_init). */
void dbauth_init(void);

/* Restrict handle `m` to DBAUTH_SAFE unless the connection is TLS with a verified certificate
 * (then every method the library has: clear text goes only to the server the certificate
 * names). Also watch, on this thread, what the server asks `m` for. Call before connecting. */
void dbauth_prepare(MYSQL *m, bool verified_tls);

/* Stop watching (after the connect, whatever its outcome). */
void dbauth_done(void);

/* After a failed connect on `m`: when the library refused the server's authentication method,
 * write the one-line refusal (naming that method) into msg and return true. */
bool dbauth_refusal(MYSQL *m, char *msg, size_t len);

#endif
