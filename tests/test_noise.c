/* test_noise.c -- noisy timings (tuner/noise.h): the verdict, and what the
 * tuner does with it, against a fake backend whose sample series are
 * scripted call by call (no clock, no load: nothing here depends on the
 * machine the test runs on). tests/it_noisy_hog.py provokes the same with
 * a real CPU hog. */
#include <math.h>
#include <time.h>

#include "test.h"
#include "tuner/tuner.h"

/* ---- the verdict */

static void judge_should_flag_a_median_far_above_the_min(void)
{
    tuner_noise nz = {.spread = 0.5, .share = 0.5, .got_share = NAN};
    char why[64];
    CHECK_EQ_INT(tuner_noise_judge(&nz, 10.0, 9.0, 7, why, sizeof why), 0);
    CHECK_STR(why, "");
    CHECK_EQ_INT(tuner_noise_judge(&nz, 15.0, 10.0, 7, why, sizeof why), 0); /* at the bound */
    CHECK_EQ_INT(tuner_noise_judge(&nz, 25.0, 10.0, 7, why, sizeof why), 1);
    CHECK_STR(why, "median 2.50x the min");
    /* two samples have no median of their own: no spread judged */
    CHECK_EQ_INT(tuner_noise_judge(&nz, 25.0, 10.0, 2, why, sizeof why), 0);
    CHECK_EQ_INT(tuner_noise_judge(&nz, NAN, 10.0, 7, why, sizeof why), 0);
    nz.spread = 0; /* off */
    CHECK_EQ_INT(tuner_noise_judge(&nz, 25.0, 10.0, 7, why, sizeof why), 0);
}

static void judge_should_flag_a_thread_short_of_cpu(void)
{
    tuner_noise nz = {.spread = 0.5, .share = 0.5, .got_share = 0.31};
    char why[64];
    CHECK_EQ_INT(tuner_noise_judge(&nz, 10.0, 9.5, 7, why, sizeof why), 1);
    CHECK_STR(why, "31% of a CPU");
    CHECK_EQ_INT(tuner_noise_judge(&nz, 30.0, 10.0, 7, why, sizeof why), 1);
    CHECK_STR(why, "median 3.00x the min, 31% of a CPU");
    nz.got_share = 0.8;
    CHECK_EQ_INT(tuner_noise_judge(&nz, 10.0, 9.5, 7, NULL, 0), 0);
    nz.got_share = NAN; /* unknown (a GPU, a timing under a millisecond) */
    CHECK_EQ_INT(tuner_noise_judge(&nz, 10.0, 9.5, 7, NULL, 0), 0);
}

/* The default CPU clock: read on a CPU device over a timing of a few
 * milliseconds of this thread's own work, the share is a fraction; a GPU
 * device gets none. */
static void share_should_be_read_on_a_cpu_device_only(void)
{
    attn_device dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.info.kind, sizeof dev.info.kind, "cpu");
    tuner_noise nz = {.spread = 0.5, .share = 0.5};
    tuner_noise_begin(&nz, &dev);
    volatile double x = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do { /* 5 ms of work */
        for (int i = 0; i < 10000; i++)
            x += sqrt((double)i);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < 0.005);
    tuner_noise_end(&nz, &dev);
    CHECK(isfinite(nz.got_share) && nz.got_share > 0 && nz.got_share <= 1);
    snprintf(dev.info.kind, sizeof dev.info.kind, "cuda");
    tuner_noise_begin(&nz, &dev);
    tuner_noise_end(&nz, &dev);
    CHECK(isnan(nz.got_share));
}

/* ---- the tuner against a scripted backend
 *
 * Two tactics of pad 1 (no copies timed). A timing of the full protocol
 * under the options below is exactly 9 calls of time(): a calibration call,
 * a warm-up sample and 7 samples (min = max = 7); a screening is 5 (3
 * samples). So a script can say which timing of a tactic is noisy by the
 * index of its calls. */

enum { A, B, NT };
static const char *tactics[NT] = {"fused/pad=1", "split/acc=f32/pad=1"};
static int calls[NT];          /* time() calls per tactic so far */
static int timings_noisy[NT];  /* the first this many full timings are noisy */
static double base_us[NT];     /* a clean sample */
static double screen_us[NT];   /* a clean screening sample (0: base_us) */
static int screen_noisy[NT];   /* the screening of the tactic is noisy */
static int screening;          /* the test screens: the first 5 calls are it */

struct attn_session {
    attn_shape s;
    double *out;
    int64_t rows;
};
struct attn_plan {
    attn_session *ss;
    int which;
};

