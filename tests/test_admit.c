/* test_admit.c -- admission for tuning (daemon/admit.c): the cost of a
 * whole tune against a budget, with and without the model's word, the
 * buffers against the device's memory, and the words of a refusal. */
#include <string.h>

#include "daemon/admit.h"
#include "test.h"

static attn_device cpu;

/* With nothing measured the roofline prices the shape: the huge
 * lookup is hours, a tiny shape well under a minute. */
static void estimate_should_price_by_the_roofline_without_a_model(void)
{
    index_state *ix = index_new(NULL);
    index_device_put(ix, &cpu.info, &cpu.stack, 1);
    static const attn_shape huge = {1, 1, 1, 1048576, 16384, 64, ATTN_F16, 0};
    static const attn_shape tiny = {1, 2, 1, 16, 64, 32, ATTN_F32, 0};
    admit_cost c;
    CHECK_EQ_INT(admit_estimate(ix, &cpu.info, &huge, 200, &c), 0);
    CHECK(c.roofline == 1 && c.ntactics >= 4);
    CHECK(c.call_us > 1e8);     /* 4.4e12 FLOPs at 1e9 FLOP/s: over 100 s a call */
    CHECK(!admit_fits(&c, 60));
    CHECK(!admit_fits(&c, 3600));
    char why[96];
    admit_describe(&c, 60, why, sizeof why);
    CHECK_MSG(strncmp(why, "predicted ", 10) == 0 && strstr(why, "(budget 60 s)") != NULL,
              "%s", why);
    CHECK_EQ_INT(admit_estimate(ix, &cpu.info, &tiny, 10, &c), 0);
    CHECK_MSG(admit_fits(&c, 60), "tiny shape priced %.1f s", c.seconds);
    CHECK_EQ_INT(admit_estimate(ix, &cpu.info, &tiny, 10, &c), 0);
    CHECK(c.bytes > 0 && c.bytes < 1e6);
    attn_device_info nodev = cpu.info;
    snprintf(nodev.id, sizeof nodev.id, "CPU-nosuch");
    CHECK_EQ_INT(admit_estimate(ix, &nodev, &tiny, 10, &c), ATTUNE_ENODEV);
    index_free(ix);
}

/* Buffers over half the device's memory refuse whatever the time. */
static void fits_should_refuse_buffers_over_the_memory(void)
{
    admit_cost c = {.seconds = 1, .bytes = 3e9, .max_bytes = 2e9};
    CHECK(!admit_fits(&c, 60));
    char why[96];
    admit_describe(&c, 60, why, sizeof why);
    CHECK_MSG(strstr(why, "buffers of 3.0 GB over 2.0 GB") != NULL, "%s", why);
    c.bytes = 1e9;
    CHECK(admit_fits(&c, 60));
    c.seconds = 61;
    CHECK(!admit_fits(&c, 60));
    admit_describe(&c, 3600, why, sizeof why);
    CHECK_MSG(strcmp(why, "predicted 61 s (budget 60.0 min)") == 0, "%s", why);
    c.seconds = 9.6 * 60;
    admit_describe(&c, 60, why, sizeof why);
    CHECK_MSG(strcmp(why, "predicted 9.6 min (budget 60 s)") == 0, "%s", why);
}

int main(void)
{
    char err[ATTUNE_ERRLEN];
    if (attn_device_resolve("cpu", &cpu, err, sizeof err) != 0) {
        fprintf(stderr, "no CPU device: %s\n", err);
        return 1;
    }
    RUN(estimate_should_price_by_the_roofline_without_a_model);
    RUN(fits_should_refuse_buffers_over_the_memory);
    return test_summary();
}
