/* cpu_backend.c -- the CPU backend: attn_cpu_ops, the table the rest of
 * attune drives the CPU through (device identity, tactics, sessions,
 * plans with their pad copies, runs and timing).
 *
 * One device, index 0. A session owns q, k, v in the storage dtype and out
 * in attn_dtype_out of it; an e4m3 session also the bf16 source its inputs
 * were quantized from and their descales (attn_ops.reference_source). The
 * CPU emulates e4m3: the arithmetic of an FP8 kernel (inputs rounded to
 * e4m3, descaled on load, fp32 sums, bf16 out), at no FP8 speed;
 * a plan owns the padded copies its pad needs and the variant's workspace.
 * A plan holds a pointer to its session: close the session only after
 * freeing its plans. Nothing here is thread-safe per session or plan;
 * distinct sessions may be used from distinct threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <sys/utsname.h>

#include "../../common/hash.h"
#include "../../common/power.h"
#include "../dtype.h"
#include "../cancel.h"
#include "cpu_internal.h"

#ifndef ATTUNE_VERSION
#error "ATTUNE_VERSION comes from CMakeLists.txt (add_compile_definitions)"
#endif
#ifndef ATTUNE_KERNELS_HASH
#error "ATTUNE_KERNELS_HASH comes from CMakeLists.txt (attune_core's definitions)"
#endif

struct attn_session {
    attn_shape s;
    void *q, *k, *v, *out; /* out in attn_dtype_out(s.dtype) */
    size_t nq, nkv; /* elements in q (= out) and in k (= v) */
    double bytes;   /* of every buffer below */
    /* e4m3: the bf16 values q, k, v were quantized from, and the descale
     * of each (stored x descale ~ source); NULL and 1 otherwise */
    uint16_t *src[3];
    float descale[3];
};

/* ---- memory */

/* Contract in cpu_internal.h. */
double cpu_mem_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psize <= 0)
        return 8.0 * 1024 * 1024 * 1024; /* unknown: a laptop's worth */
    return 0.5 * (double)pages * (double)psize;
}

/* ---- device identity */

/* Copy s into buf without surrounding white space. */
static void copy_trimmed(char *buf, size_t len, const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    snprintf(buf, len, "%.*s", (int)n, s);
}

/* The "model name" of /proc/cpuinfo (x86; most ARM kernels lack it), else
 * uname's machine ("aarch64"), else "unknown". */
static void cpu_model_name(char *buf, size_t len)
{
    char line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    buf[0] = 0;
    if (f != NULL) {
        while (fgets(line, sizeof line, f) != NULL) {
            char *colon = strchr(line, ':');
            if (strncmp(line, "model name", 10) == 0 && colon != NULL) {
                copy_trimmed(buf, len, colon + 1);
                break;
            }
        }
        fclose(f);
    }
    struct utsname u;
    if (buf[0] == 0 && uname(&u) == 0)
        copy_trimmed(buf, len, u.machine);
    if (buf[0] == 0)
        snprintf(buf, len, "unknown");
}

/* What tells this host apart: /etc/machine-id, else the host name. */
static void host_key(char *buf, size_t len)
{
    FILE *f = fopen("/etc/machine-id", "r");
    buf[0] = 0;
    if (f != NULL) {
        char line[128];
        if (fgets(line, sizeof line, f) != NULL)
            copy_trimmed(buf, len, line);
        fclose(f);
    }
    if (buf[0] == 0 && gethostname(buf, len) != 0)
        buf[0] = 0;
    buf[len - 1] = 0;
}

/* Maximum frequency of CPU 0 in MHz from cpufreq (stable, unlike the
 * current "cpu MHz"), 0 when not exposed (most VMs). */
static int cpu_max_mhz(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq", "r");
    long khz = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &khz) != 1)
            khz = 0;
        fclose(f);
    }
    return khz > 0 ? (int)(khz / 1000) : 0;
}

static int cpu_device_count(void) { return 1; }

/* The CPU as a device. id = "CPU-" + 16 hex of FNV-1a over the host key
 * and the model name, NUL-separated: stable across reboots and attune
 * versions, distinct between hosts. info or stack may be NULL.
 * ATTUNE_ENODEV for an index other than 0. */
