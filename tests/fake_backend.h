/* fake_backend.h -- pieces of the fake backends tests register
 * (attn_backend_register) to stand for one whose listing may block: a
 * backend offering no device of its own (the tests put theirs into the
 * index), and a gate its listing waits at, as at cuDNN's first heuristics
 * call, until the test opens it. Header-only, one copy per test. */
#ifndef ATTUNE_TEST_FAKE_BACKEND_H
#define ATTUNE_TEST_FAKE_BACKEND_H

#include <pthread.h>

#include "kernels/attn.h"

static inline int fake_backend_count(void)
{
    return 0;
}

static inline int fake_backend_info(int index, attn_device_info *info, attn_stack *stack)
{
    (void)index;
    (void)info;
    (void)stack;
    return ATTUNE_ENODEV;
}

static pthread_mutex_t fake_gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_gate_cv = PTHREAD_COND_INITIALIZER;
static int fake_gate_open = 1; /* under fake_gate_mu */
static int fake_gate_inside;   /* a listing waits at the gate, under fake_gate_mu */

/* Open (1) or close (0) the gate. */
static inline void fake_gate_set(int open)
{
    pthread_mutex_lock(&fake_gate_mu);
    fake_gate_open = open;
    pthread_cond_broadcast(&fake_gate_cv);
    pthread_mutex_unlock(&fake_gate_mu);
}

/* A listing's side: wait while the gate is closed. */
static inline void fake_gate_pass(void)
{
    pthread_mutex_lock(&fake_gate_mu);
    fake_gate_inside = 1;
    pthread_cond_broadcast(&fake_gate_cv);
    while (!fake_gate_open)
        pthread_cond_wait(&fake_gate_cv, &fake_gate_mu);
    fake_gate_inside = 0;
    pthread_mutex_unlock(&fake_gate_mu);
}

/* The test's side: wait until a listing is at (or in) the gate. */
static inline void fake_gate_wait_inside(void)
{
    pthread_mutex_lock(&fake_gate_mu);
    while (!fake_gate_inside)
        pthread_cond_wait(&fake_gate_cv, &fake_gate_mu);
    pthread_mutex_unlock(&fake_gate_mu);
}

#endif
