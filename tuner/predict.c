/* predict.c -- a roofline-normalised nearest-shapes model of tactic times. */
#include "predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/variant.h"
#include "predict_cost.h"

/* ---- tuning constants of the model (docs/tuning.md "Predicted answers") */

/* Measured shapes an answer leans on. */
#define K_NEIGH 8
/* Feature weights of the log-shape distance: log2(b*hkv), log2(g),
 * log2(sq), log2(skv), log2(d). The query length weighs most: it decides
 * between decode-like (bandwidth-bound, split-KV) and prefill kernels; the
 * head size picks the kernel instantiation. */
static const double feat_w[5] = {0.5, 1.0, 1.0, 0.75, 1.5};
#define DIST_DTYPE_NEAR 0.3 /* f16 <-> bf16: same tensor-core paths */
#define DIST_DTYPE_FAR 1.5  /* 16-bit <-> f32 */
#define DIST_CAUSAL 1.0
/* Split-KV rows: a measured split count matches a candidate's by the grid
 * it makes (blocks = b*hkv*ceil(g*sq/tile_m)*splits: flash-decoding splits
 * to fill the SMs, so the best count on the H200 kept the grid at ~128
 * blocks from b*hkv = 16 to 128) and, second, by keys per split; a factor
 * 2 off counts as this much farther away. */
#define DIST_SPLIT_BLOCKS 0.5
#define DIST_SPLIT_KEYS 0.25
/* Inverse squared distance, softened so an almost identical shape does not
 * take all the weight from an equally good one a hair farther. */
#define W_SOFT 0.1
/* Prior weight of a candidate's slowdown, as a share of all neighbours'
 * weight when none of them measured its family (shrink_w); of it,
 * EVIDENCE_FLOOR stays when all of them did. */
#define EVIDENCE_SHARE 0.25
#define EVIDENCE_FLOOR 0.4
/* A candidate is eligible when at least this share of the weight of the
 * neighbours that measured its family found it eligible. */
#define ELIG_SHARE 0.5

/* What a kernel costs on a shape is its own descriptor's to say
 * (kernels/variant.h describe(): rows and keys computed, head dim, grid,
 * launches, copies); the model adds the device's rates and two constants
 * of its own (predict_cost.h):
 *
 * Each wave of a tiled kernel's blocks pays a latency that no FLOP or
 * byte rate covers (blocks issued, Q tile loaded and O tile stored before
 * and after the pipelined key loop), in units of the device's launch floor
 * (lat_us, half the fastest measured time: 2.2 us on the H200, so 0.87 us
 * a wave). It is what makes a decode step of 1024 heads cost 8 waves of
 * 128-row blocks for the sm90a kernel: NLLB-200's b64.hq16.sq1.skv256
 * d=128, bytes-bound by the roofline at 34 us, took 54 (cuDNN's decode
 * engine 37), and was answered at 1.45x the winner. On every H200 table,
 * 0.37-0.46 leave every evaluation as good or better and 0.5 already
 * answers a GEMM for batch 288 of 14 frames (2.4x): the model is sensitive
 * here (docs/tuning.md). */
#define BLOCK_WAVE_LAT 0.4
/* Arithmetic and bytes of comparable time hide each other only in part
 * (predict_overlap): the cost combines them as (a^p + b^p)^(1/p). p from
 * the tables in bench/: 2 to 3 keep every test_loo table within its
 * bounds and take the fresh H100 table's worst from 1.53 to 1.32 (at 2
 * the eighth run table's worst reaches 1.245), 4 leaves it at 1.53
 * (bench/loo-model-20261206.txt). Only where the
 * device's byte rate is known: read off at least OVERLAP_MIN_SHAPES shapes
 * whose rows the roofline calls byte-bound by BYTE_BOUND_MARGIN (decode
 * steps: every grid has them); a table of prefill shapes alone gives a
 * byte rate no row was bound by, and the overlap would add its bytes to
 * every cost (test_predict's synthetic GPU then fitted a wave latency of
 * 1.0 for one of 0). */
#define OVERLAP_P 2.5
#define OVERLAP_MIN_SHAPES 2
#define BYTE_BOUND_MARGIN 2.0
/* Under a causal mask the SMs that took the last (longest) row tiles
 * finish last: a kernel that does not issue its longest blocks first
 * waits for half the longest block's extra work (the sm90a d=256 kernel
 * ran 2048 causal rows at 386 TFLOP/s per busy slot by the equal-blocks
 * waves, 556 on 968 rows without a mask). */
#define CAUSAL_TAIL 0.5
/* The launch floor: half the fastest row's time (a row is at least one
 * launch and some work); fitted per device (below). */
#define LAT_SHARE 0.5

/* ---- the model */

typedef struct pm_row {
    int fam;           /* index into pm->fams */
    attn_tactic t;     /* parsed; variant/pad only when the text did not parse */
    double lt;         /* log(select_time / cost at its pad); NAN untimed */
    double lne;        /* log(rel_err / dtype scale); NAN without an error */
    double rel_err;
    unsigned char ok;  /* usable under the policy: status ok, timed, error known */
    unsigned char ov;  /* usable under a query's own bound (inaccurate too) */
} pm_row;

typedef struct pm_shape {
    attn_shape s;
    char key[ATTN_SHAPE_KEY_MAX];
    double f[5];
    int r0, nr;        /* rows[r0..r0+nr), sorted by family, then splits */
    double best_ok;    /* select_best_err of its rows (timed or not); INFINITY if none */
    double best_lt;    /* least lt of the eligible rows; NAN if none */
    char win[ATTN_TACTIC_STR_MAX]; /* winner under the policy, "" if none */
    int timed;         /* has a row with a time */
    int stale;
} pm_shape;

struct predict_model {
    select_policy policy;
    pm_shape *shapes;
    int nshapes;
    pm_row *rows;
    int nrows;
    char (*fams)[ATTN_TACTIC_STR_MAX]; /* sorted, unique */
    int nfams;
    char (*nost)[ATTN_TACTIC_STR_MAX]; /* per family: its text without its shape_params */
    int *sib;          /* family indices by nost, then index (find_fam_or_sibling) */
    double peak_flops, peak_bytes, lat_us; /* per microsecond */
    double *fam_flops; /* per family: the FLOP/s per busy wave slot it reached */
    unsigned char *fam_dec; /* per family: measured on a single-query step
                               (ATTN_HINT_DECODE to its descriptor) */
    const attn_variant_desc **fam_desc; /* per family: its descriptor, NULL if none */
    attn_device_info dev; /* the device the rows were measured on */
    int has_dev;       /* dev is known (predict_build_dev) */
    int sms;           /* SMs of a CUDA device; 0: no wave model */
    double wave_lat;   /* a wave of blocks' latency in launch floors: fitted
                          (fit_constants) or BLOCK_WAVE_LAT */
    int wave_lat_fitted; /* 1: fitted on this device's rows */
    double overlap_p;  /* the cost's predict_overlap p: OVERLAP_P when the
                          byte rate was read off byte-bound rows, else 0 */
    FILE *trace;       /* predict_set_trace; NULL: quiet */
};

/* Scale of errors per dtype: the default bounds, so errors of shapes of
 * different dtypes compare in units of what each dtype is allowed. */
static double err_scale(attn_dtype t)
{
    return select_max_rel_err(NULL, t);
}

/* The descriptor's account of t on s (family fam, -1 if none) on the
 * model's device. */
static void describe_on(const predict_model *pm, const attn_shape *s, const attn_tactic *t,
                        int fam, attn_cost *c)
{
    unsigned hints = fam >= 0 && pm->fam_dec != NULL && pm->fam_dec[fam] ? ATTN_HINT_DECODE : 0;
    attn_describe(s, t, pm->has_dev ? &pm->dev : NULL, hints, c);
}

