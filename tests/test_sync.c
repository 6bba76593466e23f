/* test_sync.c -- the index follows the database (daemon/sync.c): the load
 * at start, another connection's commits seen by sync_watch through
 * data_version and the per-device fingerprints, rows of a tune in flight
 * held but not answered measured, the reload after which the index
 * equals the store, and an import that reloads only the devices it
 * changed. */
#include "daemon/log.h"
#include "daemon/sync.h"
#include "test.h"

static const attn_shape S = {1, 4, 2, 24, 40, 16, ATTN_F32, 0};

static store_measurement row(const attn_device *d, const char *tactic, double us, int64_t at)
{
    store_measurement m;
    memset(&m, 0, sizeof m);
    snprintf(m.device_id, sizeof m.device_id, "%s", d->info.id);
    snprintf(m.stack_id, sizeof m.stack_id, "%s", d->stack.id);
    m.shape = S;
    snprintf(m.tactic, sizeof m.tactic, "%s", tactic);
    m.status = STORE_OK;
    m.time_us = m.time_us_min = m.time_us_max = us;
    m.time_us_copies = NAN;
    m.n = 5;
    m.rel_err = m.max_abs_err = 1e-6;
    m.taken_at = at;
    return m;
}

/* The index's view of the device equals the store's fingerprint. */
static int same_as_store(sync_state *s, store *st, const char *id)
{
    store_fingerprint *p = NULL;
    int n = 0;
    index_device_view v;
    if (store_fingerprints(st, &p, &n) != 0 || index_device_find(s->ix, id, &v) != 0)
        return 0;
    int same = 0;
    for (int i = 0; i < n; i++)
        if (strcmp(p[i].info.id, id) == 0)
            same = p[i].rows == v.nmeasurements && p[i].taken_sum == v.taken_sum &&
                   p[i].marks == v.marks;
    free(p);
    return same;
}

/* A fresh database in a temporary directory, two connections to it
 * (*mine the writer the daemon's DB thread holds, *other another
 * process's or a job thread's), the CPU device in *cpu, and s loaded
 * from *mine. 0, or -1 (checks failed, nothing to go on with). */
static int two_connections(attn_device *cpu, store **mine, store **other, sync_state *s)
{
    char dir[300], path[400], err[ATTUNE_ERRLEN];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/attune.db", dir);
    CHECK_EQ_INT(attn_device_resolve("cpu", cpu, err, sizeof err), 0);
    *mine = *other = NULL;
    CHECK_EQ_INT(store_open(path, 1, mine, err, sizeof err), 0);
    CHECK_EQ_INT(store_open(path, 0, other, err, sizeof err), 0);
    if (*mine == NULL || *other == NULL)
        return -1;
    sync_init(s, index_new(NULL), cpu, 1);
    CHECK_EQ_INT(sync_load(s, *mine), 0);
    return 0;
}

static void watch_should_follow_another_connection(void)
{
    attn_device cpu;
    store *mine, *other;
    sync_state s;
    if (two_connections(&cpu, &mine, &other, &s) != 0)
        return;
    index_device_view v;
    CHECK_EQ_INT(index_device_find(s.ix, "cpu", &v), 0);
    CHECK_EQ_INT(v.local, 1);
    CHECK_EQ_INT(v.nmeasurements, 0);
    sync_watch(&s, mine); /* the first look */
    int64_t v0 = s.version;

    /* a tune in flight in another process: two rows, no mark */
    store_measurement a = row(&cpu, "fused/pad=1", 30, 100);
    store_measurement b = row(&cpu, "split/acc=f32/pad=1", 20, 101);
    CHECK_EQ_INT(store_measurement_put(other, &a), 0);
    CHECK_EQ_INT(store_measurement_put(other, &b), 0);
    sync_watch(&s, mine);
    CHECK(s.version != v0); /* data_version moved: another connection committed */
    CHECK(same_as_store(&s, mine, cpu.info.id));
    CHECK_EQ_INT(index_device_find(s.ix, "cpu", &v), 0);
    CHECK_EQ_INT(v.nmeasurements, 2);
    index_answer ans;
    CHECK_EQ_INT(index_lookup(s.ix, cpu.info.id, &S, 0, &ans), 0);
    CHECK(ans.source != INDEX_MEASURED);

    /* the tune completes: the mark moves the fingerprint */
    CHECK_EQ_INT(store_winner_mark(other, cpu.info.id, cpu.stack.id, &S, b.tactic), 0);
    sync_watch(&s, mine);
    CHECK(same_as_store(&s, mine, cpu.info.id));
    CHECK_EQ_INT(index_lookup(s.ix, cpu.info.id, &S, 0, &ans), 0);
    CHECK_EQ_INT(ans.source, INDEX_MEASURED);
    CHECK_STR(ans.m.tactic, b.tactic);

    /* own commits (this handle) do not move data_version: the index gets
     * them from the tuner's callback instead (sync_row) */
    int64_t v1 = s.version;
    store_measurement c = row(&cpu, "folded/acc=f32/pad=1", 5, 102);
    CHECK_EQ_INT(store_measurement_put(mine, &c), 0);
    sync_row(s.ix, &c);
    sync_watch(&s, mine);
    CHECK(s.version == v1);
    CHECK(same_as_store(&s, mine, cpu.info.id));

    /* a row the index missed (a failed sync_row) is found by the
     * fingerprint at the next commit of another connection */
    store_measurement d = row(&cpu, "split_repeat/acc=f32/pad=1", 50, 103);
    CHECK_EQ_INT(store_measurement_put(mine, &d), 0);
    int64_t jid;
    CHECK_EQ_INT(store_job_create(other, cpu.info.id, &S, 1, &jid), 0); /* any commit */
    sync_watch(&s, mine);
    CHECK(same_as_store(&s, mine, cpu.info.id));
    CHECK_EQ_INT(index_device_find(s.ix, "cpu", &v), 0);
    CHECK_EQ_INT(v.nmeasurements, 4);

    CHECK_EQ_INT(sync_reload(&s, mine, "test"), 0);
    CHECK(same_as_store(&s, mine, cpu.info.id));
    index_free(s.ix);
    store_close(other);
    store_close(mine);
}

