/* test_store_stream.c -- the streamed fleet export (db/store_stream.c):
 * the same text as store_export, one snapshot, a connection of its own. */
#include "db/store.h"
#include "fixture_h200.h"
#include "test.h"

static void put_rows(store *st, const attn_device_info *d, const attn_stack *s, int first,
                     int n)
{
    for (int i = first; i < first + n; i++) {
        store_measurement m;
        memset(&m, 0, sizeof m);
        snprintf(m.device_id, sizeof m.device_id, "%s", d->id);
        snprintf(m.stack_id, sizeof m.stack_id, "%s", s->id);
        attn_shape sh = {1 + i % 3, 8, 1, 16 + 8 * i, 1024, 128, ATTN_F16, i % 2};
        m.shape = sh;
        snprintf(m.tactic, sizeof m.tactic, "%s", i % 2 ? "fused/pad=8/tile=64x64" : "split/acc=f32/pad=1");
        m.status = STORE_OK;
        m.time_us = 10.0 / 3.0 * (i + 1); /* a double that needs 17 digits */
        m.time_us_min = m.time_us * 0.97;
        m.time_us_max = m.time_us * 1.05;
        m.time_us_copies = NAN; /* written as null */
        m.n = 50;
        m.max_abs_err = 1e-3;
        m.rel_err = 2.5e-4 + i * 1e-7;
        m.err_ratio = NAN;
        snprintf(m.mode, sizeof m.mode, "cuda-graph");
        snprintf(m.l2, sizeof m.l2, "flushed");
        m.rows_checked = 400;
        snprintf(m.note, sizeof m.note, "row \"%d\" \\ caf\xc3\xa9", i); /* escapes, UTF-8 */
        snprintf(m.host, sizeof m.host, "gpu-node-7");
        m.taken_at = 1767225600 + i;
        CHECK_EQ_INT(store_measurement_put(st, &m), 0);
    }
}

/* The text of a stream, all pieces; NULL on error. */
static char *drain(store_export_stream *x, int *pieces)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    const char *t;
    size_t n;
    int rc;
    *pieces = 0;
    while ((rc = store_export_next(x, &t, &n)) == 1) {
        while (len + n + 1 > cap)
            buf = realloc(buf, cap *= 2);
        memcpy(buf + len, t, n);
        len += n;
        (*pieces)++;
    }
    buf[len] = 0;
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Blank out the digits of "exported_at" (the only field that may differ
 * between two exports a second apart). */
static void blank_time(char *s)
{
    char *p = strstr(s, "\"exported_at\":");
    if (p == NULL)
        return;
    for (p += 14; *p >= '0' && *p <= '9'; p++)
        *p = '0';
}

/* A new store at path (a fresh temporary directory) holding the H200 of
 * fixture_h200 under one stack (*d, *s); NULL when it cannot be opened. */
static store *h200_store(char *path, size_t len, attn_device_info *d, attn_stack *s)
{
    char dir[256], err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, len, "%s/s.db", dir);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    if (st == NULL)
        return NULL;
    fixture_h200(d, s, "560.35.03");
    CHECK_EQ_INT(store_device_put(st, d, s), 0);
    return st;
}

static void stream_should_equal_store_export(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    attn_device_info d;
    attn_stack s;
    store *st = h200_store(path, sizeof path, &d, &s);
    if (st == NULL)
        return;

    /* no rows yet: an empty measurements array */
    store_export_stream *x = NULL;
    int pieces = 0;
    CHECK_EQ_INT(store_export_open(path, d.id, &x, err, sizeof err), 0);
    char *empty = x != NULL ? drain(x, &pieces) : NULL;
    store_export_close(x);
    CHECK(empty != NULL && strstr(empty, "\"measurements\":[]}") != NULL);
    free(empty);

    put_rows(st, &d, &s, 0, 40);
    char *whole = NULL;
    CHECK_EQ_INT(store_export(st, d.id, &whole), 0);
    CHECK_EQ_INT(store_export_open(path, "NVIDIA H200", &x, err, sizeof err), 0); /* by name */
    char *streamed = x != NULL ? drain(x, &pieces) : NULL;
    store_export_close(x);
    CHECK(whole != NULL && streamed != NULL);
    if (whole != NULL && streamed != NULL) {
        blank_time(whole);
        blank_time(streamed);
        CHECK_MSG(strcmp(whole, streamed) == 0, "stream differs:\n%.300s\n%.300s", whole,
                  streamed);
        CHECK_EQ_INT(pieces, 40 + 2); /* head, one per row, tail */
    }
    free(whole);
    free(streamed);
    store_close(st);
}

