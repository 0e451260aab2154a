/* log.c: line-oriented logging to stdout/stderr; secrets are redacted before anything is written. */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_MAX_SECRETS 256
#define LOG_LINE_MAX 4096

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

/* Caller holds lg_lock. */
static void redact_locked(char *s)
{
	size_t count = lg.nsecrets < LOG_MAX_SECRETS ? lg.nsecrets : LOG_MAX_SECRETS;

	for (size_t i = 0; i < count; i++) {
		size_t n = strlen(lg.secrets[i]);
		char *hit;

		while ((hit = strstr(s, lg.secrets[i])) != NULL) {
			memcpy(hit, "***", 3);
			memmove(hit + 3, hit + n, strlen(hit + n) + 1);
		}
	}
}

void log_redact(char *s)
{
	pthread_mutex_lock(&lg_lock);
	redact_locked(s);
	pthread_mutex_unlock(&lg_lock);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX];
	char stamp[80];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	FILE *out;

	if (level < lg.level || level >= LOG_OFF)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);

	pthread_mutex_lock(&lg_lock);
	redact_locked(msg);
	out = lg.stream ? lg.stream : stderr;
	if (lg.format == LOG_JSON) {
		sk_buf b;

		sk_buf_init(&b, LOG_LINE_MAX * 2);
		if (sk_buf_addf(&b, "{\"time\":\"%s\",\"level\":\"%s\",\"prog\":", stamp, level_names[level]) &&
		    sk_buf_add_json_str(&b, lg.prog) && sk_buf_add(&b, ",\"msg\":", 7) &&
		    sk_buf_add_json_str(&b, msg) && sk_buf_add(&b, "}\n", 2))
			fputs(b.data, out);
		sk_buf_free(&b);
	} else {
		fprintf(out, "%s %s %s: %s\n", stamp, level_names[level], lg.prog, msg);
	}
	fflush(out);
	pthread_mutex_unlock(&lg_lock);
}
