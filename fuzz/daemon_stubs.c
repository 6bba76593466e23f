/* daemon_stubs.c -- the two daemon modules http.c calls that the parser
 * harnesses never reach (metrics, the DB worker), as no-ops, so that a
 * harness links http.c without the whole daemon. */
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
