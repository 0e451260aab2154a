/* spooky.c: SpookyHash V2, streamed (see spooky.h). Words are read little-endian, as the
 * reference implementation reads them on the x86 and arm machines ProxySQL runs on. */
#include "spooky.h"

#include <string.h>

#define SC 0xdeadbeefdeadbeefULL

static const unsigned mix_rot[12] = { 11, 32, 43, 31, 17, 28, 39, 57, 55, 54, 22, 46 };
static const unsigned end_rot[12] = { 44, 15, 34, 21, 38, 33, 10, 13, 38, 53, 42, 54 };
static const unsigned short_mix_rot[12] = { 50, 52, 30, 41, 54, 48, 38, 37, 62, 34, 5, 36 };
static const unsigned short_end_rot[11] = { 15, 52, 26, 51, 28, 9, 47, 54, 32, 25, 63 };

static uint64_t rot(uint64_t x, unsigned k)
{
	return x << k | x >> (64 - k);
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* The short path's two mixing steps over four words: line i works on words (2+i, 3+i, i) mod 4
 * (mix) and (3+i, 2+i) mod 4 (end). */
static void short_mix(uint64_t h[4])
{
	for (unsigned i = 0; i < 12; i++) {
		unsigned a = (2 + i) % 4, b = (3 + i) % 4, c = i % 4;

		h[a] = rot(h[a], short_mix_rot[i]) + h[b];
		h[c] ^= h[a];
	}
}

static void short_end(uint64_t h[4])
{
	for (unsigned i = 0; i < 11; i++) {
		unsigned a = (3 + i) % 4, b = (2 + i) % 4;

		h[a] ^= h[b];
		h[b] = rot(h[b], short_end_rot[i]);
		h[a] += h[b];
	}
}

/* Messages under SK_SPOOKY_SHORT bytes. */
static void hash_short(const unsigned char *m, size_t n, uint64_t seed1, uint64_t seed2, uint64_t out[2])
{
	uint64_t h[4] = { seed1, seed2, SC, SC };
	unsigned char tail[16] = { 0 };
	size_t p = 0, rem;

	if (n > 15) {
		for (; p + 32 <= n; p += 32) {
			h[2] += le64(m + p);
			h[3] += le64(m + p + 8);
			short_mix(h);
			h[0] += le64(m + p + 16);
			h[1] += le64(m + p + 24);
		}
		if (n - p >= 16) {
			h[2] += le64(m + p);
			h[3] += le64(m + p + 8);
			short_mix(h);
			p += 16;
		}
	}
	rem = n - p;
	h[3] += (uint64_t)n << 56;
	if (rem == 0) {
		h[2] += SC;
		h[3] += SC;
	} else {
		memcpy(tail, m + p, rem);
		h[2] += le64(tail);
		if (rem > 8)
			h[3] += le64(tail + 8);
	}
	short_end(h);
	out[0] = h[0];
	out[1] = h[1];
}

/* One 96-byte block into the long path's state. */
static void mix(uint64_t h[12], const unsigned char *block)
{
	for (unsigned i = 0; i < 12; i++) {
		h[i] += le64(block + 8 * i);
		h[(i + 2) % 12] ^= h[(i + 10) % 12];
		h[(i + 11) % 12] ^= h[i];
		h[i] = rot(h[i], mix_rot[i]);
		h[(i + 11) % 12] += h[(i + 1) % 12];
	}
}

static void end_partial(uint64_t h[12])
{
	for (unsigned i = 0; i < 12; i++) {
		h[(i + 11) % 12] += h[(i + 1) % 12];
		h[(i + 2) % 12] ^= h[(i + 11) % 12];
		h[(i + 1) % 12] = rot(h[(i + 1) % 12], end_rot[i]);
	}
}

void sk_spooky_init(sk_spooky *s, uint64_t seed1, uint64_t seed2)
{
	memset(s, 0, sizeof(*s));
	s->seed1 = seed1;
	s->seed2 = seed2;
	for (unsigned i = 0; i < 12; i += 3) {
		s->h[i] = seed1;
		s->h[i + 1] = seed2;
		s->h[i + 2] = SC;
	}
}

/* Bytes are kept until the message is known to take the long path (SK_SPOOKY_SHORT bytes or
 * more); from then on every whole block is mixed as it fills (straight from the input when none
 * is buffered), the last partial one at the end. A short update only appends to the buffer. */
void sk_spooky_update(sk_spooky *s, const void *p, size_t n)
{
	const unsigned char *in = p;

	s->total += n;
	if (s->total < SK_SPOOKY_SHORT) {
		memcpy(s->buf + s->n, in, n);
		s->n += n;
		return;
	}
	while (n > 0) {
		size_t take, off = 0;

		if (s->n == 0 && n >= SK_SPOOKY_BLOCK) {
			mix(s->h, in);
			in += SK_SPOOKY_BLOCK;
			n -= SK_SPOOKY_BLOCK;
			continue;
		}
		take = sizeof(s->buf) - s->n < n ? sizeof(s->buf) - s->n : n;
		memcpy(s->buf + s->n, in, take);
		s->n += take;
		in += take;
		n -= take;
		for (; s->n - off >= SK_SPOOKY_BLOCK; off += SK_SPOOKY_BLOCK)
			mix(s->h, s->buf + off);
		if (off) {
			memmove(s->buf, s->buf + off, s->n - off);
			s->n -= off;
		}
	}
}

void sk_spooky_final(const sk_spooky *s, uint64_t *h1, uint64_t *h2)
{
	unsigned char last[SK_SPOOKY_BLOCK] = { 0 };
	uint64_t h[12], out[2];

	if (s->total < SK_SPOOKY_SHORT) {
		hash_short(s->buf, s->total, s->seed1, s->seed2, out);
		*h1 = out[0];
		*h2 = out[1];
		return;
	}
	memcpy(h, s->h, sizeof(h));
	memcpy(last, s->buf, s->n);
	last[SK_SPOOKY_BLOCK - 1] = (unsigned char)s->n;
	for (unsigned i = 0; i < 12; i++)
		h[i] += le64(last + 8 * i);
	for (int r = 0; r < 3; r++)
		end_partial(h);
	*h1 = h[0];
	*h2 = h[1];
}
