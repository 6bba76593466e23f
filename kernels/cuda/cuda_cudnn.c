/* cuda_cudnn.c -- cuDNN's fused attention as attune tactics, built with the
 * cuDNN backend C API (cudnn_graph.h), no C++ frontend.
 *
 * The story of one tactic, top to bottom:
 *   1. geometry: the shape, its pad and the causal rule become the tensors
 *      cuDNN sees (dims, strides, a query row offset, the mask's shift);
 *   2. graph: the operation graph of that geometry, in one of two forms:
 *        sdpa  one SDPA_FWD operation (cuDNN >= 9.13.1; before 9.21 it takes
 *              no mask, so it is offered for unmasked geometries only);
 *        comp  Q.K^T matmul, scale, mask (generated row/column indices,
 *              compare, select -inf), softmax as max/sub/exp/sum/div, P.V
 *              matmul: the pattern cuDNN's flash-attention engines fuse
 *              (what the C++ frontend builds for cuDNN 9.0-9.20);
 *   3. engines: heuristics mode A and the fallback list propose engine
 *      configurations; each distinct (engine, knobs) becomes a tactic;
 *   4. plan: engine + knobs -> execution plan (runtime compilation: up to
 *      seconds the first time on a machine), cached per (device, geometry,
 *      engine, knobs), built ahead on builder threads (below);
 *   5. launch: a variant pack of device pointers and by-value scalars,
 *      cudnnBackendExecute on the session's stream.
 *
 * Causal (DESIGN.md): query i sees key j iff j <= i + (skv - sq), from the
 * real lengths. cuDNN's bottom-right mask does not take sq > skv, and rows
 * that see no key would be NaN (softmax of all -inf), so for causal sq > skv
 * the first sq - skv query rows (which see nothing) are left out of the
 * graph by offsetting Q and O, and zeroed with a memset; the remaining rows
 * see at least their diagonal key. Padded keys (pad > 1) are masked by a
 * column compare for non-causal shapes; for causal ones the causal rule
 * from the real lengths already hides them from every real row.
 *
 * GQA/MQA: K and V are described with hkv heads; cuDNN broadcasts each to
 * its g = hq / hkv query heads. Nothing is copied.
 *
 * e4m3 (FP8, compute capability 9.0 on): the comp graph with q, k, v in
 * FP8 E4M3 and the frontend's FP8 chain (NVIDIA's sdpa_fp8): scores times
 * the scale, descale_q and descale_k; P's amax; P times scale_s into FP8
 * for the second matmul; O times descale_s, descale_v and scale_o, and
 * O's amax. On Hopper cuDNN writes O in FP8 only (bf16 output from FP8
 * is Blackwell's), so O goes in FP8 to the workspace with descale_v left
 * at 1 and scale_o 1 (|O| <= the largest stored |v| <= 448), and a kernel
 * of ops_cudnn.cu writes out = O8 * descale_v in bf16 (ATTUNE_CUDNN_FP8_O
 * =bf16 asks cuDNN for bf16 O instead, where an engine takes it). scale_s
 * is 256 (P in [0, 1] -> [0, 256]: its small values stay normal in FP8),
 * descale_s 1/256, both exact. The scalars live in device memory the
 * plan owns (amax outputs included, written and never read). Bottom-right
 * causal masks are Blackwell's for FP8: shifted causal geometries are
 * refused here.
 *
 * Plan building is what a first tune pays for (cuDNN compiles its runtime
 * engines' kernels), so it runs ahead and in parallel: when a session
 * opens (cuda_cudnn_prefetch), every cudnn tactic of its shape is queued,
 * and builder threads, each with its own cuDNN handle, build the plans
 * while the tuner measures the other variants; plan_get waits only for the
 * plan it needs, or builds it itself when no builder has started it.
 * cuDNN handles are not to be used by two threads at once, and a plan is
 * executed on the handle that built it, so each handle has a mutex held
 * while it builds or executes. Compile: part of attune_cuda when CMake
 * finds cuDNN 9. */
#include <cudnn.h>
#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_cudnn.h"
#include "../fp8_chunks.h"

/* ---- errors
 *
 * Every cuDNN call sits in a function with `int rc`, `char *note, size_t
 * notelen` and a `fail:` label. Families of cudnnStatus_t: 2xxx bad
 * parameter and 3xxx not supported are cuDNN refusing this graph or engine
 * (ATTUNE_EUNSUPP, the reason in note); the rest are failures. */

static int dnn_err(cudnnStatus_t st, const char *what, char *note, size_t notelen)
{
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    if (note != NULL && notelen > 0)
        snprintf(note, notelen, "cudnn %s: %s%s%.96s", what, cudnnGetErrorString(st),
                 last[0] ? ": " : "", last);
    if (st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
        st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        return ATTUNE_ENOMEM;
    if ((int)st / 1000 == 2 || (int)st / 1000 == 3)
        return ATTUNE_EUNSUPP;
    return ATTUNE_EGPU;
}

#define DNN_TRY(what, call)                                                   \
    do {                                                                      \
        cudnnStatus_t st_ = (call);                                           \
        if (st_ != CUDNN_STATUS_SUCCESS) {                                    \
            rc = dnn_err(st_, what, note, notelen);                           \
            goto fail;                                                        \
        }                                                                     \
    } while (0)

#define RC_TRY(call)                                                          \
    do {                                                                      \
        rc = (call);                                                          \
        if (rc != 0)                                                          \
            goto fail;                                                        \
    } while (0)

static int refuse(char *note, size_t notelen, const char *fmt, const char *arg)
{
    if (note != NULL && notelen > 0)
        snprintf(note, notelen, fmt, arg);
    return ATTUNE_EUNSUPP;
}

typedef cudnnBackendDescriptor_t desc_t;

/* ATTUNE_CUDA_VERBOSE and ATTUNE_CUDNN_TRACE, read once: builder threads
 * log too, and getenv beside another thread's setenv is a race. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_verbose, env_trace;

static int env_flag(const char *name)
{
    const char *e = getenv(name);
    return e != NULL && *e != 0 && strcmp(e, "0") != 0;
}

static void env_read(void)
{
    env_verbose = env_flag("ATTUNE_CUDA_VERBOSE");
    env_trace = env_flag("ATTUNE_CUDNN_TRACE");
}

/* A note on stderr when ATTUNE_CUDA_VERBOSE is set (as cuda_device.cu's):
 * why cuDNN proposed nothing for a graph is otherwise not kept. */
static void dnn_log(const char *what, const char *note)
{
    pthread_once(&env_once, env_read);
    if (env_verbose)
        fprintf(stderr, "attune-cudnn: %s: %s\n", what, note);
}

static double now_ms(void);

/* One line on stderr when ATTUNE_CUDNN_TRACE is set: where the time of
 * enumerations and plan builds goes (ms since the first line), per
 * thread. For measuring, not for logs. */
static void dnn_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dnn_trace(const char *fmt, ...)
{
    static double t0 = -1;
    char line[512];
    va_list ap;
    pthread_once(&env_once, env_read);
    if (!env_trace)
        return;
    if (t0 < 0)
        t0 = now_ms(); /* a race here costs one line's offset, nothing else */
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "attune-cudnn %9.1f ms: %s\n", now_ms() - t0, line);
}

static void destroy(desc_t *d)
{
    if (*d != NULL)
        cudnnBackendDestroyDescriptor(*d);
    *d = NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- descriptors
 *
 * Every descriptor is made the same way: create, set attributes, finalize.
 * An attribute list says what to set; a row with n = 0 is left unset (an
 * optional input), so one list serves every variant of a descriptor. */

typedef struct dnn_attr {
    cudnnBackendAttributeName_t name;
    cudnnBackendAttributeType_t type;
    int64_t n;       /* element count; 0: not set */
    const void *val; /* n elements of type */
} dnn_attr;

#define NATTR(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Create a descriptor of kind, set the attributes a[na] in order and
 * finalize it; `what` names it in the note. On error *out is NULL. */
static int dnn_make(cudnnBackendDescriptorType_t kind, const char *what, const dnn_attr *a,
                    int na, desc_t *out, char *note, size_t notelen)
{
    int rc = 0;
    char step[64];
    *out = NULL;
    DNN_TRY(what, cudnnBackendCreateDescriptor(kind, out));
    for (int i = 0; i < na; i++)
        if (a[i].n > 0)
            DNN_TRY(what, cudnnBackendSetAttribute(*out, a[i].name, a[i].type, a[i].n, a[i].val));
    snprintf(step, sizeof step, "%s finalize", what);
    DNN_TRY(step, cudnnBackendFinalize(*out));
    return 0;
fail:
    destroy(out);
    return rc;
}

/* Create n empty descriptors of kind into d (to be filled by
 * cudnnBackendGetAttribute). On error all of d is NULL. */
static int dnn_empty(cudnnBackendDescriptorType_t kind, const char *what, desc_t *d, int n,
                     char *note, size_t notelen)
{
    int rc = 0;
    memset(d, 0, (size_t)n * sizeof *d);
    for (int i = 0; i < n; i++)
        DNN_TRY(what, cudnnBackendCreateDescriptor(kind, &d[i]));
    return 0;
fail:
    for (int i = 0; i < n; i++)
        destroy(&d[i]);
    return rc;
}

/* ---- version */

/* cuDNN 9.10.0 and 9.10.1: f16/bf16 SDPA forward has known bugs (the C++
 * frontend refuses them: sdpa_support_surface.h). */
static int version_refused(size_t v) { return v == 91000 || v == 91001; }

int cuda_cudnn_version(char *buf, size_t len)
{
    size_t v = cudnnGetVersion();
    int refused = version_refused(v);
    snprintf(buf, len, "cudnn-%zu.%zu.%zu%s", v / 10000, (v / 100) % 100, v % 100,
             refused ? "(refused)" : "");
    return refused ? ATTUNE_EUNSUPP : 0;
}

/* ---- 1. geometry */

/* Everything that shapes the cuDNN graph; equal geometries share graphs,
 * engine lists and plans (two pads that change no length give equal ones). */
typedef struct geom {
    int dev;
    attn_dtype dt;
    attn_graph form;
    int64_t b, hq, hkv, d;
    int64_t q_rows, kv_rows; /* rows per head in the q/o and k/v buffers */
    int64_t q0;              /* first query row handed to cuDNN */
    int64_t sqv, skvv;       /* query rows and key columns cuDNN sees */
    int causal;              /* view row r sees key j iff j <= r + shift */
    int64_t shift;
    int64_t kv_valid;        /* non-causal: keys >= kv_valid are padding */
    int64_t zero_rows;       /* query rows per head set to 0 (= q0) */
    int64_t st[4][3];        /* q, k, v, o: batch, head and row strides in
                                elements (the head dim contiguous) */
    int o8;                  /* e4m3: O in FP8 to the workspace, then bf16 */
    int chunk_heads;         /* chunks > 1: split over heads (else batches) */
    int64_t chunks;          /* o8: the graph covers 1/chunks of the shape
                                (b, or hq and hkv, above are a chunk's) */
} geom;

enum { ST_Q, ST_K, ST_V, ST_O };

/* FP8 O's chunks: with O in FP8 (g->o8) a bf16 pass follows cuDNN's
 * kernel (cuda_cudnn_fp8_out: 27 us of 1,120 on the 8k d128 anchor, H200,
 * 2026-12-03). Cut into chunks over batches (or heads), each chunk's pass
 * runs beside the next chunks' cuDNN kernels, on a second stream
 * (cuda_cudnn_launch), so only the last chunk's is left after them. A
 * chunk keeps at least two waves of 128-row tiles on the device's SMs;
 * ATTUNE_CUDNN_FP8_CHUNKS=N (1, 2, 4 or 8; other values are ignored) asks
 * for N, or the largest power of two under it that divides the batch or
 * the KV heads (measurements): the rule is attn_fp8_chunks
 * (kernels/fp8_chunks.h). Sets g->chunks (1: none) and divides g's b, or
 * hq and hkv, by it. The chunks' kernels write the plan's amax scalars
 * at once: harmless while nothing reads them (docs/cudnn.md). */
static void geom_chunk(geom *g)
{
    int sms = 0, by_heads = 0;
    g->chunks = 1;
    g->chunk_heads = 0;
    if (!g->o8)
        return;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, g->dev) != cudaSuccess) {
        cudaGetLastError();
        sms = 0;
    }
    const int n = attn_fp8_chunks(g->b, g->hq, g->hkv, g->sqv, sms,
                                  getenv("ATTUNE_CUDNN_FP8_CHUNKS"), &by_heads);
    if (n == 1)
        return;
    g->chunks = n;
    g->chunk_heads = by_heads;
    if (!by_heads) {
        g->b /= n;
    } else {
        g->hq /= n;
        g->hkv /= n;
    }
}

