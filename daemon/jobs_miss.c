/* jobs_miss.c -- tune on miss: admission, the miss queue, and each missed
 * shape's tune as a job of kind `miss` (jobs.h says the rules). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../kernels/cancel.h"
#include "../tuner/tuner.h"
#include "admit.h"
#include "jobs_internal.h"
#include "log.h"
#include "metrics.h"

static double miss_budget_s(const jobs *j)
{
    return j->cfg.miss_budget_s > 0 ? j->cfg.miss_budget_s : JOBS_MISS_BUDGET_S;
}

static int miss_quota(const jobs *j)
{
    return j->cfg.miss_quota > 0 ? j->cfg.miss_quota : JOBS_MISS_QUOTA;
}

static int same_shape(const attn_shape *a, const attn_shape *b)
{
    return a->b == b->b && a->hq == b->hq && a->hkv == b->hkv && a->sq == b->sq &&
           a->skv == b->skv && a->d == b->d && a->dtype == b->dtype && a->causal == b->causal;
}

/* ---- admission (lookup threads) */

/* j->mu held: the day's count rolled over at UTC midnight. */
static void roll_day(jdev *d)
{
    int64_t day = (int64_t)time(NULL) / 86400;
    if (day != d->miss_day) {
        d->miss_day = day;
        d->miss_today = 0;
    }
}

/* j->mu held: JOBS_MISS_QUEUED / RUNNING when s is already queued or being
 * tuned, else JOBS_MISS_NONE. */
static int miss_known(jdev *d, const attn_shape *s, const char *key)
{
    if (strcmp(d->miss_running, key) == 0)
        return JOBS_MISS_RUNNING;
    for (int i = 0; i < d->mlen; i++)
        if (same_shape(&d->miss[(d->mhead + i) % JOBS_MISS_MAX_QUEUED].s, s))
            return JOBS_MISS_QUEUED;
    return JOBS_MISS_NONE;
}

/* j->mu held: room by the rate (a token taken) and in the ring. */
static int miss_room(jdev *d)
{
    double now = attn_mono_s();
    d->tokens += (now - d->tokens_at) * JOBS_MISS_RATE;
    if (d->tokens > JOBS_MISS_BURST)
        d->tokens = JOBS_MISS_BURST;
    d->tokens_at = now;
    if (d->tokens < 1.0 || d->mlen == JOBS_MISS_MAX_QUEUED)
        return 0;
    d->tokens -= 1.0;
    return 1;
}

/* The model's word on s: 1 when its whole tune fits the miss budget, else
 * 0 with why filled (no lock held: the index has its own); -1 with why
 * filled when it cannot say yet: the device's listing of s is being made
 * off the lookup path (a later lookup decides). */
static int miss_admit(jobs *j, jdev *d, const attn_shape *s, char *why, size_t whylen)
{
    admit_cost c;
    int rc = j->cfg.ix != NULL
                 ? admit_estimate(j->cfg.ix, &d->dev.info, s, j->cfg.budget_ms, &c)
                 : ATTUNE_ENODEV;
    if (rc == ATTUNE_EBUSY) {
        snprintf(why, whylen, "deferred: listing the device's tactics for this shape; a "
                 "later lookup decides");
        return -1;
    }
    if (rc != 0)
        return 1;
    if (admit_fits(&c, miss_budget_s(j)))
        return 1;
    char what[96];
    snprintf(why, whylen, "refused: %s", admit_describe(&c, miss_budget_s(j), what, sizeof what));
    return 0;
}

