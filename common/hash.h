/* hash.h -- FNV-1a 64-bit hashing and SplitMix64 seeds: stable across hosts. */
#ifndef ATTUNE_HASH_H
#define ATTUNE_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_fnv1a64_init(void) { return 0xcbf29ce484222325ULL; }

static inline uint64_t hash_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* SplitMix64 step: advances *state, returns 64 well-mixed bits. */
static inline uint64_t hash_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#endif
