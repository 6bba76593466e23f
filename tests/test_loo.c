/* test_loo.c -- leave-one-out regret of predicted answers on the CPU grid.
 *
 * Tunes grids/cpu-loo.json on the CPU backend into a fresh database (once),
 * then hides each shape in turn, asks the model built from the others with
 * the backend's listing, and checks the issue-10 bounds: median regret
 * <= 1.05 and worst <= 1.25 (regret = measured time of the answered tactic
 * / measured time of the shape's winner).
 *
 * Times: this runs on shared CI machines where other processes preempt
 * the tuner (a 2-core box at load 12 moved medians 40% between two
 * identical tactics, and no model predicts that). The CPU kernels are
 * single-threaded, so the test times them by the CPU time of the calling
 * thread (CLOCK_THREAD_CPUTIME_ID around the backend's own timing loop),
 * which preemption does not inflate, and compares tactics by their fastest
 * sample, kernel time only (time_us := time_us_min, no copies time): at
 * load 16 even thread CPU time spread 20% between samples of one tactic
 * (hyperthread and cache contention), while the fastest samples of
 * identical tactics agreed within 4% when each had a sample without a
 * busy hyperthread sibling; to give every tactic that chance, the grid is
 * tuned twice and each tactic keeps its fastest sample of both passes. The model is built from the same
 * rows, so it is judged on the data it was given. */
#include <math.h>
#include <time.h>

#include "test.h"
#include "tuner/grid.h"
#include "tuner/loo.h"
#include "tuner/tuner.h"

static store_measurement *rows;
static int nrows;
static attn_device cpu;

static double thread_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The CPU backend's timing loop, measured in this thread's CPU time. */
static int time_thread_cpu(attn_plan *p, int iters, int with_copies, attn_timing *out)
{
    double t0 = thread_us();
    int rc = attn_cpu_ops.time(p, iters, with_copies, out);
    if (rc == 0)
        out->us = (thread_us() - t0) / iters;
    return rc;
}

static attn_ops cpu_thread_ops;

static void tune_grid_once(void)
{
    char dir[256], path[512], gpath[512], err[ATTUNE_ERRLEN];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/loo.db", dir);
    /* ATTUNE_LOO_DB=FILE: evaluate an already tuned database (re-running
     * the model on the same data while working on it) */
    const char *reuse = getenv("ATTUNE_LOO_DB");
    if (reuse != NULL)
        snprintf(path, sizeof path, "%s", reuse);
    const char *src = getenv("ATTUNE_SOURCE_DIR");
    snprintf(gpath, sizeof gpath, "%s/grids/cpu-loo.json", src ? src : "..");
    attn_shape *shapes = NULL;
    int n = 0;
    if (grid_load(gpath, &shapes, &n, err, sizeof err) != 0 ||
        attn_device_resolve("cpu", &cpu, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        exit(2);
    }
    store *st;
    if (store_open(path, 1, &st, err, sizeof err) != 0 ||
        store_device_put(st, &cpu.info, &cpu.stack) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        exit(2);
    }
    tuner_opts o;
    tuner_opts_default(&o);
    o.target_sample_ms = 0.3; /* many short samples: some run uncontended */
    o.min_samples = 11;
    o.cut_factor = 1e9;       /* no early cut: every tactic gets them */
    attn_device timed = cpu;
    cpu_thread_ops = attn_cpu_ops;
    cpu_thread_ops.time = time_thread_cpu;
    timed.ops = &cpu_thread_ops;
    for (int pass = 0; pass < (reuse == NULL ? 2 : 1); pass++) {
        o.force = pass > 0;
        for (int i = 0; i < n && reuse == NULL; i++) {
            tuner_shape_result r;
            if (tuner_run_shape(st, &timed, &shapes[i], &o, i, n, &r) != 0) {
                fprintf(stderr, "setup: tuning shape %d failed\n", i);
                exit(2);
            }
        }
        store_measurement *got;
        int ngot;
        if (store_measurements_all(st, cpu.info.id, &got, &ngot) != 0) {
            fprintf(stderr, "setup: reading rows failed\n");
            exit(2);
        }
        if (rows == NULL) {
            rows = got;
            nrows = ngot;
            continue;
        }
        /* the fastest sample of both passes */
        for (int i = 0; i < nrows; i++)
            for (int k = 0; k < ngot; k++)
                if (memcmp(&rows[i].shape, &got[k].shape, sizeof got[k].shape) == 0 &&
                    strcmp(rows[i].tactic, got[k].tactic) == 0 &&
                    got[k].time_us_min < rows[i].time_us_min)
                    rows[i].time_us_min = got[k].time_us_min;
        free(got);
    }
    store_close(st);
    free(shapes);
    for (int i = 0; i < nrows; i++) {
        rows[i].time_us = rows[i].time_us_min;
        rows[i].time_us_copies = NAN;
    }
    if (getenv("ATTUNE_LOO_KEEP") || reuse) {
        fprintf(stderr, "kept %s\n", path);
        return;
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
}

static void loo_should_meet_the_regret_bounds_on_the_cpu_grid(void)
{
    loo_result r;
    CHECK_EQ_INT(loo_run(rows, nrows, cpu.stack.id, NULL, &cpu, &r), 0);
    CHECK_EQ_INT(r.n, 16);
    for (int i = 0; i < r.n; i++) {
        const loo_shape *ls = &r.shapes[i];
        fprintf(stderr, "  %-36s %-28s %-28s %8.2f %8.2f %6.3f\n", ls->key, ls->answer,
                ls->winner, ls->answer_us, ls->winner_us, ls->regret);
        CHECK_MSG(ls->answer[0] != 0, "%s: no answer", ls->key);
    }
    fprintf(stderr, "  median %.3f worst %.3f geomean %.3f\n", r.median, r.worst, r.geomean);
    CHECK_MSG(r.median <= 1.05, "median regret %.3f", r.median);
    CHECK_MSG(r.worst <= 1.25, "worst regret %.3f", r.worst);
    loo_result_free(&r);
}

int main(void)
{
    tune_grid_once();
    RUN(loo_should_meet_the_regret_bounds_on_the_cpu_grid);
    free(rows);
    return test_summary();
}
