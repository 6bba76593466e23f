/* cpu_attn.c -- the attention variants in plain C on fp32 arithmetic.
 *
 * Each variant reads q, k, v in the storage dtype, converts what it works on
 * to fp32 (as a GPU kernel converts tiles on load), accumulates in fp32 and
 * stores the output back with round-to-nearest-even, in the output dtype
 * (attn_dtype_out: bf16 for e4m3). e4m3 inputs are multiplied by their
 * tensor's descale as they are converted (cpu_problem.descale): an
 * emulation of an FP8 kernel's arithmetic, not of its speed (the CPU has
 * no FP8 units; the tiles it computes on are fp32 either way). They run on the
 * problem's (possibly padded) buffers; the mask always comes from the real
 * lengths (cpu_problem.skv, .diag), never from the padded ones.
 *
 *   fused         FlashAttention-2 over key tiles: per block of FUSED_BR query
 *                 rows, a running max and sum per row rescale the output as
 *                 each FUSED_BC-key tile is folded in; the score row is never
 *                 materialized. Tiles past the block's last visible key are
 *                 skipped (the causal early exit). KV head h / g is read in
 *                 place, never copied.
 *   split         per (b, query head): S = Q K^T (sqp x skvp, materialized),
 *                 masked softmax, O = P V. Both GEMMs are dense over the
 *                 padded lengths, as a BLAS call would be. GQA by indexing
 *                 the KV head (no copy); the fp32 form of a KV head is kept
 *                 while the query heads of its group run.
 *   split_repeat  Hugging Face's path: K and V are first copied per query
 *                 head (repeat_kv, into [b, hq, skvp, d]), then split.
 *   folded        per (b, KV head): the g query heads sharing it are one
 *                 GEMM of g * sqp rows (they are contiguous in q), so K and V
 *                 are read once per group; row r has query position r % sqp.
 *
 * GEMMs are i-k-j loops (C row += a * B row) over fp32 copies laid out with
 * row strides rounded up to LANES floats: the innermost loops then run in
 * whole groups of LANES, which GCC vectorizes even at -O2 (its "very cheap"
 * cost model refuses loops that would need a scalar remainder). K is stored
 * transposed (kt[c][j]) so that Q K^T is also an i-k-j loop. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../cancel.h"
#include "../dtype.h"
#include "cpu_internal.h"

#define LANES 8     /* floats per inner-loop group */
#define FUSED_BR 64 /* fused: query rows per block */
#define FUSED_BC 64 /* fused: keys per tile */
#define ROW_CHUNK 256 /* split, folded: query rows between two cancel polls */
#define KBLOCK 128  /* split, folded: keys per cache block of both GEMMs (multiple of LANES and 4) */

struct cpu_work {
    const cpu_kernel *kernel; /* the kernel it was made for */
    int64_t rows;  /* query rows of one block: fused FUSED_BR, split sqp, folded g*sqp */
    int64_t keys;  /* keys of one block: fused FUSED_BC, else skvp */
    int64_t ldd;   /* d rounded up to LANES: row stride of qf, vf, of */
    int64_t ldk;   /* keys rounded up to LANES: row stride of kt and s */
    float *qf;     /* [rows][ldd] query rows, fp32 */
    float *kt;     /* [d][ldk] keys, transposed */
    float *vf;     /* [keys][ldd] values */
    float *s;      /* [rows][ldk] scores, then probabilities */
    float *of;     /* [rows][ldd] output accumulators */
    float *m, *l;  /* [rows] fused: running max (raw score units) and sum */
    float *tmp;    /* [LANES][d] key rows on their way into kt */
    const void *kv_src; /* split: the K buffer and offset now in kt and vf, */
    size_t kv_off;      /* so query heads sharing a KV head load it once */
    void *krep, *vrep; /* split_repeat: [b, hq, skvp, d] in the storage dtype */
    int stop;      /* the thread's cancel hook fired (kernels/cancel.h): the
                      rest of the call is skipped, the run answers ECANCELED */
};

/* Block boundary: 1 when the call must stop (and stays stopped). One
 * relaxed atomic load, a clock read only under a deadline: a block is at
 * least KBLOCK keys x its rows, tens of microseconds and up. */
