/* shape.h -- an attention shape and its element type (DESIGN.md "Words":
 * shape, dtype) as C types, their limits and their canonical text.
 *
 * The lowest layer (docs/design.md "Layers"): kernels, store, tuner,
 * lookup, daemon and CLI all speak of shapes through this header.
 *
 * A shape: q [b, hq, sq, d], k and v [b, hkv, skv, d], out [b, hq, sq, d]
 * (the buffers' layout: kernels/attn.h). Query head h reads KV head
 * h / (hq / hkv). Scale 1/sqrt(d). Causal: query i may see key j iff
 * j <= i + (skv - sq), from the real lengths; a row that sees no key is 0. */
#ifndef ATTN_SHAPE_H
#define ATTN_SHAPE_H

#include <stddef.h>
#include <stdint.h>

#include "attune_err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* e4m3: q, k and v in FP8 E4M3 (the OCP "fn" form: bias 7, largest finite
 * 448, no infinities, S.1111.111 is NaN), each with a per-tensor descale
 * factor (attn_io.descale: a stored value times its tensor's descale is
 * the value meant); out in bf16 (attn_dtype_out). */
typedef enum { ATTN_F16 = 0, ATTN_BF16 = 1, ATTN_F32 = 2, ATTN_E4M3 = 3 } attn_dtype;
#define ATTN_NDTYPES 4

typedef struct attn_shape {
    int64_t b, hq, hkv, sq, skv, d;
    attn_dtype dtype;
    int causal; /* 0 or 1 */
} attn_shape;

/* Upper bounds a shape must respect to be accepted at all (further limited
 * by the device's memory when buffers are allocated). */
#define ATTN_MAX_DIM     (1LL << 20) /* any single size */
#define ATTN_MAX_HEADDIM 1024
#define ATTN_MAX_ELEMS   (1LL << 34) /* elements in any one of q, k, v, out */

/* Longest canonical shape key, NUL included. */
#define ATTN_SHAPE_KEY_MAX 128

const char *attn_dtype_name(attn_dtype t);        /* "f16", "bf16", "f32", "e4m3" */
int attn_dtype_parse(const char *s, attn_dtype *out); /* 0 or ATTUNE_EINVAL */
size_t attn_dtype_size(attn_dtype t);             /* bytes per element */

/* The dtype of out for inputs of dtype t: bf16 for e4m3, else t. */
static inline attn_dtype attn_dtype_out(attn_dtype t) { return t == ATTN_E4M3 ? ATTN_BF16 : t; }

/* Check every invariant of a shape: sizes >= 1 and <= ATTN_MAX_DIM,
 * d <= ATTN_MAX_HEADDIM, hq % hkv == 0, known dtype, causal in {0,1},
 * element counts under ATTN_MAX_ELEMS. Returns 0 or ATTUNE_EINVAL /
 * ATTUNE_ETOOBIG with a message naming the field in err. */
int attn_shape_validate(const attn_shape *s, char *err, size_t errlen);

/* Format the canonical key `b1.hq8.hkv1.sq50.skv1018.d256.f16.nc` into buf
 * (at least ATTN_SHAPE_KEY_MAX bytes). Returns buf. */
char *attn_shape_key(const attn_shape *s, char *buf, size_t buflen);

/* Parse a canonical key. Fields must appear in canonical order, each once;
 * the result is validated. Returns 0, or ATTUNE_EINVAL/ETOOBIG with err. */
int attn_shape_parse(const char *key, attn_shape *out, char *err, size_t errlen);

/* Group size g = hq / hkv. */
static inline int64_t attn_shape_group(const attn_shape *s) { return s->hq / s->hkv; }

/* FLOPs of the attention proper (2 GEMMs, 4*b*hq*sq*skv*d), halved-ish for
 * causal by counting only visible (query, key) pairs. */
double attn_shape_flops(const attn_shape *s);

/* Visible key count for query row i (0-based, real lengths). */
static inline int64_t attn_visible_keys(const attn_shape *s, int64_t i)
{
    if (!s->causal)
        return s->skv;
    int64_t n = i + (s->skv - s->sq) + 1;
    return n < 0 ? 0 : (n > s->skv ? s->skv : n);
}

#ifdef __cplusplus
}
#endif

#endif
