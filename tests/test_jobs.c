/* test_jobs.c -- the daemon's job table and device threads (daemon/jobs.c)
 * on the CPU: queue bounds, cancel of queued and running jobs, the rows a
 * running job hands to its commit callback, and resume after a shutdown.
 *
 * Ordering comes from the commit callback, which can hold the device
 * thread at its first row until the test has done what it checks (a
 * cancel, a shutdown): no test waits on a delay. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "daemon/jobs.h"
#include "daemon/log.h"
#include "daemon/worker.h"
#include "db/store_readonly.h"
#include "fake_backend.h"
#include "test.h"

static const attn_shape S1 = {1, 2, 1, 8, 16, 16, ATTN_F32, 0};
static const attn_shape S2 = {1, 2, 2, 12, 16, 16, ATTN_F32, 0};

#define RUN_ARG(fn, arg)                                                         \
    do {                                                                         \
        int before_ = test_failures_;                                            \
        test_current_ = #fn;                                                     \
        fn(arg);                                                                 \
        fprintf(stderr, "%s %s\n", test_failures_ == before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

/* The commit callback: counts rows, feeds an index, and may hold the
 * thread at the first row until released. */
typedef struct hook {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    index_state *ix;
    int rows, marks;
    attn_shape order[256]; /* the shape of each row, in commit order */
    int mark_at;     /* rows before the first mark since the last reset, -1: none */
    int hold;        /* hold at the next row */
    int held;        /* the thread waits in the callback */
} hook;

static hook H = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void committed(void *ctx, const store_measurement *m)
{
    hook *h = ctx;
    index_row_put(h->ix, m);
    pthread_mutex_lock(&h->mu);
    if (h->rows < (int)(sizeof h->order / sizeof h->order[0]))
        h->order[h->rows] = m->shape;
    h->rows++;
    if (m->incumbent && h->marks++ == 0)
        h->mark_at = h->rows - 1;
    if (h->hold) {
        h->held = 1;
        pthread_cond_broadcast(&h->cv);
        while (h->hold)
            pthread_cond_wait(&h->cv, &h->mu);
        h->held = 0;
    }
    pthread_mutex_unlock(&h->mu);
}

static void wait_held(void)
{
    pthread_mutex_lock(&H.mu);
    while (!H.held)
        pthread_cond_wait(&H.cv, &H.mu);
    pthread_mutex_unlock(&H.mu);
}

static void release(void)
{
    pthread_mutex_lock(&H.mu);
    H.hold = 0;
    pthread_cond_broadcast(&H.cv);
    pthread_mutex_unlock(&H.mu);
}

/* Poll job id's state (the device thread's progress) until it is want. */
static int wait_state(jobs *j, int64_t id, store_job_state want)
{
    for (long i = 0; i < 600000; i++) {
        jobs_view v;
        if (jobs_get(j, id, &v) == 0 && v.state == want)
            return 1;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* a poll interval, not an ordering */
    }
    return 0;
}

static char db_path[400];
static attn_device cpu;

static jobs *new_jobs(int max_queued)
{
    jobs_config cfg = {.db_path = db_path, .devices = &cpu, .ndevices = 1, .ix = H.ix,
                       .budget_ms = 2, .max_queued = max_queued, .no_tune_on_miss = 1,
                       .committed = committed, .committed_ctx = &H};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    return j;
}

static void queue_should_be_bounded_and_cancel_queued_jobs(store *st)
{
    jobs *j = new_jobs(2);
    jobs_view v1, v2, v;
    CHECK_EQ_INT(jobs_submit(j, st, cpu.info.id, &S1, 1, &v1), 0);
    CHECK_EQ_INT(jobs_submit(j, st, cpu.info.id, &S2, 1, &v2), 0);
    CHECK(v2.id > v1.id);
    CHECK_EQ_INT(jobs_check_room(j, cpu.info.id), ATTUNE_EBUSY);
    CHECK_EQ_INT(jobs_submit(j, st, cpu.info.id, &S1, 1, &v), ATTUNE_EBUSY);
    CHECK_EQ_INT(jobs_check_room(j, "GPU-not-here"), ATTUNE_ENODEV);
    metrics_queue q[2];
    CHECK_EQ_INT(jobs_queue_depths(j, q, 2), 1);
    CHECK_EQ_INT(q[0].jobs, 2);

    /* a store that cannot write (read-only): the cancel fails and leaves
     * the job queued in memory as in its row, the two never disagreeing */
    store *ro = NULL;
    char err[ATTUNE_ERRLEN];
    CHECK_EQ_INT(store_open_readonly(db_path, &ro, err, sizeof err), 0);
    CHECK_EQ_INT(jobs_cancel(j, ro, v1.id, &v), ATTUNE_EDB);
    store_close(ro);
    CHECK_EQ_INT(jobs_get(j, v1.id, &v), 0);
    CHECK_EQ_INT(v.state, STORE_JOB_QUEUED);
    store_job row;
    CHECK_EQ_INT(store_job_get(st, v1.id, &row), 0);
    CHECK_EQ_INT(row.state, STORE_JOB_QUEUED);
    store_job_free(&row);
    CHECK_EQ_INT(jobs_check_room(j, cpu.info.id), ATTUNE_EBUSY);

    CHECK_EQ_INT(jobs_cancel(j, st, v1.id, &v), 0);
    CHECK_EQ_INT(v.state, STORE_JOB_CANCELED);
    /* its room given back at once, though no device thread popped it */
    CHECK_EQ_INT(jobs_check_room(j, cpu.info.id), 0);
    CHECK_EQ_INT(jobs_cancel(j, st, v1.id, &v), 0); /* again: still canceled */
    CHECK_EQ_INT(jobs_cancel(j, st, 999999, &v), ATTUNE_ENOTFOUND);
    CHECK_EQ_INT(store_job_get(st, v1.id, &row), 0);
    CHECK_EQ_INT(row.state, STORE_JOB_CANCELED);
    store_job_free(&row);
    jobs_queue_depths(j, q, 2);
    CHECK_EQ_INT(q[0].jobs, 1);
    int counts[5];
    jobs_counts(j, counts);
    CHECK(counts[STORE_JOB_QUEUED] == 1 && counts[STORE_JOB_CANCELED] == 1);
    jobs_stop(j);
    jobs_free(j);
}

