/* index_listing.h -- the lookup index's cache of backend listings, and the
 * queue of listings wanted from its builder thread.
 *
 * Per (backend kind, device index within the backend, canonical shape key):
 * the tactics the backend's listing (attn_ops.tactics) returned. A listing
 * depends only on those three within one process (the backend is compiled
 * in, its device fixed), so an entry is never stale: it is only evicted.
 *
 * Bounded: at most max_entries entries and max_tactics tactics in all
 * (INDEX_LISTING_MAX_*); a put that would exceed either evicts the least
 * recently used entries first (a get or a put counts as a use). Eviction
 * scans every entry, once per put into a full cache: puts are rare (one
 * per shape a backend lists for), gets are the lookups.
 *
 * Thread-safe: gets take a read lock (many readers at once; a use is an
 * atomic stamp); puts and the queue take the write lock. Its lock is a
 * leaf: nothing else is locked while it is held (lookup/index.c's lock
 * order). It never calls a backend.
 *
 * The queue: listings a lookup could not wait for (a backend whose listing
 * may block, attn_ops.list_cheap == 0), for the index's builder thread to
 * make off the request path. Bounded (INDEX_LISTING_QUEUE_MAX), without
 * repeats: a listing cached, queued or being made is not queued again. */
#ifndef ATTUNE_INDEX_LISTING_H
#define ATTUNE_INDEX_LISTING_H

#include <stdint.h>

#include "../common/device_id.h"
#include "../common/shape.h"
#include "../common/tactic.h"

/* 4096 shapes of a backend's device; at most 2^20 tactics (60 MiB of
 * attn_tactic): a GPU lists a few hundred per shape, so the entry bound
 * is the one that holds. */
#define INDEX_LISTING_MAX_ENTRIES 4096
#define INDEX_LISTING_MAX_TACTICS (1 << 20)
#define INDEX_LISTING_QUEUE_MAX 256

typedef struct index_listing index_listing;

/* One listing to make: whose, and for which shape. */
typedef struct index_listing_req {
    char kind[sizeof ((attn_device_info *)0)->kind]; /* attn_ops.name */
    int index;                                       /* attn_backend_index */
    attn_shape shape;
} index_listing_req;

/* A cache holding at most max_entries entries and max_tactics tactics
 * (<= 0: INDEX_LISTING_MAX_ENTRIES, INDEX_LISTING_MAX_TACTICS). NULL on
 * ENOMEM. */
index_listing *index_listing_new(int max_entries, int max_tactics);
void index_listing_free(index_listing *c);

/* The listing cached for (kind, index, key): its tactics into out[0..max)
 * (the first max when it holds more), marked used. Returns how many it
 * holds (0: the backend listed nothing), or -1 when none is cached. */
int index_listing_get(index_listing *c, const char *kind, int index, const char *key,
                      attn_tactic *out, int max);

/* Cache t[0..n) as the listing of (kind, index, key), replacing the one
 * held, evicting the least recently used entries until both bounds hold
 * (n above max_tactics: not cached). 0 or ATTUNE_ENOMEM (cache unchanged). */
int index_listing_put(index_listing *c, const char *kind, int index, const char *key,
                      const attn_tactic *t, int n);

/* Queue r's listing for the builder. 1 when queued, 0 when it is already
 * cached, queued or being made, ATTUNE_ERANGE when the queue is full (a
 * later miss queues it again). */
int index_listing_want(index_listing *c, const index_listing_req *r);

/* The builder's side: the oldest queued listing into *r, left in the
 * queue (being made: not queued again) until index_listing_done. 1, or 0
 * when the queue is empty. One builder at a time. */
int index_listing_next(index_listing *c, index_listing_req *r);

/* The listing index_listing_next gave is made (cached, or failed): out
 * of the queue. */
void index_listing_done(index_listing *c);

typedef struct index_listing_stats {
    int entries;       /* listings cached */
    int64_t tactics;   /* tactics they hold */
    int64_t evictions; /* entries evicted so far */
    int queued;        /* listings queued or being made */
} index_listing_stats;

void index_listing_stats_get(index_listing *c, index_listing_stats *out);

#endif
