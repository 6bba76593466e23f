/* test_loo.c -- leave-one-out regret of predicted answers on the CPU grid.
 *
 * The ctest judges the model on a committed table: tests/inputs/loo-cpu.json,
 * grids/cpu-loo.json tuned once on the CPU backend (how: below). It hides
 * each shape in turn, asks the model built from the others, and checks the
 * issue-10 bounds: median regret <= 1.05 and worst <= 1.25 (regret =
 * measured time of the answered tactic on the hidden shape / time of its
 * winner, both from the table). No timing happens in the test, so it gives
 * the same figures on any machine at any load; the candidates are the
 * tactics the table measured on each shape (what the backend listed for it
 * when it was tuned), so a backend that lists more tactics later does not
 * change the verdict. A second test feeds the model the same table with
 * each shape's times reversed (its slowest tactic measured fastest): the
 * same evaluation must fail that predictor.
 *
 * `test_loo --retune FILE` re-measures (not a ctest): tunes the grid here,
 * prints the regret with the backend's own listing as the candidates, and
 * writes the table to FILE (copy it over tests/inputs/loo-cpu.json to
 * refresh the fixture, e.g. after a CPU kernel changes).
 *
 * How it is tuned: on shared machines other processes preempt the tuner (a
 * 2-core box at load 12 moved medians 40% between two identical tactics,
 * and no model predicts that). The CPU kernels are single-threaded, so the
 * tactics are timed by the CPU time of the calling thread
 * (CLOCK_THREAD_CPUTIME_ID around the backend's own timing loop), which
 * preemption does not inflate, and compared by their fastest sample, kernel
 * time only (time_us := time_us_min, no copies time): at load 16 even
 * thread CPU time spread 20% between samples of one tactic (hyperthread and
 * cache contention), while the fastest samples of identical tactics agreed
 * within 4% when each had a sample without a busy sibling; to give every
 * tactic that chance the grid is tuned four times (ATTUNE_LOO_PASSES=N:
 * N times) and each tactic keeps its fastest sample of all passes (two
 * passes at load 9 still left a bf16 decode shape's folded/split order
 * reversed between 256 and 512 keys; four agreed with a quiet box). */
#include <math.h>
#include <time.h>

#include "common/table_file.h"
#include "test.h"
#include "tuner/grid.h"
#include "tuner/loo.h"
#include "tuner/tuner.h"

#define MEDIAN_BOUND 1.05
#define WORST_BOUND 1.25

static store_measurement *rows;
static int nrows;
static attn_stack stack; /* the table's device stack */

static void die(const char *what, const char *err)
{
    fprintf(stderr, "setup: %s: %s\n", what, err);
    exit(2);
}

/* ---- the committed table */

/* Rows of the table at path (one device) into *out and *nout, its stack and
 * device info. */
static void load_table_into(const char *path, store_measurement **out, int *nout,
                            attn_stack *stk, attn_device_info *info)
{
    char dir[256], db[512], err[ATTUNE_ERRLEN] = "";
    char *json;
    size_t len;
    if (table_file_read(path, (size_t)64 << 20, &json, &len, err, sizeof err) != 0)
        die(path, err);
    test_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/loo.db", dir);
    store *st;
    store_import_stats stats;
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int ndev = 0;
    if (store_open(db, 1, &st, err, sizeof err) != 0 ||
        store_import(st, json, len, &stats, err, sizeof err) != 0)
        die(path, err);
    if (store_devices_list(st, &infos, &stacks, &ndev) != 0 || ndev != 1)
        die(path, "not the table of one device");
    *stk = stacks[0];
    if (info != NULL)
        *info = infos[0];
    if (store_measurements_all(st, infos[0].id, out, nout) != 0)
        die(path, "reading rows failed");
    store_close(st);
    free(infos);
    free(stacks);
    free(json);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
}

static void load_table(const char *path)
{
    load_table_into(path, &rows, &nrows, &stack, NULL);
}

/* ATTUNE_PREDICT_TRACE=1: every model built here traces its answers on
 * stderr (predict_set_trace), to compare two versions of the model line
 * by line; NULL otherwise. */
static FILE *trace_out(void)
{
    const char *t = getenv("ATTUNE_PREDICT_TRACE");
    return t != NULL && *t != 0 && strcmp(t, "0") != 0 ? stderr : NULL;
}