/* The geometry of shape s with buffers of sq_pad/skv_pad rows per head. */
static void geom_of(int dev, const attn_shape *s, attn_graph form, int64_t sq_pad,
                    int64_t skv_pad, geom *g)
{
    memset(g, 0, sizeof *g); /* padding bytes too: geometries are memcmp'd */
    g->dev = dev;
    g->dt = s->dtype;
    g->form = form;
    g->b = s->b;
    g->hq = s->hq;
    g->hkv = s->hkv;
    g->d = s->d;
    g->q_rows = sq_pad;
    g->kv_rows = skv_pad;
    for (int i = 0; i < 4; i++) { /* contiguous [b, h, rows, d] buffers */
        int64_t heads = (i == ST_Q || i == ST_O) ? s->hq : s->hkv;
        int64_t rows = (i == ST_Q || i == ST_O) ? sq_pad : skv_pad;
        g->st[i][0] = heads * rows * s->d;
        g->st[i][1] = rows * s->d;
        g->st[i][2] = s->d;
    }
    g->q0 = (s->causal && s->sq > s->skv) ? s->sq - s->skv : 0;
    g->zero_rows = g->q0;
    g->sqv = sq_pad - g->q0;
    g->skvv = skv_pad;
    g->causal = s->causal;
    /* real row i = q0 + r sees j <= i + skv - sq; shift > 0 only when sq <
     * skv (then q0 = 0) */
    g->shift = s->causal ? g->q0 + s->skv - s->sq : 0;
    g->kv_valid = s->causal ? skv_pad : s->skv;
    if (s->dtype == ATTN_E4M3) {
        const char *o = getenv("ATTUNE_CUDNN_FP8_O");
        g->o8 = !(o != NULL && strcmp(o, "bf16") == 0);
    }
    geom_chunk(g);
    if (g->shift > 0 && (sq_pad > s->sq || skv_pad > s->skv)) {
        /* cuDNN's fused engines align a shifted causal diagonal to the
         * graph's own lengths (j <= r + skvv - sqv), whatever the scalars
         * say (seen on the H200, cuDNN 9.19: padded graphs were off by the
         * pad difference). So cut the padded view to make skvv - sqv the
         * real shift: keep all padded keys and fewer padded rows, or all
         * padded rows and fewer padded keys, whichever pad is smaller.
         * Rows and keys left out of the view are padding either way. */
        if (skv_pad - s->skv <= sq_pad - s->sq) {
            g->skvv = skv_pad;
            g->sqv = skv_pad - g->shift;
        } else {
            g->sqv = sq_pad;
            g->skvv = sq_pad + g->shift;
        }
    }
}

/* g's tensors read at the strides of views (a caller's [b, s, h, d]
 * buffers, say) instead of contiguous buffers: the graph reads and writes
 * them in place. */
static void geom_views(geom *g, const attn_io *views)
{
    const attn_tensor *t[4] = {&views->q, &views->k, &views->v, &views->o};
    for (int i = 0; i < 4; i++) {
        g->st[i][0] = t[i]->sb;
        g->st[i][1] = t[i]->sh;
        g->st[i][2] = t[i]->ss;
    }
}

/* 1 when g's output is the contiguous buffer of q_rows rows per head. */
static int geom_o_contiguous(const geom *g)
{
    return g->st[ST_O][2] == g->d && g->st[ST_O][1] == g->q_rows * g->d &&
           g->st[ST_O][0] == g->hq * g->q_rows * g->d;
}

static cudnnDataType_t io_type(attn_dtype t)
{
    switch (t) {
    case ATTN_F16:
        return CUDNN_DATA_HALF;
    case ATTN_BF16:
        return CUDNN_DATA_BFLOAT16;
    case ATTN_E4M3:
        return CUDNN_DATA_FP8_E4M3;
    case ATTN_F32:
        break;
    }
    return CUDNN_DATA_FLOAT;
}

static size_t io_size(attn_dtype t) { return attn_dtype_size(t); }

/* Bytes of one element of out. */
static size_t out_size(attn_dtype t) { return attn_dtype_size(attn_dtype_out(t)); }

/* The device's compute capability as major * 10 + minor (0: unknown). */
static int device_cc(int dev)
{
    int major = 0, minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return major * 10 + minor;
}

/* e4m3's refusals (NVIDIA's sdpa_support_surface.h, FP8 forward). */
static int fp8_check(const geom *g, size_t v, char *note, size_t notelen)
{
    if (device_cc(g->dev) < 90)
        return refuse(note, notelen, "%s",
                      "cudnn: FP8 SDPA needs compute capability 9.0 or newer");
    if (v < 90100)
        return refuse(note, notelen, "%s", "cudnn: FP8 SDPA needs cuDNN >= 9.1");
    if (g->form != ATTN_GRAPH_COMP)
        return refuse(note, notelen, "%s", "cudnn: the SDPA_FWD operation takes no FP8 scales");
    if (g->d % 16 != 0 || g->d > 256)
        return refuse(note, notelen, "%s", "cudnn: FP8 SDPA takes head dims of 16..256 in steps of 16");
    /* Seen on the H200 with cuDNN 9.19.0 (2026-12-03): at d = 256 an engine
     * configuration (eng=2, kcfg=33) faulted the GPU context, which takes
     * every later call of the process down with it; refused until the
     * faulting configurations are told apart. */
    if (g->d > 128)
        return refuse(note, notelen, "%s",
                      "cudnn: FP8 SDPA over d = 128 refused (an engine faulted the GPU at d = 256, "
                      "cuDNN 9.19 on the H200)");
    /* the same run: padded keys masked by a column compare (not a pattern
     * NVIDIA emits for FP8) gave non-finite rows */
    if (!g->causal && g->kv_valid < g->skvv)
        return refuse(note, notelen, "%s",
                      "cudnn: FP8 SDPA with padded keys gave non-finite rows (cuDNN 9.19 on the "
                      "H200): pad=1 covers every length");
    if (g->causal && g->shift != 0)
        return refuse(note, notelen, "%s",
                      "cudnn: FP8 SDPA's bottom-right causal mask is Blackwell's (sq < skv)");
    return 0;
}

/* Refusals known before cuDNN is asked. */
static int geom_check(const geom *g, char *note, size_t notelen)
{
    size_t v = cudnnGetVersion();
    char ver[40];
    if (g->dt == ATTN_F32)
        return refuse(note, notelen, "%s", "cudnn: fused SDPA takes f16 and bf16 only, not f32");
    if (version_refused(v)) {
        cuda_cudnn_version(ver, sizeof ver);
        return refuse(note, notelen, "%s: known-bad SDPA forward (NVIDIA), refused", ver);
    }
    if (g->dt == ATTN_E4M3) {
        int rc = fp8_check(g, v, note, notelen);
        if (rc != 0)
            return rc;
    }
    if (g->form == ATTN_GRAPH_SDPA) {
#if CUDNN_VERSION >= 91301
        if (v < 91301)
            return refuse(note, notelen, "%s", "cudnn: the SDPA_FWD operation needs cuDNN >= 9.13.1");
        if (g->causal || g->kv_valid < g->skvv)
            return refuse(note, notelen, "%s",
                          "cudnn: the SDPA_FWD operation takes masks from cuDNN 9.21 on");
#else
        return refuse(note, notelen, "%s", "cudnn: built against headers older than 9.13.1 (no SDPA_FWD)");
#endif
    }
    /* Bottom-right causal below 9.6.0: lengths must be multiples of 64
     * (sdpa_support_surface.h); pad=64 tactics satisfy it. */
    if (g->causal && g->shift != 0 && v < 90600 && (g->sqv % 64 != 0 || g->skvv % 64 != 0))
        return refuse(note, notelen, "%s",
                      "cudnn < 9.6: bottom-right causal needs lengths that are multiples of 64");
    /* Q and O start q0 rows into the buffer: keep them 16-byte aligned. */
    if ((g->q0 * g->st[ST_Q][2] * (int64_t)io_size(g->dt)) % 16 != 0 ||
        (g->q0 * g->st[ST_O][2] * (int64_t)out_size(g->dt)) % 16 != 0)
        return refuse(note, notelen, "%s", "cudnn: query row offset not 16-byte aligned (d too odd)");
    /* the rows that see no key are zeroed by a 2D memset of contiguous
     * buffers */
    if (g->zero_rows > 0 && !geom_o_contiguous(g) && !g->o8)
        return refuse(note, notelen, "%s",
                      "cudnn: rows that see no key (causal, sq > skv) need a contiguous output");
    return 0;
}

/* ---- 2. graph */

/* Unique ids of the non-virtual tensors (the variant pack's keys). */
enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE, UID_NEGINF, UID_SHIFT_A, UID_SHIFT_B,
       UID_KV_VALID,
       /* e4m3: descale_q, _k, _v, descale_s, scale_s, scale_o, amax_s, amax_o
        * (device scalars) */
       UID_DQ, UID_DK, UID_DV, UID_DS, UID_SS, UID_SO, UID_AMAX_S, UID_AMAX_O,
       UID_VIRTUAL = 100 };

/* The plan's device scalars of an e4m3 graph (cuda_cudnn_plan.dconst). */
enum { DC_ONE, DC_SCALE_S, DC_DESCALE_S, DC_SCALE_O, DC_AMAX_S, DC_AMAX_O, DC_N };
#define FP8_SCALE_S 256.0f

typedef struct graph_build {
    desc_t all[128]; /* every descriptor made, destroyed at the end (the
                        bottom-right causal graph makes about 60) */
    int nall;
    desc_t ops[32];
    int nops;
    int64_t next_uid;
    char *note;
    size_t notelen;
} graph_build;

static int keep(graph_build *gb, desc_t d)
{
    if (gb->nall >= (int)(sizeof gb->all / sizeof gb->all[0])) {
        cudnnBackendDestroyDescriptor(d);
        if (gb->note != NULL && gb->notelen > 0)
            snprintf(gb->note, gb->notelen, "cudnn: graph_build holds too few descriptors");
        return ATTUNE_ENOMEM;
    }
    gb->all[gb->nall++] = d;
    return 0;
}

static int add_op(graph_build *gb, desc_t op)
{
    if (gb->nops >= (int)(sizeof gb->ops / sizeof gb->ops[0])) {
        if (gb->note != NULL && gb->notelen > 0)
            snprintf(gb->note, gb->notelen, "cudnn: graph_build holds too few operations");
        return ATTUNE_ENOMEM;
    }
    gb->ops[gb->nops++] = op;
    return 0;
}

