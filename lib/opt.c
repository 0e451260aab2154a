/* opt.c: table-driven option parsing shared by every binary: config file < environment < argv. */
#include "opt.h"

#include <libconfig.h>
#include <stdlib.h>
#include <string.h>

#include "cfgnum.h"
#include "log.h"
#include "secret.h"

#define CONFIG_FILE_MAX (1024 * 1024)

static size_t find(const struct opts *o, const char *name)
{
	for (size_t i = 0; i < o->ndefs; i++)
		if (strcmp(o->defs[i].name, name) == 0)
			return i;
	return (size_t)-1;
}

static size_t must_find(const struct opts *o, const char *name)
{
	size_t i = find(o, name);

	if (i == (size_t)-1) {
		fprintf(stderr, "%s: internal error: no option named '%s'\n", o->prog, name);
		abort();
	}
	return i;
}

/* Whether `text` is one of the '|'-separated `choices`. */
static bool enum_has(const char *choices, const char *text)
{
	const char *p = choices;
	size_t n = strlen(text);
	bool ok = false;

	while (p && *p) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);

		if (len == n && strncmp(p, text, n) == 0)
			ok = true;
		p = bar ? bar + 1 : NULL;
	}
	return ok;
}

/* Convert and check `text` as option `d` types it, into nv's typed fields. */
static int convert(const struct opt_def *d, const char *text, const char *source, struct opt_val *nv, char *err,
		   size_t errlen)
{
	switch (d->type) {
	case OPT_FLAG:
		if (!sk_parse_bool(text, &nv->b))
			return sk_err(err, errlen, "%s: '%s' is not a boolean (use 1/0, yes/no, true/false, on/off)",
				      source, text);
		nv->i = nv->b;
		nv->d = nv->b;
		break;
	case OPT_INT:
		if (!sk_parse_long(text, (long)d->min, (long)d->max, &nv->i))
			return sk_err(err, errlen, "%s: '%s' is not a whole number from %ld to %ld", source, text,
				      (long)d->min, (long)d->max);
		nv->d = (double)nv->i;
		break;
	case OPT_NUMBER:
		if (!sk_parse_double(text, d->min, d->max, &nv->d))
			return sk_err(err, errlen, "%s: '%s' is not a number from %g to %g", source, text, d->min,
				      d->max);
		nv->i = (long)nv->d;
		break;
	case OPT_ENUM:
		if (!enum_has(d->choices, text))
			return sk_err(err, errlen, "%s: '%s' is not one of %s", source, text, d->choices);
		break;
	case OPT_STRING:
		if (strlen(text) > 4096)
			return sk_err(err, errlen, "%s: value too long (%zu bytes, at most 4096)", source,
				      strlen(text));
		break;
	}
	return 0;
}

/* Convert and check `text` for option i; on success store it with its source. */
static int set_value(struct opts *o, size_t i, const char *text, const char *source, char *err, size_t errlen)
{
	const struct opt_def *d = &o->defs[i];
	struct opt_val *v = &o->vals[i];
	struct opt_val nv = { 0 };

	if (convert(d, text, source, &nv, err, errlen) < 0)
		return -1;
	if (d->flags & OPT_SECRET)
		log_add_secret(text);
	if (v->text) {
		if (d->flags & OPT_SECRET)
			sk_wipe(v->text, strlen(v->text));
		free(v->text);
	}
	nv.set = true;
	nv.text = xstrdup(text);
	sk_strlcpy(nv.source, source, sizeof(nv.source));
	*v = nv;
	return 0;
}

int opt_set(struct opts *o, const char *name, const char *text, const char *source, char *err, size_t errlen)
{
	return set_value(o, must_find(o, name), text, source, err, errlen);
}

/* Config-file setting names may use '_' where options use '-'. */
static size_t find_setting(const struct opts *o, const char *name)
{
	char norm[96];

	if (!sk_strlcpy(norm, name, sizeof(norm)))
		return (size_t)-1;
	for (char *p = norm; *p; p++)
		if (*p == '_')
			*p = '-';
	return find(o, norm);
}

/* Whether a line of the file starts with @include (it would read files past the size limit, and
 * a FIFO there would hang the loader). */