/* The model's rates for family fam (-1: none; its FLOP ceiling, else the
 * device's). */
static predict_rates rates_of(const predict_model *pm, int fam)
{
    predict_rates r = {fam >= 0 ? pm->fam_flops[fam] : pm->peak_flops, pm->peak_bytes,
                       pm->lat_us, pm->wave_lat, CAUSAL_TAIL, pm->sms, pm->overlap_p};
    return r;
}

/* FLOPs and bytes of s computed by t (family fam) as its kernel describes
 * itself. */
static void work_of(const predict_model *pm, const attn_shape *s, const attn_tactic *t, int fam,
                    double *flops, double *bytes)
{
    attn_cost c;
    describe_on(pm, s, t, fam, &c);
    predict_work(s, &c, flops, bytes);
}

/* Useful fraction of the waves t runs on s: 1 without a wave model. */
static double wave_eff(const predict_model *pm, const attn_shape *s, const attn_tactic *t, int fam)
{
    attn_cost c;
    describe_on(pm, s, t, fam, &c);
    /* and the share of the SMs a launch of few blocks computes on
     * (split-KV), as predict_cost_us charges it */
    return predict_wave_eff(s, &c, pm->sms, CAUSAL_TAIL) * (c.flop_share > 0 ? c.flop_share : 1.0);
}

/* Blocks of one split of tactic t (family fam) on s, as its kernel
 * describes its grid (split-KV's and the sm90a fold's: b * hkv row blocks
 * of the group's query rows). */
static double split_grid(const predict_model *pm, const attn_shape *s, const attn_tactic *t,
                         int fam)
{
    attn_cost c;
    describe_on(pm, s, t, fam, &c);
    return c.blocks / (t->splits > 1 ? t->splits : 1);
}

/* Roofline cost in microseconds of s run by t (family fam, -1 if none) on
 * the model's device (predict_cost_us): FLOPs at the rate the family
 * reached on any shape, not the device's (a split-KV decode kernel that
 * never went past a few TFLOP/s on decode shapes is not credited the
 * prefill kernels' 500 when asked for 50 queries of d = 256: it ran 9x
 * its device roofline there); bytes at the device's best rate (a prefill
 * kernel measured only on compute-bound shapes never showed its byte
 * rate). */
static double cost_of(const predict_model *pm, const attn_shape *s, const attn_tactic *t, int fam)
{
    attn_cost c;
    describe_on(pm, s, t, fam, &c);
    predict_rates r = rates_of(pm, fam);
    return predict_cost_us(s, &c, &r);
}

static void features(const attn_shape *s, double f[5])
{
    f[0] = log2((double)(s->b * s->hkv));
    f[1] = log2((double)attn_shape_group(s));
    f[2] = log2((double)s->sq);
    f[3] = log2((double)s->skv);
    f[4] = log2((double)s->d);
}

static double shape_dist(const attn_shape *a, const double fa[5], const pm_shape *b)
{
    double d = 0;
    for (int i = 0; i < 5; i++)
        d += feat_w[i] * fabs(fa[i] - b->f[i]);
    if (a->dtype != b->s.dtype)
        d += (a->dtype == ATTN_F32 || b->s.dtype == ATTN_F32) ? DIST_DTYPE_FAR : DIST_DTYPE_NEAR;
    if (a->causal != b->s.causal)
        d += DIST_CAUSAL;
    return d;
}

char *predict_family(const char *tactic, char *buf, size_t len, int *splits, int *pad)
{
    size_t n = 0;
    *splits = 0;
    *pad = 1;
    const char *p = tactic;
    while (*p != 0) {
        const char *seg = p;
        const char *end = strchr(p + 1, '/');
        if (end == NULL)
            end = p + strlen(p);
        size_t sl = (size_t)(end - seg);
        if (strncmp(seg, "/splits=", 8) == 0) {
            *splits = atoi(seg + 8);
        } else {
            if (strncmp(seg, "/pad=", 5) == 0)
                *pad = atoi(seg + 5);
            if (n + sl < len) {
                memcpy(buf + n, seg, sl);
                n += sl;
            }
        }
        p = end;
    }
    if (len > 0)
        buf[n < len ? n : len - 1] = 0;
    if (*pad < 1)
        *pad = 1;
    return buf;
}

/* A row's tactic, parsed; a text this build does not parse (another
 * build's table) keeps its variant, when known, and its pad: its
 * descriptor, or the plain description, costs it. An unknown variant word
 * gets an id no family has (ATTN_MAX_VARIANTS), so the plain description
 * costs it (as fused, the CPU's fused descriptor did, on any device). */
static attn_tactic row_tactic(const char *text)
{
    attn_tactic t;
    if (attn_tactic_parse(text, &t, NULL, 0) == 0)
        return t;
    memset(&t, 0, sizeof t);
    char fam[ATTN_TACTIC_STR_MAX], word[ATTN_TACTIC_STR_MAX];
    predict_family(text, fam, sizeof fam, &t.splits, &t.pad);
    snprintf(word, sizeof word, "%.*s", (int)strcspn(text, "/"), text);
    if (attn_variant_parse(word, &t.variant) != 0)
        t.variant = (attn_variant)ATTN_MAX_VARIANTS;
    return t;
}

/* ---- building */

typedef struct keyed {
    char key[ATTN_SHAPE_KEY_MAX];
    int i;
} keyed;

/* qsort has no context argument: the rows being sorted, per thread */
static _Thread_local const store_measurement *const *sort_rows_;
#define M(i) (*m[(i)])

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c != 0)
        return c;
    c = strcmp(sort_rows_[x->i]->stack_id, sort_rows_[y->i]->stack_id);
    return c != 0 ? c : (x->i > y->i) - (x->i < y->i);
}

static int row_timed(const store_measurement *m)
{
    return isfinite(select_time(m)) && select_time(m) > 0;
}

