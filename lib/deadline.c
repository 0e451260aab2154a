/* deadline.c: monotonic deadlines, so per-step timeouts never add up past the caller's budget. */
#include "deadline.h"

#include <time.h>

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
