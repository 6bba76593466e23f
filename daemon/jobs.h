/* jobs.h -- tuning jobs: one worker thread per local device.
 *
 * A job is a row of the store (store_job_*) and an entry of an in-memory
 * table that GET /v1/jobs reads without SQLite. Each device thread owns a
 * store handle that the tuner writes through, hands each committed row to
 * jobs_config.committed (attuned: sync_row, so the lookup index follows
 * without reading back), and runs its device's jobs one at a time, oldest
 * first.
 *
 * Kinds: `tune` (POST /v1/tune, the first-start grid) and `miss` (tune on
 * miss, one shape: jobs_miss.c, below).
 *
 * States: queued -> running -> done | failed | canceled. A DELETE cancels a
 * queued job at once and a running one between tactics (tuner_opts.cancel);
 * what was committed stays. Shutdown interrupts a running job the same way
 * but leaves its row queued, with its progress, so the next start resumes
 * it (the tuner skips measurements already committed). */
#ifndef ATTUNED_JOBS_H
#define ATTUNED_JOBS_H

#include "../db/store.h"
#include "../tuner/miss_policy.h"
#include "../tuner/select.h"
#include "../lookup/index.h"
#include "metrics.h"

/* Queued jobs per device before POST /v1/tune answers 503. */
#define JOBS_MAX_QUEUED 64
/* Shapes in one job (POST /v1/tune), as a grid. */
#define JOBS_MAX_SHAPES 4096

typedef struct jobs jobs;

typedef struct jobs_config {
    const char *db_path;          /* each thread opens its own handles */
    const attn_device *devices;   /* local devices: one thread each (copied) */
    int ndevices;
    index_state *ix;              /* ranks tune-on-miss tactics (index_predict_top) */
    /* every committed row and winner mark (tuner_opts.committed); NULL: none */
    void (*committed)(void *ctx, const store_measurement *m);
    void *committed_ctx;
    const select_policy *policy;  /* the tuner's; NULL: defaults */
    double budget_ms;             /* tuner timing budget per tactic; <= 0: default */
    int max_queued;               /* per device; <= 0: JOBS_MAX_QUEUED */
    int no_tune_on_miss;          /* 1: jobs_miss never queues */
    double miss_budget_s;         /* a miss tune's whole budget, admission and
                                     deadline; <= 0: MISS_BUDGET_S */
    int miss_quota;               /* shapes tuned on miss per device and UTC day;
                                     <= 0: MISS_QUOTA */
    double miss_retain_s;         /* a shape tuned on miss that no lookup asked for
                                     this long is forgotten; <= 0: JOBS_MISS_RETAIN_S */
    /* A tune lost the device's context (ATTUNE_EGPULOST: a kernel faulted,
     * nothing more runs on it in this process): called from its job
     * thread, once per device, after the job was left queued (resumed by
     * the next process, the faulting tactic stored failed) or canceled
     * (a DELETE came meanwhile). NULL: none. */
    void (*gpu_lost)(void *ctx, const char *device_id);
    void *gpu_lost_ctx;
} jobs_config;

typedef struct jobs_view {
    int64_t id;
    store_job_kind kind;          /* tune (POST /v1/tune) or miss (tune on miss) */
    char device_id[64];
    store_job_state state;
    int done, total;              /* shapes */
    int tactic_index, tactic_count; /* running: position within the shape */
    char shape[ATTN_SHAPE_KEY_MAX];   /* running: the shape being tuned, "" between */
    char tactic[ATTN_TACTIC_STR_MAX]; /* running: the tactic being measured, "" between */
    int cancel_requested;
    int64_t created_at;
    int64_t updated_at;           /* last state change or progress: moves at each
                                     tactic while running (the row: per shape) */
    char error[256];
} jobs_view;

/* New job table (no threads yet). 0 or ATTUNE_ENOMEM. */
int jobs_new(const jobs_config *cfg, jobs **out);

/* Load every job row from st. Queued and running rows of local devices are
 * queued again (running ones written back as queued); those of devices not
 * on this host are marked failed. *requeued: how many. Call before
 * jobs_start. */
int jobs_load(jobs *j, store *st, int *requeued);

/* Start the device threads. 0 or ATTUNE_ENOMEM (threads already started
 * are stopped by jobs_stop). */
int jobs_start(jobs *j);

/* 0 when device_id is a local device with room in its queue, ATTUNE_ENODEV
 * when it is not local, ATTUNE_EBUSY when its queue is full or the daemon
 * is stopping (jobs_stopping tells which). */
int jobs_check_room(jobs *j, const char *device_id);
/* 1 once jobs_stop has begun. */
int jobs_stopping(jobs *j);

/* Create a job row through st (the caller's handle) and queue it.
 * 0 (view in *out), ATTUNE_ENODEV, ATTUNE_EBUSY, ATTUNE_EDB. */