/* Starts from the rows the test above left: job 1 canceled, job 2 queued.
 * A row left running by a crash and one of a device not on this host are
 * added; loading requeues the first two and fails the foreign one. Job 2
 * is canceled while queued; the threads run the other (S1) to done, every
 * row and the mark through the callback. */
static void load_should_requeue_and_run_to_done(store *st)
{
    int64_t running = 0, foreign = 0;
    CHECK_EQ_INT(store_job_create(st, cpu.info.id, &S1, 1, &running), 0);
    CHECK_EQ_INT(store_job_update(st, running, STORE_JOB_RUNNING, 0, NULL), 0);
    CHECK_EQ_INT(store_job_create(st, "GPU-elsewhere", &S1, 1, &foreign), 0);
    jobs *j = new_jobs(8);
    int requeued = 0;
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    CHECK_EQ_INT(requeued, 2);
    store_job row;
    CHECK_EQ_INT(store_job_get(st, running, &row), 0);
    CHECK_EQ_INT(row.state, STORE_JOB_QUEUED); /* written back for the next start */
    store_job_free(&row);
    jobs_view v;
    CHECK_EQ_INT(jobs_get(j, foreign, &v), 0);
    CHECK_EQ_INT(v.state, STORE_JOB_FAILED);
    CHECK_MSG(strstr(v.error, "not on this host") != NULL, "%s", v.error);
    CHECK_EQ_INT(jobs_cancel(j, st, foreign, &v), ATTUNE_ESTATE); /* failed: nothing to do */
    jobs_view *all = NULL;
    int nall = 0;
    CHECK_EQ_INT(jobs_list(j, &all, &nall), 0);
    for (int i = 0; i < nall; i++)
        if (all[i].state == STORE_JOB_QUEUED && all[i].id != running)
            CHECK_EQ_INT(jobs_cancel(j, st, all[i].id, &v), 0);
    free(all);

    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK(wait_state(j, running, STORE_JOB_DONE));
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, cpu.info.id, cpu.stack.id, &S1, &m, &n), 0);
    CHECK(n >= 4);
    /* every row reached the index through the callback, and the mark */
    store_measurement *im = NULL;
    int in = 0;
    char stack[24];
    CHECK_EQ_INT(index_results(H.ix, cpu.info.id, &S1, &im, &in, stack), 0);
    CHECK_EQ_INT(in, n);
    int marked = -1;
    for (int i = 0; i < n; i++)
        if (m[i].incumbent)
            marked = i;
    CHECK(marked >= 0);
    index_answer a;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &S1, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    if (marked >= 0)
        CHECK_STR(a.m.tactic, m[marked].tactic);
    free(m);
    free(im);
    jobs_stop(j);
    jobs_free(j);
}

/* A running job: DELETE stops it after the tactic in flight, what was
 * committed stays, the shape is not marked (not complete). */
static void cancel_should_stop_a_running_job_between_tactics(store *st)
{
    jobs *j = new_jobs(8);
    int requeued;
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    CHECK_EQ_INT(requeued, 0);
    jobs_view v;
    CHECK_EQ_INT(jobs_submit(j, st, cpu.info.id, &S2, 1, &v), 0);
    int64_t id = v.id;
    H.hold = 1;
    H.rows = H.marks = 0;
    CHECK_EQ_INT(jobs_start(j), 0);
    wait_held(); /* the first row of S2 is committed; the thread waits */
    CHECK_EQ_INT(jobs_cancel(j, st, id, &v), 0);
    CHECK_EQ_INT(v.state, STORE_JOB_RUNNING);
    CHECK_EQ_INT(v.cancel_requested, 1);
    release();
    CHECK(wait_state(j, id, STORE_JOB_CANCELED));
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, cpu.info.id, cpu.stack.id, &S2, &m, &n), 0);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(H.rows, 1);
    CHECK_EQ_INT(H.marks, 0);
    free(m);
    index_answer a;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &S2, 0, &a), 0);
    CHECK(a.source != INDEX_MEASURED); /* one row of a canceled tune */
    jobs_stop(j);
    jobs_free(j);
}