static int row_usable(const store_measurement *m, int override)
{
    int st = m->status == STORE_OK || (override && m->status == STORE_INACCURATE);
    return st && row_timed(m) && isfinite(m->rel_err) && m->rel_err >= 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

static int find_fam(const predict_model *pm, const char *fam)
{
    int lo = 0, hi = pm->nfams - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(pm->fams[mid], fam);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* fam without the parameters its family's descriptor says the backend
 * sets from the shape (attn_variant_desc.shape_params), into buf; returns
 * 1 when any was dropped, 0 (buf = fam) when none, or fam is not a tactic
 * this build parses. */
static int drop_shape_params(const char *fam, char *buf, size_t len)
{
    snprintf(buf, len, "%s", fam);
    attn_tactic t;
    if (attn_tactic_parse(fam, &t, NULL, 0) != 0)
        return 0;
    const attn_variant_desc *d = attn_family_of(&t, NULL);
    if (d == NULL || d->shape_params == NULL)
        return 0;
    int dropped = 0;
    for (const char *k = d->shape_params; *k != 0;) {
        size_t kl = strcspn(k, " ");
        char seg[32];
        if (kl > 0 && kl + 3 < sizeof seg) {
            snprintf(seg, sizeof seg, "/%.*s=", (int)kl, k);
            char *p = strstr(buf, seg);
            if (p != NULL) {
                char *e = strchr(p + 1, '/');
                if (e != NULL)
                    memmove(p, e, strlen(e) + 1);
                else
                    *p = 0;
                dropped = 1;
            }
        }
        k += kl;
        k += strspn(k, " ");
    }
    return dropped;
}

/* The family of candidate text fam, or, when no row measured it, a
 * sibling that differs only in parameters the backend sets from the
 * shape (the descriptor's shape_params): a tactic new at one shape is the
 * same kernel as its sibling measured at another. (The sm90a kernel's
 * stages follow the head dim; the grid measured its fold only at d = 128
 * and 256, and without the sibling gpt-oss-120b's 4-token step at d = 64,
 * b1.hq64.hkv8.sq4.skv16384, could not be answered with the fold that won
 * it and got split-KV at 1.33x.) Only as a fallback: merging siblings
 * always lets the d = 128 rows outvote d = 64's own (default-grid LOO
 * 1.42-1.45). -1 if neither. */
static int find_fam_or_sibling(const predict_model *pm, const char *fam)
{
    int f = find_fam(pm, fam);
    char want[ATTN_TACTIC_STR_MAX];
    if (f >= 0 || !drop_shape_params(fam, want, sizeof want))
        return f;
    int lo = 0, hi = pm->nfams; /* the first of pm->sib whose text is >= want */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (strcmp(pm->nost[pm->sib[mid]], want) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < pm->nfams && strcmp(pm->nost[pm->sib[lo]], want) == 0 ? pm->sib[lo] : -1;
}

static int cmp_row(const void *a, const void *b)
{
    const pm_row *x = a, *y = b;
    if (x->fam != y->fam)
        return x->fam < y->fam ? -1 : 1;
    return (x->t.splits > y->t.splits) - (x->t.splits < y->t.splits);
}

void predict_free(predict_model *pm)
{
    if (pm == NULL)
        return;
    free(pm->shapes);
    free(pm->rows);
    free(pm->fams);
    free(pm->nost);
    free(pm->sib);
    free(pm->fam_flops);
    free(pm->fam_dec);
    free(pm->fam_desc);
    free(pm);
}

void predict_set_trace(predict_model *pm, FILE *f)
{
    if (pm != NULL)
        pm->trace = f;
}

int predict_nshapes(const predict_model *pm)
{
    return pm ? pm->nshapes : 0;
}

double predict_wave_lat(const predict_model *pm, int *fitted)
{
    if (fitted != NULL)
        *fitted = pm != NULL && pm->wave_lat_fitted;
    return pm != NULL ? pm->wave_lat : BLOCK_WAVE_LAT;
}

double predict_overlap_p(const predict_model *pm)
{
    return pm != NULL ? pm->overlap_p : 0;
}

predict_model *predict_build(const store_measurement *rows, int n, const char *cur_stack,
                             const select_policy *p)
{
    return predict_build_on(rows, n, cur_stack, p, NULL);
}

predict_model *predict_build_on(const store_measurement *rows, int n, const char *cur_stack,
                                const select_policy *p, const attn_device_info *dev)
{
    const store_measurement **rp = malloc((size_t)(n > 0 ? n : 1) * sizeof *rp);
    if (rp == NULL)
        return NULL;
    for (int i = 0; i < n; i++)
        rp[i] = &rows[i];
    predict_model *pm = predict_build_dev(rp, n, cur_stack, p, dev);
    free(rp);
    return pm;
}

predict_model *predict_build_parts(const store_measurement *const *m, int n,
                                   const char *cur_stack, const select_policy *p)
{
    return predict_build_dev(m, n, cur_stack, p, NULL);
}

/* Of one shape's rows kr[lo..hi) (sorted by stack), the stack the model
 * keeps: one with a usable row first, then cur_stack, then the newest. */
static void choose_stack(const store_measurement *const *m, const keyed *kr, int lo, int hi,
                         const char *cur_stack, int *best_lo, int *best_hi)
{
    int best_usable = 0;
    int64_t best_at = INT64_MIN;
    *best_lo = *best_hi = -1;
    for (int a = lo; a < hi;) {
        int b = a + 1;
        const char *st = M(kr[a].i).stack_id;
        while (b < hi && strcmp(M(kr[b].i).stack_id, st) == 0)
            b++;
        int usable = 0;
        int64_t newest = INT64_MIN;
        for (int k = a; k < b; k++) {
            usable |= row_usable(&M(kr[k].i), 1);
            if (M(kr[k].i).taken_at > newest)
                newest = M(kr[k].i).taken_at;
        }
        int better;
        if (*best_lo < 0)
            better = 1;
        else if (usable != best_usable)
            better = usable;
        else if (strcmp(st, cur_stack) == 0)
            better = 1;
        else
            better = newest > best_at && strcmp(M(kr[*best_lo].i).stack_id, cur_stack) != 0;
        if (better) {
            *best_lo = a;
            *best_hi = b;
            best_usable = usable;
            best_at = newest;
        }
        a = b;
    }
}

/* The model's shapes: per shape key the rows of one stack (their source
 * indices appended to pick[0..*npick)), its features and winner. Returns
 * 0 or ATTUNE_ENOMEM. */
static int build_shapes(predict_model *pm, const store_measurement *const *m, int n,
                        const char *cur_stack, int *pick, int *npick)
{
    int rc = ATTUNE_ENOMEM, grpcap = 0;
    store_measurement *grp = NULL; /* one shape's chosen rows, for select_winner */
    keyed *kr = malloc((size_t)n * sizeof *kr);
    if (kr == NULL || (pm->shapes = calloc((size_t)n, sizeof *pm->shapes)) == NULL)
        goto out;
    for (int i = 0; i < n; i++) {
        attn_shape_key(&M(i).shape, kr[i].key, sizeof kr[i].key);
        kr[i].i = i;
    }
    sort_rows_ = m;
    qsort(kr, (size_t)n, sizeof *kr, cmp_keyed);
    sort_rows_ = NULL;
    for (int lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && strcmp(kr[hi].key, kr[lo].key) == 0;)
            hi++;
        int best_lo, best_hi;
        choose_stack(m, kr, lo, hi, cur_stack, &best_lo, &best_hi);
        pm_shape *sh = &pm->shapes[pm->nshapes++];
        sh->s = M(kr[best_lo].i).shape;
        memcpy(sh->key, kr[lo].key, sizeof sh->key);
        features(&sh->s, sh->f);
        sh->stale = strcmp(M(kr[best_lo].i).stack_id, cur_stack) != 0;
        sh->r0 = *npick;
        sh->nr = best_hi - best_lo;
        if (sh->nr > grpcap) {
            store_measurement *g = realloc(grp, (size_t)sh->nr * sizeof *g);
            if (g == NULL)
                goto out;
            grp = g;
            grpcap = sh->nr;
        }
        for (int k = best_lo; k < best_hi; k++) {
            const store_measurement *r = &M(kr[k].i);
            grp[k - best_lo] = *r;
            pick[(*npick)++] = kr[k].i;
            sh->timed |= row_timed(r);
        }
        sh->best_ok = select_best_err(grp, sh->nr, 0); /* select_winner's base */
        int w = select_winner(grp, sh->nr, &pm->policy, 0);
        if (w >= 0)
            snprintf(sh->win, sizeof sh->win, "%s", grp[w].tactic);
    }
    pm_shape *fit = realloc(pm->shapes, (size_t)(pm->nshapes > 0 ? pm->nshapes : 1) * sizeof *fit);
    if (fit != NULL)
        pm->shapes = fit; /* allocated for one shape per row: give the rest back */
    rc = 0;
out:
    free(kr);
    free(grp);
    return rc;
}

static _Thread_local const char (*sort_nost_)[ATTN_TACTIC_STR_MAX];

/* Family indices by their stage-less text, then by index (so a lookup
 * finds the first family in sorted order that matches). */
static int cmp_nost(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(sort_nost_[x], sort_nost_[y]);
    return c != 0 ? c : (x > y) - (x < y);
}

/* The sorted, unique families of the picked rows, and their stage-less
 * index. 0 or ATTUNE_ENOMEM. */
static int build_families(predict_model *pm, const store_measurement *const *m, const int *pick,
                          int npick)
{
    if ((pm->fams = malloc((size_t)(npick > 0 ? npick : 1) * sizeof *pm->fams)) == NULL)
        return ATTUNE_ENOMEM;
    for (int k = 0; k < npick; k++) {
        int sp, pad;
        predict_family(M(pick[k]).tactic, pm->fams[k], sizeof pm->fams[k], &sp, &pad);
    }
    qsort(pm->fams, (size_t)npick, sizeof *pm->fams, cmp_str);
    for (int k = 0; k < npick; k++)
        if (pm->nfams == 0 || strcmp(pm->fams[pm->nfams - 1], pm->fams[k]) != 0)
            memmove(pm->fams[pm->nfams++], pm->fams[k], sizeof pm->fams[k]);
    /* the index without shape parameters, built once here: answers look families up in
     * it (find_fam_or_sibling) without a pass over every family */
    size_t nf = (size_t)(pm->nfams > 0 ? pm->nfams : 1);
    if ((pm->nost = malloc(nf * sizeof *pm->nost)) == NULL ||
        (pm->sib = malloc(nf * sizeof *pm->sib)) == NULL)
        return ATTUNE_ENOMEM;
    for (int k = 0; k < pm->nfams; k++) {
        drop_shape_params(pm->fams[k], pm->nost[k], sizeof pm->nost[k]);
        pm->sib[k] = k;
    }
    sort_nost_ = pm->nost;
    qsort(pm->sib, (size_t)pm->nfams, sizeof *pm->sib, cmp_nost);
    return 0;
}

/* Each picked row's family and parsed tactic. */
static void parse_rows(predict_model *pm, const store_measurement *const *m, const int *pick)
{
    for (int k = 0; k < pm->nrows; k++) {
        const store_measurement *r = &M(pick[k]);
        pm_row *row = &pm->rows[k];
        char fam[ATTN_TACTIC_STR_MAX];
        int sp, pad;
        row->fam = find_fam(pm, predict_family(r->tactic, fam, sizeof fam, &sp, &pad));
        row->t = row_tactic(r->tactic);
        if (row->fam >= 0 && r->shape.sq == 1)
            pm->fam_dec[row->fam] = 1;
        if (row->fam >= 0 && pm->fam_desc[row->fam] == NULL)
            pm->fam_desc[row->fam] =
                attn_family_of(&row->t, pm->has_dev ? pm->dev.kind : NULL);
    }
}

/* The roofline: the best rates any ok row reached on the device (as run);
 * per family the best FLOP rate per busy wave slot any of its rows reached
 * (its FLOP/s over its wave efficiency: a family measured only where a
 * shape left most slots idle is not judged by that), at most the
 * device's; the launch floor: half the fastest row. A family without an
 * ok row gets the device's. 0 or ATTUNE_ENOMEM. */
/* 1 when families a and b differ at most in their pad. */
static int same_kernel(const char *a, const char *b)
{
    for (;;) {
        if (strncmp(a, "/pad=", 5) == 0)
            a += 5 + strcspn(a + 5, "/");
        if (strncmp(b, "/pad=", 5) == 0)
            b += 5 + strcspn(b + 5, "/");
        if (*a != *b)
            return 0;
        if (*a == 0)
            return 1;
        a++;
        b++;
    }
}

/* 1 when families a and b are tactics of one kernel family (one
 * descriptor's, kernels/variant.h: fused, fused/arch=sm90a, cudnn, ...). */
static int same_family(const predict_model *pm, int a, int b)
{
    const attn_variant_desc *x = pm->fam_desc[a], *y = pm->fam_desc[b];
    return x != NULL && y != NULL && strcmp(x->family, y->family) == 0;
}

static int roofline(predict_model *pm, const store_measurement *const *m, const int *pick)
{
    double tmin = INFINITY;
    pm->fam_flops = calloc((size_t)(pm->nfams > 0 ? pm->nfams : 1), sizeof *pm->fam_flops);
    if (pm->fam_flops == NULL)
        return ATTUNE_ENOMEM;
    double peak_useful = 0; /* the best rate of the shapes' own FLOPs */
    pm->peak_flops = pm->peak_bytes = 0;
    for (int k = 0; k < pm->nrows; k++) {
        const store_measurement *r = &M(pick[k]);
        const pm_row *row = &pm->rows[k];
        if (!row_timed(r) || r->status != STORE_OK)
            continue;
        double fl, by, tm = select_time(r);
        work_of(pm, &r->shape, &row->t, row->fam, &fl, &by);
        pm->peak_flops = fmax(pm->peak_flops, fl / tm);
        pm->peak_bytes = fmax(pm->peak_bytes, by / tm);
        peak_useful = fmax(peak_useful, predict_useful_flops(&r->shape) / tm);
        tmin = fmin(tmin, tm);
    }
    if (!(pm->peak_flops > 0 && pm->peak_bytes > 0 && isfinite(tmin))) {
        pm->peak_flops = pm->peak_bytes = 1;
        tmin = 0;
    }
    pm->lat_us = LAT_SHARE * tmin;
    int bound_shapes = 0; /* shapes with a row the roofline calls byte-bound */
    for (int si = 0; si < pm->nshapes; si++) {
        const pm_shape *sh = &pm->shapes[si];
        for (int k = sh->r0; k < sh->r0 + sh->nr; k++) {
            const store_measurement *r = &M(pick[k]);
            if (!row_timed(r) || r->status != STORE_OK)
                continue;
            double fl, by;
            work_of(pm, &r->shape, &pm->rows[k].t, pm->rows[k].fam, &fl, &by);
            if (by / pm->peak_bytes >= BYTE_BOUND_MARGIN * fl / pm->peak_flops) {
                bound_shapes++;
                break;
            }
        }
    }
    pm->overlap_p = bound_shapes >= OVERLAP_MIN_SHAPES ? OVERLAP_P : 0;
    /* A family's FLOP rate per busy slot: the best its rows reached, but
     * only if one of them was of a shape the device's roofline calls
     * compute-bound (its own FLOPs, not a tactic's padded and wasted ones,
     * at the best rate any row reached them, against its bytes): a
     * family measured only where bytes bound it (cuDNN's decode engine,
     * listed only for decode steps) ran at the rate its bytes allowed,
     * which says nothing of its FLOP ceiling; costed at that rate, a
     * decode step of 71 query heads per KV head (9x the FLOPs per byte
     * of its group-8 neighbours) came out 1.5x dearer for it than for
     * prefill engines that took 5.8x its time. */
    unsigned char *cb = calloc((size_t)(pm->nfams > 0 ? pm->nfams : 1), 1);
    if (cb == NULL)
        return ATTUNE_ENOMEM;
    for (int k = 0; k < pm->nrows; k++) {
        const store_measurement *r = &M(pick[k]);
        const pm_row *row = &pm->rows[k];
        if (!row_timed(r) || r->status != STORE_OK)
            continue;
        double fl, by, tm = select_time(r), w = wave_eff(pm, &r->shape, &row->t, row->fam);
        work_of(pm, &r->shape, &row->t, row->fam, &fl, &by);
        cb[row->fam] |= predict_useful_flops(&r->shape) / peak_useful >= by / pm->peak_bytes;
        pm->fam_flops[row->fam] = fmax(pm->fam_flops[row->fam], fl / tm / w);
    }
    /* the pad does not change a kernel's ceiling: a family not seen
     * compute-bound takes the best ceiling the same kernel showed under
     * another pad (cuDNN's prefill engine with pad=8, listed only for
     * decode steps, is not costed at the 5.6 TFLOP/s bytes allowed it) */
    for (int f = 0; f < pm->nfams; f++) {
        if (cb[f])
            continue;
        double v = 0;
        for (int g = 0; g < pm->nfams; g++)
            if (cb[g] & 1 && same_kernel(pm->fams[f], pm->fams[g]))
                v = fmax(v, pm->fam_flops[g]);
        if (v > 0) {
            pm->fam_flops[f] = fmax(pm->fam_flops[f], v);
            cb[f] = 2;
        }
    }
    /* a kernel never seen compute-bound: the best ceiling another kernel
     * of its variant (and arch) showed compute-bound (a split-KV tile seen
     * only on decode steps is not credited the prefill kernels' 500
     * TFLOP/s on 50 queries of d = 256), else the best any kernel showed
     * compute-bound, else the device's best rate */
    double best_cb = 0;
    for (int f = 0; f < pm->nfams; f++)
        if (cb[f] & 1)
            best_cb = fmax(best_cb, pm->fam_flops[f]);
    for (int f = 0; f < pm->nfams; f++) {
        if (cb[f])
            continue;
        double v = 0;
        for (int g = 0; g < pm->nfams; g++)
            if (cb[g] & 1 && same_family(pm, f, g))
                v = fmax(v, pm->fam_flops[g]);
        pm->fam_flops[f] = v > 0 ? v : best_cb;
        cb[f] = 4;
    }
    for (int f = 0; f < pm->nfams; f++)
        pm->fam_flops[f] = pm->fam_flops[f] > 0 ? fmin(pm->fam_flops[f], pm->peak_flops)
                                                : pm->peak_flops;
    free(cb);
    return 0;
}

/* Every picked row as an efficiency against the roofline, rows sorted per
 * shape by family, and each shape's best efficiency among the rows the
 * policy accepts (the baseline of its slowdowns). */
static void build_rows(predict_model *pm, const store_measurement *const *m, const int *pick)
{
    double ratio = pm->policy.max_ratio > 0 ? pm->policy.max_ratio : SELECT_DEFAULT_RATIO;
    for (int si = 0; si < pm->nshapes; si++) {
        pm_shape *sh = &pm->shapes[si];
        for (int k = sh->r0; k < sh->r0 + sh->nr; k++) {
            const store_measurement *r = &M(pick[k]);
            pm_row *row = &pm->rows[k];
            row->lt = row_timed(r) ? log(select_time(r) / cost_of(pm, &r->shape, &row->t, row->fam))
                                   : NAN;
            row->rel_err = r->rel_err;
            row->lne = isfinite(r->rel_err) && r->rel_err > 0
                           ? log(r->rel_err / err_scale(r->shape.dtype))
                           : (r->rel_err == 0 ? log(1e-6) : NAN);
            row->ok = (unsigned char)row_usable(r, 0);
            row->ov = (unsigned char)row_usable(r, 1);
        }
        qsort(pm->rows + sh->r0, (size_t)sh->nr, sizeof *pm->rows, cmp_row);
        double bound = select_max_rel_err(&pm->policy, sh->s.dtype);
        sh->best_lt = NAN;
        for (int k = sh->r0; k < sh->r0 + sh->nr; k++) {
            const pm_row *row = &pm->rows[k];
            if (!row->ok || !isfinite(row->lt) || row->rel_err > bound ||
                (sh->best_ok > 0 && row->rel_err > ratio * sh->best_ok))
                continue;
            if (!(row->lt >= sh->best_lt))
                sh->best_lt = row->lt;
        }
    }
}

/* ---- constants fitted per device
 *
 * Two constants of the cost are the device's own and are fitted on its
 * rows when they hold enough shapes whose kernels run in waves: the launch
 * floor, as a share of the fastest row's time (LAT_SHARE), and a wave's
 * latency in launch floors (BLOCK_WAVE_LAT). A row's cost is A + L x (P +
 * w x W): A its roofline and copy bytes, P its launches and copies, W its
 * waves, L = share x the fastest time. The fit takes the pair (share, w)
 * on a grid (FIT_STEPS steps of each, by coordinate descent from the
 * defaults) that makes a tactic's efficiency (log time over cost) on each
 * shape most like its efficiency on the FIT_NEIGH shapes nearest to it:
 * least squares over every such pair of rows of one family and split
 * count, what an answer assumes when it carries a neighbour's efficiency
 * over to the shape asked. The fitted pair replaces the defaults only
 * where the rows clearly prefer it: a sum of squares under FIT_GAIN times
 * the defaults'. On the thirteen H200 tables the wave latency alone went
 * to 0.55-1.0 for a sum only 1-7% under 0.4's, and 0.55 already answers
 * the first table's batch of 288 frames with a GEMM at 4.1x the winner:
 * there the defaults stay. A device whose launches or waves cost
 * something else shows it plainly (synthetic devices of known floor and
 * wave latency: test_predict). Fewer such shapes: the defaults. */
#define FIT_MIN_SHAPES 12 /* shapes with a row run in waves */
#define FIT_NEIGH 3
#define FIT_STEPS 20      /* grid: share 0.05 .. 1.0, w 0 .. 1.0 */
#define FIT_ROUNDS 3
#define FIT_GAIN 0.8

typedef struct fit_row {
    int fam, splits;
    double t, a, p, w;    /* time; cost without latency; launches + copies; waves */
} fit_row;

static int cmp_fit_row(const void *x, const void *y)
{
    const fit_row *a = x, *b = y;
    if (a->fam != b->fam)
        return (a->fam > b->fam) - (a->fam < b->fam);
    return (a->splits > b->splits) - (a->splits < b->splits);
}

/* Append to pairs[] (room for max) the index pairs of rows of one family
 * and split count in x[0..nx) and y[0..ny) (fr-relative, both sorted).
 * Returns the new count. */
static int fit_pairs(const fit_row *fr, int x, int nx, int y, int ny, int (*pairs)[2], int n,
                     int max)
{
    for (int i = 0, j = 0; i < nx && j < ny && n < max;) {
        int c = cmp_fit_row(&fr[x + i], &fr[y + j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            pairs[n][0] = x + i++;
            pairs[n++][1] = y + j++;
        }
    }
    return n;
}

/* Sum of squared differences of log(t / cost) over the pairs of the rows
 * fr[0..nr), at floor L and wave latency w; lt: room for nr values. */
static double fit_sum(const fit_row *fr, int nr, const int (*pairs)[2], int n, double L,
                      double w, double *lt)
{
    double sum = 0;
    for (int i = 0; i < nr; i++)
        lt[i] = log(fr[i].t / (fr[i].a + L * (fr[i].p + w * fr[i].w)));
    for (int k = 0; k < n; k++) {
        double d = lt[pairs[k][0]] - lt[pairs[k][1]];
        sum += d * d;
    }
    return sum;
}

/* Each shape's FIT_NEIGH nearest other shapes into nb (-1: none). */
static void fit_neighbours(const predict_model *pm, int *nb)
{
    for (int si = 0; si < pm->nshapes; si++) {
        double best[FIT_NEIGH];
        for (int q = 0; q < FIT_NEIGH; q++)
            nb[si * FIT_NEIGH + q] = -1, best[q] = INFINITY;
        for (int sj = 0; sj < pm->nshapes; sj++) {
            if (sj == si)
                continue;
            double d = shape_dist(&pm->shapes[si].s, pm->shapes[si].f, &pm->shapes[sj]);
            int q = FIT_NEIGH;
            while (q > 0 && d < best[q - 1])
                q--;
            if (q == FIT_NEIGH)
                continue;
            for (int z = FIT_NEIGH - 1; z > q; z--)
                best[z] = best[z - 1], nb[si * FIT_NEIGH + z] = nb[si * FIT_NEIGH + z - 1];
            best[q] = d;
            nb[si * FIT_NEIGH + q] = sj;
        }
    }
}

/* Coordinate descent over the grid from (share, w): the best of each in
 * turn, FIT_ROUNDS times. *sum gets the least sum found. */
static void fit_search(const fit_row *fr, int nr, const int (*pairs)[2], int n, double tmin,
                       double *share, double *w, double *sum, double *lt)
{
    *sum = fit_sum(fr, nr, pairs, n, *share * tmin, *w, lt);
    for (int round = 0; round < FIT_ROUNDS; round++) {
        double before = *sum;
        for (int k = 1; k <= FIT_STEPS; k++) {
            double c = (double)k / FIT_STEPS, v = fit_sum(fr, nr, pairs, n, c * tmin, *w, lt);
            if (v < *sum)
                *sum = v, *share = c;
        }
        for (int k = 0; k <= FIT_STEPS; k++) {
            double c = (double)k / FIT_STEPS, v = fit_sum(fr, nr, pairs, n, *share * tmin, c, lt);
            if (v < *sum)
                *sum = v, *w = c;
        }
        if (!(*sum < before))
            break;
    }
}

/* pm->lat_us and pm->wave_lat: fitted on the timed ok rows, else the
 * defaults (the floor roofline() set, BLOCK_WAVE_LAT). 0 or
 * ATTUNE_ENOMEM. */
static int fit_constants(predict_model *pm, const store_measurement *const *m, const int *pick)
{
    pm->wave_lat = BLOCK_WAVE_LAT;
    pm->wave_lat_fitted = 0;
    double tmin = pm->lat_us / LAT_SHARE;
    if (pm->sms <= 0 || pm->nrows == 0 || !(tmin > 0))
        return 0;
    int maxpairs = pm->nrows * FIT_NEIGH;
    fit_row *fr = malloc((size_t)pm->nrows * sizeof *fr);
    double *lt = malloc((size_t)pm->nrows * sizeof *lt);
    int *r0 = malloc((size_t)(pm->nshapes + 1) * sizeof *r0);
    int *nb = malloc((size_t)pm->nshapes * FIT_NEIGH * sizeof *nb);
    int (*pairs)[2] = malloc((size_t)maxpairs * sizeof *pairs);
    int rc = ATTUNE_ENOMEM;
    if (fr == NULL || lt == NULL || r0 == NULL || nb == NULL || pairs == NULL)
        goto out;
    int n = 0, shapes = 0;
    for (int si = 0; si < pm->nshapes; si++) {
        const pm_shape *sh = &pm->shapes[si];
        int waved = 0;
        r0[si] = n;
        for (int k = sh->r0; k < sh->r0 + sh->nr; k++) {
            const store_measurement *r = &M(pick[k]);
            const pm_row *row = &pm->rows[k];
            if (!row_timed(r) || r->status != STORE_OK || row->fam < 0)
                continue;
            attn_cost c;
            describe_on(pm, &r->shape, &row->t, row->fam, &c);
            predict_rates rt = rates_of(pm, row->fam);
            rt.lat_us = 0;
            fit_row *f = &fr[n++];
            f->fam = row->fam;
            f->splits = row->t.splits;
            f->t = select_time(r);
            f->a = predict_cost_us(&r->shape, &c, &rt);
            f->p = c.launches + c.copies;
            f->w = c.waves;
            waved |= c.waves > 0;
        }
        qsort(fr + r0[si], (size_t)(n - r0[si]), sizeof *fr, cmp_fit_row);
        shapes += waved;
    }
    r0[pm->nshapes] = n;
    rc = 0;
    if (shapes < FIT_MIN_SHAPES)
        goto out;
    fit_neighbours(pm, nb);
    int np = 0;
    for (int si = 0; si < pm->nshapes; si++)
        for (int q = 0; q < FIT_NEIGH; q++) {
            int sj = nb[si * FIT_NEIGH + q];
            if (sj >= 0)
                np = fit_pairs(fr, r0[si], r0[si + 1] - r0[si], r0[sj], r0[sj + 1] - r0[sj],
                               pairs, np, maxpairs);
        }
    double share = LAT_SHARE, w = BLOCK_WAVE_LAT, least;
    double at_default =
        fit_sum(fr, n, (const int(*)[2])pairs, np, LAT_SHARE * tmin, BLOCK_WAVE_LAT, lt);
    fit_search(fr, n, (const int(*)[2])pairs, np, tmin, &share, &w, &least, lt);
    if (least < FIT_GAIN * at_default) {
        pm->lat_us = share * tmin;
        pm->wave_lat = w;
        pm->wave_lat_fitted = 1;
    }
out:
    free(fr), free(lt), free(r0), free(nb), free(pairs);
    return rc;
}

predict_model *predict_build_dev(const store_measurement *const *m, int n, const char *cur_stack,
                                 const select_policy *p, const attn_device_info *dev)
{
    predict_model *pm = calloc(1, sizeof *pm);
    int *pick = NULL; /* chosen source rows, in shape order */
    int npick = 0;
    if (pm == NULL)
        return NULL;
    if (p != NULL)
        pm->policy = *p;
    else
        select_policy_default(&pm->policy);
    pm->peak_flops = pm->peak_bytes = 1;
    pm->wave_lat = BLOCK_WAVE_LAT;
    if (dev != NULL) {
        pm->dev = *dev;
        pm->has_dev = 1;
        pm->sms = attn_cost_gpu(dev) ? dev->sm_count : 0;
    }
    if (n <= 0)
        return pm;
    if (cur_stack == NULL)
        cur_stack = "";
    if ((pick = malloc((size_t)n * sizeof *pick)) == NULL ||
        build_shapes(pm, m, n, cur_stack, pick, &npick) != 0 ||
        build_families(pm, m, pick, npick) != 0 ||
        (pm->rows = calloc((size_t)(npick > 0 ? npick : 1), sizeof *pm->rows)) == NULL)
        goto fail;
    pm->nrows = npick;
    if ((pm->fam_dec = calloc((size_t)(pm->nfams > 0 ? pm->nfams : 1), 1)) == NULL ||
        (pm->fam_desc = calloc((size_t)(pm->nfams > 0 ? pm->nfams : 1), sizeof *pm->fam_desc)) ==
            NULL)
        goto fail;
    parse_rows(pm, m, pick);
    if (roofline(pm, m, pick) != 0 || fit_constants(pm, m, pick) != 0)
        goto fail;
    build_rows(pm, m, pick);
    free(pick);
    return pm;

fail:
    free(pick);
    predict_free(pm);
    return NULL;
}

/* ---- answering */

typedef struct neigh {
    int shape;
    double dist;
} neigh;

/* The K measured shapes nearest to s (timed ones only), nearest first. */
static int nearest_shapes(const predict_model *pm, const attn_shape *s, neigh *out)
{
    double f[5];
    features(s, f);
    int n = 0;
    for (int i = 0; i < pm->nshapes; i++) {
        const pm_shape *sh = &pm->shapes[i];
        if (!sh->timed)
            continue;
        double d = shape_dist(s, f, sh);
        if (n == K_NEIGH && d >= out[n - 1].dist)
            continue;
        int j = n < K_NEIGH ? n++ : K_NEIGH - 1;
        while (j > 0 && out[j - 1].dist > d) {
            out[j] = out[j - 1];
            j--;
        }
        out[j].shape = i;
        out[j].dist = d;
    }
    return n;
}

/* First row of family fam in sh's rows, or -1. */
static int family_rows(const predict_model *pm, const pm_shape *sh, int fam, int *count)
{
    int lo = sh->r0, hi = sh->r0 + sh->nr; /* first row with fam >= wanted */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (pm->rows[mid].fam < fam)
            lo = mid + 1;
        else
            hi = mid;
    }
    int end = lo;
    while (end < sh->r0 + sh->nr && pm->rows[end].fam == fam)
        end++;
    *count = end - lo;
    return end > lo ? lo : -1;
}

typedef struct estimate {
    double t;        /* predicted time, us; INFINITY when none */
    double score;    /* ranking: log predicted slowdown + log cost on s */
    double ne;       /* predicted error in units of the dtype scale */
    double elig;     /* eligible share of the weight */
    double wsum;
} estimate;

/* Eligibility of a row of shape sh under the query's normalised bound. */
static int row_eligible(const predict_model *pm, const pm_shape *sh, const pm_row *r, int ov,
                        double bound_norm)
{
    if (!(ov ? r->ov : r->ok))
        return 0;
    if (r->rel_err > bound_norm * err_scale(sh->s.dtype))
        return 0;
    double ratio = pm->policy.max_ratio > 0 ? pm->policy.max_ratio : SELECT_DEFAULT_RATIO;
    if (!ov && sh->best_ok > 0 && isfinite(sh->best_ok) && r->rel_err > ratio * sh->best_ok)
        return 0;
    return 1;
}

/* The weight of the prior in a candidate's slowdown, given the weight wr
 * of the neighbours that measured its family: a share of all the
 * neighbours' weight, so a family the nearest shapes did not measure
 * (their backend did not list it there: cuDNN lists other engines per
 * shape, a pad that changes nothing is left out) does not win on the
 * word of far ones alone; the prior is log 2, what a failed row counts.
 * The share shrinks with the evidence, to EVIDENCE_FLOOR of it when every
 * neighbour measured the family: a constant prior pulls every candidate's
 * measured slowdown toward log 2 by the same factor while its cost on the
 * shape counts in full, so the cheaper-costed of two families measured
 * everywhere won where the evidence said otherwise (the fresh H100 table,
 * bench/loo-h100-458045a.json.gz: the v1 64x64 tile on b1.hq16.sq257
 * d=64, predicted 8% faster than cuDNN's kcfg=8, lost to it by a score
 * 0.002 and was answered at 1.48x). */
static double shrink_w(const neigh *nb, int nnb, double wr)
{
    double wall = 0;
    for (int j = 0; j < nnb; j++) {
        double d = nb[j].dist + W_SOFT;
        wall += 1.0 / (d * d);
    }
    double missing = wall > 0 ? fmax(1.0 - wr / wall, 0.0) : 1.0;
    return EVIDENCE_SHARE * wall * (EVIDENCE_FLOOR + (1.0 - EVIDENCE_FLOOR) * missing);
}

/* Estimate candidate t (family fam) on s from the neighbours that
 * measured its family (a neighbour without it does not list it: no
 * evidence either way): its time from the efficiency they reached; its
 * rank from its slowdown against each one's best, plus its cost on s at
 * its pad. Comparing slowdowns, not raw efficiencies, keeps families
 * measured on different neighbours comparable (a shape where everything
 * is slow does not count against the families it happens to list). Each
 * neighbour offers the measured split count closest in grid and keys per
 * split (none counts as 1), farther by the mismatch: the sm90a fold
 * family holds its unsplit and split rows, and an unsplit candidate that
 * took whichever row came first (splits=2 on a decode step) was answered
 * at 1.13x on batch-32 and -64 decode steps where cuDNN's decode engine
 * won. used[]
 * (K_NEIGH) receives which neighbours measured it. */
static estimate estimate_of(const predict_model *pm, const attn_shape *s, const neigh *nb,
                            int nnb, int fam, const attn_tactic *t, int ov, double bound_norm,
                            int *used)
{
    estimate e = {INFINITY, INFINITY, INFINITY, 0, 0};
    double wt = 0, st = 0, we = 0, se = 0, wel = 0, wr = 0, srr = 0;
    int pad = t->pad > 0 ? t->pad : 1;
    double c_keys = 0, c_blocks = 0;
    int csp = t->splits > 1 ? t->splits : 1;
    c_keys = log2((double)attn_round_up(s->skv, pad) / csp);
    c_blocks = log2(split_grid(pm, s, t, fam) * csp);
    for (int j = 0; j < nnb; j++) {
        used[j] = 0;
        const pm_shape *sh = &pm->shapes[nb[j].shape];
        int cnt, r0 = family_rows(pm, sh, fam, &cnt);
        if (r0 < 0)
            continue; /* not listed there: no evidence either way */
        int best = r0;
        double pen = 0;
        if (cnt > 1 || t->splits > 0) {
            pen = INFINITY;
            for (int k = r0; k < r0 + cnt; k++) {
                const pm_row *r = &pm->rows[k];
                int rsp = r->t.splits > 1 ? r->t.splits : 1;
                double kk = log2((double)attn_round_up(sh->s.skv, r->t.pad) / rsp);
                double kb = log2(split_grid(pm, &sh->s, &r->t, fam) * rsp);
                double dk = DIST_SPLIT_BLOCKS * fabs(c_blocks - kb) + DIST_SPLIT_KEYS * fabs(c_keys - kk);
                if (dk < pen) {
                    pen = dk;
                    best = k;
                }
            }
        }
        const pm_row *r = &pm->rows[best];
        double d = nb[j].dist + pen + W_SOFT;
        double w = 1.0 / (d * d);
        used[j] = 1;
        e.wsum += w;
        if (row_eligible(pm, sh, r, ov, bound_norm))
            wel += w;
        if (isfinite(r->lt)) {
            wt += w;
            st += w * r->lt;
        }
        if (isfinite(r->lne)) {
            we += w;
            se += w * r->lne;
        }
        /* slowdown against the neighbour's best; a row without a time
         * (failed there) counts as twice as slow */
        double rel = isfinite(r->lt) && isfinite(sh->best_lt) ? r->lt - sh->best_lt : log(2.0);
        wr += w;
        srr += w * rel;
    }
    double cost = cost_of(pm, s, t, fam);
    if (wt > 0) {
        e.t = exp(st / wt) * cost;
        double prior = shrink_w(nb, nnb, wr);
        e.score = (srr + prior * log(2.0)) / (wr + prior) + log(cost);
    }
    if (we > 0)
        e.ne = exp(se / we);
    e.elig = e.wsum > 0 ? wel / e.wsum : 0;
    return e;
}

static int same_class(const attn_shape *a, const attn_shape *b)
{
    return a->dtype == b->dtype && a->d == b->d && a->causal == b->causal &&
           attn_shape_group(a) == attn_shape_group(b);
}

/* 1 when cand[c] pads s to the same lengths as a smaller pad of the same
 * tactic that is also among cand[0..n): a pad that changes no length runs
 * the unpadded kernel without copies (the backends alias its buffers), so
 * it is that tactic, and ranking both only lets noise between their
 * families pick the larger pad's name (sm90a pad=16 on 2048 tokens: its
 * 3-sample screening time 125.7 us against pad=1's 91.5 us). */
static int noop_pad_twin(const attn_shape *s, const attn_tactic *cand, int n, int c)
{
    const attn_tactic *t = &cand[c];
    int pad = t->pad > 1 ? t->pad : 1;
    for (int k = 0; k < n; k++) {
        int pk = cand[k].pad > 1 ? cand[k].pad : 1;
        if (k == c || pk >= pad || !attn_pads_same_lengths(s->sq, s->skv, pk, pad))
            continue;
        attn_tactic u = *t;
        u.pad = cand[k].pad;
        if (memcmp(&u, &cand[k], sizeof u) == 0)
            return 1;
    }
    return 0;
}

/* One trace line for candidate ts (family fam) on s. */
static void trace_estimate(const predict_model *pm, const attn_shape *s, const char *ts,
                           const estimate *e, int fam, const attn_tactic *t, const int *used,
                           int nnb)
{
    char key[ATTN_SHAPE_KEY_MAX];
    int n = 0;
    for (int j = 0; j < nnb; j++)
        n += used[j];
    attn_shape_key(s, key, sizeof key);
    fprintf(pm->trace, "predict %s %-60s t=%9.2f score=%7.3f cost=%9.2f elig=%.2f ne=%.2f nb=%d\n",
            key, ts, e->t, e->score, cost_of(pm, s, t, fam), e->elig, e->ne, n);
}

int predict_answer_for(const predict_model *pm, const attn_shape *s, const attn_tactic *cand,
                       int ncand, double max_rel_err, predict_answer *out)
{
    if (pm == NULL || s == NULL || out == NULL || cand == NULL || ncand <= 0 ||
        attn_shape_validate(s, NULL, 0) != 0)
        return ATTUNE_EINVAL;
    memset(out, 0, sizeof *out);
    neigh nb[K_NEIGH];
    int nnb = nearest_shapes(pm, s, nb);
    if (nnb == 0)
        return ATTUNE_ENOTFOUND;
    if (pm->trace != NULL)
        for (int j = 0; j < nnb; j++)
            fprintf(pm->trace, "predict neighbour %s dist=%.3f winner %s\n",
                    pm->shapes[nb[j].shape].key, nb[j].dist, pm->shapes[nb[j].shape].win);
    int ov = max_rel_err > 0;
    double bound = ov ? max_rel_err : select_max_rel_err(&pm->policy, s->dtype);
    double bound_norm = bound / err_scale(s->dtype);

    int best = -1;
    estimate be = {INFINITY, INFINITY, INFINITY, 0, 0};
    int used[K_NEIGH], best_used[K_NEIGH] = {0};
    for (int c = 0; c < ncand; c++) {
        char ts[ATTN_TACTIC_STR_MAX], fam[ATTN_TACTIC_STR_MAX];
        if (noop_pad_twin(s, cand, ncand, c))
            continue; /* the same kernel as a listed smaller pad: answer that one */
        int sp, pad;
        attn_tactic_str(&cand[c], ts, sizeof ts);
        predict_family(ts, fam, sizeof fam, &sp, &pad);
        int f = find_fam_or_sibling(pm, fam);
        if (f < 0)
            continue;
        estimate e = estimate_of(pm, s, nb, nnb, f, &cand[c], ov, bound_norm, used);
        if (pm->trace != NULL)
            trace_estimate(pm, s, ts, &e, f, &cand[c], used, nnb);
        if (!isfinite(e.t) || !isfinite(e.score))
            continue;
        if (e.elig < ELIG_SHARE || !(e.ne <= bound_norm))
            continue; /* not predicted to meet the bound */
        if (best < 0 || e.score < be.score) {
            best = c;
            be = e;
            memcpy(best_used, used, sizeof used);
        }
    }
    if (best < 0)
        return ATTUNE_ENOTFOUND;

    out->tactic = cand[best];
    attn_tactic_str(&cand[best], out->tactic_str, sizeof out->tactic_str);
    out->time_us = be.t;
    out->rel_err = isfinite(be.ne) ? be.ne * err_scale(s->dtype) : NAN;
    int first = 1;
    for (int j = 0; j < nnb; j++) {
        if (!best_used[j])
            continue;
        const pm_shape *sh = &pm->shapes[nb[j].shape];
        if (first) {
            out->distance = nb[j].dist;
            out->nearest = same_class(s, &sh->s) && strcmp(sh->win, out->tactic_str) == 0;
            first = 0;
        }
        out->stale |= sh->stale;
        if (out->nfrom < PREDICT_MAX_FROM)
            memcpy(out->from[out->nfrom++], sh->key, ATTN_SHAPE_KEY_MAX);
    }
    return 0;
}

/* tactic text of family fam with "/splits=n" inserted among its keys in
 * sorted order (keys after the variant are sorted: acc, pad, splits, ...). */
static void with_splits(const char *fam, int n, char *buf, size_t len)
{
    const char *p = strchr(fam, '/');
    while (p != NULL && strncmp(p + 1, "splits", 6) < 0)
        p = strchr(p + 1, '/');
    if (p == NULL)
        snprintf(buf, len, "%s/splits=%d", fam, n);
    else
        snprintf(buf, len, "%.*s/splits=%d%s", (int)(p - fam), fam, n, p);
}

int predict_answer_measured_families(const predict_model *pm, const attn_shape *s,
                                     double max_rel_err, predict_answer *out)
{
    return predict_answer_measured_families_in(pm, s, 0, max_rel_err, out);
}

int predict_answer_measured_families_in(const predict_model *pm, const attn_shape *s,
                                        variant_set vs, double max_rel_err,
                                        predict_answer *out)
{
    return predict_answer_measured_families_if(pm, s, vs, NULL, NULL, max_rel_err, out);
}

int predict_answer_measured_families_if(const predict_model *pm, const attn_shape *s,
                                        variant_set vs, predict_keep_fn keep, void *ctx,
                                        double max_rel_err, predict_answer *out)
{
    if (pm == NULL || s == NULL || out == NULL || attn_shape_validate(s, NULL, 0) != 0)
        return ATTUNE_EINVAL;
    neigh nb[K_NEIGH];
    int nnb = nearest_shapes(pm, s, nb);
    if (nnb == 0)
        return ATTUNE_ENOTFOUND;
    int cap = 0, n = 0;
    for (int j = 0; j < nnb; j++)
        cap += pm->shapes[nb[j].shape].nr;
    attn_tactic *cand = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *cand);
    if (cand == NULL)
        return ATTUNE_ENOMEM;
    for (int j = 0; j < nnb; j++) {
        const pm_shape *sh = &pm->shapes[nb[j].shape];
        for (int k = sh->r0; k < sh->r0 + sh->nr; k++) {
            const pm_row *r = &pm->rows[k];
            char ts[ATTN_TACTIC_STR_MAX];
            if (r->t.splits > 0) {
                /* the same grid on s: splits = blocks_j / blocks per split on s */
                double want = split_grid(pm, &sh->s, &r->t, r->fam) * r->t.splits /
                              split_grid(pm, s, &r->t, r->fam);
                int sp = 1;
                while (sp < 64 && sp * 2 <= want * 1.4142 && sp * 2 <= attn_round_up(s->skv, r->t.pad))
                    sp *= 2;
                with_splits(pm->fams[r->fam], sp, ts, sizeof ts);
            } else {
                snprintf(ts, sizeof ts, "%s", pm->fams[r->fam]);
            }
            attn_tactic t;
            if (attn_tactic_parse(ts, &t, NULL, 0) != 0 || !variant_set_has(vs, t.variant) ||
                (keep != NULL && !keep(ctx, attn_tactic_str(&t, ts, sizeof ts))))
                continue;
            int dup = 0;
            for (int q = 0; q < n && !dup; q++)
                dup = memcmp(&cand[q], &t, sizeof t) == 0;
            if (!dup)
                cand[n++] = t;
        }
    }
    int rc = n > 0 ? predict_answer_for(pm, s, cand, n, max_rel_err, out) : ATTUNE_ENOTFOUND;
    free(cand);
    return rc;
}