static int stopped(cpu_work *w)
{
    if (!w->stop && attn_cancel_poll())
        w->stop = 1;
    return w->stop;
}

static int64_t round_lanes(int64_t n) { return attn_round_up(n, LANES); }

/* The factor tensor i (0 q, 1 k, 2 v) of pb is loaded with: its descale
 * for e4m3, 1 for the other dtypes (whatever pb->descale holds: problems
 * made before e4m3 leave it 0). */
static float descale_of(const cpu_problem *pb, int i)
{
    return pb->dtype == ATTN_E4M3 ? pb->descale[i] : 1.0f;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- block sizes of each kernel (its workspace holds one block) */

static void fused_dims(const cpu_problem *pb, int64_t *rows, int64_t *keys)
{
    *rows = min64(FUSED_BR, pb->sqp);
    *keys = min64(FUSED_BC, pb->skvp);
}

static void split_dims(const cpu_problem *pb, int64_t *rows, int64_t *keys)
{
    *rows = pb->sqp;
    *keys = pb->skvp;
}

static void folded_dims(const cpu_problem *pb, int64_t *rows, int64_t *keys)
{
    *rows = (pb->hq / pb->hkv) * pb->sqp;
    *keys = pb->skvp;
}

double cpu_work_bytes(const cpu_kernel *k, const cpu_problem *pb)
{
    int64_t rows, keys;
    k->dims(pb, &rows, &keys);
    double ldd = (double)round_lanes(pb->d), ldk = (double)round_lanes(keys);
    double floats = (double)rows * ldd * 2      /* qf, of */
                    + (double)pb->d * ldk       /* kt */
                    + (double)keys * ldd        /* vf */
                    + (double)rows * ldk        /* s */
                    + 2.0 * (double)rows + (double)LANES * (double)pb->d;
    double bytes = floats * sizeof(float);
    if (k->repeat_kv)
        bytes += 2.0 * (double)pb->b * (double)pb->hq * (double)pb->skvp * (double)pb->d *
                 (double)attn_dtype_size(pb->dtype);
    return bytes;
}

/* calloc of n floats (zeroed: the LANES tails must read as 0). */
static float *fzalloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

/* Contract in cpu_internal.h. All buffers are zeroed, so the padding
 * columns of qf, vf and kt contribute nothing to any sum. */
int cpu_work_alloc(const cpu_kernel *k, const cpu_problem *pb, cpu_work **out)
{
    int64_t rows, keys;
    cpu_work *w = NULL;
    int rc = ATTUNE_ENOMEM;

    *out = NULL;
    k->dims(pb, &rows, &keys);
    w = calloc(1, sizeof *w);
    if (w == NULL)
        goto fail;
    w->kernel = k;
    w->rows = rows;
    w->keys = keys;
    w->ldd = round_lanes(pb->d);
    w->ldk = round_lanes(keys);
    w->qf = fzalloc(rows * w->ldd);
    w->kt = fzalloc(pb->d * w->ldk);
    w->vf = fzalloc(keys * w->ldd);
    w->s = fzalloc(rows * w->ldk);
    w->of = fzalloc(rows * w->ldd);
    w->m = fzalloc(rows);
    w->l = fzalloc(rows);
    w->tmp = fzalloc(LANES * pb->d);
    if (!w->qf || !w->kt || !w->vf || !w->s || !w->of || !w->m || !w->l || !w->tmp)
        goto fail;
    if (k->repeat_kv) {
        size_t n = (size_t)(pb->b * pb->hq * pb->skvp * pb->d) * attn_dtype_size(pb->dtype);
        w->krep = malloc(n);
        w->vrep = malloc(n);
        if (w->krep == NULL || w->vrep == NULL)
            goto fail;
    }
    *out = w;
    return 0;
fail:
    cpu_work_free(w);
    return rc;
}

void cpu_work_free(cpu_work *w)
{
    if (w == NULL)
        return;
    free(w->qf);
    free(w->kt);
    free(w->vf);
    free(w->s);
    free(w->of);
    free(w->m);
    free(w->l);
    free(w->tmp);
    free(w->krep);
    free(w->vrep);
    free(w);
}

/* ---- loading and storing tiles */

/* n floats of x times f (the descale of an e4m3 tensor; nothing for 1). */
static void scale_n(float *x, size_t n, float f)
{
    if (f == 1.0f)
        return;
    for (size_t i = 0; i < n; i++)
        x[i] *= f;
}

/* rows x d elements of src (storage dtype t) from element off, row-major
 * and contiguous, into dst with row stride ldd (columns d..ldd untouched),
 * each times f (the tensor's descale). */
static void load_rows(const void *src, attn_dtype t, float f, size_t off, int64_t rows,
                      int64_t d, float *dst, int64_t ldd)
{
    const size_t es = attn_dtype_size(t);
    for (int64_t r = 0; r < rows; r++) {
        dtype_load_n((const char *)src + (off + (size_t)(r * d)) * es, t, dst + r * ldd,
                     (size_t)d);
        scale_n(dst + r * ldd, (size_t)d, f);
    }
}

/* n key rows of src from element off, transposed: kt[c * ldk + j] = K[j][c]
 * times f (K's descale). LANES rows at a time go through tmp ([LANES][d],
 * converted), so each row of kt receives LANES consecutive floats per
 * pass, not one. The rows n..round_lanes(n) come out zero: a GEMM over
 * whole LANES groups reads zeros there, never stale keys. */
static void load_keys_t(const void *src, attn_dtype t, float f, size_t off, int64_t n,
                        int64_t d, float *restrict kt, int64_t ldk, float *restrict tmp)
{
    const size_t es = attn_dtype_size(t);
    for (int64_t j0 = 0; j0 < n; j0 += LANES) {
        const int64_t nb = n - j0 < LANES ? n - j0 : LANES;
        dtype_load_n((const char *)src + (off + (size_t)(j0 * d)) * es, t, tmp, (size_t)(nb * d));
        scale_n(tmp, (size_t)(nb * d), f);
        if (nb < LANES)
            memset(tmp + nb * d, 0, (size_t)((LANES - nb) * d) * sizeof *tmp);
        for (int64_t c = 0; c < d; c++)
            for (int u = 0; u < LANES; u++)
                kt[c * ldk + j0 + u] = tmp[u * d + c];
    }
}

/* Store d floats as output row at element off of out (rounding RNE), for
 * inputs of dtype t: out is attn_dtype_out(t). */
static void store_row(void *out, attn_dtype t, size_t off, const float *row, int64_t d)
{
    const attn_dtype ot = attn_dtype_out(t);
    dtype_store_n((char *)out + off * attn_dtype_size(ot), ot, row, (size_t)d);
}

/* ---- GEMM pieces (fp32, i-k-j) */

/* s[r * ldk + j] = sum_c qf[r * ldd + c] * kt[c * ldk + j] for r < rows,
 * j < ncols (a multiple of LANES, <= ldk). Columns go in blocks of KBLOCK,
 * so the d x KBLOCK slice of kt stays in cache while every row passes over
 * it (a whole kt is 1 MiB at d = 256, 1024 keys). Four k-steps per pass
 * over a score row: a quarter of the loads and stores of s, the bottleneck
 * of a plain i-k-j loop once everything sits in cache. */
static void gemm_qk(int64_t rows, int64_t ncols, int64_t d, const float *restrict qf,
                    int64_t ldd, const float *restrict kt, int64_t ldk, float *restrict s)
{
    for (int64_t j0 = 0; j0 < ncols; j0 += KBLOCK) {
        const int64_t nj = min64(KBLOCK, ncols - j0); /* a multiple of LANES */
        for (int64_t r = 0; r < rows; r++) {
            float *restrict sr = s + r * ldk + j0;
            const float *restrict qr = qf + r * ldd;
            for (int64_t j = 0; j < nj; j++)
                sr[j] = 0.0f;
            int64_t c = 0;
            for (; c + 4 <= d; c += 4) {
                const float a0 = qr[c], a1 = qr[c + 1], a2 = qr[c + 2], a3 = qr[c + 3];
                const float *restrict k0 = kt + c * ldk + j0, *restrict k1 = k0 + ldk;
                const float *restrict k2 = k1 + ldk, *restrict k3 = k2 + ldk;
                for (int64_t j = 0; j < nj; j += LANES)
                    for (int u = 0; u < LANES; u++)
                        sr[j + u] += a0 * k0[j + u] + a1 * k1[j + u] + a2 * k2[j + u] +
                                     a3 * k3[j + u];
            }
            for (; c < d; c++) {
                const float a = qr[c];
                const float *restrict kr = kt + c * ldk + j0;
                for (int64_t j = 0; j < nj; j += LANES)
                    for (int u = 0; u < LANES; u++)
                        sr[j + u] += a * kr[j + u];
            }
        }
    }
}

/* orow[c] += sum_{j < nk} p[j] * vf[j * ldd + c] over c < ldd (a multiple
 * of LANES): one output row of O = P V, four keys per pass over the row. */
static void row_pv(const float *restrict p, int64_t nk, const float *restrict vf, int64_t ldd,
                   float *restrict orow)
{
    int64_t j = 0;
    for (; j + 4 <= nk; j += 4) {
        const float w0 = p[j], w1 = p[j + 1], w2 = p[j + 2], w3 = p[j + 3];
        const float *restrict v0 = vf + j * ldd, *restrict v1 = v0 + ldd;
        const float *restrict v2 = v1 + ldd, *restrict v3 = v2 + ldd;
        for (int64_t c = 0; c < ldd; c += LANES)
            for (int u = 0; u < LANES; u++)
                orow[c + u] += w0 * v0[c + u] + w1 * v1[c + u] + w2 * v2[c + u] +
                               w3 * v3[c + u];
    }
    for (; j < nk; j++) {
        const float w = p[j];
        const float *restrict vr = vf + j * ldd;
        for (int64_t c = 0; c < ldd; c += LANES)
            for (int u = 0; u < LANES; u++)
                orow[c + u] += w * vr[c + u];
    }
}

/* Masked softmax of one score row in place: entries j < nvis become
 * exp((s_j - max) * scale) / sum; entries nvis..ncols (causally masked,
 * padded keys, the LANES tail) become 0. nvis == 0 gives a zero row. The
 * max is over raw scores; scale > 0 keeps it the max of scaled ones. */
static void softmax_row(float *restrict s, int64_t nvis, int64_t ncols, float scale)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int64_t j = 0; j < nvis; j++)
        mx = s[j] > mx ? s[j] : mx;
    for (int64_t j = 0; j < nvis; j++) {
        s[j] = expf((s[j] - mx) * scale);
        sum += s[j];
    }
    const float inv = nvis > 0 ? 1.0f / sum : 0.0f;
    for (int64_t j = 0; j < nvis; j++)
        s[j] *= inv;
    for (int64_t j = nvis; j < ncols; j++)
        s[j] = 0.0f;
}

