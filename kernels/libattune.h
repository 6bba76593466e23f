/* libattune.h -- run any attune tactic on your own buffers: the runtime half
 * of attune (libattune.so, pkg-config libattune, CMake attune::attune).
 *
 * attuned (or an exported table) tells a runtime which tactic is fastest
 * for a shape on a device; this library runs that tactic. What it runs is
 * what the tuner timed: the tuner measures through the same plan and run
 * code (docs/libattune.md).
 *
 *   attune_dev *dev;
 *   attune_dev_open("0", &dev, err, sizeof err);           // CUDA ordinal, "cpu", a UUID
 *   attune_dims shape = {.b = 1, .hq = 8, .hkv = 1, .sq = 50, .skv = 1018, .d = 256,
 *                        .dtype = ATTUNE_DTYPE_F16, .causal = 0};
 *   attune_plan *plan;
 *   attune_plan_create(dev, &shape, "folded/acc=f32/pad=8", &plan, err, sizeof err);
 *   attune_tensor q = {dq, 8 * 50 * 256, 50 * 256, 256}, ...;   // [b, h, s, d]
 *   attune_plan_run(plan, &q, &k, &v, &o, 0, 0, stream);        // async on stream
 *   attune_plan_destroy(plan);
 *   attune_dev_close(dev);
 *
 * Tensors: element (bi, h, i, c) of q, k, v or out is at
 * data[bi * stride_b + h * stride_h + i * stride_s + c] (strides in
 * elements; the head dim contiguous), so [b, h, s, d] and [b, s, h, d]
 * views run without a copy where the tactic's kernel reads strides (fused
 * tactics read any strides in whole 16-byte units; the others copy views
 * they cannot read into buffers the plan owns, as padded tactics always
 * do; docs/libattune.md has the table). On a CUDA device the pointers are
 * device pointers of that device; on "cpu", host pointers. The causal mask
 * is bottom-right aligned: query i sees key j iff j <= i + (skv - sq).
 *
 * Threads and streams: a plan owns scratch buffers, so the runs of one
 * plan must be ordered (one stream, or serialized by the caller). Use one
 * plan per concurrent stream; distinct plans may be created, run and
 * destroyed from distinct threads at once. attune_plan_run neither
 * allocates nor synchronizes on a GPU, and can be captured in a CUDA
 * graph (the graph then holds the tensors' addresses and the plan:
 * destroy the plan only after the graph).
 *
 * Errors: functions return 0 or a negative code (attune_strerror); err,
 * when given, receives a sentence saying what was wrong. */
#ifndef LIBATTUNE_H
#define LIBATTUNE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI: the SONAME's number (libattune.so.1). Bumped when a struct
 * below changes or a function changes meaning. */
#define LIBATTUNE_ABI 1

/* The newest symbol version this header declares (LIBATTUNE_1.4 in
 * libattune.map): functions are only added within an ABI, one version node
 * per addition, marked "Since 1.x" below. The library file is
 * libattune.so.LIBATTUNE_ABI.LIBATTUNE_ABI_MINOR.0 (CMakeLists.txt reads
 * both from here). A runtime that needs a function newer than 1.0 finds
 * it by its versioned symbol (dlsym, or the loader refusing an older
 * library). Since 1.3. */
#define LIBATTUNE_ABI_MINOR 4

/* Returns LIBATTUNE_ABI of the library loaded (compare with the header). */
int attune_abi(void);

/* Error codes (the same as attune's common/attune_err.h). */
#define ATTUNE_RT_EINVAL (-1)  /* a bad argument; err says which */
#define ATTUNE_RT_ENOMEM (-2)
#define ATTUNE_RT_ENODEV (-3)  /* no such device */
#define ATTUNE_RT_EUNSUPP (-4) /* the tactic does not run this shape here */
#define ATTUNE_RT_EGPU (-9)
#define ATTUNE_RT_EBLAS (-10)
#define ATTUNE_RT_EBUSY (-12)  /* since 1.1: a stream capturing a CUDA graph */

/* Fixed English description of a code; never NULL. */
const char *attune_strerror(int code);

