/* jobs.c -- the job table and the per-device tuning threads. */
#include "jobs.h"
#include "jobs_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/grow.h"
#include "../kernels/cancel.h"
#include "../tuner/tuner.h"
#include "log.h"
#include "metrics.h"

static double mono_s(void)
{
    return attn_mono_s();
}

int jobs_new(const jobs_config *cfg, jobs **out)
{
    *out = NULL;
    jobs *j = calloc(1, sizeof *j);
    if (j == NULL)
        return ATTUNE_ENOMEM;
    pthread_mutex_init(&j->mu, NULL);
    j->cfg = *cfg;
    if (j->cfg.max_queued <= 0)
        j->cfg.max_queued = JOBS_MAX_QUEUED;
    if (cfg->policy != NULL)
        j->policy = *cfg->policy;
    else
        select_policy_default(&j->policy);
    j->db_path = strdup(cfg->db_path);
    j->devs = calloc(cfg->ndevices > 0 ? (size_t)cfg->ndevices : 1, sizeof *j->devs);
    if (j->db_path == NULL || j->devs == NULL)
        goto fail;
    j->ndevs = cfg->ndevices;
    for (int i = 0; i < j->ndevs; i++) {
        jdev *d = &j->devs[i];
        d->j = j;
        d->dev = cfg->devices[i];
        d->qcap = j->cfg.max_queued + 1;
        miss_account_init(&d->acct, mono_s(), (int64_t)time(NULL));
        if ((d->q = malloc((size_t)d->qcap * sizeof *d->q)) == NULL ||
            (d->kept = calloc(JOBS_RETAIN_SLOTS, sizeof *d->kept)) == NULL)
            goto fail;
        pthread_condattr_t ca; /* timed waits (the retention sweep) on CLOCK_MONOTONIC */
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&d->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    *out = j;
    return 0;
fail:
    for (int i = 0; i < j->ndevs; i++) {
        free(j->devs[i].q);
        free(j->devs[i].kept);
    }
    free(j->devs);
    free(j->db_path);
    pthread_mutex_destroy(&j->mu);
    free(j);
    return ATTUNE_ENOMEM;
}

/* ---- table helpers (j->mu held) */

jobs_view *jobs_find_job(jobs *j, int64_t id)
{
    int lo = 0, hi = j->ntab - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (j->tab[mid].id == id)
            return &j->tab[mid];
        if (j->tab[mid].id < id)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

int jobs_add_job(jobs *j, const jobs_view *v)
{
    if (grow_array(&j->tab, &j->captab, j->ntab, sizeof *j->tab) != 0)
        return ATTUNE_ENOMEM;
    int at = j->ntab;
    while (at > 0 && j->tab[at - 1].id > v->id)
        at--; /* ids grow; this loop only runs for out-of-order rows */
    memmove(&j->tab[at + 1], &j->tab[at], (size_t)(j->ntab - at) * sizeof *j->tab);
    j->tab[at] = *v;
    j->ntab++;
    return 0;
}

jdev *jobs_find_dev(jobs *j, const char *device_id)
{
    for (int i = 0; i < j->ndevs; i++)
        if (strcmp(j->devs[i].dev.info.id, device_id) == 0)
            return &j->devs[i];
    return NULL;
}

static int enqueue(jdev *d, int64_t id)
{
    if (d->qlen == d->qcap) {
        /* a restart may bring back more queued rows than the HTTP limit */
        int cap = d->qcap * 2;
        int64_t *q = malloc((size_t)cap * sizeof *q);
        if (q == NULL)
            return ATTUNE_ENOMEM;
        for (int i = 0; i < d->qlen; i++)
            q[i] = d->q[(d->qhead + i) % d->qcap];
        free(d->q);
        d->q = q;
        d->qhead = 0;
        d->qcap = cap;
    }
    d->q[(d->qhead + d->qlen) % d->qcap] = id;
    d->qlen++;
    pthread_cond_signal(&d->cv);
    return 0;
}

static void view_from_row(jobs_view *v, const store_job *row)
{
    memset(v, 0, sizeof *v);
    v->id = row->id;
    v->kind = row->kind;
    snprintf(v->device_id, sizeof v->device_id, "%s", row->device_id);
    v->state = row->state;
    v->done = row->done;
    v->total = row->total;
    v->created_at = row->created_at;
    v->updated_at = row->updated_at;
    snprintf(v->error, sizeof v->error, "%s", row->error);
}

/* At load, j->mu held: job v of device d, left queued or running, queued
 * again: an explicit one in the job queue, a miss tune in the miss queue
 * (its shape read back; a full queue fails it, the next miss queues it
 * again). 0 or an error of the store or the queue. */
/* At load: a done miss job's shape goes under retention, last asked at
 * the job's updated_at. */
static void retain_loaded(jobs *j, store *st, const jobs_view *v)
{
    jdev *d = jobs_find_dev(j, v->device_id);
    store_job job;
    if (d == NULL || store_job_get(st, v->id, &job) != 0)
        return;
    if (job.total >= 1)
        jobs_retain_add(d, &job.shapes[0], v->id, v->updated_at);
    store_job_free(&job);
}

static int requeue(jdev *d, store *st, jobs_view *v)
{
    if (v->kind != STORE_JOB_MISS)
        return enqueue(d, v->id);
    store_job job;
    int rc = store_job_get(st, v->id, &job);
    if (rc == 0 && job.total >= 1 && jobs_miss_resume(d, v, &job.shapes[0]) != 0) {
        v->state = STORE_JOB_FAILED;
        snprintf(v->error, sizeof v->error, "not resumed: the miss queue is full");
        store_job_update(st, v->id, v->state, v->done, v->error);
    }
    store_job_free(&job);
    return rc;
}

int jobs_load(jobs *j, store *st, int *requeued)
{
    store_job *rows = NULL;
    int n = 0;
    *requeued = 0;
    int rc = store_jobs_list(st, -1, &rows, &n);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < n && rc == 0; i++) {
        jobs_view v;
        view_from_row(&v, &rows[i]);
        if (v.state == STORE_JOB_QUEUED || v.state == STORE_JOB_RUNNING) {
            jdev *d = jobs_find_dev(j, v.device_id);
            if (d == NULL) {
                v.state = STORE_JOB_FAILED;
                snprintf(v.error, sizeof v.error, "device %s is not on this host",
                         v.device_id);
                store_job_update(st, v.id, v.state, v.done, v.error);
            } else {
                if (v.state == STORE_JOB_RUNNING)
                    store_job_update(st, v.id, STORE_JOB_QUEUED, v.done, NULL);
                v.state = STORE_JOB_QUEUED;
                if ((rc = requeue(d, st, &v)) == 0)
                    (*requeued)++;
            }
        }
        jobs_miss_count(j, &v);
        if (v.kind == STORE_JOB_MISS && v.state == STORE_JOB_DONE)
            retain_loaded(j, st, &v);
        if (rc == 0)
            rc = jobs_add_job(j, &v);
    }
    pthread_mutex_unlock(&j->mu);
    free(rows);
    return rc;
}

/* ---- the device thread */

/* Tuner options of a device thread: the daemon's policy and budget, the
 * device's cancel flag, committed rows to jobs_config.committed. */
void jobs_run_opts(jdev *d, tuner_opts *o)
{
    jobs *j = d->j;
    tuner_opts_default(o);
    o->policy = &j->policy;
    o->cancel = &d->cancel;
    if (j->cfg.budget_ms > 0)
        o->budget_ms = j->cfg.budget_ms;
    o->committed = j->cfg.committed;
    o->committed_ctx = j->cfg.committed_ctx;
}

int jobs_on_progress(void *ctx, const tuner_progress *p)
{
    run_ctx *c = ctx;
    /* a new row committed or a new tactic started (the screening starts
     * each tactic at the same row count: docs/api.md promises updated_at
     * moves with each tactic started) */
    if (p->tactic_index != c->last_tactic || p->tactic != c->last_name) {
        c->last_tactic = p->tactic_index;
        c->last_name = p->tactic;
        jobs *j = c->d->j;
        pthread_mutex_lock(&j->mu);
        jobs_view *v = jobs_find_job(j, c->job);
        if (v != NULL) {
            v->tactic_index = p->tactic_index;
            v->tactic_count = p->tactic_count;
            snprintf(v->shape, sizeof v->shape, "%s", p->shape_key ? p->shape_key : "");
            snprintf(v->tactic, sizeof v->tactic, "%s", p->tactic ? p->tactic : "");
            v->updated_at = (int64_t)time(NULL); /* progress shows in GET /v1/jobs/ID */
        }
        pthread_mutex_unlock(&j->mu);
    }
    return c->d->cancel;
}

/* Record a job's progress in memory and in its row. */
void jobs_set_state(jdev *d, store *st, int64_t id, store_job_state state, int done,
                      const char *error)
{
    jobs *j = d->j;
    if (store_job_update(st, id, state, done, error) != 0)
        log_event(LOGL_ERROR, "job_update_failed", "job=%lld", (long long)id);
    pthread_mutex_lock(&j->mu);
    jobs_view *v = jobs_find_job(j, id);
    if (v != NULL) {
        int next_shape = done != v->done;
        v->state = state;
        v->done = done;
        v->updated_at = (int64_t)time(NULL);
        if (error != NULL)
            snprintf(v->error, sizeof v->error, "%s", error);
        if (state != STORE_JOB_RUNNING || next_shape) {
            v->shape[0] = v->tactic[0] = 0;
        }
        if (state != STORE_JOB_RUNNING)
            v->tactic_index = v->tactic_count = 0;
        else if (next_shape)
            v->tactic_index = 0; /* the next shape starts: not "tactic n of n" of
                                    the last one, so progress never goes back */
    }
    pthread_mutex_unlock(&j->mu);
}

static void run_job(jdev *d, store *st, int64_t id)
{
    jobs *j = d->j;
    store_job job;
    memset(&job, 0, sizeof job);
    char err[256] = "";
    int done = 0, nerr = 0, fatal = 0;
    int rc = store_job_get(st, id, &job);
    if (rc != 0) {
        snprintf(err, sizeof err, "cannot load the job: %s", attune_strerror(rc));
        jobs_set_state(d, st, id, STORE_JOB_FAILED, 0, err);
        return;
    }
    done = job.done < 0 ? 0 : job.done;
    jobs_set_state(d, st, id, STORE_JOB_RUNNING, done, NULL);
    log_event(LOGL_INFO, "job_start", "job=%lld device=%s done=%d total=%d", (long long)id,
              d->dev.info.id, done, job.total);

    tuner_opts o;
    jobs_run_opts(d, &o);
    run_ctx c = {.d = d, .job = id};
    o.progress = jobs_on_progress;
    o.ctx = &c;

    for (int i = done; i < job.total; i++) {
        if (d->cancel)
            break;
        tuner_shape_result res;
        memset(&res, 0, sizeof res);
        c.last_tactic = -1;
        rc = tuner_run_shape(st, &d->dev, &job.shapes[i], &o, i, job.total, &res);
        o.clock_ref_mhz = res.clock_ref_mhz; /* the job's start clock (tuner/throttle.h) */
        if (res.throttled > 0)
            log_event(LOGL_WARN, "tactics_throttled", "job=%lld throttled=%d retimed=%d",
                      (long long)id, res.throttled, res.retimed);
        if (res.noisy > 0) /* stored flagged, out of answers (tuner/noise.h) */
            log_event(LOGL_WARN, "tactics_noisy", "job=%lld noisy=%d retimed=%d",
                      (long long)id, res.noisy, res.noise_retimed);
        metrics_measurements_add(res.measured);
        if (rc == ATTUNE_ECANCELED)
            break;
        if (rc != 0) {
            char key[ATTN_SHAPE_KEY_MAX];
            attn_shape_key(&job.shapes[i], key, sizeof key);
            log_event(LOGL_WARN, "job_shape_failed", "job=%lld shape=%s error=\"%s\"",
                      (long long)id, key, attune_strerror(rc));
            if (nerr++ == 0)
                snprintf(err, sizeof err, "%s: %s", key, attune_strerror(rc));
            if (rc == ATTUNE_EDB || rc == ATTUNE_EGPULOST) {
                fatal = rc; /* the store or the GPU is gone: stop, keep progress */
                break;
            }
        }
        done = i + 1;
        jobs_set_state(d, st, id, STORE_JOB_RUNNING, done, NULL);
    }

    store_job_state final;
    pthread_mutex_lock(&j->mu);
    int canceled = d->cancel && done < job.total;
    int by_user = d->user_cancel;
    pthread_mutex_unlock(&j->mu);
    if (fatal == ATTUNE_EGPULOST) {
        /* the next process resumes it, unless a DELETE came meanwhile */
        final = canceled && by_user ? STORE_JOB_CANCELED : STORE_JOB_QUEUED;
    } else if (fatal) {
        final = STORE_JOB_FAILED;
    } else if (canceled) {
        /* DELETE: canceled for good. Shutdown: queued, resumed at start. */
        final = by_user ? STORE_JOB_CANCELED : STORE_JOB_QUEUED;
    } else if (nerr > 0) {
        final = STORE_JOB_FAILED;
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%d of %d shapes failed; first: %.180s", nerr, job.total,
                 err);
        memcpy(err, tmp, sizeof err);
    } else {
        final = STORE_JOB_DONE;
    }
    jobs_set_state(d, st, id, final, done, final == STORE_JOB_FAILED ? err : NULL);
    log_event(LOGL_INFO, "job_end", "job=%lld state=%s done=%d total=%d", (long long)id,
              store_job_state_name(final), done, job.total);
    store_job_free(&job);
    if (fatal == ATTUNE_EGPULOST)
        jobs_gpu_lost(d, id);
}

