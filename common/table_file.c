/* table_file.c -- read a fleet table file whole, gzip-compressed or not. */
#include "table_file.h"

#include "attune_err.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* The raw bytes of f, at most max (+1 to tell "more" apart), into *buf. */
static int read_raw(FILE *f, const char *path, size_t max, char **buf, size_t *len, char *err,
                    size_t errlen)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    for (;;) {
        if (b == NULL)
            return attune_fail(err, errlen, ATTUNE_ENOMEM, "%s: out of memory", path);
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (n > max) {
            free(b);
            return attune_fail(err, errlen, ATTUNE_ETOOBIG, "%s is larger than %zu bytes", path,
                               max);
        }
        if (got == 0)
            break;
        if (n == cap) {
            cap *= 2;
            char *g = realloc(b, cap + 1);
            if (g == NULL)
                free(b);
            b = g;
        }
    }
    if (ferror(f)) {
        free(b);
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot read %s: %s", path, strerror(errno));
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Inflate the gzip stream in[0..n) into *out, at most max bytes. */
static int inflate_all(const char *path, const unsigned char *in, size_t n, size_t max,
                       char **out, size_t *len, char *err, size_t errlen)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 16) != Z_OK) /* gzip wrapper only */
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "%s: zlib init failed", path);
    size_t cap = n * 8 + 1024, got = 0;
    char *b = malloc(cap + 1);
    int zrc = Z_OK, rc = 0;
    z.next_in = (unsigned char *)in;
    while (rc == 0 && zrc != Z_STREAM_END) {
        if (b == NULL) {
            rc = attune_fail(err, errlen, ATTUNE_ENOMEM, "%s: out of memory", path);
            break;
        }
        if (got == cap) {
            if (cap > max) {
                rc = attune_fail(err, errlen, ATTUNE_ETOOBIG,
                                 "%s is larger than %zu bytes inflated", path, max);
                break;
            }
            cap *= 2;
            char *g = realloc(b, cap + 1);
            if (g == NULL)
                free(b);
            b = g;
            continue;
        }
        /* avail_in is a uInt: feed at most 1 GiB a round */
        size_t left = n - (size_t)(z.next_in - in);
        z.avail_in = (uInt)(left < (1u << 30) ? left : (1u << 30));
        z.next_out = (unsigned char *)b + got;
        z.avail_out = (uInt)(cap - got < (1u << 30) ? cap - got : (1u << 30));
        size_t before = z.avail_out;
        zrc = inflate(&z, Z_NO_FLUSH);
        got += before - z.avail_out;
        if (zrc == Z_STREAM_END)
            break;
        if (zrc != Z_OK && zrc != Z_BUF_ERROR)
            rc = attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: corrupt gzip data (%s)", path,
                             z.msg ? z.msg : "zlib error");
        else if (zrc == Z_BUF_ERROR && z.avail_in == 0 && left == 0)
            rc = attune_fail(err, errlen, ATTUNE_EFORMAT, "%s: truncated gzip data", path);
    }
    inflateEnd(&z);
    if (rc == 0 && got > max)
        rc = attune_fail(err, errlen, ATTUNE_ETOOBIG, "%s is larger than %zu bytes inflated",
                         path, max);
    if (rc != 0) {
        free(b);
        return rc;
    }
    b[got] = 0;
    *out = b;
    *len = got;
    return 0;
}

int table_file_read(const char *path, size_t max, char **buf, size_t *len, char *err,
                    size_t errlen)
{
    int in_stdin = strcmp(path, "-") == 0;
    FILE *f = in_stdin ? stdin : fopen(path, "rb");
    if (f == NULL)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot read %s: %s", path, strerror(errno));
    char *raw = NULL;
    size_t n = 0;
    /* a compressed table is at most max bytes too: JSON inflates 5-10x */
    int rc = read_raw(f, path, max, &raw, &n, err, errlen);
    if (!in_stdin)
        fclose(f);
    if (rc != 0)
        return rc;
    if (n < 2 || (unsigned char)raw[0] != 0x1f || (unsigned char)raw[1] != 0x8b) {
        raw[n] = 0;
        *buf = raw;
        *len = n;
        return 0;
    }
    rc = inflate_all(path, (const unsigned char *)raw, n, max, buf, len, err, errlen);
    free(raw);
    return rc;
}
