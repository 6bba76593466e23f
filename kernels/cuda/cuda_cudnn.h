/* cuda_cudnn.h -- the cudnn variant: cuDNN's fused SDPA forward through the
 * cuDNN backend C API (kernels/cuda/cuda_cudnn.c).
 *
 * Plain C: cuda_backend.cu calls it for tactics whose variant is
 * ATTN_CUDNN; tests call it to look into the plan cache. Compiled only when
 * CMake finds cuDNN 9 (ATTUNE_HAVE_CUDNN); otherwise the variant is absent.
 *
 * A tactic `cudnn/eng=E/graph=G/kcfg=K/pad=P` names one execution plan:
 * the operation graph of form G (sdpa: one SDPA_FWD operation; comp: the
 * matmul/pointwise/reduction graph cuDNN fuses) for the shape padded to P,
 * engine global index E, and K, the engine's knob settings as one code:
 * with the engine's knobs sorted by knob type, each knob i contributes the
 * digit k_i = 0 (not set: the engine's default) or 1 + (value - min) /
 * stride, and K = sum k_i * prod_{j<i} (n_j + 1), n_j the knob's number of
 * values. So K = 0 is the engine with every knob at its default, and the
 * string alone (with the same cuDNN) rebuilds the same plan, with one
 * exception: an e4m3 graph with FP8 O covers a chunk of the shape whose
 * count follows from the device's SM count and ATTUNE_CUDNN_FP8_CHUNKS
 * (cuda_cudnn_chunks), so the same device and environment rebuild it;
 * that variable is for measurements, set alike for the tuner and the
 * runtime or for neither. */
#ifndef ATTUNE_CUDA_CUDNN_H
#define ATTUNE_CUDA_CUDNN_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../attn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Workspace cap per session: a plan asking for more is unsupported. */
#define CUDA_CUDNN_WS_CAP ((size_t)256 << 20)

/* The loaded cuDNN as "cudnn-9.14.0" into buf (cudnnGetVersion: the library
 * in use at run time, not the header built against). Returns 0, or
 * ATTUNE_EUNSUPP when that version is refused for SDPA (buf then says
 * "cudnn-9.10.0(refused)" and no tactic is listed). */
int cuda_cudnn_version(char *buf, size_t len);

/* The cudnn tactics of shape s on CUDA device dev: for pad 1 and each pad
 * of attn_pads that changes a length, for each graph form the loaded cuDNN
 * has, the engine configurations of heuristics mode A and the fallback
 * list, deduplicated. f32 lists one tactic (eng 0, comp, pad 1) so the
 * tuner records it as unsupported with the reason. Writes at most max;
 * returns the count (0 when cuDNN refuses every graph of the shape). The
 * enumeration is cached per graph. */
int cuda_cudnn_tactics(int dev, const attn_shape *s, attn_tactic *out, int max);

typedef struct cuda_cudnn_plan cuda_cudnn_plan;

/* The execution plan of tactic t for shape s on device dev, the kernels
 * reading q/k/v with sq_pad/skv_pad rows per head (the padded buffers of
 * the backend's plan) and writing o likewise. Built on first use (or ahead,
 * cuda_cudnn_prefetch), then taken from a process-wide cache keyed by
 * (device, graph, engine, knobs); each successful get holds a reference,
 * dropped by cuda_cudnn_plan_put. *built_ms is the time its build took,
 * reported to the first get only (0 afterwards), and note then says so
 * ("cudnn plan built in 63 ms", "... by a builder thread"). Returns 0,
 * ATTUNE_EUNSUPP with the reason in note (f32, a refused version, a head
 * size or a length cuDNN rejects, an engine that does not support the
 * graph, a workspace over CUDA_CUDNN_WS_CAP), ATTUNE_EINVAL for a tactic
 * that is not cudnn, ENOMEM or EGPU. */
int cuda_cudnn_plan_get(int dev, const attn_shape *s, const attn_tactic *t, int64_t sq_pad,
                        int64_t skv_pad, cuda_cudnn_plan **out, double *built_ms,
                        char *note, size_t notelen);

/* The plan of tactic t (a pad-1 tactic's engine and knobs) for shape s at
 * its own lengths, reading q, k, v and writing o in place at the strides
 * of views (their data pointers are ignored): a caller's [b, s, h, d]
 * buffers, say, with no copy. Cached like cuda_cudnn_plan_get's (the
 * strides are part of the key). The engine chosen on contiguous buffers
 * may refuse other strides: ATTUNE_EUNSUPP with cuDNN's reason in note,
 * as for strides not in 16-byte units or causal rows that see no key
 * (their zeroing needs a contiguous output). */