void jobs_gpu_lost(jdev *d, int64_t job)
{
    log_event(LOGL_ERROR, "gpu_context_lost", "device=%s job=%lld next=\"restart the process\"",
              d->dev.info.id, (long long)job);
    pthread_mutex_lock(&d->j->mu);
    int first = !d->lost;
    d->lost = 1;
    pthread_mutex_unlock(&d->j->mu);
    if (first && d->j->cfg.gpu_lost != NULL)
        d->j->cfg.gpu_lost(d->j->cfg.gpu_lost_ctx, d->dev.info.id);
}

/* j->mu held, the device idle: wait for work until the next retention
 * sweep is due, then run it (the lock dropped meanwhile). 1 when a sweep
 * ran, so the caller looks at the queues again; 0 after a wake-up. */
static int idle_sweep(jdev *d, store *st)
{
    double period = jobs_retain_s(d->j) / 4;
    period = period < JOBS_RETAIN_PERIOD_S ? (period < 1 ? 1 : period) : JOBS_RETAIN_PERIOD_S;
    if (attn_mono_s() < d->next_sweep) {
        struct timespec ts;
        ts.tv_sec = (time_t)d->next_sweep;
        ts.tv_nsec = (long)((d->next_sweep - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&d->cv, &d->j->mu, &ts);
        return 0;
    }
    d->next_sweep = attn_mono_s() + period;
    pthread_mutex_unlock(&d->j->mu);
    jobs_retain_sweep(d, st);
    pthread_mutex_lock(&d->j->mu);
    return 1;
}

static void *device_main(void *arg)
{
    jdev *d = arg;
    jobs *j = d->j;
    store *st = NULL;
    char err[ATTUNE_ERRLEN];
    char name[16];
    /* "attuned-job-cpu", "attuned-job-0": visible in top -H, ps -L; the
     * benchmark pins this thread by name */
    if (strcmp(d->dev.info.kind, "cpu") == 0)
        snprintf(name, sizeof name, "attuned-job-cpu");
    else
        snprintf(name, sizeof name, "attuned-job-%u", (unsigned)d->dev.info.index % 1000u);
    prctl(PR_SET_NAME, name, 0, 0, 0);
    if (store_open(j->db_path, 0, &st, err, sizeof err) != 0) {
        log_event(LOGL_ERROR, "job_thread_store_failed", "device=%s error=%s",
                  d->dev.info.id, LOG_Q(err));
        return NULL;
    }
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->stopping && (d->lost || (d->qlen == 0 && d->mlen == 0)) &&
               !idle_sweep(d, st))
            continue;
        if (j->stopping)
            break;
        if (d->lost)
            continue; /* a lost device runs nothing until the process ends */
        if (d->qlen == 0) {
            jobs_miss_run_next(d, st); /* no explicit job: a shape a lookup missed */
            continue;
        }
        int64_t id = d->q[d->qhead];
        d->qhead = (d->qhead + 1) % d->qcap;
        d->qlen--;
        jobs_view *v = jobs_find_job(j, id);
        if (v == NULL || v->state != STORE_JOB_QUEUED)
            continue; /* canceled while queued */
        v->state = STORE_JOB_RUNNING;
        d->running = id;
        d->cancel = 0;
        d->user_cancel = 0;
        pthread_mutex_unlock(&j->mu);
        run_job(d, st, id);
        pthread_mutex_lock(&j->mu);
        d->running = 0;
    }
    pthread_mutex_unlock(&j->mu);
    store_close(st);
    return NULL;
}