static bool has_include(const char *text)
{
	for (const char *p = text; (p = strstr(p, "@include")) != NULL; p++) {
		const char *line = p;

		while (line > text && line[-1] != '\n' && (line[-1] == ' ' || line[-1] == '\t'))
			line--;
		if (line == text || line[-1] == '\n')
			return true;
	}
	return false;
}

/* One top-level setting of the file: a scalar into its option, a group or list to the file hook. */
static int load_setting(struct opts *o, config_setting_t *s, const char *path, char *err, size_t errlen)
{
	const char *name = config_setting_name(s);
	char source[96], val[64];
	const char *vtext = val;
	size_t i;

	snprintf(source, sizeof(source), "%s:%d: %s", path, config_setting_source_line(s), name);
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_GROUP:
	case CONFIG_TYPE_LIST:
	case CONFIG_TYPE_ARRAY:
		if (o->file_hook) {
			char why[512];

			/* The hook's error is "LINE: setting: problem"; the path goes in front. */
			if (o->file_hook(o->hook_ctx, s, why, sizeof(why)) == 0)
				return 0;
			return sk_err(err, errlen, "%s:%s", path, why);
		}
		return sk_err(err, errlen, "%s: unknown setting", source);
	default: break;
	}
	i = find_setting(o, name);
	if (i == (size_t)-1 || (o->defs[i].flags & OPT_NO_FILE))
		return sk_err(err, errlen, "%s: unknown setting", source);
	switch (config_setting_type(s)) {
	case CONFIG_TYPE_INT:
	case CONFIG_TYPE_INT64: snprintf(val, sizeof(val), "%lld", config_setting_get_int64(s)); break;
	case CONFIG_TYPE_FLOAT: snprintf(val, sizeof(val), "%.17g", config_setting_get_float(s)); break;
	case CONFIG_TYPE_BOOL: snprintf(val, sizeof(val), "%d", config_setting_get_bool(s)); break;
	default: vtext = config_setting_get_string(s); break;
	}
	return set_value(o, i, vtext, source, err, errlen);
}

/* libconfig says no more than "syntax error": what it expects, in one line. */
#define SYNTAX_HINT                                                                                             \
	" (libconfig expects name = value; with a value that is a number, true or false, a \"quoted string\", " \
	"a list ( ... ) or a group { ... })"

int opts_load_file(struct opts *o, const char *path, char *err, size_t errlen)
{
	char *text = NULL;
	config_t cfg;
	config_setting_t *root;
	int rc = -1;
	char why[256];

	/* Read it ourselves first: bounded size, a clear message for a missing file, and refused when
	 * another user could have written it (it may hold passwords and name the files that do). */
	if (sk_read_file_checked(&(struct sk_file_read){ path, CONFIG_FILE_MAX, secret_check, NULL }, &text, NULL, why,
				 sizeof(why)) < 0)
		return sk_err(err, errlen, "config file %s", why);
	if (has_include(text)) {
		sk_wipe(text, strlen(text));
		free(text);
		return sk_err(err, errlen, "config file %s: @include is not supported", path);
	}
	config_init(&cfg);
	if (config_read_string(&cfg, text) != CONFIG_TRUE) {
		sk_err(err, errlen, "%s:%d: %s%s", path, config_error_line(&cfg), config_error_text(&cfg),
		       strcmp(config_error_text(&cfg), "syntax error") == 0 ? SYNTAX_HINT : "");
		goto out;
	}
	if (cfgnum_check(text, path, err, errlen) < 0)
		goto out;
	root = config_root_setting(&cfg);
	for (int k = 0; k < config_setting_length(root); k++)
		if (load_setting(o, config_setting_get_elem(root, (unsigned)k), path, err, errlen) < 0)
			goto out;
	rc = 0;
out:
	config_destroy(&cfg);
	sk_wipe(text, strlen(text));
	free(text);
	return rc;
}

static void print_version(const struct opts *o)
{
	printf("%s (sidekick) %s\n", o->prog, o->version);
}

/* What one command-line argument names: the option's index ((size_t)-1: none), its inline value
 * (NULL: none) and the name as written, for messages. */
struct arg_seen {
	size_t i;
	const char *inline_val;
	char source[112];
};

