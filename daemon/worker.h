/* worker.h -- the DB worker: one thread that runs the store operations of
 * HTTP requests (export, import, job creation and cancel), so the request
 * threads never wait on SQLite.
 *
 * A request handler suspends its connection, submits a closure and
 * returns; the closure runs here with the worker's own store handle, fills
 * the request's response and resumes the connection. Items run one at a
 * time, in submission order. */
#ifndef ATTUNED_WORKER_H
#define ATTUNED_WORKER_H

#include "../db/store.h"

typedef struct worker worker;

/* Work item: runs on the worker thread with its store. */
typedef void (*worker_fn)(void *arg, store *st);

/* Start the worker thread; it owns st from now on (worker_stop closes
 * it). Every period_s seconds (0: never) and once at start it calls
 * tick(tick_ctx, st) between items (metrics refresh). On error *out is NULL
 * and st is left to the caller. */
int worker_start(store *st, worker_fn tick, void *tick_ctx, int period_s, worker **out);

/* Queue fn(arg). Returns 0, or ATTUNE_EBUSY once worker_stop has begun
 * (fn will not run: the caller answers 503 itself), ATTUNE_ENOMEM. */
int worker_submit(worker *w, worker_fn fn, void *arg);

/* Refuse new items, run every queued one, join the thread, close the
 * store, free w. NULL is a no-op. */
void worker_stop(worker *w);

#endif