int jobs_start(jobs *j)
{
    for (int i = 0; i < j->ndevs; i++) {
        if (pthread_create(&j->devs[i].th, NULL, device_main, &j->devs[i]) != 0)
            return ATTUNE_ENOMEM;
        j->devs[i].started = 1;
    }
    return 0;
}

/* ---- requests (HTTP and DB worker threads) */

static int room_locked(jobs *j, const char *device_id, jdev **out)
{
    jdev *d = jobs_find_dev(j, device_id);
    if (d == NULL)
        return ATTUNE_ENODEV;
    if (j->stopping || d->qlen >= j->cfg.max_queued)
        return ATTUNE_EBUSY;
    *out = d;
    return 0;
}

int jobs_stopping(jobs *j)
{
    pthread_mutex_lock(&j->mu);
    int s = j->stopping;
    pthread_mutex_unlock(&j->mu);
    return s;
}

int jobs_check_room(jobs *j, const char *device_id)
{
    jdev *d;
    pthread_mutex_lock(&j->mu);
    int rc = room_locked(j, device_id, &d);
    pthread_mutex_unlock(&j->mu);
    return rc;
}

int jobs_submit(jobs *j, store *st, const char *device_id, const attn_shape *shapes, int n,
                jobs_view *out)
{
    jdev *d;
    int rc = jobs_check_room(j, device_id);
    if (rc != 0)
        return rc;
    int64_t id = 0;
    if ((rc = store_job_create(st, device_id, shapes, n, &id)) != 0)
        return rc;
    jobs_view v;
    memset(&v, 0, sizeof v);
    v.id = id;
    snprintf(v.device_id, sizeof v.device_id, "%s", device_id);
    v.state = STORE_JOB_QUEUED;
    v.total = n;
    v.created_at = v.updated_at = (int64_t)time(NULL);
    pthread_mutex_lock(&j->mu);
    rc = jobs_add_job(j, &v);
    if (rc == 0 && (rc = room_locked(j, device_id, &d)) == 0)
        rc = enqueue(d, id);
    pthread_mutex_unlock(&j->mu);
    if (rc != 0) {
        /* the row exists: do not leave it queued for the next start */
        store_job_update(st, id, STORE_JOB_FAILED, 0, "not queued: daemon busy or stopping");
        pthread_mutex_lock(&j->mu);
        jobs_view *pv = jobs_find_job(j, id);
        if (pv != NULL)
            pv->state = STORE_JOB_FAILED;
        pthread_mutex_unlock(&j->mu);
        return rc;
    }
    *out = v;
    return 0;
}

