/* load.c -- fill the lookup index from the store: local devices at start,
 * fleet devices at start and after each import. */
#include <stdlib.h>
#include <string.h>

#include "attuned.h"
#include "log.h"
#include "metrics.h"

static int load_device(attuned *d, store *st, const char *device_id)
{
    index_device_view v;
    int known = index_device_find(d->ix, device_id, &v) == 0 &&
                strcmp(v.info.id, device_id) == 0;
    if (!known || !v.local) {
        /* fleet device: identity and latest stack as the store now has them */
        attn_device_info info;
        attn_stack stack;
        int rc = store_device_get(st, device_id, &info, &stack);
        if (rc != 0)
            return rc;
        if ((rc = index_device_put(d->ix, &info, &stack, 0)) != 0)
            return rc;
    }
    store_measurement *m = NULL;
    int n = 0;
    int rc = store_measurements_all(st, device_id, &m, &n);
    if (rc != 0)
        return rc;
    return index_device_load(d->ix, device_id, m, n);
}

/* Every reload of a device (start, SIGHUP, the watcher, imports) comes
 * here: the one place that counts failures for GET /metrics. */
int attuned_load_device(attuned *d, store *st, const char *device_id)
{
    int rc = load_device(d, st, device_id);
    if (rc != 0)
        metrics_reload_failed();
    return rc;
}

int attuned_load_index(attuned *d, store *st)
{
    int rc;
    for (int i = 0; i < d->ndevices; i++) {
        const attn_device *dev = &d->devices[i];
        if ((rc = store_device_put(st, &dev->info, &dev->stack)) != 0) {
            log_event(LOGL_ERROR, "device_register_failed", "device=%s error=\"%s\"",
                      dev->info.id, attune_strerror(rc));
            return rc;
        }
        if ((rc = index_device_put(d->ix, &dev->info, &dev->stack, 1)) != 0)
            return rc;
        if ((rc = attuned_load_device(d, st, dev->info.id)) != 0)
            return rc;
    }
    attn_device_info *infos = NULL;
    attn_stack *stacks = NULL;
    int n = 0;
    if ((rc = store_devices_list(st, &infos, &stacks, &n)) != 0)
        return rc;
    for (int i = 0; i < n && rc == 0; i++) {
        int local = 0;
        for (int k = 0; k < d->ndevices; k++)
            local |= strcmp(d->devices[k].info.id, infos[i].id) == 0;
        if (local)
            continue;
        if ((rc = index_device_put(d->ix, &infos[i], &stacks[i], 0)) == 0)
            rc = attuned_load_device(d, st, infos[i].id);
    }
    free(infos);
    free(stacks);
    return rc;
}
