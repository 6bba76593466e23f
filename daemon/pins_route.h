/* pins_route.h -- GET /v1/pins, POST /v1/pins, DELETE /v1/pins/ID: the
 * operator's pins (tuner/pin.h; docs/api.md "Pins"). Writes run on the DB
 * worker, then the index takes the store's pins whole (sync_pins). */
#ifndef ATTUNED_PINS_ROUTE_H
#define ATTUNED_PINS_ROUTE_H

#include "http.h"

/* Body of POST /v1/pins at most. */
#define PINS_ROUTE_BODY_MAX (64u << 10)

/* GET /v1/pins[?device=]: every pin, or those that can apply to one
 * device (its id, its model, every device). No token. */
enum MHD_Result pins_route_list(req *r, const char *url, const http_args *a);
/* POST /v1/pins (token): add a pin, or update the reason and author of
 * the equal rule; 201 or 200 with {"pin": ...}. */
enum MHD_Result pins_route_add(req *r, const char *url, const http_args *a);
/* DELETE /v1/pins/ID (token): remove it; 200 {"deleted": ...} or 404. */
enum MHD_Result pins_route_delete(req *r, const char *url, const http_args *a);

/* Query arguments of GET /v1/pins, for the route table. */
extern const char *const pins_route_args[];

#endif