/* ---- split and folded: one materialized block */

/* Attention of `rows` consecutive query rows starting at element qoff of
 * pb->q (row r has query position r % sqp) against the skvp keys of the KV
 * head at element koff; output rows at qoff of pb->out. */
static void attend_block(const cpu_problem *pb, cpu_work *w, int64_t rows, size_t qoff,
                         size_t koff)
{
    const attn_dtype t = pb->dtype;
    const int64_t d = pb->d, ldd = w->ldd, ldk = w->ldk, skvp = pb->skvp;
    const float scale = (float)(1.0 / sqrt((double)d));

    load_rows(pb->q, t, descale_of(pb, 0), qoff, rows, d, w->qf, ldd);
    if (w->kv_src != pb->k || w->kv_off != koff) {
        /* Query heads of one group run back to back and share K and V:
         * convert them once, as a GPU's L2 serves the repeated reads of a
         * batched GEMM. split_repeat's per-head copies sit at distinct
         * offsets, so it converts every copy, as its GEMMs read every one. */
        load_keys_t(pb->k, t, descale_of(pb, 1), koff, skvp, d, w->kt, ldk, w->tmp);
        load_rows(pb->v, t, descale_of(pb, 2), koff, skvp, d, w->vf, ldd);
        w->kv_src = pb->k;
        w->kv_off = koff;
    }

    /* In chunks of ROW_CHUNK rows, a block boundary each (kernels/cancel.h):
     * a block of a long prefill is every row of a head. */
    for (int64_t r0 = 0; r0 < rows && !stopped(w); r0 += ROW_CHUNK) {
        const int64_t nr = min64(ROW_CHUNK, rows - r0);
        float *restrict sc = w->s + r0 * ldk, *restrict oc = w->of + r0 * ldd;
        gemm_qk(nr, ldk, d, w->qf + r0 * ldd, ldd, w->kt, ldk, sc);
        for (int64_t r = 0; r < nr; r++)
            softmax_row(sc + r * ldk, cpu_visible(pb, (r0 + r) % pb->sqp), ldk, scale);
        /* O = P V, dense over the padded keys (P is 0 there), in blocks of
         * KBLOCK keys so that the block of V stays in cache across the rows. */
        memset(oc, 0, (size_t)(nr * ldd) * sizeof *oc);
        for (int64_t j0 = 0; j0 < skvp; j0 += KBLOCK)
            for (int64_t r = 0; r < nr; r++)
                row_pv(sc + r * ldk + j0, min64(KBLOCK, skvp - j0), w->vf + j0 * ldd, ldd,
                       oc + r * ldd);
        for (int64_t r = 0; r < nr; r++)
            store_row(pb->out, t, qoff + (size_t)((r0 + r) * d), oc + r * ldd, d);
    }
}

