/* test_miss_policy.c -- tune on miss's policy alone (tuner/miss_policy.c,
 * tuner/tune_cost.c): the daily quota and its UTC day, the rate and the
 * queue's room, the refusal of a shape priced over the budget, the quick
 * pass's top-k, giving way, and how a run ends (requeued or not). No
 * daemon, no index: the clocks and the model's predictions are passed in. */
#include <string.h>

#include "test.h"
#include "tuner/miss_policy.h"

/* 2026-12-03 12:00 UTC, and that day's last and the next day's first second. */
#define NOON 1796299200LL
#define DAY_LAST (NOON / 86400 * 86400 + 86399)
#define NEXT_DAY (NOON / 86400 * 86400 + 86400)

static int decide(miss_account *a, const miss_limits *l, miss_offer o, int *take, char *why,
                  size_t len)
{
    why[0] = 0;
    return miss_decide(a, l, &o, take, why, len);
}

static void limits_should_default_when_unset(void)
{
    miss_limits none = {0}, set = {.budget_s = 5, .quota = 7};
    CHECK_NEAR(miss_budget_s(&none), 60.0, 0);
    CHECK_EQ_INT(miss_quota(&none), 200);
    CHECK_NEAR(miss_budget_s(&set), 5.0, 0);
    CHECK_EQ_INT(miss_quota(&set), 7);
}

/* Quota 2: two shapes taken, the third refused with the words, counted;
 * the next UTC day (not noon's last second) has room again. */
static void quota_should_refuse_past_it_and_roll_over_at_utc_midnight(void)
{
    miss_limits l = {.quota = 2};
    miss_account a;
    miss_account_init(&a, 100.0, NOON);
    char why[128];
    int take;
    miss_offer o = {.fits = MISS_FITS, .mono_now = 100.0, .unix_now = NOON};
    CHECK_EQ_INT(miss_quota_left(&a, &l, NOON), 1);
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_EQ_INT(take, 1);
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_EQ_INT(a.today, 2);
    CHECK_EQ_INT(miss_quota_left(&a, &l, NOON), 0);
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_REFUSED);
    CHECK_EQ_INT(take, 0);
    CHECK_STR(why, "refused: daily quota of 2 shapes reached");
    CHECK_EQ_INT(a.refused_quota, 1);
    CHECK_EQ_INT(a.refused_budget, 0);
    CHECK_EQ_INT(a.today, 2);
    /* the day's last second is still the same day */
    CHECK_EQ_INT(miss_quota_left(&a, &l, DAY_LAST), 0);
    CHECK_EQ_INT(miss_taken_today(&a, DAY_LAST), 2);
    /* the next day: the count reads 0 before any roll, and rolls */
    CHECK_EQ_INT(miss_taken_today(&a, NEXT_DAY), 0);
    CHECK_EQ_INT(a.today, 2); /* miss_taken_today changed nothing */
    CHECK_EQ_INT(miss_quota_left(&a, &l, NEXT_DAY), 1);
    CHECK_EQ_INT(a.today, 0);
    CHECK_EQ_INT(a.day, NEXT_DAY / 86400);
    o.unix_now = NEXT_DAY;
    o.mono_now = 101.0;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_EQ_INT(a.today, 1);
    CHECK_EQ_INT(a.refused_quota, 1); /* refusals count since the start */
}

/* At load, miss jobs created today count against the quota, older ones not. */
static void count_job_should_count_only_todays_jobs(void)
{
    miss_account a;
    miss_account_init(&a, 0, NOON);
    miss_count_job(&a, NOON - 86400, NOON);
    CHECK_EQ_INT(a.today, 0);
    miss_count_job(&a, NOON - 3600, NOON);
    miss_count_job(&a, NOON / 86400 * 86400, NOON);
    CHECK_EQ_INT(a.today, 2);
    /* a job of the day before, counted after midnight: the day rolls first */
    miss_count_job(&a, NOON, NEXT_DAY);
    CHECK_EQ_INT(a.today, 0);
}

/* A burst of MISS_BURST, then MISS_RATE a second; a full queue takes no
 * token; a known shape answers its state and counts nothing; stopping
 * takes nothing. */
