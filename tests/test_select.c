/* test_select.c -- the selection rule picks the fastest accurate tactic. */
#include <math.h>

#include "test.h"
#include "tuner/select.h"

static store_measurement meas(const char *tactic, double us, double rel, store_status st)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.shape = (attn_shape){1, 8, 1, 50, 1018, 256, ATTN_F16, 0};
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.rel_err = rel;
    m.status = st;
    return m;
}

static void winner_should_be_fastest_within_tolerance_not_fastest_overall(void)
{
    store_measurement m[3] = {
        meas("fused/pad=1", 20.0, 3e-4, STORE_OK),
        meas("folded/acc=f16/pad=1", 10.0, 4e-3, STORE_OK), /* fastest, 13x the best error */
        meas("split/acc=f32/pad=1", 15.0, 4e-4, STORE_OK),
    };
    select_policy p;
    select_policy_default(&p);
    CHECK_EQ_INT(select_winner(m, 3, &p, 0), 2);
    /* loosen the ratio: the fast folded tactic wins */
    p.max_ratio = 20;
    CHECK_EQ_INT(select_winner(m, 3, &p, 0), 1);
    /* a per-query absolute bound below folded's error excludes it again */
    CHECK_EQ_INT(select_winner(m, 3, &p, 1e-3), 2);
    /* a bound below everything: no winner */
    CHECK_EQ_INT(select_winner(m, 3, &p, 1e-5), -1);
}

static void query_bound_should_loosen_as_well_as_tighten(void)
{
    store_measurement m[2] = {meas("split/acc=f32/pad=1", 15.0, 3e-4, STORE_OK),
                              meas("folded/acc=f16/pad=1", 10.0, 6e-3, STORE_INACCURATE)};
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 0);    /* default f16 bound 5e-3 */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 1e-2), 1); /* the caller accepts 1e-2 */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 1e-3), 0);
    m[1].status = STORE_FAILED; /* failed never competes */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 1e-2), 0);
}

static void winner_should_ignore_failed_and_inaccurate(void)
{
    store_measurement m[3] = {
        meas("a/pad=1", 1.0, 1e-4, STORE_FAILED),
        meas("b/pad=1", 2.0, 1e-4, STORE_INACCURATE),
        meas("c/pad=1", 3.0, 1e-4, STORE_OK),
    };
    CHECK_EQ_INT(select_winner(m, 3, NULL, 0), 2);
    m[2].time_us = NAN;
    CHECK_EQ_INT(select_winner(m, 3, NULL, 0), -1);
    CHECK_EQ_INT(select_winner(m, 0, NULL, 0), -1);
}

static void winner_should_use_time_with_copies_when_padded(void)
{
    store_measurement m[2] = {meas("fused/pad=1", 10.0, 1e-3, STORE_OK),
                              meas("fused/pad=8", 8.0, 1e-3, STORE_OK)};
    m[1].time_us_copies = 12.0; /* faster kernel, slower once copies count */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 0);
    m[1].time_us_copies = 9.0;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 1);
    /* copies never make a tactic faster than its kernel: a table's 1 us
     * of copies on a 370 us kernel competes at 370 */
    store_measurement w[2] = {meas("fused/pad=1", 20.0, 1e-3, STORE_OK),
                              meas("fused/pad=8", 370.0, 1e-3, STORE_OK)};
    w[1].time_us_copies = 1.0;
    CHECK_EQ_INT(select_winner(w, 2, NULL, 0), 0);
    CHECK(select_time(&w[1]) == 370.0);
    w[1].time_us_copies = 371.5;
    CHECK(select_time(&w[1]) == 371.5);
    w[0].time_us_copies = 0.5; /* on pad=1 too (docs/fleet.md: null there) */
    CHECK(select_time(&w[0]) == 20.0);
}

static void default_bound_should_depend_on_dtype(void)
{
    store_measurement m = meas("x/pad=1", 1.0, 1e-2, STORE_OK);
    CHECK_EQ_INT(select_winner(&m, 1, NULL, 0), -1); /* f16: 1e-2 > 5e-3 */
    m.shape.dtype = ATTN_BF16;
    CHECK_EQ_INT(select_winner(&m, 1, NULL, 0), 0); /* bf16: 1e-2 < 3e-2 */
    select_policy p;
    select_policy_default(&p);
    p.max_rel_err[ATTN_BF16] = 5e-3;
    CHECK_EQ_INT(select_winner(&m, 1, &p, 0), -1);
}

static void beats_should_require_margin_beyond_noise(void)
{
    store_measurement inc = meas("a/pad=1", 10.0, 1e-4, STORE_OK);
    inc.time_us_min = 9.5;
    inc.time_us_max = 10.5; /* 10% spread */
    store_measurement ch = meas("b/pad=1", 9.5, 1e-4, STORE_OK);
    CHECK(!select_beats(&ch, &inc));
    ch.time_us = ch.time_us_min = ch.time_us_max = 8.5;
    CHECK(select_beats(&ch, &inc));
}

static void incumbent_should_stay_unless_beaten_beyond_noise(void)
{
    store_measurement m[2] = {meas("fused/pad=1", 10.0, 1e-3, STORE_OK),
                              meas("split/acc=f32/pad=1", 9.8, 1e-3, STORE_OK)};
    m[0].time_us_min = 9.5; /* 5% spread below the median */
    m[0].incumbent = 1;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 0); /* 2% faster: within noise */
    m[1].time_us = m[1].time_us_min = m[1].time_us_max = 9.0;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 1); /* 10% faster: replaces it */
    m[1].time_us = m[1].time_us_min = m[1].time_us_max = 9.8;
    m[0].status = STORE_INACCURATE; /* an ineligible incumbent never stays */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 1);
    m[0].status = STORE_OK;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 5e-4), -1);
    m[0].rel_err = 4e-4; /* a per-query bound that excludes the challenger... */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 5e-4), 0);
    m[0].rel_err = 1e-3;
    m[1].rel_err = 4e-4; /* ...or the incumbent */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 5e-4), 1);
}

/* The relative bound is over the most accurate ok row, timed or not: a
 * noisy row cannot win, but its error still bounds the others. */
static void noisy_row_should_still_set_the_relative_bound(void)
{
    store_measurement m[2] = {meas("fused/pad=1", 20.0, 1e-4, STORE_OK),
                              meas("folded/acc=f16/pad=1", 10.0, 1e-3, STORE_OK)};
    m[0].noisy = 1;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), -1); /* 10x the best error */
    m[0].noisy = 0;
    m[0].time_us = NAN; /* untimed: the same */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), -1);
    m[1].rel_err = 7e-4; /* within 8x */
    CHECK_EQ_INT(select_winner(m, 2, NULL, 0), 1);
    m[1].rel_err = 1e-3;
    CHECK_EQ_INT(select_winner(m, 2, NULL, 2e-3), 1); /* a query's bound replaces it */
}

int main(void)
{
    RUN(noisy_row_should_still_set_the_relative_bound);
    RUN(winner_should_be_fastest_within_tolerance_not_fastest_overall);
    RUN(winner_should_ignore_failed_and_inaccurate);
    RUN(query_bound_should_loosen_as_well_as_tighten);
    RUN(winner_should_use_time_with_copies_when_padded);
    RUN(default_bound_should_depend_on_dtype);
    RUN(beats_should_require_margin_beyond_noise);
    RUN(incumbent_should_stay_unless_beaten_beyond_noise);
    return test_summary();
}
