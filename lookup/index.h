/* index.h -- the in-memory lookup index: what GET /v1/tactic reads.
 *
 * Per device: its identity and current stack, and a hash table from the
 * canonical shape key to every stored measurement of that shape (all
 * stacks). The request threads only read it, under a read lock; SQLite is
 * never touched on the lookup path. Every write comes through sync.h (the
 * job threads' committed rows, the DB worker's reloads after an import, a
 * SIGHUP or a write by another process, the load at start): whole devices
 * are built outside the lock and swapped in under the write lock.
 *
 * A shape answers `measured` only from a complete tune (select_complete):
 * on a local device (or one tuned in a database file a lookup reads:
 * index_device_need_marks), rows of a (stack, shape) count once one carries the
 * tuner's winner mark, so a tune in flight (here or in another process)
 * never answers from its partial rows (issue 15 item 5).
 *
 * Answers (docs/api.md "Where an answer comes from"); every one is a
 * complete tactic the device's backend lists for the asked shape:
 *   measured  the shape itself was tuned: the winner (select_winner) among
 *             the rows of the device's current stack, else among the rows of
 *             the most recent other stack that has one (stale = 1);
 *   fleet     a local device that has not measured the shape: the winner of
 *             a fleet device of the same model (name, compute capability,
 *             SM count, memory) that has, among its rows of the asking
 *             device's power mode, naming that device and its host;
 *   nearest / predicted  the prediction model (tuner/predict.h) over every
 *             shape the device measured: the tactic with the lowest
 *             predicted time predicted to meet the bound, with that time and
 *             the shapes it leaned on; `nearest` when the answer is the
 *             winner of the closest of them and that one has the same dtype,
 *             d, causal and group size;
 *   default   the device has nothing that qualifies: the backend's first
 *             fused tactic with pad=8 (INDEX_DEFAULT_TACTIC where the
 *             backend cannot list).
 * A lookup may name the variants its caller can run (index_lookup_in):
 * every source above then answers among those variants only.
 *
 * Pins (tuner/pin.h, docs/api.md "Pins") come first: the most specific
 * force that applies to the (device, shape), is not excluded, is of an
 * asked variant and runs there (the backend lists it; where nothing lists
 * for the device, a row of it was measured for the shape) answers
 *   pinned    with the pin, and the device's own measurement of that
 *             tactic when there is one;
 * and the exclusions that apply take their tactics out of every source
 * above (measured and fleet winners are chosen among the other rows, the
 * model and the default among the other listed tactics). */
#ifndef ATTUNED_INDEX_H
#define ATTUNED_INDEX_H

#include <stdint.h>

#include "../db/store.h"
#include "../tuner/pin.h"
#include "../tuner/predict.h"
#include "../tuner/select.h"
#include "../tuner/variant_set.h"

/* The answer when nothing is known: the fused kernel exists for every
 * shape on every backend, and pad=8 keeps its rows aligned (DESIGN.md: an
 * unaligned seq_len gave wrong results after a runtime upgrade). The C and
 * Python clients fall back to the same tactic. */
#define INDEX_DEFAULT_TACTIC "fused/pad=8"

typedef enum {
    INDEX_MEASURED = 0,
    INDEX_NEAREST = 1,
    INDEX_DEFAULT = 2,
    INDEX_PREDICTED = 3,
    INDEX_FLEET = 4,
    INDEX_PINNED = 5
} index_source;
#define INDEX_NSOURCES 6

/* "measured", "nearest", "default", "predicted", "fleet", "pinned" */
const char *index_source_name(index_source s);

typedef struct index_state index_state;

/* New empty index using policy p (copied; NULL: defaults). NULL on ENOMEM. */
index_state *index_new(const select_policy *p);
void index_free(index_state *ix);