int cuda_cudnn_plan_get_views(int dev, const attn_shape *s, const attn_tactic *t,
                              const attn_io *views, cuda_cudnn_plan **out, double *built_ms,
                              char *note, size_t notelen);
void cuda_cudnn_plan_put(cuda_cudnn_plan *p);

/* Workspace bytes the plan needs at launch: cuDNN's own (at most
 * CUDA_CUDNN_WS_CAP; twice, one per stream, for a plan of chunks), then,
 * for e4m3 with FP8 O, that O (b hq sqv d bytes). */
size_t cuda_cudnn_workspace_bytes(const cuda_cudnn_plan *p);

/* Read the engine global index and knob code back from the built plan's
 * engine configuration (what cuDNN holds, not what was asked). 0 or EGPU. */
int cuda_cudnn_plan_describe(const cuda_cudnn_plan *p, int *eng, int *kcfg);

/* A second stream and two events (disable-timing) a caller owns, for
 * plans of more than one chunk (cuda_cudnn_chunks). */
typedef struct cuda_cudnn_fork {
    cudaStream_t side;
    cudaEvent_t fork, join;
} cuda_cudnn_fork;

/* How many chunks p's launch runs (e4m3 with FP8 O: the graph covers a
 * chunk of the batches or heads, and each chunk's bf16 pass runs beside
 * the next chunks' graphs when launch gets a fork); 1 otherwise. */
int cuda_cudnn_chunks(const cuda_cudnn_plan *p);

/* Enqueue the plan on stream: q, k, v, o are the padded buffers ([b, h,
 * rows, d], rows = sq_pad or skv_pad), or the caller's tensors at the
 * strides of a plan_get_views plan; ws at least the workspace bytes;
 * descale (e4m3; NULL or NULL entries: 1): q's, k's and v's descale
 * factors in device memory. Rows that see no key (causal, sq > skv) are
 * zeroed here. fk (NULL: every chunk on stream): for a plan of several
 * chunks, odd chunks run on fk->side, forked from stream and joined back
 * to it with fk's events, so the runs of one fork must be ordered (as a
 * plan's are). Capturable. */
int cuda_cudnn_launch(cuda_cudnn_plan *p, const void *q, const void *k, const void *v, void *o,
                      const float *const descale[3], void *ws, cudaStream_t stream,
                      const cuda_cudnn_fork *fk);

/* e4m3 graphs with FP8 O (ops_cudnn.cu): out (bf16, strides st: batch,
 * head, row, elements) <- o8 (FP8, contiguous [b, hq, sqv, d], the rows
 * from q0 on) times *descale_v (device; NULL: 1); the first q0 rows of
 * each head of out's q_rows are 0. d a multiple of 16, b hq q_rows d / 16
 * under 2^31. Capturable. 0, EINVAL or EGPU. */
int cuda_cudnn_fp8_out(void *out, const int64_t st[3], const void *o8, int64_t b, int64_t hq,
                       int64_t q_rows, int64_t q0, int64_t sqv, int64_t d,
                       const float *descale_v, cudaStream_t stream);

/* Build the plans of shape s's cudnn tactics on dev ahead, on builder
 * threads (each with its own cuDNN handle), while the caller goes on: the
 * backend calls it when a session opens, so the builds (runtime
 * compilation, seconds on a fresh machine) overlap the measurements of the
 * other variants, and plan_get then waits only for the plan it needs, or
 * builds it itself if no builder has started it. Builders:
 * ATTUNE_CUDNN_BUILDERS (0 = none), default the online CPUs less two, at
 * most 12. ATTUNE_CUDNN_PREFETCH=first defers the builds to the shape's
 * first plan_get (which waits for all of them: nothing builds while other
 * variants are timed), =off builds each plan on demand. Returns the
 * number of plans queued (0 when nothing is to build or prefetch is off),
 * or ATTUNE_EINVAL / ENOMEM. Failures of a build are kept for plan_get. */
int cuda_cudnn_prefetch(int dev, const attn_shape *s);

/* Drop the plans of s on dev that are queued and not started (a session
 * closing: what it did not plan is not built), and wait for those being
 * built (no builder may still be inside cuDNN when the process exits). */
void cuda_cudnn_prefetch_cancel(int dev, const attn_shape *s);

/* Wait until no plan is queued or being built. For tests. */
void cuda_cudnn_prefetch_wait(void);

/* Plan cache counters since the process started: plans built by
 * cuda_cudnn_plan_get in its caller's thread, gets served from the cache
 * (a plan built ahead counts as a hit), plans held now. For tests, logs. */
void cuda_cudnn_cache_stats(int *builds, int *hits, int *held);

/* Plans built ahead by builder threads since the process started, and the
 * builder threads running. */
void cuda_cudnn_prefetch_stats(int *built, int *builders_running);

#ifdef __cplusplus
}
#endif

#endif