static void *stop_thread(void *j)
{
    jobs_stop(j);
    return NULL;
}

/* Shutdown mid-job leaves the row queued with its progress; the next
 * start resumes it and the tuner skips what was committed. */
static void stop_should_leave_the_job_queued_and_load_resume_it(store *st)
{
    attn_shape shapes[2] = {S2, S1}; /* S1 is complete: skipped whole */
    jobs *j = new_jobs(8);
    int requeued;
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    jobs_view v;
    CHECK_EQ_INT(jobs_submit(j, st, cpu.info.id, shapes, 2, &v), 0);
    H.hold = 1;
    H.rows = H.marks = 0;
    CHECK_EQ_INT(jobs_start(j), 0);
    wait_held(); /* S2's second row committed (its first is from the cancel) */
    pthread_t stopper;
    CHECK_EQ_INT(pthread_create(&stopper, NULL, stop_thread, j), 0);
    /* jobs_stop sets stopping and the cancel flags in one critical section:
     * once new jobs are refused, the running one is asked to stop */
    while (jobs_check_room(j, cpu.info.id) != ATTUNE_EBUSY)
        sched_yield();
    release();
    pthread_join(stopper, NULL);
    store_job row;
    CHECK_EQ_INT(store_job_get(st, v.id, &row), 0);
    CHECK_EQ_INT(row.state, STORE_JOB_QUEUED);
    CHECK_EQ_INT(row.done, 0);
    store_job_free(&row);
    jobs_free(j);

    store_measurement *m = NULL;
    int before = 0, after = 0;
    CHECK_EQ_INT(store_measurements_get(st, cpu.info.id, cpu.stack.id, &S2, &m, &before), 0);
    free(m);
    CHECK_EQ_INT(before, 2);
    j = new_jobs(8);
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    CHECK_EQ_INT(requeued, 1);
    H.rows = H.marks = 0;
    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK(wait_state(j, v.id, STORE_JOB_DONE));
    CHECK_EQ_INT(store_measurements_get(st, cpu.info.id, cpu.stack.id, &S2, &m, &after), 0);
    free(m);
    CHECK(after > before);
    /* S2's new rows and its mark; S1 all skipped, its mark reported again */
    CHECK_EQ_INT(H.rows, after - before + 2);
    CHECK_EQ_INT(H.marks, 2);
    CHECK_EQ_INT(jobs_get(j, v.id, &v), 0);
    CHECK_EQ_INT(v.done, 2);
    index_answer a;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &S2, 0, &a), 0);
    CHECK_EQ_INT(a.source, INDEX_MEASURED);
    jobs_stop(j);
    jobs_free(j);
}

/* The index of the first row committed for shape s, -1 if none. */
static int first_row_of(const attn_shape *s)
{
    pthread_mutex_lock(&H.mu);
    int first = -1;
    for (int i = 0; i < H.rows && i < 256 && first < 0; i++)
        if (memcmp(&H.order[i], s, sizeof *s) == 0)
            first = i;
    pthread_mutex_unlock(&H.mu);
    return first;
}

/* How many of the backend's tactics for s have a stored row. */
static int stored_tactics(store *st, const attn_shape *s)
{
    attn_tactic t[64];
    int nt = cpu.ops->tactics(cpu.index, s, t, 64), n = 0;
    for (int i = 0; i < nt; i++) {
        char name[ATTN_TACTIC_STR_MAX];
        attn_tactic_str(&t[i], name, sizeof name);
        n += store_measurement_exists(st, cpu.info.id, cpu.stack.id, s, name) == 1;
    }
    return n;
}

/* Tune on miss: a shape missed while another's tune runs is measured
 * before that tune is done: the full pass gives way to the queued shape,
 * which is then tuned whole, and the first one resumes to every tactic.
 * The thread is held at A's first row while B is queued, so the order
 * is the test's, not the scheduler's. */
static void miss_should_give_way_to_a_newer_miss(store *st)
{
    static const attn_shape A = {1, 2, 1, 10, 20, 16, ATTN_F32, 0};
    static const attn_shape B = {1, 2, 1, 14, 28, 16, ATTN_F32, 0};
    attn_tactic t[64];
    char why[128];
    int na = cpu.ops->tactics(cpu.index, &A, t, 64);
    int nb = cpu.ops->tactics(cpu.index, &B, t, 64);
    CHECK(na >= 3 && nb >= 3);
    jobs_config cfg = {.db_path = db_path, .devices = &cpu, .ndevices = 1, .ix = H.ix,
                       .budget_ms = 2, .max_queued = 8, .committed = committed,
                       .committed_ctx = &H};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    pthread_mutex_lock(&H.mu);
    H.rows = H.marks = 0;
    H.hold = 1;
    pthread_mutex_unlock(&H.mu);
    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK_EQ_INT(jobs_miss(j, cpu.info.id, &A, "a", why, sizeof why), JOBS_MISS_QUEUED);
    wait_held(); /* A's first row */
    CHECK_EQ_INT(jobs_miss(j, cpu.info.id, &B, "b", why, sizeof why), JOBS_MISS_QUEUED);
    release();
    int ra = 0, rb = 0;
    for (long i = 0; i < 60000 && (ra < na || rb < nb); i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* a poll interval, not an ordering */
        ra = stored_tactics(st, &A);
        rb = stored_tactics(st, &B);
    }
    CHECK_EQ_INT(ra, na); /* A resumed and finished */
    CHECK_EQ_INT(rb, nb);
    /* B's rows began before A's last: A gave way after its quick pass */
    int fb = first_row_of(&B), a_before_b = 0;
    pthread_mutex_lock(&H.mu);
    for (int i = 0; i < fb; i++)
        a_before_b += memcmp(&H.order[i], &A, sizeof A) == 0;
    pthread_mutex_unlock(&H.mu);
    CHECK_MSG(fb >= 0 && a_before_b < na, "A's %d rows before B's first of %d: no give way",
              a_before_b, na);
    CHECK(a_before_b >= 1);
    index_answer ans;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &B, 0, &ans), 0);
    CHECK_EQ_INT(ans.source, INDEX_MEASURED);
    jobs_stop(j);
    jobs_free(j);
}