/* Build the prediction models and the slow listings off the request path
 * from now on (attuned): every device's model now, before this returns;
 * afterwards a thread (the builder) rebuilds a device's model when its
 * rows change (a burst of rows is one rebuild) and swaps it in, while
 * lookups answer from the previous one (a device with no model yet
 * answers as one with no prediction: default) and never build or wait on
 * one. The same thread makes the listings lookups found missing from the
 * index's listing cache (lookup/index_listing.h) for a backend whose
 * listing may block (attn_ops.list_cheap == 0: the CUDA backend's waits
 * on cuDNN's heuristics): such a lookup answers as for a device nothing
 * lists for (the model among the families the device measured, else the
 * default; index_answer.listing_pending) and the next one after the
 * builder made it answers from it. A cheap backend's listing (the CPU's)
 * is made by the lookup itself, after it dropped the index's lock, which
 * then answers again. Without the builder (the clients' in-process
 * lookups), the first lookup that needs a model builds it, and one that
 * needs a listing makes it (outside the lock, then answers again). 0 or
 * ATTUNE_ENOMEM (the thread did not start: lookups build, as without).
 * index_free stops the thread. */
int index_models_start(index_state *ix);

/* Wait until the builder made every listing queued so far (tests). 0, or
 * ATTUNE_EINVAL when no builder runs (nothing is ever queued then). */
int index_listings_wait(index_state *ix);

/* Make the listing of s for device_id now if the cache lacks it, waiting
 * on the backend (no lock of the index held meanwhile): for callers off
 * the lookup path that need a listing at once (an explicit tune's
 * admission). 0 (also when nothing lists for the device, or the backend
 * failed: nothing cached then) or ATTUNE_ENODEV. */
int index_listing_make(index_state *ix, const char *device_id, const attn_shape *s);

/* The index's generation: it changes with every change a lookup could
 * see (rows, devices, stacks, pins, models, listings), before the change
 * is visible, and never goes back. An answer made by a lookup that began
 * after reading generation G is the answer to the same question for as
 * long as index_generation still returns G (attuned's answer cache,
 * common/answer_cache.h). */
uint64_t index_generation(index_state *ix);

/* Add a device, or refresh its identity and current stack (winners are
 * recomputed against the new stack). local: a device of this host. */
int index_device_put(index_state *ix, const attn_device_info *info, const attn_stack *stack,
                     int local);

/* Rows of device_id count only from a complete tune (a (stack, shape)
 * with the tuner's winner mark), as on a local device, without making it
 * local (no fleet answers, no listing of its own): for a device tuned in
 * a database file read by an in-process lookup (lookup/lookup_file.h).
 * Cached winners are recomputed. 0 or ATTUNE_ENODEV. */
int index_device_need_marks(index_state *ix, const char *device_id);

/* Put one committed row (tuner_opts.committed) as the store applied it:
 * added, or replacing the row of the same (stack, tactic) and keeping that
 * row's mark; a marked row (the tuner's winner mark) clears the mark of
 * the other rows of its stack. err_ratio is recomputed over the stack's
 * rows of the shape. The row is taken as given, never read back.
 * 0, ATTUNE_ENODEV (device never put) or ATTUNE_ENOMEM (index unchanged). */
int index_row_put(index_state *ix, const store_measurement *row);

/* Replace all rows of a device by m[0..n) (any shapes, any order). Takes
 * ownership of m. ATTUNE_ENODEV when the device was never put. */
int index_device_load(index_state *ix, const char *device_id, store_measurement *m, int n);

/* The rows put into device_id so far (index_row_put calls) into *puts.
 * A reload reads this before it reads the database, and swaps through
 * index_device_load_since: a row put meanwhile (committed after the read
 * began, so perhaps missing from it) would otherwise be replaced by the
 * older read. 0 or ATTUNE_ENODEV. */
int index_device_puts(index_state *ix, const char *device_id, uint64_t *puts);

/* index_device_load, only if no row was put into device_id since its
 * index_device_puts read puts: else ATTUNE_EBUSY and the index keeps its
 * rows (read the database again). Takes ownership of m either way. */
int index_device_load_since(index_state *ix, const char *device_id, store_measurement *m, int n,
                            uint64_t puts);

/* A device as the index knows it. */
typedef struct index_device_view {
    attn_device_info info;
    attn_stack stack;     /* local: the registry's; fleet: the latest stored */
    int local;
    int nshapes;
    int64_t nmeasurements;
    /* Fingerprint of the rows held, comparable with the database's
     * (count(*), sum(taken_at), sum(incumbent) of the device's measurements):
     * sync_watch (sync.h) reloads a device when they differ. */
    int64_t taken_sum;    /* sum of taken_at */
    int64_t marks;        /* rows marked incumbent */
    int64_t loads;        /* times its rows were swapped in whole
                             (index_device_load): how a test tells that
                             a device was reloaded */
} index_device_view;