static void print_result(const loo_result *r)
{
    for (int i = 0; i < r->n; i++) {
        const loo_shape *ls = &r->shapes[i];
        fprintf(stderr, "  %-36s %-28s %-28s %8.2f %8.2f %6.3f\n", ls->key, ls->answer,
                ls->winner, ls->answer_us, ls->winner_us, ls->regret);
    }
    fprintf(stderr, "  median %.3f worst %.3f geomean %.3f\n", r->median, r->worst, r->geomean);
}

static void loo_should_meet_the_regret_bounds_on_the_cpu_table(void)
{
    loo_result r;
    loo_opts o = {.trace = trace_out()};
    CHECK_EQ_INT(loo_run_opts(rows, nrows, stack.id, NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, 16);
    print_result(&r);
    for (int i = 0; i < r.n; i++)
        CHECK_MSG(r.shapes[i].answer[0] != 0, "%s: no answer", r.shapes[i].key);
    CHECK_MSG(r.median <= MEDIAN_BOUND, "median regret %.3f", r.median);
    CHECK_MSG(r.worst <= WORST_BOUND, "worst regret %.3f", r.worst);
    loo_result_free(&r);
}

/* The same bounds, the worst's at worst_bound, on a GPU table (TABLE
 * under the source dir), leave-one-out over the default grid's shapes
 * only, with the table's device (132 SMs, sm_90: the wave model on); at
 * least min_tuned of the grid's shapes must be in it, and every one that
 * is is scored. As above, no timing: the same figures anywhere. */
static void default_grid_loo_within(const char *table, int min_tuned, double worst_bound)
{
    const char *src = getenv("ATTUNE_SOURCE_DIR");
    char path[512], gpath[512], err[ATTUNE_ERRLEN] = "";
    snprintf(path, sizeof path, "%s/%s", src ? src : "..", table);
    snprintf(gpath, sizeof gpath, "%s/grids/default.json", src ? src : "..");
    store_measurement *m = NULL;
    int n = 0, ngrid = 0;
    attn_stack stk;
    attn_device_info info;
    attn_shape *grid = NULL;
    load_table_into(path, &m, &n, &stk, &info);
    if (grid_load(gpath, &grid, &ngrid, err, sizeof err) != 0)
        die(gpath, err);
    CHECK_EQ_INT(info.sm_count, 132);
    int k = 0, tuned = 0; /* keep the grid's shapes' rows */
    for (int j = 0; j < ngrid; j++) { /* grid shapes the table has rows of */
        int in = 0;
        for (int i = 0; i < n && !in; i++)
            in = memcmp(&m[i].shape, &grid[j], sizeof grid[j]) == 0;
        tuned += in;
    }
    for (int i = 0; i < n; i++) {
        int in = 0;
        for (int j = 0; j < ngrid && !in; j++)
            in = memcmp(&m[i].shape, &grid[j], sizeof grid[j]) == 0;
        if (in)
            m[k++] = m[i];
    }
    CHECK_MSG(tuned >= min_tuned, "%s: %d of the grid's shapes in the table", table, tuned);
    loo_opts o = {.info = &info, .trace = trace_out()};
    loo_result r;
    CHECK_EQ_INT(loo_run_opts(m, k, stk.id, NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, tuned);
    print_result(&r);
    for (int i = 0; i < r.n; i++)
        CHECK_MSG(r.shapes[i].answer[0] != 0, "%s: no answer", r.shapes[i].key);
    CHECK_MSG(r.median <= MEDIAN_BOUND, "median regret %.3f", r.median);
    CHECK_MSG(r.worst <= worst_bound, "worst regret %.3f", r.worst);
    loo_result_free(&r);
    free(grid);
    free(m);
}

/* An H200 table under issue 10's bounds. */
static void h200_default_grid_loo(const char *table, int min_tuned)
{
    default_grid_loo_within(table, min_tuned, WORST_BOUND);
}

/* bench/realmodels-holdout-h200.json.gz: tuned on 2026-12-01 at 5e9affa
 * with cuDNN 9.19 and the sm90a kernels (grids/default.json of then, 21
 * shapes, and two sets of real-model shapes); the grid has grown since
 * (two speculative-verification steps). */
static void loo_should_meet_the_regret_bounds_on_the_h200_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout-h200.json.gz", 21);
}

/* bench/realmodels-holdout4-h200.json.gz: the newest H200 table (2026-12-01
 * 07:13 UTC at 75660ad, cuDNN 9.19; the whole 23-shape grid). Before
 * cuDNN's causal engines were costed at d = 128 for 64 < d < 128, Phi-2's
 * d=80 causal prefill was answered with cuDNN at 1.272 here. */
static void loo_should_meet_the_regret_bounds_on_the_newest_h200_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout4-h200.json.gz", 23);
}