int jobs_submit(jobs *j, store *st, const char *device_id, const attn_shape *shapes, int n,
                jobs_view *out);

/* Copy of job id. 0 or ATTUNE_ENOTFOUND. */
int jobs_get(jobs *j, int64_t id, jobs_view *out);

/* Copy of every job, oldest first; *out malloc'd. */
int jobs_list(jobs *j, jobs_view **out, int *n);

/* Cancel job id: a queued one becomes canceled now (row written through
 * st), a running one is asked to stop after the tactic in flight
 * (cancel_requested). Returns 0 with the job's view after the call, or
 * ATTUNE_ENOTFOUND, ATTUNE_ESTATE (already done or failed; view filled),
 * ATTUNE_EDB. Canceling a canceled job is 0. */
int jobs_cancel(jobs *j, store *st, int64_t id, jobs_view *out);

/* ---- tune on miss (issue 10, issue 29 items 1-2, issue 28 item 2)
 *
 * A lookup whose answer is not `measured` asks jobs_miss to queue its
 * shape on that local device: in memory (no SQLite on the lookup path),
 * behind every explicit job. Which shapes are taken, when and how is the
 * policy's (tuner/miss_policy.h: dedup, retained shapes, the daily quota
 * and its UTC day, the budget priced by tuner/tune_cost.h through
 * daemon/admit.h, the rate, the queue's size, the quick pass, giving way,
 * requeues); this module schedules: the queue's storage and lock, the
 * device thread's passes, the job rows, logs and metrics. A refused
 * lookup is told why (JOBS_MISS_REFUSED).
 *
 * When its device thread takes the shape up it becomes a job row of kind
 * `miss` (GET /v1/jobs, `attune jobs`, cancellable with DELETE): first the
 * quick pass (rows only: the shape is not `measured` from a partial
 * tune), then every tactic, whose end marks the winner: only then is the
 * shape `measured` and the job done. The whole tune stops at the miss
 * budget (kernels included, kernels/cancel.h): the job fails, its rows
 * stay, and the next miss resumes it. An explicit job arriving, or a
 * newly missed shape during a full pass, makes it give way after the
 * tactic in flight: back in the queue, measured tactics not timed again.
 * Shutdown leaves the row queued; the next start resumes it. */
/* Retention: a shape a miss job completed, not asked for again (answered
 * `measured`) within JOBS_MISS_RETAIN_S, has its rows on the device and its
 * miss jobs deleted, unless an explicit job tuned it too. Checked every
 * JOBS_RETAIN_PERIOD_S (a quarter of the retention when that is shorter)
 * by the idle device thread; JOBS_RETAIN_SLOTS shapes tracked per device
 * (200 a day for 30 days fit; beyond, a shape is kept for good). */
#define JOBS_MISS_RETAIN_S (30.0 * 86400)
#define JOBS_RETAIN_PERIOD_S 3600.0
#define JOBS_RETAIN_SLOTS 8192

enum {
    JOBS_MISS_NONE = MISS_NONE,
    JOBS_MISS_QUEUED = MISS_QUEUED,
    JOBS_MISS_RUNNING = MISS_RUNNING,
    JOBS_MISS_REFUSED = MISS_REFUSED
};

/* Queue shape s (canonical key key, as the lookup built it) of local
 * device device_id for tuning. Returns JOBS_MISS_QUEUED (queued now or
 * already), JOBS_MISS_RUNNING (being tuned now), JOBS_MISS_REFUSED (why:
 * "predicted 9.6 min (budget 60 s)", "daily quota of 200 shapes
 * reached", or "deferred: ..." while the index's builder lists the
 * device's tactics for s, not counted as a refusal), or JOBS_MISS_NONE
 * (tune on miss off, not a local device, queue full, over the rate,
 * stopping). Never blocks on I/O. */
int jobs_miss(jobs *j, const char *device_id, const attn_shape *s, const char *key, char *why,
              size_t whylen);

/* A lookup answered `measured` for shape key on local device device_id:
 * if tune on miss completed that shape, it was asked for again (retention).
 * Lock-free: atomics only. */
void jobs_asked(jobs *j, const char *device_id, const char *key);

/* 1 when any job (any state) exists for device_id. */
int jobs_any_for_device(jobs *j, const char *device_id);

/* Jobs by state (index: store_job_state). */
void jobs_counts(jobs *j, int counts[5]);

/* Queue depth of each local device (explicit jobs waiting, shapes queued
 * by tune on miss) into out[0..max); returns how many were written. */
int jobs_queue_depths(jobs *j, metrics_queue *out, int max);

/* Stop: refuse new jobs, interrupt running ones between tactics (rows left
 * queued for the next start), join the threads. */
void jobs_stop(jobs *j);

/* Free (after jobs_stop). NULL is a no-op. */
void jobs_free(jobs *j);

#endif