static void run_split(const cpu_problem *pb, cpu_work *w)
{
    const int64_t g = pb->hq / pb->hkv, d = pb->d;
    for (int64_t bi = 0; bi < pb->b && !w->stop; bi++)
        for (int64_t h = 0; h < pb->hq && !w->stop; h++)
            attend_block(pb, w, pb->sqp, (size_t)((bi * pb->hq + h) * pb->sqp * d),
                         (size_t)((bi * pb->hkv + h / g) * pb->skvp * d));
}

/* Hugging Face repeat_kv: K and V copied to one head per query head, then
 * split on the copies as if the shape were MHA. */
static void run_split_repeat(const cpu_problem *pb, cpu_work *w)
{
    const int64_t g = pb->hq / pb->hkv;
    const size_t head = (size_t)(pb->skvp * pb->d) * attn_dtype_size(pb->dtype);
    for (int64_t bi = 0; bi < pb->b && !stopped(w); bi++)
        for (int64_t h = 0; h < pb->hq; h++) {
            size_t dst = (size_t)(bi * pb->hq + h) * head;
            size_t src = (size_t)(bi * pb->hkv + h / g) * head;
            memcpy((char *)w->krep + dst, (const char *)pb->k + src, head);
            memcpy((char *)w->vrep + dst, (const char *)pb->v + src, head);
        }
    cpu_problem mha = *pb;
    mha.hkv = pb->hq;
    mha.k = w->krep;
    mha.v = w->vrep;
    run_split(&mha, w);
}

