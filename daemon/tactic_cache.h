/* tactic_cache.h -- whole answers of GET /v1/tactic, kept per request
 * thread and answered again without parsing, looking up or formatting
 * (docs/perf-http.md).
 *
 * Key: the raw URI as the client sent it (path and query, byte for byte,
 * conn.h), so one spelling of a question finds only its own answer, and
 * every check of the query (unknown, repeated, malformed arguments) that
 * let it through once lets the same bytes through again. Valid for the
 * index generation its lookup started at (index_generation): any write,
 * pin, reload, model or listing the index takes makes it unreachable.
 * Only answers that tune on miss did not touch are kept: one that queued
 * a shape, or was refused, says the job's state and asks jobs_miss again
 * each time. Errors are never kept. A hit does what the full path does
 * besides the answer: the request's metrics and log line
 * (http_queue_kept), the lookup's metrics, and the retention mark of a
 * miss-tuned shape (jobs_asked). The answer is one libmicrohttpd response
 * object per entry, shared by the connections of its thread as the bare
 * server of bench/http_load.sh shares its one. */
#ifndef ATTUNED_TACTIC_CACHE_H
#define ATTUNED_TACTIC_CACHE_H

#include <stdint.h>

#include "http.h"

/* Answers kept per request thread (evicted by key hash). */
#define TACTIC_CACHE_SLOTS 256

/* Make d's cache (d->answers): 0 or ATTUNE_ENOMEM. Before the HTTP server
 * starts. */
int tactic_cache_start(attuned *d);

/* Release every kept answer: after the HTTP server stopped. */
void tactic_cache_stop(attuned *d);

/* r's answer from the cache, queued: 1 with *ret set, or 0 (no answer
 * kept for r's raw URI at the index's current generation: answer it the
 * long way). */
int tactic_cache_answer(req *r, enum MHD_Result *ret);

/* Queue the answer text[0..len) (malloc'd, taken) of a lookup that read
 * generation gen before it began, and keep it for r's raw URI when
 * cacheable is set (tune on miss was not asked). */
enum MHD_Result tactic_cache_send(req *r, uint64_t gen, const index_answer *ans, int cacheable,
                                  char *text, size_t len);

#endif