int jobs_miss(jobs *j, const char *device_id, const attn_shape *s, const char *key, char *why,
              size_t whylen)
{
    if (j == NULL || j->cfg.no_tune_on_miss)
        return JOBS_MISS_NONE;
    pthread_mutex_lock(&j->mu);
    jdev *d = jobs_find_dev(j, device_id);
    int stopping = j->stopping;
    int state = d == NULL || stopping ? JOBS_MISS_NONE : miss_known(d, s, key);
    /* completed by a miss job already, yet not measured (no tactic could be
     * timed): tuning it again would find the same, a day's quota on one shape */
    int tuned = d != NULL && state == JOBS_MISS_NONE && jobs_retain_has(d, key);
    int quota_left = 0;
    if (d != NULL) {
        roll_day(d);
        quota_left = d->miss_today < miss_quota(j);
    }
    pthread_mutex_unlock(&j->mu);
    if (d == NULL || state != JOBS_MISS_NONE || stopping || tuned)
        return state;
    /* the quota first: past it, a flood costs no pricing */
    int fits = quota_left ? miss_admit(j, d, s, why, whylen) : 1;
    if (fits < 0)
        return JOBS_MISS_REFUSED; /* not counted: no refusal yet */
    pthread_mutex_lock(&j->mu);
    roll_day(d);
    if (!fits) {
        d->refused_budget++;
        state = JOBS_MISS_REFUSED;
    } else if (d->miss_today >= miss_quota(j)) {
        d->refused_quota++;
        snprintf(why, whylen, "refused: daily quota of %d shapes reached", miss_quota(j));
        state = JOBS_MISS_REFUSED;
    } else if ((state = miss_known(d, s, key)) == JOBS_MISS_NONE && !j->stopping &&
               miss_room(d)) {
        d->miss[(d->mhead + d->mlen) % JOBS_MISS_MAX_QUEUED] = (miss_entry){*s, 0, 0};
        d->mlen++;
        d->miss_today++;
        pthread_cond_signal(&d->cv);
        state = JOBS_MISS_QUEUED;
    }
    pthread_mutex_unlock(&j->mu);
    return state;
}

/* ---- at load (j->mu held) */

int jobs_miss_resume(jdev *d, const jobs_view *v, const attn_shape *s)
{
    if (d->mlen == JOBS_MISS_MAX_QUEUED)
        return ATTUNE_EBUSY;
    d->miss[(d->mhead + d->mlen) % JOBS_MISS_MAX_QUEUED] = (miss_entry){*s, v->id, 0};
    d->mlen++;
    pthread_cond_signal(&d->cv);
    return 0;
}

void jobs_miss_count(jobs *j, const jobs_view *v)
{
    jdev *d = v->kind == STORE_JOB_MISS ? jobs_find_dev(j, v->device_id) : NULL;
    if (d == NULL)
        return;
    roll_day(d);
    d->miss_today += v->created_at / 86400 == d->miss_day;
}

/* ---- the device thread */

typedef struct miss_ctx {
    run_ctx run;
    double deadline;         /* attn_mono_s(): the miss budget's end */
    int yield;               /* the full pass: give way to newly missed shapes */
    int yielded;             /* it stopped for one, or for an explicit job */
    int completed;           /* the full pass ran to its end (winner marked) */
    int quick_done;          /* the quick pass ran to its end */
} miss_ctx;

/* Progress of a miss tune: stop on shutdown or cancel (the tuner sees
 * those itself), past the budget (likewise), when an explicit job waits,
 * and in the full pass also when a newly missed shape is queued (its
 * quick pass comes first, so a burst of new shapes gets early rows within
 * seconds). Full passes never give way to each other: that would trade
 * them back and forth without end. */
static int miss_stop(miss_ctx *m)
{
    jdev *d = m->run.d;
    pthread_mutex_lock(&d->j->mu);
    int give_way = d->qlen > 0;
    for (int i = 0; !d->j->stopping && m->yield && i < d->mlen && !give_way; i++)
        give_way = !d->miss[(d->mhead + i) % JOBS_MISS_MAX_QUEUED].full;
    int stop = d->j->stopping || give_way;
    pthread_mutex_unlock(&d->j->mu);
    m->yielded |= give_way;
    return stop || attn_mono_s() > m->deadline;
}

static int miss_progress(void *ctx, const tuner_progress *p)
{
    miss_ctx *m = ctx;
    jobs_on_progress(&m->run, p);
    return miss_stop(m);
}

