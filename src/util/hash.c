/* hash.c — XXH64 (Yann Collet's algorithm, written from its specification);
 * equal to the reference for every input (tests/unit/test_snapshot.c checks
 * known values). */
#include <string.h>

#include "util/hash.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t rd64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint32_t rd32(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

static uint64_t round1(uint64_t acc, uint64_t in) { return rotl(acc + in * P2, 31) * P1; }

static uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ round1(0, v)) * P1 + P4; }

void lilac_hash_init(lilac_hash *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    h->seed = seed;
    h->v[0] = seed + P1 + P2;
    h->v[1] = seed + P2;
    h->v[2] = seed;
    h->v[3] = seed - P1;
}

static void stripe(lilac_hash *h, const unsigned char *p) {
    for (int i = 0; i < 4; i++) h->v[i] = round1(h->v[i], rd64(p + 8 * i));
}

void lilac_hash_update(lilac_hash *h, const void *data, size_t n) {
    const unsigned char *p = data;
    h->total += n;
    if (h->nbuf) {
        size_t k = 32 - h->nbuf < n ? 32 - h->nbuf : n;
        memcpy(h->buf + h->nbuf, p, k);
        h->nbuf += k, p += k, n -= k;
        if (h->nbuf < 32) return;
        stripe(h, h->buf);
        h->nbuf = 0;
    }
    for (; n >= 32; p += 32, n -= 32) stripe(h, p);
    memcpy(h->buf, p, n);
    h->nbuf = n;
}

uint64_t lilac_hash_final(const lilac_hash *h) {
    uint64_t x;
    if (h->total >= 32) {
        x = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int i = 0; i < 4; i++) x = merge(x, h->v[i]);
    } else {
        x = h->seed + P5;
    }
    x += h->total;
    const unsigned char *p = h->buf;
    size_t n = h->nbuf;
    for (; n >= 8; p += 8, n -= 8) x = rotl(x ^ round1(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) x = rotl(x ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3, p += 4, n -= 4;
    for (; n; p++, n--) x = rotl(x ^ (uint64_t)*p * P5, 11) * P1;
    x ^= x >> 33;
    x *= P2;
    x ^= x >> 29;
    x *= P3;
    x ^= x >> 32;
    return x;
}

uint64_t lilac_hash64(const void *p, size_t n, uint64_t seed) {
    lilac_hash h;
    lilac_hash_init(&h, seed);
    lilac_hash_update(&h, p, n);
    return lilac_hash_final(&h);
}