static void decide_should_hold_the_rate_and_the_queue(void)
{
    miss_limits l = {0};
    miss_account a;
    miss_account_init(&a, 10.0, NOON);
    char why[128];
    int take, queued = 0;
    miss_offer o = {.fits = MISS_FITS, .mono_now = 10.0, .unix_now = NOON};
    for (int i = 0; i < 8; i++) {
        o.queued = queued;
        CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
        queued += take;
    }
    CHECK_EQ_INT(queued, 8);
    o.queued = queued;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_NONE);
    CHECK_EQ_INT(take, 0);
    CHECK_STR(why, ""); /* over the rate is not a refusal */
    o.mono_now = 10.5; /* half a second: one token at 2 a second */
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_NONE);
    CHECK_EQ_INT(a.today, 9);
    /* a full queue: no room, and the token stays */
    o.mono_now = 20.0;
    o.queued = MISS_MAX_QUEUED;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_NONE);
    CHECK_NEAR(a.tokens, 8.0, 1e-12);
    o.queued = MISS_MAX_QUEUED - 1;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_NEAR(a.tokens, 7.0, 1e-12);
    o.queued = 0;
    o.known = MISS_RUNNING;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_RUNNING);
    o.known = MISS_QUEUED;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_QUEUED);
    CHECK_EQ_INT(take, 0);
    o.known = MISS_NONE;
    o.stopping = 1;
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_NONE);
    CHECK_EQ_INT(a.today, 10);
    CHECK_NEAR(a.tokens, 7.0, 1e-12);
}

static void wanted_should_skip_known_retained_and_stopping(void)
{
    CHECK_EQ_INT(miss_wanted(MISS_NONE, 0, 0), 1);
    CHECK_EQ_INT(miss_wanted(MISS_QUEUED, 0, 0), 0);
    CHECK_EQ_INT(miss_wanted(MISS_RUNNING, 0, 0), 0);
    CHECK_EQ_INT(miss_wanted(MISS_NONE, 1, 0), 0);
    CHECK_EQ_INT(miss_wanted(MISS_NONE, 0, 1), 0);
}

/* A fake model: n tactics at us each (or an error), and what it was asked. */
typedef struct fake_model {
    int rc, n;
    double us;
    int asked_max, asked_sample;
} fake_model;

static int fake_predict(void *ctx, const char *device_id, const attn_shape *s, double *us,
                        int max, int sample)
{
    fake_model *f = ctx;
    (void)device_id;
    (void)s;
    f->asked_max = max;
    f->asked_sample = sample;
    if (f->rc != 0)
        return f->rc;
    for (int i = 0; i < f->n && i < max; i++)
        us[i] = f->us;
    return f->n;
}

/* 16 tactics of 1 s a call under a 200 ms tactic budget: each screened
 * (2 + 8 x 1 s), the fastest 3 timed in full (2 + 2 x 1 s) and in the
 * quick pass (the same: a call is over 30 ms): 184 s, over the 60 s
 * budget; counted as a budget refusal. 16 tactics of 10 us fit. */