static int cpu_device_info(int index, attn_device_info *info, attn_stack *stack)
{
    if (index != 0)
        return ATTUNE_ENODEV;
    if (info != NULL) {
        char host[256], model[sizeof info->name];
        host_key(host, sizeof host);
        cpu_model_name(model, sizeof model);
        uint64_t h = hash_fnv1a64_init();
        h = hash_fnv1a64(h, host, strlen(host) + 1);
        h = hash_fnv1a64(h, model, strlen(model) + 1);

        memset(info, 0, sizeof *info);
        snprintf(info->id, sizeof info->id, "CPU-%016llx", (unsigned long long)h);
        snprintf(info->name, sizeof info->name, "%s", model);
        snprintf(info->kind, sizeof info->kind, "cpu");
        info->index = -1;
        info->cc_major = info->cc_minor = 0;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        info->sm_count = cores > 0 ? (int)cores : 1;
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        info->memory_mb = pages > 0 && psize > 0 ? (int64_t)pages * psize / (1024 * 1024) : 0;
        info->clock_mhz = cpu_max_mhz();
        info->mem_clock_mhz = 0;
    }
    if (stack != NULL) {
        memset(stack, 0, sizeof *stack);
        snprintf(stack->runtime, sizeof stack->runtime, "cpu");
        snprintf(stack->attune, sizeof stack->attune, "%s", ATTUNE_VERSION);
        snprintf(stack->kernels, sizeof stack->kernels, "%s", ATTUNE_KERNELS_HASH);
        /* On a Jetson nvpmodel sets the CPU cores and clocks too. */
        attn_power pw;
        attn_power_read(NULL, &pw);
        attn_power_key(&pw, stack->power, sizeof stack->power);
        attn_stack_finish(stack);
    }
    return 0;
}

/* ---- tactics */

/* The CPU as its families' listings see it. */
static const attn_device_info cpu_list_dev = {.kind = "cpu", .index = -1};

/* The tactics of every CPU family (kernels/cpu/cpu_variants.c), in the
 * table's order. Writes up to max, returns the total count (4 pads for
 * each variant listed), or ATTUNE_ENODEV / the shape's validation error /
 * ATTUNE_EINVAL. */
static int cpu_tactics(int index, const attn_shape *s, attn_tactic *out, int max)
{
    if (index != 0)
        return ATTUNE_ENODEV;
    if (s == NULL || max < 0 || (max > 0 && out == NULL))
        return ATTUNE_EINVAL;
    int rc = attn_shape_validate(s, NULL, 0);
    if (rc != 0)
        return rc;
    return attn_family_list("cpu", &cpu_list_dev, s, out, max);
}

/* ---- sessions */

/* Contract in cpu_internal.h. */
int cpu_fill_normal(void *buf, attn_dtype t, size_t n, uint64_t *state)
{
    const double two_pi = 6.283185307179586476925;
    size_t i = 0, next_poll = (size_t)1 << 20;
    while (i < n) {
        if (i >= next_poll) {
            if (attn_cancel_poll())
                return ATTUNE_ECANCELED;
            next_poll = i + ((size_t)1 << 20);
        }
        /* Box-Muller on 53-bit uniforms: u1 in (0, 1] keeps log finite. */
        double u1 = ((double)(hash_splitmix64(state) >> 11) + 1.0) * 0x1p-53;
        double u2 = (double)(hash_splitmix64(state) >> 11) * 0x1p-53;
        double rad = sqrt(-2.0 * log(u1));
        float z[2] = {(float)(rad * cos(two_pi * u2)), (float)(rad * sin(two_pi * u2))};
        for (int k = 0; k < 2 && i < n; k++)
            if (dtype_round(t, z[k]) != 0.0f) /* |z| < 2^-25 in f16: redraw */
                dtype_store(buf, t, i++, z[k]);
    }
    return 0;
}

static void cpu_session_close(attn_session *ss)
{
    if (ss == NULL)
        return;
    free(ss->q);
    free(ss->k);
    free(ss->v);
    free(ss->out);
    for (int i = 0; i < 3; i++)
        free(ss->src[i]);
    free(ss);
}

