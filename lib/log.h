/* log.h: one-line logs in text or JSON, with levels and a registry of secrets that are never printed. */
#ifndef SK_LOG_H
#define SK_LOG_H

#include <stdbool.h>
#include <stdio.h>

#include "util.h"

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };
enum log_format { LOG_TEXT, LOG_JSON };

/* Set the program name, format, minimum level and stream (stdout or stderr). Safe to call again. */
void log_setup(const char *prog, enum log_format format, enum log_level level, FILE *stream);

/* Parse "debug|info|warn|error|off" and "text|json". Return false on an unknown word. */
bool log_level_parse(const char *s, enum log_level *out) SK_MUST_CHECK;
bool log_format_parse(const char *s, enum log_format *out) SK_MUST_CHECK;
const char *log_level_str(enum log_level level);

/* Register a secret (a password, a token). Any later log line that contains it prints "***"
 * in its place. The string is copied; empty strings and strings shorter than 3 bytes are
 * ignored (too likely to occur by chance). */
void log_add_secret(const char *secret);
/* Stop redacting a secret that is no longer in use (a login token replaced by the next one), so
 * that rotation never fills the redactor. */
void log_forget_secret(const char *secret);

/* Forget all registered secrets (config reload). */
void log_clear_secrets(void);

/* Replace every registered secret in `s` with "***", in place: each run of bytes covered by
 * secrets (overlapping, adjacent or nested ones) becomes one "***". The result never grows, and
 * it ends for any secret, "***" included. */
void log_redact(char *s);

/* Write one line. `fmt` is printf-style; the message may carry key=value pairs. Secrets are
 * redacted first; control characters in the message (below 0x20, and 0x7f) are escaped in both
 * formats, so data cannot start a line of its own. A line longer than 8192 bytes is cut at a
 * character boundary and ends with "[cut: line longer than 8192 bytes]". */
void log_msg(enum log_level level, const char *fmt, ...) SK_PRINTF(2, 3);

#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)

#endif
