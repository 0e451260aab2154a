/* spooky.h: SpookyHash V2 (Bob Jenkins' 128-bit hash, public domain), streamed.
 *
 * ProxySQL checksums its tables with it (CHECKSUM ..., runtime_checksums_values): the agent
 * hashes rows it knows the same way to tell what a table's CHECKSUM will say without asking.
 * Updates concatenate: Update(a) then Update(b) hashes the bytes of a followed by b. */
#ifndef SK_SPOOKY_H
#define SK_SPOOKY_H

#include <stddef.h>
#include <stdint.h>

#define SK_SPOOKY_BLOCK 96 /* bytes mixed at a time */
#define SK_SPOOKY_SHORT 192 /* messages shorter than this take the short path */

typedef struct sk_spooky {
	uint64_t h[12];
	uint64_t seed1, seed2;
	unsigned char buf[SK_SPOOKY_SHORT];
	size_t n; /* bytes in buf */
	size_t total; /* bytes hashed so far */
} sk_spooky;

void sk_spooky_init(sk_spooky *s, uint64_t seed1, uint64_t seed2);
void sk_spooky_update(sk_spooky *s, const void *p, size_t n);
/* The two 64-bit halves of the hash of everything updated. */
void sk_spooky_final(const sk_spooky *s, uint64_t *h1, uint64_t *h2);

#endif
