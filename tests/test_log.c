/* test_log.c -- the daemon's log lines (daemon/log.c): log_quote, the one
 * function outside text goes through (quotes, backslashes, newlines and
 * every control byte escaped, a reader recovers the text exactly, a cut
 * value still closes its quotes), and whole lines written by log_event
 * with such values: one line each, every key=value field parsed back.
 * tests/it_log_escape.py drives the daemon's own call sites. */
#include <unistd.h>

#include "daemon/log.h"
#include "test.h"

/* Undo log_quote: q must be `"..."` of printable ASCII whose only escapes
 * are \" \\ \n \r \t \xHH. Writes the text (NUL-terminated; *n its length,
 * NULs included) and returns 0, or -1 when q is not of that form. */
static int unquote(const char *q, char *out, size_t *n)
{
    size_t len = strlen(q), o = 0;
    if (len < 2 || q[0] != '"' || q[len - 1] != '"')
        return -1;
    for (size_t i = 1; i + 1 < len; i++) {
        unsigned char c = (unsigned char)q[i];
        if (c < 0x20 || c >= 0x7f || c == '"')
            return -1;
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        if (i + 2 >= len)
            return -1;
        char e = q[++i];
        if (e == '"' || e == '\\') {
            out[o++] = e;
        } else if (e == 'n') {
            out[o++] = '\n';
        } else if (e == 'r') {
            out[o++] = '\r';
        } else if (e == 't') {
            out[o++] = '\t';
        } else if (e == 'x' && i + 3 < len) {
            unsigned v;
            char hx[3] = {q[i + 1], q[i + 2], 0};
            if (sscanf(hx, "%2x", &v) != 1)
                return -1;
            out[o++] = (char)v;
            i += 2;
        } else {
            return -1;
        }
    }
    out[o] = 0;
    *n = o;
    return 0;
}

static void quote_should_escape_quotes_newlines_and_control_bytes(void)
{
    char b[128];
    CHECK_STR(log_quote("plain text", b, sizeof b), "\"plain text\"");
    CHECK_STR(log_quote("a\"b\\c", b, sizeof b), "\"a\\\"b\\\\c\"");
    CHECK_STR(log_quote("l1\nl2\r\tx", b, sizeof b), "\"l1\\nl2\\r\\tx\"");
    CHECK_STR(log_quote("\x01\x1b[31m\x7f", b, sizeof b), "\"\\x01\\x1b[31m\\x7f\"");
    CHECK_STR(log_quote("caf\xc3\xa9", b, sizeof b), "\"caf\\xc3\\xa9\"");
    /* libpq's messages end with a newline: dropped, as trailing blanks */
    CHECK_STR(log_quote("could not connect: \"h\" refused\n", b, sizeof b),
              "\"could not connect: \\\"h\\\" refused\"");
    CHECK_STR(log_quote(" \n", b, sizeof b), "\"\"");
    CHECK_STR(log_quote("", b, sizeof b), "\"\"");
    CHECK_STR(log_quote(NULL, b, sizeof b), "\"-\"");
    /* a value that forges a field when its quotes are not escaped */
    CHECK_STR(log_quote("x\" status=200 forged=\"1", b, sizeof b),
              "\"x\\\" status=200 forged=\\\"1\"");
}

static void quote_should_cut_at_a_whole_escape_and_close(void)
{
    char b[16];
    /* 15 bytes of room: `"` + 10 + `..."` + NUL */
    CHECK_STR(log_quote("0123456789abcdef", b, sizeof b), "\"0123456789...\"");
    /* exactly fits: no cut */
    CHECK_STR(log_quote("0123456789abc", b, sizeof b), "\"0123456789abc\"");
    /* an escape never split: \x01 does not fit after 8 bytes */
    CHECK_STR(log_quote("01234567\x01\x01zz", b, sizeof b), "\"01234567...\"");
    CHECK_STR(log_quote("\"\"\"\"\"\"\"\"", b, sizeof b), "\"\\\"\\\"\\\"\\\"\\\"...\"");
    char small[8];
    CHECK_STR(log_quote("abcdefgh", small, sizeof small), "\"ab...\"");
    /* every length of a long input keeps the quotes and the size */
    for (size_t len = 8; len < 40; len++) {
        char v[64];
        log_quote("\"\n\\x\x02 0123456789\"\n\\x\x02 0123456789", v, len);
        size_t n = strlen(v);
        CHECK_MSG(n < len && v[0] == '"' && v[n - 1] == '"' && (n < 2 || v[n - 2] != '\\'),
                  "len %zu: %s", len, v);
    }
}

