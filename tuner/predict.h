/* predict.h -- answers for shapes nobody tuned: a model over a device's
 * measurements that predicts every tactic's time on a new shape.
 *
 * The model (issue 10, docs/tuning.md "Predicted answers"). A tactic's
 * *family* is its canonical text without the split count
 * (`fused_splitkv/pad=1/tile=16x64/warps=4`); a measured split count
 * transfers as the grid it launched (b * hkv * query row blocks * splits)
 * and, second, its keys per split: on the H200 the best count kept the
 * grid at ~128 blocks from 16 to 128 KV heads x batch.
 *
 * Every measured row becomes an efficiency: the log of its time over a
 * roofline cost of its shape for its tactic,
 *     cost = max(flops / (P_f * W), bytes / B) + L
 * with P_f the highest FLOP/s per busy wave slot any row of its family
 * reached on the device (a family is credited only the rate it showed: a
 * split-KV decode kernel is not costed at the prefill kernels' peak; a
 * kernel never seen compute-bound gets its variant's best ceiling), B
 * the highest bytes/s any row reached and L the launch floor (half the
 * fastest time, per kernel launched on a CUDA device), so decode-like shapes
 * (few queries per key) are costed by their bytes and prefill by their
 * FLOPs. The FLOPs count the rows the tactic computes (whole row tiles of
 * a fused kernel, the padded buffer of a GEMM variant), against the
 * padded keys in whole key tiles plus half a tile per block, at the
 * kernel's head dim (the CUDA fused kernels run d=40
 * as d=64); GEMM variants are costed for the whole score matrix (they
 * cannot skip a causal mask's zeros), fused ones for the visible pairs.
 * W is the wave efficiency of a tiled prefill kernel on a CUDA device
 * whose SM count the model knows (predict_build_dev): blocks / (SMs x
 * resident blocks per SM) over its ceiling (under a causal mask, with the
 * blocks' unequal work balanced but for half the largest), the resident
 * blocks estimated from the tile's threads, shared memory and accumulator
 * registers (cuDNN's tiling is not in its tactic: taken as 128 rows, one
 * block per SM); it is what decides between tiles (128x64 vs 64x64) that
 * the shapes' sizes alone do not.
 *
 * To answer shape s, the K measured shapes nearest to s in log-shape
 * space (b*hkv, group size, sq, skv, d, plus a step for another dtype or
 * causality) are weighted by inverse squared distance. A candidate
 * tactic's rank is its weighted slowdown against the best tactic of each
 * neighbour that measured its family (shrunk toward 2x by a quarter of
 * all neighbours' weight: a family the nearest shapes did not list does
 * not win on the word of far ones alone), plus the log of its cost on s;
 * its predicted time is those neighbours' efficiency times its cost on
 * s; its predicted error
 * is their error in units of each dtype's default bound. The answer is
 * the best-ranked candidate that most of those neighbours' weight found
 * eligible and whose predicted error meets the bound. Candidates are the
 * backend's listing for s, so the answer is always a complete tactic the
 * backend runs on s.
 *
 * Cost: building is O(rows log rows); an answer is O(shapes + K x
 * candidates x log tactics), in memory, no SQL (microseconds: 6-18 us for
 * the CPU and H200 listings over 60 shapes). A model is immutable once
 * built: any number of threads may answer from it at once. */
#ifndef ATTUNE_PREDICT_H
#define ATTUNE_PREDICT_H

#include <stdio.h>

#include "../db/store.h"
#include "select.h"
#include "variant_set.h"

/* Measured shapes an answer names as the ones it leaned on. */
#define PREDICT_MAX_FROM 4

typedef struct predict_model predict_model;

/* Build a model over the rows m[0..n) of one device (any shapes, any
 * stacks, any order). Per shape it keeps the rows of cur_stack when that
 * stack has a usable row (ok, timed, with an error), else those of the
 * stack with the newest row (those shapes are marked stale). p: the
 * selection policy (NULL: defaults). Copies what it needs: m may be freed
 * afterwards. Returns NULL only on ENOMEM; a model over no usable rows is
 * valid and answers ATTUNE_ENOTFOUND. */
predict_model *predict_build(const store_measurement *m, int n, const char *cur_stack,
                             const select_policy *p);
/* The same over rows given by pointer (m[0..n) point at rows that stay
 * the caller's): builds without copying whole rows first. */
predict_model *predict_build_parts(const store_measurement *const *m, int n,
                                   const char *cur_stack, const select_policy *p);
