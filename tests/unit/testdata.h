/* testdata.h: helpers for table tests that read their cases from files under tests/data. */
#ifndef SK_TESTDATA_H
#define SK_TESTDATA_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The data directory: $SIDEKICK_TEST_DATA or "tests/data". */
static inline const char *testdata_dir(void)
{
	const char *d = getenv("SIDEKICK_TEST_DATA");

	return d && *d ? d : "tests/data";
}

/* List the files in testdata_dir()/sub ending in `suffix`, sorted; returns the count (the caller
 * frees each name and the array). */
static inline size_t testdata_list(const char *sub, const char *suffix, char ***out)
{
	char dir[1024];
	struct dirent **ents = NULL;
	size_t n = 0;
	int k;

	snprintf(dir, sizeof(dir), "%s/%s", testdata_dir(), sub);
	k = scandir(dir, &ents, NULL, alphasort);
	*out = xcalloc(k > 0 ? (size_t)k : 1, sizeof(char *));
	for (int i = 0; i < k; i++) {
		size_t len = strlen(ents[i]->d_name), sl = strlen(suffix);

		if (len > sl && strcmp(ents[i]->d_name + len - sl, suffix) == 0) {
			char path[2048];

			snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name);
			(*out)[n++] = xstrdup(path);
		}
		free(ents[i]);
	}
	free(ents);
	return n;
}

/* Read a whole data file (aborts the test program when it cannot). */
static inline char *testdata_read(const char *path)
{
	char *text = NULL, err[256];

	if (sk_read_file(path, 1 << 20, &text, NULL, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		abort();
	}
	return text;
}

/* Call row(line, ctx) for each line of testdata_dir()/name that is neither blank nor a '#'
 * comment; returns how many. */
static inline int testdata_each_line(const char *name, void (*row)(char *line, void *ctx), void *ctx)
{
	char path[1024], *text, *line, *save = NULL;
	int rows = 0;

	snprintf(path, sizeof(path), "%s/%s", testdata_dir(), name);
	text = testdata_read(path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (line[0] == '#' || !line[strspn(line, " \t")])
			continue;
		row(line, ctx);
		rows++;
	}
	free(text);
	return rows;
}

#endif