/* A miss is a job of kind miss; its quick pass commits rows without the
 * winner mark (not `measured`); a shutdown there leaves the job queued;
 * the next start resumes it, and only the end of its full pass, after
 * every tactic's row, marks the winner (issue 29 item 2). */
static void miss_should_be_a_job_marked_only_by_its_full_pass(store *st)
{
    static const attn_shape C = {1, 2, 1, 18, 36, 16, ATTN_F32, 0};
    attn_tactic t[64];
    char why[128];
    int nc = cpu.ops->tactics(cpu.index, &C, t, 64);
    jobs_config cfg = {.db_path = db_path, .devices = &cpu, .ndevices = 1, .ix = H.ix,
                       .budget_ms = 2, .max_queued = 8, .committed = committed,
                       .committed_ctx = &H};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    H.rows = H.marks = 0;
    H.hold = 1;
    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK_EQ_INT(jobs_miss(j, cpu.info.id, &C, "c", why, sizeof why), JOBS_MISS_QUEUED);
    wait_held(); /* the quick pass's first row */
    index_answer ans;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &C, 0, &ans), 0);
    CHECK(ans.source != INDEX_MEASURED);
    CHECK_EQ_INT(H.marks, 0);
    jobs_view *v = NULL;
    int n = 0;
    CHECK_EQ_INT(jobs_list(j, &v, &n), 0);
    CHECK(n >= 1 && v[n - 1].kind == STORE_JOB_MISS && v[n - 1].state == STORE_JOB_RUNNING);
    int64_t id = n >= 1 ? v[n - 1].id : 0;
    free(v);
    pthread_t stopper;
    CHECK_EQ_INT(pthread_create(&stopper, NULL, stop_thread, j), 0);
    while (jobs_check_room(j, cpu.info.id) != ATTUNE_EBUSY)
        sched_yield();
    release();
    pthread_join(stopper, NULL);
    jobs_free(j);
    store_job row;
    CHECK_EQ_INT(store_job_get(st, id, &row), 0);
    CHECK_EQ_INT(row.kind, STORE_JOB_MISS);
    CHECK_EQ_INT(row.state, STORE_JOB_QUEUED);
    store_job_free(&row);
    int before = stored_tactics(st, &C), requeued = 0;
    CHECK(before >= 1 && before < nc);

    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    CHECK_EQ_INT(requeued, 1);
    H.rows = H.marks = 0;
    H.mark_at = -1;
    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK(wait_state(j, id, STORE_JOB_DONE));
    CHECK_EQ_INT(stored_tactics(st, &C), nc);
    CHECK_EQ_INT(H.marks, 1);
    CHECK_EQ_INT(H.mark_at, nc - before); /* every missing row, then the mark */
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &C, 0, &ans), 0);
    CHECK_EQ_INT(ans.source, INDEX_MEASURED);
    jobs_stop(j);
    jobs_free(j);
}

/* DELETE of a running miss job: canceled after the tactic in flight, like
 * any job; its rows stay, its shape not measured (issue 28 item 2). */
static void miss_job_should_be_cancellable(store *st)
{
    static const attn_shape E = {1, 2, 1, 22, 44, 16, ATTN_F32, 0};
    char why[128];
    jobs_config cfg = {.db_path = db_path, .devices = &cpu, .ndevices = 1, .ix = H.ix,
                       .budget_ms = 2, .max_queued = 8, .committed = committed,
                       .committed_ctx = &H};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    H.rows = H.marks = 0;
    H.hold = 1;
    CHECK_EQ_INT(jobs_start(j), 0);
    CHECK_EQ_INT(jobs_miss(j, cpu.info.id, &E, "e", why, sizeof why), JOBS_MISS_QUEUED);
    wait_held();
    jobs_view *v = NULL, c;
    int n = 0;
    CHECK_EQ_INT(jobs_list(j, &v, &n), 0);
    int64_t id = n >= 1 ? v[n - 1].id : 0;
    CHECK(n >= 1 && v[n - 1].kind == STORE_JOB_MISS);
    free(v);
    CHECK_EQ_INT(jobs_cancel(j, st, id, &c), 0);
    CHECK(c.cancel_requested);
    release();
    CHECK(wait_state(j, id, STORE_JOB_CANCELED));
    CHECK_EQ_INT(H.marks, 0);
    index_answer ans;
    CHECK_EQ_INT(index_lookup(H.ix, cpu.info.id, &E, 0, &ans), 0);
    CHECK(ans.source != INDEX_MEASURED);
    jobs_stop(j);
    jobs_free(j);
}