int jobs_get(jobs *j, int64_t id, jobs_view *out)
{
    pthread_mutex_lock(&j->mu);
    jobs_view *v = jobs_find_job(j, id);
    if (v != NULL)
        *out = *v;
    pthread_mutex_unlock(&j->mu);
    return v != NULL ? 0 : ATTUNE_ENOTFOUND;
}

int jobs_list(jobs *j, jobs_view **out, int *n)
{
    int rc = 0;
    pthread_mutex_lock(&j->mu);
    *out = malloc((j->ntab > 0 ? (size_t)j->ntab : 1) * sizeof **out);
    if (*out == NULL) {
        rc = ATTUNE_ENOMEM;
        *n = 0;
    } else {
        if (j->ntab > 0) /* j->tab may be NULL: memcpy(NULL, 0) is UB */
            memcpy(*out, j->tab, (size_t)j->ntab * sizeof **out);
        *n = j->ntab;
    }
    pthread_mutex_unlock(&j->mu);
    return rc;
}

/* j->mu held: id out of d's job ring and its miss ring, so a job canceled
 * while queued gives its room back at once (room_locked counts the ring:
 * a ring full of canceled ids answered 503). */
static void unqueue(jdev *d, int64_t id)
{
    for (int k = 0; k < d->qlen; k++)
        if (d->q[(d->qhead + k) % d->qcap] == id) {
            for (; k + 1 < d->qlen; k++)
                d->q[(d->qhead + k) % d->qcap] = d->q[(d->qhead + k + 1) % d->qcap];
            d->qlen--;
            break;
        }
    for (int k = 0; k < d->mlen; k++)
        if (d->miss[(d->mhead + k) % MISS_MAX_QUEUED].job == id) {
            for (; k + 1 < d->mlen; k++)
                d->miss[(d->mhead + k) % MISS_MAX_QUEUED] =
                    d->miss[(d->mhead + k + 1) % MISS_MAX_QUEUED];
            d->mlen--;
            break;
        }
}

