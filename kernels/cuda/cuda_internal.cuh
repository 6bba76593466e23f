/* cuda_internal.cuh -- what the CUDA backend's translation units share.
 *
 * The backend is split by concept: cuda_device.cu (identity and stack),
 * cuda_data.cu (fill, poison, pad/unpad, repeat_kv, row gather),
 * cuda_reference.cu (float64 reference), cuda_split.cu (cuBLAS split,
 * split_repeat and folded attention), cuda_blas.cu (cuBLAS, opened on first
 * use) and cuda_backend.cu (sessions, plans, timing, the attn_ops table).
 * The variants' kernel ops (kernels/variant.h: list, plan, run, free,
 * reads), which the backend drives through the table of families, sit
 * beside their kernels: cuda_split.cu, ops_fused.cu, ops_cudnn.cu. Kernels are launched only from the file that
 * defines them (no separable compilation); files call each other's host
 * launchers, declared here. Not installed, not included by C code. */
#ifndef ATTUNE_CUDA_INTERNAL_CUH
#define ATTUNE_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "../attn.h"
#include "../variant.h"
#include "launch.cuh" /* cu_launch, cu_ok */

/* ---- errors
 *
 * Every CUDA/cuBLAS call goes through one of the macros below inside a
 * function that declares `int rc` and has a `fail:` label. The error is
 * mapped to an attune code (ENOMEM for allocation failures, else EGPU /
 * EBLAS) and, when ATTUNE_CUDA_VERBOSE is set in the environment, printed
 * with file and line: library code never prints otherwise and never exits. */
int cuda_err(cudaError_t e, const char *what, const char *file, int line);
int cuda_blas_err(cublasStatus_t e, const char *what, const char *file, int line);
/* Print a note (verbose mode only). */
void cuda_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define CU_TRY(call)                                                          \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            rc = cuda_err(e_, #call, __FILE__, __LINE__);                     \
            goto fail;                                                        \
        }                                                                     \
    } while (0)

/* After a <<<>>> launch: launch-configuration errors surface here, with
 * any error the thread had pending. Only where attune owns the thread's
 * errors (the tuner's fills and reference); a kernel that a run launches
 * on a caller's stream goes through cu_launch (launch.cuh), which answers
 * for that launch alone. */
#define CU_LAUNCHED() CU_TRY(cudaGetLastError())

#define BLAS_TRY(call)                                                        \
    do {                                                                      \
        cublasStatus_t s_ = (call);                                           \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                    \
            rc = cuda_blas_err(s_, #call, __FILE__, __LINE__);                \
            goto fail;                                                        \
        }                                                                     \
    } while (0)

/* ---- cuBLAS, opened on first use (cuda_blas.cu): call it only through
 * cuda_blas, after cuda_blas_open() returned 0. Linking it instead would
 * make every process pay for its initialisers at start. */
typedef struct cuda_blas_api {
    decltype(&cublasCreate) create;
    decltype(&cublasDestroy) destroy;
    decltype(&cublasSetStream) set_stream;
    decltype(&cublasSetWorkspace) set_workspace;
    decltype(&cublasSetMathMode) set_math_mode;
    decltype(&cublasGetProperty) get_property;
    /* the library's entry point, not the header's inline overload taking a
     * cudaDataType compute type */
    decltype(static_cast<cublasStatus_t (*)(
                 cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                 const void *, const void *, cudaDataType, int, long long, const void *,
                 cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                 long long, int, cublasComputeType_t, cublasGemmAlgo_t)>(
        &cublasGemmStridedBatchedEx)) gemm_strided_batched_ex;
} cuda_blas_api;

extern cuda_blas_api cuda_blas;

/* Open libcublas once per process (thread-safe; later calls return the
 * first result). Returns 0, or ATTUNE_EBLAS when it cannot be opened or
 * lacks an entry point (the reason printed in ATTUNE_CUDA_VERBOSE mode). */
int cuda_blas_open(void);

/* Propagate an attune code from a callee. */
#define RC_TRY(call)                                                          \
    do {                                                                      \
        rc = (call);                                                          \
        if (rc != 0)                                                          \
            goto fail;                                                        \
    } while (0)

/* ---- storage dtypes: load/store through float (or double) */

template <typename T> struct dt_traits;
template <> struct dt_traits<float> {
    static __device__ __forceinline__ float to_f(float x) { return x; }
    static __device__ __forceinline__ float from_f(float x) { return x; }
    static __device__ __forceinline__ double to_d(float x) { return (double)x; }
};
template <> struct dt_traits<__half> {
    static __device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
    static __device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }
    static __device__ __forceinline__ double to_d(__half x) { return (double)__half2float(x); }
};
template <> struct dt_traits<__nv_bfloat16> {
    static __device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
    static __device__ __forceinline__ double to_d(__nv_bfloat16 x) { return (double)__bfloat162float(x); }
};

