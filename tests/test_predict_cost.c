/* test_predict_cost.c -- the cost pieces of the prediction model
 * (tuner/predict_cost.h), each alone, on descriptions written by hand:
 * visible pairs, work, wave efficiency and the cost formula. */
#include <math.h>

#include "test.h"
#include "tuner/predict_cost.h"

static attn_shape shp(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
                      int causal)
{
    attn_shape s = {b, hq, hkv, sq, skv, d, ATTN_F16, causal};
    return s;
}

/* The pairs a causal mask leaves, counted one row at a time. */
static double pairs_by_rows(int64_t sq, int64_t skv)
{
    double n = 0;
    for (int64_t i = 0; i < sq; i++) {
        int64_t v = i + (skv - sq) + 1;
        n += (double)(v < 0 ? 0 : v > skv ? skv : v);
    }
    return n;
}

static void visible_pairs_should_count_the_mask(void)
{
    CHECK_NEAR(predict_visible_pairs(50, 1018, 0), 50.0 * 1018, 0);
    const int64_t lens[][2] = {{1, 1}, {4, 4}, {50, 1018}, {1018, 50}, {7, 3}, {3, 7}, {1, 4096}};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        CHECK_NEAR(predict_visible_pairs(lens[i][0], lens[i][1], 1),
                   pairs_by_rows(lens[i][0], lens[i][1]), 0);
    attn_shape s = shp(2, 8, 1, 128, 128, 64, 1);
    CHECK_NEAR(predict_useful_flops(&s), 4.0 * 2 * 8 * (128.0 * 129 / 2) * 64, 0);
}

static attn_cost plain(double rows, double keys, int64_t d, int skip)
{
    attn_cost c;
    memset(&c, 0, sizeof c);
    c.rows = rows;
    c.keys = keys;
    c.head_dim = d;
    c.causal_skip = skip;
    c.bytes = 1000;
    c.byte_share = 1;
    c.flop_share = 1;
    c.launches = 1;
    return c;
}

static void work_should_scale_by_what_the_kernel_computes(void)
{
    attn_shape s = shp(1, 4, 4, 100, 77, 40, 0);
    double fl, by;
    attn_cost c = plain(100, 77, 40, 1);
    predict_work(&s, &c, &fl, &by);
    CHECK_NEAR(fl, 4.0 * 4 * 100 * 77 * 40, 0);
    CHECK_NEAR(by, 1000, 0);
    c = plain(128, 256, 64, 1); /* 128-row tiles, two key tiles and fixed cost, d = 64 */
    predict_work(&s, &c, &fl, &by);
    CHECK_NEAR(fl, 4.0 * 4 * 128 * 256 * 64, 1e-6 * fl);
    /* causal: the visible pairs where masked tiles are skipped, all where not */
    s.causal = 1;
    c = plain(100, 77, 40, 1);
    predict_work(&s, &c, &fl, &by);
    CHECK_NEAR(fl, 4.0 * 4 * pairs_by_rows(100, 77) * 40, 1e-9 * fl);
    c.causal_skip = 0;
    predict_work(&s, &c, &fl, &by);
    CHECK_NEAR(fl, 4.0 * 4 * 100 * 77 * 40, 0);
}

static void wave_efficiency_should_count_idle_slots(void)
{
    attn_shape s = shp(1, 20, 20, 1500, 1500, 64, 0);
    attn_cost c = plain(1536, 1600, 64, 1);
    c.quantized = 1;
    c.blocks = 240;
    c.blocks_sm = 2;
    c.row_tile = 128;
    /* 240 blocks on 264 slots: one wave, 240/264 of it busy */
    CHECK_NEAR(predict_wave_eff(&s, &c, 132, 0.5), 240.0 / 264, 1e-12);
    c.blocks = 480;
    c.blocks_sm = 3; /* 480 on 396: two waves */
    CHECK_NEAR(predict_wave_eff(&s, &c, 132, 0.5), (480.0 / 396) / 2, 1e-12);
    /* no wave model: no device, or a kernel not run in waves */
    CHECK_NEAR(predict_wave_eff(&s, &c, 0, 0.5), 1, 0);
    c.quantized = 0;
    CHECK_NEAR(predict_wave_eff(&s, &c, 132, 0.5), 1, 0);
    /* causal: the longest-first kernel is charged no tail */
    s.causal = 1;
    c.quantized = 1;
    c.blocks = 264;
    c.blocks_sm = 2;
    double tailed = predict_wave_eff(&s, &c, 132, 0.5);
    c.longest_first = 1;
    double first = predict_wave_eff(&s, &c, 132, 0.5);
    CHECK_MSG(first > tailed && first <= 1 && tailed > 0, "longest first %g, tailed %g", first,
              tailed);
    CHECK_NEAR(first, 1, 1e-12); /* one full wave, shortest blocks last: no idle slot */
}