/* Issue 10's real-model bounds (median <= 1.10, worst <= 1.25) on a
 * real-model set held out of an H200 table (TABLE and SET under the
 * source dir): the model built from the default grid's rows, the set's
 * nset shapes held out together, as attuned answered them live. Shapes of
 * the set that the grid has since taken in stay held out. */
static void h200_real_model_set(const char *table, const char *set, int nset)
{
    const char *src = getenv("ATTUNE_SOURCE_DIR");
    char path[512], gpath[512], hpath[512], err[ATTUNE_ERRLEN] = "";
    snprintf(path, sizeof path, "%s/%s", src ? src : "..", table);
    snprintf(gpath, sizeof gpath, "%s/grids/default.json", src ? src : "..");
    snprintf(hpath, sizeof hpath, "%s/%s", src ? src : "..", set);
    store_measurement *m = NULL;
    int n = 0, ngrid = 0, nhold = 0;
    attn_stack stk;
    attn_device_info info;
    attn_shape *grid = NULL, *hold = NULL;
    load_table_into(path, &m, &n, &stk, &info);
    if (grid_load(gpath, &grid, &ngrid, err, sizeof err) != 0)
        die(gpath, err);
    if (grid_load(hpath, &hold, &nhold, err, sizeof err) != 0)
        die(hpath, err);
    int k = 0; /* keep the rows of the grid's and the set's shapes */
    for (int i = 0; i < n; i++) {
        int in = 0;
        for (int j = 0; j < ngrid && !in; j++)
            in = memcmp(&m[i].shape, &grid[j], sizeof grid[j]) == 0;
        for (int j = 0; j < nhold && !in; j++)
            in = memcmp(&m[i].shape, &hold[j], sizeof hold[j]) == 0;
        if (in)
            m[k++] = m[i];
    }
    loo_opts o = {.info = &info, .hold = hold, .nhold = nhold, .trace = trace_out()};
    loo_result r;
    CHECK_EQ_INT(loo_run_opts(m, k, stk.id, NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, nset);
    print_result(&r);
    for (int i = 0; i < r.n; i++)
        CHECK_MSG(r.shapes[i].answer[0] != 0, "%s: no answer", r.shapes[i].key);
    CHECK_MSG(r.median <= 1.10, "%s: median regret %.3f", set, r.median);
    CHECK_MSG(r.worst <= WORST_BOUND, "%s: worst regret %.3f", set, r.worst);
    loo_result_free(&r);
    free(hold);
    free(grid);
    free(m);
}

/* The third real-model set, bench/realmodels-holdout2-h200.json.gz (tuned on
 * 2026-12-01 at b8d68ce, cuDNN 9.19, with screening). The set was seen
 * when the model was changed (a development set, not a held-out one):
 * this keeps its misses fixed. The model frozen at 6b5060f answered an
 * 8-query causal step with a cuDNN prefill engine costed as a
 * key-splitting one (4.508) and a 2048-token prefill with sm90a pad=16, a
 * pad that changes no length, whose 3-sample screening time was 1.37x
 * pad=1's. */
static void loo_should_meet_the_real_model_bounds_on_the_third_set(void)
{
    h200_real_model_set("bench/realmodels-holdout2-h200.json.gz", "grids/realmodels-holdout2.json",
                        17);
}

/* The sixth set, bench/realmodels-holdout5-h200.json.gz (2026-12-01 07:27 UTC
 * at 378d61c, held out for the model of 0e57e53, a development set since):
 * that model answered NLLB-200's cross-attention decode (b64.hq16.sq1.skv256
 * d=128) with the sm90a prefill kernel at 1.449, costed without the
 * latency of its 8 waves of blocks (BLOCK_WAVE_LAT in predict.c). */
static void loo_should_meet_the_real_model_bounds_on_the_sixth_set(void)
{
    h200_real_model_set("bench/realmodels-holdout5-h200.json.gz", "grids/realmodels-holdout5.json",
                        16);
}

/* The seventh set, bench/realmodels-holdout6-h200.json.gz (2026-12-01 11:14
 * UTC at 22c59eb, held out for the model of 22c59eb, a development set
 * since). That model answered AnimateDiff's batch of 65536 tiny matrices
 * with a GEMM (2.369: no block latency for GEMMs, gemm_waves) and
 * Llama-3.1-405B's group-16 decode at 32k with a padded sm90a fold whose
 * grid counted the pad's query rows (1.550). */
static void loo_should_meet_the_real_model_bounds_on_the_seventh_set(void)
{
    h200_real_model_set("bench/realmodels-holdout6-h200.json.gz", "grids/realmodels-holdout6.json",
                        18);
}

/* The default grid's leave-one-out on the newest table, which holds every
 * one of its 42 shapes. */
static void loo_should_meet_the_regret_bounds_on_the_seventh_run_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout6-h200.json.gz", 42);
}

