/* worker.c -- a FIFO of closures run by one thread with its own store. */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

typedef struct item {
    worker_fn fn;
    void *arg;
    struct item *next;
} item;

struct worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    store *st;
    item *head, *tail;
    int closed;          /* no more submissions; exit when drained */
    worker_fn tick;
    void *tick_ctx;
    int period_s;
};

static void *worker_main(void *arg)
{
    worker *w = arg;
    struct timespec next;
    prctl(PR_SET_NAME, "attuned-db", 0, 0, 0);
    clock_gettime(CLOCK_MONOTONIC, &next);
    if (w->tick != NULL)
        w->tick(w->tick_ctx, w->st);
    next.tv_sec += w->period_s;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->head == NULL && !w->closed) {
            if (w->tick == NULL || w->period_s <= 0) {
                pthread_cond_wait(&w->cv, &w->mu);
                continue;
            }
            if (pthread_cond_timedwait(&w->cv, &w->mu, &next) == ETIMEDOUT) {
                pthread_mutex_unlock(&w->mu);
                w->tick(w->tick_ctx, w->st);
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
        it->fn(it->arg, w->st);
        free(it);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int worker_start(store *st, worker_fn tick, void *tick_ctx, int period_s, worker **out)
{
    *out = NULL;
    worker *w = calloc(1, sizeof *w);
    if (w == NULL)
        return ATTUNE_ENOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->st = st;
    w->tick = tick;
    w->tick_ctx = tick_ctx;
    w->period_s = period_s;
    if (pthread_create(&w->th, NULL, worker_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return ATTUNE_ENOMEM;
    }
    *out = w;
    return 0;
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

void worker_stop(worker *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->mu);
    w->closed = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->th, NULL);
    store_close(w->st);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
