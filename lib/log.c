/* log.c: line-oriented logging to stdout/stderr; secrets are redacted before anything is written. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_MAX_SECRETS 256
#define LOG_LINE_MAX 4096
/* The longest line written, newline included; a longer message is cut and marked. */
#define LOG_LINE_BYTES 8192
#define LOG_CUT_MARK " [cut: line longer than 8192 bytes]"

static struct {
	char prog[64];
	enum log_format format;
	enum log_level level;
	FILE *stream;
	char *secrets[LOG_MAX_SECRETS];
	size_t nsecrets;
} lg = { "sidekick", LOG_TEXT, LOG_INFO, NULL, { NULL }, 0 };

static pthread_mutex_t lg_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

void log_setup(const char *prog, enum log_format format, enum log_level level, FILE *stream)
{
	const char *slash = strrchr(prog, '/');

	sk_strlcpy(lg.prog, slash ? slash + 1 : prog, sizeof(lg.prog));
	lg.format = format;
	lg.level = level;
	lg.stream = stream;
}

bool log_level_parse(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < SK_ARRAY_LEN(level_names); i++) {
		if (sk_streq_ci(s, level_names[i])) {
			*out = (enum log_level)i;
			return true;
		}
	}
	return false;
}

bool log_format_parse(const char *s, enum log_format *out)
{
	if (sk_streq_ci(s, "text"))
		*out = LOG_TEXT;
	else if (sk_streq_ci(s, "json"))
		*out = LOG_JSON;
	else
		return false;
	return true;
}

const char *log_level_str(enum log_level level)
{
	return level_names[level];
}

void log_add_secret(const char *secret)
{
	if (!secret || strlen(secret) < 3)
		return;
	pthread_mutex_lock(&lg_lock);
	for (size_t i = 0; i < lg.nsecrets && i < LOG_MAX_SECRETS; i++) {
		if (strcmp(lg.secrets[i], secret) == 0) {
			pthread_mutex_unlock(&lg_lock);
			return;
		}
	}
	if (lg.nsecrets < LOG_MAX_SECRETS) {
		lg.secrets[lg.nsecrets++] = xstrdup(secret);
	} else if (lg.nsecrets == LOG_MAX_SECRETS) {
		lg.nsecrets++; /* past the cap: warn once */
		fprintf(lg.stream ? lg.stream : stderr,
			"%s: warning: more than %d secrets; further ones are not redacted\n", lg.prog, LOG_MAX_SECRETS);
	}
	pthread_mutex_unlock(&lg_lock);
}

void log_forget_secret(const char *secret)
{
	if (!secret || strlen(secret) < 3)
		return;
	pthread_mutex_lock(&lg_lock);
	for (size_t i = 0; i < lg.nsecrets && i < LOG_MAX_SECRETS; i++) {
		if (strcmp(lg.secrets[i], secret) != 0)
			continue;
		sk_wipe(lg.secrets[i], strlen(lg.secrets[i]));
		free(lg.secrets[i]);
		lg.nsecrets = lg.nsecrets > LOG_MAX_SECRETS ? LOG_MAX_SECRETS : lg.nsecrets;
		lg.secrets[i] = lg.secrets[--lg.nsecrets];
		break;
	}
	pthread_mutex_unlock(&lg_lock);
}

void log_clear_secrets(void)
{
	pthread_mutex_lock(&lg_lock);
	for (size_t i = 0; i < lg.nsecrets && i < LOG_MAX_SECRETS; i++) {
		sk_wipe(lg.secrets[i], strlen(lg.secrets[i]));
		free(lg.secrets[i]);
	}
	lg.nsecrets = 0;
	pthread_mutex_unlock(&lg_lock);
}

/* Caller holds lg_lock. Every byte inside any occurrence of any secret (overlapping ones, and
 * secrets inside other secrets, included) is marked first; then each run of marked bytes becomes
 * one "***". One pass over a fixed input: it ends whatever the secrets are (even "***"), and the
 * result never grows, since a run is at least as long as the shortest secret (3 bytes). */
static void redact_locked(char *s)
{
	size_t count = lg.nsecrets < LOG_MAX_SECRETS ? lg.nsecrets : LOG_MAX_SECRETS, n = strlen(s), o = 0;
	unsigned char small[1024], *mark;
	bool any = false;

	if (count == 0 || n == 0)
		return;
	mark = n <= sizeof(small) ? small : xmalloc(n);
	memset(mark, 0, n);
	for (size_t i = 0; i < count; i++) {
		size_t len = strlen(lg.secrets[i]);
		const char *hit;

		for (const char *p = s; (hit = strstr(p, lg.secrets[i])) != NULL; p = hit + 1) {
			memset(mark + (hit - s), 1, len);
			any = true;
		}
	}
	if (any) {
		/* The write position never passes the read position: a run writes its 3 bytes over
		 * bytes of its own, which are not read again. */
		for (size_t i = 0; i < n; i++) {
			if (!mark[i])
				s[o++] = s[i];
			else if (i == 0 || !mark[i - 1]) {
				memcpy(s + o, "***", 3);
				o += 3;
			}
		}
		s[o] = '\0';
	}
	if (mark != small)
		free(mark);
}

