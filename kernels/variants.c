/* variants.c -- the table of kernel families (kernels/variant.h) and what
 * every descriptor shares: the pad copies, the plain description, the
 * SM limits of each compute capability. */
#include "variant.h"

#include <math.h>
#include <string.h>

/* ---- the table: one line per family, in listing order per backend */

extern const attn_variant_desc attn_cpu_fused, attn_cpu_split, attn_cpu_split_repeat,
    attn_cpu_folded;
extern const attn_variant_desc attn_cuda_fused, attn_cuda_fused_sm90a, attn_cuda_fused_splitkv,
    attn_cuda_fused_f32, attn_cuda_split, attn_cuda_split_repeat, attn_cuda_folded,
    attn_cuda_cudnn;

static const attn_variant_desc *table[ATTN_MAX_FAMILIES] = {
    &attn_cpu_fused,          /* kernels/cpu/cpu_variants.c */
    &attn_cpu_split,
    &attn_cpu_split_repeat,
    &attn_cpu_folded,
    &attn_cuda_fused,         /* kernels/cuda/desc_fused.c: version 1 tiles */
    &attn_cuda_fused_sm90a,   /* kernels/cuda/desc_fused.c: version 3 (wgmma, TMA) */
    &attn_cuda_fused_splitkv, /* kernels/cuda/desc_fused.c: version 2 (flash-decoding) */
    &attn_cuda_fused_f32,     /* kernels/cuda/desc_fused_f32.c: FP32 on the SIMT cores */
    &attn_cuda_split,         /* kernels/cuda/desc_split.c: cuBLAS GEMMs */
    &attn_cuda_split_repeat,
    &attn_cuda_folded,
    &attn_cuda_cudnn,         /* kernels/cuda/desc_cudnn.c */
};
#define NBUILTIN 12

static int ntable = NBUILTIN;

const attn_variant_desc *const *attn_families(int *n)
{
    *n = ntable;
    return table;
}

const attn_variant_desc *attn_family_of(const attn_tactic *t, const char *backend)
{
    if (t == NULL)
        return NULL;
    for (int i = 0; i < ntable; i++)
        if (table[i]->variant == t->variant &&
            (backend == NULL || strcmp(table[i]->backend, backend) == 0) && table[i]->owns(t))
            return table[i];
    return NULL;
}

const attn_variant_desc *attn_family_variant(attn_variant v)
{
    for (int i = 0; i < ntable; i++)
        if (table[i]->variant == v)
            return table[i];
    return NULL;
}

int attn_family_register(const attn_variant_desc *d)
{
    if (d == NULL || d->name == NULL || d->family == NULL || d->backend == NULL ||
        d->owns == NULL || d->describe == NULL || (unsigned)d->variant >= ATTN_MAX_VARIANTS)
        return ATTUNE_EINVAL;
    for (int i = 0; i < ntable; i++)
        if ((table[i]->variant == d->variant) != (strcmp(table[i]->name, d->name) == 0))
            return ATTUNE_EINVAL; /* one name per id, one id per name */
    if (ntable >= ATTN_MAX_FAMILIES)
        return ATTUNE_ERANGE;
    int rc = attn_variant_register(d->variant, d->name); /* the tactic text's word */
    if (rc != 0)
        return rc;
    table[ntable++] = d;
    return 0;
}

void attn_family_reset(void)
{
    for (int i = NBUILTIN; i < ntable; i++)
        table[i] = NULL;
    ntable = NBUILTIN;
    attn_variant_reset();
}

int attn_family_list(const char *backend, const attn_device_info *dev, const attn_shape *s,
                     attn_tactic *out, int max)
{
    int n = 0;
    for (int i = 0; i < ntable; i++) {
        const attn_variant_desc *f = table[i];
        if (strcmp(f->backend, backend) != 0 || f->kernel == NULL || f->kernel->list == NULL ||
            !(attn_family_dtypes(f) & ATTN_DTYPE_BIT(s->dtype)))
            continue;
        int room = n < max ? max - n : 0;
        int k = f->kernel->list(dev, s, room > 0 ? out + n : NULL, room);
        if (k < 0)
            return k;
        n += k;
    }
    return n;
}