static void quote_should_round_trip_random_bytes(void)
{
    unsigned seed = 12345;
    char in[300], q[LOG_QUOTE_MAX * 4], back[400];
    for (int t = 0; t < 2000; t++) {
        size_t n = (size_t)(t % 150);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            in[i] = (char)(1 + (seed >> 16) % 255); /* no NUL: C strings */
        }
        in[n] = 0;
        size_t end = n;
        while (end > 0 && (in[end - 1] == ' ' || in[end - 1] == '\n' || in[end - 1] == '\r' ||
                           in[end - 1] == '\t'))
            end--;
        log_quote(in, q, sizeof q);
        size_t m = 0;
        int rc = unquote(q, back, &m);
        CHECK_MSG(rc == 0, "case %d: not a quoted value: %s", t, q);
        CHECK_MSG(rc != 0 || (m == end && memcmp(back, in, end) == 0),
                  "case %d: %s does not give the input back", t, q);
    }
}

/* A line's fields: `<time> key=value key="quoted" ...`; each value bare
 * (no space, quote or backslash) or quoted. Returns the count of fields,
 * -1 when the line is not of that form; keys[] gets the keys. */
static int parse_line(const char *line, char keys[][32], char vals[][LOG_QUOTE_MAX], int max)
{
    const char *p = strchr(line, ' ');
    int n = 0;
    if (p == NULL)
        return -1;
    while (*p == ' ') {
        p++;
        const char *eq = strchr(p, '=');
        if (eq == NULL || eq == p || (size_t)(eq - p) >= 32 || n >= max)
            return -1;
        for (const char *k = p; k < eq; k++)
            if (*k == ' ' || *k == '"')
                return -1;
        memcpy(keys[n], p, (size_t)(eq - p));
        keys[n][eq - p] = 0;
        p = eq + 1;
        const char *v = p;
        if (*p == '"') {
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (*p != '"')
                return -1;
            p++;
        } else {
            while (*p && *p != ' ' && *p != '\n') {
                if (*p == '"' || *p == '\\')
                    return -1;
                p++;
            }
        }
        size_t vl = (size_t)(p - v);
        if (vl >= LOG_QUOTE_MAX)
            return -1;
        memcpy(vals[n], v, vl);
        vals[n][vl] = 0;
        n++;
    }
    return *p == '\n' && p[1] == 0 ? n : -1;
}

static void event_should_keep_outside_text_in_its_field(void)
{
    char path[] = "/tmp/attune-test-log-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    close(fd);
    CHECK_EQ_INT(log_open(path), 0);
    const char *evil[] = {
        "could not translate host name \"db\"\nx\" to address: Name or service not known\n",
        "a\\\" forged=\"1", "\x01\x02\x1b[2J\x7f", "tab\there", "\"", "\\", "",
    };
    int nevil = (int)(sizeof evil / sizeof evil[0]);
    for (int i = 0; i < nevil; i++)
        log_event(LOGL_WARN, "fleet_unreachable", "error=%s n=%d path=%s", LOG_Q(evil[i]), i,
                  LOG_Q(evil[nevil - 1 - i]));
    log_close();
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    char line[4096];
    int lines = 0;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char keys[8][32], vals[8][LOG_QUOTE_MAX];
        int nf = parse_line(line, keys, vals, 8);
        CHECK_MSG(nf == 5, "line %d: %d fields: %s", lines, nf, line);
        if (nf == 5) {
            CHECK_STR(keys[0], "level");
            CHECK_STR(keys[2], "error");
            CHECK_STR(keys[3], "n");
            CHECK_STR(keys[4], "path");
            char back[LOG_QUOTE_MAX];
            size_t m;
            int i = atoi(vals[3]);
            CHECK(i == lines);
            char want[LOG_QUOTE_MAX];
            snprintf(want, sizeof want, "%s", evil[i]);
            size_t wl = strlen(want);
            while (wl > 0 && (want[wl - 1] == '\n' || want[wl - 1] == ' '))
                want[--wl] = 0;
            CHECK(unquote(vals[2], back, &m) == 0 && strcmp(back, want) == 0);
        }
        lines++;
    }
    CHECK_EQ_INT(lines, nevil);
    if (f != NULL)
        fclose(f);
    unlink(path);
}

int main(void)
{
    RUN(quote_should_escape_quotes_newlines_and_control_bytes);
    RUN(quote_should_cut_at_a_whole_escape_and_close);
    RUN(quote_should_round_trip_random_bytes);
    RUN(event_should_keep_outside_text_in_its_field);
    return test_summary();
}
