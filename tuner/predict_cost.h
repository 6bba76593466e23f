/* predict_cost.h -- the cost pieces of the prediction model (predict.h),
 * each alone testable: a tactic's roofline cost on a shape from what its
 * kernel says of itself (kernels/variant.h, attn_cost) and the rates the
 * device showed. Nothing here knows a variant, an architecture or a
 * library: those are the descriptors' (kernels/variant.h).
 *
 *   cost = overlap(flops / (P x W), bytes / (B x share))
 *          + waves x wave_lat x L + launches x L + copy_bytes / B + copies x L
 *
 * P: the FLOP rate per busy wave slot the tactic's family reached on the
 * device; W: the useful fraction of its waves (predict_wave_eff); B: the
 * device's best byte rate, of which a launch of few blocks reaches `share`;
 * L: the launch floor; wave_lat: a wave of blocks' latency in launch
 * floors (issue, Q tile in, O tile out: what no FLOP or byte rate covers). */
#ifndef ATTUNE_PREDICT_COST_H
#define ATTUNE_PREDICT_COST_H

#include "../kernels/variant.h"

/* The device's rates as the model measured them, and its constants. */
typedef struct predict_rates {
    double flops;    /* FLOPs per us per busy wave slot of the tactic's family */
    double bytes;    /* bytes per us: the best any row reached */
    double lat_us;   /* launch floor, us */
    double wave_lat; /* a wave of blocks' latency, in launch floors */
    double causal_tail; /* share of the longest causal block a last wave
                           waits for when blocks are not issued longest first */
    int sms;         /* SMs of the device: 0, no wave model */
    double overlap_p; /* predict_overlap's p; 0: the larger part alone (the
                         plain roofline) */
} predict_rates;

/* (query, key) pairs a shape computes: sq * skv, or for causal the
 * visible ones (key j <= i + skv - sq), in closed form (sq can be 10^6). */
double predict_visible_pairs(int64_t sq, int64_t skv, int causal);

/* FLOPs of the shape itself: its visible pairs at its head dim, whatever a
 * tactic pads or wastes. */
double predict_useful_flops(const attn_shape *s);

/* FLOPs and bytes of s as the kernel described by c computes it: the rows
 * it computes against the keys it computes (padding, tiles and block
 * costs included), visible pairs only where it skips masked tiles, at the
 * head dim it computes; c's bytes. */
void predict_work(const attn_shape *s, const attn_cost *c, double *flops, double *bytes);

/* Useful fraction of the waves c runs on s on a device of sms SMs: 1
 * without a wave model (sms 0, or a kernel not run in waves). A grid of B
 * blocks on S = SMs x resident blocks per SM runs ceil(B / S) waves, each
 * as long as a full one (a block's time hardly depends on how many share
 * its SM: on the H200, 120 blocks of the 128x64 d=64 tile in a last wave
 * took as long as 240 in a full one), so the useful fraction is
 * (B / S) / ceil(B / S). Which tile fills the SMs best flips with the
 * block count (b1.hq20.sq1500 d=64: 240 blocks of 128x64 fill one wave of
 * 264 slots, 480 of 64x64 take two of 396: 1.49x). Causal: row tile j
 * sees the keys up to its last row, a share from w_min (the first) to 1,
 * f on average; a block is its w_min part, run in whole waves, plus the
 * rest, balanced over the slots but for causal_tail of the largest (the
 * SMs that took the last row tiles finish last), unless its blocks are
 * issued longest first (the last wave then holds the shortest). */
double predict_wave_eff(const attn_shape *s, const attn_cost *c, int sms, double causal_tail);

/* The time of a kernel whose arithmetic alone takes a and whose bytes
 * alone take b: (a^p + b^p)^(1/p). The larger part when the other is
 * small; 2^(1/p) times either when they are equal, for neither hides the
 * other fully (the plain roofline's max said the v1 128x64 tile on
 * b64.hq12.sq256 d=64, arithmetic and bytes each about 40 us, would take
 * 47.5; it took 64.5). p <= 0: max(a, b). */
double predict_overlap(double a, double b, double p);

/* The cost in microseconds of s run by the kernel described by c at rates
 * r (the formula above). */
double predict_cost_us(const attn_shape *s, const attn_cost *c, const predict_rates *r);

#endif