static void graph_build_free(graph_build *gb)
{
    for (int i = gb->nall - 1; i >= 0; i--)
        cudnnBackendDestroyDescriptor(gb->all[i]);
    gb->nall = gb->nops = 0;
}

/* dnn_make for a part of the graph: kept in gb, freed with it. */
static int gb_make(graph_build *gb, cudnnBackendDescriptorType_t kind, const char *what,
                   const dnn_attr *a, int na, desc_t *out)
{
    int rc = dnn_make(kind, what, a, na, out, gb->note, gb->notelen);
    if (rc == 0 && (rc = keep(gb, *out)) != 0)
        *out = NULL; /* keep destroyed it */
    return rc;
}

/* gb_make for an operation: also one of the graph's operations. */
static int gb_op(graph_build *gb, cudnnBackendDescriptorType_t kind, const char *what,
                 const dnn_attr *a, int na)
{
    desc_t op;
    int rc = gb_make(gb, kind, what, a, na, &op);
    return rc == 0 ? add_op(gb, op) : rc;
}

/* A tensor descriptor: uid 0 makes a virtual one (fresh uid); by_value
 * for host scalars passed in the variant pack. */
static int tensor(graph_build *gb, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                  const int64_t strides[4], int by_value, desc_t *out)
{
    bool virt = uid == 0, byv = by_value != 0;
    int64_t align = 16;
    if (virt)
        uid = gb->next_uid++;
    dnn_attr a[] = {
        {CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt},
        {CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims},
        {CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides},
        {CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid},
        {CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align},
        {CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, virt, &virt},
        {CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, byv, &byv},
    };
    return gb_make(gb, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor", a, NATTR(a), out);
}

/* A virtual tensor shaped like S ([b, hq, sqv, skvv]) or a row statistic
 * ([b, hq, sqv, 1]). */
static int virt_scores(graph_build *gb, const geom *g, cudnnDataType_t dt, int rowstat, desc_t *out)
{
    int64_t n = rowstat ? 1 : g->skvv;
    int64_t dims[4] = {g->b, g->hq, g->sqv, n};
    int64_t strides[4] = {g->hq * g->sqv * n, g->sqv * n, n, 1};
    return tensor(gb, 0, dt, dims, strides, 0, out);
}

static int scalar(graph_build *gb, int64_t uid, cudnnDataType_t dt, desc_t *out)
{
    static const int64_t one[4] = {1, 1, 1, 1};
    return tensor(gb, uid, dt, one, one, 1, out);
}

/* A float scalar in device memory (FP8's scales and amax outputs). */
static int dev_scalar(graph_build *gb, int64_t uid, desc_t *out)
{
    static const int64_t one[4] = {1, 1, 1, 1};
    return tensor(gb, uid, CUDNN_DATA_FLOAT, one, one, 0, out);
}

/* y = mode(x [, b [, t]]), computed in prec; axis >= 0 for GEN_INDEX. */
static int pointwise(graph_build *gb, cudnnPointwiseMode_t mode, cudnnDataType_t prec, int64_t axis,
                     desc_t x, desc_t b, desc_t t, desc_t y)
{
    int rc = 0;
    desc_t pw;
    dnn_attr pa[] = {
        {CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode},
        {CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec},
        {CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis >= 0, &axis},
    };
    RC_TRY(gb_make(gb, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise", pa, NATTR(pa), &pw));
    dnn_attr oa[] = {
        {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw},
        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x},
        {CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, b != NULL, &b},
        {CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, t != NULL, &t},
        {CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y},
    };
    RC_TRY(gb_op(gb, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op", oa, NATTR(oa)));
    return 0;
fail:
    return rc;
}

/* y = reduce(x) over the last dimension (y's dims say which). */
static int reduction(graph_build *gb, cudnnReduceTensorOp_t mode, desc_t x, desc_t y)
{
    int rc = 0;
    desc_t red;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    dnn_attr ra[] = {
        {CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode},
        {CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32},
    };
    RC_TRY(gb_make(gb, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction", ra, NATTR(ra), &red));
    dnn_attr oa[] = {
        {CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &red},
        {CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x},
        {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y},
    };
    RC_TRY(gb_op(gb, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op", oa, NATTR(oa)));
    return 0;
fail:
    return rc;
}

/* c = a @ b (batched over the first two dims, broadcast where b has fewer
 * heads: that is GQA), f32 accumulation. */
static int matmul(graph_build *gb, desc_t a, desc_t b, desc_t c)
{
    int rc = 0;
    desc_t mm;
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    dnn_attr ma[] = {{CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32}};
    RC_TRY(gb_make(gb, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul", ma, NATTR(ma), &mm));
    dnn_attr oa[] = {
        {CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a},
        {CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b},
        {CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c},
        {CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm},
    };
    RC_TRY(gb_op(gb, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op", oa, NATTR(oa)));
    return 0;
fail:
    return rc;
}

/* Q, K (or K^T), V, O at the geometry's strides: the session's buffers,
 * [b, h, rows, d] contiguous, or a caller's views (geom_views). Q and O
 * start q0 rows in (the pointer offset is applied at launch). */
static int io_tensors(graph_build *gb, const geom *g, int k_transposed, desc_t *q, desc_t *k,
                      desc_t *v, desc_t *o)
{
    int rc = 0;
    cudnnDataType_t dt = io_type(g->dt);
    int64_t qd[4] = {g->b, g->hq, g->sqv, g->d};
    int64_t vd[4] = {g->b, g->hkv, g->skvv, g->d};
    int64_t st[4][4];
    for (int i = 0; i < 4; i++)
        st[i][0] = g->st[i][0], st[i][1] = g->st[i][1], st[i][2] = g->st[i][2], st[i][3] = 1;
    /* K^T: K's memory read with the last two dims (and strides) swapped */
    int64_t ktd[4] = {g->b, g->hkv, g->d, g->skvv};
    int64_t kts[4] = {st[ST_K][0], st[ST_K][1], 1, st[ST_K][2]};
    RC_TRY(tensor(gb, UID_Q, dt, qd, st[ST_Q], 0, q));
    RC_TRY(tensor(gb, UID_K, dt, k_transposed ? ktd : vd, k_transposed ? kts : st[ST_K], 0, k));
    RC_TRY(tensor(gb, UID_V, dt, vd, st[ST_V], 0, v));
    if (g->o8) { /* FP8 O, contiguous in the workspace */
        int64_t os[4] = {g->hq * g->sqv * g->d, g->sqv * g->d, g->d, 1};
        RC_TRY(tensor(gb, UID_O, dt, qd, os, 0, o));
    } else {
        RC_TRY(tensor(gb, UID_O, io_type(attn_dtype_out(g->dt)), qd, st[ST_O], 0, o));
    }
    return 0;
fail:
    return rc;
}

/* e4m3's end of the comp graph, from the softmax's exp and sum: P = ex /
 * sum (f32) and its amax, P * scale_s in FP8, O1 = P8 @ V (f32), times
 * descale_s, descale_v and scale_o into O, and amax of O before scale_o
 * (NVIDIA's FP8 chain, the tensor types the frontend gives). */
static int comp_fp8_tail(graph_build *gb, const geom *g, desc_t ex, desc_t sum, desc_t v, desc_t o)
{
    int rc = 0;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    desc_t p, amax_s, ss, p8, o1, o2, o3, ds, dv, so, amax_o;
    int64_t od[4] = {g->b, g->hq, g->sqv, g->d};
    int64_t os[4] = {g->hq * g->sqv * g->d, g->sqv * g->d, g->d, 1};

    RC_TRY(virt_scores(gb, g, f32, 0, &p));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_DIV, f32, -1, ex, sum, NULL, p));
    RC_TRY(dev_scalar(gb, UID_AMAX_S, &amax_s));
    RC_TRY(reduction(gb, CUDNN_REDUCE_TENSOR_AMAX, p, amax_s));
    RC_TRY(dev_scalar(gb, UID_SS, &ss));
    RC_TRY(virt_scores(gb, g, CUDNN_DATA_FP8_E4M3, 0, &p8));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, p, ss, NULL, p8));
    RC_TRY(tensor(gb, 0, f32, od, os, 0, &o1));
    RC_TRY(matmul(gb, p8, v, o1));
    RC_TRY(dev_scalar(gb, UID_DS, &ds));
    RC_TRY(tensor(gb, 0, f32, od, os, 0, &o2));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, o1, ds, NULL, o2));
    RC_TRY(dev_scalar(gb, UID_DV, &dv));
    RC_TRY(tensor(gb, 0, f32, od, os, 0, &o3));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, o2, dv, NULL, o3));
    RC_TRY(dev_scalar(gb, UID_SO, &so));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, o3, so, NULL, o));
    RC_TRY(dev_scalar(gb, UID_AMAX_O, &amax_o));
    RC_TRY(reduction(gb, CUDNN_REDUCE_TENSOR_AMAX, o3, amax_o));
    return 0;
fail:
    return rc;
}

/* The composite graph (form comp). */
static int build_comp(graph_build *gb, const geom *g)
{
    int rc = 0;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, bl = CUDNN_DATA_BOOLEAN;
    desc_t q, kt, v, o, s, scale, ss, neginf, row, col, mask, masked, mx, sub, ex, sum, lg, stats, p;
    desc_t last;

    RC_TRY(io_tensors(gb, g, 1, &q, &kt, &v, &o));
    RC_TRY(virt_scores(gb, g, f32, 0, &s));
    RC_TRY(matmul(gb, q, kt, s));
    RC_TRY(scalar(gb, UID_SCALE, f32, &scale));
    RC_TRY(virt_scores(gb, g, f32, 0, &ss));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, s, scale, NULL, ss));
    last = ss;
    if (g->dt == ATTN_E4M3) { /* times descale_q, then descale_k (the frontend's order) */
        desc_t dq, dk, s3, s4;
        RC_TRY(dev_scalar(gb, UID_DQ, &dq));
        RC_TRY(dev_scalar(gb, UID_DK, &dk));
        RC_TRY(virt_scores(gb, g, f32, 0, &s3));
        RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, last, dq, NULL, s3));
        RC_TRY(virt_scores(gb, g, f32, 0, &s4));
        RC_TRY(pointwise(gb, CUDNN_POINTWISE_MUL, f32, -1, s3, dk, NULL, s4));
        last = s4;
    }

    if (g->causal || g->kv_valid < g->skvv) {
        RC_TRY(scalar(gb, UID_NEGINF, f32, &neginf));
        RC_TRY(virt_scores(gb, g, bl, 0, &mask));
        RC_TRY(virt_scores(gb, g, i32, 0, &col));
        RC_TRY(pointwise(gb, CUDNN_POINTWISE_GEN_INDEX, f32, 3, last, NULL, NULL, col));
        if (g->causal) {
            /* keep where row + shift >= col; the shift as (+A) then (-B),
             * the order the frontend's bottom-right mask uses (cuDNN's
             * fusion matches patterns: stay close to the known one) */
            RC_TRY(virt_scores(gb, g, i32, 0, &row));
            RC_TRY(pointwise(gb, CUDNN_POINTWISE_GEN_INDEX, f32, 2, last, NULL, NULL, row));
            if (g->shift != 0) {
                desc_t a, b, ra, rb;
                RC_TRY(scalar(gb, UID_SHIFT_A, i32, &a));
                RC_TRY(scalar(gb, UID_SHIFT_B, i32, &b));
                RC_TRY(virt_scores(gb, g, i32, 0, &ra));
                RC_TRY(virt_scores(gb, g, i32, 0, &rb));
                RC_TRY(pointwise(gb, CUDNN_POINTWISE_ADD, i32, -1, row, a, NULL, ra));
                RC_TRY(pointwise(gb, CUDNN_POINTWISE_SUB, i32, -1, ra, b, NULL, rb));
                row = rb;
            }
            RC_TRY(pointwise(gb, CUDNN_POINTWISE_CMP_GE, bl, -1, row, col, NULL, mask));
        } else {
            /* padded keys: keep where col < skv (real) */
            desc_t lim;
            RC_TRY(scalar(gb, UID_KV_VALID, i32, &lim));
            RC_TRY(pointwise(gb, CUDNN_POINTWISE_CMP_LT, bl, -1, col, lim, NULL, mask));
        }
        RC_TRY(virt_scores(gb, g, f32, 0, &masked));
        RC_TRY(pointwise(gb, CUDNN_POINTWISE_BINARY_SELECT, f32, -1, last, neginf, mask, masked));
        last = masked;
    }

    /* softmax: max, sub, exp, sum, (log + add: the stats the frontend
     * always builds, left virtual), div */
    RC_TRY(virt_scores(gb, g, f32, 1, &mx));
    RC_TRY(reduction(gb, CUDNN_REDUCE_TENSOR_MAX, last, mx));
    RC_TRY(virt_scores(gb, g, f32, 0, &sub));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_SUB, f32, -1, last, mx, NULL, sub));
    RC_TRY(virt_scores(gb, g, f32, 0, &ex));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_EXP, f32, -1, sub, NULL, NULL, ex));
    RC_TRY(virt_scores(gb, g, f32, 1, &sum));
    RC_TRY(reduction(gb, CUDNN_REDUCE_TENSOR_ADD, ex, sum));
    RC_TRY(virt_scores(gb, g, f32, 1, &lg));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_LOG, f32, -1, sum, NULL, NULL, lg));
    RC_TRY(virt_scores(gb, g, f32, 1, &stats));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_ADD, f32, -1, mx, lg, NULL, stats));
    if (g->dt == ATTN_E4M3)
        return comp_fp8_tail(gb, g, ex, sum, v, o);
    /* P in the storage dtype: the second matmul's A operand must be */
    RC_TRY(virt_scores(gb, g, io_type(g->dt), 0, &p));
    RC_TRY(pointwise(gb, CUDNN_POINTWISE_DIV, f32, -1, ex, sum, NULL, p));
    RC_TRY(matmul(gb, p, v, o));
    return 0;