/* ---- tune on miss while the index lists a slow backend's tactics */

/* The CPU's listing, made only once the gate opens (cuDNN's first
 * heuristics call, as far as the index can tell). */
static int slow_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    (void)index;
    fake_gate_pass();
    return cpu.ops->tactics(cpu.index, s, out, max);
}

static const attn_ops slow_ops = {.name = "slow", .device_count = fake_backend_count,
                                  .device_info = fake_backend_info, .tactics = slow_tactics,
                                  .list_cheap = 0};

/* A miss whose listing the index's builder is still making cannot be
 * priced: deferred, not refused (no refusal counted), and admitted by a
 * lookup after the listing. The jobs are never started: nothing runs on
 * the fake device. */
static void miss_should_be_deferred_while_the_listing_is_made(store *st)
{
    (void)st;
    static const attn_shape D = {1, 2, 1, 20, 40, 16, ATTN_F32, 0};
    CHECK_EQ_INT(attn_backend_register(&slow_ops), 0);
    attn_device slow = cpu;
    slow.ops = &slow_ops;
    slow.index = 0;
    slow.info.index = 0;
    snprintf(slow.info.kind, sizeof slow.info.kind, "slow");
    snprintf(slow.info.id, sizeof slow.info.id, "SLOW-0");
    index_state *ix = index_new(NULL);
    CHECK_EQ_INT(index_device_put(ix, &slow.info, &slow.stack, 1), 0);
    CHECK_EQ_INT(index_models_start(ix), 0);
    jobs_config cfg = {.db_path = db_path, .devices = &slow, .ndevices = 1, .ix = ix,
                       .budget_ms = 2, .max_queued = 8};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    fake_gate_set(0);
    char why[128] = "";
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(jobs_miss(j, "SLOW-0", &D, "d", why, sizeof why), JOBS_MISS_REFUSED);
        CHECK_MSG(strncmp(why, "deferred:", 9) == 0, "why: %s", why);
    }
    metrics_queue q;
    CHECK_EQ_INT(jobs_queue_depths(j, &q, 1), 1);
    CHECK_EQ_INT(q.refused_budget, 0);
    CHECK_EQ_INT(q.misses, 0);
    fake_gate_set(1);
    CHECK_EQ_INT(index_listings_wait(ix), 0);
    why[0] = 0;
    CHECK_EQ_INT(jobs_miss(j, "SLOW-0", &D, "d", why, sizeof why), JOBS_MISS_QUEUED);
    CHECK_EQ_INT(jobs_queue_depths(j, &q, 1), 1);
    CHECK_EQ_INT(q.misses, 1);
    jobs_free(j);
    index_free(ix);
    attn_backend_reset();
}

/* Retention forgets a shape with every miss job of it the store deletes:
 * an earlier canceled miss job of the shape leaves GET /v1/jobs too, not
 * only the done one the retention slot names (a phantom job before).
 * Waits for the sweep (the retention rounds to whole seconds): a poll. */
static void retention_should_drop_every_miss_job_it_deletes(store *st)
{
    static const attn_shape R = {1, 2, 1, 26, 52, 16, ATTN_F32, 0};
    int64_t old = 0, kept = 0;
    CHECK_EQ_INT(store_job_create_kind(st, cpu.info.id, STORE_JOB_MISS, &R, 1, &old), 0);
    CHECK_EQ_INT(store_job_update(st, old, STORE_JOB_CANCELED, 0, NULL), 0);
    CHECK_EQ_INT(store_job_create_kind(st, cpu.info.id, STORE_JOB_MISS, &R, 1, &kept), 0);
    CHECK_EQ_INT(store_job_update(st, kept, STORE_JOB_DONE, 1, NULL), 0);
    jobs_config cfg = {.db_path = db_path, .devices = &cpu, .ndevices = 1, .ix = H.ix,
                       .budget_ms = 2, .max_queued = 8, .no_tune_on_miss = 1,
                       .miss_retain_s = 0.5, .committed = committed, .committed_ctx = &H};
    jobs *j = NULL;
    int requeued = 0;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    CHECK_EQ_INT(jobs_load(j, st, &requeued), 0);
    jobs_view v;
    CHECK_EQ_INT(jobs_get(j, old, &v), 0);
    CHECK_EQ_INT(v.state, STORE_JOB_CANCELED);
    CHECK_EQ_INT(jobs_start(j), 0);
    int gone = 0;
    for (long i = 0; i < 60000 && !gone; i++) {
        gone = jobs_get(j, kept, &v) == ATTUNE_ENOTFOUND;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL); /* a poll interval, not an ordering */
    }
    CHECK(gone);
    store_job row;
    CHECK(store_job_get(st, old, &row) != 0); /* the store deleted both rows */
    CHECK_EQ_INT(jobs_get(j, old, &v), ATTUNE_ENOTFOUND);
    jobs_stop(j);
    jobs_free(j);
}