static double value(int64_t r, int64_t c) { return cos((double)(r * 5 + c)); }
static int f_count(void) { return 1; }
static int f_info(int index, attn_device_info *info, attn_stack *st)
{
    (void)index;
    memset(info, 0, sizeof *info);
    memset(st, 0, sizeof *st);
    snprintf(info->id, sizeof info->id, "CPU-noise0000");
    snprintf(info->name, sizeof info->name, "scripted");
    snprintf(info->kind, sizeof info->kind, "cpu");
    info->index = -1;
    snprintf(st->runtime, sizeof st->runtime, "fake");
    attn_stack_finish(st);
    return 0;
}
static int f_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    (void)index;
    (void)s;
    int n = 0;
    for (int i = 0; i < NT && n < max; i++)
        attn_tactic_parse(tactics[i], &out[n++], NULL, 0);
    return n;
}
static int f_open(int index, const attn_shape *s, uint64_t seed, attn_session **out)
{
    (void)index;
    (void)seed;
    attn_session *ss = calloc(1, sizeof *ss);
    ss->s = *s;
    ss->rows = s->b * s->hq * s->sq;
    ss->out = calloc((size_t)(ss->rows * s->d), sizeof(double));
    *out = ss;
    return 0;
}
static void f_close(attn_session *ss)
{
    free(ss->out);
    free(ss);
}
static int f_reference(attn_session *ss, const int64_t *rows, int n, double *ref)
{
    for (int k = 0; k < n; k++)
        for (int64_t c = 0; c < ss->s.d; c++)
            ref[k * ss->s.d + c] = value(rows[k], c);
    return 0;
}
static int f_poison(attn_session *ss)
{
    for (int64_t i = 0; i < ss->rows * ss->s.d; i++)
        ss->out[i] = NAN;
    return 0;
}
static int f_fetch(attn_session *ss, const int64_t *rows, int n, double *out)
{
    for (int k = 0; k < n; k++)
        memcpy(&out[k * ss->s.d], &ss->out[rows[k] * ss->s.d], (size_t)ss->s.d * sizeof(double));
    return 0;
}
static int f_plan(attn_session *ss, const attn_tactic *t, attn_plan **out)
{
    char buf[ATTN_TACTIC_STR_MAX];
    attn_tactic_str(t, buf, sizeof buf);
    for (int i = 0; i < NT; i++)
        if (strcmp(buf, tactics[i]) == 0) {
            attn_plan *p = calloc(1, sizeof *p);
            p->ss = ss;
            p->which = i;
            *out = p;
            return 0;
        }
    return ATTUNE_EINVAL;
}
static void f_plan_free(attn_plan *p) { free(p); }
static int f_run(attn_plan *p)
{
    attn_session *ss = p->ss;
    for (int64_t r = 0; r < ss->rows; r++)
        for (int64_t c = 0; c < ss->s.d; c++)
            ss->out[r * ss->s.d + c] = value(r, c);
    return 0;
}
/* A noisy series: every third sample 0.4x, the others 1x: median 2.5x the
 * min. A clean one: the base time, every sample. */
static int f_time(attn_plan *p, int iters, int with_copies, attn_timing *out)
{
    (void)iters;
    (void)with_copies;
    int w = p->which, k = ++calls[w];
    int noisy;
    double us = base_us[w];
    if (screening && k <= 5) {
        noisy = screen_noisy[w];
        if (screen_us[w] > 0)
            us = screen_us[w];
    } else {
        int timing = (k - (screening ? 5 : 0) - 1) / 9; /* 0-based full timing */
        noisy = timing < timings_noisy[w];
    }
    out->us = noisy && k % 3 == 0 ? 0.4 * us : us;
    return 0;
}

static const attn_ops ops = {.name = "scripted", .device_count = f_count, .device_info = f_info,
                             .tactics = f_tactics, .session_open = f_open,
                             .session_close = f_close, .reference = f_reference,
                             .poison = f_poison, .fetch_rows = f_fetch, .plan = f_plan,
                             .plan_free = f_plan_free, .run = f_run, .time = f_time};

static attn_device device(void)
{
    attn_device d;
    memset(&d, 0, sizeof d);
    d.ops = &ops;
    f_info(0, &d.info, &d.stack);
    return d;
}

static store *tmp_store(void)
{
    char dir[256], path[320], err[ATTUNE_ERRLEN];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/n.db", dir);
    store *st = NULL;
    if (store_open(path, 1, &st, err, sizeof err) != 0) {
        fprintf(stderr, "store_open: %s\n", err);
        exit(2);
    }
    return st;
}

