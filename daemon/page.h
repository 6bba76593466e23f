/* page.h -- the read-only views of attuned: GET /v1/winners (winners.c) and
 * the dashboard page with its assets (page.c). Route rows in routes.c. */
#ifndef ATTUNED_PAGE_H
#define ATTUNED_PAGE_H

#include "http.h"

/* GET /v1/winners?device=[&dtype=&d=&causal=&stale=]: every tuned shape of
 * the device with its winner, runner-up and margin (docs/api.md). The rows
 * are read on the DB worker. */
enum MHD_Result winners_get(req *r, const char *url, const http_args *a);
/* Its query arguments, for the route table. */
extern const char *const winners_args[];

/* GET / and GET /ui/<asset>: the dashboard, compiled into the binary
 * (web/, see page_assets.h). No token: it only reads the API. */
enum MHD_Result page_get(req *r, const char *url, const http_args *args);

#endif