/* The same knowing the device the rows were measured on (dev NULL: as
 * above): on a CUDA device its SM count and compute capability give the
 * wave quantisation of tiled kernels (blocks over SMs x resident blocks
 * per SM), which decides between tiles that the shapes alone do not. */
predict_model *predict_build_dev(const store_measurement *const *m, int n, const char *cur_stack,
                                 const select_policy *p, const attn_device_info *dev);
predict_model *predict_build_on(const store_measurement *m, int n, const char *cur_stack,
                                const select_policy *p, const attn_device_info *dev);
void predict_free(predict_model *pm);

/* Write, for every answer the model gives from now on, one line per
 * candidate it ranked (predicted time, score, the cost on the shape, the
 * eligible share, neighbours that measured its family) to f (NULL: stop).
 * For people tuning the model: `ATTUNE_PREDICT_TRACE=1 attune loo`. */
void predict_set_trace(predict_model *pm, FILE *f);

/* Shapes the model holds (those with at least one row). */
int predict_nshapes(const predict_model *pm);

/* The wave latency the model costs tactics with, in launch floors
 * (predict_cost.h): fitted on the device's own rows where they clearly
 * prefer another value than the default (predict.c, "constants fitted per
 * device"), else the default. *fitted (may be NULL) gets 1 when fitted. */
double predict_wave_lat(const predict_model *pm, int *fitted);

/* The p with which the model's costs combine arithmetic and bytes
 * (predict_overlap in predict_cost.h): the model's own where its rows
 * showed the device's byte rate (shapes bound by bytes), else 0 (the
 * larger part alone). */
double predict_overlap_p(const predict_model *pm);

typedef struct predict_answer {
    attn_tactic tactic;                 /* complete, one of the candidates */
    char tactic_str[ATTN_TACTIC_STR_MAX];
    double time_us;                     /* predicted (select_time's sense) */
    double rel_err;                     /* predicted relative L2 error */
    double distance;                    /* log-shape distance to from[0] */
    int nearest;  /* 1: the tactic is the winner of from[0], a shape of the
                     same dtype, d, causal and group size */
    int stale;    /* a leaned-on shape answered from another stack's rows */
    int nfrom;
    char from[PREDICT_MAX_FROM][ATTN_SHAPE_KEY_MAX]; /* heaviest first */
} predict_answer;

/* Answer shape s from the model, choosing among cand[0..ncand) (the
 * backend's listing for s). max_rel_err > 0 overrides the policy's bound
 * (the API's max_rel_err=, inaccurate rows then count). Returns 0,
 * ATTUNE_ENOTFOUND when the model holds nothing usable or no candidate is
 * predicted to meet the bound, or ATTUNE_EINVAL (ncand <= 0, invalid
 * shape). */
int predict_answer_for(const predict_model *pm, const attn_shape *s, const attn_tactic *cand,
                       int ncand, double max_rel_err, predict_answer *out);

/* The same without a backend listing (a fleet device this host cannot
 * list for): the candidates are the families the model measured,
 * instantiated for s (the split count that gives the grid it had where
 * it was measured, within 1..64 and the padded key count). Returns as predict_answer_for. */
int predict_answer_measured_families(const predict_model *pm, const attn_shape *s,
                                     double max_rel_err, predict_answer *out);
/* The same among the families of the variants vs only (0: every one). */
int predict_answer_measured_families_in(const predict_model *pm, const attn_shape *s,
                                        variant_set vs, double max_rel_err,
                                        predict_answer *out);

/* 1 when the candidate tactic (canonical text) may be answered. */
typedef int (*predict_keep_fn)(void *ctx, const char *tactic);

/* The same among the candidates keep(ctx, tactic) accepts too (keep NULL:
 * every one): the exclusion pins of a lookup (lookup/index.h). */
int predict_answer_measured_families_if(const predict_model *pm, const attn_shape *s,
                                        variant_set vs, predict_keep_fn keep, void *ctx,
                                        double max_rel_err, predict_answer *out);

/* The family of a tactic: its text without "/splits=N" into buf (at least
 * ATTN_TACTIC_STR_MAX); *splits receives N (0 when absent) and *pad the
 * pad (1 when absent). Works on the text, so tactic keys this build does
 * not parse still have a family. Returns buf. */
char *predict_family(const char *tactic, char *buf, size_t len, int *splits, int *pad);

#endif