int attn_describe(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                  unsigned hints, attn_cost *out)
{
    const attn_variant_desc *f = attn_family_of(t, dev != NULL ? dev->kind : NULL);
    if (f == NULL && dev != NULL)
        f = attn_family_of(t, NULL); /* a tactic of another backend's table */
    if (f != NULL)
        return f->describe(s, t, dev, hints, out);
    attn_cost_base(s, t, dev, out);
    return ATTUNE_ENOTFOUND;
}

/* ---- helpers for descriptors */

void attn_pad_copies(const attn_shape *s, const attn_tactic *t, double *bytes, int *copies)
{
    int pad = t->pad > 1 ? t->pad : 1;
    double es = (double)attn_dtype_size(s->dtype);
    double eo = (double)attn_dtype_size(attn_dtype_out(s->dtype)); /* e4m3: bf16 out */
    *bytes = 0;
    *copies = 0;
    if (attn_round_up(s->sq, pad) != s->sq) { /* Q in, O out: each read and written */
        *bytes += 2.0 * (es + eo) * (double)(s->b * s->hq) * (double)s->sq * (double)s->d;
        *copies += 2;
    }
    if (attn_round_up(s->skv, pad) != s->skv) { /* K in, V in */
        *bytes += 2.0 * 2.0 * es * (double)(s->b * s->hkv) * (double)s->skv * (double)s->d;
        *copies += 2;
    }
}

int attn_cost_gpu(const attn_device_info *dev)
{
    return dev != NULL && strcmp(dev->kind, "cuda") == 0 && dev->sm_count > 0;
}

void attn_cost_base(const attn_shape *s, const attn_tactic *t, const attn_device_info *dev,
                    attn_cost *out)
{
    memset(out, 0, sizeof *out);
    int pad = t->pad > 1 ? t->pad : 1;
    int64_t sqp = attn_round_up(s->sq, pad), skvp = attn_round_up(s->skv, pad);
    double es = (double)attn_dtype_size(s->dtype);
    double eo = (double)attn_dtype_size(attn_dtype_out(s->dtype)); /* e4m3: bf16 out */
    out->rows = (double)s->sq;
    out->keys = (double)skvp;
    out->head_dim = s->d;
    out->causal_skip = 1;
    out->bytes = (es + eo) * (double)s->b * (double)s->hq * (double)sqp * (double)s->d +
                 2.0 * es * (double)s->b * (double)s->hkv * (double)skvp * (double)s->d;
    out->byte_share = 1;
    out->flop_share = 1;
    out->launches = 1;
    attn_pad_copies(s, t, &out->copy_bytes, &out->copies);
    if (!attn_cost_gpu(dev))
        out->copies = 0; /* a CPU copies inside the call: no launch to pay */
}

void attn_sm_limits_of(int cc_major, int cc_minor, attn_sm_limits *out)
{
    /* CUDA programming guide, technical specifications per compute
     * capability: shared memory per SM / the most one block may opt in to
     * (1 KB is reserved per block), resident threads per SM. 8.0 and 8.7
     * (Orin): 164 / 163 KB; 8.6, 8.9 and 12.x: 100 / 99 KB; 9.0, 10.x and
     * 11.0 (Thor): 228 / 227 KB. Threads: 1536 on 8.6, 8.7, 8.9 and 12.x,
     * 2048 elsewhere. Registers: 64 K on every one since 5.0. */
    const int cc = cc_major * 10 + cc_minor;
    double kb = 100;
    if (cc == 80 || cc == 87)
        kb = 164;
    else if (cc == 90 || (cc >= 100 && cc < 120))
        kb = 228;
    out->smem_sm = kb * 1024.0;
    out->smem_block = (kb - 1) * 1024.0;
    out->threads_sm = cc == 86 || cc == 87 || cc == 89 || cc >= 120 ? 1536 : 2048;
    out->regs_sm = 65536;
}

double attn_blocks_per_sm(const attn_device_info *dev, int threads, double regs, double smem)
{
    if (dev == NULL || threads <= 0)
        return 1;
    attn_sm_limits lim;
    attn_sm_limits_of(dev->cc_major, dev->cc_minor, &lim);
    double k = (double)lim.threads_sm / threads;
    if (regs > 0)
        k = fmin(k, (double)lim.regs_sm / ((double)threads * regs));
    if (smem > 0)
        k = fmin(k, lim.smem_sm / smem);
    return k >= 1 ? floor(k) : 1;
}