fail:
    return rc;
}

/* The single SDPA operation (form sdpa). */
static int build_sdpa(graph_build *gb, const geom *g)
{
#if CUDNN_VERSION >= 91301
    int rc = 0;
    desc_t q, k, v, o, scale;
    RC_TRY(io_tensors(gb, g, 0, &q, &k, &v, &o));
    RC_TRY(scalar(gb, UID_SCALE, CUDNN_DATA_FLOAT, &scale));
    dnn_attr a[] = {
        {CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &q},
        {CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k},
        {CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v},
        {CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &o},
        {CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &scale},
    };
    RC_TRY(gb_op(gb, CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR, "sdpa op", a, NATTR(a)));
    return 0;
fail:
    return rc;
#else
    (void)g;
    return refuse(gb->note, gb->notelen, "%s", "cudnn: headers older than 9.13.1 (no SDPA_FWD)");
#endif
}

/* The finalized operation graph of g on handle h into *out; the graph's
 * parts are kept in gb (freed by the caller after the graph is done). */
static int build_graph(cudnnHandle_t h, const geom *g, graph_build *gb, desc_t *out)
{
    int rc = 0;
    gb->next_uid = UID_VIRTUAL;
    RC_TRY(g->form == ATTN_GRAPH_SDPA ? build_sdpa(gb, g) : build_comp(gb, g));
    dnn_attr a[] = {
        {CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, gb->nops, gb->ops},
        {CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h},
    };
    RC_TRY(gb_make(gb, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph", a, NATTR(a), out));
    return 0;
fail:
    return rc;
}

/* ---- handles
 *
 * Per device: slot 0 serves the calling threads (enumeration, plans built
 * on demand), slot 1 + i builder thread i. A plan runs on the handle that
 * built it; each handle's mutex is held while it builds or executes. */

#define MAX_DEVS 16
#define MAX_BUILDERS 16

typedef struct dnn_handle {
    cudnnHandle_t h;
    pthread_mutex_t mu;
} dnn_handle;

/* dnn_lock guards the plan cache, the build queue, the builders and the
 * handle table; never held while cuDNN builds or executes. */
static pthread_mutex_t dnn_lock = PTHREAD_MUTEX_INITIALIZER;
static dnn_handle hpool[MAX_DEVS][1 + MAX_BUILDERS];

/* The handle of (dev, slot), made on first use. Caller holds dnn_lock. */
static int handle_of(int dev, int slot, dnn_handle **out, char *note, size_t notelen)
{
    int rc = 0;
    dnn_handle *dh;
    if (dev < 0 || dev >= MAX_DEVS || slot < 0 || slot > MAX_BUILDERS)
        return ATTUNE_ENODEV;
    dh = &hpool[dev][slot];
    int was = -1; /* the thread's device, set back after (a listing call
                     must not move it) */
    if (dh->h == NULL) {
        if (cudaGetDevice(&was) != cudaSuccess || cudaSetDevice(dev) != cudaSuccess) {
            cudaGetLastError();
            return ATTUNE_EGPU;
        }
        DNN_TRY("create handle", cudnnCreate(&dh->h));
        pthread_mutex_init(&dh->mu, NULL);
        cudaSetDevice(was);
    }
    *out = dh;
    return 0;
fail:
    dh->h = NULL;
    if (was >= 0)
        cudaSetDevice(was);
    return rc;
}

/* ---- 3. engines and knobs */

#define MAX_KNOBS 24

typedef struct knob_info {
    int64_t type, min, max, stride;
} knob_info;

static int knob_cmp(const void *a, const void *b)
{
    const knob_info *x = a, *y = b;
    return (x->type > y->type) - (x->type < y->type);
}

/* The knobs of engine e, sorted by type. Returns the count or < 0. */
static int engine_knobs(desc_t e, knob_info *ki, char *note, size_t notelen)
{
    int rc = 0;
    desc_t infos[MAX_KNOBS];
    int64_t n = 0;
    if ((rc = dnn_empty(CUDNN_BACKEND_KNOB_INFO_DESCRIPTOR, "knob info", infos, MAX_KNOBS, note,
                        notelen)) != 0)
        return rc;
    DNN_TRY("engine knobs", cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_KNOB_INFO,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_KNOBS, &n, infos));
    if (n > MAX_KNOBS)
        n = MAX_KNOBS;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = 0;
        cudnnBackendKnobType_t type;
        DNN_TRY("knob type", cudnnBackendGetAttribute(infos[i], CUDNN_ATTR_KNOB_INFO_TYPE,
                                                      CUDNN_TYPE_KNOB_TYPE, 1, &c, &type));
        ki[i].type = (int64_t)type;
        DNN_TRY("knob min", cudnnBackendGetAttribute(infos[i], CUDNN_ATTR_KNOB_INFO_MINIMUM_VALUE,
                                                     CUDNN_TYPE_INT64, 1, &c, &ki[i].min));
        DNN_TRY("knob max", cudnnBackendGetAttribute(infos[i], CUDNN_ATTR_KNOB_INFO_MAXIMUM_VALUE,
                                                     CUDNN_TYPE_INT64, 1, &c, &ki[i].max));
        DNN_TRY("knob stride", cudnnBackendGetAttribute(infos[i], CUDNN_ATTR_KNOB_INFO_STRIDE,
                                                        CUDNN_TYPE_INT64, 1, &c, &ki[i].stride));
        if (ki[i].stride < 1)
            ki[i].stride = 1;
        if (ki[i].max < ki[i].min)
            ki[i].max = ki[i].min;
    }
    qsort(ki, (size_t)n, sizeof *ki, knob_cmp);
    rc = (int)n;
fail:
    for (int i = 0; i < MAX_KNOBS; i++)
        destroy(&infos[i]);
    return rc;
}

/* Knob code of choices (type, value)[n] against the engine's knobs ki[nk]
 * (cuda_cudnn.h). -1 when a choice is not among the knobs or the code
 * would pass 2^31. */
static int64_t knob_encode(const knob_info *ki, int nk, const int64_t *types, const int64_t *vals,
                           int n)
{
    const int64_t lim = INT64_C(1) << 31;
    int64_t code = 0, radix = 1;
    int overflow = 0; /* radix past 2^31: only unset knobs from here on */
    for (int c = 0; c < n; c++) { /* every choice must name a known knob */
        int found = 0;
        for (int i = 0; i < nk && !found; i++)
            found = types[c] == ki[i].type;
        if (!found)
            return -1;
    }
    for (int i = 0; i < nk; i++) {
        int64_t nvals = (ki[i].max - ki[i].min) / ki[i].stride + 1, digit = 0;
        for (int c = 0; c < n; c++)
            if (types[c] == ki[i].type) {
                if (vals[c] < ki[i].min || vals[c] > ki[i].max)
                    return -1;
                digit = 1 + (vals[c] - ki[i].min) / ki[i].stride;
            }
        if (digit > 0) {
            if (overflow || digit > (lim - 1 - code) / radix)
                return -1;
            code += digit * radix;
        }
        if (!overflow && radix > lim / (nvals + 1))
            overflow = 1;
        else if (!overflow)
            radix *= nvals + 1;
    }
    return code;
}

/* The inverse: the (type, value) pairs of code, into types/vals; count. */
static int knob_decode(const knob_info *ki, int nk, int64_t code, int64_t *types, int64_t *vals)
{
    const int64_t lim = INT64_C(1) << 31;
    int64_t radix = 1;
    int n = 0;
    for (int i = 0; i < nk && code > 0; i++) {
        int64_t nvals = (ki[i].max - ki[i].min) / ki[i].stride + 1;
        int64_t digit = code % (nvals + 1);
        code /= nvals + 1;
        if (radix > lim / (nvals + 1)) {
            if (code > 0)
                return -1; /* encode names no knob past this point */
        } else {
            radix *= nvals + 1;
        }
        if (digit > 0) {
            types[n] = ki[i].type;
            vals[n] = ki[i].min + (digit - 1) * ki[i].stride;
            n++;
        }
    }
    return code == 0 ? n : -1;
}

/* Engine global index and knob code of engine config cfg. */
static int config_name(desc_t cfg, int *eng, int *kcfg, char *note, size_t notelen)
{
    int rc = 0;
    desc_t e = NULL, choices[MAX_KNOBS] = {0};
    int64_t n = 0, gi = -1, types[MAX_KNOBS], vals[MAX_KNOBS];
    knob_info ki[MAX_KNOBS];
    int nk;
    DNN_TRY("engine", cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &e));
    DNN_TRY("config engine", cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE,
                                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e));
    DNN_TRY("engine index", cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64,
                                                     1, &n, &gi));
    if ((nk = engine_knobs(e, ki, note, notelen)) < 0)
        RC_TRY(nk);
    RC_TRY(dnn_empty(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice", choices, MAX_KNOBS, note,
                     notelen));
    n = 0;
    DNN_TRY("config knobs", cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_KNOBS, &n, choices));
    if (n > MAX_KNOBS)
        n = MAX_KNOBS;
    for (int64_t i = 0; i < n; i++) {
        int64_t c = 0;
        cudnnBackendKnobType_t type;
        DNN_TRY("knob choice type", cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE,
                                                             CUDNN_TYPE_KNOB_TYPE, 1, &c, &type));
        types[i] = (int64_t)type;
        DNN_TRY("knob choice value", cudnnBackendGetAttribute(choices[i], CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE,
                                                              CUDNN_TYPE_INT64, 1, &c, &vals[i]));
    }
    int64_t code = knob_encode(ki, nk, types, vals, (int)n);
    if (gi < 0 || gi > 1000000 || code < 0) {
        rc = refuse(note, notelen, "%s", "cudnn: engine config without a nameable knob code");
        goto fail;
    }
    *eng = (int)gi;
    *kcfg = (int)code;