/* E4M3 (since 1.2): q, k, v in FP8 E4M3 with per-tensor descale factors
 * (attune_plan_set_descales), out in bf16. */
enum { ATTUNE_DTYPE_F16 = 0, ATTUNE_DTYPE_BF16 = 1, ATTUNE_DTYPE_F32 = 2, ATTUNE_DTYPE_E4M3 = 3 };

/* An attention shape (DESIGN.md "Words"). For a plan, sq and skv are the
 * longest lengths a run will have: runs may be shorter. */
typedef struct attune_dims {
    int64_t b, hq, hkv, sq, skv, d; /* all >= 1, hq % hkv == 0 */
    int dtype;                      /* ATTUNE_DTYPE_* */
    int causal;                     /* 0 or 1 */
} attune_dims;

typedef struct attune_tensor {
    void *data;
    int64_t stride_b, stride_h, stride_s; /* elements */
} attune_tensor;

typedef struct attune_dev attune_dev;
typedef struct attune_plan attune_plan;

/* Open a device by attune's device words: "cpu", a CUDA ordinal "0", a
 * "GPU-<uuid>" or a device name. Returns 0 or ATTUNE_RT_ENODEV. */
int attune_dev_open(const char *device, attune_dev **out, char *err, size_t errlen);
void attune_dev_close(attune_dev *dev);

/* The device's id ("GPU-<uuid>", "CPU-<hash>") and name. */
const char *attune_dev_id(const attune_dev *dev);
const char *attune_dev_name(const attune_dev *dev);

/* The canonical key of a shape (b1.hq8.hkv1.sq50.skv1018.d256.f16.nc)
 * into buf (128 bytes hold any). Returns 0 or ATTUNE_RT_EINVAL. */
int attune_shape_key(const attune_dims *shape, char *buf, size_t len, char *err, size_t errlen);

/* The tactics the device lists for shape, as canonical text, written into
 * out[i] (96 bytes each, at most max). Returns the total count (may exceed
 * max) or a negative code. */
#define ATTUNE_TACTIC_MAX 96
int attune_tactics(attune_dev *dev, const attune_dims *shape, char (*out)[ATTUNE_TACTIC_MAX],
                   int max, char *err, size_t errlen);

/* Prepare a tactic (canonical text, e.g. from attuned's answer) for shape
 * on dev: allocates, builds cuDNN graphs, picks kernels; slow is fine.
 * Returns 0, ATTUNE_RT_EINVAL (bad shape or tactic text; a shape over
 * attune's size limits too), ATTUNE_RT_EUNSUPP (the tactic does not run
 * this shape on this device), ENOMEM (also: 256 distinct cuDNN plans held
 * at once in the process, the most its plan cache keeps), EGPU. */
int attune_plan_create(attune_dev *dev, const attune_dims *shape, const char *tactic,
                       attune_plan **out, char *err, size_t errlen);

/* Run the plan once on the caller's tensors and stream (a cudaStream_t;
 * NULL is the legacy default stream; ignored on the CPU, which runs before
 * returning). sq, skv: this run's lengths, 1..the planned ones (0 = the
 * planned); a decode step with a growing KV cache runs one plan at every
 * length. cuDNN tactics run at their planned lengths only
 * (ATTUNE_RT_EUNSUPP otherwise). Returns 0 or a negative code. */
int attune_plan_run(attune_plan *plan, const attune_tensor *q, const attune_tensor *k,
                    const attune_tensor *v, const attune_tensor *out, int64_t sq, int64_t skv,
                    void *stream);

/* Tell plan the strides its runs will have (the tensors' data pointers
 * are ignored), so tactics that fix strides when built read and write
 * them in place: cuDNN tactics build a graph for them (slow, allocates;
 * the runs at the planned lengths on such tensors then copy nothing,
 * where they otherwise pack q, k, v into the plan's contiguous buffers
 * and unpack out: [b, s, h, d] tensors, say). Tactics that read strides
 * at run time need nothing (0). Runs on other strides still run, through
 * the copies. stream: the stream the runs come on; while it captures a
 * CUDA graph nothing is built (ATTUNE_RT_EBUSY). Not concurrently with a
 * run of plan. A call replaces the graph (and may free the workspace)
 * that graphs captured before it launch: tell the strides before
 * capturing, not after. (attune_auto tells an entry's
 * strides until it first runs under a capture, never after.) Returns 0,
 * ATTUNE_RT_EUNSUPP (err says why: the engine refuses these strides, a
 * padded tactic), EBUSY, EINVAL, ENOMEM, EGPU. Since 1.1. */