/* "--name[=value]" into *s. Returns 0, 1 (--help, --version or --help-markdown printed) or -1. */
static int parse_long(struct opts *o, const char *a, struct arg_seen *s, char *err, size_t errlen)
{
	const char *eq = strchr(a + 2, '=');
	size_t n = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
	char name[96];

	if (n >= sizeof(name))
		return sk_err(err, errlen, "unknown option '%.40s...' (see --help)", a);
	memcpy(name, a + 2, n);
	name[n] = '\0';
	s->inline_val = eq ? eq + 1 : NULL;
	if (strcmp(name, "help") == 0) {
		opts_help(o, stdout);
		return 1;
	}
	if (strcmp(name, "version") == 0) {
		print_version(o);
		return 1;
	}
	if (strcmp(name, "help-markdown") == 0) {
		opts_markdown(o, stdout);
		return 1;
	}
	s->i = find(o, name);
	snprintf(s->source, sizeof(s->source), "--%s", name);
	return 0;
}

/* "-x[value]": as parse_long; 1 for -h (help printed). */
static int parse_short(struct opts *o, const char *a, struct arg_seen *s)
{
	if (a[1] == 'h' && a[2] == '\0') {
		opts_help(o, stdout);
		return 1;
	}
	for (size_t k = 0; k < o->ndefs; k++)
		if (o->defs[k].short_name && o->defs[k].short_name == a[1])
			s->i = k;
	if (s->i != (size_t)-1 && a[2])
		s->inline_val = a + 2;
	snprintf(s->source, sizeof(s->source), "-%c", a[1]);
	return 0;
}

/* Handle one command-line option. Returns 0, 1 (help/version printed) or -1. */
static int take_arg(struct opts *o, int argc, char **argv, int *idx, char *err, size_t errlen)
{
	const char *a = argv[*idx], *inline_val;
	struct arg_seen s = { .i = (size_t)-1, .inline_val = NULL };
	int r = a[1] == '-' ? parse_long(o, a, &s, err, errlen) : parse_short(o, a, &s);
	const char *source = s.source;
	size_t i = s.i;

	if (r != 0)
		return r;
	inline_val = s.inline_val;
	if (i == (size_t)-1 || (o->defs[i].flags & OPT_NO_ARGV)) {
		if (i != (size_t)-1)
			return sk_err(err, errlen, "%s is not accepted on the command line (%s)", source,
				      o->defs[i].env ? "use its environment variable or the config file"
						     : "use the config file");
		return sk_err(err, errlen, "unknown option '%s' (see --help)", a);
	}
	if (o->defs[i].type == OPT_FLAG && !inline_val)
		return set_value(o, i, "1", source, err, errlen);
	if (!inline_val) {
		if (*idx + 1 >= argc)
			return sk_err(err, errlen, "%s needs a value (%s)", source,
				      o->defs[i].arg ? o->defs[i].arg : "VALUE");
		inline_val = argv[++*idx];
	}
	return set_value(o, i, inline_val, source, err, errlen);
}

/* The defaults, which do not count as "given". */
static int apply_defaults(struct opts *o, char *err, size_t errlen)
{
	for (size_t i = 0; i < o->ndefs; i++)
		if (o->defs[i].def && set_value(o, i, o->defs[i].def, "default", err, errlen) < 0)
			return -1;
	for (size_t i = 0; i < o->ndefs; i++)
		o->vals[i].set = false; /* defaults do not count as "given" */
	return 0;
}

/* The config file's path, looked for before anything else (the file comes first): its option's
 * environment variable, then the last --name[=]PATH or -xPATH on argv. NULL: none. */
static const char *config_path(const struct opts *o, int argc, char **argv)
{
	size_t ci = must_find(o, o->config_opt);
	size_t n = strlen(o->config_opt);
	const char *cfg_path = NULL;

	if (o->defs[ci].env && getenv(o->defs[ci].env) && *getenv(o->defs[ci].env))
		cfg_path = getenv(o->defs[ci].env);
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];

		if (strcmp(a, "--") == 0)
			break;
		if (strncmp(a, "--", 2) == 0 && strncmp(a + 2, o->config_opt, n) == 0) {
			if (a[2 + n] == '=')
				cfg_path = a + 3 + n;
			else if (a[2 + n] == '\0' && k + 1 < argc)
				cfg_path = argv[k + 1];
		} else if (a[0] == '-' && o->defs[ci].short_name && a[1] == o->defs[ci].short_name) {
			if (a[2])
				cfg_path = a + 2;
			else if (k + 1 < argc)
				cfg_path = argv[k + 1];
		}
	}
	return cfg_path;
}