fail:
    for (int i = 0; i < MAX_KNOBS; i++)
        destroy(&choices[i]);
    destroy(&e);
    return rc;
}

/* Engine configs of og proposed by heuristics of mode into names (eng,
 * kcfg pairs), deduplicated against the n already there; new count. */
#define MAX_CFGS 64
static int heuristics(desc_t og, cudnnBackendHeurMode_t mode, int (*names)[2], int n, int max,
                      char *note, size_t notelen)
{
    int rc = 0;
    desc_t heur = NULL, cfgs[MAX_CFGS] = {0};
    int64_t got = 0;
    dnn_attr a[] = {
        {CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og},
        {CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode},
    };
    RC_TRY(dnn_make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics", a, NATTR(a), &heur, note,
                    notelen));
    RC_TRY(dnn_empty(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config", cfgs, MAX_CFGS, note,
                     notelen));
    DNN_TRY("heuristics results", cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, MAX_CFGS, &got, cfgs));
    if (got > MAX_CFGS)
        got = MAX_CFGS;
    for (int64_t i = 0; i < got && n < max; i++) {
        int eng, kcfg, dup = 0;
        if (config_name(cfgs[i], &eng, &kcfg, note, notelen) != 0)
            continue; /* one unreadable config does not hide the others */
        for (int j = 0; j < n && !dup; j++)
            dup = names[j][0] == eng && names[j][1] == kcfg;
        if (!dup) {
            names[n][0] = eng;
            names[n][1] = kcfg;
            n++;
        }
    }
    rc = n;
fail:
    for (int i = 0; i < MAX_CFGS; i++)
        destroy(&cfgs[i]);
    destroy(&heur);
    return rc;
}

/* Enumeration cache: geometry -> engine configs. */
typedef struct enum_entry {
    geom g;
    int n;
    int names[MAX_CFGS][2];
} enum_entry;

#define ENUM_CACHE 128
/* enum_lock guards the cache and serializes enumerations; taken before
 * dnn_lock and a handle's mutex, never after them */
static pthread_mutex_t enum_lock = PTHREAD_MUTEX_INITIALIZER;
static enum_entry *enum_cache[ENUM_CACHE];
static int enum_next;

/* The (eng, kcfg) configs cuDNN proposes for g, at most max into names.
 * Caller holds enum_lock. Returns the count (0: cuDNN proposes nothing). */
static int configs_of(const geom *g, int (*names)[2], int max)
{
    int n = 0;
    char note[160]; /* reasons are logged (verbose), not kept: an empty list says enough */
    size_t notelen = sizeof note;
    dnn_handle *dh = NULL;
    graph_build gb;
    desc_t og = NULL;
    enum_entry *e = NULL;

    for (int i = 0; i < ENUM_CACHE && e == NULL; i++)
        if (enum_cache[i] != NULL && memcmp(&enum_cache[i]->g, g, sizeof *g) == 0)
            e = enum_cache[i];
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e == NULL)
            return 0;
        e->g = *g;
        double t0 = now_ms();
        memset(&gb, 0, sizeof gb);
        gb.note = note;
        gb.notelen = notelen;
        note[0] = 0;
        /* the whole ranked list, mode A's first: callers take a prefix */
        int ok = geom_check(g, note, notelen) == 0;
        if (ok) {
            pthread_mutex_lock(&dnn_lock);
            ok = handle_of(g->dev, 0, &dh, note, notelen) == 0;
            pthread_mutex_unlock(&dnn_lock);
        }
        if (ok)
            pthread_mutex_lock(&dh->mu);
        if (ok && build_graph(dh->h, g, &gb, &og) == 0) {
            int m = heuristics(og, CUDNN_HEUR_MODE_A, e->names, 0, MAX_CFGS, note, notelen);
            if (m >= 0)
                n = m;
            else
                dnn_log("heuristics mode A", note);
            m = heuristics(og, CUDNN_HEUR_MODE_FALLBACK, e->names, n, MAX_CFGS, note, notelen);
            if (m >= 0)
                n = m;
            else
                dnn_log("heuristics fallback", note);
        } else {
            dnn_log(g->form == ATTN_GRAPH_SDPA ? "sdpa graph" : "comp graph", note);
        }
        graph_build_free(&gb);
        if (ok)
            pthread_mutex_unlock(&dh->mu);
        dnn_trace("enumerate %s %lldx%lld: %d configs in %.1f ms",
                  g->form == ATTN_GRAPH_SDPA ? "sdpa" : "comp", (long long)g->sqv,
                  (long long)g->skvv, n, now_ms() - t0);
        e->n = n;
        free(enum_cache[enum_next]);
        enum_cache[enum_next] = e;
        enum_next = (enum_next + 1) % ENUM_CACHE;
    }
    n = e->n < max ? e->n : max;
    memcpy(names, e->names, (size_t)n * sizeof names[0]);
    return n;
}

/* Engine configs listed per graph: ATTUNE_CUDNN_CONFIGS (1..64) when set,
 * else 4: the head of mode A's ranking, then the fallback list's.
 * Every config that heuristics offer on the H200 is correct (the GPU test
 * checks them all with ATTUNE_CUDNN_CONFIGS=64); the first few hold the
 * fastest, and each one listed costs a plan build (docs/perf.md). */
static int max_configs(void)
{
    const char *e = getenv("ATTUNE_CUDNN_CONFIGS");
    int v = e != NULL ? atoi(e) : 0;
    return v >= 1 && v <= MAX_CFGS ? v : 4;
}

/* ATTUNE_CUDNN_KCFGS="ENG:CODE[,CODE...]", for experiments: list exactly
 * these configs of engine ENG (knob codes as in tactic names; a code the
 * engine does not take is refused when its plan is built) for the
 * unpadded graphs instead of what heuristics propose, so a sweep over an
 * engine's knob space is tuned and checked like any tactic
 * (bench/cudnn_knobs.py, which checks that the configs tuned are the
 * ones it asked for). Count into names, or -1 unset or malformed (a code
 * past INT32_MAX, an empty field, more than max codes): then heuristics
 * list as usual. */
static int pinned_configs(int (*names)[2], int max)
{
    const char *e = getenv("ATTUNE_CUDNN_KCFGS");
    char *end;
    int n = 0;
    if (e == NULL || *e == 0)
        return -1;
    long eng = strtol(e, &end, 10);
    if (end == e || *end != ':' || eng < 0 || eng > 1000000)
        return -1;
    for (const char *c = end + 1;;) {
        if (n == max)
            return -1;
        long code = strtol(c, &end, 10);
        if (end == c || code < 0 || code > INT32_MAX || (*end != ',' && *end != 0))
            return -1;
        names[n][0] = (int)eng;
        names[n][1] = (int)code;
        n++;
        if (*end == 0)
            break;
        c = end + 1;
    }
    return n;
}

int cuda_cudnn_tactics(int dev, const attn_shape *s, attn_tactic *out, int max)
{
    int n = 0;
    static const attn_graph forms[] = {ATTN_GRAPH_COMP, ATTN_GRAPH_SDPA};
    int nforms = s != NULL && s->dtype == ATTN_E4M3 ? 1 : 2; /* no FP8 SDPA_FWD */
    int names[MAX_CFGS][2], pinned[MAX_CFGS][2];
    const int npinned = pinned_configs(pinned, MAX_CFGS);

    if (s == NULL || max < 0 || (out == NULL && max > 0))
        return ATTUNE_EINVAL;
    if (s->dtype == ATTN_E4M3 && device_cc(dev) < 90)
        return 0; /* no FP8 engines: nothing to list (desc_cudnn.c says why) */
    if (s->dtype == ATTN_F32 || version_refused(cudnnGetVersion())) {
        /* one tactic, so the refusal is recorded with its reason */
        if (max < 1)
            return 0;
        memset(&out[0], 0, sizeof out[0]);
        out[0].variant = ATTN_CUDNN;
        out[0].graph = ATTN_GRAPH_COMP;
        out[0].pad = 1;
        return 1;
    }
    pthread_mutex_lock(&enum_lock);
    for (int pi = 0; pi < ATTN_NPADS; pi++) {
        int pad = attn_pads[pi];
        int64_t sqp = attn_round_up(s->sq, pad), skvp = attn_round_up(s->skv, pad);
        /* a pad whose lengths an earlier pad already gave (one that
         * changes no length: pad=1's) has the same graph and plans:
         * nothing new to measure */
        int seen = 0;
        for (int pj = 0; pj < pi; pj++)
            seen |= attn_pads_same_lengths(s->sq, s->skv, attn_pads[pj], pad);
        if (seen)
            continue;
        for (int fi = 0; fi < nforms; fi++) {
            geom g;
            geom_of(dev, s, forms[fi], sqp, skvp, &g);
            /* heuristics rank their configs: keep the first few, and
             * for padded graphs the first (each costs a plan build when
             * tuned: tuning a shape stays within seconds) */
            int cap = pi == 0 ? max_configs() : (max_configs() + 3) / 4;
            int m;
            if (npinned >= 0) {
                m = pi == 0 ? npinned : 0;
                memcpy(names, pinned, (size_t)m * sizeof names[0]);
            } else {
                m = configs_of(&g, names, cap);
            }
            for (int i = 0; i < m && n < max; i++) {
                memset(&out[n], 0, sizeof out[n]);
                out[n].variant = ATTN_CUDNN;
                out[n].graph = forms[fi];
                out[n].eng = names[i][0];
                out[n].kcfg = names[i][1];
                out[n].pad = pad;
                n++;
            }
        }
    }
    pthread_mutex_unlock(&enum_lock);
    if (n == 0 && s->dtype == ATTN_E4M3 && max >= 1) {
        /* no FP8 engine for this geometry (a shifted causal mask, a head
         * dim FP8 does not take): one tactic, so the refusal is recorded
         * with geom_check's reason */
        memset(&out[0], 0, sizeof out[0]);
        out[0].variant = ATTN_CUDNN;
        out[0].graph = ATTN_GRAPH_COMP;
        out[0].pad = 1;
        n = 1;
    }
    return n;
}

/* ---- 4. plans
 *
 * The cache holds one entry per (device, geometry, engine, knobs) in one
 * of these states; QUEUED and BUILDING entries are never evicted:
 *   QUEUED    waiting for a builder (cuda_cudnn_prefetch), or for plan_get,
 *             which builds it itself rather than wait behind the queue;
 *   BUILDING  a thread is building it; others wait on done_cv;
 *   READY     built: plan_get hands it out (refs counts the holders);
 *   REFUSED   cuDNN refused it (EUNSUPP): the reason is kept and handed
 *             out again, the refusal is not rebuilt;
 *   FAILED    a builder failed for another reason (memory, GPU): the next
 *             plan_get drops the entry and tries again itself. */

typedef enum { PLAN_QUEUED, PLAN_BUILDING, PLAN_READY, PLAN_REFUSED, PLAN_FAILED } plan_state;