/* The store forgets no shape a miss job is still writing: a queued or
 * running one holds it (ATTUNE_ESTATE, nothing deleted); once it ended,
 * every miss job of the shape goes with its rows. */
static void forget_should_wait_for_a_miss_job_in_flight(store *st)
{
    static const attn_shape F = {1, 2, 1, 27, 53, 16, ATTN_F32, 0};
    int64_t done = 0, running = 0, rows = -1, *ids = NULL;
    int nids = -1;
    CHECK_EQ_INT(store_job_create_kind(st, cpu.info.id, STORE_JOB_MISS, &F, 1, &done), 0);
    CHECK_EQ_INT(store_job_update(st, done, STORE_JOB_DONE, 1, NULL), 0);
    CHECK_EQ_INT(store_job_create_kind(st, cpu.info.id, STORE_JOB_MISS, &F, 1, &running), 0);
    for (int state = STORE_JOB_QUEUED; state <= STORE_JOB_RUNNING; state++) {
        CHECK_EQ_INT(store_job_update(st, running, (store_job_state)state, 0, NULL), 0);
        CHECK_EQ_INT(store_forget_miss_shape(st, cpu.info.id, &F, &rows, &ids, &nids),
                     ATTUNE_ESTATE);
        CHECK(ids == NULL);
        CHECK_EQ_INT(nids, 0);
        CHECK_EQ_INT(rows, 0);
        store_job row;
        CHECK_EQ_INT(store_job_get(st, done, &row), 0); /* nothing deleted */
        store_job_free(&row);
    }
    CHECK_EQ_INT(store_job_update(st, running, STORE_JOB_FAILED, 0, "x"), 0);
    CHECK_EQ_INT(store_forget_miss_shape(st, cpu.info.id, &F, &rows, &ids, &nids), 0);
    CHECK_EQ_INT(nids, 2);
    if (ids != NULL && nids == 2) {
        CHECK(ids[0] == done && ids[1] == running);
    }
    free(ids);
}

/* ---- the DB worker that runs job creation and cancel (daemon/worker.c) */

static void count_item(void *arg, store *st)
{
    (void)st;
    (*(int *)arg)++;
}

/* worker_close drains and joins but keeps the worker: an HTTP thread that
 * submits after it (the daemon stopping) is refused with ATTUNE_EBUSY, not
 * a use after free; worker_free comes after the HTTP threads are joined. */
static void worker_should_refuse_items_once_closed(store *unused)
{
    (void)unused;
    char err[ATTUNE_ERRLEN];
    store *ro = NULL;
    CHECK_EQ_INT(store_open_readonly(db_path, &ro, err, sizeof err), 0);
    worker *w = NULL;
    CHECK_EQ_INT(worker_start(ro, NULL, NULL, 0, &w), 0);
    if (w == NULL) {
        store_close(ro);
        return;
    }
    int ran = 0;
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(worker_submit(w, count_item, &ran), 0);
    worker_close(w);
    CHECK_EQ_INT(ran, 3); /* every queued item ran before the threads ended */
    CHECK_EQ_INT(worker_submit(w, count_item, &ran), ATTUNE_EBUSY);
    worker_close(w); /* a second close: nothing to join */
    CHECK_EQ_INT(worker_submit(w, count_item, &ran), ATTUNE_EBUSY);
    CHECK_EQ_INT(ran, 3);
    worker_free(w);
}

/* ---- a kernel fault that loses the device's context */

/* The CPU backend, except that the run of one tactic (faulty_culprit)
 * "faults": it and every later plan, run and timing fail, as after a
 * sticky CUDA error, and health says lost. */
static char faulty_culprit[ATTN_TACTIC_STR_MAX];
static atomic_int faulty_lost;
static attn_plan *faulty_plans[256]; /* the culprit's plans */
static int faulty_nplans;
static int faulty_plan(attn_session *ss, const attn_tactic *t, attn_plan **out)
{
    if (atomic_load(&faulty_lost))
        return ATTUNE_EGPU;
    int rc = cpu.ops->plan(ss, t, out);
    char name[ATTN_TACTIC_STR_MAX];
    attn_tactic_str(t, name, sizeof name);
    if (rc == 0 && strcmp(name, faulty_culprit) == 0 && faulty_nplans < 256)
        faulty_plans[faulty_nplans++] = *out;
    return rc;
}
/* Set: the culprit's run first cancels this job (a DELETE during the
 * fault's seconds), through the test's connection. */