/* The quick pass over the model's top tactics of e->s: rows, no mark. */
static int quick_pass(jdev *d, store *st, const miss_entry *e, const tuner_opts *o,
                      const char *key)
{
    attn_tactic top[JOBS_MISS_QUICK];
    index_state *ix = d->j->cfg.ix;
    int k = !e->full && ix != NULL
                ? index_predict_top(ix, d->dev.info.id, &e->s, JOBS_MISS_QUICK, top)
                : 0;
    if (k <= 0)
        return 0;
    tuner_opts qo = *o;
    qo.candidates = top; /* the model's best few, not the device's listing */
    qo.ncandidates = k;
    if (qo.budget_ms > JOBS_MISS_QUICK_BUDGET_MS)
        qo.budget_ms = JOBS_MISS_QUICK_BUDGET_MS;
    /* The model's top list is the screen: a screening pass would run each
     * tactic three more times, which for a shape of 80 ms a call (the
     * tenth run's 44776-token prefill) put the quick pass at 3.6 s. */
    qo.screen_factor = 0;
    qo.no_mark = 1; /* only the full pass makes the shape `measured` */
    tuner_shape_result res;
    double t0 = attn_mono_s();
    int rc = tuner_run_shape(st, &d->dev, &e->s, &qo, 0, 1, &res);
    metrics_measurements_add(res.measured);
    log_event(LOGL_INFO, "miss_quick_end",
              "device=%s shape=%s measured=%d screened=%d ms=%.0f prepare_ms=%.0f plan_ms=%.0f "
              "check_ms=%.0f time_ms=%.0f store_ms=%.0f rc=\"%s\"",
              d->dev.info.id, key, res.measured, res.screened, (attn_mono_s() - t0) * 1e3,
              res.prepare_s * 1e3, res.plan_s * 1e3, res.check_s * 1e3,
              (res.screen_s + res.time_s) * 1e3, res.store_s * 1e3,
              rc ? attune_strerror(rc) : "ok");
    return rc;
}

/* Both passes of e's tune into m; the tuner's return code. */
static int miss_passes(jdev *d, store *st, const miss_entry *e, miss_ctx *m, const char *key)
{
    tuner_opts o;
    jobs_run_opts(d, &o);
    o.progress = miss_progress;
    o.ctx = m;
    o.deadline_s = m->deadline;
    int rc = quick_pass(d, st, e, &o, key);
    m->quick_done = rc == 0;
    m->yield = 1;
    if (rc != 0 || miss_stop(m))
        return rc;
    tuner_shape_result res;
    m->run.last_tactic = -1;
    rc = tuner_run_shape(st, &d->dev, &e->s, &o, 0, 1, &res);
    metrics_measurements_add(res.measured);
    m->completed = rc == 0;
    log_event(LOGL_INFO, "miss_full_end", "device=%s shape=%s measured=%d winner=%s rc=\"%s\"",
              d->dev.info.id, key, res.measured, res.winner, rc ? attune_strerror(rc) : "ok");
    return rc;
}

/* j->mu not held: e back in the miss queue, its quick pass done when
 * quick_done (measured tactics are not timed again). 0, or ATTUNE_EBUSY
 * when the queue is full. */
static int miss_requeue(jdev *d, const miss_entry *e, int quick_done)
{
    pthread_mutex_lock(&d->j->mu);
    int room = d->mlen < JOBS_MISS_MAX_QUEUED;
    if (room) {
        d->miss[(d->mhead + d->mlen) % JOBS_MISS_MAX_QUEUED] =
            (miss_entry){e->s, e->job, e->full || quick_done};
        d->mlen++;
    }
    pthread_mutex_unlock(&d->j->mu);
    return room ? 0 : ATTUNE_EBUSY;
}

/* The job's end after its passes (rc): done once the full pass completed;
 * canceled by DELETE; left queued at shutdown (the next start resumes it)
 * or when it gave way (back in the queue); failed past the budget or on
 * an error (its rows stay: the next miss resumes it). */