struct cuda_cudnn_plan {
    geom g;
    int eng, kcfg;
    attn_shape shape; /* the shape it was queued for (prefetch_cancel) */
    plan_state state;
    int64_t seq;      /* queue order */
    int rc;           /* REFUSED, FAILED: the error, and why in note */
    char note[160];
    double built_ms;  /* READY: what building took */
    int reported;     /* READY: plan_get has reported the build (unreported:
                         built ahead and not taken yet) */
    dnn_handle *dh;   /* READY: the handle that built it, which runs it */
    desc_t plan;
    /* what the plan was made from, kept alive as long as it: the backend
     * API does not promise that a plan outlives its graph and config */
    graph_build gb;
    desc_t engine, cfg, choices[MAX_KNOBS];
    size_t ws_bytes;
    int refs;
    float scale, neginf;
    int32_t shift_a, shift_b, kv_valid;
    float *dconst;    /* e4m3: the device scalars (DC_*), NULL otherwise */
    size_t o8_off;    /* g.o8: where FP8 O lies in the workspace */
    size_t ws_one;    /* g.chunks > 1: cuDNN's workspace for one stream (two
                         at the workspace's start, one for each stream) */
};

#define PLAN_CACHE 256
static cuda_cudnn_plan *plans[PLAN_CACHE];
static int stat_builds, stat_hits, stat_prefetched;

/* builders: threads that build QUEUED plans, oldest first */
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* queued work, or stop */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* a build ended */
static pthread_t builders[MAX_BUILDERS];
static int nbuilders, builders_stop, shutdown_registered;
static int64_t queue_seq;

/* Destroy the plan and what it was made from (not p itself). */
static void plan_parts_free(cuda_cudnn_plan *p)
{
    destroy(&p->plan);
    destroy(&p->cfg);
    for (int i = 0; i < MAX_KNOBS; i++)
        destroy(&p->choices[i]);
    destroy(&p->engine);
    graph_build_free(&p->gb);
    if (p->dconst != NULL) {
        cudaFree(p->dconst);
        p->dconst = NULL;
    }
}

/* A new entry for (g, tactic t of shape s), not yet built. */
static cuda_cudnn_plan *plan_new(const geom *g, const attn_shape *s, const attn_tactic *t)
{
    cuda_cudnn_plan *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->g = *g;
    p->shape = *s;
    p->eng = t->eng;
    p->kcfg = t->kcfg;
    p->scale = (float)(1.0 / sqrt((double)s->d));
    /* -inf from 9.10 on; older cuDNN wants the lowest float (frontend) */
    p->neginf = cudnnGetVersion() >= 91000 ? -INFINITY : -3.402823466e38f;
    /* shift = a - b, given as the view's lengths (geom_of says why) */
    p->shift_a = (int32_t)g->skvv;
    p->shift_b = (int32_t)g->sqv;
    p->kv_valid = (int32_t)g->kv_valid;
    return p;
}

/* Caller holds dnn_lock. */
static cuda_cudnn_plan *cache_find(const geom *g, int eng, int kcfg)
{
    for (int i = 0; i < PLAN_CACHE; i++) {
        cuda_cudnn_plan *c = plans[i];
        if (c != NULL && c->eng == eng && c->kcfg == kcfg && memcmp(&c->g, g, sizeof *g) == 0)
            return c;
    }
    return NULL;
}

/* Remove p from the cache and free it. Caller holds dnn_lock; p is
 * neither held nor BUILDING. */
static void cache_drop(cuda_cudnn_plan *p)
{
    for (int i = 0; i < PLAN_CACHE; i++)
        if (plans[i] == p)
            plans[i] = NULL;
    plan_parts_free(p);
    free(p);
}

/* 1 when c may be evicted: done and unheld; with spare_fresh, not a plan
 * built ahead that nobody has taken yet either. */
static int evictable(const cuda_cudnn_plan *c, int spare_fresh)
{
    if (c->refs > 0 || c->state == PLAN_QUEUED || c->state == PLAN_BUILDING)
        return 0;
    return !(spare_fresh && c->state == PLAN_READY && !c->reported);
}

/* Put p in the cache: a free slot, else one whose entry may be evicted,
 * plans built ahead and not yet taken last (prefetch: never). ENOMEM when
 * no slot is free. Caller holds dnn_lock. */
static int cache_insert(cuda_cudnn_plan *p, int prefetch)
{
    int slot = -1;
    for (int i = 0; i < PLAN_CACHE && slot < 0; i++)
        if (plans[i] == NULL)
            slot = i;
    for (int pass = 0; pass < (prefetch ? 1 : 2) && slot < 0; pass++)
        for (int i = 0; i < PLAN_CACHE && slot < 0; i++)
            if (evictable(plans[i], pass == 0)) {
                cache_drop(plans[i]);
                slot = i;
            }
    if (slot < 0)
        return ATTUNE_ENOMEM;
    plans[slot] = p;
    return 0;
}

/* ATTUNE_CUDNN_TRACE: the engine's knob space (type:min..max/stride, in
 * the order of knob_encode's digits) and the choices of kcfg, one line,
 * so a sweep can compute every code (bench/cudnn_knobs.py); a line cut
 * at the buffer's end says so (" cut"), and readers refuse it. */
static void knobs_trace(const char *form, int eng, int kcfg, const knob_info *ki, int nk,
                        const int64_t *types, const int64_t *vals, int nc)
{
    char line[440];
    size_t o = 0;
    pthread_once(&env_once, env_read);
    if (!env_trace)
        return;
    for (int i = 0; i < nk && o < sizeof line; i++)
        o += (size_t)snprintf(line + o, sizeof line - o, " %lld:%lld..%lld/%lld", (long long)ki[i].type,
                              (long long)ki[i].min, (long long)ki[i].max, (long long)ki[i].stride);
    for (int i = 0; i < nc && o < sizeof line; i++)
        o += (size_t)snprintf(line + o, sizeof line - o, "%s%lld=%lld", i == 0 ? " set " : ",",
                              (long long)types[i], (long long)vals[i]);
    dnn_trace("knobs %s eng=%d kcfg=%d:%s%s", form, eng, kcfg, nk == 0 ? " none" : line,
              o >= sizeof line ? " cut" : "");
}

/* Build the execution plan of (p->g, eng, kcfg) on handle h into p->plan.
 * The caller holds h's mutex, not dnn_lock. */
static int plan_build(cuda_cudnn_plan *p, cudnnHandle_t h, char *note, size_t notelen)
{
    int rc = 0;
    graph_build *gb = &p->gb;
    desc_t og = NULL, plan = NULL;
    knob_info ki[MAX_KNOBS];
    int64_t gi = p->eng, types[MAX_KNOBS], vals[MAX_KNOBS], ws = 0, c = 0;
    int nk, nc;

    memset(gb, 0, sizeof *gb);
    gb->note = note;
    gb->notelen = notelen;
    if (cudaSetDevice(p->g.dev) != cudaSuccess) {
        cudaGetLastError();
        return ATTUNE_EGPU;
    }
    RC_TRY(build_graph(h, &p->g, gb, &og));
    dnn_attr ea[] = {
        {CUDNN_ATTR_ENGINE_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &og},
        {CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &gi},
    };
    RC_TRY(dnn_make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine", ea, NATTR(ea), &p->engine, note,
                    notelen));
    if ((nk = engine_knobs(p->engine, ki, note, notelen)) < 0)
        RC_TRY(nk);
    if ((nc = knob_decode(ki, nk, p->kcfg, types, vals)) < 0) {
        rc = refuse(note, notelen, "%s", "cudnn: kcfg out of range for this engine");
        goto fail;
    }
    knobs_trace(p->g.form == ATTN_GRAPH_SDPA ? "sdpa" : "comp", p->eng, p->kcfg, ki, nk, types, vals, nc);
    for (int i = 0; i < nc; i++) {
        cudnnBackendKnobType_t type = (cudnnBackendKnobType_t)types[i];
        dnn_attr ka[] = {
            {CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE, 1, &type},
            {CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1, &vals[i]},
        };
        RC_TRY(dnn_make(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, "knob choice", ka, NATTR(ka),
                        &p->choices[i], note, notelen));
    }
    dnn_attr ca[] = {
        {CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->engine},
        {CUDNN_ATTR_ENGINECFG_KNOB_CHOICES, CUDNN_TYPE_BACKEND_DESCRIPTOR, nc, p->choices},
    };
    RC_TRY(dnn_make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config", ca, NATTR(ca), &p->cfg,
                    note, notelen));
    /* finalizing the plan is the slow step: runtime compilation */
    dnn_attr pa[] = {
        {CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h},
        {CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &p->cfg},
    };
    RC_TRY(dnn_make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "plan", pa, NATTR(pa), &plan, note,
                    notelen));
    DNN_TRY("plan workspace", cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                       CUDNN_TYPE_INT64, 1, &c, &ws));
    if (ws < 0 || (size_t)ws > CUDA_CUDNN_WS_CAP) {
        if (note != NULL && notelen > 0)
            snprintf(note, notelen, "cudnn: workspace %lld bytes over the cap %zu", (long long)ws,
                     (size_t)CUDA_CUDNN_WS_CAP);
        rc = ATTUNE_EUNSUPP;
        goto fail;
    }
    p->ws_bytes = (size_t)ws;
    if (p->g.dt == ATTN_E4M3) { /* the scalars, and FP8 O after cuDNN's own workspace */
        float dc[DC_N] = {1.0f, FP8_SCALE_S, 1.0f / FP8_SCALE_S, 1.0f, 0.0f, 0.0f};
        if (cudaMalloc((void **)&p->dconst, sizeof dc) != cudaSuccess ||
            cudaMemcpy(p->dconst, dc, sizeof dc, cudaMemcpyHostToDevice) != cudaSuccess) {
            cudaGetLastError();
            p->dconst = NULL;
            rc = ATTUNE_ENOMEM;
            goto fail;
        }
        if (p->g.o8) {
            p->ws_one = (p->ws_bytes + 255) / 256 * 256;
            p->o8_off = p->g.chunks > 1 ? 2 * p->ws_one : p->ws_one;
            p->ws_bytes = p->o8_off + (size_t)(p->g.chunks * p->g.b * p->g.hq * p->g.sqv * p->g.d);
        }
    }
    p->plan = plan;
    gb->note = NULL; /* the caller's buffer: not ours to keep */
    gb->notelen = 0;
    return 0;
fail:
    destroy(&plan);
    plan_parts_free(p);
    gb->note = NULL;
    gb->notelen = 0;
    return rc;
}

/* Build p (state BUILDING, in the cache) on handle slot of its device and
 * record the outcome. Called with dnn_lock held; drops it while cuDNN
 * works. Returns the build's error (note says why). */
static int build_entry(cuda_cudnn_plan *p, int slot, char *note, size_t notelen)
{
    dnn_handle *dh = NULL;
    double t0 = now_ms();
    int rc = handle_of(p->g.dev, slot, &dh, note, notelen);
    if (rc == 0) {
        pthread_mutex_unlock(&dnn_lock);
        pthread_mutex_lock(&dh->mu);
        rc = plan_build(p, dh->h, note, notelen);
        pthread_mutex_unlock(&dh->mu);
        pthread_mutex_lock(&dnn_lock);
    }
    if (rc == 0) {
        p->state = PLAN_READY;
        p->dh = dh;
        p->built_ms = now_ms() - t0;
        if (slot > 0)
            stat_prefetched++;
        else
            stat_builds++;
    } else {
        p->state = rc == ATTUNE_EUNSUPP ? PLAN_REFUSED : PLAN_FAILED;
        p->rc = rc;
        snprintf(p->note, sizeof p->note, "%s", note != NULL ? note : "");
    }
    dnn_trace("build %s %lldx%lld eng=%d kcfg=%d on handle %d: %s in %.1f ms",
              p->g.form == ATTN_GRAPH_SDPA ? "sdpa" : "comp", (long long)p->g.sqv,
              (long long)p->g.skvv, p->eng, p->kcfg, slot, rc == 0 ? "ok" : attune_strerror(rc),
              now_ms() - t0);
    pthread_cond_broadcast(&done_cv);
    return rc;
}