static struct {
    jobs *j;
    store *st;
    int64_t id;
} faulty_delete;
static int faulty_run(attn_plan *p)
{
    for (int i = 0; i < faulty_nplans; i++)
        if (faulty_plans[i] == p) {
            if (faulty_delete.j != NULL && !atomic_load(&faulty_lost)) {
                jobs_view c;
                CHECK_EQ_INT(jobs_cancel(faulty_delete.j, faulty_delete.st, faulty_delete.id, &c), 0);
            }
            atomic_store(&faulty_lost, 1);
        }
    return atomic_load(&faulty_lost) ? ATTUNE_EGPU : cpu.ops->run(p);
}
static int faulty_time(attn_plan *p, int iters, int with_copies, attn_timing *out)
{
    return atomic_load(&faulty_lost) ? ATTUNE_EGPU : cpu.ops->time(p, iters, with_copies, out);
}
static int faulty_health(int index)
{
    (void)index;
    return atomic_load(&faulty_lost) ? ATTUNE_EGPULOST : 0;
}
static attn_ops faulty_ops;
static atomic_int lost_calls;
static char lost_device[64];
static void on_gpu_lost(void *ctx, const char *device_id)
{
    (void)ctx;
    snprintf(lost_device, sizeof lost_device, "%s", device_id);
    atomic_fetch_add(&lost_calls, 1);
}

/* A job whose tune loses the device's context is left queued (the next
 * process resumes it), jobs_config.gpu_lost is told once, the device runs
 * no other job, and only the faulting tactic's row is stored failed; one
 * canceled (DELETE) while the faulting tactic ran ends canceled. */
/* A fresh faulty device named id (in st), the culprit the first pad-1
 * tactic the CPU lists for shape s (never a twin pad's copy), the fault
 * not yet happened. */
static attn_device faulty_device(store *st, const char *id, const attn_shape *s)
{
    attn_tactic ts[64];
    int nt = cpu.ops->tactics(cpu.index, s, ts, 64);
    faulty_culprit[0] = 0;
    for (int i = 0; i < nt && !faulty_culprit[0]; i++)
        if (ts[i].pad <= 1)
            attn_tactic_str(&ts[i], faulty_culprit, sizeof faulty_culprit);
    CHECK(faulty_culprit[0] != 0);
    faulty_ops = *cpu.ops;
    faulty_ops.plan = faulty_plan;
    faulty_ops.run = faulty_run;
    faulty_ops.time = faulty_time;
    faulty_ops.health = faulty_health;
    atomic_store(&faulty_lost, 0);
    atomic_store(&lost_calls, 0);
    faulty_nplans = 0;
    attn_device fd = cpu;
    fd.ops = &faulty_ops;
    snprintf(fd.info.id, sizeof fd.info.id, "%s", id);
    CHECK_EQ_INT(store_device_put(st, &fd.info, &fd.stack), 0);
    return fd;
}

/* Wait (a poll, 60 s at most) for jobs_config.gpu_lost's first call. */
static void wait_lost(void)
{
    for (long i = 0; i < 60000 && atomic_load(&lost_calls) == 0; i++) {
        struct timespec ts1 = {0, 1000000};
        nanosleep(&ts1, NULL);
    }
}

/* The rows of device fd for shape s stored failed; *culprit: those of the
 * culprit noted as the context's loss. */
static int failed_rows(store *st, const attn_device *fd, const attn_shape *s, int *culprit)
{
    store_measurement *m = NULL;
    int n = 0, failed = 0;
    *culprit = 0;
    CHECK_EQ_INT(store_measurements_get(st, fd->info.id, fd->stack.id, s, &m, &n), 0);
    for (int i = 0; i < n; i++) {
        failed += m[i].status == STORE_FAILED;
        *culprit += strcmp(m[i].tactic, faulty_culprit) == 0 && m[i].status == STORE_FAILED &&
                    strstr(m[i].note, "GPU context lost") == m[i].note;
    }
    free(m);
    return failed;
}

static void lost_context_should_leave_the_job_queued_and_stop_the_device(store *st)
{
    static const attn_shape F = {1, 2, 1, 24, 40, 16, ATTN_F32, 0};
    static const attn_shape G = {1, 2, 1, 28, 40, 16, ATTN_F32, 0};
    attn_device fd = faulty_device(st, "CPU-faulty0", &F);
    jobs_config cfg = {.db_path = db_path, .devices = &fd, .ndevices = 1, .budget_ms = 2,
                       .max_queued = 8, .no_tune_on_miss = 1, .gpu_lost = on_gpu_lost};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    jobs_view v1, v2;
    CHECK_EQ_INT(jobs_submit(j, st, fd.info.id, &F, 1, &v1), 0);
    CHECK_EQ_INT(jobs_submit(j, st, fd.info.id, &G, 1, &v2), 0);
    CHECK_EQ_INT(jobs_start(j), 0);
    wait_lost();
    CHECK_EQ_INT(atomic_load(&lost_calls), 1);
    CHECK_STR(lost_device, fd.info.id);
    jobs_view f, g;
    CHECK_EQ_INT(jobs_get(j, v1.id, &f), 0);
    CHECK_EQ_INT(f.state, STORE_JOB_QUEUED);
    struct timespec settle = {0, 50 * 1000000};
    nanosleep(&settle, NULL); /* time for a wrong second job to start */
    CHECK_EQ_INT(jobs_get(j, v2.id, &g), 0);
    CHECK_EQ_INT(g.state, STORE_JOB_QUEUED);
    CHECK_EQ_INT(atomic_load(&lost_calls), 1);
    int culprit = 0;
    CHECK_EQ_INT(failed_rows(st, &fd, &F, &culprit), 1);
    CHECK_EQ_INT(culprit, 1);
    store_measurement *m = NULL;
    int n = 0;
    CHECK_EQ_INT(store_measurements_get(st, fd.info.id, fd.stack.id, &G, &m, &n), 0);
    free(m);
    CHECK_EQ_INT(n, 0); /* the second job never ran: no row of it stored failed */
    jobs_stop(j);
    jobs_free(j);

    /* a DELETE while the faulting tactic ran: canceled, not resumed */
    fd = faulty_device(st, "CPU-faulty1", &F);
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    CHECK_EQ_INT(jobs_submit(j, st, fd.info.id, &F, 1, &v1), 0);
    faulty_delete.j = j, faulty_delete.st = st, faulty_delete.id = v1.id;
    CHECK_EQ_INT(jobs_start(j), 0);
    wait_lost(); /* the callback comes after the job's end state */
    CHECK_EQ_INT(atomic_load(&lost_calls), 1); /* the device is lost all the same */
    CHECK_EQ_INT(jobs_get(j, v1.id, &f), 0);
    CHECK_EQ_INT(f.state, STORE_JOB_CANCELED);
    jobs_stop(j);
    jobs_free(j);
    faulty_delete.j = NULL;
}

