/* miss_policy.c -- tune on miss's rules: admission, quota, rate, the
 * quick pass, giving way and the end of a run (miss_policy.h). */
#include "miss_policy.h"

#include <stdio.h>

double miss_budget_s(const miss_limits *l)
{
    return l->budget_s > 0 ? l->budget_s : MISS_BUDGET_S;
}

int miss_quota(const miss_limits *l)
{
    return l->quota > 0 ? l->quota : MISS_QUOTA;
}

void miss_account_init(miss_account *a, double mono_now, int64_t unix_now)
{
    *a = (miss_account){.tokens = MISS_BURST, .tokens_at = mono_now, .day = unix_now / 86400};
}

void miss_day_roll(miss_account *a, int64_t unix_now)
{
    int64_t day = unix_now / 86400;
    if (day != a->day) {
        a->day = day;
        a->today = 0;
    }
}

int miss_taken_today(const miss_account *a, int64_t unix_now)
{
    return a->day == unix_now / 86400 ? a->today : 0;
}

int miss_quota_left(miss_account *a, const miss_limits *l, int64_t unix_now)
{
    miss_day_roll(a, unix_now);
    return a->today < miss_quota(l);
}

void miss_count_job(miss_account *a, int64_t created_at, int64_t unix_now)
{
    miss_day_roll(a, unix_now);
    a->today += created_at / 86400 == a->day;
}

int miss_wanted(int known, int stopping, int retained)
{
    return known == MISS_NONE && !stopping && !retained;
}

int miss_price_verdict(int estimate_rc, const tune_cost *c, const miss_limits *l, char *why,
                       size_t whylen)
{
    if (estimate_rc == ATTUNE_EBUSY) {
        snprintf(why, whylen, "deferred: listing the device's tactics for this shape; a "
                 "later lookup decides");
        return MISS_DEFERRED;
    }
    if (estimate_rc != 0 || tune_cost_fits(c, miss_budget_s(l)))
        return MISS_FITS;
    char what[96];
    snprintf(why, whylen, "refused: %s",
             tune_cost_describe(c, miss_budget_s(l), what, sizeof what));
    return MISS_OVER;
}

/* Room by the rate (a token taken) and in the queue; the tokens refill at
 * MISS_RATE a second up to MISS_BURST, whether or not one is taken. */
static int room(miss_account *a, int queued, double mono_now)
{
    a->tokens += (mono_now - a->tokens_at) * MISS_RATE;
    if (a->tokens > MISS_BURST)
        a->tokens = MISS_BURST;
    a->tokens_at = mono_now;
    if (a->tokens < 1.0 || queued >= MISS_MAX_QUEUED)
        return 0;
    a->tokens -= 1.0;
    return 1;
}

int miss_decide(miss_account *a, const miss_limits *l, const miss_offer *o, int *take,
                char *why, size_t whylen)
{
    *take = 0;
    miss_day_roll(a, o->unix_now);
    if (o->fits != MISS_FITS) {
        a->refused_budget++;
        return MISS_REFUSED;
    }
    if (a->today >= miss_quota(l)) {
        a->refused_quota++;
        snprintf(why, whylen, "refused: daily quota of %d shapes reached", miss_quota(l));
        return MISS_REFUSED;
    }
    if (o->known != MISS_NONE)
        return o->known;
    if (o->stopping || !room(a, o->queued, o->mono_now))
        return MISS_NONE;
    a->today++;
    *take = 1;
    return MISS_QUEUED;
}

int miss_quick_opts(const tuner_opts *o, const char *device_id, const attn_shape *s,
                    int quick_done, miss_rank_fn rank, void *ctx, attn_tactic top[MISS_QUICK],
                    tuner_opts *qo)
{
    int k = !quick_done && rank != NULL ? rank(ctx, device_id, s, MISS_QUICK, top) : 0;
    if (k <= 0)
        return 0;
    if (k > MISS_QUICK)
        k = MISS_QUICK;
    *qo = *o;
    qo->candidates = top; /* the model's best few, not the device's listing */
    qo->ncandidates = k;
    if (qo->budget_ms > MISS_QUICK_BUDGET_MS)
        qo->budget_ms = MISS_QUICK_BUDGET_MS;
    /* The model's top list is the screen: a screening pass would run each
     * tactic three more times, which for a shape of 80 ms a call (the
     * tenth run's 44776-token prefill) put the quick pass at 3.6 s. */
    qo->screen_factor = 0;
    qo->no_mark = 1; /* only the full pass makes the shape `measured` */
    return k;
}

int miss_gives_way(int explicit_waiting, int full_pass, int fresh_waiting, int stopping)
{
    return explicit_waiting || (full_pass && fresh_waiting && !stopping);
}

int miss_stops(int stopping, int gives_way, double mono_now, double deadline)
{
    return stopping || gives_way || mono_now > deadline;
}

miss_end miss_settle(const miss_run *r)
{
    if (r->completed)
        return MISS_END_DONE;
    if (r->by_user)
        return MISS_END_CANCELED;
    if (r->stopping || r->rc == ATTUNE_EGPULOST) /* a lost GPU context: the next process */
        return MISS_END_LEFT;
    if (r->mono_now > r->deadline)
        return MISS_END_OVER_BUDGET;
    if ((r->rc == 0 || r->rc == ATTUNE_ECANCELED) && r->yielded)
        return MISS_END_REQUEUE;
    return MISS_END_FAILED;
}

int miss_requeue_full(int full, int quick_done)
{
    return full || quick_done;
}

char *miss_end_why(miss_end e, int rc, const miss_limits *l, char *buf, size_t len)
{
    if (e == MISS_END_OVER_BUDGET)
        snprintf(buf, len, "over the miss budget of %.0f s: its rows stay, the next miss "
                 "resumes it", miss_budget_s(l));
    else if (e == MISS_END_NO_ROOM)
        snprintf(buf, len, "gave way with the miss queue full: the next miss resumes it");
    else if (e == MISS_END_FAILED)
        snprintf(buf, len, "%s", attune_strerror(rc));
    else if (len > 0)
        buf[0] = 0;
    return buf;
}