/* Every option's environment variable that is set and not empty. */
static int apply_env(struct opts *o, char *err, size_t errlen)
{
	for (size_t i = 0; i < o->ndefs; i++) {
		const char *env = o->defs[i].env ? getenv(o->defs[i].env) : NULL;
		char source[96];

		if (!env || !*env)
			continue; /* like ${VAR:-default}: empty means unset */
		snprintf(source, sizeof(source), "env %s", o->defs[i].env);
		if (set_value(o, i, env, source, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* The command line: options into their values, the rest (and all after "--") into o->args. */
static enum opts_result apply_argv(struct opts *o, int argc, char **argv, char *err, size_t errlen)
{
	for (int k = 1; k < argc; k++) {
		const char *a = argv[k];
		int r;

		if (strcmp(a, "--") == 0) {
			while (++k < argc)
				o->args[o->nargs++] = argv[k];
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			o->args[o->nargs++] = argv[k];
			continue;
		}
		r = take_arg(o, argc, argv, &k, err, errlen);
		if (r < 0)
			return OPTS_ERROR;
		if (r > 0)
			return OPTS_EXIT;
	}
	return OPTS_OK;
}

enum opts_result opts_parse(struct opts *o, int argc, char **argv, char *err, size_t errlen)
{
	const char *cfg_path;
	enum opts_result r;

	o->vals = xcalloc(o->ndefs, sizeof(*o->vals));
	o->args = xcalloc((size_t)argc + 1, sizeof(char *));
	o->nargs = 0;
	if (apply_defaults(o, err, errlen) < 0)
		return OPTS_ERROR;
	cfg_path = o->config_opt ? config_path(o, argc, argv) : NULL;
	if (cfg_path && opts_load_file(o, cfg_path, err, errlen) < 0)
		return OPTS_ERROR;
	if (apply_env(o, err, errlen) < 0)
		return OPTS_ERROR;
	r = apply_argv(o, argc, argv, err, errlen);
	if (r != OPTS_OK)
		return r;
	if (o->nargs > o->max_args) {
		if (o->max_args == 0)
			sk_err(err, errlen, "unexpected argument '%s' (see --help)", o->args[0]);
		else
			sk_err(err, errlen, "too many arguments: at most %d (see --help)", o->max_args);
		return OPTS_ERROR;
	}
	return OPTS_OK;
}

int opts_parse_main(struct opts *o, int argc, char **argv)
{
	char err[512];

	switch (opts_parse(o, argc, argv, err, sizeof(err))) {
	case OPTS_OK: return -1;
	case OPTS_EXIT: opts_free(o); return 0;
	case OPTS_ERROR: break;
	}
	fprintf(stderr, "%s: %s\n", o->prog, err);
	opts_free(o);
	return 2;
}

void opts_free(struct opts *o)
{
	if (o->vals) {
		for (size_t i = 0; i < o->ndefs; i++) {
			if (o->vals[i].text && (o->defs[i].flags & OPT_SECRET))
				sk_wipe(o->vals[i].text, strlen(o->vals[i].text));
			free(o->vals[i].text);
		}
	}
	free(o->vals);
	free(o->args);
	o->vals = NULL;
	o->args = NULL;
}

const char *opt_str(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].text;
}

long opt_int(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].i;
}

double opt_num(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].d;
}

bool opt_flag(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].b;
}

bool opt_given(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].set;
}

const char *opt_source(const struct opts *o, const char *name)
{
	return o->vals[must_find(o, name)].source;
}

/* The type a bound field holds for an option of type t: an enum's word is text. */
static enum opt_type field_type(enum opt_type t)
{
	return t == OPT_ENUM ? OPT_STRING : t;
}