/* Contract in cpu_internal.h. */
void cpu_quantize_e4m3(const uint16_t *src, size_t n, uint8_t *dst, float *descale)
{
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        float a = fabsf(dtype_bf16_to_f32(src[i]));
        amax = a > amax ? a : amax;
    }
    const float ds = amax > 0.0f ? amax / DTYPE_E4M3_MAX : 1.0f;
    for (size_t i = 0; i < n; i++)
        dst[i] = dtype_f32_to_e4m3(dtype_bf16_to_f32(src[i]) / ds);
    *descale = ds;
}

/* Fill an e4m3 session as attn_ops.reference_source says: q, then k, then
 * v drawn as bf16 standard normals from *state (the source, kept), each
 * tensor quantized with its own descale. */
static int fill_e4m3(attn_session *ss, uint64_t *state)
{
    void *dst[3] = {ss->q, ss->k, ss->v};
    for (int i = 0; i < 3; i++) {
        size_t n = i == 0 ? ss->nq : ss->nkv;
        int rc = cpu_fill_normal(ss->src[i], ATTN_BF16, n, state);
        if (rc != 0)
            return rc;
        cpu_quantize_e4m3(ss->src[i], n, dst[i], &ss->descale[i]);
    }
    return 0;
}

/* Allocate q, k, v, out for s; fill q, then k, then v from one SplitMix64
 * stream seeded with seed (e4m3: their bf16 sources, then quantized:
 * fill_e4m3); out starts as NaN. ATTUNE_ENOMEM when the buffers exceed
 * cpu_mem_budget() or malloc fails; the shape's validation
 * error for a bad shape; ATTUNE_ENODEV for an index other than 0. On error
 * *out is NULL and nothing is leaked. */
