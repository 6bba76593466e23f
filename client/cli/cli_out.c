/* cli_out.c -- tables fitted to the terminal, CSV (see cli_out.h). */
#include "cli_out.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli_opts.h"
#include "common/attune_err.h"

#define SEP 2          /* spaces between two columns */
#define MIN_SHRUNK 12  /* a shrinkable column is never cut below this */

struct cli_table {
    const cli_col *cols;
    int ncols;
    char **cells; /* rows * ncols, row-major */
    int rows, cap;
};

int cli_format_pick(const char *cmd, int json, int csv, cli_format *fmt)
{
    if (json && csv)
        return cli_usage_error(cmd, "--json and --csv are exclusive");
    *fmt = json ? CLI_JSON : csv ? CLI_CSV : CLI_TEXT;
    return 0;
}

int cli_term_width(void)
{
    const char *env = getenv("COLUMNS");
    long long v;
    if (env != NULL && cli_llong(env, &v) == 0 && v >= 20 && v <= 100000)
        return (int)v;
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 0;
}

cli_table *cli_table_new(const cli_col *cols, int ncols)
{
    cli_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->cols = cols;
    t->ncols = ncols;
    return t;
}

int cli_table_add(cli_table *t, const char *const *cells)
{
    if (t->rows == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        char **c = realloc(t->cells, (size_t)cap * (size_t)t->ncols * sizeof *c);
        if (c == NULL)
            return ATTUNE_ENOMEM;
        t->cells = c;
        t->cap = cap;
    }
    char **row = t->cells + (size_t)t->rows * (size_t)t->ncols;
    for (int i = 0; i < t->ncols; i++)
        if ((row[i] = strdup(cells[i] != NULL ? cells[i] : "")) == NULL) {
            while (i-- > 0)
                free(row[i]);
            return ATTUNE_ENOMEM;
        }
    t->rows++;
    return 0;
}

int cli_table_rows(const cli_table *t)
{
    return t->rows;
}