/* Resolve a device spec as attn_device_resolve does ("cpu", CUDA ordinal,
 * id, name case-insensitively; local devices first). 0 or ATTUNE_ENODEV. */
int index_device_find(index_state *ix, const char *spec, index_device_view *out);

/* on = 1: "cpu" and CUDA ordinals ("0") also name fleet devices (by kind
 * and the ordinal they had where they were measured; a device without one,
 * as a fleet table's, by its place among such CUDA devices: "0" the
 * first), after the local ones: an in-process lookup of a table
 * (lookup_file.h) has no device of its own, and a runtime asks for "0" on
 * the host the table was made for. Set before the index is shared. */
void index_set_host_specs(index_state *ix, int on);

/* Replace the index's pins by pins[0..n) (taking ownership; NULL, 0:
 * none), swapped in whole under the write lock. 0. */
int index_pins_set(index_state *ix, pin *pins, int n);

/* Copy of the pins held; *out malloc'd (NULL when *n == 0). 0 or
 * ATTUNE_ENOMEM. */
int index_pins(index_state *ix, pin **out, int *n);

/* Whether device_id's backend lists tactic (canonical text) for shape s:
 * 1 or 0; ATTUNE_ENOTFOUND when nothing on this host lists for the device
 * (a GPU of another host), ATTUNE_ENODEV. What a force pin is checked
 * against when it is written for one shape and one device: off the lookup
 * path, it waits for a listing the cache lacks. */
int index_tactic_listed(index_state *ix, const char *device_id, const attn_shape *s,
                        const char *tactic);

/* Copy of every device; *out malloc'd (caller frees). */
int index_devices(index_state *ix, index_device_view **out, int *n);

/* Totals for metrics. */
void index_stats(index_state *ix, int *local, int *fleet, int64_t *measurements);

/* Changes the builder (index_models_start) still has to make: devices
 * whose model is older than their rows (it rebuilds them a settle time
 * after the last write) and listings queued. Each bumps the generation
 * when made, so an answer kept before it is asked again the long way
 * (tactic_cache.h); both 0: none is coming until the next write. */
void index_pending(index_state *ix, int *models, int *listings);

typedef struct index_answer {
    char device_id[64];              /* the device the spec named */
    int local;                       /* a device of this host */
    char key[ATTN_SHAPE_KEY_MAX];    /* the asked shape's canonical key */
    index_source source;
    int stale;                       /* winner's stack != device's current stack */
    double distance;                 /* 0 for measured; log-shape distance to
                                        from_key for nearest/predicted */
    char from_key[ATTN_SHAPE_KEY_MAX]; /* shape that answered ("" for default) */
    char stack_id[24];               /* the device's current stack */
    /* measured/fleet: the winner's row; nearest/predicted: tactic, time_us
     * (predicted), rel_err (predicted), other numbers NaN; default: the
     * tactic, numbers NaN */
    store_measurement m;
    double predicted_us;             /* nearest/predicted; NaN otherwise */
    int nfrom;                       /* nearest/predicted: shapes leaned on */
    char from[PREDICT_MAX_FROM][ATTN_SHAPE_KEY_MAX];
    char fleet_device[64];           /* fleet: the device and host it came from */
    char fleet_host[64];
    int own_rows;                    /* rows of this shape in the device's current
                                        stack (0: never tuned here) */
    int complete;                    /* those rows hold a complete tune (a pin or
                                        a bound may still answer otherwise than
                                        measured: no tune on miss then) */
    variant_set listed;              /* the variants the backend lists for the
                                        shape, when the answer needed its
                                        listing (predicted, default); 0 else */
    int listing_pending;             /* the answer needed a listing the builder
                                        is making: answered as for a device
                                        nothing lists for (index_models_start) */
    int nexcluded;                   /* exclusion pins applying to the lookup */
    pin pinned;                      /* pinned: the force that answered */
} index_answer;

/* Answer a lookup for shape s on the device that device names (any spec
 * index_device_find takes: the device is resolved here, under the same
 * read lock as the answer, once). max_rel_err > 0 overrides the policy's
 * absolute bound (the API's max_rel_err=). Fills the answer with the
 * device's id, whether it is local, and s's canonical key (built once
 * here; callers reuse it). Returns 0 (the answer may be the default),
 * ATTUNE_ENODEV, or ATTUNE_ENOMEM (a stale or fleet winner's listing
 * check could not copy the rows). */
