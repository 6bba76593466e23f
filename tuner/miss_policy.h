/* miss_policy.h -- tune on miss's policy: which shapes a lookup missed
 * are tuned, when, and how (issue 10, issue 29 items 1-2, issue 26 item 5).
 *
 * A lookup whose answer is not `measured` offers its shape. The policy
 * takes it when it is not already waiting or running, no miss job
 * completed it already (tuning it again would find the same), the
 * device's daily quota (MISS_QUOTA shapes a UTC day, the day rolled over
 * at UTC midnight) has room, its whole tune is predicted to fit the miss
 * budget (tune_cost.h; the quota is asked first, so a flood past it costs
 * no pricing), and the rate (MISS_RATE a second, bursts of MISS_BURST)
 * and the queue (MISS_MAX_QUEUED a device) have room. A refusal says why.
 *
 * A tune taken up runs a quick pass first: the MISS_QUICK tactics the
 * model ranks best, each for at most MISS_QUICK_BUDGET_MS, without
 * screening and without the winner mark; then the full pass over every
 * tactic, whose end marks the winner. It stops after the tactic in
 * flight on shutdown, past the miss budget, when an explicit job waits,
 * and in the full pass when a newly missed shape waits for its quick
 * pass (it gives way); full passes never give way to each other (that
 * would trade them back and forth without end). A tune that gave way goes
 * back in the queue with its quick pass marked done.
 *
 * Plain functions over plain structs: the caller (attuned's
 * daemon/jobs_miss.c) owns the queue, its lock and the worker thread,
 * keeps a miss_account per device under its lock, and passes the clocks
 * in, so every rule here is tested alone (tests/test_miss_policy.c). */
#ifndef ATTUNE_MISS_POLICY_H
#define ATTUNE_MISS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "tune_cost.h"
#include "tuner.h"

#define MISS_MAX_QUEUED 32   /* shapes waiting per device */
#define MISS_RATE 2.0        /* shapes taken per second, per device */
#define MISS_BURST 8.0       /* ... in bursts of this many */
#define MISS_QUICK 3         /* tactics of the quick pass */
#define MISS_QUICK_BUDGET_MS 30.0 /* per tactic of the quick pass */
#define MISS_BUDGET_S 60.0   /* a miss tune's whole budget: admission and deadline */
#define MISS_QUOTA 200       /* shapes taken per device and UTC day */

/* What a lookup is told of its shape. */
enum { MISS_NONE = 0, MISS_QUEUED = 1, MISS_RUNNING = 2, MISS_REFUSED = 3 };

/* The operator's limits (attuned --miss-budget-s, --miss-quota). */
typedef struct miss_limits {
    double budget_s;         /* <= 0: MISS_BUDGET_S */
    int quota;               /* <= 0: MISS_QUOTA */
} miss_limits;

/* One device's account: the rate's tokens, the day's count, refusals. */
typedef struct miss_account {
    double tokens, tokens_at; /* rate: tokens left at tokens_at (monotonic s) */
    int64_t day;             /* UTC day (unix s / 86400) that today counts */
    int today;               /* shapes taken that day */
    int64_t refused_budget, refused_quota; /* refusals since the start */
} miss_account;

/* The limits in force: l's, or the defaults where l leaves them <= 0. */
double miss_budget_s(const miss_limits *l);
int miss_quota(const miss_limits *l);

/* A fresh account at mono_now (monotonic s) and unix_now (unix s): a full
 * burst of tokens, nothing counted today. */
void miss_account_init(miss_account *a, double mono_now, int64_t unix_now);

/* The day's count rolled over when unix_now is in a later (or another)
 * UTC day than a's. */
void miss_day_roll(miss_account *a, int64_t unix_now);

/* Shapes taken on unix_now's UTC day (0 when a counts another day);
 * a is not changed. */
int miss_taken_today(const miss_account *a, int64_t unix_now);

/* 1 when the quota leaves room today (the day rolled over first). */
int miss_quota_left(miss_account *a, const miss_limits *l, int64_t unix_now);

/* At load: a miss job created at created_at (unix s) counts against the
 * quota when it was created today. */
void miss_count_job(miss_account *a, int64_t created_at, int64_t unix_now);

/* 1 when an offered shape is worth admission at all: not already waiting
 * or running (known: MISS_NONE, MISS_QUEUED or MISS_RUNNING), the caller
 * not stopping, and no miss job completed it already (retained: a shape
 * still not `measured` after a complete tune had no tactic that could be
 * timed; tuning it again would find the same, a day's quota on one shape). */
int miss_wanted(int known, int stopping, int retained);

/* Pricing's verdicts. */
enum { MISS_FITS = 1, MISS_OVER = 0, MISS_DEFERRED = -1 };

