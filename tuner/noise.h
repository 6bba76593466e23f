/* noise.h -- catch timings taken while the host was busy.
 *
 * A timing's samples say themselves when most of them were slowed down: a
 * median far above the fastest sample. (A slow tail alone does not: the
 * stored median is robust to a few preempted samples, and cold first calls
 * and preemption only ever add time.) On a CPU device the tuner also reads
 * how much of the wall clock its own thread got on a CPU while it timed:
 * the CPU backend runs its kernels on that thread, so a share well below 1
 * means another process held the core.
 *
 * A timing judged noisy is timed again after a short pause (retries
 * times); one still noisy is stored flagged noisy (store_measurement
 * .noisy) with a note "noisy: ..." that gives the figures, kept out of
 * every answer (select_winner) and measured again by the next tune. In a
 * screening pass a noisy screening keeps its tactic for the full timing
 * (its screening time is no verdict). docs/tuning.md, "Noisy timings". */
#ifndef ATTUNE_NOISE_H
#define ATTUNE_NOISE_H

#include <stddef.h>

#include "../kernels/attn.h"

/* Defaults (docs/tuning.md says why). */
#define TUNER_NOISE_SPREAD 0.5   /* median over 1.5x the fastest sample */
#define TUNER_NOISE_SHARE 0.5    /* the timing thread on a CPU under half the time */
#define TUNER_NOISE_RETRIES 2    /* timings after the first */
#define TUNER_NOISE_PAUSE_MS 50  /* before each of them */

/* A CPU-time source: the CPU seconds the calling thread has had and a
 * monotonic wall clock, in seconds. Returns 0, or < 0 when unknown (then
 * no share is judged). The default (NULL) reads CLOCK_THREAD_CPUTIME_ID
 * and CLOCK_MONOTONIC on a device of kind "cpu" and nothing on a GPU,
 * whose timings the host's load does not stretch the same way; tests pass
 * a fake. */
typedef int (*tuner_cpu_fn)(void *ctx, const attn_device *dev, double *cpu_s, double *wall_s);

typedef struct tuner_noise {
    double spread;        /* (median - min) / min above this is noisy; <= 0: not judged */
    double share;         /* a CPU share below this is noisy; <= 0: not judged */
    tuner_cpu_fn cpu;     /* NULL: the default above */
    void *ctx;
    /* the check in progress (tuner_noise_begin .. _end) */
    double cpu0_s, wall0_s; /* readings at begin; wall0_s < 0: none */
    double got_share;       /* the share of the last check; NAN when not read */
} tuner_noise;

/* Read the CPU clock before a timing. */
void tuner_noise_begin(tuner_noise *nz, const attn_device *dev);

/* Read it after: sets nz->got_share (NAN when unknown or when the timing
 * lasted under a millisecond, too short for a share to mean anything). */
void tuner_noise_end(tuner_noise *nz, const attn_device *dev);

/* The verdict on a timing of n samples (median, min) and the share of the
 * last check: 1 noisy, with why (may be NULL) saying what, e.g. "median
 * 2.31x the min, 34% of a CPU"; 0 clean. The spread needs 3 samples or
 * more (fewer have no median of their own). */
int tuner_noise_judge(const tuner_noise *nz, double median, double min, int n, char *why,
                      size_t len);

/* Sleep ms milliseconds in steps, returning early (1) when the tune is
 * canceled or past its deadline (kernels/cancel.h); 0 otherwise. */
int tuner_noise_pause(int ms);

#endif