/* j->mu held: cancel v, not queued (or its canceled row already written).
 * Queued: canceled in memory and out of its rings. Running: the device
 * thread stops it after the tactic in flight and writes it canceled.
 * Done or failed: ATTUNE_ESTATE. */
static int cancel_locked(jobs *j, jobs_view *v)
{
    jdev *d = jobs_find_dev(j, v->device_id);
    switch (v->state) {
    case STORE_JOB_QUEUED:
        v->state = STORE_JOB_CANCELED;
        v->updated_at = (int64_t)time(NULL);
        if (d != NULL)
            unqueue(d, v->id);
        return 0;
    case STORE_JOB_RUNNING:
        if (d != NULL && d->running == v->id) {
            d->user_cancel = 1;
            d->cancel = 1;
        }
        v->cancel_requested = 1;
        return 0;
    case STORE_JOB_CANCELED:
        return 0;
    default:
        return ATTUNE_ESTATE; /* done or failed: nothing to cancel */
    }
}

int jobs_cancel(jobs *j, store *st, int64_t id, jobs_view *out)
{
    pthread_mutex_lock(&j->mu);
    jobs_view *v = jobs_find_job(j, id);
    if (v == NULL) {
        pthread_mutex_unlock(&j->mu);
        return ATTUNE_ENOTFOUND;
    }
    int rc = 0;
    if (v->state != STORE_JOB_QUEUED) {
        rc = cancel_locked(j, v);
        *out = *v;
        pthread_mutex_unlock(&j->mu);
        return rc;
    }
    int done = v->done;
    pthread_mutex_unlock(&j->mu);
    /* Queued: the row first, memory after, so a failing store leaves both
     * queued. Meanwhile the device thread may take the job up (then it is
     * running: canceled as one) or even end it (the row follows memory). */
    if (store_job_update(st, id, STORE_JOB_CANCELED, done, NULL) != 0) {
        if (jobs_get(j, id, out) != 0)
            return ATTUNE_ENOTFOUND;
        return ATTUNE_EDB;
    }
    pthread_mutex_lock(&j->mu);
    v = jobs_find_job(j, id);
    if (v == NULL) {
        pthread_mutex_unlock(&j->mu);
        return ATTUNE_ENOTFOUND;
    }
    rc = cancel_locked(j, v);
    *out = *v;
    pthread_mutex_unlock(&j->mu);
    if (rc == ATTUNE_ESTATE &&
        store_job_update(st, id, out->state, out->done, out->error[0] ? out->error : NULL) != 0)
        log_event(LOGL_ERROR, "job_update_failed", "job=%lld", (long long)id);
    return rc;
}