int index_lookup(index_state *ix, const char *device, const attn_shape *s,
                 double max_rel_err, index_answer *out);

/* The same among the tactics of the variants vs only (0: every variant;
 * the API's variants=, issue 24 item 4): measured and fleet answers are
 * the winner among the allowed rows (variant_set_winner: the bounds and
 * the incumbent counted among them), predicted ones choose among the
 * allowed tactics of the listing (or of the measured families), and the
 * default is the listing's first allowed tactic (fused pad=8 first).
 * ATTUNE_ENOTFOUND when the set leaves no tactic to answer with: the
 * backend lists none of its variants for the shape (out->listed says which
 * it lists), or nothing lists for the device and the set leaves out fused
 * (INDEX_DEFAULT_TACTIC's variant), or exclusion pins (out->nexcluded)
 * took out every tactic left. */
int index_lookup_in(index_state *ix, const char *device, const attn_shape *s,
                    double max_rel_err, variant_set vs, index_answer *out);

/* What index_lookup_measured saw of the shape's rows, for saying why none
 * qualified. */
typedef struct index_measured_info {
    int rows;        /* rows that could compete: ok or inaccurate, timed, not noisy
                        (any stack) */
    int rows_err;    /* of those, with a finite error of the asked kind */
    double best_err; /* the smallest such error; NaN when none */
} index_measured_info;

/* The measured answer alone (no fleet, predicted or default) for shape s
 * on the device that device names, under the query's own bound max_err
 * (> 0) on each row's error: rel_err, or with src_err the row's
 * src_rel_err (e4m3: its error against the bf16 source). As
 * index_lookup_in's measured source otherwise: the device's complete
 * tunes, its current stack first, variants vs, exclusion pins; a force
 * pin that applies answers its tactic (source pinned) only when its row
 * is within max_err. The cross-dtype query's candidate of one dtype
 * (lookup/dtype_choice.h). 0 with out filled (source measured or pinned),
 * ATTUNE_ENOTFOUND when no row qualifies (out->source pinned when a force
 * pin held the shape; info says what there was), ATTUNE_ENODEV,
 * ATTUNE_ENOMEM. */
int index_lookup_measured(index_state *ix, const char *device, const attn_shape *s,
                          double max_err, int src_err, variant_set vs, index_answer *out,
                          index_measured_info *info);

/* The k tactics the prediction model ranks best for shape s on device_id
 * (among the backend's listing) into out[0..k); returns how many (0 when
 * the device has no model or no listing), or ATTUNE_ENODEV. Tune on miss
 * times these first (on the jobs thread: waits for a listing the cache
 * lacks). */
int index_predict_top(index_state *ix, const char *device_id, const attn_shape *s, int k,
                      attn_tactic *out);

/* Predicted time per call (us) of every tactic the backend lists for s on
 * local device device_id, each on its own (NaN where the model has no
 * evidence for it), into us[0..max): the cost of a whole tune (issue 29,
 * tuner/tune_cost.h, through daemon/admit.h). sample > 0 predicts about
 * that many, evenly spread over the listing, and writes -1 for the others
 * (a GPU lists hundreds: an explicit grid of 4096 shapes is priced on the
 * HTTP thread). On the lookup path (tune on miss's admission) it never
 * waits for a listing:
 * ATTUNE_EBUSY while the builder makes it (index_listing_make first, to
 * wait). Returns how many were written (0: nothing lists), ATTUNE_EBUSY
 * or ATTUNE_ENODEV. */
int index_predict_times(index_state *ix, const char *device_id, const attn_shape *s,
                        double *us, int max, int sample);

/* Copy of every row of shape s on device_id (sorted by stack, then tactic)
 * into *out (malloc'd, NULL when n == 0), and the device's current stack.
 * 0 or ATTUNE_ENODEV / ATTUNE_ENOMEM. */
int index_results(index_state *ix, const char *device_id, const attn_shape *s,
                  store_measurement **out, int *n, char stack_id[24]);

/* The selection policy the index answers with. */
const select_policy *index_policy(const index_state *ix);

#endif