void cli_table_free(cli_table *t)
{
    if (t == NULL)
        return;
    for (size_t i = 0; i < (size_t)t->rows * (size_t)t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(t);
}

static const char *cell(const cli_table *t, int r, int c)
{
    return t->cells[(size_t)r * (size_t)t->ncols + (size_t)c];
}

/* Characters of UTF-8 text s (continuation bytes not counted): its width
 * on a terminal, near enough for names and notes. */
static int u8len(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Bytes of s that hold its first k characters. */
static size_t u8bytes(const char *s, int k)
{
    size_t i = 0;
    for (int n = 0; s[i]; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80 && n++ == k)
            break;
    }
    return i;
}

/* Cut the shrinkable columns until the line fits width or they are down
 * to floor characters; returns the line's width. */
static int shrink(const cli_table *t, int width, int floor, const int *shown, int *w, int total)
{
    for (int c = 0; total > width && c < t->ncols; c++)
        if (shown[c] > 0 && t->cols[c].shrink && w[c] > floor) {
            int cut = total - width < w[c] - floor ? total - width : w[c] - floor;
            w[c] -= cut;
            total -= cut;
        }
    return total;
}

/* Which columns show (shown[c] 1; 0 left out to fit; -1 empty, left out
 * and not named) and how wide, for width (0: no limit): the natural widths
 * (an empty column left out); then the shrinkable column cut to SOFT characters, droppable
 * columns left out (highest drop first), the shrinkable one cut to
 * MIN_SHRUNK and at last left out too, each step only while the line is
 * too wide. */
#define SOFT 24
static void layout(const cli_table *t, int width, int *shown, int *w)
{
    int total = -SEP;
    for (int c = 0; c < t->ncols; c++) {
        int any = 0;
        w[c] = u8len(t->cols[c].name);
        for (int r = 0; r < t->rows; r++) {
            int n = u8len(cell(t, r, c));
            any |= n > 0;
            if (n > w[c])
                w[c] = n;
        }
        /* a column with nothing in it says nothing: out, and not named */
        shown[c] = any || t->rows == 0 ? 1 : -1;
        if (shown[c] > 0)
            total += w[c] + SEP;
    }
    if (width <= 0)
        return;
    total = shrink(t, width, SOFT, shown, w, total);
    while (total > width) {
        int worst = -1;
        for (int c = 0; c < t->ncols; c++)
            if (shown[c] > 0 && t->cols[c].drop > 0 &&
                (worst < 0 || t->cols[c].drop > t->cols[worst].drop))
                worst = c;
        if (worst < 0)
            break;
        shown[worst] = 0;
        total -= w[worst] + SEP;
    }
    total = shrink(t, width, MIN_SHRUNK, shown, w, total);
    for (int c = 0; total > width && c < t->ncols; c++)
        if (shown[c] > 0 && t->cols[c].shrink) {
            shown[c] = 0;
            total -= w[c] + SEP;
        }
}

/* A line being built: text without its trailing spaces when written. */
typedef struct line {
    char *p;
    size_t len, cap;
} line;

static void add(line *l, const char *s, size_t n)
{
    if (l->len + n + 1 > l->cap) {
        size_t cap = l->cap ? l->cap : 256;
        while (cap < l->len + n + 1)
            cap *= 2;
        char *p = realloc(l->p, cap);
        if (p == NULL)
            return; /* out of memory: the line comes out short */
        l->p = p;
        l->cap = cap;
    }
    memcpy(l->p + l->len, s, n);
    l->len += n;
    l->p[l->len] = 0;
}

static void spaces(line *l, int n)
{
    for (; n > 0; n--)
        add(l, " ", 1);
}

/* One cell, cut to w characters ("..." at the end) or padded. */
static void put_cell(line *l, const char *s, int w, int right)
{
    int n = u8len(s);
    if (n > w) {
        int keep = w > 3 ? w - 3 : 0;
        add(l, s, u8bytes(s, keep));
        add(l, "...", (size_t)(w - keep < 3 ? w - keep : 3));
        return;
    }
    if (right)
        spaces(l, w - n);
    add(l, s, strlen(s));
    if (!right)
        spaces(l, w - n);
}

static void put_row(const cli_table *t, FILE *f, int r, const int *shown, const int *w,
                    line *l)
{
    l->len = 0;
    for (int c = 0, first = 1; c < t->ncols; c++) {
        if (shown[c] <= 0)
            continue;
        if (!first)
            spaces(l, SEP);
        first = 0;
        put_cell(l, r < 0 ? t->cols[c].name : cell(t, r, c), w[c], t->cols[c].right);
    }
    while (l->len > 0 && l->p[l->len - 1] == ' ')
        l->len--;
    if (l->len > 0)
        fwrite(l->p, 1, l->len, f);
    fputc('\n', f);
}

/* The columns left out, as a note wrapped at width. */
static void put_left_out(const cli_table *t, FILE *f, int width, const int *shown, line *l)
{
    char head[64];
    snprintf(head, sizeof head, "(not shown at %d columns:", width);
    l->len = 0;
    add(l, head, strlen(head));
    int k = 0;
    for (int c = 0; c <= t->ncols; c++) {
        const char *word = c < t->ncols ? (shown[c] != 0 ? NULL : t->cols[c].name)
                                        : "--csv and --json show all)";
        if (word == NULL)
            continue;
        char piece[96];
        snprintf(piece, sizeof piece, "%s%s", word,
                 c < t->ncols ? "," : "");
        if (c == t->ncols && k > 0 && l->len > 0 && l->p[l->len - 1] == ',')
            l->p[l->len - 1] = ';';
        int n = u8len(piece);
        if ((int)l->len + 1 + n > width && l->len > 0) {
            fwrite(l->p, 1, l->len, f);
            fputc('\n', f);
            l->len = 0;
            add(l, " ", 1);
        } else {
            add(l, " ", 1);
        }
        add(l, piece, strlen(piece));
        k++;
    }
    fwrite(l->p, 1, l->len, f);
    fputc('\n', f);
}

/* A CSV field: quoted when it holds a comma, a quote, a line break or
 * edge spaces, its quotes doubled. */
static void put_csv(FILE *f, const char *s)
{
    size_t n = strlen(s);
    if (strpbrk(s, ",\"\r\n") == NULL && (n == 0 || (s[0] != ' ' && s[n - 1] != ' '))) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void cli_table_print(const cli_table *t, cli_format fmt, int width, FILE *f)
{
    if (fmt == CLI_CSV) {
        for (int r = -1; r < t->rows; r++)
            for (int c = 0; c < t->ncols; c++) {
                put_csv(f, r < 0 ? t->cols[c].name : cell(t, r, c));
                fputs(c + 1 < t->ncols ? "," : "\n", f);
            }
        return;
    }
    if (fmt != CLI_TEXT)
        return;
    int *shown = malloc(2 * (size_t)(t->ncols > 0 ? t->ncols : 1) * sizeof *shown);
    line l = {0};
    if (shown == NULL)
        return;
    int *w = shown + t->ncols;
    layout(t, width, shown, w);
    for (int r = -1; r < t->rows; r++)
        put_row(t, f, r, shown, w, &l);
    int left = 0;
    for (int c = 0; c < t->ncols; c++)
        left += shown[c] == 0;
    if (left > 0)
        put_left_out(t, f, width, shown, &l);
    free(l.p);
    free(shown);
}