int jobs_any_for_device(jobs *j, const char *device_id)
{
    int any = 0;
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->ntab && !any; i++)
        any = strcmp(j->tab[i].device_id, device_id) == 0;
    pthread_mutex_unlock(&j->mu);
    return any;
}

void jobs_counts(jobs *j, int counts[5])
{
    memset(counts, 0, 5 * sizeof counts[0]);
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < j->ntab; i++)
        if ((unsigned)j->tab[i].state < 5)
            counts[j->tab[i].state]++;
    pthread_mutex_unlock(&j->mu);
}

int jobs_queue_depths(jobs *j, metrics_queue *out, int max)
{
    miss_limits lim = jobs_miss_limits(j);
    pthread_mutex_lock(&j->mu);
    int n = j->ndevs < max ? j->ndevs : max;
    for (int i = 0; i < n; i++) {
        snprintf(out[i].device, sizeof out[i].device, "%s", j->devs[i].dev.info.id);
        /* from the table, as GET /v1/jobs lists them */
        out[i].jobs = 0;
        for (int k = 0; k < j->ntab; k++)
            out[i].jobs += j->tab[k].state == STORE_JOB_QUEUED &&
                           strcmp(j->tab[k].device_id, out[i].device) == 0;
        out[i].misses = j->devs[i].mlen;
        out[i].miss_running = j->devs[i].miss_running[0] != 0;
        out[i].miss_today = miss_taken_today(&j->devs[i].acct, (int64_t)time(NULL));
        out[i].miss_quota = miss_quota(&lim);
        out[i].refused_budget = j->devs[i].acct.refused_budget;
        out[i].refused_quota = j->devs[i].acct.refused_quota;
        out[i].miss_kept = atomic_load(&j->devs[i].nkept);
        out[i].miss_expired = j->devs[i].expired;
    }
    pthread_mutex_unlock(&j->mu);
    return n;
}