/* ... and on the eighth and ninth runs' tables (2026-12-01 11:35 UTC at
 * ec5c063 and 21:49 at 15a16ed, cuDNN 9.19, all 42 shapes). On the
 * eighth, the model of ec5c063 answered CogVideoX-2B (b2.hq30.sq17776
 * d=64) with cuDNN eng=2 at 1.256, a score 0.003 from the sm90a winner's;
 * cuDNN's fixed cost per block (CUDNN_BLOCK_FIXED_TILES in predict.c) no
 * longer charged as the kernels' here, it is answered right. */
static void loo_should_meet_the_regret_bounds_on_the_eighth_run_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout7-h200.json.gz", 42);
}

static void loo_should_meet_the_regret_bounds_on_the_ninth_run_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout8-h200.json.gz", 42);
}

/* The tenth and eleventh sets on their runs' tables (2026-12-01 22:15 UTC
 * at 5eb591f and 2026-12-02 01:21 at 13777c9, cuDNN 9.19; held out for
 * the model of 0140546, development sets since). That model answered
 * Sparse R-CNN's b16.hq8.sq100.skv100 d=32 with cuDNN eng=9 (1.576: cuDNN
 * costed at d = 32, kernel_dim) and VideoCrafter2's 2560 queries on 77
 * keys with the sm90a kernel (1.453: its block's fixed cost taken as half
 * a key step, block_fixed_tiles); both fail the worst bound with it. */
static void loo_should_meet_the_real_model_bounds_on_the_tenth_set(void)
{
    h200_real_model_set("bench/realmodels-holdout9-h200.json.gz", "grids/realmodels-holdout9.json",
                        18);
}

static void loo_should_meet_the_real_model_bounds_on_the_eleventh_set(void)
{
    h200_real_model_set("bench/realmodels-holdout10-h200.json.gz", "grids/realmodels-holdout10.json",
                        18);
}

static void loo_should_meet_the_regret_bounds_on_the_eleventh_run_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout10-h200.json.gz", 42);
}

/* The twelfth and thirteenth sets, held out for the model of 374dc75 and
 * met live (2026-12-02 01:33 UTC at d39ff7c: 1.001 / 1.095; 01:44 at
 * ae8cc7f: 1.000 / 1.062), and the thirteenth run's grid leave-one-out. */
static void loo_should_meet_the_real_model_bounds_on_the_twelfth_set(void)
{
    h200_real_model_set("bench/realmodels-holdout11-h200.json.gz", "grids/realmodels-holdout11.json",
                        18);
}

static void loo_should_meet_the_real_model_bounds_on_the_thirteenth_set(void)
{
    h200_real_model_set("bench/realmodels-holdout12-h200.json.gz", "grids/realmodels-holdout12.json",
                        18);
}

static void loo_should_meet_the_regret_bounds_on_the_thirteenth_run_table(void)
{
    h200_default_grid_loo("bench/realmodels-holdout12-h200.json.gz", 42);
}

/* Shapes of rows a[0..n) (the current stack's) whose winner is another
 * tactic in b[0..n) (the same rows, other times). */