static int cpu_session_open(int index, const attn_shape *s, uint64_t seed, attn_session **out)
{
    attn_session *ss = NULL;
    int rc = ATTUNE_EINVAL;

    if (out == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if (s == NULL)
        goto fail;
    rc = ATTUNE_ENODEV;
    if (index != 0)
        goto fail;
    if ((rc = attn_shape_validate(s, NULL, 0)) != 0)
        goto fail;

    const int e4m3 = s->dtype == ATTN_E4M3;
    const size_t es = attn_dtype_size(s->dtype), eo = attn_dtype_size(attn_dtype_out(s->dtype));
    const double nq = (double)s->b * (double)s->hq * (double)s->sq * (double)s->d;
    const double nkv = (double)s->b * (double)s->hkv * (double)s->skv * (double)s->d;
    const double bytes = (nq + 2.0 * nkv) * (double)es + nq * (double)eo +
                         (e4m3 ? (nq + 2.0 * nkv) * 2.0 : 0.0); /* the bf16 source */
    rc = ATTUNE_ENOMEM;
    if (bytes > cpu_mem_budget())
        goto fail;
    ss = calloc(1, sizeof *ss);
    if (ss == NULL)
        goto fail;
    ss->s = *s;
    ss->nq = (size_t)nq; /* validated: <= ATTN_MAX_ELEMS */
    ss->nkv = (size_t)nkv;
    ss->bytes = bytes;
    ss->q = malloc(ss->nq * es);
    ss->out = malloc(ss->nq * eo);
    ss->k = malloc(ss->nkv * es);
    ss->v = malloc(ss->nkv * es);
    if (!ss->q || !ss->out || !ss->k || !ss->v)
        goto fail;
    for (int i = 0; i < 3; i++) {
        ss->descale[i] = 1.0f;
        if (e4m3 && (ss->src[i] = malloc((i == 0 ? ss->nq : ss->nkv) * 2)) == NULL)
            goto fail;
    }

    uint64_t state = seed;
    if (e4m3)
        rc = fill_e4m3(ss, &state);
    else if ((rc = cpu_fill_normal(ss->q, s->dtype, ss->nq, &state)) == 0 &&
             (rc = cpu_fill_normal(ss->k, s->dtype, ss->nkv, &state)) == 0)
        rc = cpu_fill_normal(ss->v, s->dtype, ss->nkv, &state);
    if (rc != 0)
        goto fail;
    dtype_fill_nan(ss->out, attn_dtype_out(s->dtype), ss->nq);
    *out = ss;
    return 0;
fail:
    cpu_session_close(ss);
    return rc;
}

/* 0 when rows[0..nrows) all index output rows of ss and dst can take them;
 * ATTUNE_EINVAL otherwise. */
static int check_rows(const attn_session *ss, const int64_t *rows, int nrows, const double *dst)
{
    if (ss == NULL || nrows < 0 || (nrows > 0 && (rows == NULL || dst == NULL)))
        return ATTUNE_EINVAL;
    const int64_t total = ss->s.b * ss->s.hq * ss->s.sq;
    for (int n = 0; n < nrows; n++)
        if (rows[n] < 0 || rows[n] >= total)
            return ATTUNE_EINVAL;
    return 0;
}

/* float64 reference of rows from the inputs as stored (see
 * cpu_reference_descaled: e4m3 ones times the session's descales). */
static int cpu_session_reference(attn_session *ss, const int64_t *rows, int nrows, double *ref)
{
    int rc = check_rows(ss, rows, nrows, ref);
    if (rc != 0)
        return rc;
    return cpu_reference_descaled(&ss->s, ss->q, ss->k, ss->v,
                                  ss->s.dtype == ATTN_E4M3 ? ss->descale : NULL, rows, nrows,
                                  ref);
}

/* float64 reference of rows from an e4m3 session's bf16 source (the same
 * shape in bf16); ATTUNE_EUNSUPP for a session of another dtype. */
static int cpu_session_reference_source(attn_session *ss, const int64_t *rows, int nrows,
                                        double *ref)
{
    int rc = check_rows(ss, rows, nrows, ref);
    if (rc != 0)
        return rc;
    if (ss->s.dtype != ATTN_E4M3)
        return ATTUNE_EUNSUPP;
    attn_shape bs = ss->s;
    bs.dtype = ATTN_BF16;
    return cpu_reference(&bs, ss->src[0], ss->src[1], ss->src[2], rows, nrows, ref);
}

static int cpu_poison(attn_session *ss)
{
    if (ss == NULL)
        return ATTUNE_EINVAL;
    dtype_fill_nan(ss->out, attn_dtype_out(ss->s.dtype), ss->nq);
    return 0;
}

/* Output rows as double, out[n * d + c]; ATTUNE_EINVAL for a row out of range. */
static int cpu_fetch_rows(attn_session *ss, const int64_t *rows, int nrows, double *out)
{
    int rc = check_rows(ss, rows, nrows, out);
    if (rc != 0)
        return rc;
    const int64_t d = ss->s.d;
    const attn_dtype ot = attn_dtype_out(ss->s.dtype);
    for (int n = 0; n < nrows; n++)
        for (int64_t c = 0; c < d; c++)
            out[(size_t)n * (size_t)d + (size_t)c] =
                dtype_load_f64(ss->out, ot, (size_t)(rows[n] * d + c));
    return 0;
}

/* ---- plans: layout and pad copies, run, time
 *
 * A plan runs on caller buffers (attn_io). The kernels read contiguous
 * [b, h, s, d] buffers of the padded lengths; when the call's buffers are
 * exactly that (contiguous, and the pad changes no length) they run on them
 * in place, otherwise the plan copies the real rows in (strided, zero
 * padded) and the real rows of the output back out. Unlike the GPU, the
 * CPU plan may allocate at run time: copies for a strided layout are made
 * on the first call that needs them, and a call at new lengths remakes
 * the workspace (docs/libattune.md). */

/* Bytes of one [b, heads, rows, d] buffer of dtype t of shape s. */
static double buf_bytes(const attn_shape *s, attn_dtype t, int64_t heads, int64_t rows)
{
    return (double)s->b * (double)heads * (double)rows * (double)s->d *
           (double)attn_dtype_size(t);
}

/* Copy the real rows of view src (rows x d per head) into contiguous dst
 * [b, heads, rows_pad, d], and zero rows rows..rows_pad: padded keys are
 * masked, but a masked score times a non-finite V row would still be NaN. */
static void pack(void *dst, int64_t rows_pad, const attn_tensor *src, int64_t b,
                 int64_t heads, int64_t rows, int64_t d, size_t es)
{
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t h = 0; h < heads; h++) {
            char *head = (char *)dst + (size_t)((bi * heads + h) * rows_pad * d) * es;
            for (int64_t i = 0; i < rows; i++)
                memcpy(head + (size_t)(i * d) * es,
                       (const char *)src->data +
                           (size_t)(bi * src->sb + h * src->sh + i * src->ss) * es,
                       (size_t)d * es);
            memset(head + (size_t)(rows * d) * es, 0, (size_t)((rows_pad - rows) * d) * es);
        }
}