/* Builder thread of handle slot 1 + i: builds the oldest QUEUED entry until
 * told to stop. */
static void *builder_main(void *arg)
{
    int slot = (int)(intptr_t)arg;
    char note[160];
    pthread_mutex_lock(&dnn_lock);
    while (!builders_stop) {
        cuda_cudnn_plan *p = NULL;
        for (int i = 0; i < PLAN_CACHE; i++)
            if (plans[i] != NULL && plans[i]->state == PLAN_QUEUED &&
                (p == NULL || plans[i]->seq < p->seq))
                p = plans[i];
        if (p == NULL) {
            pthread_cond_wait(&work_cv, &dnn_lock);
            continue;
        }
        p->state = PLAN_BUILDING;
        note[0] = 0;
        if (build_entry(p, slot, note, sizeof note) != 0)
            dnn_log("background plan build", note);
    }
    pthread_mutex_unlock(&dnn_lock);
    return NULL;
}

/* At exit: no new builds; wait for the builds in flight (a thread inside
 * cuDNN while the process tears the library down would crash it). */
static void builders_shutdown(void)
{
    int n;
    pthread_mutex_lock(&dnn_lock);
    builders_stop = 1;
    for (int i = 0; i < PLAN_CACHE; i++)
        if (plans[i] != NULL && plans[i]->state == PLAN_QUEUED)
            cache_drop(plans[i]);
    pthread_cond_broadcast(&work_cv);
    n = nbuilders;
    nbuilders = 0; /* joined once, whoever calls again */
    pthread_mutex_unlock(&dnn_lock);
    for (int i = 0; i < n; i++)
        pthread_join(builders[i], NULL);
}

/* Builder threads: ATTUNE_CUDNN_BUILDERS (0..16; 0 builds every plan on
 * demand, in the caller, as before builders existed) when set, else the
 * online CPUs less two (the tuner's own thread and the system), 1 to 12:
 * on the H200 host (16 cores) 12. */
static int builder_count(void)
{
    const char *e = getenv("ATTUNE_CUDNN_BUILDERS");
    if (e != NULL && *e != 0) {
        int v = atoi(e);
        return v < 0 ? 0 : (v > MAX_BUILDERS ? MAX_BUILDERS : v);
    }
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long n = cpus - 2;
    return n < 1 ? 1 : (n > 12 ? 12 : (int)n);
}

/* Start builders up to want. Caller holds dnn_lock. Returns how many run. */
static int builders_start(int want)
{
    if (builders_stop)
        return 0;
    if (!shutdown_registered && want > 0) {
        if (atexit(builders_shutdown) != 0)
            return 0; /* no clean exit for threads: build on demand only */
        shutdown_registered = 1;
    }
    while (nbuilders < want &&
           pthread_create(&builders[nbuilders], NULL, builder_main,
                          (void *)(intptr_t)(nbuilders + 1)) == 0)
        nbuilders++;
    return nbuilders;
}

/* When plans are built ahead: ATTUNE_CUDNN_PREFETCH = open (default): at
 * session open, so the builds overlap the other variants' measurements;
 * first: at the first plan_get of the shape, which then waits until all
 * of the shape's plans are built (nothing builds while anything is timed
 * or captured); off: each plan on demand, in the caller. No builders
 * (ATTUNE_CUDNN_BUILDERS=0) is off too. */
typedef enum { PREFETCH_OFF, PREFETCH_OPEN, PREFETCH_FIRST } prefetch_mode;

static prefetch_mode prefetch_mode_of_env(void)
{
    const char *e = getenv("ATTUNE_CUDNN_PREFETCH");
    if (builder_count() == 0 || (e != NULL && strcmp(e, "off") == 0))
        return PREFETCH_OFF;
    return e != NULL && strcmp(e, "first") == 0 ? PREFETCH_FIRST : PREFETCH_OPEN;
}

/* Queue every cudnn tactic of s on dev that is not cached yet, oldest
 * first, and wake the builders. Returns the number queued or < 0. */
static int prefetch_queue(int dev, const attn_shape *s)
{
    attn_tactic *t;
    int n, queued = 0, want = builder_count();

    if (want == 0 || s->dtype == ATTN_F32)
        return 0;
    t = malloc(MAX_CFGS * 2 * ATTN_NPADS * sizeof *t);
    if (t == NULL)
        return ATTUNE_ENOMEM;
    n = cuda_cudnn_tactics(dev, s, t, MAX_CFGS * 2 * ATTN_NPADS);
    pthread_mutex_lock(&dnn_lock);
    if (n > 0 && builders_start(want) > 0) {
        for (int i = 0; i < n; i++) {
            geom g;
            geom_of(dev, s, t[i].graph, attn_round_up(s->sq, t[i].pad),
                    attn_round_up(s->skv, t[i].pad), &g);
            if (geom_check(&g, NULL, 0) != 0 || cache_find(&g, t[i].eng, t[i].kcfg) != NULL)
                continue;
            cuda_cudnn_plan *p = plan_new(&g, s, &t[i]);
            if (p == NULL)
                break;
            if (cache_insert(p, 1) != 0) {
                free(p);
                break;
            }
            p->state = PLAN_QUEUED;
            p->seq = ++queue_seq;
            queued++;
        }
        pthread_cond_broadcast(&work_cv);
    }
    pthread_mutex_unlock(&dnn_lock);
    dnn_trace("prefetch %lldx%lld: %d of %d tactics queued for %d builders", (long long)s->sq,
              (long long)s->skv, queued, n, want);
    free(t);
    return queued;
}

int cuda_cudnn_prefetch(int dev, const attn_shape *s)
{
    if (s == NULL)
        return ATTUNE_EINVAL;
    return prefetch_mode_of_env() == PREFETCH_OPEN ? prefetch_queue(dev, s) : 0;
}

static int shape_eq(const attn_shape *a, const attn_shape *b)
{
    return a->b == b->b && a->hq == b->hq && a->hkv == b->hkv && a->sq == b->sq &&
           a->skv == b->skv && a->d == b->d && a->dtype == b->dtype && a->causal == b->causal;
}

/* Wait until no plan of shape s on dev is QUEUED or BUILDING. Caller
 * holds dnn_lock. */
static void wait_shape(int dev, const attn_shape *s)
{
    for (;;) {
        int busy = 0;
        for (int i = 0; i < PLAN_CACHE && !busy; i++)
            busy = plans[i] != NULL && plans[i]->g.dev == dev && shape_eq(&plans[i]->shape, s) &&
                   (plans[i]->state == PLAN_QUEUED || plans[i]->state == PLAN_BUILDING);
        if (!busy || nbuilders == 0)
            return;
        pthread_cond_wait(&done_cv, &dnn_lock);
    }
}

/* Waiting for the builds in flight matters at exit: cuDNN loads its
 * engine libraries on first use, after builders_shutdown was registered,
 * so their destructors run before it does, and a builder still inside
 * them crashes the process (seen: gpu_cuda_backend, which lists cudnn
 * tactics, never plans them, and exits right after its last session). */
void cuda_cudnn_prefetch_cancel(int dev, const attn_shape *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&dnn_lock);
    for (int i = 0; i < PLAN_CACHE; i++)
        if (plans[i] != NULL && plans[i]->state == PLAN_QUEUED && plans[i]->g.dev == dev &&
            shape_eq(&plans[i]->shape, s))
            cache_drop(plans[i]);
    wait_shape(dev, s);
    pthread_mutex_unlock(&dnn_lock);
}

void cuda_cudnn_prefetch_wait(void)
{
    pthread_mutex_lock(&dnn_lock);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < PLAN_CACHE && !busy; i++)
            busy = plans[i] != NULL &&
                   (plans[i]->state == PLAN_QUEUED || plans[i]->state == PLAN_BUILDING);
        if (!busy || nbuilders == 0)
            break;
        pthread_cond_wait(&done_cv, &dnn_lock);
    }
    pthread_mutex_unlock(&dnn_lock);
}

/* cuda_cudnn_plan_get and _views: the plan of t on geometry g. */
static int plan_get_geom(int dev, const attn_shape *s, const attn_tactic *t, const geom *gp,
                         cuda_cudnn_plan **out, double *built_ms, char *note, size_t notelen)
{
    int rc = 0;
    cuda_cudnn_plan *p;
    geom g = *gp;
    double t0;

    if ((rc = geom_check(&g, note, notelen)) != 0)
        return rc;

    if (prefetch_mode_of_env() == PREFETCH_FIRST)
        prefetch_queue(dev, s); /* queues nothing once the shape's plans exist */
    pthread_mutex_lock(&dnn_lock);
    t0 = now_ms();
    if (prefetch_mode_of_env() == PREFETCH_FIRST)
        wait_shape(dev, s);
    while ((p = cache_find(&g, t->eng, t->kcfg)) != NULL && p->state == PLAN_BUILDING)
        pthread_cond_wait(&done_cv, &dnn_lock); /* a builder has it: wait for it alone */
    if (now_ms() - t0 >= 1)
        dnn_trace("plan_get eng=%d kcfg=%d waited %.1f ms", t->eng, t->kcfg, now_ms() - t0);
    if (p != NULL && p->state == PLAN_READY) {
        p->refs++;
        stat_hits++;
        if (!p->reported) { /* built ahead: report the build once, as if built here */
            p->reported = 1;
            if (built_ms != NULL)
                *built_ms = p->built_ms;
            if (note != NULL && notelen > 0)
                snprintf(note, notelen, "cudnn plan built in %.0f ms by a builder thread%s",
                         p->built_ms, now_ms() - t0 >= 1 ? " (waited for it)" : "");
        }
        *out = p;
        goto done;
    }
    if (p != NULL && p->state == PLAN_REFUSED) {
        rc = p->rc;
        if (note != NULL && notelen > 0)
            snprintf(note, notelen, "%s", p->note);
        goto done;
    }
    if (p != NULL && p->state == PLAN_FAILED) { /* a builder's failure: try again here */
        cache_drop(p);
        p = NULL;
    }
    if (p == NULL) { /* not queued: a new entry, built here */
        if ((p = plan_new(&g, s, t)) == NULL) {
            rc = ATTUNE_ENOMEM;
            goto done;
        }
        if ((rc = cache_insert(p, 0)) != 0) {
            free(p);
            goto done;
        }
    }
    /* new, or queued and not started: this thread builds it now */
    p->state = PLAN_BUILDING;
    if ((rc = build_entry(p, 0, note, notelen)) == 0) {
        p->refs++;
        p->reported = 1;
        if (built_ms != NULL)
            *built_ms = p->built_ms;
        if (note != NULL && notelen > 0)
            snprintf(note, notelen, "cudnn plan built in %.0f ms", p->built_ms);
        *out = p;
    } else if (rc != ATTUNE_EUNSUPP) {
        cache_drop(p); /* memory, GPU: not remembered, the next get tries again */
    }
done:
    pthread_mutex_unlock(&dnn_lock);
    return rc;
}

/* Argument checks common to both gets; 0 or EINVAL. */
static int get_args(const attn_shape *s, const attn_tactic *t, cuda_cudnn_plan **out,
                    double *built_ms, char *note, size_t notelen)
{
    if (out == NULL || s == NULL || t == NULL)
        return ATTUNE_EINVAL;
    *out = NULL;
    if (built_ms != NULL)
        *built_ms = 0;
    if (note != NULL && notelen > 0)
        note[0] = 0;
    if (t->variant != ATTN_CUDNN || (t->graph != ATTN_GRAPH_SDPA && t->graph != ATTN_GRAPH_COMP) ||
        t->eng < 0 || t->kcfg < 0)
        return ATTUNE_EINVAL;
    return 0;
}