/* A device of another host: a fleet device once imported. */
static attn_device fleet_device(void)
{
    attn_device g;
    memset(&g, 0, sizeof g);
    snprintf(g.info.id, sizeof g.info.id, "GPU-00000000-1111-2222-3333-444444444444");
    snprintf(g.info.name, sizeof g.info.name, "NVIDIA Test");
    snprintf(g.info.kind, sizeof g.info.kind, "cuda");
    g.info.cc_major = 9;
    g.info.sm_count = 132;
    g.info.memory_mb = 141000;
    snprintf(g.stack.driver, sizeof g.stack.driver, "580.1");
    snprintf(g.stack.runtime, sizeof g.stack.runtime, "13.0");
    snprintf(g.stack.attune, sizeof g.stack.attune, "0.1.0");
    snprintf(g.stack.kernels, sizeof g.stack.kernels, "0123456789abcdef");
    attn_stack_finish(&g.stack);
    return g;
}

/* The times device id's rows were swapped into the index (-1: absent). */
static int64_t loads(sync_state *s, const char *id)
{
    index_device_view v;
    return index_device_find(s->ix, id, &v) == 0 ? v.loads : -1;
}

/* Export device id of from and import the table into to. */
static int import_from(store *from, store *to, const char *id)
{
    char *json = NULL, err[ATTUNE_ERRLEN];
    store_import_stats stats;
    int rc = store_export(from, id, &json);
    if (rc == 0)
        rc = store_import(to, json, strlen(json), &stats, err, sizeof err);
    free(json);
    return rc;
}

static void import_should_reload_only_changed_devices(void)
{
    char dir[300], path[400], elsewhere[400], err[ATTUNE_ERRLEN];
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/attune.db", dir);
    snprintf(elsewhere, sizeof elsewhere, "%s/other-host.db", dir);
    attn_device cpu, gpu = fleet_device();
    CHECK_EQ_INT(attn_device_resolve("cpu", &cpu, err, sizeof err), 0);
    store *mine = NULL, *host = NULL;
    CHECK_EQ_INT(store_open(path, 1, &mine, err, sizeof err), 0);
    CHECK_EQ_INT(store_open(elsewhere, 1, &host, err, sizeof err), 0);
    if (mine == NULL || host == NULL)
        return;
    store_measurement a = row(&cpu, "fused/pad=1", 30, 100);
    CHECK_EQ_INT(store_device_put(mine, &cpu.info, &cpu.stack), 0);
    CHECK_EQ_INT(store_measurement_put(mine, &a), 0);
    CHECK_EQ_INT(store_device_put(host, &gpu.info, &gpu.stack), 0);
    store_measurement g1 = row(&gpu, "fused/pad=1", 10, 200);
    CHECK_EQ_INT(store_measurement_put(host, &g1), 0);

    sync_state s;
    sync_init(&s, index_new(NULL), &cpu, 1);
    CHECK_EQ_INT(sync_load(&s, mine), 0);
    int64_t cpu0 = loads(&s, cpu.info.id);
    CHECK(cpu0 >= 1);
    CHECK_EQ_INT(loads(&s, gpu.info.id), -1);

    /* a table of a device the index lacks: that device is added, the
     * local one (unchanged) is not reloaded */
    CHECK_EQ_INT(import_from(host, mine, gpu.info.id), 0);
    CHECK_EQ_INT(sync_refresh(&s, mine, "import"), 0);
    CHECK_EQ_INT(loads(&s, gpu.info.id), 1);
    CHECK_EQ_INT(loads(&s, cpu.info.id), cpu0);
    CHECK(same_as_store(&s, mine, gpu.info.id));

    /* the same table again changes nothing: nothing is reloaded */
    CHECK_EQ_INT(import_from(host, mine, gpu.info.id), 0);
    CHECK_EQ_INT(sync_refresh(&s, mine, "import"), 0);
    CHECK_EQ_INT(loads(&s, gpu.info.id), 1);
    CHECK_EQ_INT(loads(&s, cpu.info.id), cpu0);

    /* a new row of the fleet device: it alone is reloaded */
    store_measurement g2 = row(&gpu, "split/acc=f32/pad=1", 8, 201);
    CHECK_EQ_INT(store_measurement_put(host, &g2), 0);
    CHECK_EQ_INT(import_from(host, mine, gpu.info.id), 0);
    CHECK_EQ_INT(sync_refresh(&s, mine, "import"), 0);
    CHECK_EQ_INT(loads(&s, gpu.info.id), 2);
    CHECK_EQ_INT(loads(&s, cpu.info.id), cpu0);
    CHECK(same_as_store(&s, mine, gpu.info.id));

    /* a new description without new rows shows in the fingerprint too */
    snprintf(gpu.info.name, sizeof gpu.info.name, "NVIDIA Test Renamed");
    CHECK_EQ_INT(store_device_put(mine, &gpu.info, &gpu.stack), 0);
    CHECK_EQ_INT(sync_refresh(&s, mine, "import"), 0);
    CHECK_EQ_INT(loads(&s, gpu.info.id), 3);
    CHECK_EQ_INT(loads(&s, cpu.info.id), cpu0);
    index_device_view v;
    CHECK_EQ_INT(index_device_find(s.ix, gpu.info.id, &v), 0);
    CHECK_STR(v.info.name, "NVIDIA Test Renamed");

    /* SIGHUP's reload still takes every device */
    CHECK_EQ_INT(sync_reload(&s, mine, "test"), 0);
    CHECK_EQ_INT(loads(&s, cpu.info.id), cpu0 + 1);
    CHECK_EQ_INT(loads(&s, gpu.info.id), 4);
    index_free(s.ix);
    store_close(host);
    store_close(mine);
}