void jobs_forgotten(jdev *d, const int64_t *ids, int n)
{
    jobs *j = d->j;
    pthread_mutex_lock(&j->mu);
    for (int i = 0; i < n; i++) {
        jobs_view *v = jobs_find_job(j, ids[i]);
        if (v != NULL) {
            int at = (int)(v - j->tab);
            memmove(v, v + 1, (size_t)(j->ntab - at - 1) * sizeof *v);
            j->ntab--;
        }
    }
    d->expired++;
    pthread_mutex_unlock(&j->mu);
}

void jobs_stop(jobs *j)
{
    if (j == NULL)
        return;
    pthread_mutex_lock(&j->mu);
    j->stopping = 1;
    for (int i = 0; i < j->ndevs; i++) {
        j->devs[i].cancel = 1; /* user_cancel kept: a DELETE still wins */
        pthread_cond_signal(&j->devs[i].cv);
    }
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < j->ndevs; i++)
        if (j->devs[i].started) {
            pthread_join(j->devs[i].th, NULL);
            j->devs[i].started = 0;
        }
}

void jobs_free(jobs *j)
{
    if (j == NULL)
        return;
    for (int i = 0; i < j->ndevs; i++) {
        free(j->devs[i].q);
        free(j->devs[i].kept);
        pthread_cond_destroy(&j->devs[i].cv);
    }
    free(j->devs);
    free(j->tab);
    free(j->db_path);
    pthread_mutex_destroy(&j->mu);
    free(j);
}