int cuda_cudnn_plan_get(int dev, const attn_shape *s, const attn_tactic *t, int64_t sq_pad,
                        int64_t skv_pad, cuda_cudnn_plan **out, double *built_ms, char *note,
                        size_t notelen)
{
    geom g;
    int rc = get_args(s, t, out, built_ms, note, notelen);
    if (rc != 0)
        return rc;
    if (sq_pad < s->sq || skv_pad < s->skv)
        return ATTUNE_EINVAL;
    geom_of(dev, s, t->graph, sq_pad, skv_pad, &g);
    return plan_get_geom(dev, s, t, &g, out, built_ms, note, notelen);
}

int cuda_cudnn_plan_get_views(int dev, const attn_shape *s, const attn_tactic *t,
                              const attn_io *views, cuda_cudnn_plan **out, double *built_ms,
                              char *note, size_t notelen)
{
    geom g;
    int rc = get_args(s, t, out, built_ms, note, notelen);
    if (rc != 0)
        return rc;
    if (views == NULL)
        return ATTUNE_EINVAL;
    const attn_tensor *v[4] = {&views->q, &views->k, &views->v, &views->o};
    for (int i = 0; i < 4; i++) { /* cuDNN's engines load whole 16-byte vectors */
        int64_t es = (int64_t)(i == 3 ? out_size(s->dtype) : io_size(s->dtype));
        if (v[i]->sb < 0 || v[i]->sh < 0 || v[i]->ss < s->d || (v[i]->sb * es) % 16 ||
            (v[i]->sh * es) % 16 || (v[i]->ss * es) % 16)
            return refuse(note, notelen, "%s", "cudnn: strides not in 16-byte units");
    }
    geom_of(dev, s, t->graph, s->sq, s->skv, &g);
    geom_views(&g, views);
    return plan_get_geom(dev, s, t, &g, out, built_ms, note, notelen);
}

void cuda_cudnn_plan_put(cuda_cudnn_plan *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&dnn_lock);
    if (p->refs > 0)
        p->refs--;
    pthread_mutex_unlock(&dnn_lock);
}

size_t cuda_cudnn_workspace_bytes(const cuda_cudnn_plan *p) { return p ? p->ws_bytes : 0; }

int cuda_cudnn_plan_describe(const cuda_cudnn_plan *p, int *eng, int *kcfg)
{
    int rc = 0;
    char note[160];
    size_t notelen = sizeof note;
    desc_t cfg = NULL;
    int64_t n = 0;
    if (p == NULL || eng == NULL || kcfg == NULL || p->dh == NULL)
        return ATTUNE_EINVAL;
    pthread_mutex_lock(&p->dh->mu);
    DNN_TRY("engine config", cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfg));
    DNN_TRY("plan config", cudnnBackendGetAttribute(p->plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &cfg));
    RC_TRY(config_name(cfg, eng, kcfg, note, notelen));
fail:
    destroy(&cfg);
    pthread_mutex_unlock(&p->dh->mu);
    return rc == ATTUNE_EUNSUPP ? ATTUNE_EGPU : rc;
}

void cuda_cudnn_cache_stats(int *builds, int *hits, int *held)
{
    pthread_mutex_lock(&dnn_lock);
    if (builds)
        *builds = stat_builds;
    if (hits)
        *hits = stat_hits;
    if (held) {
        *held = 0;
        for (int i = 0; i < PLAN_CACHE; i++)
            *held += plans[i] != NULL && plans[i]->refs > 0;
    }
    pthread_mutex_unlock(&dnn_lock);
}

void cuda_cudnn_prefetch_stats(int *built, int *builders_running)
{
    pthread_mutex_lock(&dnn_lock);
    if (built)
        *built = stat_prefetched;
    if (builders_running)
        *builders_running = nbuilders;
    pthread_mutex_unlock(&dnn_lock);
}

/* ---- 5. launch */

/* One execution of p's graph on stream (the handle keeps that stream set
 * after, as it did before chunks; cuda_cudnn_launch sets the caller's back
 * after a plan's side stream): q, k, v at the graph's first
 * batch and head, o_graph where the graph writes O (o's q0-th row, or FP8
 * O in the workspace), ws_dnn cuDNN's own workspace. */
static int launch_graph(cuda_cudnn_plan *p, const void *q, const void *k, const void *v,
                        void *o_graph, const float *const descale[3], void *ws_dnn,
                        cudaStream_t stream)
{
    int rc = 0;
    char *note = NULL;
    size_t notelen = 0;
    desc_t vp = NULL;
    const geom *g = &p->g;
    const size_t es = io_size(g->dt);
    int64_t uids[20];
    void *ptrs[20];
    int n = 0;

    uids[n] = UID_Q, ptrs[n++] = (char *)q + (size_t)(g->q0 * g->st[ST_Q][2]) * es;
    uids[n] = UID_K, ptrs[n++] = (void *)k;
    uids[n] = UID_V, ptrs[n++] = (void *)v;
    uids[n] = UID_O, ptrs[n++] = o_graph;
    uids[n] = UID_SCALE, ptrs[n++] = &p->scale;
    if (g->form == ATTN_GRAPH_COMP && (g->causal || g->kv_valid < g->skvv)) {
        uids[n] = UID_NEGINF, ptrs[n++] = &p->neginf;
        if (g->causal && g->shift != 0) {
            uids[n] = UID_SHIFT_A, ptrs[n++] = &p->shift_a;
            uids[n] = UID_SHIFT_B, ptrs[n++] = &p->shift_b;
        } else if (!g->causal) {
            uids[n] = UID_KV_VALID, ptrs[n++] = &p->kv_valid;
        }
    }
    if (g->dt == ATTN_E4M3) {
        float *c = p->dconst, *one = p->dconst + DC_ONE;
        uids[n] = UID_DQ, ptrs[n++] = descale != NULL && descale[0] != NULL ? (void *)descale[0] : one;
        uids[n] = UID_DK, ptrs[n++] = descale != NULL && descale[1] != NULL ? (void *)descale[1] : one;
        uids[n] = UID_DV, ptrs[n++] = !g->o8 && descale != NULL && descale[2] != NULL
                                          ? (void *)descale[2] : one;
        uids[n] = UID_DS, ptrs[n++] = c + DC_DESCALE_S;
        uids[n] = UID_SS, ptrs[n++] = c + DC_SCALE_S;
        uids[n] = UID_SO, ptrs[n++] = c + DC_SCALE_O;
        uids[n] = UID_AMAX_S, ptrs[n++] = c + DC_AMAX_S;
        uids[n] = UID_AMAX_O, ptrs[n++] = c + DC_AMAX_O;
    }
    dnn_attr a[] = {
        {CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids},
        {CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs},
        {CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws_dnn},
    };
    RC_TRY(dnn_make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack", a, NATTR(a), &vp, note,
                    notelen));
    /* the handle that built the plan runs it; set-stream + execute as one */
    pthread_mutex_lock(&p->dh->mu);
    cudnnStatus_t st = cudnnSetStream(p->dh->h, stream);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendExecute(p->dh->h, p->plan, vp);
    pthread_mutex_unlock(&p->dh->mu);
    if (st != CUDNN_STATUS_SUCCESS)
        rc = dnn_err(st, "execute", note, notelen);
fail:
    destroy(&vp);
    return rc;
}

int cuda_cudnn_chunks(const cuda_cudnn_plan *p) { return p != NULL ? (int)p->g.chunks : 1; }

int cuda_cudnn_launch(cuda_cudnn_plan *p, const void *q, const void *k, const void *v, void *o,
                      const float *const descale[3], void *ws, cudaStream_t stream,
                      const cuda_cudnn_fork *fk)
{
    int rc = 0;
    const geom *g;
    size_t es, eo, row_bytes;

    if (p == NULL || p->dh == NULL || q == NULL || k == NULL || v == NULL || o == NULL ||
        (p->ws_bytes > 0 && ws == NULL))
        return ATTUNE_EINVAL;
    g = &p->g;
    es = io_size(g->dt);
    eo = out_size(g->dt);
    row_bytes = (size_t)g->d * eo;
    if (!g->o8) {
        if (g->zero_rows > 0 &&
            cudaMemset2DAsync(o, (size_t)g->q_rows * row_bytes, 0,
                              (size_t)g->zero_rows * row_bytes, (size_t)(g->b * g->hq),
                              stream) != cudaSuccess) {
            cudaGetLastError();
            return ATTUNE_EGPU;
        }
        rc = launch_graph(p, q, k, v, (char *)o + (size_t)(g->q0 * g->st[ST_O][2]) * eo, descale,
                          ws, stream);
        return rc == ATTUNE_EUNSUPP ? ATTUNE_EGPU : rc;
    }
    /* FP8 O: chunk c's graph, then its bf16 pass, on stream (c even) or
     * fk's side stream (c odd), forked from stream and joined back to it */
    const int64_t nc = g->chunks, o8_chunk = g->b * g->hq * g->sqv * g->d;
    const int fork = nc > 1 && fk != NULL && fk->side != NULL;
    if (fork) {
        if (cudaEventRecord(fk->fork, stream) != cudaSuccess ||
            cudaStreamWaitEvent(fk->side, fk->fork, 0) != cudaSuccess) {
            cudaGetLastError();
            return ATTUNE_EGPU;
        }
    }
    for (int64_t c = 0; c < nc && rc == 0; c++) {
        const int side = fork && (c & 1);
        cudaStream_t sc = side ? fk->side : stream;
        /* element offsets of chunk c in q, k, v (and out) */
        const int64_t oq = c * (g->chunk_heads ? g->hq * g->st[ST_Q][1] : g->b * g->st[ST_Q][0]);
        const int64_t okv = c * (g->chunk_heads ? g->hkv * g->st[ST_K][1] : g->b * g->st[ST_K][0]);
        const int64_t ov = c * (g->chunk_heads ? g->hkv * g->st[ST_V][1] : g->b * g->st[ST_V][0]);
        const int64_t oo = c * (g->chunk_heads ? g->hq * g->st[ST_O][1] : g->b * g->st[ST_O][0]);
        char *o8 = (char *)ws + p->o8_off + (size_t)(c * o8_chunk);
        rc = launch_graph(p, (const char *)q + (size_t)oq * es, (const char *)k + (size_t)okv * es,
                          (const char *)v + (size_t)ov * es, o8, descale,
                          (char *)ws + (side ? p->ws_one : 0), sc);
        if (rc == 0)
            rc = cuda_cudnn_fp8_out((char *)o + (size_t)oo * eo, g->st[ST_O], o8, g->b, g->hq,
                                    g->q_rows, g->q0, g->sqv, g->d,
                                    descale != NULL ? descale[2] : NULL, sc);
    }
    if (fork) { /* joined even after a failure: a capture stays whole */
        if (cudaEventRecord(fk->join, fk->side) != cudaSuccess ||
            cudaStreamWaitEvent(stream, fk->join, 0) != cudaSuccess) {
            cudaGetLastError();
            if (rc == 0)
                rc = ATTUNE_EGPU;
        }
        /* the last chunk is odd (a power of two of them), so the handle
         * was left on the plan's side stream, which dies with the plan:
         * back to the caller's, the call the even chunks make */
        pthread_mutex_lock(&p->dh->mu);
        cudnnSetStream(p->dh->h, stream);
        pthread_mutex_unlock(&p->dh->mu);
    }
    /* launch-time refusals are failures: the plan said it could run */
    return rc == ATTUNE_EUNSUPP ? ATTUNE_EGPU : rc;
}