/* Tune on miss alike: the miss job whose tune lost the context is left
 * queued for the next process, the culprit alone stored failed. */
static void lost_context_in_a_miss_tune_should_leave_it_queued(store *st)
{
    static const attn_shape M = {1, 2, 1, 30, 40, 16, ATTN_F32, 0};
    attn_device fd = faulty_device(st, "CPU-faulty2", &M);
    index_state *ix = index_new(NULL);
    CHECK_EQ_INT(index_device_put(ix, &fd.info, &fd.stack, 1), 0);
    jobs_config cfg = {.db_path = db_path, .devices = &fd, .ndevices = 1, .ix = ix,
                       .budget_ms = 2, .max_queued = 8, .gpu_lost = on_gpu_lost};
    jobs *j = NULL;
    CHECK_EQ_INT(jobs_new(&cfg, &j), 0);
    CHECK_EQ_INT(jobs_start(j), 0);
    char why[128] = "";
    CHECK_EQ_INT(jobs_miss(j, fd.info.id, &M, "m", why, sizeof why), JOBS_MISS_QUEUED);
    wait_lost();
    CHECK_EQ_INT(atomic_load(&lost_calls), 1);
    jobs_view *v = NULL;
    int n = 0, queued = 0;
    CHECK_EQ_INT(jobs_list(j, &v, &n), 0);
    for (int i = 0; i < n; i++)
        queued += strcmp(v[i].device_id, fd.info.id) == 0 && v[i].kind == STORE_JOB_MISS &&
                  v[i].state == STORE_JOB_QUEUED;
    free(v);
    CHECK_EQ_INT(queued, 1);
    int culprit = 0;
    CHECK_EQ_INT(failed_rows(st, &fd, &M, &culprit), 1);
    CHECK_EQ_INT(culprit, 1);
    jobs_stop(j);
    jobs_free(j);
    index_free(ix);
}

int main(void)
{
    char dir[300], err[ATTUNE_ERRLEN];
    test_tmpdir(dir, sizeof dir);
    snprintf(db_path, sizeof db_path, "%s/attune.db", dir);
    log_set_level(LOGL_WARN);
    if (attn_device_resolve("cpu", &cpu, err, sizeof err) != 0) {
        fprintf(stderr, "no CPU device: %s\n", err);
        return 1;
    }
    store *st = NULL;
    if (store_open(db_path, 1, &st, err, sizeof err) != 0) {
        fprintf(stderr, "store_open: %s\n", err);
        return 1;
    }
    store_device_put(st, &cpu.info, &cpu.stack);
    H.ix = index_new(NULL);
    index_device_put(H.ix, &cpu.info, &cpu.stack, 1);
    RUN_ARG(queue_should_be_bounded_and_cancel_queued_jobs, st);
    RUN_ARG(load_should_requeue_and_run_to_done, st);
    RUN_ARG(cancel_should_stop_a_running_job_between_tactics, st);
    RUN_ARG(stop_should_leave_the_job_queued_and_load_resume_it, st);
    RUN_ARG(miss_should_give_way_to_a_newer_miss, st);
    RUN_ARG(miss_should_be_a_job_marked_only_by_its_full_pass, st);
    RUN_ARG(miss_job_should_be_cancellable, st);
    RUN_ARG(miss_should_be_deferred_while_the_listing_is_made, st);
    RUN_ARG(retention_should_drop_every_miss_job_it_deletes, st);
    RUN_ARG(forget_should_wait_for_a_miss_job_in_flight, st);
    RUN_ARG(worker_should_refuse_items_once_closed, st);
    RUN_ARG(lost_context_should_leave_the_job_queued_and_stop_the_device, st);
    RUN_ARG(lost_context_in_a_miss_tune_should_leave_it_queued, st);
    index_free(H.ix);
    store_close(st);
    return test_summary();
}