int attune_plan_set_views(attune_plan *plan, const attune_tensor *q, const attune_tensor *k,
                          const attune_tensor *v, const attune_tensor *out, void *stream,
                          char *err, size_t errlen);

/* For an e4m3 plan: the descale factors of q, k and v, one float each
 * (a stored element times its tensor's descale is the value meant), in
 * memory the device reads (device memory on a GPU, host memory on the
 * CPU), read when each run executes: a captured graph reads the values
 * current at replay, so a runtime updates them in place. NULL: 1. Kept
 * until set again; ignored by plans of other dtypes. Returns 0 or
 * ATTUNE_RT_EINVAL (no plan). Since 1.2. */
int attune_plan_set_descales(attune_plan *plan, const float *q, const float *k, const float *v);

/* The plan's tactic and shape as canonical text. */
const char *attune_plan_tactic(const attune_plan *plan);
const char *attune_plan_shape(const attune_plan *plan);

/* Free the plan (waits for nothing: runs in flight on a stream must be
 * finished or ordered before the buffers go: on a GPU, cudaFree orders). */
void attune_plan_destroy(attune_plan *plan);

/* ---- attune_auto: lookup + plan cache + run (what a runtime calls per
 * layer). Built when libattune_client is (libcurl); otherwise
 * attune_auto_new returns ATTUNE_RT_EUNSUPP.
 *
 * Lengths share answers and plans by buckets: a call's sq and skv are
 * rounded up by attune_bucket_len (four steps per octave: 9..16 -> 10, 12,
 * 14, 16; 17..32 -> 20, 24, 28, 32; ...; 1..8 exact), the lookup asks for
 * the bucket's ceiling, and one plan at the ceiling runs every length of
 * the bucket. A decode step that grows the KV cache by one stays in its
 * plan for a quarter octave; so does a prefill of a new prompt length.
 * attuned tunes on a miss what it is asked: the ceilings. A call at the
 * ceiling runs the bucket's answer. Below it, an answer that is not one
 * of attune's fused kernels (cuDNN, whose graphs fix the lengths; the
 * GEMM families, which meet lengths cuBLAS runs slowly) gives way to the
 * bucket's best fused kernel (a second lookup, variants
 * "fused,fused_splitkv"), which runs every length of the bucket from one
 * plan (docs/libattune.md).
 *
 * Entries are keyed by (bucketed shape, stream): a plan's runs must be
 * ordered, so each stream has its own. Answers that are not `measured`
 * are asked again after a second (tune on miss replaces them), measured
 * ones after a minute; a changed answer gets a new plan, the old one is
 * kept (a captured graph may hold it) until attune_auto_free, up to
 * `capacity` of them. When nothing answers (a daemon restarting) or the
 * new answer cannot be planned, an entry keeps the plan it has and asks
 * again a second later. Beyond `capacity` (shape, stream) pairs the least
 * recently used plan is destroyed: do not capture graphs through an
 * attune_auto that outgrows its capacity.
 *
 * Threads: every call may come from any thread; calls through one
 * attune_auto are serialized on the host (a mutex, held through the
 * host-side enqueue of a run, and through a lookup and plan on a miss).
 * Graph capture: plan creation allocates, so call attune_auto_prepare (or
 * run once) for each shape and stream before capturing; a captured run of
 * a prepared shape neither allocates nor synchronizes. While a stream
 * captures, nothing is looked up, planned or freed for it: a shape
 * prepared on it runs its plan (its answer is refreshed after the
 * capture), one that is not returns ATTUNE_RT_EBUSY (prepare it on the
 * capturing stream: torch.cuda.graph captures on a stream of its own
 * unless given one). */
