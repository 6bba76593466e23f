/* tuner.h -- measure every applicable tactic of a shape on a device.
 *
 * The protocol of DESIGN.md "Measuring": inputs drawn from a seed derived
 * from the shape key; output poisoned with NaN before the checked run;
 * float64 reference over all rows of small shapes, a sample of rows (every
 * head: first, last, padding-boundary and random rows; >= 256 rows) for
 * large ones; max abs and relative L2 error; NaN/Inf or an unwritten
 * element fails. Then timing: warm-up, samples until the median is stable
 * or the budget is spent, cut short when a candidate is far slower than the
 * best so far. Each measurement is committed to the store as it is taken;
 * tactics already stored for (device, stack, shape) are skipped, so an
 * interrupted tune resumes where it stopped.
 *
 * Screening (screen_factor > 0, the default): a first pass plans, checks
 * and briefly times every tactic (screen_samples short samples); only the
 * tactics within screen_factor x the best eligible screened time (and any
 * screened while the GPU clock was low) get the full timing above, in a
 * second pass. The others are stored with their check and their screening
 * time, n = the screening samples and a note "screened out: ...". Rows of
 * the first pass are committed when it ends (failed and unsupported ones at
 * once): a crash in the first pass loses the screening done so far.
 *
 * Every timing is checked for noise (noise.h): a noisy one is timed again,
 * and a row still noisy is stored flagged, kept out of answers and not
 * counted as stored by the next tune (it is measured again). */
#ifndef ATTUNE_TUNER_H
#define ATTUNE_TUNER_H

#include <stdatomic.h>
#include <stdio.h>

#include "../db/store.h"
#include "noise.h"
#include "select.h"
#include "throttle.h"

typedef struct tuner_progress {
    int shape_index, shape_count;  /* 0-based shape, of how many */
    int tactic_index, tactic_count;
    const char *shape_key;
    const char *tactic;            /* tactic being measured, NULL between */
    double elapsed_s;
    double eta_s;                  /* < 0 when unknown */
} tuner_progress;

typedef struct tuner_opts {
    double budget_ms;      /* timing budget per tactic (default 200 ms) */
    int min_samples;       /* default 5 */
    int max_samples;       /* default 50 */
    double stable_rel;     /* stop when the median moved less than this over
                              the last samples (default 0.01) */
    double cut_factor;     /* cut a candidate whose median after min_samples
                              exceeds cut_factor x best (default 3.0) */
    double target_sample_ms; /* calls per sample chosen so a sample lasts
                              about this long (default 2 ms) */
    int64_t full_check_rows; /* check all rows when b*hq*sq <= this (default 4096) */
    int sample_rows;       /* rows in a sampled check (default 256) */
    int force;             /* re-measure tactics already stored */
    double screen_factor;  /* full timing only for tactics screened within this
                              factor of the best (default 1.25: docs/tuning.md
                              says why; <= 0: no screening, every tactic
                              fully timed) */
    int screen_samples;    /* samples of a screening (default 3) */
    double screen_sample_ms; /* a screening sample lasts about this (0.5 ms) */
    FILE *trace;           /* a line per tactic and pass with its times, or NULL */
    const select_policy *policy; /* NULL: defaults */
    /* Called after each row is committed with that row (power filled as a
     * read gives it; incumbent 0 and err_ratio NaN: a replaced row keeps
     * its stored mark, and err_ratio depends on the shape's other rows),
     * and once more after the shape's winner is marked with the winner's
     * row as stored (incumbent 1: store_winner_mark moved the mark to it
     * from the other rows of its stack). May be NULL. attuned's lookup
     * index follows a tune through it without reading rows back. */
    void (*committed)(void *ctx, const store_measurement *m);
    void *committed_ctx;
    /* progress callback, may be NULL; return non-zero to cancel */
    int (*progress)(void *ctx, const tuner_progress *p);
    void *ctx;
    /* checked between tactics and samples; may be NULL. Atomic: another
     * thread (attuned's DELETE, shutdown) or a signal handler sets it. */
    atomic_int *cancel;
    const char *host;      /* provenance; NULL: gethostname() */
    /* Throttling check (tuner/throttle.h): the clock source sampled around
     * every timed tactic (NULL: the device's own, attn_power_sample), and
     * the run's starting clock carried from shape to shape (0: none yet;
     * pass tuner_shape_result.clock_ref_mhz on to the next shape). */
    tuner_clock_fn clock;
    void *clock_ctx;
    double clock_ref_mhz;
    double throttle_rel;   /* default 0.05: a clock 5% below the start */
    /* Noise check (tuner/noise.h): a timing whose median is over
     * (1 + noise_spread) x its fastest sample, or whose thread had under
     * noise_share of a CPU (CPU devices), is timed again up to
     * noise_retries times, noise_pause_ms after the last; still noisy, its
     * row is stored flagged noisy. Defaults TUNER_NOISE_*, both tests off
     * when the environment has ATTUNE_NOISE_CHECK=0; a spread and a share
     * <= 0 turn each test off. cpu: the CPU clock source (NULL: the
     * timing thread's own, on a CPU device). */
    double noise_spread, noise_share;
    int noise_retries, noise_pause_ms;
    tuner_cpu_fn cpu;
    void *cpu_ctx;
    /* The shape's deadline (kernels/cancel.h attn_mono_s; <= 0: none):
     * past it no kernel call is started, a CPU call in flight stops at its
     * next block, and the tune answers ATTUNE_ECANCELED (what was
     * committed stays). The cancel flag above also reaches into calls. */
    double deadline_s;
    /* 1: commit rows but leave the winner mark alone, so the shape does
     * not answer `measured` (tune on miss's quick pass: only a complete
     * tune marks, issue 29 item 2). */
    int no_mark;
    /* The tactics to measure, candidates[0..ncandidates) (tune on miss's
     * quick pass: the model's best few), instead of every tactic the
     * device lists for the shape; NULL: the listing. They are measured as
     * listed ones are (a tactic the device does not run is stored
     * unsupported). */
    const attn_tactic *candidates;
    int ncandidates;
    /* Comma-separated texts: of those tactics, measure only the ones whose
     * name holds one of them (attune tune --only, for A/Bs of one family);
     * NULL: all. With it no winner is marked (as with no_mark): a winner
     * of part of the listing is not the shape's. */
    const char *only;
    /* Placements (docs/tuning.md, "Placement"): a fully timed call under
     * placement_us (its first timing, copies included) and not hopeless is
     * timed in `placements` places in all: the extra ones each a fresh
     * session (the same inputs) and plan, made while the earlier ones
     * still hold their buffers, so each lies elsewhere (a CUDA session
     * allocates a spacer of varying size first); the row is stored with
     * the mean of the placements' times, its note listing them. On the
     * H200 a 10-26 us call took one of two times 4-5% apart, by where its
     * buffers lay and, for some, by the process (docs/perf.md,
     * 2026-12-04); one plan's figure, or the median of three, was one of
     * them. 0: TUNER_PLACEMENTS on a CUDA device, 1 elsewhere;
     * placement_us default TUNER_PLACEMENT_US. */
    int placements;
    double placement_us;
} tuner_opts;

