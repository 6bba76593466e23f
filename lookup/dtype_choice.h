/* dtype_choice.h -- the cross-dtype question (issue 30 item 3): the
 * fastest tactic of any of a set of dtypes whose error against the bf16
 * answer of the shape is within a bound, so that a runtime lets attune
 * decide whether FP8 is worth it for this shape on this device.
 *
 * Every dtype of the set has a candidate: the shape (the same sizes) in
 * that dtype, its measured winner on the device under the query's bound,
 * with each row's error against the bf16 answer being
 *
 *   e4m3      its src_rel_err: against the float64 reference of the bf16
 *             values its inputs were quantized from, input rounding
 *             included (the whole cost of going to FP8);
 *   bf16      its rel_err (its inputs are the source);
 *   f16, f32  their rel_err (inputs of bf16's precision or finer: no
 *             rounding below the source's).
 *
 * The fastest candidate (the time paid, select_time) is the answer; ties
 * go to the smaller error. Measurements only: no fleet, predicted or
 * default answer takes part, and a dtype the device has not measured, or
 * cannot run (dtype_device.h), is refused and says so. docs/api.md
 * "Which dtype" and docs/tuning.md "FP8" tell the rest. */
#ifndef ATTUNE_DTYPE_CHOICE_H
#define ATTUNE_DTYPE_CHOICE_H

#include <stddef.h>

#include "../common/dtype_set.h"
#include "index.h"

typedef enum {
    DTYPE_CHOSEN = 0,  /* the fastest candidate within the bound: the answer */
    DTYPE_SLOWER,      /* within the bound, slower than the chosen one */
    DTYPE_OVER,        /* measured, but no row within the bound */
    DTYPE_NO_SOURCE,   /* e4m3 rows without an error against the source */
    DTYPE_UNMEASURED,  /* no complete tune answers for it on this device */
    DTYPE_PINNED,      /* a force pin holds the shape to a tactic not within it */
    DTYPE_UNSUPPORTED, /* the device cannot run the dtype (no FP8 tensor cores) */
} dtype_verdict;

/* "chosen", "slower", "over", "no_source_error", "not_measured",
 * "pinned", "unsupported" */
const char *dtype_verdict_name(dtype_verdict v);

typedef struct dtype_candidate {
    attn_dtype dtype;
    dtype_verdict verdict;
    char key[ATTN_SHAPE_KEY_MAX]; /* the shape in this dtype */
    index_answer ans;  /* chosen, slower: its answer (measured or pinned) */
    double err;        /* chosen, slower: the answer's error against the bf16
                          answer; over: the smallest measured; else NaN */
    char why[512];     /* one sentence, every verdict */
} dtype_candidate;

typedef struct dtype_choice {
    char device_id[64];           /* the device the spec named */
    char dims[ATTN_SHAPE_KEY_MAX]; /* the sizes: a shape key with '*' for the dtype */
    unsigned set;                 /* the dtypes asked, bit 1 << dtype */
    double max_err;
    int n;                        /* candidates, in dtype order */
    dtype_candidate c[ATTN_NDTYPES];
    int chosen;                   /* index into c; -1 when none qualified */
} dtype_choice;

/* Answer the question for the sizes of dims (its dtype is ignored) on the
 * device that device names, among the dtypes of set, under max_err (in
 * (0, 1]) and among the variants of vs (0: all). 0 with *out filled
 * (out->chosen -1 when no dtype qualified: each candidate says why),
 * ATTUNE_ENODEV, ATTUNE_EINVAL (an empty set, a bound out of range),
 * ATTUNE_ENOMEM. */
int dtype_choose(index_state *ix, const char *device, const attn_shape *dims, unsigned set,
                 double max_err, variant_set vs, dtype_choice *out);

/* The answer as JSON text (malloc'd, caller frees; NULL on ENOMEM): with a
 * chosen candidate, its GET /v1/tactic answer (answer_json) with "dtype",
 * "err", "max_err", "dtypes" and "candidates" added; without, {"error",
 * "device", "shape", "max_err", "dtypes", "candidates"}, the error being
 * dtype_choice_refusal's text. Each candidate: dtype, shape, verdict, why,
 * tactic, time_us, err, rel_err (and src_rel_err for e4m3), null where
 * unknown. */
char *dtype_choice_json(const dtype_choice *c, variant_set vs, size_t *len);

/* Why nothing qualified, one line ("no dtype of bf16,e4m3 within
 * max_err=0.01 for b1...: bf16: ...; e4m3: ..."). */
void dtype_choice_refusal(const dtype_choice *c, char *buf, size_t len);

#endif
