/* worker.c -- a FIFO of closures run by one thread (or a few), each with
 * its own store. */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

typedef struct item {
    worker_fn fn;
    void *arg;
    struct item *next;
} item;

#define WORKER_MAX_THREADS 8

typedef struct thread_arg {
    struct worker *w;
    int i;
} thread_arg;

struct worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int nthreads;
    pthread_t th[WORKER_MAX_THREADS];
    store *st[WORKER_MAX_THREADS];  /* thread i's own handle */
    thread_arg ta[WORKER_MAX_THREADS]; /* what thread i is started with */
    char name[16];                  /* thread name (prctl: 15 bytes) */
    item *head, *tail;
    int closed;          /* no more submissions; exit when drained */
    worker_fn tick;      /* thread 0 only */
    void *tick_ctx;
    int period_s;
};


static void *worker_main(void *arg)
{
    const thread_arg *ta = arg;
    worker *w = ta->w;
    store *st = w->st[ta->i];
    worker_fn tick = ta->i == 0 ? w->tick : NULL;
    struct timespec next;
    prctl(PR_SET_NAME, w->name, 0, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &next);
    if (tick != NULL)
        tick(w->tick_ctx, st);
    next.tv_sec += w->period_s;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->head == NULL && !w->closed) {
            if (tick == NULL || w->period_s <= 0) {
                pthread_cond_wait(&w->cv, &w->mu);
                continue;
            }
            if (pthread_cond_timedwait(&w->cv, &w->mu, &next) == ETIMEDOUT) {
                pthread_mutex_unlock(&w->mu);
                tick(w->tick_ctx, st);
                pthread_mutex_lock(&w->mu);
                clock_gettime(CLOCK_MONOTONIC, &next);
                next.tv_sec += w->period_s;
            }
        }
        if (w->head == NULL)
            break; /* closed and drained */
        item *it = w->head;
        w->head = it->next;
        if (w->head == NULL)
            w->tail = NULL;
        pthread_mutex_unlock(&w->mu);
        it->fn(it->arg, st);
        free(it);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int worker_start_pool(store *const *sts, int n, const char *name, worker_fn tick,
                      void *tick_ctx, int period_s, worker **out)
{
    *out = NULL;
    if (n < 1 || n > WORKER_MAX_THREADS)
        return ATTUNE_EINVAL;
    worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ATTUNE_ENOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->tick = tick;
    w->tick_ctx = tick_ctx;
    w->period_s = period_s;
    for (int i = 0; i < n; i++)
        w->st[i] = sts[i];
    for (int i = 0; i < n; i++) {
        w->ta[i] = (thread_arg){w, i};
        if (pthread_create(&w->th[i], NULL, worker_main, &w->ta[i]) != 0) {
            /* the started ones drain nothing and exit; the stores stay
             * the caller's */
            pthread_mutex_lock(&w->mu);
            w->closed = 1;
            pthread_cond_broadcast(&w->cv);
            pthread_mutex_unlock(&w->mu);
            for (int j = 0; j < i; j++)
                pthread_join(w->th[j], NULL);
            pthread_cond_destroy(&w->cv);
            pthread_mutex_destroy(&w->mu);
            free(w);
            return ATTUNE_ENOMEM;
        }
        w->nthreads = i + 1;
    }
    *out = w;
    return 0;
}

int worker_start(store *st, worker_fn tick, void *tick_ctx, int period_s, worker **out)
{
    return worker_start_pool(&st, 1, "attuned-db", tick, tick_ctx, period_s, out);
}

int worker_submit(worker *w, worker_fn fn, void *arg)
{
    item *it = malloc(sizeof *it);
    if (it == NULL)
        return ATTUNE_ENOMEM;
    it->fn = fn;
    it->arg = arg;
    it->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->closed) {
        pthread_mutex_unlock(&w->mu);
        free(it);
        return ATTUNE_EBUSY;
    }
    if (w->tail != NULL)
        w->tail->next = it;
    else
        w->head = it;
    w->tail = it;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return 0;
}

void worker_close(worker *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->closed = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->nthreads; i++) { /* none on a second call */
        pthread_join(w->th[i], NULL);
        store_close(w->st[i]);
        w->st[i] = NULL;
    }
    w->nthreads = 0;
}

void worker_free(worker *w)
{
    if (w == NULL)
        return;
    worker_close(w);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