void log_redact(char *s)
{
	pthread_mutex_lock(&lg_lock);
	redact_locked(s);
	pthread_mutex_unlock(&lg_lock);
}

/* The bytes `c` takes in a line. Both formats escape every control character (below 0x20, and
 * 0x7f), so data can neither end a line nor move a terminal's cursor: text as \n \r \t \xHH, JSON
 * as \n \r \t \u00HH (and \" \\). */
static size_t escaped_len(unsigned char c, bool json)
{
	if (c == '\n' || c == '\r' || c == '\t')
		return 2;
	if (c < 0x20 || c == 0x7f)
		return json ? 6 : 4;
	if (json && (c == '"' || c == '\\'))
		return 2;
	return 1;
}

static bool add_escaped(sk_buf *b, const char *s, size_t n, bool json)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];

		switch (escaped_len(c, json)) {
		case 1: esc[0] = (char)c; break;
		case 2:
			esc[0] = '\\';
			esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : (char)c;
			break;
		default: snprintf(esc, sizeof(esc), json ? "\\u%04x" : "\\x%02x", c); break;
		}
		if (!sk_buf_add(b, esc, escaped_len(c, json)))
			return false;
	}
	return true;
}

/* Append `msg` escaped, leaving `reserve` bytes of the line for what follows. A message that does
 * not fit is cut at a character boundary and ends with LOG_CUT_MARK: a line is never dropped. */
static bool add_message(sk_buf *b, const char *msg, size_t reserve, bool json)
{
	size_t room = b->max - b->len - reserve, need = 0, n = strlen(msg), keep = 0;

	for (size_t i = 0; i < n; i++)
		need += escaped_len((unsigned char)msg[i], json);
	if (need <= room)
		return add_escaped(b, msg, n, json);
	room = room > sizeof(LOG_CUT_MARK) - 1 ? room - (sizeof(LOG_CUT_MARK) - 1) : 0;
	for (need = 0; keep < n && need + escaped_len((unsigned char)msg[keep], json) <= room; keep++)
		need += escaped_len((unsigned char)msg[keep], json);
	while (keep > 0 && ((unsigned char)msg[keep] & 0xc0) == 0x80)
		keep--; /* not inside a UTF-8 sequence */
	return add_escaped(b, msg, keep, json) && sk_buf_add(b, LOG_CUT_MARK, sizeof(LOG_CUT_MARK) - 1);
}

/* The current time as "YYYY-MM-DDThh:mm:ss.mmmZ" (UTC) into stamp[len]. */
static void time_stamp(char *stamp, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(stamp, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

/* Redact `msg` and write it as one line (text or JSON) to the log's stream, under the log lock. */
static void write_line(enum log_level level, char *msg, const char *stamp)
{
	FILE *out;
	sk_buf b;
	bool ok;

	pthread_mutex_lock(&lg_lock);
	redact_locked(msg);
	out = lg.stream ? lg.stream : stderr;
	sk_buf_init(&b, LOG_LINE_BYTES);
	if (lg.format == LOG_JSON)
		ok = sk_buf_addf(&b, "{\"time\":\"%s\",\"level\":\"%s\",\"prog\":", stamp, level_names[level]) &&
		     sk_buf_add_json_str(&b, lg.prog) && sk_buf_add(&b, ",\"msg\":\"", 8) &&
		     add_message(&b, msg, 3, true) && sk_buf_add(&b, "\"}\n", 3);
	else
		ok = sk_buf_addf(&b, "%s %s %s: ", stamp, level_names[level], lg.prog) &&
		     add_message(&b, msg, 1, false) && sk_buf_add(&b, "\n", 1);
	if (ok)
		fputs(b.data, out);
	sk_buf_free(&b);
	fflush(out);
	pthread_mutex_unlock(&lg_lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char small[LOG_LINE_MAX], *msg = small;
	char stamp[80];
	va_list ap;
	int len;

	if (level < lg.level || level >= LOG_OFF)
		return;
	va_start(ap, fmt);
	len = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	if ((size_t)len >= sizeof(small)) {
		/* Whole, so that redaction sees every secret before the line is cut. */
		msg = xmalloc((size_t)len + 1);
		va_start(ap, fmt);
		vsnprintf(msg, (size_t)len + 1, fmt, ap);
		va_end(ap);
	}
	time_stamp(stamp, sizeof(stamp));
	write_line(level, msg, stamp);
	sk_wipe(small, (size_t)len < sizeof(small) ? (size_t)len : sizeof(small)); /* redaction leaves a tail */
	if (msg != small) {
		sk_wipe(msg, (size_t)len);
		free(msg);
	}
}
