/* jbuf.c -- a small JSON object writer (jbuf.h). */
#include "jbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_num.h"

static void jb_reserve(jbuf *b, size_t more)
{
    if (b->oom || b->len + more + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (b->len + more + 1 > cap)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = 1;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void jb_put(jbuf *b, const char *s, size_t n)
{
    jb_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void jb_key(jbuf *b, const char *key)
{
    if (b->len > 1)
        jb_put(b, ",", 1);
    jb_put(b, "\"", 1);
    jb_put(b, key, strlen(key));
    jb_put(b, "\":", 2);
}

void jbuf_init(jbuf *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    jb_reserve(b, cap);
    jb_put(b, "{", 1);
}

void jbuf_str(jbuf *b, const char *key, const char *val)
{
    static const char hex[] = "0123456789abcdef";
    jb_key(b, key);
    jb_put(b, "\"", 1);
    const unsigned char *run = (const unsigned char *)val; /* bytes copied as they are */
    for (const unsigned char *p = run;; p++) {
        if (*p != 0 && *p != '"' && *p != '\\' && *p >= 0x20)
            continue;
        jb_put(b, (const char *)run, (size_t)(p - run)); /* one copy per plain run */
        if (*p == 0)
            break;
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            jb_put(b, e, 2);
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
            jb_put(b, e, 6);
        }
        run = p + 1;
    }
    jb_put(b, "\"", 1);
}

void jbuf_num(jbuf *b, const char *key, double v)
{
    char t[JSON_NUM_MAX];
    int n = json_num_format(v, t); /* null when not finite */
    jb_key(b, key);
    jb_put(b, t, (size_t)n);
}

void jbuf_int(jbuf *b, const char *key, long long v)
{
    char t[24];
    int n = snprintf(t, sizeof t, "%lld", v);
    jb_key(b, key);
    jb_put(b, t, (size_t)n);
}

void jbuf_bool(jbuf *b, const char *key, int v)
{
    jb_key(b, key);
    if (v)
        jb_put(b, "true", 4);
    else
        jb_put(b, "false", 5);
}

char *jbuf_finish(jbuf *b, size_t *len)
{
    jb_put(b, "}", 1);
    if (b->oom) {
        free(b->p);
        b->p = NULL;
        return NULL;
    }
    *len = b->len;
    return b->p;
}
