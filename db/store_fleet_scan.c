/* store_fleet_scan.c -- a fleet table's top level parsed, its rows indexed
 * (store_fleet_scan.h). */
#include "store_fleet_scan.h"

#include <stdlib.h>
#include <string.h>

#include "../common/attune_err.h"

#define VALUE_FLAGS (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_REJECT_DUPLICATES)

typedef struct scan {
    const char *s;
    size_t len, pos;
    size_t max_rows;
    char *err;
    size_t errlen;
} scan;

static void skip_ws(scan *c)
{
    while (c->pos < c->len && (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' ||
                               c->s[c->pos] == '\n' || c->s[c->pos] == '\r'))
        c->pos++;
}

/* The error of the whole text at byte at: line and column counted as
 * jansson counts them (1-based; a column is a byte). */
static int fail_at(scan *c, size_t at, const char *why)
{
    int line = 1, col = 0;
    for (size_t i = 0; i < at && i < c->len; i++) {
        if (c->s[i] == '\n') {
            line++;
            col = 0;
        } else {
            col++;
        }
    }
    return attune_fail(c->err, c->errlen, ATTUNE_EFORMAT,
                       "fleet table is not valid JSON: line %d, column %d: %s", line, col + 1,
                       why);
}

/* One JSON value at c->pos, parsed; c->pos moves past it. NULL with the
 * error set (ATTUNE_EFORMAT or ENOMEM in *rc). */
static json_t *value(scan *c, int *rc)
{
    json_error_t e;
    json_t *v = json_loadb(c->s + c->pos, c->len - c->pos, VALUE_FLAGS, &e);
    if (v == NULL) {
        /* e.position: bytes of this value read before the error */
        *rc = fail_at(c, c->pos + (e.position > 0 ? (size_t)e.position : 0), e.text);
        return NULL;
    }
    c->pos += (size_t)e.position;
    return v;
}

/* The "measurements" array at c->pos ('['): each element checked and its
 * offset kept. 0 or an error: ATTUNE_ETOOBIG as soon as an element past
 * c->max_rows starts (before it is parsed, the index never larger than
 * the limit). */
static int index_rows(scan *c, fleet_rows *rows)
{
    size_t cap = 0;
    int rc = 0;
    c->pos++; /* '[' */
    skip_ws(c);
    if (c->pos < c->len && c->s[c->pos] == ']') {
        c->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (rows->n == c->max_rows)
            return attune_fail(c->err, c->errlen, ATTUNE_ETOOBIG,
                               "fleet table has more than %zu measurements, over the limit",
                               c->max_rows);
        if (rows->n == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            if (ncap > c->max_rows)
                ncap = c->max_rows;
            size_t *p = realloc(rows->off, ncap * sizeof *p);
            if (p == NULL)
                return attune_fail(c->err, c->errlen, ATTUNE_ENOMEM, "out of memory");
            rows->off = p;
            cap = ncap;
        }
        size_t at = c->pos;
        json_t *v = value(c, &rc);
        if (v == NULL)
            return rc;
        json_decref(v);
        rows->off[rows->n++] = at;
        skip_ws(c);
        if (c->pos < c->len && c->s[c->pos] == ',') {
            c->pos++;
            continue;
        }
        if (c->pos < c->len && c->s[c->pos] == ']') {
            c->pos++;
            return 0;
        }
        return fail_at(c, c->pos, "',' or ']' expected");
    }
}

/* The members of the top-level object, c->pos past its '{'. */
static int members(scan *c, json_t *root, fleet_rows *rows)
{
    int rc = 0;
    skip_ws(c);
    if (c->pos < c->len && c->s[c->pos] == '}') {
        c->pos++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (c->pos >= c->len || c->s[c->pos] != '"')
            return fail_at(c, c->pos, "string or '}' expected");
        size_t at = c->pos;
        json_t *k = value(c, &rc);
        if (k == NULL)
            return rc;
        const char *key = json_string_value(k);
        if (json_object_get(root, key) != NULL) {
            json_decref(k);
            return fail_at(c, at, "duplicate object key");
        }
        skip_ws(c);
        if (c->pos >= c->len || c->s[c->pos] != ':') {
            json_decref(k);
            return fail_at(c, c->pos, "':' expected");
        }
        c->pos++;
        skip_ws(c);
        json_t *v;
        if (strcmp(key, "measurements") == 0 && c->pos < c->len && c->s[c->pos] == '[') {
            if ((rc = index_rows(c, rows)) != 0) {
                json_decref(k);
                return rc;
            }
            v = json_array();
        } else {
            v = value(c, &rc);
        }
        if (v == NULL || json_object_set_new(root, key, v) != 0) {
            json_decref(k);
            return rc != 0 ? rc : attune_fail(c->err, c->errlen, ATTUNE_ENOMEM, "out of memory");
        }
        json_decref(k);
        skip_ws(c);
        if (c->pos < c->len && c->s[c->pos] == ',') {
            c->pos++;
            continue;
        }
        if (c->pos < c->len && c->s[c->pos] == '}') {
            c->pos++;
            return 0;
        }
        return fail_at(c, c->pos, "',' or '}' expected");
    }
}

int fleet_scan(const char *text, size_t len, size_t max_rows, json_t **root, fleet_rows *rows,
               char *err, size_t errlen)
{
    scan c = {.s = text, .len = len, .max_rows = max_rows, .err = err, .errlen = errlen};
    int rc;
    memset(rows, 0, sizeof *rows);
    rows->text = text;
    rows->len = len;
    *root = NULL;
    skip_ws(&c);
    if (c.pos >= c.len)
        return fail_at(&c, c.pos, "'[' or '{' expected near end of file");
    if (c.s[c.pos] != '{') {
        /* valid JSON but not an object, or not JSON at all: say which */
        json_t *v = value(&c, &rc);
        if (v == NULL)
            return rc;
        json_decref(v);
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "fleet table must be a JSON object");
    }
    c.pos++;
    json_t *r = json_object();
    if (r == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    if ((rc = members(&c, r, rows)) == 0) {
        skip_ws(&c);
        if (c.pos != c.len)
            rc = fail_at(&c, c.pos, "end of file expected");
    }
    if (rc != 0) {
        json_decref(r);
        fleet_rows_free(rows);
        return rc;
    }
    *root = r;
    return 0;
}

json_t *fleet_rows_get(const fleet_rows *rows, size_t i)
{
    json_error_t e;
    size_t at = rows->off[i];
    return json_loadb(rows->text + at, rows->len - at, VALUE_FLAGS, &e);
}

void fleet_rows_free(fleet_rows *rows)
{
    free(rows->off);
    rows->off = NULL;
    rows->n = 0;
}
