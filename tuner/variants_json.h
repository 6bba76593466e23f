/* variants_json.h -- the table of kernel families (kernels/variant.h) as
 * JSON: GET /v1/variants, `attune variants`, and the page's colours. */
#ifndef ATTUNE_VARIANTS_JSON_H
#define ATTUNE_VARIANTS_JSON_H

#include <jansson.h>

/* {"variants":[{"name","id","color","summary","families":[{"family",
 * "backend","params","summary","built"}]}]}: each variant once, in id
 * order, with its families in the table's order; "built" is false for a
 * family described but not built into this binary (a CUDA family on a
 * CPU-only build). NULL on ENOMEM. */
json_t *variants_json(void);

#endif