static int moved_winners(const store_measurement *a, const store_measurement *b, int n,
                         const attn_stack *stk)
{
    store_measurement *ga = malloc((size_t)n * sizeof *ga), *gb = malloc((size_t)n * sizeof *gb);
    int moved = 0;
    for (int i = 0; ga != NULL && gb != NULL && i < n; i++) {
        int first = 1, k = 0;
        for (int j = 0; j < i && first; j++)
            first = memcmp(&a[j].shape, &a[i].shape, sizeof a[i].shape) != 0;
        if (!first)
            continue;
        for (int j = i; j < n; j++)
            if (memcmp(&a[j].shape, &a[i].shape, sizeof a[i].shape) == 0 &&
                strcmp(a[j].stack_id, stk->id) == 0) {
                ga[k] = a[j];
                gb[k++] = b[j];
            }
        int wa = select_winner(ga, k, NULL, 0), wb = select_winner(gb, k, NULL, 0);
        moved += wa >= 0 && wb >= 0 && strcmp(ga[wa].tactic, gb[wb].tactic) != 0;
    }
    free(ga);
    free(gb);
    return moved;
}

/* The three H200 tables the checks above leave out (the first two runs'
 * and the fourth set's, docs/perf.md): every H200 table in bench/ is held
 * to the bounds. */
/* bench/loo-h100-458045a.json.gz: the default grid (42 shapes) tuned on
 * an H100 on 2026-12-06 at 458045a, the first table tuned with version
 * 1.1's key groups and version 3.12's cut. The model does not meet issue
 * 10's worst bound on it: 1.285 (ViT-B at b = 1, b1.hq12.sq197 d=64). It
 * was 1.528 before 2026-12-06's three changes (bench/loo-model-20261206.txt)
 * and 1.315 before sm90a's queued blocks paid their fixed cost twice
 * (2026-12-07, bench/loo-model-20261207.txt): this holds the median bound
 * and 1.3, so what they gained is not lost unseen. */
static void loo_should_meet_the_median_bound_on_the_fresh_h100_table(void)
{
    default_grid_loo_within("bench/loo-h100-458045a.json.gz", 42, 1.3);
}

static void loo_should_meet_the_regret_bounds_on_the_first_tables(void)
{
    h200_default_grid_loo("bench/loo-h200-default.json.gz", 17);
    h200_default_grid_loo("bench/realmodels-h200.json.gz", 19);
    h200_default_grid_loo("bench/realmodels-holdout3-h200.json.gz", 25);
}

/* The default grid's leave-one-out on the newest table with the times of
 * every tactic of one variant scaled by `scale`, as on a GPU where that
 * family runs so much slower or faster than on the H200: the winners
 * move (many of cuDNN's shapes go to the sm90a kernel when cuDNN is 1.6x
 * slower), and the model, which takes every rate from the device's own
 * rows and every kernel fact from the descriptors, must follow. */