static void price_should_refuse_a_shape_predicted_over_the_budget(void)
{
    attn_device_info cpu = {.id = "CPU-test", .kind = "cpu", .memory_mb = 1024};
    attn_shape s = {1, 8, 1, 50, 1018, 64, ATTN_F32, 0};
    miss_limits l = {0};
    fake_model slow = {.n = 16, .us = 1e6};
    tune_cost c;
    CHECK_EQ_INT(tune_cost_estimate(fake_predict, &slow, &cpu, &s, 200, &c), 0);
    CHECK_EQ_INT(slow.asked_max, 1024);
    CHECK_EQ_INT(slow.asked_sample, 24);
    CHECK_NEAR(c.seconds, 184.0, 1e-9);
    CHECK_NEAR(c.call_us, 1e6, 0);
    CHECK_EQ_INT(c.ntactics, 16);
    CHECK_EQ_INT(c.roofline, 0);
    CHECK_NEAR(c.max_bytes, 512.0 * 1048576.0, 0);
    char why[128] = "";
    CHECK_EQ_INT(miss_price_verdict(0, &c, &l, why, sizeof why), MISS_OVER);
    CHECK_STR(why, "refused: predicted 3.1 min (budget 60 s)");
    miss_limits roomy = {.budget_s = 200};
    CHECK_EQ_INT(miss_price_verdict(0, &c, &roomy, why, sizeof why), MISS_FITS);

    miss_account a;
    miss_account_init(&a, 0, NOON);
    int take;
    miss_offer o = {.fits = MISS_OVER, .unix_now = NOON};
    CHECK_EQ_INT(decide(&a, &l, o, &take, why, sizeof why), MISS_REFUSED);
    CHECK_EQ_INT(take, 0);
    CHECK_EQ_INT(a.refused_budget, 1);
    CHECK_EQ_INT(a.today, 0);
    CHECK_NEAR(a.tokens, MISS_BURST, 0);

    /* 10 us a call: screening 16 x (2e-5 + 8 x 0.5 ms), full 3 x (2e-5 +
     * 0.4), quick 3 x (2e-5 + 0.06) */
    fake_model fast = {.n = 16, .us = 10};
    CHECK_EQ_INT(tune_cost_estimate(fake_predict, &fast, &cpu, &s, 200, &c), 0);
    CHECK_NEAR(c.seconds, 16 * 0.00402 + 3 * 0.40002 + 3 * 0.06002, 1e-9);
    CHECK_EQ_INT(miss_price_verdict(0, &c, &l, why, sizeof why), MISS_FITS);
}

/* The predictor busy (a listing being made) defers without a refusal;
 * any other error admits (the deadline still bounds the tune). */
static void price_should_defer_while_busy_and_admit_when_unpriced(void)
{
    attn_device_info cpu = {.id = "CPU-test", .kind = "cpu"};
    attn_shape s = {1, 8, 1, 50, 1018, 64, ATTN_F32, 0};
    miss_limits l = {0};
    fake_model busy = {.rc = ATTUNE_EBUSY}, gone = {.rc = ATTUNE_ENODEV};
    tune_cost c;
    char why[128] = "";
    int rc = tune_cost_estimate(fake_predict, &busy, &cpu, &s, 200, &c);
    CHECK_EQ_INT(rc, ATTUNE_EBUSY);
    CHECK_EQ_INT(miss_price_verdict(rc, &c, &l, why, sizeof why), MISS_DEFERRED);
    CHECK(strncmp(why, "deferred: ", 10) == 0);
    rc = tune_cost_estimate(fake_predict, &gone, &cpu, &s, 200, &c);
    CHECK_EQ_INT(rc, ATTUNE_ENODEV);
    why[0] = 0;
    CHECK_EQ_INT(miss_price_verdict(rc, &c, &l, why, sizeof why), MISS_FITS);
    CHECK_STR(why, "");
    /* nothing listed: one tactic at the roofline (4 x 50 x 1018 x 64 x 8
     * FLOPs at 1 GFLOP/s on the CPU: 0.104 s a call) */
    fake_model empty = {.n = 0};
    CHECK_EQ_INT(tune_cost_estimate(fake_predict, &empty, &cpu, &s, 200, &c), 0);
    CHECK_EQ_INT(c.roofline, 1);
    CHECK_EQ_INT(c.ntactics, 1);
    CHECK_NEAR(c.call_us, 4.0 * 8 * 50 * 1018 * 64 / 1e9 * 1e6, 1e-6);
    /* a GPU at the GPU's roofline, 2e13 (its kind "cuda" begins with 'c'
     * too: priced as a CPU, a fresh H200's POST /v1/tune of the anchors was
     * refused at 5634 s) */
    attn_device_info gpu = {.id = "GPU-test", .kind = "cuda"};
    CHECK_EQ_INT(tune_cost_estimate(fake_predict, &empty, &gpu, &s, 200, &c), 0);
    CHECK_EQ_INT(c.roofline, 1);
    CHECK_NEAR(c.call_us, 4.0 * 8 * 50 * 1018 * 64 / 2e13 * 1e6, 1e-9);
}

