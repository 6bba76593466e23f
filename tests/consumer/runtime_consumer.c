/* runtime_consumer.c -- a program of another project running attention
 * through the installed libattune (tests/it_package.sh, it_cmake_package.sh):
 * opens the "cpu" device, plans every tactic it lists for a small f32 shape
 * and runs each on host buffers whose V rows are all one row r. Attention
 * weights sum to 1, so every output row must equal r, whatever q and k
 * are: a reference by hand. Prints "ran N tactics, out[0][0][0][0..3] = ..."
 * and exits 0, or names what failed and exits 1.
 *
 *   cc runtime_consumer.c $(pkg-config --cflags --libs libattune)
 *   target_link_libraries(runtime_consumer PRIVATE attune::attune) */
#include <libattune.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define B 1
#define HQ 4
#define HKV 2 /* GQA: two query heads per KV head */
#define SQ 5
#define SKV 12
#define D 16

int main(void)
{
    if (attune_abi() != LIBATTUNE_ABI) {
        printf("FAIL attune_abi() = %d, header says %d\n", attune_abi(), LIBATTUNE_ABI);
        return 1;
    }
    char err[256] = "";
    attune_dev *dev = NULL;
    int rc = attune_dev_open("cpu", &dev, err, sizeof err);
    if (rc != 0) {
        printf("FAIL attune_dev_open(cpu): %s (%s)\n", err, attune_strerror(rc));
        return 1;
    }
    attune_dims s = {.b = B, .hq = HQ, .hkv = HKV, .sq = SQ, .skv = SKV, .d = D,
                     .dtype = ATTUNE_DTYPE_F32, .causal = 0};
    static char tactics[64][ATTUNE_TACTIC_MAX];
    int n = attune_tactics(dev, &s, tactics, 64, err, sizeof err);
    if (n <= 0) {
        printf("FAIL attune_tactics: %d %s\n", n, err);
        return 1;
    }
    if (n > 64)
        n = 64;

    /* [b, h, s, d], contiguous; q and k arbitrary (a fixed LCG), v's rows
     * all r[c] = c/4 - 1 (exact in binary) */
    static float q[B * HQ * SQ * D], k[B * HKV * SKV * D], v[B * HKV * SKV * D], o[B * HQ * SQ * D];
    unsigned x = 12345;
    for (int i = 0; i < B * HQ * SQ * D; i++)
        q[i] = (float)((x = x * 1103515245u + 12345u) >> 16 & 0xff) / 64.0f - 2.0f;
    for (int i = 0; i < B * HKV * SKV * D; i++) {
        k[i] = (float)((x = x * 1103515245u + 12345u) >> 16 & 0xff) / 64.0f - 2.0f;
        v[i] = (float)(i % D) / 4.0f - 1.0f;
    }
    attune_tensor tq = {q, HQ * SQ * D, SQ * D, D}, tk = {k, HKV * SKV * D, SKV * D, D};
    attune_tensor tv = {v, HKV * SKV * D, SKV * D, D}, to = {o, HQ * SQ * D, SQ * D, D};

    int fails = 0;
    for (int t = 0; t < n; t++) {
        attune_plan *plan = NULL;
        rc = attune_plan_create(dev, &s, tactics[t], &plan, err, sizeof err);
        if (rc != 0) {
            printf("FAIL plan %s: %s\n", tactics[t], err);
            fails++;
            continue;
        }
        for (int i = 0; i < B * HQ * SQ * D; i++)
            o[i] = NAN; /* every element must be written */
        rc = attune_plan_run(plan, &tq, &tk, &tv, &to, 0, 0, NULL);
        double worst = 0;
        for (int i = 0; rc == 0 && i < B * HQ * SQ * D; i++) {
            double e = fabs((double)o[i] - ((double)(i % D) / 4.0 - 1.0));
            if (isnan(e) || e > worst)
                worst = isnan(e) ? INFINITY : e;
        }
        /* f32 throughout (f32 shapes list acc=f32 only): a few ulps of |r| <= 2.75 */
        if (rc != 0 || worst > 1e-5) {
            printf("FAIL %s: rc %d (%s), worst |out - v row| %.3g\n", tactics[t], rc,
                   attune_strerror(rc), worst);
            fails++;
        }
        attune_plan_destroy(plan);
    }
    attune_dev_close(dev);
    if (fails != 0)
        return 1;
    printf("ran %d tactics, out[0][0][0][0..3] = %g %g %g %g (v row: -1 -0.75 -0.5 -0.25)\n", n,
           o[0], o[1], o[2], o[3]);
    return 0;
}