static void h200_scaled_variant_loo(const char *variant, double scale, int min_moved)
{
    const char *src = getenv("ATTUNE_SOURCE_DIR");
    const char *table = "bench/realmodels-holdout12-h200.json.gz";
    char path[512], gpath[512], err[ATTUNE_ERRLEN] = "";
    snprintf(path, sizeof path, "%s/%s", src ? src : "..", table);
    snprintf(gpath, sizeof gpath, "%s/grids/default.json", src ? src : "..");
    store_measurement *m = NULL;
    int n = 0, ngrid = 0;
    attn_stack stk;
    attn_device_info info;
    attn_shape *grid = NULL;
    load_table_into(path, &m, &n, &stk, &info);
    if (grid_load(gpath, &grid, &ngrid, err, sizeof err) != 0)
        die(gpath, err);
    int k = 0;
    size_t vl = strlen(variant);
    store_measurement *orig = malloc((size_t)(n > 0 ? n : 1) * sizeof *orig);
    if (orig == NULL)
        die("scaling", "out of memory");
    for (int i = 0; i < n; i++) {
        int in = 0;
        for (int j = 0; j < ngrid && !in; j++)
            in = memcmp(&m[i].shape, &grid[j], sizeof grid[j]) == 0;
        if (!in)
            continue;
        m[k] = orig[k] = m[i];
        if (strncmp(m[k].tactic, variant, vl) == 0 && m[k].tactic[vl] == '/') {
            m[k].time_us *= scale;
            m[k].time_us_min *= scale;
            m[k].time_us_max *= scale;
            m[k].time_us_copies *= scale; /* NaN stays NaN */
        }
        k++;
    }
    loo_opts o = {.info = &info, .trace = trace_out()};
    loo_result r;
    CHECK_EQ_INT(loo_run_opts(m, k, stk.id, NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, 42);
    print_result(&r);
    for (int i = 0; i < r.n; i++)
        CHECK_MSG(r.shapes[i].answer[0] != 0, "%s: no answer", r.shapes[i].key);
    int moved = moved_winners(orig, m, k, &stk);
    fprintf(stderr, "  %s x%.2f: %d of 42 winners moved\n", variant, scale, moved);
    CHECK_MSG(moved >= min_moved, "scaling %s by %.2f left %d winners of other variants", variant,
              scale, moved);
    CHECK_MSG(r.median <= MEDIAN_BOUND, "%s x%.2f: median regret %.3f", variant, scale, r.median);
    CHECK_MSG(r.worst <= WORST_BOUND, "%s x%.2f: worst regret %.3f", variant, scale, r.worst);
    loo_result_free(&r);
    free(orig);
    free(grid);
    free(m);
}

static void loo_should_meet_the_bounds_when_cudnn_runs_slower(void)
{
    h200_scaled_variant_loo("cudnn", 1.6, 10);
}

static void loo_should_meet_the_bounds_when_cudnn_runs_faster(void)
{
    h200_scaled_variant_loo("cudnn", 0.7, 10);
}

static void loo_should_meet_the_bounds_when_the_tiles_run_slower(void)
{
    h200_scaled_variant_loo("fused", 1.5, 10);
}

/* Each shape's times reversed in rank: its fastest row gets its slowest
 * time, and so on (errors and statuses kept). */
static store_measurement *reversed_times(void)
{
    store_measurement *t = malloc((size_t)nrows * sizeof *t);
    int *idx = malloc((size_t)nrows * sizeof *idx);
    if (t == NULL || idx == NULL) {
        free(t);
        free(idx);
        return NULL;
    }
    memcpy(t, rows, (size_t)nrows * sizeof *t);
    for (int i = 0; i < nrows; i++) {
        int first = 1, cnt = 0;
        for (int k = 0; k < i && first; k++)
            first = memcmp(&rows[k].shape, &rows[i].shape, sizeof rows[i].shape) != 0;
        if (!first)
            continue; /* shape done */
        for (int k = i; k < nrows; k++) { /* its timed rows, by time (insertion) */
            if (memcmp(&rows[k].shape, &rows[i].shape, sizeof rows[i].shape) != 0 ||
                !isfinite(select_time(&rows[k])))
                continue;
            int j = cnt++;
            while (j > 0 && select_time(&rows[idx[j - 1]]) > select_time(&rows[k])) {
                idx[j] = idx[j - 1];
                j--;
            }
            idx[j] = k;
        }
        for (int j = 0; j < cnt; j++) {
            store_measurement *w = &t[idx[j]];
            w->time_us = w->time_us_min = w->time_us_max = select_time(&rows[idx[cnt - 1 - j]]);
            w->time_us_copies = NAN;
        }
    }
    free(idx);
    return t;
}

static void loo_should_fail_a_wrong_predictor(void)
{
    store_measurement *wrong = reversed_times();
    CHECK(wrong != NULL);
    if (wrong == NULL)
        return;
    loo_opts o = {.train = wrong};
    loo_result r;
    CHECK_EQ_INT(loo_run_opts(rows, nrows, stack.id, NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, 16);
    print_result(&r);
    /* the bounds the first test asserts reject it */
    CHECK_MSG(!(r.median <= MEDIAN_BOUND && r.worst <= WORST_BOUND),
              "a model fed reversed times passed: median %.3f worst %.3f", r.median, r.worst);
    CHECK_MSG(r.median > MEDIAN_BOUND, "median regret of the wrong predictor %.3f", r.median);
    loo_result_free(&r);
    free(wrong);
}

static store_measurement syn_row(int64_t len, const char *tactic, double us, double rel)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "CPU-test");
    snprintf(m.stack_id, sizeof m.stack_id, "stack-a");
    attn_shape s = {1, 8, 1, len, len, 64, ATTN_F16, 0};
    m.shape = s;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 10;
    m.rel_err = m.max_abs_err = rel;
    m.taken_at = 1000;
    return m;
}