/* The verdict on a shape's price: estimate_rc and c are what
 * tune_cost_estimate gave. MISS_DEFERRED (why "deferred: ...") when the
 * predictor is busy (ATTUNE_EBUSY: its listing is being made, a later
 * lookup decides; not a refusal); MISS_FITS when it fits l's budget or
 * cannot be priced (another error: the deadline still bounds the tune);
 * MISS_OVER with why "refused: predicted ... (budget ...)". */
int miss_price_verdict(int estimate_rc, const tune_cost *c, const miss_limits *l, char *why,
                       size_t whylen);

/* The facts of an offered shape once priced (under the caller's lock). */
typedef struct miss_offer {
    int fits;                /* MISS_FITS or MISS_OVER (MISS_FITS when not priced) */
    int known;               /* MISS_QUEUED / MISS_RUNNING when it waits or runs now */
    int stopping;            /* the caller is shutting down */
    int queued;              /* shapes waiting in the device's queue */
    double mono_now;         /* monotonic s (the rate) */
    int64_t unix_now;        /* unix s (the day) */
} miss_offer;

/* The answer to an offer, and a's account of it: MISS_REFUSED over the
 * budget (refused_budget counted) or past the quota (refused_quota, why
 * "refused: daily quota of N shapes reached"); else known when it waits
 * or runs; else MISS_NONE when stopping or without room (the rate's token
 * or the queue); else MISS_QUEUED with *take set: the caller queues it
 * (a token taken, counted today). *take is 0 in every other case. */
int miss_decide(miss_account *a, const miss_limits *l, const miss_offer *o, int *take,
                char *why, size_t whylen);

/* The model's k best tactics for s on device_id into out[0..k); returns
 * how many (0: no model or no listing) or a negative error.
 * index_predict_top has this contract. */
typedef int (*miss_rank_fn)(void *ctx, const char *device_id, const attn_shape *s, int k,
                            attn_tactic *out);

/* The quick pass of s: when quick_done is 0 and rank (with ctx) names
 * tactics, *qo is o for the quick pass (the ranked tactics top[0..k) as
 * its candidates, each timed for at most MISS_QUICK_BUDGET_MS, no
 * screening, no winner mark) and k is returned; else 0 (no quick pass:
 * rank is not called when quick_done or NULL). top must outlive qo. */
int miss_quick_opts(const tuner_opts *o, const char *device_id, const attn_shape *s,
                    int quick_done, miss_rank_fn rank, void *ctx, attn_tactic top[MISS_QUICK],
                    tuner_opts *qo);

/* Whether a tune in progress gives way: an explicit job waits, or (in the
 * full pass, full_pass) a newly missed shape waits for its quick pass
 * (fresh_waiting) while the caller is not stopping: quick passes come
 * first, so a burst of new shapes gets early rows within seconds. Full
 * passes never give way to each other (shapes whose quick pass is done). */
int miss_gives_way(int explicit_waiting, int full_pass, int fresh_waiting, int stopping);

/* Whether it stops after the tactic in flight: stopping, giving way, or
 * past its deadline (monotonic s). */
int miss_stops(int stopping, int gives_way, double mono_now, double deadline);

/* How a miss tune ends. */
typedef enum miss_end {
    MISS_END_DONE,           /* the full pass completed: the job is done */
    MISS_END_CANCELED,       /* DELETE */
    MISS_END_LEFT,           /* shutdown, a lost GPU context: left queued, the next
                                start resumes it */
    MISS_END_OVER_BUDGET,    /* failed past the budget: rows stay, the next miss resumes */
    MISS_END_REQUEUE,        /* gave way: back in the miss queue */
    MISS_END_NO_ROOM,        /* gave way, the queue full: failed, the next miss resumes */
    MISS_END_FAILED          /* failed on an error */
} miss_end;

/* What a miss tune's run came to. */
typedef struct miss_run {
    int rc;                  /* the tuner's return code */
    int completed;           /* the full pass ran to its end */
    int yielded;             /* it gave way (miss_gives_way said so once) */
    int by_user;             /* the cancel came from DELETE */
    int stopping;            /* the caller is shutting down */
    double mono_now, deadline; /* monotonic s */
} miss_run;

/* The end of a run, in this order: done, canceled by the user, left at
 * shutdown or when the run lost the GPU's context (rc ATTUNE_EGPULOST:
 * the next process resumes it), over the budget, requeued when it gave
 * way (rc 0 or ATTUNE_ECANCELED), else failed. MISS_END_NO_ROOM is the caller's, when
 * a requeue finds the queue full. */
miss_end miss_settle(const miss_run *r);

/* The quick-pass flag of a requeued shape: done when it was, or when this
 * run's quick pass completed (its tactics are not timed again). */
int miss_requeue_full(int full, int quick_done);

/* The job's error for a failed end into buf ("" for the others):
 * over the budget, the queue full, or rc's words. Returns buf. */
char *miss_end_why(miss_end e, int rc, const miss_limits *l, char *buf, size_t len);

#endif