/* The export, streamed or whole, of a device tuned here carries only the
 * (stack, shape)s whose tune completed (a row marked incumbent); a device
 * without any mark (imported) goes whole. */
static void export_should_leave_tunes_in_flight_home(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    attn_device_info d;
    attn_stack s;
    store *st = h200_store(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    put_rows(st, &d, &s, 0, 40); /* 40 shapes, one row each */
    for (int marked = 0; marked <= 10; marked += 10) {
        for (int i = 0; i < marked; i++) { /* a tune's end marks its winner */
            attn_shape sh = {1 + i % 3, 8, 1, 16 + 8 * i, 1024, 128, ATTN_F16, i % 2};
            CHECK_EQ_INT(store_winner_mark(st, d.id, s.id, &sh, i % 2 ? "fused/pad=8/tile=64x64"
                                                                        : "split/acc=f32/pad=1"),
                         0);
        }
        char *whole = NULL, *streamed = NULL;
        int pieces = 0;
        store_export_stream *x = NULL;
        CHECK_EQ_INT(store_export(st, d.id, &whole), 0);
        CHECK_EQ_INT(store_export_open(path, d.id, &x, err, sizeof err), 0);
        streamed = x != NULL ? drain(x, &pieces) : NULL;
        store_export_close(x);
        CHECK(whole != NULL && streamed != NULL);
        if (whole != NULL && streamed != NULL) {
            int rows = 0;
            for (const char *p = whole; (p = strstr(p, "\"tactic\":")) != NULL; p++)
                rows++;
            CHECK_EQ_INT(rows, marked ? marked : 40); /* no mark yet: all */
            CHECK_EQ_INT(pieces, (marked ? marked : 40) + 2);
            int64_t held = -1;
            CHECK_EQ_INT(store_export_held_back(st, d.id, &held), 0);
            CHECK_EQ_INT(held, marked ? 40 - marked : 0);
            blank_time(whole);
            blank_time(streamed);
            CHECK(strcmp(whole, streamed) == 0);
        }
        free(whole);
        free(streamed);
    }
    store_close(st);
}

static void stream_should_read_one_snapshot(void)
{
    char path[300], err[ATTUNE_ERRLEN] = "";
    attn_device_info d;
    attn_stack s;
    store *st = h200_store(path, sizeof path, &d, &s);
    if (st == NULL)
        return;
    put_rows(st, &d, &s, 0, 10);
    store_export_stream *x = NULL;
    CHECK_EQ_INT(store_export_open(path, d.id, &x, err, sizeof err), 0);
    if (x == NULL) {
        store_close(st);
        return;
    }
    const char *t;
    size_t n;
    CHECK_EQ_INT(store_export_next(x, &t, &n), 1); /* head */
    CHECK_EQ_INT(store_export_next(x, &t, &n), 1); /* first row: the snapshot is taken */
    /* a writer goes on meanwhile (WAL): not blocked, and not seen */
    put_rows(st, &d, &s, 10, 5);
    int rows = 1, rc;
    while ((rc = store_export_next(x, &t, &n)) == 1)
        rows += n > 2 || t[0] != ']';
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(rows, 10);
    store_export_close(x);
    store_close(st);
}

static void stream_should_refuse_unknown_devices(void)
{
    char dir[256], path[300], err[ATTUNE_ERRLEN] = "";
    store *st = NULL;
    test_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/s.db", dir);
    CHECK_EQ_INT(store_open(path, 1, &st, err, sizeof err), 0);
    store_export_stream *x = (store_export_stream *)1;
    CHECK_EQ_INT(store_export_open(path, "GPU-nosuch", &x, err, sizeof err), ATTUNE_ENOTFOUND);
    CHECK(x == NULL);
    CHECK(store_export_open("/nonexistent/dir/x.db", "cpu", &x, err, sizeof err) < 0);
    CHECK(x == NULL && err[0] != 0);
    store_close(st);
}

int main(void)
{
    RUN(stream_should_equal_store_export);
    RUN(export_should_leave_tunes_in_flight_home);
    RUN(stream_should_read_one_snapshot);
    RUN(stream_should_refuse_unknown_devices);
    return test_summary();
}