/* Scoring bounds an answer as select_winner does (select_best_err): the
 * hidden shapes' untimed fused row (1e-4) puts folded (1e-3) beyond 8x,
 * though it is within 8x of the best timed error (2e-4). A model trained
 * without that row answers folded: no regret, not a figure below 1. */
static void loo_should_bound_answers_as_the_selection_does(void)
{
    store_measurement truth[9], train[9];
    const int64_t lens[] = {128, 256, 512};
    for (int i = 0; i < 3; i++) {
        truth[3 * i] = syn_row(lens[i], "fused/pad=1", NAN, 1e-4);
        truth[3 * i + 1] = syn_row(lens[i], "folded/acc=f16/pad=1", 10, 1e-3);
        truth[3 * i + 2] = syn_row(lens[i], "split/acc=f32/pad=1", 20, 2e-4);
        CHECK_EQ_INT(select_winner(truth + 3 * i, 3, NULL, 0), 2);
    }
    memcpy(train, truth, sizeof train);
    for (int i = 0; i < 3; i++)
        train[3 * i].status = STORE_FAILED;
    loo_opts o = {.train = train};
    loo_result r;
    CHECK_EQ_INT(loo_run_opts(truth, 9, "stack-a", NULL, NULL, &o, &r), 0);
    CHECK_EQ_INT(r.n, 3);
    for (int i = 0; i < r.n; i++) {
        CHECK_STR(r.shapes[i].winner, "split/acc=f32/pad=1");
        if (strcmp(r.shapes[i].answer, "folded/acc=f16/pad=1") == 0)
            CHECK_MSG(isinf(r.shapes[i].regret), "%s: regret %g", r.shapes[i].key,
                      r.shapes[i].regret);
        else
            CHECK_MSG(r.shapes[i].regret >= 1, "%s: regret %g", r.shapes[i].key,
                      r.shapes[i].regret);
    }
    CHECK_MSG(isinf(r.worst), "the model answered folded nowhere: worst %g", r.worst);
    loo_result_free(&r);
}

/* ---- re-measuring (test_loo --retune FILE) */

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

/* Tune grids/cpu-loo.json four times (ATTUNE_LOO_PASSES) into a fresh database,
 * keep each tactic's fastest sample, write the table to path and report the regret with the
 * backend's listing. Returns the exit status. */