/* A job thread, as the test's after_read hook: commits a row on its own
 * connection and puts it into the index (sync_row), between a reload's
 * database read and its swap, on the first `rows` reads. */
typedef struct job_thread {
    sync_state *s;
    store *conn;
    const attn_device *dev;
    int reads, rows;
    int made;          /* rows committed, each of a shape of its own */
} job_thread;

static void job_commits(void *ctx, const char *device_id)
{
    job_thread *j = ctx;
    if (strcmp(device_id, j->dev->info.id) != 0 || j->reads++ >= j->rows)
        return;
    store_measurement r = row(j->dev, "fused/pad=1", 10, 200 + ++j->made);
    r.shape.sq += j->made;
    CHECK_EQ_INT(store_measurement_put(j->conn, &r), 0);
    sync_row(j->s->ix, &r);
}

static int64_t rows_held(sync_state *s, const char *id)
{
    index_device_view v;
    return index_device_find(s->ix, id, &v) == 0 ? v.nmeasurements : -1;
}

/* A row a job thread commits and puts while a reload reads (the daemon's
 * watcher and a tune on miss, 2026-12-05: a resumed shape briefly not
 * answered measured) stays: the swap of the older read is refused and the
 * device read again. A job that never pauses defers the reload to the
 * next look (not a failure), the index still holding every row put. */
static void reload_should_keep_a_row_put_during_its_read(void)
{
    attn_device cpu;
    store *mine, *job;
    sync_state s;
    if (two_connections(&cpu, &mine, &job, &s) != 0)
        return;
    store_measurement a = row(&cpu, "split/acc=f32/pad=1", 20, 100);
    CHECK_EQ_INT(store_measurement_put(job, &a), 0);
    sync_row(s.ix, &a);
    int64_t loads0 = loads(&s, cpu.info.id);

    job_thread j = {&s, job, &cpu, 0, 1, 0};
    s.after_read = job_commits;
    s.after_read_ctx = &j;
    CHECK_EQ_INT(sync_reload(&s, mine, "test"), 0);
    CHECK_EQ_INT(j.reads, 2);               /* read, refused, read again */
    CHECK_EQ_INT(loads(&s, cpu.info.id), loads0 + 1);
    CHECK_EQ_INT(rows_held(&s, cpu.info.id), 2);
    CHECK(same_as_store(&s, mine, cpu.info.id));

    j.reads = 0;
    j.rows = 1000; /* a row at every read */
    CHECK_EQ_INT(sync_reload(&s, mine, "test"), 0); /* deferred, not failed */
    CHECK_EQ_INT(j.reads, 2);               /* SYNC_LOAD_TRIES */
    CHECK_EQ_INT(loads(&s, cpu.info.id), loads0 + 1);
    CHECK_EQ_INT(rows_held(&s, cpu.info.id), 2 + 2);
    CHECK(same_as_store(&s, mine, cpu.info.id));
    index_free(s.ix);
    store_close(job);
    store_close(mine);
}

int main(void)
{
    log_set_level(LOGL_WARN);
    RUN(watch_should_follow_another_connection);
    RUN(import_should_reload_only_changed_devices);
    RUN(reload_should_keep_a_row_put_during_its_read);
    return test_summary();
}
