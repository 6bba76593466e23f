/* noise.c -- spread and CPU share of a timing (see noise.h). */
#include "noise.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../kernels/cancel.h"

/* A share over a shorter timing says nothing: one tick of another process
 * is then most of it. */
#define MIN_WALL_S 0.001

static int default_cpu(const attn_device *dev, double *cpu_s, double *wall_s)
{
    struct timespec c, w;
    if (strcmp(dev->info.kind, "cpu") != 0)
        return -1;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c) != 0 ||
        clock_gettime(CLOCK_MONOTONIC, &w) != 0)
        return -1;
    *cpu_s = (double)c.tv_sec + 1e-9 * (double)c.tv_nsec;
    *wall_s = (double)w.tv_sec + 1e-9 * (double)w.tv_nsec;
    return 0;
}

static int read_cpu(const tuner_noise *nz, const attn_device *dev, double *cpu_s,
                    double *wall_s)
{
    return nz->cpu != NULL ? nz->cpu(nz->ctx, dev, cpu_s, wall_s)
                           : default_cpu(dev, cpu_s, wall_s);
}

void tuner_noise_begin(tuner_noise *nz, const attn_device *dev)
{
    nz->got_share = NAN;
    if (nz->share <= 0 || read_cpu(nz, dev, &nz->cpu0_s, &nz->wall0_s) != 0)
        nz->wall0_s = -1;
}

void tuner_noise_end(tuner_noise *nz, const attn_device *dev)
{
    double cpu, wall;
    nz->got_share = NAN;
    if (nz->wall0_s < 0 || read_cpu(nz, dev, &cpu, &wall) != 0)
        return;
    double dw = wall - nz->wall0_s, dc = cpu - nz->cpu0_s;
    if (dw >= MIN_WALL_S && dc >= 0)
        nz->got_share = dc / dw > 1 ? 1 : dc / dw;
}

int tuner_noise_judge(const tuner_noise *nz, double median, double min, int n, char *why,
                      size_t len)
{
    double ratio = min > 0 && isfinite(median) ? median / min : NAN;
    int spread = nz->spread > 0 && n >= 3 && isfinite(ratio) && ratio - 1 > nz->spread;
    int share = nz->share > 0 && isfinite(nz->got_share) && nz->got_share < nz->share;
    if (why != NULL && len > 0) {
        why[0] = 0;
        if (spread && share)
            snprintf(why, len, "median %.2fx the min, %.0f%% of a CPU", ratio,
                     100 * nz->got_share);
        else if (spread)
            snprintf(why, len, "median %.2fx the min", ratio);
        else if (share)
            snprintf(why, len, "%.0f%% of a CPU", 100 * nz->got_share);
    }
    return spread || share;
}

int tuner_noise_pause(int ms)
{
    struct timespec step = {0, 10 * 1000000L};
    for (int slept = 0; slept < ms; slept += 10) {
        if (attn_cancel_poll())
            return 1;
        nanosleep(&step, NULL);
    }
    return attn_cancel_poll();
}