/* e4m3 -> float by its bits (exact; NaN is never stored by the tuner's
 * data): cheaper than the library's conversion where it is emulated
 * (below sm_89), which made the reference kernel spill on sm_87. */
static __device__ __forceinline__ float e4m3_to_float(__nv_fp8_e4m3 x)
{
    const unsigned b = x.__x, e = (b >> 3) & 15u, m = b & 7u;
    const float mag = e == 0 ? (float)m * 0x1p-9f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    return (b & 0x80u) ? -mag : mag;
}
template <> struct dt_traits<__nv_fp8_e4m3> { /* stored values: descale is the caller's */
    static __device__ __forceinline__ float to_f(__nv_fp8_e4m3 x) { return e4m3_to_float(x); }
    static __device__ __forceinline__ __nv_fp8_e4m3 from_f(float x) { return __nv_fp8_e4m3(x); }
    static __device__ __forceinline__ double to_d(__nv_fp8_e4m3 x) { return (double)e4m3_to_float(x); }
};
/* cuBLAS data type of a storage dtype. */
static inline cudaDataType cuda_blas_type(attn_dtype t)
{
    return t == ATTN_F16 ? CUDA_R_16F : (t == ATTN_BF16 ? CUDA_R_16BF : CUDA_R_32F);
}

/* ---- sessions and plans */

/* A cached CUDA graph: `iters` back-to-back launches of a plan. */
typedef struct cuda_graph_entry {
    int iters, with_copies;
    cudaGraphExec_t exec;
} cuda_graph_entry;

#define CUDA_GRAPH_CACHE 4

struct attn_session {
    int dev;                 /* CUDA ordinal */
    attn_shape s;
    uint64_t seed;
    size_t es;               /* bytes per element of q, k, v */
    size_t es_out;           /* of out (attn_dtype_out) */
    int64_t nq, nkv;         /* elements of q (= out) and of k (= v) */
    void *q, *k, *v, *o;     /* [b,h,s,d] contiguous, storage dtype (o: out's) */
    void *spacer;            /* allocated first, of a size that varies from
                                session to session (session_spacer_bytes) */
    /* e4m3: the bf16 values q, k, v were quantized from, and the three
     * descale factors (device; host copy beside) */
    void *src[3];
    float *descale;
    float descale_h[3];
    cudaStream_t stream;     /* every kernel of the session runs here */
    cudaEvent_t ev0, ev1;    /* timing */
    attn_plan *plans;        /* live plans, so poison reaches padded outputs */
    char plan_note[128];     /* the last plan's note (refusal reason or build
                                time) for attn_ops.plan_note */
};

/* GEMM variants' prepared state (cuda_split.cu fills it at plan time). */
typedef struct cuda_split_state {
    int64_t g;               /* query heads per KV head */
    int64_t units;           /* b * hkv: (batch, KV head) groups */
    int64_t chunk;           /* groups per pass through the S/P workspace */
    void *S, *P;             /* scores (f32 or f16) and probabilities (dtype) */
    size_t s_es;             /* bytes per element of S */
    void *kr, *vr;           /* split_repeat: K/V repeated to hq heads */
} cuda_split_state;

/* A plan: one tactic for one shape on one device, run on caller views.
 * The variant reads the caller's views in place where it can (pad=1 or a
 * pad that changes no length, and strides it reads: cuda_backend.cu's
 * reads_in_place), else contiguous copies the plan owns, [b, h, sq_pad or
 * skv_pad, d] of the planned lengths, made at plan time. */
struct attn_plan {
    attn_session *ss;        /* made through a session (attn_ops.plan), else NULL */
    int dev;                 /* CUDA ordinal */
    attn_shape s;            /* planned: the longest lengths a call may have */
    attn_tactic t;
    const attn_variant_desc *fam; /* t's family: its kernel ops run the plan */
    int flags;               /* ATTN_PLAN_* */
    size_t es;               /* bytes per element of q, k, v */
    size_t es_out;           /* of out */
    int64_t sq_pad, skv_pad; /* planned lengths rounded up to the pad */
    void *qp, *op;           /* own copies of q and out, NULL when never needed */
    void *kp, *vp;           /* of k and v */
    cuda_split_state sp;     /* GEMM variants */
    cublasHandle_t blas;     /* GEMM variants: its own handle and workspace, so
                                cuBLAS never allocates while a graph is captured */
    void *blas_ws;
    struct cuda_cudnn_plan *dnn; /* cudnn variant: a held cache entry */
    struct cuda_cudnn_plan *dnn_views; /* and one reading the views below in
                                          place (attn_ops.plan_views), or NULL */
    attn_io views;           /* its strides (data pointers unused) */
    void *dnn_ws;
    size_t dnn_ws_bytes;
    cudaStream_t dnn_side;   /* plans of chunks (cuda_cudnn_chunks > 1): the */
    cudaEvent_t dnn_fork, dnn_join; /* second stream and its events, or NULL */
    void *fused_ws;          /* fused variants' workspace */
    size_t fused_ws_bytes;
    /* session timing: graphs of back-to-back calls on the session */
    cuda_graph_entry graphs[CUDA_GRAPH_CACHE];
    int ngraphs, graph_next;
    int warmed;              /* own copies hold the session's inputs */
    attn_plan *next;         /* in ss->plans */
};

