/* drift.h -- what changed between two software stacks of a device or of a
 * model: accuracy first (a tactic whose status changed, whose error
 * crossed the bound or grew beyond 2x), then each shape's winner and the
 * ratio of the winners' times (DESIGN.md, "Drift"). Read from the local
 * store; a model's rows are those of every device of the model in it
 * (pulled fleet aggregates included), combined per tactic: the median
 * time, the largest error, the most common status. */
#ifndef ATTUNE_DRIFT_H
#define ATTUNE_DRIFT_H

#include <jansson.h>

#include "../db/store.h"
#include "select.h"

/* Accuracy findings of one (shape, tactic), as flags. */
#define DRIFT_STATUS  1  /* status differs */
#define DRIFT_BOUND   2  /* rel_err on the other side of the dtype's bound */
#define DRIFT_ERR2X   4  /* rel_err grew beyond 2x */

typedef struct drift_accuracy {
    char shape[ATTN_SHAPE_KEY_MAX];
    char tactic[ATTN_TACTIC_STR_MAX];
    int flags;
    int regression;          /* 1: worse in the newer stack (listed first) */
    store_status status_a, status_b;
    double rel_err_a, rel_err_b, bound;
} drift_accuracy;

typedef struct drift_shape {
    char shape[ATTN_SHAPE_KEY_MAX];
    char winner_a[ATTN_TACTIC_STR_MAX], winner_b[ATTN_TACTIC_STR_MAX]; /* "" none */
    double time_a, time_b;   /* the winners' times (select_time), NaN none */
    double ratio;            /* time_b / time_a, NaN when either is missing */
} drift_shape;

typedef struct drift_report {
    char subject[64];        /* device id, or the model's FLEET-<hash> */
    char name[128];          /* device or model name */
    int model;               /* 1: across the devices of a model */
    int devices;             /* devices whose rows were read */
    char stack_a[24], stack_b[24]; /* older, newer */
    attn_stack info_a, info_b;
    drift_accuracy *acc;     /* regressions first, then by error ratio */
    int nacc;
    drift_shape *shapes;     /* winner changes first, then by time ratio, slowest first */
    int nshapes;
    int winner_changes;
} drift_report;

/* Compare two stacks of device (a device id or name in st; with model set,
 * every device of its model). stack_a/stack_b NULL: the two stacks whose
 * first measurement of this subject is latest (a the older). Only shapes
 * measured under both stacks are compared. ATTUNE_ENOTFOUND (err says
 * which) for an unknown device or stack, or fewer than two stacks.
 * out is filled (free with drift_report_free). */
int drift_compare(store *st, const char *device, int model, const char *stack_a,
                  const char *stack_b, const select_policy *p, drift_report *out, char *err,
                  size_t errlen);

void drift_report_free(drift_report *r);

/* The report as text, one finding per line, accuracy first (so a
 * regression is line 1), a summary line last. *out malloc'd. */
int drift_report_text(const drift_report *r, char **out);

/* The report as JSON (docs/api.md, GET /v1/drift); NULL on ENOMEM. */
json_t *drift_report_json(const drift_report *r);

#endif
