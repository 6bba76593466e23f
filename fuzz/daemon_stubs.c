/* daemon_stubs.c -- the three daemon modules http.c calls that the parser
 * harnesses never reach (metrics, the DB worker, the index's device
 * lookup), as no-ops, so that a harness links http.c without the whole
 * daemon. */
#include "../lookup/index.h"
#include "../daemon/metrics.h"
#include "../daemon/worker.h"

void metrics_request(int route, unsigned status)
{
    (void)route;
    (void)status;
}

int worker_submit(worker *w, worker_fn fn, void *arg)
{
    (void)w;
    (void)fn;
    (void)arg;
    return ATTUNE_EBUSY;
}

int index_device_find(index_state *ix, const char *spec, index_device_view *out)
{
    (void)ix;
    (void)spec;
    (void)out;
    return ATTUNE_ENODEV;
}
