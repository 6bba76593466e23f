/* jobs_internal.h -- what jobs.c and jobs_miss.c share: the job table, a
 * device's queues and the helpers both call. Not for other modules. */
#ifndef ATTUNED_JOBS_INTERNAL_H
#define ATTUNED_JOBS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "../tuner/tuner.h"
#include "jobs.h"

/* A shape a lookup missed, waiting for its device thread. */
typedef struct miss_entry {
    attn_shape s;
    int64_t job;             /* its job row; 0 until the device thread takes it up */
    int full;                /* 1: its quick pass is done (only the full pass left) */
} miss_entry;

/* A shape a miss job completed, for retention (jobs_retain.c). Lookups
 * read h and store asked; the device thread owns the rest. */
typedef struct retain_slot {
    _Atomic uint64_t h;      /* hash of its key; 0 empty, 1 a tombstone */
    _Atomic int64_t asked;   /* unix s: the tune's end, then the last lookup */
    int64_t saved;           /* asked as last written to the job row */
    int64_t job;             /* the miss job that completed it */
    attn_shape s;
} retain_slot;

typedef struct jdev {
    jobs *j;
    attn_device dev;
    pthread_t th;
    int started;
    pthread_cond_t cv;
    int64_t *q;              /* ring of queued job ids */
    int qhead, qlen, qcap;
    atomic_int cancel;       /* tuner_opts.cancel of the running job: read by the job
                              * thread without the lock (issue 15 item 4) */
    miss_entry miss[MISS_MAX_QUEUED]; /* ring of shapes missed by lookups */
    int mhead, mlen;
    char miss_running[ATTN_SHAPE_KEY_MAX]; /* "" when none */
    miss_account acct;       /* tune on miss's rate, day count and refusals
                              * (tuner/miss_policy.h), under j->mu */
    retain_slot *kept;       /* JOBS_RETAIN_SLOTS: shapes tuned on miss */
    atomic_int nkept;        /* live slots */
    int64_t expired;         /* shapes forgotten since start (j->mu) */
    double next_sweep;       /* attn_mono_s() of the next retention sweep */
    int user_cancel;         /* the cancel came from DELETE, not shutdown */
    int64_t running;         /* job id, 0 when idle */
    int lost;                /* the device's context is lost: no job runs (j->mu) */
} jdev;

struct jobs {
    pthread_mutex_t mu;      /* guards everything below and every jdev queue */
    jobs_config cfg;
    char *db_path;
    select_policy policy;
    jdev *devs;
    int ndevs;
    jobs_view *tab;          /* sorted by id */
    int ntab, captab;
    int stopping;
};

/* Progress of a running job, for jobs_on_progress. */
typedef struct run_ctx {
    jdev *d;
    int64_t job;
    int last_tactic;         /* the progress last shown: rows committed ... */
    const char *last_name;   /* ... and the tactic measured (the tuner's text) */
} run_ctx;

/* j->mu held: the job with that id, or NULL. */
jobs_view *jobs_find_job(jobs *j, int64_t id);
/* j->mu held: add v to the table. 0 or ATTUNE_ENOMEM. */
int jobs_add_job(jobs *j, const jobs_view *v);
/* j->mu held: the local device, or NULL. */
jdev *jobs_find_dev(jobs *j, const char *device_id);
/* Record a job's progress in memory and in its row (j->mu not held). */
void jobs_set_state(jdev *d, store *st, int64_t id, store_job_state state, int done,
                    const char *error);
/* j->mu not held: job's tune lost d's context (ATTUNE_EGPULOST), the job
 * left queued (or canceled by a DELETE): logged, d runs no more jobs,
 * jobs_config.gpu_lost told (once per device). */
void jobs_gpu_lost(jdev *d, int64_t job);
/* Tuner options of a device thread (its policy, budget, cancel flag). */
void jobs_run_opts(jdev *d, tuner_opts *o);
/* tuner_opts.progress of a job: its view follows each tactic. */
int jobs_on_progress(void *ctx, const tuner_progress *p);

/* j->mu not held: a shape forgotten, counted in d->expired; the views of
 * ids[0..n), its miss jobs the store deleted, dropped from the table. */
void jobs_forgotten(jdev *d, const int64_t *ids, int n);

/* ---- jobs_retain.c */

/* The retention (jobs_config.miss_retain_s or its default), seconds. */
double jobs_retain_s(const jobs *j);
/* Device thread or load: track shape s, completed by miss job job, last
 * asked at asked (unix s). */
void jobs_retain_add(jdev *d, const attn_shape *s, int64_t job, int64_t asked);
/* 1 when a miss job completed the shape of key (and it is not forgotten):
 * a lookup that still finds it not `measured` (no tactic could be timed)
 * does not queue it again. Lock-free. */
int jobs_retain_has(const jdev *d, const char *key);
/* Device thread, no lock: forget what nobody asked for within the
 * retention; save the last-asked times of the others. */
void jobs_retain_sweep(jdev *d, store *st);

/* ---- jobs_miss.c, called by jobs.c */

/* The operator's limits of tune on miss (jobs_config), for the policy. */
miss_limits jobs_miss_limits(const jobs *j);

/* j->mu held, on d's thread, d->mlen > 0: take the next missed shape and
 * tune it (the lock is dropped meanwhile and held again on return). */
void jobs_miss_run_next(jdev *d, store *st);
/* j->mu held, at load: a miss job row v left queued or running goes back
 * in its device's miss queue. 0, or ATTUNE_EBUSY when the queue is full. */
int jobs_miss_resume(jdev *d, const jobs_view *v, const attn_shape *s);
/* j->mu held, at load: count today's miss jobs of v's device (quota). */
void jobs_miss_count(jobs *j, const jobs_view *v);

#endif