void opts_bind(const struct opts *o, void *dst)
{
	for (size_t i = 0; i < o->ndefs; i++) {
		const struct opt_def *d = &o->defs[i];
		const struct opt_val *v = &o->vals[i];
		char *field = (char *)dst + d->bind.at - 1;

		if (d->bind.at == 0)
			continue;
		if (d->bind.as != field_type(d->type)) {
			fprintf(stderr, "%s: internal error: option '%s' is bound to a field of another type\n",
				o->prog, d->name);
			abort();
		}
		if (d->type == OPT_FLAG)
			memcpy(field, &v->b, sizeof(v->b));
		else if (d->type == OPT_INT)
			memcpy(field, &v->i, sizeof(v->i));
		else if (d->type == OPT_NUMBER)
			memcpy(field, &v->d, sizeof(v->d));
		else
			memcpy(field, &(const char *){ v->text }, sizeof(const char *));
	}
}

static void range_text(const struct opt_def *d, char *buf, size_t n)
{
	buf[0] = '\0';
	if (d->type == OPT_INT)
		snprintf(buf, n, "%ld..%ld", (long)d->min, (long)d->max);
	else if (d->type == OPT_NUMBER)
		snprintf(buf, n, "%g..%g", d->min, d->max);
	else if (d->type == OPT_ENUM)
		snprintf(buf, n, "%s", d->choices);
}

void opts_help(const struct opts *o, FILE *out)
{
	fprintf(out, "Usage: %s %s\n\n%s\n\nOptions:\n", o->prog, o->synopsis, o->summary);
	for (size_t i = 0; i < o->ndefs; i++) {
		const struct opt_def *d = &o->defs[i];
		char left[128], range[96];

		if (d->flags & OPT_HIDDEN)
			continue;
		if (d->flags & OPT_NO_ARGV)
			snprintf(left, sizeof(left), "  (env %s)", d->env ? d->env : "-");
		else if (d->short_name)
			snprintf(left, sizeof(left), "  -%c, --%s%s%s", d->short_name, d->name,
				 d->type == OPT_FLAG ? "" : " ", d->type == OPT_FLAG ? "" : d->arg);
		else
			snprintf(left, sizeof(left), "      --%s%s%s", d->name, d->type == OPT_FLAG ? "" : " ",
				 d->type == OPT_FLAG ? "" : d->arg);
		fprintf(out, "%-34s %s", left, d->help);
		range_text(d, range, sizeof(range));
		if (range[0] && d->type != OPT_ENUM)
			fprintf(out, " (%s)", range);
		else if (d->type == OPT_ENUM)
			fprintf(out, " (%s)", d->choices);
		if (d->def)
			fprintf(out, " [default: %s]", (d->flags & OPT_SECRET) ? "(set, not shown)" : d->def);
		if (d->env && !(d->flags & OPT_NO_ARGV))
			fprintf(out, " [env: %s]", d->env);
		fputc('\n', out);
	}
	fprintf(out, "%-34s %s\n%-34s %s\n", "  -h, --help", "Print this help and exit.", "      --version",
		"Print the version and exit.");
	fprintf(out, "\nExit status: %s\n",
		o->exit_status ? o->exit_status
			       : "0 healthy/success, 1 unhealthy/failed, 2 usage or configuration error.");
}

void opts_markdown(const struct opts *o, FILE *out)
{
	fprintf(out, "| option | env | default | range | meaning |\n|---|---|---|---|---|\n");
	for (size_t i = 0; i < o->ndefs; i++) {
		const struct opt_def *d = &o->defs[i];
		char range[96];

		range_text(d, range, sizeof(range));
		for (char *p = range; *p; p++)
			if (*p == '|')
				*p = '/'; /* a bar would split the Markdown cell */
		if (d->flags & OPT_NO_ARGV)
			fprintf(out, "| (config `%s`) |", d->name);
		else
			fprintf(out, "| `--%s%s%s` |", d->name, d->type == OPT_FLAG ? "" : " ",
				d->type == OPT_FLAG ? "" : d->arg);
		fprintf(out, " %s%s%s | %s%s%s | %s | %s |\n", d->env ? "`" : "", d->env ? d->env : "",
			d->env ? "`" : "", d->def ? "`" : "",
			d->def ? ((d->flags & OPT_SECRET) ? "(set)" : d->def) : "", d->def ? "`" : "", range, d->help);
	}
}
