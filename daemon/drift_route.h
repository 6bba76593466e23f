/* drift_route.h -- GET /v1/drift: drift between two stacks of a device or
 * a model (tuner/drift.h), computed on the DB worker. */
#ifndef ATTUNED_DRIFT_ROUTE_H
#define ATTUNED_DRIFT_ROUTE_H

#include "http.h"

/* Route handler (routes.c's table): device= (required), model=0|1,
 * from=/to= (stack ids, both or neither). */
enum MHD_Result drift_route_get(req *r, const char *url, const http_args *a);
/* Its query arguments, for the route table. */
extern const char *const drift_route_args[];

#endif
