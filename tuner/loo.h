/* loo.h -- leave-one-out evaluation of the prediction model.
 *
 * Over a device's tuned shapes: hide each shape in turn, build the model
 * (predict.h) from the others, ask it for the hidden shape, and compare the
 * answered tactic's measured time on that shape with the shape's winner:
 *     regret = select_time(answered) / select_time(winner)
 * 1.0 is a perfect answer. An answer that is not eligible on the hidden
 * shape (inaccurate, failed, or not measured there) has regret INFINITY:
 * a runtime could not use it. */
#ifndef ATTUNE_LOO_H
#define ATTUNE_LOO_H

#include "../kernels/attn.h"
#include "predict.h"

typedef struct loo_shape {
    char key[ATTN_SHAPE_KEY_MAX];
    char answer[ATTN_TACTIC_STR_MAX]; /* "" when the model answered nothing */
    char winner[ATTN_TACTIC_STR_MAX];
    double answer_us, winner_us;      /* measured (select_time) */
    double predicted_us;              /* what the model said */
    double regret;                    /* INFINITY: unusable answer */
    char from[ATTN_SHAPE_KEY_MAX];    /* the shape it leaned on most */
} loo_shape;

typedef struct loo_result {
    loo_shape *shapes;  /* malloc'd, n entries, in shape-key order */
    int n;              /* shapes with a winner (the others are not scored) */
    double median, worst, geomean; /* of the regrets; INFINITY if any is */
} loo_result;

/* Run the evaluation over rows m[0..n) of one device (rows of other stacks
 * than cur_stack are used as predict_build uses them). dev: the backend
 * whose listing for each hidden shape gives the candidates; NULL: the
 * tactics measured on the hidden shape (what the backend listed for it
 * when it was tuned: a table from another host evaluates offline).
 * p: policy (NULL: defaults). Fills *out (free with loo_result_free).
 * Returns 0, ATTUNE_ENOMEM, or the backend's listing error. */
int loo_run(const store_measurement *m, int n, const char *cur_stack, const select_policy *p,
            const attn_device *dev, loo_result *out);
/* Variations of the evaluation (zero-initialise, set what differs). */
typedef struct loo_opts {
    /* hold[0..nhold): hide these shapes together instead of one at a
     * time: one model is built from the rows of every other shape, and
     * only the held-out shapes that have rows are scored (a new set of
     * shapes asked of a device that tuned the rest: bench/realmodels.sh).
     * NULL: leave one out. */
    const attn_shape *hold;
    int nhold;
    /* NULL: the model learns from m. Else train[0..n) parallel to m: what
     * the model sees of row m[i] (its time, error, status), while answers
     * are still scored on m: tests feed the model wrong times to show the
     * evaluation fails a wrong predictor. */
    const store_measurement *train;
    /* The device the rows were measured on (predict_build_dev: SM count,
     * compute capability); NULL: dev's when dev is given. */
    const attn_device_info *info;
    /* Non-NULL: every model built traces its answers there
     * (predict_set_trace). */
    FILE *trace;
} loo_opts;

/* loo_run with options (o NULL: loo_run). */
int loo_run_opts(const store_measurement *m, int n, const char *cur_stack, const select_policy *p,
                 const attn_device *dev, const loo_opts *o, loo_result *out);
void loo_result_free(loo_result *r);

#endif