/* Query heads kvh*g .. kvh*g+g-1 are adjacent in [b, hq, sqp, d], so the
 * group is one contiguous block of g*sqp rows: one GEMM per (b, KV head). */
static void run_folded(const cpu_problem *pb, cpu_work *w)
{
    const int64_t g = pb->hq / pb->hkv, d = pb->d;
    for (int64_t bi = 0; bi < pb->b && !w->stop; bi++)
        for (int64_t kvh = 0; kvh < pb->hkv && !w->stop; kvh++)
            attend_block(pb, w, g * pb->sqp, (size_t)((bi * pb->hq + kvh * g) * pb->sqp * d),
                         (size_t)((bi * pb->hkv + kvh) * pb->skvp * d));
}

/* ---- fused */

/* One block of nr query rows (positions r0..r0+nr-1 of the head at element
 * qoff) against the KV head at koff, FlashAttention-2 style: for each key
 * tile, scores S = Q K^T (nr x FUSED_BC), then per row the running max m
 * and sum l are updated and the accumulator rescaled by exp(m_old - m_new)
 * before P V is added; the division by l happens once at the end. */
static void fused_block(const cpu_problem *pb, cpu_work *w, int64_t r0, int64_t nr,
                        size_t qoff, size_t koff)
{
    const attn_dtype t = pb->dtype;
    const int64_t d = pb->d, ldd = w->ldd, ldk = w->ldk;
    const float scale = (float)(1.0 / sqrt((double)d));
    float *restrict m = w->m, *restrict l = w->l;

    load_rows(pb->q, t, descale_of(pb, 0), qoff + (size_t)(r0 * d), nr, d, w->qf, ldd);
    for (int64_t r = 0; r < nr; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        memset(w->of + r * ldd, 0, (size_t)ldd * sizeof(float));
    }
    /* Visible counts grow with the position: the last row sees the most. */
    const int64_t nmax = cpu_visible(pb, r0 + nr - 1);
    for (int64_t j0 = 0; j0 < nmax; j0 += FUSED_BC) {
        const int64_t nk = min64(FUSED_BC, pb->skvp - j0);
        load_keys_t(pb->k, t, descale_of(pb, 1), koff + (size_t)(j0 * d), nk, d, w->kt, ldk,
                    w->tmp);
        load_rows(pb->v, t, descale_of(pb, 2), koff + (size_t)(j0 * d), nk, d, w->vf, ldd);
        gemm_qk(nr, round_lanes(nk), d, w->qf, ldd, w->kt, ldk, w->s);
        for (int64_t r = 0; r < nr; r++) {
            int64_t nv = cpu_visible(pb, r0 + r) - j0; /* visible keys in this tile */
            if (nv <= 0)
                continue;
            if (nv > nk)
                nv = nk;
            float *restrict sr = w->s + r * ldk;
            float mx = m[r];
            for (int64_t j = 0; j < nv; j++)
                mx = sr[j] > mx ? sr[j] : mx;
            const float alpha = expf((m[r] - mx) * scale); /* 0 on the first tile */
            float sum = 0.0f;
            for (int64_t j = 0; j < nv; j++) {
                sr[j] = expf((sr[j] - mx) * scale);
                sum += sr[j];
            }
            l[r] = l[r] * alpha + sum;
            m[r] = mx;
            float *restrict orow = w->of + r * ldd;
            for (int64_t c = 0; c < ldd; c++)
                orow[c] *= alpha;
            row_pv(sr, nv, w->vf, ldd, orow);
        }
    }
    for (int64_t r = 0; r < nr; r++) {
        float *orow = w->of + r * ldd;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f; /* l = 0: no key, row stays 0 */
        for (int64_t c = 0; c < d; c++)
            orow[c] *= inv;
        store_row(pb->out, t, qoff + (size_t)((r0 + r) * d), orow, d);
    }
}