/* The real rows of contiguous src [b, heads, rows_pad, d] into view dst. */
static void unpack(const attn_tensor *dst, const void *src, int64_t rows_pad, int64_t b,
                   int64_t heads, int64_t rows, int64_t d, size_t es)
{
    for (int64_t bi = 0; bi < b; bi++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < rows; i++)
                memcpy((char *)dst->data + (size_t)(bi * dst->sb + h * dst->sh + i * dst->ss) * es,
                       (const char *)src + (size_t)(((bi * heads + h) * rows_pad + i) * d) * es,
                       (size_t)d * es);
}

static void cpu_plan_free(attn_plan *p)
{
    if (p == NULL)
        return;
    if (p->fam != NULL)
        p->fam->kernel->free(p);
    free(p->qp);
    free(p->op);
    free(p->kp);
    free(p->vp);
    free(p);
}

/* The problem of a call of p at the lengths of rs (sizes only; buffers
 * are set by the caller). */
static void problem_of(const attn_plan *p, const attn_shape *rs, cpu_problem *pb)
{
    memset(pb, 0, sizeof *pb);
    pb->dtype = rs->dtype;
    pb->b = rs->b;
    pb->hq = rs->hq;
    pb->hkv = rs->hkv;
    pb->d = rs->d;
    pb->sq = rs->sq;
    pb->skv = rs->skv;
    pb->sqp = attn_round_up(rs->sq, p->t.pad);
    pb->skvp = attn_round_up(rs->skv, p->t.pad);
    pb->diag = rs->skv - rs->sq; /* from the real lengths, always */
    pb->causal = rs->causal;
    pb->descale[0] = pb->descale[1] = pb->descale[2] = 1.0f;
}

/* (Re)allocate *buf to hold at least bytes; the old contents go. A new
 * buffer is zeroed, or NaN-filled when nan (an output: a row the kernel
 * never writes shows up after the copy out). */
static int regrow(void **buf, size_t *cap, double bytes, attn_dtype t, int nan)
{
    if (*buf != NULL && (double)*cap >= bytes)
        return 0;
    free(*buf);
    *cap = 0;
    *buf = calloc(1, bytes > 0 ? (size_t)bytes : 1);
    if (*buf == NULL)
        return ATTUNE_ENOMEM;
    *cap = (size_t)bytes;
    if (nan)
        dtype_fill_nan(*buf, t, *cap / attn_dtype_size(t));
    return 0;
}

/* Buffers and workspace for a call at the lengths of pb: contiguous
 * (padded) copies of q and out where need_q, of k and v where need_kv, and
 * the workspace when the lengths changed since it was made. */
static int prepare(attn_plan *p, const cpu_problem *pb, int need_q, int need_kv)
{
    const attn_shape *s = &p->s;
    const attn_dtype ot = attn_dtype_out(s->dtype);
    const double nq = buf_bytes(s, s->dtype, s->hq, pb->sqp);
    const double no = buf_bytes(s, ot, s->hq, pb->sqp);
    const double nkv = buf_bytes(s, s->dtype, s->hkv, pb->skvp);
    size_t cap;
    int rc;
    if (need_q) {
        if ((rc = regrow(&p->qp, &p->q_cap, nq, s->dtype, 0)) != 0 ||
            (rc = regrow(&p->op, &p->o_cap, no, ot, 1)) != 0)
            return rc;
    }
    if (need_kv) {
        cap = p->kv_cap;
        if ((rc = regrow(&p->kp, &cap, nkv, s->dtype, 0)) != 0 ||
            (rc = regrow(&p->vp, &p->kv_cap, nkv, s->dtype, 0)) != 0)
            return rc;
    }
    if (p->w == NULL || p->pb.sqp != pb->sqp || p->pb.skvp != pb->skvp)
        return p->fam->kernel->plan(p, pb, NULL, 0); /* the workspace of these lengths */
    return 0;
}