static int retune(const char *path)
{
    char dir[256], db[512], gpath[512], err[ATTUNE_ERRLEN] = "";
    test_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/tune.db", dir);
    const char *src = getenv("ATTUNE_SOURCE_DIR");
    snprintf(gpath, sizeof gpath, "%s/grids/cpu-loo.json", src ? src : "..");
    attn_shape *shapes = NULL;
    int n = 0;
    attn_device cpu;
    if (grid_load(gpath, &shapes, &n, err, sizeof err) != 0 ||
        attn_device_resolve("cpu", &cpu, err, sizeof err) != 0)
        die(gpath, err);
    store *st;
    if (store_open(db, 1, &st, err, sizeof err) != 0 ||
        store_device_put(st, &cpu.info, &cpu.stack) != 0)
        die(db, err);
    tuner_opts o;
    tuner_opts_default(&o);
    o.target_sample_ms = 0.3; /* many short samples: some run uncontended */
    o.min_samples = 11;
    o.cut_factor = 1e9;       /* no early cut: every tactic gets them */
    attn_device timed = cpu;
    cpu_thread_ops = attn_cpu_ops;
    cpu_thread_ops.time = time_thread_cpu;
    timed.ops = &cpu_thread_ops;
    const char *np = getenv("ATTUNE_LOO_PASSES"); /* more passes: closer to the truth */
    int passes = np != NULL && atoi(np) > 0 ? atoi(np) : 4;
    for (int pass = 0; pass < passes; pass++) {
        o.force = pass > 0;
        for (int i = 0; i < n; i++) {
            tuner_shape_result r;
            fprintf(stderr, "pass %d/%d: shape %d/%d\n", pass + 1, passes, i + 1, n);
            if (tuner_run_shape(st, &timed, &shapes[i], &o, i, n, &r) != 0)
                die("tuning", "a shape failed");
        }
        store_measurement *got;
        int ngot;
        if (store_measurements_all(st, cpu.info.id, &got, &ngot) != 0)
            die("tuning", "reading rows failed");
        if (rows == NULL) {
            rows = got;
            nrows = ngot;
            continue;
        }
        for (int i = 0; i < nrows; i++) /* the fastest sample of all passes */
            for (int k = 0; k < ngot; k++)
                if (memcmp(&rows[i].shape, &got[k].shape, sizeof got[k].shape) == 0 &&
                    strcmp(rows[i].tactic, got[k].tactic) == 0 &&
                    got[k].time_us_min < rows[i].time_us_min)
                    rows[i].time_us_min = got[k].time_us_min;
        free(got);
    }
    for (int i = 0; i < nrows; i++) { /* the times the table keeps: see the header */
        rows[i].time_us = rows[i].time_us_min;
        if (rows[i].time_us_max < rows[i].time_us)
            rows[i].time_us_max = rows[i].time_us;
        rows[i].time_us_copies = NAN;
        if (store_measurement_put(st, &rows[i]) != 0)
            die(db, "writing rows failed");
    }
    char *json = NULL;
    FILE *f = NULL;
    if (store_export(st, cpu.info.id, &json) != 0 || (f = fopen(path, "w")) == NULL ||
        fputs(json, f) < 0 || fclose(f) != 0)
        die(path, "export failed");
    store_close(st);
    free(json);
    free(shapes);
    stack = cpu.stack;
    loo_result r;
    if (loo_run(rows, nrows, stack.id, NULL, &cpu, &r) != 0)
        die("loo", "failed");
    print_result(&r);
    fprintf(stderr, "wrote %s (%d rows)\n", path, nrows);
    int ok = r.median <= MEDIAN_BOUND && r.worst <= WORST_BOUND;
    loo_result_free(&r);
    free(rows);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", dir);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--retune") == 0)
        return retune(argv[2]);
    if (argc != 1) {
        fprintf(stderr, "usage: test_loo [--retune FILE]\n");
        return 2;
    }
    const char *in = getenv("ATTUNE_TEST_INPUTS");
    char path[512];
    snprintf(path, sizeof path, "%s/loo-cpu.json", in ? in : "../tests/inputs");
    RUN(loo_should_bound_answers_as_the_selection_does);
    load_table(path);
    RUN(loo_should_meet_the_regret_bounds_on_the_cpu_table);
    RUN(loo_should_fail_a_wrong_predictor);
    RUN(loo_should_meet_the_regret_bounds_on_the_h200_table);
    RUN(loo_should_meet_the_median_bound_on_the_fresh_h100_table);
    RUN(loo_should_meet_the_regret_bounds_on_the_newest_h200_table);
    RUN(loo_should_meet_the_real_model_bounds_on_the_third_set);
    RUN(loo_should_meet_the_real_model_bounds_on_the_sixth_set);
    RUN(loo_should_meet_the_real_model_bounds_on_the_seventh_set);
    RUN(loo_should_meet_the_regret_bounds_on_the_seventh_run_table);
    RUN(loo_should_meet_the_regret_bounds_on_the_eighth_run_table);
    RUN(loo_should_meet_the_regret_bounds_on_the_ninth_run_table);
    RUN(loo_should_meet_the_real_model_bounds_on_the_tenth_set);
    RUN(loo_should_meet_the_real_model_bounds_on_the_eleventh_set);
    RUN(loo_should_meet_the_regret_bounds_on_the_eleventh_run_table);
    RUN(loo_should_meet_the_real_model_bounds_on_the_twelfth_set);
    RUN(loo_should_meet_the_real_model_bounds_on_the_thirteenth_set);
    RUN(loo_should_meet_the_regret_bounds_on_the_thirteenth_run_table);
    RUN(loo_should_meet_the_regret_bounds_on_the_first_tables);
    RUN(loo_should_meet_the_bounds_when_cudnn_runs_slower);
    RUN(loo_should_meet_the_bounds_when_cudnn_runs_faster);
    RUN(loo_should_meet_the_bounds_when_the_tiles_run_slower);
    free(rows);
    return test_summary();
}
