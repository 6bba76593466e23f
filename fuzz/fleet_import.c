/* fleet_import.c -- libFuzzer harness: fleet import (store_import), the
 * one parser of untrusted tables (attune import, POST /v1/import).
 * Properties: no crash; all or nothing: a refused table leaves the
 * database as it was; an accepted one exports and re-imports as a no-op
 * (every row already there). One in-memory database for the whole run,
 * reopened every 2000 inputs to bound its size. */
#include "../db/store.h"
#include "fuzz.h"

static store *st;
static int uses;

static int64_t count_rows(void)
{
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0;
    int64_t rows = 0;
    FUZZ_CHECK(store_devices_list(st, &infos, &stacks, &n) == 0);
    for (int i = 0; i < n; i++) {
        store_measurement *m = NULL;
        int k = 0;
        FUZZ_CHECK(store_measurements_all(st, infos[i].id, &m, &k) == 0);
        rows += k;
        free(m);
    }
    free(infos);
    free(stacks);
    return rows;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[ATTUNE_ERRLEN];
    if (st == NULL || ++uses % 2000 == 0) {
        store_close(st);
        st = NULL;
        FUZZ_CHECK(store_open(":memory:", 1, &st, err, sizeof err) == 0);
    }
    int64_t before = count_rows();
    store_import_stats stats;
    memset(&stats, 0, sizeof stats);
    int rc = store_import(st, (const char *)data, size, &stats, err, sizeof err);
    if (rc != 0) {
        FUZZ_CHECK(count_rows() == before); /* nothing half-merged */
        return 0;
    }
    /* accepted: the device's export re-imports with nothing new */
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0;
    FUZZ_CHECK(store_devices_list(st, &infos, &stacks, &n) == 0);
    for (int i = 0; i < n; i++) {
        char *json = NULL;
        FUZZ_CHECK(store_export(st, infos[i].id, &json) == 0);
        int64_t rows = count_rows();
        store_import_stats again;
        memset(&again, 0, sizeof again);
        int rc2 = store_import(st, json, strlen(json), &again, err, sizeof err);
        /* a table without rows is refused on import: only then may it fail */
        FUZZ_CHECK(rc2 == 0 || strstr(json, "\"measurements\":[]") != NULL);
        FUZZ_CHECK(again.measurements == 0 && count_rows() == rows);
        free(json);
    }
    free(infos);
    free(stacks);
    return 0;
}