#define TUNER_PLACEMENTS 5
#define TUNER_PLACEMENTS_MAX 7
#define TUNER_PLACEMENT_US 50.0

void tuner_opts_default(tuner_opts *o);

typedef struct tuner_shape_result {
    int measured;     /* tactics measured now */
    int skipped;      /* already stored */
    int failed;       /* status failed or inaccurate */
    char winner[ATTN_TACTIC_STR_MAX]; /* "" if none */
    double winner_us;
    int retimed;      /* tactics timed again because the clock had dropped */
    int throttled;    /* of those, still throttled: noted in their rows */
    int noise_retimed; /* tactics timed again because their timing was noisy */
    int noisy;        /* of those, still noisy: stored flagged noisy */
    double clock_ref_mhz; /* the run's starting clock after this shape */
    int screened;     /* tactics timed by the screening pass */
    int screened_out; /* of those, stored with their screening time only */
    int full;         /* tactics given the full timing */
    int twins;        /* tactics whose pad changes no length, stored from the row
                         of their smaller-pad twin, not timed (of measured) */
    /* where the shape's wall time went, seconds: the tactics' list, the
     * session, inputs and reference; plans (build and free); checked runs;
     * screening timings; full timings; store writes */
    double prepare_s, plan_s, check_s, screen_s, time_s, store_s;
} tuner_shape_result;

/* Seed of a shape's inputs: FNV-1a of its canonical key. */
uint64_t tuner_shape_seed(const attn_shape *s);

/* Tune one shape. shape_index/shape_count only feed progress reports.
 * Returns 0 (also when some tactics failed: that is data), ATTUNE_ECANCELED
 * when canceled (measurements taken so far stay committed), or an error
 * (ENOMEM when the shape's buffers do not fit, EDB, EGPULOST: a tactic's
 * run lost the device's context; its row is committed failed and noted,
 * and nothing more can run on the device in this process). */
int tuner_run_shape(store *st, const attn_device *dev, const attn_shape *s,
                    const tuner_opts *o, int shape_index, int shape_count,
                    tuner_shape_result *res);

/* Rows checked for shape s under o: fills *rows (malloc'd, sorted, unique)
 * and *n. Exposed for tests. */
int tuner_check_rows(const attn_shape *s, const tuner_opts *o, int64_t **rows, int *n);

#endif