/* Arithmetic and bytes: the larger when the other is small, 2^(1/p)
 * times either when equal, the plain max at p 0; in the cost, in place of
 * the roofline's max. */
static void overlap_should_hide_the_smaller_part_only_when_it_is_small(void)
{
    CHECK_NEAR(predict_overlap(4, 0, 2.5), 4, 0);
    CHECK_NEAR(predict_overlap(0, 4, 2.5), 4, 0);
    CHECK_NEAR(predict_overlap(4, 4, 2.5), 4 * pow(2, 1 / 2.5), 1e-12);
    CHECK_NEAR(predict_overlap(3, 4, 2.5), predict_overlap(4, 3, 2.5), 1e-12);
    CHECK_NEAR(predict_overlap(3, 4, 0), 4, 0);
    CHECK(predict_overlap(0.4, 4, 2.5) < 4 * 1.002); /* a tenth: hidden within 0.2% */
    CHECK(predict_overlap(3, 4, 2.5) > predict_overlap(2, 4, 2.5));
    attn_shape s = shp(1, 1, 1, 64, 64, 64, 0);
    attn_cost c = plain(64, 64, 64, 1);
    c.bytes = 1.048576e6; /* as long as its FLOPs at the rates below: 1.048576 us each */
    predict_rates r = {1e6, 1e6, 2.0, 0.4, 0.5, 0, 2.5};
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 1.048576 * pow(2, 1 / 2.5) + 2.0, 1e-9);
    r.overlap_p = 0;
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 1.048576 + 2.0, 1e-9);
}

static void cost_should_add_the_rooflines_waves_launches_and_copies(void)
{
    attn_shape s = shp(1, 1, 1, 64, 64, 64, 0);
    attn_cost c = plain(64, 64, 64, 1);
    c.bytes = 4e6;
    predict_rates r = {1e6, 1e6, 2.0, 0.4, 0.5, 132, 0};
    /* flops 4*64*64*64 = 1.05e6 at 1e6 per us: 1.05 us; bytes 4 us: bytes bound */
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 4.0 + 2.0, 1e-12);
    c.waves = 3;
    c.launches = 3;
    c.copies = 2;
    c.copy_bytes = 1e6;
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 4.0 + 3 * 0.4 * 2 + 3 * 2 + 1.0 + 2 * 2, 1e-12);
    c.byte_share = 0.5; /* a launch of few blocks streams at half the rate */
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 8.0 + 3 * 0.4 * 2 + 3 * 2 + 1.0 + 2 * 2, 1e-12);
    r.sms = 0; /* off a GPU: no waves, no copy launches */
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 8.0 + 3 * 2 + 1.0, 1e-12);
    /* compute bound: the family's rate */
    c = plain(64, 64, 64, 1);
    c.bytes = 1;
    r.flops = 1e5;
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 4.0 * 64 * 64 * 64 / 1e5 + 2.0, 1e-9);
    c.flop_share = 0.25; /* a launch of few blocks computes at a quarter of the rate */
    CHECK_NEAR(predict_cost_us(&s, &c, &r), 4 * 4.0 * 64 * 64 * 64 / 1e5 + 2.0, 1e-9);
}

int main(void)
{
    RUN(visible_pairs_should_count_the_mask);
    RUN(work_should_scale_by_what_the_kernel_computes);
    RUN(wave_efficiency_should_count_idle_slots);
    RUN(overlap_should_hide_the_smaller_part_only_when_it_is_small);
    RUN(cost_should_add_the_rooflines_waves_launches_and_copies);
    return test_summary();
}