/* The options every test here starts from: 7 samples a timing, no
 * screening, no pause, no CPU share (the script is the only noise). */
static void opts(tuner_opts *o)
{
    tuner_opts_default(o); /* the suite's ATTUNE_NOISE_CHECK=0 turned it off: */
    o->noise_spread = TUNER_NOISE_SPREAD;
    o->min_samples = o->max_samples = 7;
    o->screen_factor = 0;
    o->noise_pause_ms = 0;
    o->noise_share = 0;
    o->clock = NULL;
}

static void script(int noisy_a, int noisy_b, double us_a, double us_b)
{
    memset(calls, 0, sizeof calls);
    memset(screen_noisy, 0, sizeof screen_noisy);
    memset(screen_us, 0, sizeof screen_us);
    screening = 0;
    timings_noisy[A] = noisy_a;
    timings_noisy[B] = noisy_b;
    base_us[A] = us_a;
    base_us[B] = us_b;
}

static const store_measurement *row(const store_measurement *m, int n, int which)
{
    for (int i = 0; i < n; i++)
        if (strcmp(m[i].tactic, tactics[which]) == 0)
            return &m[i];
    return NULL;
}

static const attn_shape shape = {1, 2, 1, 4, 8, 8, ATTN_F32, 0};

/* B's first timing is noisy, its second clean: it is timed twice and
 * stored clean with the second timing. */
static void tuner_should_retime_a_noisy_timing(void)
{
    store *st = tmp_store();
    attn_device dev = device();
    tuner_opts o;
    opts(&o);
    script(0, 1, 10, 8);
    tuner_shape_result res;
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(calls[A], 9);
    CHECK_EQ_INT(calls[B], 18);
    CHECK_EQ_INT(res.noise_retimed, 1);
    CHECK_EQ_INT(res.noisy, 0);
    CHECK_STR(res.winner, tactics[B]);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    const store_measurement *b = row(m, n, B);
    CHECK(b != NULL && !b->noisy && b->time_us == 8 && b->time_us_min == 8);
    CHECK(b != NULL && strstr(b->note, "noisy") == NULL);
    free(m);
    store_close(st);
}

/* B stays noisy over its three timings: stored flagged, its note giving
 * the figures; its median (8 us) would win, but the answer is A; the next
 * tune measures B again (A is kept), and clean, B wins. */
static void tuner_should_flag_what_stays_noisy_and_measure_it_again(void)
{
    store *st = tmp_store();
    attn_device dev = device();
    tuner_opts o;
    opts(&o);
    script(0, 99, 10, 8);
    tuner_shape_result res;
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(calls[B], 9 * (1 + TUNER_NOISE_RETRIES));
    CHECK_EQ_INT(res.noise_retimed, 1);
    CHECK_EQ_INT(res.noisy, 1);
    CHECK_STR(res.winner, tactics[A]);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    const store_measurement *b = row(m, n, B);
    CHECK(b != NULL && b->noisy && b->time_us == 8 && fabs(b->time_us_min - 3.2) < 1e-9);
    CHECK(b != NULL && strncmp(b->note, "noisy: median 2.50x the min", 27) == 0);
    CHECK_EQ_INT(select_winner(m, n, NULL, 0), (int)(row(m, n, A) - m));
    free(m);

    script(0, 0, 10, 8);
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(res.skipped, 1);  /* A */
    CHECK_EQ_INT(res.measured, 1); /* B again */
    CHECK_EQ_INT(calls[A], 0);
    CHECK_EQ_INT(res.noisy, 0);
    CHECK_STR(res.winner, tactics[B]);
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    b = row(m, n, B);
    CHECK(b != NULL && !b->noisy && b->note[0] == 0);
    free(m);
    store_close(st);
}

/* Every timed row noisy: no winner and no mark, so the shape does not read
 * as tuned (select_complete) and the last tune's mark is gone. */
static void tuner_should_leave_a_shape_of_noisy_rows_unmarked(void)
{
    store *st = tmp_store();
    attn_device dev = device();
    tuner_opts o;
    opts(&o);
    script(0, 0, 10, 8);
    tuner_shape_result res;
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    CHECK_EQ_INT(select_complete(m, n, 1), 1);
    free(m);
    script(99, 99, 10, 8);
    o.force = 1;
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(res.noisy, 2);
    CHECK_STR(res.winner, "");
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(select_complete(m, n, 1), 0);
    CHECK_EQ_INT(select_winner(m, n, NULL, 0), -1);
    CHECK_EQ_INT(select_winner(m, n, NULL, 1.0), -1); /* a loose bound does not take them */
    free(m);
    store_close(st);
}

