/* cancel.c -- the per-thread cancel flag and deadline that kernels poll. */
#include "cancel.h"

#include <time.h>

static _Thread_local const atomic_int *hook_flag;
static _Thread_local double hook_deadline;
static _Thread_local int hook_by_deadline;

double attn_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void attn_cancel_arm(const atomic_int *flag, double deadline_s)
{
    hook_flag = flag;
    hook_deadline = deadline_s;
    hook_by_deadline = 0;
}

int attn_cancel_poll(void)
{
    if (hook_flag != NULL && atomic_load_explicit(hook_flag, memory_order_relaxed) != 0)
        return 1;
    if (hook_deadline > 0 && attn_mono_s() > hook_deadline) {
        hook_by_deadline = 1;
        return 1;
    }
    return 0;
}

int attn_cancel_by_deadline(void)
{
    return hook_by_deadline;
}
