/* json_num.c -- the shortest double that reads back exactly, in JSON. */
#include "json_num.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The shortest forms of the values this thread wrote last, by the bits of
 * the double (direct-mapped): a daemon answers the same few measured times
 * and errors again and again, and each costs up to three glibc printf and
 * strtod round trips, multi-precision arithmetic all: 23% of attuned's CPU
 * at 40,000 lookups/s (issue 29 item 6, docs/perf-http.md). An entry is the
 * text the loop below made for exactly these bits, so a hit changes no
 * output. */
#define NUM_CACHE 256

typedef struct num_entry {
    uint64_t bits;
    unsigned char n;      /* 0: empty */
    char s[JSON_NUM_MAX];
} num_entry;

static _Thread_local num_entry num_cache[NUM_CACHE];

int json_num_shortest(double v, char buf[JSON_NUM_MAX])
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    num_entry *e = &num_cache[(bits * 0x9e3779b97f4a7c15ull) >> 56];
    if (e->n != 0 && e->bits == bits) {
        memcpy(buf, e->s, (size_t)e->n + 1);
        return e->n;
    }
    /* %.17g always reads back (IEEE double: 17 significant digits), so
     * the loop ends; most measured times need 15 or 17. */
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, JSON_NUM_MAX, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (n > 0 && n < JSON_NUM_MAX) {
        e->bits = bits;
        e->n = (unsigned char)n;
        memcpy(e->s, buf, (size_t)n + 1);
    }
    return n;
}

int json_num_format(double v, char buf[JSON_NUM_MAX])
{
    if (!isfinite(v)) {
        memcpy(buf, "null", 5);
        return 4;
    }
    int n = json_num_shortest(v, buf);
    if (strpbrk(buf, ".e") == NULL && n + 2 < JSON_NUM_MAX) {
        buf[n++] = '.'; /* a real stays a real: 2 -> 2.0 */
        buf[n++] = '0';
        buf[n] = 0;
    }
    return n;
}

json_t *json_num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* Growing output text; 0 or -1 on ENOMEM. */
typedef struct obuf {
    char *p;
    size_t len, cap;
} obuf;

static int put(obuf *o, const char *s, size_t n)
{
    if (o->len + n + 1 > o->cap) {
        size_t cap = (o->len + n + 1) * 2;
        char *g = realloc(o->p, cap);
        if (g == NULL)
            return -1;
        o->p = g;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
    return 0;
}

/* Rewrite each real of jansson's text: a number token outside strings with
 * a fraction or exponent. Integers are copied as they are (they may exceed
 * a double's 53 bits). NULL on ENOMEM. */
static char *shorten_reals(const char *in)
{
    obuf o = {NULL, 0, 0};
    int in_string = 0;
    const char *p = in;
    while (*p) {
        size_t t = 1;
        if (in_string) {
            if (*p == '\\' && p[1] != 0)
                t = 2; /* an escaped quote does not end the string */
            else if (*p == '"')
                in_string = 0;
        } else if (*p == '"') {
            in_string = 1;
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            t = strspn(p, "0123456789+-.eE");
            if (memchr(p, '.', t) != NULL || memchr(p, 'e', t) != NULL ||
                memchr(p, 'E', t) != NULL) {
                char num[JSON_NUM_MAX];
                int n = json_num_format(strtod(p, NULL), num);
                if (put(&o, num, (size_t)n) != 0)
                    goto fail;
                p += t;
                continue;
            }
        }
        if (put(&o, p, t) != 0)
            goto fail;
        p += t;
    }
    if (o.p == NULL && put(&o, "", 0) != 0)
        goto fail;
    return o.p;
fail:
    free(o.p);
    return NULL;
}

char *json_num_dumps(const json_t *j, size_t flags)
{
    /* 17 digits: what jansson writes reads back exactly, so strtod above
     * recovers the double itself */
    flags &= ~(size_t)JSON_REAL_PRECISION(31);
    char *text = json_dumps(j, flags | JSON_REAL_PRECISION(17));
    if (text == NULL)
        return NULL;
    char *out = shorten_reals(text);
    free(text);
    return out;
}

int json_num_dumpf(const json_t *j, FILE *f, size_t flags)
{
    char *text = json_num_dumps(j, flags);
    if (text == NULL)
        return -1;
    int rc = fputs(text, f) < 0 ? -1 : 0;
    free(text);
    return rc;
}
