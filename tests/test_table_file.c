/* test_table_file.c -- common/table_file.c: plain and gzip-compressed
 * tables read alike; corrupt, truncated and oversized input refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/attune_err.h"
#include "common/table_file.h"
#include "test.h"

static const char text[] = "{\"format\": \"attune-fleet\", \"measurements\": []}\n";

/* data[0..n) into dir/name; the path into path. */
static void put(const char *dir, const char *name, const void *data, size_t n, char *path,
                size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (f == NULL)
        return;
    CHECK(fwrite(data, 1, n, f) == n);
    fclose(f);
}

/* text, gzip-compressed (a gzip wrapper: windowBits 15 + 16), into buf;
 * its length. */
static size_t gz(const char *in, size_t n, unsigned char *buf, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    CHECK(deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)n;
    z.next_out = buf;
    z.avail_out = (uInt)cap;
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    size_t out = cap - z.avail_out;
    deflateEnd(&z);
    return out;
}

static void plain_and_gzip_should_read_alike(void)
{
    char dir[256], p[512], q[512], err[ATTUNE_ERRLEN] = "";
    test_tmpdir(dir, sizeof dir);
    unsigned char z[512];
    size_t zn = gz(text, strlen(text), z, sizeof z);
    put(dir, "t.json", text, strlen(text), p, sizeof p);
    put(dir, "t.json.gz", z, zn, q, sizeof q);
    char *a = NULL, *b = NULL;
    size_t an = 0, bn = 0;
    CHECK_EQ_INT(table_file_read(p, 1 << 20, &a, &an, err, sizeof err), 0);
    CHECK_EQ_INT(table_file_read(q, 1 << 20, &b, &bn, err, sizeof err), 0);
    CHECK(an == strlen(text) && bn == an);
    if (a && b) {
        CHECK_STR(a, text);
        CHECK_STR(b, text);
    }
    free(a);
    free(b);
}

static void bad_gzip_and_size_should_be_refused(void)
{
    char dir[256], p[512], err[ATTUNE_ERRLEN] = "";
    test_tmpdir(dir, sizeof dir);
    unsigned char z[512];
    size_t zn = gz(text, strlen(text), z, sizeof z);
    char *b = NULL;
    size_t bn = 0;
    /* cut before its end: truncated */
    put(dir, "cut.gz", z, zn / 2, p, sizeof p);
    CHECK_EQ_INT(table_file_read(p, 1 << 20, &b, &bn, err, sizeof err), ATTUNE_EFORMAT);
    CHECK_MSG(strstr(err, "truncated") != NULL || strstr(err, "corrupt") != NULL, "%s", err);
    /* a byte of its deflate data flipped: corrupt (or a CRC mismatch) */
    z[12] ^= 0xff;
    put(dir, "bad.gz", z, zn, p, sizeof p);
    CHECK_EQ_INT(table_file_read(p, 1 << 20, &b, &bn, err, sizeof err), ATTUNE_EFORMAT);
    z[12] ^= 0xff;
    /* over max: raw, and once inflated */
    put(dir, "big.json", text, strlen(text), p, sizeof p);
    CHECK_EQ_INT(table_file_read(p, 10, &b, &bn, err, sizeof err), ATTUNE_ETOOBIG);
    char *wide = malloc(8192); /* 8 KiB of JSON that deflates to ~50 bytes */
    CHECK(wide != NULL);
    if (wide != NULL) {
        memset(wide, ' ', 8191);
        wide[0] = '{';
        wide[8190] = '}';
        wide[8191] = 0;
        unsigned char wz[512];
        size_t wn = gz(wide, 8191, wz, sizeof wz);
        put(dir, "big.json.gz", wz, wn, p, sizeof p);
        CHECK_EQ_INT(table_file_read(p, 4096, &b, &bn, err, sizeof err), ATTUNE_ETOOBIG);
        CHECK_EQ_INT(table_file_read(p, 8191, &b, &bn, err, sizeof err), 0);
        CHECK(bn == 8191);
        free(b);
        free(wide);
    }
    /* missing */
    snprintf(p, sizeof p, "%s/none.json", dir);
    CHECK_EQ_INT(table_file_read(p, 1 << 20, &b, &bn, err, sizeof err), ATTUNE_EIO);
}

int main(void)
{
    RUN(plain_and_gzip_should_read_alike);
    RUN(bad_gzip_and_size_should_be_refused);
    return test_summary();
}
