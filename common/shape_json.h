/* shape_json.h -- attention shapes to and from JSON objects (jansson).
 *
 * The JSON form of DESIGN.md: {"b":1,"hq":8,"hkv":1,"sq":50,"skv":1018,
 * "d":256,"dtype":"f16","causal":false}. Used by grids, the HTTP API and
 * fleet tables, so every entry point validates the same way. */
#ifndef ATTUNE_SHAPE_JSON_H
#define ATTUNE_SHAPE_JSON_H

#include <jansson.h>

#include "shape.h"

/* Parse obj into *out. Every field is required, integers must be JSON
 * integers, dtype one of f16/bf16/f32, causal a boolean (0/1 accepted);
 * unknown keys are rejected unless allow_extra (grids carry "source"
 * notes). The shape is validated (attn_shape_validate). Returns 0 or
 * ATTUNE_EINVAL / ATTUNE_ETOOBIG with err naming the field. */
int shape_json_parse(const json_t *obj, int allow_extra, attn_shape *out, char *err,
                     size_t errlen);

/* New JSON object for s (caller owns the reference), NULL on ENOMEM. */
json_t *shape_json_new(const attn_shape *s);

#endif