/* A fake ranker: the model's order of six tactics; how often it was asked. */
typedef struct fake_rank {
    int calls, asked_k, rc;
    attn_tactic order[6];
} fake_rank;

static int fake_ranker(void *ctx, const char *device_id, const attn_shape *s, int k,
                       attn_tactic *out)
{
    fake_rank *f = ctx;
    (void)s;
    CHECK_STR(device_id, "CPU-test");
    f->calls++;
    f->asked_k = k;
    if (f->rc != 0)
        return f->rc;
    for (int i = 0; i < k && i < 6; i++)
        out[i] = f->order[i];
    return k < 6 ? k : 6;
}

static void quick_opts_should_take_the_models_top_k(void)
{
    fake_rank f = {0};
    static const char *names[6] = {"folded/acc=f32/pad=8", "split/acc=f32/pad=1",
                                   "fused/pad=1/tile=64x64", "folded/acc=f32/pad=1",
                                   "split/acc=f32/pad=8", "fused/pad=8/tile=64x64"};
    for (int i = 0; i < 6; i++) {
        char err[128];
        CHECK_EQ_INT(attn_tactic_parse(names[i], &f.order[i], err, sizeof err), 0);
    }
    attn_shape s = {1, 8, 1, 50, 1018, 64, ATTN_F32, 0};
    tuner_opts o, qo;
    tuner_opts_default(&o);
    o.deadline_s = 123.0;
    attn_tactic top[MISS_QUICK];
    int k = miss_quick_opts(&o, "CPU-test", &s, 0, fake_ranker, &f, top, &qo);
    CHECK_EQ_INT(k, MISS_QUICK);
    CHECK_EQ_INT(MISS_QUICK, 3);
    CHECK_EQ_INT(f.asked_k, 3);
    CHECK(qo.candidates == top);
    CHECK_EQ_INT(qo.ncandidates, 3);
    for (int i = 0; i < 3; i++) {
        char t[ATTN_TACTIC_STR_MAX];
        attn_tactic_str(&top[i], t, sizeof t);
        CHECK_STR(t, names[i]); /* the model's best three, in its order */
    }
    CHECK_NEAR(o.budget_ms, 200.0, 0);
    CHECK_NEAR(qo.budget_ms, 30.0, 0); /* capped per tactic */
    CHECK_NEAR(qo.screen_factor, 0.0, 0); /* the model's list is the screen */
    CHECK_EQ_INT(qo.no_mark, 1);
    CHECK_NEAR(qo.deadline_s, 123.0, 0);  /* the rest as the full pass's */
    CHECK(o.candidates == NULL && o.no_mark == 0);
    o.budget_ms = 10;
    CHECK_EQ_INT(miss_quick_opts(&o, "CPU-test", &s, 0, fake_ranker, &f, top, &qo), 3);
    CHECK_NEAR(qo.budget_ms, 10.0, 0); /* under the cap: kept */
    /* quick pass done (a requeued shape) or no model: no quick pass, no ranking */
    int calls = f.calls;
    CHECK_EQ_INT(miss_quick_opts(&o, "CPU-test", &s, 1, fake_ranker, &f, top, &qo), 0);
    CHECK_EQ_INT(f.calls, calls);
    CHECK_EQ_INT(miss_quick_opts(&o, "CPU-test", &s, 0, NULL, NULL, top, &qo), 0);
    f.rc = ATTUNE_ENODEV;
    CHECK_EQ_INT(miss_quick_opts(&o, "CPU-test", &s, 0, fake_ranker, &f, top, &qo), 0);
}