/* One call as a variant sees it: the call's shape (its lengths), the rows
 * per head the views hold (the call's lengths rounded up to the pad when
 * the views are the plan's own copies, else the real lengths), the views
 * and the stream. */
typedef struct attn_call { /* the CUDA backend's call (kernels/variant.h) */
    attn_shape s;
    int64_t sqp, skvp;
    attn_tensor q, k, v, o;
    cudaStream_t stream;
    const float *descale[3]; /* e4m3: attn_io.descale (device memory) */
} cuda_call;

/* ---- cuda_backend.cu */

/* cudaMalloc of bytes (at least 1) into *p: 0, or ATTUNE_ENOMEM / EGPU
 * with *p NULL. */
int cuda_dev_alloc(void **p, size_t bytes);

/* ---- cuda_device.cu */
int cuda_device_count(void);
int cuda_device_info(int index, attn_device_info *info, attn_stack *stack);

/* ---- cuda_data.cu (all asynchronous on `stream`; 0 or an attune code) */

/* Standard-normal values from (seed, stream_id, element index), rounded to
 * dtype: a counter-based hash fed to Box-Muller, so any element can be
 * regenerated alone and the data never depends on the launch shape. */
int cuda_fill_normal(void *x, attn_dtype t, int64_t n, uint64_t seed, uint32_t stream_id,
                     cudaStream_t stream);
/* e4m3 data (attn_ops.reference_source): src <- bf16 standard-normal
 * values of (seed, id), *descale <- max |src| / 448, x8 <- e4m3(src /
 * descale); scratch: one device word. */
int cuda_fill_e4m3(void *x8, void *src, int64_t n, uint64_t seed, uint32_t id, float *descale,
                   unsigned *scratch, cudaStream_t stream);
/* NaN in every element. */
int cuda_fill_nan(void *x, attn_dtype t, int64_t n, cudaStream_t stream);
/* Contiguous dst [b, heads, rows_pad, d] <- view src: head h reads the
 * view's head h / rep (rep 1: pad and layout copy; rep g: repeat_kv), rows
 * rows..rows_pad-1 zeroed, so padded keys hold finite values (masked
 * scores times zero V rows stay zero). */
int cuda_pack_view(void *dst, const attn_tensor *src, size_t es, int64_t b, int64_t heads,
                   int64_t rep, int64_t rows, int64_t rows_pad, int64_t d, cudaStream_t stream);
/* View dst <- the real rows (< rows) of contiguous src [b, heads, rows_pad, d]. */
int cuda_unpack_view(const attn_tensor *dst, const void *src, size_t es, int64_t b,
                     int64_t heads, int64_t rows, int64_t rows_pad, int64_t d,
                     cudaStream_t stream);
/* out[k*d + c] = (double) x[rows[k]*d + c]; rows and out on the device. */
int cuda_gather_rows(double *out, const void *x, attn_dtype t, const int64_t *rows,
                     int nrows, int64_t d, cudaStream_t stream);

/* ---- cuda_reference.cu */

/* float64 attention of rows (device array, flat indices over the real
 * output) from the session's stored inputs into ref (device, nrows*d). */
int cuda_reference_rows(const attn_session *ss, const int64_t *rows, int nrows,
                        double *ref, cudaStream_t stream);
/* The same from an e4m3 session's bf16 source values (ATTUNE_EUNSUPP for
 * other dtypes). */
int cuda_reference_source_rows(const attn_session *ss, const int64_t *rows, int nrows,
                               double *ref, cudaStream_t stream);

/* ---- cuda_split.cu */

/* Check t against the plan's shape and allocate p->sp (S/P workspace,
 * repeated K/V) for the planned lengths. p->s, t, es, sq_pad and skv_pad
 * are set. ATTUNE_EUNSUPP when the tactic does not apply, ENOMEM when the
 * workspace does not fit. */
int cuda_split_prepare(attn_plan *p);
void cuda_split_release(attn_plan *p);
/* 1 when the GEMM variant of p reads call c's views in place: Q and O
 * alike, K and V alike, (batch, head) flattening to one head stride, and
 * for folded the g heads' rows one matrix. */
int cuda_split_reads(const attn_plan *p, const cuda_call *c);
/* Enqueue the GEMM variant on call c (capturable): p->blas must already
 * be on c->stream. */
int cuda_split_launch(attn_plan *p, const cuda_call *c);

#endif
