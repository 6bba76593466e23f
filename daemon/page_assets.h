/* page_assets.h -- the dashboard's files compiled into attuned: the table
 * that web/embed.cmake generates (build/page_assets.c) from web/. */
#ifndef ATTUNED_PAGE_ASSETS_H
#define ATTUNED_PAGE_ASSETS_H

#include <stddef.h>

typedef struct page_asset {
    const char *name;           /* file name in web/, e.g. "app.js"; NULL ends */
    const char *ctype;          /* Content-Type */
    const unsigned char *data;  /* len bytes (plus a 0 not counted) */
    size_t len;
} page_asset;

extern const page_asset page_assets[];

#endif
