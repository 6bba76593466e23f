/* tactic.h -- a tactic: one way to compute a shape, a variant plus its
 * parameters (DESIGN.md "Words"), and its canonical text.
 *
 * The lowest layer (docs/design.md "Layers"), beside shape.h. The variant
 * words live here: the built-in ones (DESIGN.md "Variants"), and those a
 * family registers at run time (kernels/variant.h attn_family_register
 * calls attn_variant_register), so tactic text is read and written without
 * the kernels. */
#ifndef ATTN_TACTIC_H
#define ATTN_TACTIC_H

#include <stddef.h>
#include <stdint.h>

#include "attune_err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_FUSED = 0,
    ATTN_FUSED_SPLITKV = 1,
    ATTN_SPLIT = 2,
    ATTN_SPLIT_REPEAT = 3,
    ATTN_FOLDED = 4,
    ATTN_CUDNN = 5, /* cuDNN's SDPA forward (kernels/cuda/cuda_cudnn.c) */
    ATTN_NVARIANTS = 6
} attn_variant;

/* Variant ids: the built-in ones above (ATTN_FUSED ... ATTN_CUDNN), then
 * those registered at run time (attn_variant_register), below this.
 * A variant set (tuner/variant_set.h) is a bit mask over them. */
#define ATTN_MAX_VARIANTS 32

/* A tactic: variant plus parameters. A parameter equal to 0 is absent
 * (acc uses ATTN_ACC_NONE), except the cudnn keys (eng, graph, kcfg), which
 * are present exactly when the variant is cudnn (engine 0 and knob code 0
 * are real values). Canonical text: `variant/key=value/...`, keys sorted:
 * acc, arch, eng, fold, graph, kcfg, pad, persist, splits, stages, tile,
 * warps; pad is always present. */
typedef enum { ATTN_ACC_NONE = 0, ATTN_ACC_F16 = 1, ATTN_ACC_F32 = 2 } attn_acc;

/* cudnn: the form of the operation graph handed to cuDNN. sdpa: the single
 * SDPA_FWD operation (cuDNN >= 9.13.1); comp: matmul, pointwise and
 * reduction operations that cuDNN fuses (every cuDNN 9). */
typedef enum { ATTN_GRAPH_NONE = 0, ATTN_GRAPH_SDPA = 1, ATTN_GRAPH_COMP = 2 } attn_graph;

typedef struct attn_tactic {
    attn_variant variant;
    int pad;          /* 1, 8, 16 or 64 */
    attn_acc acc;     /* GEMM variants: cuBLAS compute type */
    int tile_m, tile_n; /* fused: Br x Bc, 0 = absent */
    int splits;       /* fused_splitkv: number of key splits, 0 = absent */
    int warps;        /* fused: warps per block, 0 = absent */
    int arch;         /* fused: kernel family for one architecture (ATTN_ARCH_*), 0 = absent */
    int stages;       /* fused arch=sm90a: K/V shared-memory stages, 0 = absent */
    int fold;         /* fused arch=sm90a: 1 = the g query heads of a KV head packed
                         into the rows of one block (text `fold=1`), 0 = absent */
    int persist;      /* fused arch=sm90a: 1 = a persistent grid, one block per SM taking
                         the blocks' work in turn (text `persist=1`), 0 = absent */
    int eng;          /* cudnn: engine global index (CUDNN_ATTR_ENGINE_GLOBAL_INDEX) */
    attn_graph graph; /* cudnn: graph form */
    int kcfg;         /* cudnn: the engine's knob settings as one code
                         (cuda_cudnn.h says how); 0 = engine defaults */
} attn_tactic;

/* Values of attn_tactic.arch: text `arch=sm90a` (wgmma/TMA kernels, compute
 * capability 9.0 only). */
#define ATTN_ARCH_SM90A 90

#define ATTN_TACTIC_STR_MAX 96

const char *attn_variant_name(attn_variant v); /* "fused", "split", ...; "?" unknown */
int attn_variant_parse(const char *s, attn_variant *out); /* 0 or ATTUNE_EINVAL */

/* The variant words known now, ", "-separated in id order ("fused,
 * fused_splitkv, split, ..."), for messages. A per-thread buffer, valid
 * until the thread's next call. */
const char *attn_variant_names(void);

/* Give variant id v (ATTN_NVARIANTS <= v < ATTN_MAX_VARIANTS for a new
 * one) its word: 1 to 31 characters of [a-z0-9_]. name is kept, not
 * copied: it must outlive every use (a descriptor's string). 0 when v now
 * has that word (already had: 0 too); ATTUNE_EINVAL when v is out of
 * range, has another word, the word is another id's or not a word.
 * Registration happens before any other thread reads the words (the
 * family table's contract, kernels/variant.h). */
int attn_variant_register(attn_variant v, const char *name);

/* Forget the registered words, keeping the built-in ones (tests). */
void attn_variant_reset(void);

/* Canonical text of t into buf (>= ATTN_TACTIC_STR_MAX bytes). Returns buf. */
char *attn_tactic_str(const attn_tactic *t, char *buf, size_t buflen);

/* Parse canonical tactic text. Keys may come in any order but each once;
 * unknown keys or values are errors. Returns 0 or ATTUNE_EINVAL with err. */
int attn_tactic_parse(const char *s, attn_tactic *out, char *err, size_t errlen);

/* 1 when t sets none of the keys only the Hopper fused kernel (fused
 * arch=sm90a) takes: arch, fold, persist (stages is fused_splitkv's too).
 * Every other family's owns() asks this, so a new sm90a-only key is one
 * line here. */
static inline int attn_tactic_no_sm90a_keys(const attn_tactic *t)
{
    return t->arch == 0 && t->fold == 0 && t->persist == 0;
}

/* The valid pads. */
#define ATTN_NPADS 4
extern const int attn_pads[ATTN_NPADS]; /* {1, 8, 16, 64} */

static inline int64_t attn_round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/* 1 when pads a and b (<= 1: none) round sq and skv up to the same
 * lengths: the same kernels on the same buffers, the backends alias them
 * (pad 16 and pad 1 of a 2048-token shape). */
static inline int attn_pads_same_lengths(int64_t sq, int64_t skv, int a, int b)
{
    a = a > 1 ? a : 1, b = b > 1 ? b : 1;
    return attn_round_up(sq, a) == attn_round_up(sq, b) &&
           attn_round_up(skv, a) == attn_round_up(skv, b);
}

#ifdef __cplusplus
}
#endif

#endif