/* A fake CPU clock: each timing's thread got `share` of the wall clock for
 * the first `low` timings, all of it after. */
typedef struct fake_cpu {
    int reads, low;
    double share, cpu, wall;
} fake_cpu;

static int fake_cpu_read(void *ctx, const attn_device *dev, double *cpu_s, double *wall_s)
{
    (void)dev;
    fake_cpu *f = ctx;
    if (f->reads++ % 2 == 1) { /* the end of a timing: 10 ms later */
        f->wall += 0.010;
        f->cpu += 0.010 * (f->reads / 2 <= f->low ? f->share : 1.0);
    }
    *cpu_s = f->cpu;
    *wall_s = f->wall;
    return 0;
}

/* The share path: a timing whose thread had 30% of a CPU is timed again;
 * all three short of it, the row is flagged and says so. */
static void tuner_should_judge_the_cpu_share(void)
{
    store *st = tmp_store();
    attn_device dev = device();
    tuner_opts o;
    opts(&o);
    o.noise_share = 0.5;
    fake_cpu f = {.low = 1, .share = 0.3};
    o.cpu = fake_cpu_read;
    o.cpu_ctx = &f;
    script(0, 0, 10, 8);
    tuner_shape_result res;
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(res.noise_retimed, 1); /* the first timing, A's */
    CHECK_EQ_INT(res.noisy, 0);
    CHECK_EQ_INT(calls[A], 18);
    f = (fake_cpu){.low = 100, .share = 0.3};
    o.force = 1;
    script(0, 0, 10, 8);
    CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
    CHECK_EQ_INT(res.noisy, 2);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, dev.info.id, dev.stack.id, &shape, &m, &n), 0);
    for (int i = 0; i < n; i++)
        CHECK(m[i].noisy && strcmp(m[i].note, "noisy: 30% of a CPU") == 0);
    free(m);
    store_close(st);
}

/* Screening: B's screening reads 3x A's (it would be screened out) but is
 * noisy, so B gets the full timing, where it is the faster. The same
 * screening clean screens B out. */
static void screening_should_not_judge_on_a_noisy_screening(void)
{
    for (int noisy = 1; noisy >= 0; noisy--) {
        store *st = tmp_store();
        attn_device dev = device();
        tuner_opts o;
        opts(&o);
        o.screen_factor = 1.25;
        o.screen_samples = 3;
        script(0, 0, 10, 8);
        screening = 1;
        screen_us[B] = 30;
        screen_noisy[B] = noisy;
        tuner_shape_result res;
        CHECK_EQ_INT(tuner_run_shape(st, &dev, &shape, &o, 0, 1, &res), 0);
        CHECK_EQ_INT(res.screened, 2);
        CHECK_EQ_INT(res.screened_out, noisy ? 0 : 1);
        CHECK_STR(res.winner, tactics[noisy ? B : A]);
        CHECK_EQ_INT(res.noisy, 0);
        store_close(st);
    }
}

/* ATTUNE_NOISE_CHECK=0 turns both tests off; anything else leaves them. */
static void defaults_should_follow_the_environment(void)
{
    tuner_opts o;
    setenv("ATTUNE_NOISE_CHECK", "0", 1);
    tuner_opts_default(&o);
    CHECK(o.noise_spread == 0 && o.noise_share == 0);
    setenv("ATTUNE_NOISE_CHECK", "1", 1);
    tuner_opts_default(&o);
    CHECK(o.noise_spread == TUNER_NOISE_SPREAD && o.noise_share == TUNER_NOISE_SHARE);
    unsetenv("ATTUNE_NOISE_CHECK");
    tuner_opts_default(&o);
    CHECK(o.noise_spread == TUNER_NOISE_SPREAD && o.noise_retries == TUNER_NOISE_RETRIES);
}

int main(void)
{
    RUN(judge_should_flag_a_median_far_above_the_min);
    RUN(judge_should_flag_a_thread_short_of_cpu);
    RUN(share_should_be_read_on_a_cpu_device_only);
    RUN(tuner_should_retime_a_noisy_timing);
    RUN(tuner_should_flag_what_stays_noisy_and_measure_it_again);
    RUN(tuner_should_leave_a_shape_of_noisy_rows_unmarked);
    RUN(tuner_should_judge_the_cpu_share);
    RUN(screening_should_not_judge_on_a_noisy_screening);
    RUN(defaults_should_follow_the_environment);
    return test_summary();
}