static void run_fused(const cpu_problem *pb, cpu_work *w)
{
    const int64_t g = pb->hq / pb->hkv, d = pb->d;
    for (int64_t bi = 0; bi < pb->b && !w->stop; bi++)
        for (int64_t h = 0; h < pb->hq && !w->stop; h++) {
            size_t qoff = (size_t)((bi * pb->hq + h) * pb->sqp * d);
            size_t koff = (size_t)((bi * pb->hkv + h / g) * pb->skvp * d);
            for (int64_t r0 = 0; r0 < pb->sqp && !stopped(w); r0 += FUSED_BR)
                fused_block(pb, w, r0, min64(FUSED_BR, pb->sqp - r0), qoff, koff);
        }
}

/* ---- the kernels, as cpu_variants.c's descriptors name them */

const cpu_kernel cpu_fused_kernel = {run_fused, fused_dims, 0};
const cpu_kernel cpu_split_kernel = {run_split, split_dims, 0};
const cpu_kernel cpu_split_repeat_kernel = {run_split_repeat, split_dims, 1};
const cpu_kernel cpu_folded_kernel = {run_folded, folded_dims, 0};

int cpu_kernel_run(const cpu_kernel *k, const cpu_problem *pb, cpu_work *w)
{
    if (k == NULL || w == NULL || w->kernel != k)
        return ATTUNE_EINVAL; /* a workspace of another kernel: fail loudly */
    w->kv_src = NULL; /* inputs may have changed since the last run */
    w->stop = 0;
    k->run(pb, w);
    return w->stop ? ATTUNE_ECANCELED : 0;
}
