/* tactic_cache.c -- whole answers of GET /v1/tactic per request thread (tactic_cache.h). */
#include "tactic_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/answer_cache.h"
#include "metrics.h"

/* What a hit needs besides the answer itself. */
typedef struct kept {
    struct MHD_Response *resp; /* the cache's reference */
    int source, stale;
    int asked;                 /* jobs_asked(device_id, key) on each answer */
    char device_id[64];
    char key[ATTN_SHAPE_KEY_MAX];
} kept;

static void release(void *value)
{
    kept *k = value;
    MHD_destroy_response(k->resp); /* MHD frees it once no connection sends it */
    free(k);
}

int tactic_cache_start(attuned *d)
{
    d->answers = answer_cache_new(TACTIC_CACHE_SLOTS, release);
    return d->answers != NULL ? 0 : ATTUNE_ENOMEM;
}

void tactic_cache_stop(attuned *d)
{
    answer_cache_free(d->answers);
    d->answers = NULL;
}

int tactic_cache_answer(req *r, enum MHD_Result *ret)
{
    if (r->d->answers == NULL || r->raw_uri == NULL)
        return 0;
    kept *k = answer_cache_get(r->d->answers, r->raw_uri, r->raw_len,
                               index_generation(r->d->ix));
    if (k == NULL)
        return 0;
    if (k->asked)
        jobs_asked(r->d->jobs, k->device_id, k->key);
    *ret = http_queue_kept(r, 200, k->resp);
    metrics_lookup(k->source, k->stale, req_elapsed(r));
    return 1;
}

/* A response of text (taken) as every answer of h_tactic is made. */
static struct MHD_Response *json_response(char *text, size_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text,
                                                                MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(text);
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    return resp;
}

enum MHD_Result tactic_cache_send(req *r, uint64_t gen, const index_answer *ans, int cacheable,
                                  char *text, size_t len)
{
    if (!cacheable || r->d->answers == NULL || r->raw_uri == NULL)
        return http_send(r, 200, "application/json", text, len, NULL, NULL);
    kept *k = calloc(1, sizeof *k);
    if (k == NULL)
        return http_send(r, 200, "application/json", text, len, NULL, NULL);
    k->resp = json_response(text, len);
    if (k->resp == NULL) {
        free(k);
        return MHD_NO; /* out of memory: MHD closes the connection, as http_send */
    }
    k->source = (int)ans->source;
    k->stale = ans->stale;
    k->asked = (ans->source == INDEX_MEASURED || ans->complete) && ans->local;
    snprintf(k->device_id, sizeof k->device_id, "%s", ans->device_id);
    snprintf(k->key, sizeof k->key, "%s", ans->key);
    /* queued before it is kept: the put may release it at once (ENOMEM),
     * and MHD holds a reference of its own from the queue on */
    enum MHD_Result ret = http_queue_kept(r, 200, k->resp);
    answer_cache_put(r->d->answers, r->raw_uri, r->raw_len, gen, k);
    return ret;
}