#define ATTUNE_AUTO_DEFAULT_CAPACITY 256

typedef struct attune_auto attune_auto;

/* What attune_auto runs for a shape. */
typedef struct attune_choice {
    char tactic[ATTUNE_TACTIC_MAX]; /* canonical tactic text */
    char source[16];                /* the answer's source: "measured", "predicted",
                                       "nearest", "fleet", "default" */
    char planned[128];              /* the plan's shape key (the bucket's ceiling) */
} attune_choice;

/* The bucket ceiling of a length n >= 1 (see above). */
int64_t attune_bucket_len(int64_t n);

/* New attune_auto on dev (which must outlive it). url: where answers come
 * from, as attune_client_new takes it (NULL: $ATTUNE_URL, else
 * http://127.0.0.1:7373); the daemon unreachable means the default tactic
 * (fused/pad=8), which runs everywhere; "file:PATH" answers from a
 * database file or exported table in process. Lookups name the device by
 * its id; a source that does not know the id (a table tuned on another
 * device of the same model, shipped with the runtime) is asked by the
 * device's name from then on. capacity <= 0: the default. */
int attune_auto_new(attune_dev *dev, const char *url, int capacity, attune_auto **out,
                    char *err, size_t errlen);

/* Look up and plan shape (this call's exact dims) for stream, without
 * running; out (may be NULL) says what will run. 0 or a code. */
int attune_auto_prepare(attune_auto *a, const attune_dims *shape, void *stream,
                        attune_choice *out, char *err, size_t errlen);

/* Run attention for shape (this call's exact dims: its sq and skv are the
 * lengths run) on the caller's tensors and stream; on a miss, looks up and
 * plans first. 0 or a code (the tensors' rules are attune_plan_run's). */
int attune_auto_run(attune_auto *a, const attune_dims *shape, const attune_tensor *q,
                    const attune_tensor *k, const attune_tensor *v, const attune_tensor *out,
                    void *stream, char *err, size_t errlen);

/* For e4m3 shapes: the descale factors of q, k and v, as
 * attune_plan_set_descales takes them (pointers to one float each, read
 * when each run executes: device memory on a GPU, host memory on the CPU;
 * NULL: 1). Kept until set again, and set on the plan of every e4m3 shape
 * a before each of its runs and prepares, so the pointers set last (and
 * the values they point to at run time) are what runs read; ignored for
 * other dtypes. Under a's mutex like its other calls. Without it an e4m3
 * shape runs with descales 1. Returns 0 or ATTUNE_RT_EINVAL (no a), or
 * ATTUNE_RT_EUNSUPP where attune_auto is not built. Since 1.3. */
int attune_auto_set_descales(attune_auto *a, const float *q, const float *k, const float *v);

/* What an attune_auto has done since attune_auto_new, for a runtime (or
 * its tests) to see that a steady loop neither looks up nor plans: its
 * runs, lookups and plans should stop growing once every shape was met.
 * Since 1.4. */
typedef struct attune_auto_stats {
    uint64_t runs;      /* attune_auto_run calls that ran their plan */
    uint64_t lookups;   /* answers asked of the client (its cache included) */
    uint64_t plans;     /* plans created (new entries, changed answers) */
    uint64_t evictions; /* entries dropped for room, their plans destroyed */
    int64_t entries;    /* (shape, stream) entries held now */
    int64_t retired;    /* replaced plans kept for captured graphs, now */
} attune_auto_stats;

/* Copy a's counters into out, its first size bytes (sizeof *out as the
 * caller's header has it: fields are only appended). Returns 0 or
 * ATTUNE_RT_EINVAL (no a, no out), or ATTUNE_RT_EUNSUPP where attune_auto
 * is not built. Since 1.4. */
int attune_auto_get_stats(attune_auto *a, attune_auto_stats *out, size_t size);

/* Free a and every plan it made (after the work it enqueued, and any graph
 * that captured it, is done). NULL is a no-op. */
void attune_auto_free(attune_auto *a);

#ifdef __cplusplus
}
#endif

#endif
