/* page.c -- the dashboard: GET / and GET /ui/<asset> from the files of web/
 * compiled into the binary (page_assets.h).
 *
 * The page is static; everything it shows it reads from the API (devices,
 * jobs, winners, results) with plain GETs, so it needs no token and can
 * change nothing. It is reached through the same access handler as the API,
 * so the same Host check applies (a DNS-rebinding page cannot read it). */
#include <stdlib.h>
#include <string.h>

#include "page.h"
#include "page_assets.h"

/* Only this origin's scripts, styles and API: no inline script, no CDN. */
#define PAGE_CSP                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " \
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const page_asset *find_asset(const char *name)
{
    for (const page_asset *a = page_assets; a->name != NULL; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

enum MHD_Result page_get(req *r, const char *url, const http_args *args)
{
    (void)args; /* the page takes no arguments and ignores any (cache busters) */
    const char *name = strcmp(url, "/") == 0 ? "index.html" : url + strlen("/ui/");
    /* names are flat file names of web/: nothing else is served */
    const page_asset *a = strchr(name, '/') == NULL ? find_asset(name) : NULL;
    if (a == NULL || (strcmp(a->name, "index.html") == 0 && strcmp(url, "/") != 0))
        return http_fail(r, ATTUNE_ENOTFOUND, "no route for %.100s", url);
    char *copy = malloc(a->len + 1); /* http_send frees what it sends */
    if (copy == NULL)
        return http_fail(r, ATTUNE_ENOMEM, "out of memory");
    memcpy(copy, a->data, a->len);
    return http_send(r, 200, a->ctype, copy, a->len, "Content-Security-Policy", PAGE_CSP);
}
