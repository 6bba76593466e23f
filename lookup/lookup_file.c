/* lookup_file.c -- a database or table file loaded into a lookup index. */
#include "lookup_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/table_file.h"
#include "../db/store_pins.h"

/* 1 when the file at path starts with SQLite's header. */
static int is_sqlite(const char *path)
{
    char head[16] = "";
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return 0;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    return n == sizeof head && memcmp(head, "SQLite format 3", 16) == 0;
}

/* An in-memory store holding the table at path, validated and merged as
 * `attune import` does. */
static int open_table(const char *path, store **out, char *err, size_t errlen)
{
    char *json = NULL;
    size_t len = 0;
    int rc = table_file_read(path, LOOKUP_FILE_MAX, &json, &len, err, errlen);
    if (rc != 0)
        return rc;
    store_import_stats stats;
    char why[ATTUNE_ERRLEN];
    if ((rc = store_open(":memory:", 1, out, err, errlen)) == 0 &&
        (rc = store_import(*out, json, len, &stats, why, sizeof why)) != 0) {
        attune_fail(err, errlen, rc, "'%s' is neither an attune database nor a table: %s",
                    path, why);
        store_close(*out);
        *out = NULL;
    }
    free(json);
    return rc;
}

/* 1 when a row of m[0..n) carries the tuner's winner mark: the device was
 * tuned in this database (an imported device's rows carry none: marks are
 * not exported, and a table's rows count whole). */
static int any_marked(const store_measurement *m, int n)
{
    for (int i = 0; i < n; i++)
        if (m[i].incumbent)
            return 1;
    return 0;
}

/* Every device of st into ix as a fleet device with its rows; a device
 * tuned in the file counts its rows only from complete tunes, as attuned
 * counts a local device's (a tune in flight or cut short answers nothing). */
static int load_devices(store *st, index_state *ix, const char *path, char *err,
                        size_t errlen)
{
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0;
    int rc = store_devices_list(st, &infos, &stacks, &n);
    for (int i = 0; i < n && rc == 0; i++) {
        store_measurement *m = NULL;
        int nm = 0;
        if ((rc = index_device_put(ix, &infos[i], &stacks[i], 0)) == 0 &&
            (rc = store_measurements_all(st, infos[i].id, &m, &nm)) == 0 &&
            (!any_marked(m, nm) || (rc = index_device_need_marks(ix, infos[i].id)) == 0))
            rc = index_device_load(ix, infos[i].id, m, nm); /* takes m */
        else
            free(m);
    }
    if (rc != 0)
        attune_fail(err, errlen, rc, "reading '%s' failed: %s", path, attune_strerror(rc));
    else if (n == 0)
        rc = attune_fail(err, errlen, ATTUNE_ENOTFOUND, "'%s' holds no device", path);
    free(infos);
    free(stacks);
    return rc;
}

/* The file's pins into ix: they answer in process as in attuned. */
static int load_pins(store *st, index_state *ix, const char *path, char *err, size_t errlen)
{
    pin *p = NULL;
    int n = 0;
    int rc = store_pins_list(st, &p, &n);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "reading the pins of '%s' failed: %s", path,
                           attune_strerror(rc));
    return index_pins_set(ix, p, n); /* takes p */
}

int lookup_file_open(const char *path, index_state **out, char *err, size_t errlen)
{
    store *st = NULL;
    *out = NULL;
    if (path == NULL || path[0] == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no file given");
    int rc = is_sqlite(path) ? store_open_snapshot(path, &st, err, errlen)
                             : open_table(path, &st, err, errlen);
    if (rc != 0)
        return rc;
    index_state *ix = index_new(NULL);
    if (ix == NULL) {
        store_close(st);
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    index_set_host_specs(ix, 1);
    rc = load_devices(st, ix, path, err, errlen);
    if (rc == 0)
        rc = load_pins(st, ix, path, err, errlen);
    store_close(st);
    if (rc != 0) {
        index_free(ix);
        return rc;
    }
    *out = ix;
    return 0;
}
