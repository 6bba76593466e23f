/* answer_cache.h -- bounded, per-thread caches of whole answers, keyed by
 * the exact bytes of the question and valid for one generation of the
 * data they were made from.
 *
 * attuned answers GET /v1/tactic again and again for the same few query
 * strings (docs/perf-http.md): an answer made once, for the index's
 * generation G, is what every later identical question gets while the
 * index is still at G. A value is returned only when the caller's current
 * generation equals the one it was stored with, so any change that bumps
 * the generation makes every older answer unreachable at once (and it is
 * released on the next look at its slot): an answer never outlives a
 * change of what it was made from.
 *
 * Each thread has its own table (made on its first put), so a hit takes
 * no lock and no value is ever shared between threads: a value is
 * created, used and released by the one thread that stored it, except in
 * answer_cache_free. A table holds at most `slots` values (direct-mapped
 * by the key's hash: a new key evicts the one in its slot). */
#ifndef ATTUNE_ANSWER_CACHE_H
#define ATTUNE_ANSWER_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* Keys longer than this are not cached (answer_cache_put refuses them). */
#define ANSWER_CACHE_KEY_MAX 512

typedef struct answer_cache answer_cache;

/* Called once for every value the cache lets go of: evicted, stale,
 * replaced, or at answer_cache_free. */
typedef void (*answer_cache_release_fn)(void *value);

/* A cache of `slots` entries per thread (rounded up to a power of two,
 * at least 1), releasing values with release. NULL on ENOMEM. */
answer_cache *answer_cache_new(int slots, answer_cache_release_fn release);

/* Release every value of every thread's table and the cache. Only once no
 * thread uses the cache any more (attuned: after the HTTP server stopped).
 * NULL: nothing. */
void answer_cache_free(answer_cache *c);

/* The calling thread's value for key[0..len) stored at generation gen, or
 * NULL: none, or one of another generation (released now). The value stays
 * the cache's: valid until this thread's next put into c. */
void *answer_cache_get(answer_cache *c, const char *key, size_t len, uint64_t gen);

/* Store value for key[0..len) at generation gen in the calling thread's
 * table, releasing what its slot held. The cache owns value from here on,
 * on failure too (released at once): 0, ATTUNE_ETOOBIG (key longer than
 * ANSWER_CACHE_KEY_MAX) or ATTUNE_ENOMEM. */
int answer_cache_put(answer_cache *c, const char *key, size_t len, uint64_t gen, void *value);

/* Lookups that found a value, and that did not, on every thread so far. */
void answer_cache_counts(answer_cache *c, int64_t *hits, int64_t *misses);

#endif
