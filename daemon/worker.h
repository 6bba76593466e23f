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

/* Start the worker thread; it owns st from now on (worker_close closes
 * it). Every period_s seconds (0: never) and once at start it calls
 * tick(tick_ctx, st) between items (metrics refresh). On error *out is NULL
 * and st is left to the caller. */
int worker_start(store *st, worker_fn tick, void *tick_ctx, int period_s, worker **out);

/* The same with n threads (1..8) named name, thread i owning sts[i] (all
 * closed by worker_close), taking items from one queue in submission order;
 * tick runs on thread 0 only. The read pool of GET /v1/winners and
 * /v1/drift: read-only handles (store_open_readonly), so the heavy reads
 * neither queue behind the writer's items nor hold it up. ATTUNE_EINVAL
 * for n out of range; on error *out is NULL and the stores are left to the
 * caller. */
int worker_start_pool(store *const *sts, int n, const char *name, worker_fn tick,
                      void *tick_ctx, int period_s, worker **out);

/* Queue fn(arg). Returns 0, or ATTUNE_EBUSY once worker_close has begun
 * (fn will not run: the caller answers 503 itself), ATTUNE_ENOMEM. Safe
 * until worker_free: HTTP threads may still call it while the daemon
 * stops. */
int worker_submit(worker *w, worker_fn fn, void *arg);

/* Refuse new items (worker_submit answers ATTUNE_EBUSY from now on), run
 * every queued one, join the threads and close their stores. w stays
 * allocated, so a late worker_submit is refused rather than a use after
 * free: worker_free it once no thread can submit (after server_stop). A
 * second call and NULL are no-ops. Called from one thread. */
void worker_close(worker *w);

/* worker_close if not done yet, then free w. NULL is a no-op. */
void worker_free(worker *w);

#endif