/* Contract in attn.h (attn_ops.plan_new). Makes at once what a call at the
 * planned lengths on contiguous buffers needs (padded copies where the pad
 * changes a length, the workspace) so the memory budget is checked here.
 * split_repeat and folded are accepted for hkv == hq too (they compute the
 * same thing), though tactics() does not list them. ATTUNE_EINVAL for a
 * bad pad or an unknown variant, ATTUNE_EUNSUPP for a tactic no CPU
 * family owns (kernels/cpu/cpu_variants.c),
 * ATTUNE_ENOMEM beyond the memory budget (less `used`, what the caller's
 * buffers take). */
static int plan_make(int index, const attn_shape *s, const attn_tactic *t, int flags,
                     double used, attn_plan **out, char *note, size_t notelen)
{
    attn_plan *p = NULL;
    int rc = ATTUNE_EINVAL;

    if (note != NULL && notelen > 0)
        note[0] = 0;
    if (out == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if (index != 0)
        return ATTUNE_ENODEV;
    if (s == NULL || t == NULL || attn_family_variant(t->variant) == NULL ||
        attn_shape_validate(s, NULL, 0) != 0)
        goto fail;
    if (t->pad != 1 && t->pad != 8 && t->pad != 16 && t->pad != 64)
        goto fail;
    rc = ATTUNE_EUNSUPP;
    const attn_variant_desc *fam = attn_family_of(t, "cpu");
    if (fam == NULL || fam->kernel == NULL)
        goto fail;

    rc = ATTUNE_ENOMEM;
    p = calloc(1, sizeof *p);
    if (p == NULL)
        goto fail;
    p->s = *s;
    p->t = *t;
    p->fam = fam;
    p->flags = flags;
    cpu_problem pb;
    problem_of(p, s, &pb);
    attn_cost cost;
    fam->describe(s, t, NULL, 0, &cost);
    double bytes = cost.work_bytes;
    if (pb.sqp != pb.sq)
        bytes += buf_bytes(s, s->dtype, s->hq, pb.sqp) +
                 buf_bytes(s, attn_dtype_out(s->dtype), s->hq, pb.sqp);
    if (pb.skvp != pb.skv)
        bytes += 2.0 * buf_bytes(s, s->dtype, s->hkv, pb.skvp);
    if (used + bytes > cpu_mem_budget())
        goto fail;
    p->pb.sqp = p->pb.skvp = -1; /* nothing prepared yet */
    if ((rc = prepare(p, &pb, pb.sqp != pb.sq, pb.skvp != pb.skv)) != 0)
        goto fail;
    p->pb = pb;
    *out = p;
    return 0;
fail:
    cpu_plan_free(p);
    return rc;
}

static int cpu_plan_new(int index, const attn_shape *s, const attn_tactic *t, int flags,
                        attn_plan **out, char *note, size_t notelen)
{
    return plan_make(index, s, t, flags, 0.0, out, note, notelen);
}

/* A plan on the session's shape, bound to it: run() and time() use the
 * session's buffers. */
static int cpu_plan(attn_session *ss, const attn_tactic *t, attn_plan **out)
{
    if (out == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if (ss == NULL)
        return ATTUNE_EINVAL;
    int rc = plan_make(0, &ss->s, t, ATTN_PLAN_CONTIGUOUS, ss->bytes, out, NULL, 0);
    if (rc != 0)
        return rc;
    (*out)->ss = ss; /* the padded copies fill on the first call (time() makes one) */
    return 0;
}

/* Contract in attn.h (attn_ops.launch): copies in where the layout or the
 * pad needs them, the kernel, the copy out. Synchronous; stream unused.
 * e4m3: io->descale read now (host memory; NULL: 1). */
static int cpu_launch(attn_plan *p, const attn_io *io, void *stream)
{
    (void)stream;
    attn_shape rs;
    cpu_problem pb;
    int rc;

    if (p == NULL || (rc = attn_io_check(&p->s, io, &rs, NULL, 0)) != 0)
        return ATTUNE_EINVAL;
    problem_of(p, &rs, &pb);
    if (rs.dtype == ATTN_E4M3)
        for (int i = 0; i < 3; i++)
            pb.descale[i] = io->descale[i] != NULL ? *io->descale[i] : 1.0f;
    const size_t es = attn_dtype_size(rs.dtype), eo = attn_dtype_size(attn_dtype_out(rs.dtype));
    const int in_q = pb.sqp == pb.sq && attn_tensor_contiguous(&io->q, rs.hq, rs.sq, rs.d) &&
                     attn_tensor_contiguous(&io->o, rs.hq, rs.sq, rs.d);
    const int in_kv = pb.skvp == pb.skv &&
                      attn_tensor_contiguous(&io->k, rs.hkv, rs.skv, rs.d) &&
                      attn_tensor_contiguous(&io->v, rs.hkv, rs.skv, rs.d);
    if ((p->flags & ATTN_PLAN_CONTIGUOUS) && (!attn_tensor_contiguous(&io->q, rs.hq, rs.sq, rs.d) ||
                                              !attn_tensor_contiguous(&io->o, rs.hq, rs.sq, rs.d) ||
                                              !attn_tensor_contiguous(&io->k, rs.hkv, rs.skv, rs.d) ||
                                              !attn_tensor_contiguous(&io->v, rs.hkv, rs.skv, rs.d)))
        return ATTUNE_EINVAL;
    if ((rc = prepare(p, &pb, !in_q, !in_kv)) != 0)
        return rc;
    if (!in_q)
        pack(p->qp, pb.sqp, &io->q, pb.b, pb.hq, pb.sq, pb.d, es);
    if (!in_kv) {
        pack(p->kp, pb.skvp, &io->k, pb.b, pb.hkv, pb.skv, pb.d, es);
        pack(p->vp, pb.skvp, &io->v, pb.b, pb.hkv, pb.skv, pb.d, es);
    }
    pb.q = in_q ? io->q.data : p->qp;
    pb.out = in_q ? io->o.data : p->op;
    pb.k = in_kv ? io->k.data : p->kp;
    pb.v = in_kv ? io->v.data : p->vp;
    p->pb = pb;
    if ((rc = p->fam->kernel->run(p, &pb)) != 0)
        return rc;
    if (!in_q)
        unpack(&io->o, p->op, pb.sqp, pb.b, pb.hq, pb.sq, pb.d, eo);
    return 0;
}

/* The session's buffers as a call of the plan, with its descales. */
static void session_io(const attn_session *ss, attn_io *io)
{
    attn_io_contiguous(&ss->s, ss->q, ss->k, ss->v, ss->out, io);
    for (int i = 0; i < 3; i++)
        io->descale[i] = &ss->descale[i];
}

/* One call of a session's plan on the session's buffers. */
static int cpu_run(attn_plan *p)
{
    if (p == NULL || p->ss == NULL)
        return ATTUNE_EINVAL;
    attn_io io;
    session_io(p->ss, &io);
    return cpu_launch(p, &io, NULL);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* iters back-to-back calls on CLOCK_MONOTONIC, on the session's buffers;
 * out->us per call. Without copies only the kernel runs, on the buffers of
 * the last call (a full call is made first if there was none). */
static int cpu_time(attn_plan *p, int iters, int with_copies, attn_timing *out)
{
    int rc;
    if (p == NULL || p->ss == NULL || out == NULL || iters < 1)
        return ATTUNE_EINVAL;
    if (!with_copies && p->pb.q == NULL && (rc = cpu_run(p)) != 0)
        return rc;
    const double t0 = now_us();
    for (int it = 0; it < iters; it++) {
        rc = with_copies ? cpu_run(p) : p->fam->kernel->run(p, &p->pb);
        if (rc != 0)
            return rc;
    }
    out->us = (now_us() - t0) / iters;
    return 0;
}

const attn_ops attn_cpu_ops = {
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .tactics = cpu_tactics,
    .session_open = cpu_session_open,
    .session_close = cpu_session_close,
    .reference = cpu_session_reference,
    .reference_source = cpu_session_reference_source,
    .poison = cpu_poison,
    .fetch_rows = cpu_fetch_rows,
    .plan = cpu_plan,
    .plan_free = cpu_plan_free,
    .run = cpu_run,
    .time = cpu_time,
    .plan_note = NULL,
    .plan_new = cpu_plan_new,
    .launch = cpu_launch,
    .list_cheap = 1, /* the descriptors' list(): arithmetic on the shape */
};
