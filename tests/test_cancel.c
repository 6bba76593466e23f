/* test_cancel.c -- the per-thread cancel hook (kernels/cancel.h) and the
 * CPU backend honouring it: every variant's run, the input fill and the
 * float64 reference stop with ATTUNE_ECANCELED once the flag is set or the
 * deadline passed, and run again once disarmed (issue 29 item 1). */
#include <stdatomic.h>

#include "kernels/attn.h"
#include "kernels/cancel.h"
#include "test.h"

static attn_device cpu;

static void poll_should_follow_the_flag_and_the_deadline(void)
{
    atomic_int flag = 0;
    CHECK_EQ_INT(attn_cancel_poll(), 0); /* never armed */
    attn_cancel_arm(&flag, 0);
    CHECK_EQ_INT(attn_cancel_poll(), 0);
    atomic_store(&flag, 1);
    CHECK_EQ_INT(attn_cancel_poll(), 1);
    CHECK_EQ_INT(attn_cancel_by_deadline(), 0);
    atomic_store(&flag, 0);
    attn_cancel_arm(&flag, attn_mono_s() - 1);
    CHECK_EQ_INT(attn_cancel_poll(), 1);
    CHECK_EQ_INT(attn_cancel_by_deadline(), 1);
    attn_cancel_arm(&flag, attn_mono_s() + 3600);
    CHECK_EQ_INT(attn_cancel_poll(), 0);
    attn_cancel_arm(NULL, 0);
    CHECK_EQ_INT(attn_cancel_poll(), 0);
}

static void cpu_runs_should_stop_when_the_hook_fires(void)
{
    static const attn_shape s = {1, 4, 2, 80, 96, 32, ATTN_F16, 1};
    attn_tactic t[64];
    int nt = cpu.ops->tactics(cpu.index, &s, t, 64);
    CHECK(nt >= 4);
    attn_session *ss = NULL;
    CHECK_EQ_INT(cpu.ops->session_open(cpu.index, &s, 7, &ss), 0);
    atomic_int flag = 0;
    for (int i = 0; i < nt && ss != NULL; i++) {
        attn_plan *p = NULL;
        if (cpu.ops->plan(ss, &t[i], &p) != 0)
            continue;
        attn_cancel_arm(&flag, 0);
        CHECK_EQ_INT(cpu.ops->run(p), 0);
        atomic_store(&flag, 1);
        CHECK_EQ_INT(cpu.ops->run(p), ATTUNE_ECANCELED);
        atomic_store(&flag, 0);
        attn_cancel_arm(NULL, attn_mono_s() - 1); /* a deadline passed */
        CHECK_EQ_INT(cpu.ops->run(p), ATTUNE_ECANCELED);
        attn_cancel_arm(NULL, 0);
        CHECK_EQ_INT(cpu.ops->run(p), 0); /* disarmed: runs again */
        cpu.ops->plan_free(p);
    }
    int64_t rows[2] = {0, 5};
    double ref[2 * 32];
    atomic_store(&flag, 1);
    attn_cancel_arm(&flag, 0);
    CHECK_EQ_INT(cpu.ops->reference(ss, rows, 2, ref), ATTUNE_ECANCELED);
    attn_cancel_arm(NULL, 0);
    CHECK_EQ_INT(cpu.ops->reference(ss, rows, 2, ref), 0);
    cpu.ops->session_close(ss);
}

/* A session of over 2^20 input values is drawn in steps that poll. */
static void session_fill_should_stop_when_the_hook_fires(void)
{
    static const attn_shape big = {1, 8, 8, 4096, 4096, 64, ATTN_F16, 0};
    atomic_int flag = 1;
    attn_session *ss = NULL;
    attn_cancel_arm(&flag, 0);
    CHECK_EQ_INT(cpu.ops->session_open(cpu.index, &big, 7, &ss), ATTUNE_ECANCELED);
    CHECK(ss == NULL);
    attn_cancel_arm(NULL, 0);
}

int main(void)
{
    char err[ATTUNE_ERRLEN];
    if (attn_device_resolve("cpu", &cpu, err, sizeof err) != 0) {
        fprintf(stderr, "no CPU device: %s\n", err);
        return 1;
    }
    RUN(poll_should_follow_the_flag_and_the_deadline);
    RUN(cpu_runs_should_stop_when_the_hook_fires);
    RUN(session_fill_should_stop_when_the_hook_fires);
    return test_summary();
}
