/* throttle.h -- catch tactics timed while the GPU clock was throttled.
 *
 * A passively cooled Jetson in a long tuning run heats up and lowers its
 * clock; a tactic timed then loses unfairly to one timed while cool. The
 * tuner samples the GPU clock (and temperature) before and after every
 * timed tactic. A tactic whose samples fall more than `rel` (5%) below the
 * run's starting clock is timed again; if the clock is still low, its row
 * keeps the second timing and says so in its note ("throttled: ..."), which
 * `attune results` and /v1/results show.
 *
 * The run's starting clock is the first sample of the run, raised when a
 * later sample is higher: a run that starts on an idle GPU (DVFS has
 * lowered its clock) takes the clock under load as its start. */
#ifndef ATTUNE_THROTTLE_H
#define ATTUNE_THROTTLE_H

#include "../kernels/attn.h"

/* A clock source: the GPU clock now in MHz and the temperature in C (NAN
 * when unknown). Returns 0, or < 0 when no clock is readable (then nothing
 * is checked). The default is attn_power_sample (kernels/power.h); tests
 * pass a fake. */
typedef int (*tuner_clock_fn)(void *ctx, const attn_device *dev, double *mhz, double *temp_c);

typedef struct tuner_throttle {
    tuner_clock_fn clock;  /* NULL: attn_power_sample of the device */
    void *ctx;
    double rel;            /* a sample below (1 - rel) x ref is throttled */
    double ref_mhz;        /* the run's starting clock; 0 before any sample */
    /* the check in progress (tuner_throttle_begin .. _end) */
    double low_mhz;        /* lowest sample; 0 when none was readable */
    double temp_c;         /* highest temperature seen, NAN when unknown */
} tuner_throttle;

/* Sample before a timed tactic (and start the check). */
void tuner_throttle_begin(tuner_throttle *t, const attn_device *dev);

/* Sample after it. Returns 1 when a sample of this check was more than rel
 * below the run's start, 0 otherwise (also when no clock is readable). */
int tuner_throttle_end(tuner_throttle *t, const attn_device *dev);

/* The note of a tactic still throttled after its re-timing, into buf:
 * "throttled: clock 1020 MHz, 15% below the run's start (1200 MHz), 87 C". */
void tuner_throttle_note(const tuner_throttle *t, char *buf, size_t len);

#endif
