/* hash.h — XXH64, streaming: the 64-bit checksum of snapshot files and the
 * model identity (src/engine/snapshot.c).  Not cryptographic: it detects
 * truncation and corruption, not tampering. */
#ifndef LILAC_UTIL_HASH_H
#define LILAC_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t v[4];      /* the four lanes */
    uint64_t total;     /* bytes hashed so far */
    unsigned char buf[32]; /* a partial stripe */
    size_t nbuf;
    uint64_t seed;
} lilac_hash;

void lilac_hash_init(lilac_hash *h, uint64_t seed);
void lilac_hash_update(lilac_hash *h, const void *p, size_t n);
uint64_t lilac_hash_final(const lilac_hash *h);
/* One-shot XXH64(p[0..n), seed). */
uint64_t lilac_hash64(const void *p, size_t n, uint64_t seed);

#endif
