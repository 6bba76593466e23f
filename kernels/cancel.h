/* cancel.h -- bounding a kernel call from inside: a cancel flag and a
 * deadline, per thread, that backends check at their block boundaries.
 *
 * A tuner's cancel flag is checked between tactics and samples; one call
 * of a huge shape can still run for minutes (issue 29: 576 s a call on the
 * CPU). The tuner arms its thread's hook for the length of a tune
 * (attn_cancel_arm); the CPU kernels poll it between blocks of rows and
 * give up with ATTUNE_ECANCELED; a GPU call, which cannot be stopped once
 * launched, is never started when the hook has fired (tuner/tuner.c). */
#ifndef ATTUNE_CANCEL_H
#define ATTUNE_CANCEL_H

#include <stdatomic.h>

/* CLOCK_MONOTONIC, seconds. */
double attn_mono_s(void);

/* Arm the calling thread's hook: flag (may be NULL) non-zero or the clock
 * past deadline_s (attn_mono_s; <= 0: none) makes attn_cancel_poll true.
 * attn_cancel_arm(NULL, 0) disarms it. */
void attn_cancel_arm(const atomic_int *flag, double deadline_s);

/* 1 when the calling thread's flag is set or its deadline passed, else 0.
 * Cheap: one atomic load, and a clock read only when a deadline is armed. */
int attn_cancel_poll(void);

/* 1 when the last poll that fired did so for the deadline (not the flag). */
int attn_cancel_by_deadline(void);

#endif