static void miss_settle(jdev *d, store *st, const miss_entry *e, const miss_ctx *m, int rc,
                        const char *key)
{
    char err[256] = "";
    pthread_mutex_lock(&d->j->mu);
    int stopping = d->j->stopping, by_user = d->user_cancel;
    pthread_mutex_unlock(&d->j->mu);
    store_job_state final = STORE_JOB_FAILED;
    if (m->completed)
        final = STORE_JOB_DONE;
    else if (by_user)
        final = STORE_JOB_CANCELED;
    else if (stopping)
        final = STORE_JOB_QUEUED;
    else if (attn_mono_s() > m->deadline)
        snprintf(err, sizeof err, "over the miss budget of %.0f s: its rows stay, the next "
                 "miss resumes it", miss_budget_s(d->j));
    else if ((rc == 0 || rc == ATTUNE_ECANCELED) && m->yielded)
        final = miss_requeue(d, e, m->quick_done) == 0 ? STORE_JOB_QUEUED : STORE_JOB_FAILED;
    else
        snprintf(err, sizeof err, "%s", attune_strerror(rc));
    if (final == STORE_JOB_FAILED && err[0] == 0)
        snprintf(err, sizeof err, "gave way with the miss queue full: the next miss resumes it");
    jobs_set_state(d, st, e->job, final, final == STORE_JOB_DONE,
                   final == STORE_JOB_FAILED ? err : NULL);
    if (final == STORE_JOB_DONE) /* under retention from now */
        jobs_retain_add(d, &e->s, e->job, (int64_t)time(NULL));
    log_event(LOGL_INFO, "miss_tune_end", "job=%lld device=%s shape=%s state=%s rc=\"%s\"",
              (long long)e->job, d->dev.info.id, key, store_job_state_name(final),
              rc ? attune_strerror(rc) : "ok");
}

/* e's job row, created now for a shape a lookup just missed; running, and
 * d->running so that DELETE reaches it. 0 or the store's error. */
static int miss_job(jdev *d, store *st, miss_entry *e)
{
    int rc = 0;
    if (e->job == 0 &&
        (rc = store_job_create_kind(st, d->dev.info.id, STORE_JOB_MISS, &e->s, 1, &e->job)) == 0) {
        jobs_view v = {.id = e->job, .kind = STORE_JOB_MISS, .state = STORE_JOB_QUEUED, .total = 1};
        snprintf(v.device_id, sizeof v.device_id, "%s", d->dev.info.id);
        v.created_at = v.updated_at = (int64_t)time(NULL);
        pthread_mutex_lock(&d->j->mu);
        rc = jobs_add_job(d->j, &v);
        pthread_mutex_unlock(&d->j->mu);
    }
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&d->j->mu);
    d->running = e->job;
    pthread_mutex_unlock(&d->j->mu);
    jobs_set_state(d, st, e->job, STORE_JOB_RUNNING, 0, NULL);
    return 0;
}

/* j->mu held: the next entry of the miss ring into *e, skipping those
 * whose job was canceled while queued. 1, or 0 when none is left. */
static int miss_pop(jdev *d, miss_entry *e)
{
    while (d->mlen > 0) {
        *e = d->miss[d->mhead];
        d->mhead = (d->mhead + 1) % JOBS_MISS_MAX_QUEUED;
        d->mlen--;
        jobs_view *v = e->job != 0 ? jobs_find_job(d->j, e->job) : NULL;
        if (e->job == 0 || (v != NULL && v->state == STORE_JOB_QUEUED))
            return 1;
    }
    return 0;
}

void jobs_miss_run_next(jdev *d, store *st)
{
    jobs *j = d->j;
    miss_entry e;
    if (!miss_pop(d, &e))
        return;
    char key[ATTN_SHAPE_KEY_MAX];
    attn_shape_key(&e.s, key, sizeof key);
    snprintf(d->miss_running, sizeof d->miss_running, "%s", key);
    d->cancel = 0;
    d->user_cancel = 0;
    pthread_mutex_unlock(&j->mu);
    int rc = miss_job(d, st, &e);
    if (rc == 0) {
        miss_ctx m = {.run = {.d = d, .job = e.job, .last_tactic = -1},
                      .deadline = attn_mono_s() + miss_budget_s(j)};
        log_event(LOGL_INFO, "miss_tune_start", "job=%lld device=%s shape=%s full_only=%d",
                  (long long)e.job, d->dev.info.id, key, e.full);
        rc = miss_passes(d, st, &e, &m, key);
        miss_settle(d, st, &e, &m, rc, key);
    } else {
        log_event(LOGL_ERROR, "miss_job_failed", "device=%s shape=%s error=\"%s\"",
                  d->dev.info.id, key, attune_strerror(rc));
    }
    pthread_mutex_lock(&j->mu);
    d->running = 0;
    d->miss_running[0] = 0;
}
