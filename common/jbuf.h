/* jbuf.h -- a small JSON object writer for the lookup path: one buffer, no
 * allocation per field (jansson builds a tree first). Keys are literals;
 * string values are escaped; non-finite numbers become null; doubles print
 * with 17 significant digits, as jansson does. The answer of GET /v1/tactic
 * (lookup/answer_json.c) is written with it, by attuned and in process. */
#ifndef ATTUNE_JBUF_H
#define ATTUNE_JBUF_H

#include <stddef.h>

typedef struct jbuf {
    char *p;
    size_t len, cap;
    int oom;
} jbuf;

/* Start "{" in a malloc'd buffer of cap bytes (grows as needed). */
void jbuf_init(jbuf *b, size_t cap);
void jbuf_str(jbuf *b, const char *key, const char *val);
void jbuf_num(jbuf *b, const char *key, double v);
void jbuf_int(jbuf *b, const char *key, long long v);
void jbuf_bool(jbuf *b, const char *key, int v);
/* Close the object: the text (malloc'd, caller owns) and its length, or
 * NULL on ENOMEM (the buffer is freed). */
char *jbuf_finish(jbuf *b, size_t *len);

#endif