static void gives_way_should_follow_the_pass(void)
{
    CHECK_EQ_INT(miss_gives_way(1, 0, 0, 0), 1); /* an explicit job: always */
    CHECK_EQ_INT(miss_gives_way(1, 1, 0, 1), 1);
    CHECK_EQ_INT(miss_gives_way(0, 1, 1, 0), 1); /* full pass, a fresh shape */
    CHECK_EQ_INT(miss_gives_way(0, 0, 1, 0), 0); /* the quick pass does not */
    CHECK_EQ_INT(miss_gives_way(0, 1, 0, 0), 0); /* full passes never to each other */
    CHECK_EQ_INT(miss_gives_way(0, 1, 1, 1), 0);
    CHECK_EQ_INT(miss_stops(0, 0, 10.0, 20.0), 0);
    CHECK_EQ_INT(miss_stops(0, 0, 20.5, 20.0), 1);
    CHECK_EQ_INT(miss_stops(1, 0, 10.0, 20.0), 1);
    CHECK_EQ_INT(miss_stops(0, 1, 10.0, 20.0), 1);
}

/* Which runs are requeued, and in what order the ends are decided. */
static void settle_should_requeue_only_a_run_that_gave_way(void)
{
    miss_run base = {.mono_now = 10.0, .deadline = 20.0};
    miss_run r = base;
    r.yielded = 1;
    CHECK_EQ_INT(miss_settle(&r), MISS_END_REQUEUE);
    r.rc = ATTUNE_ECANCELED;
    CHECK_EQ_INT(miss_settle(&r), MISS_END_REQUEUE);
    r.rc = ATTUNE_ENOMEM; /* an error is not giving way */
    CHECK_EQ_INT(miss_settle(&r), MISS_END_FAILED);
    r = base;
    r.rc = ATTUNE_ECANCELED; /* stopped without giving way */
    CHECK_EQ_INT(miss_settle(&r), MISS_END_FAILED);
    r = base;
    r.rc = ATTUNE_EGPULOST; /* a lost context: left queued, even past the budget */
    r.mono_now = 21.0;
    CHECK_EQ_INT(miss_settle(&r), MISS_END_LEFT);
    r.by_user = 1; /* a DELETE meanwhile: canceled */
    CHECK_EQ_INT(miss_settle(&r), MISS_END_CANCELED);
    r = base;
    r.yielded = 1;
    r.mono_now = 21.0; /* past the budget: failed even when it gave way */
    CHECK_EQ_INT(miss_settle(&r), MISS_END_OVER_BUDGET);
    r.stopping = 1; /* shutdown first: left queued for the next start */
    CHECK_EQ_INT(miss_settle(&r), MISS_END_LEFT);
    r.by_user = 1;
    CHECK_EQ_INT(miss_settle(&r), MISS_END_CANCELED);
    r.completed = 1;
    CHECK_EQ_INT(miss_settle(&r), MISS_END_DONE);
    CHECK_EQ_INT(miss_requeue_full(0, 0), 0);
    CHECK_EQ_INT(miss_requeue_full(0, 1), 1);
    CHECK_EQ_INT(miss_requeue_full(1, 0), 1);
    miss_limits l = {.budget_s = 45};
    char buf[256];
    CHECK_STR(miss_end_why(MISS_END_OVER_BUDGET, 0, &l, buf, sizeof buf),
              "over the miss budget of 45 s: its rows stay, the next miss resumes it");
    CHECK_STR(miss_end_why(MISS_END_NO_ROOM, 0, &l, buf, sizeof buf),
              "gave way with the miss queue full: the next miss resumes it");
    CHECK_STR(miss_end_why(MISS_END_FAILED, ATTUNE_ENOMEM, &l, buf, sizeof buf),
              attune_strerror(ATTUNE_ENOMEM));
    CHECK_STR(miss_end_why(MISS_END_DONE, 0, &l, buf, sizeof buf), "");
}

int main(void)
{
    RUN(limits_should_default_when_unset);
    RUN(quota_should_refuse_past_it_and_roll_over_at_utc_midnight);
    RUN(count_job_should_count_only_todays_jobs);
    RUN(decide_should_hold_the_rate_and_the_queue);
    RUN(wanted_should_skip_known_retained_and_stopping);
    RUN(price_should_refuse_a_shape_predicted_over_the_budget);
    RUN(price_should_defer_while_busy_and_admit_when_unpriced);
    RUN(quick_opts_should_take_the_models_top_k);
    RUN(gives_way_should_follow_the_pass);
    RUN(settle_should_requeue_only_a_run_that_gave_way);
    return test_summary();
}
