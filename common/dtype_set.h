/* dtype_set.h -- a set of dtypes, as a question over dtypes names it
 * ("any", or "bf16,e4m3": GET /v1/tactic's dtype= with max_err=,
 * lookup/dtype_choice.h). A set is a bit mask, bit 1 << dtype. */
#ifndef ATTUNE_DTYPE_SET_H
#define ATTUNE_DTYPE_SET_H

#include <stddef.h>

#include "shape.h"

/* Every dtype. */
#define DTYPE_SET_ALL ((1u << ATTN_NDTYPES) - 1)

/* 1 when text names a set of dtypes rather than one: "any", or a list
 * with a comma. */
int dtype_set_text(const char *text);

/* Parse a set: "any" (every dtype) or a comma-separated list of dtype
 * names ("bf16,e4m3"), each once; one name is a set of one. 0 or
 * ATTUNE_EINVAL with err naming the bad word. */
int dtype_set_parse(const char *text, unsigned *set, char *err, size_t errlen);

/* The canonical text of a set: names in dtype order, comma-separated. */
const char *dtype_set_str(unsigned set, char *buf, size_t len);

#endif
