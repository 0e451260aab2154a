/* deadline.c: monotonic deadlines, so per-step timeouts never add up past the caller's budget. */
#include "deadline.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int64_t deadline_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

deadline_t deadline_in_ms(int64_t ms)
{
	deadline_t d = { deadline_now_us() + (ms > 0 ? ms * 1000 : 0) };

	if (d.at == 0)
		d.at = 1;
	return d;
}

deadline_t deadline_never(void)
{
	deadline_t d = { 0 };

	return d;
}

int deadline_left_ms(const deadline_t *d)
{
	int64_t left;

	if (d->at == 0)
		return INT32_MAX;
	left = d->at - deadline_now_us();
	if (left <= 0)
		return 0;
	left = (left + 999) / 1000;
	return left > INT32_MAX ? INT32_MAX : (int)left;
}

long deadline_timeout_ms(const deadline_t *d)
{
	int left = deadline_left_ms(d); /* rounded up: 1 while any time is left */

	return left > 0 && !deadline_expired(d) ? left : -1;
}

bool deadline_expired(const deadline_t *d)
{
	return d->at != 0 && deadline_now_us() >= d->at;
}

deadline_t deadline_min(deadline_t a, deadline_t b)
{
	if (a.at == 0)
		return b;
	if (b.at == 0)
		return a;
	return a.at < b.at ? a : b;
}

int64_t deadline_age_from_stat(const char *stat, long hz, int64_t boot_now_us)
{
	const char *p = stat ? strrchr(stat, ')') : NULL;
	unsigned long long ticks;
	int64_t start_us;

	if (!p || hz <= 0)
		return 0;
	/* After the command's closing parenthesis: state (field 3) ... starttime (field 22). */
	for (int field = 2; field < 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return 0;
	}
	if (sscanf(p + 1, "%llu", &ticks) != 1)
		return 0;
	ticks++; /* the start lies within its tick: the end of it gives the age the process has at least */
	start_us = (int64_t)(ticks / (unsigned long long)hz) * 1000000 +
		   (int64_t)(ticks % (unsigned long long)hz) * 1000000 / hz;
	return boot_now_us > start_us ? boot_now_us - start_us : 0;
}

/* How long ago this process was started (forked), from /proc/self/stat; 0 when unknown. */
static int64_t process_age_us(void)
{
	char buf[1024];
	struct timespec ts;
	size_t n;
	FILE *f = fopen("/proc/self/stat", "re");

	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (clock_gettime(CLOCK_BOOTTIME, &ts) < 0)
		return 0;
	return deadline_age_from_stat(buf, sysconf(_SC_CLK_TCK), (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

deadline_t deadline_since_start_ms(int64_t ms)
{
	int64_t age = process_age_us();

	if (age > DEADLINE_STARTUP_MAX_US)
		age = DEADLINE_STARTUP_MAX_US;
	return deadline_in_ms(ms - age / 1000);
}
