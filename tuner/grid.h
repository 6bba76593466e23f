/* grid.h -- shape grids: JSON files listing the attention shapes to tune.
 *
 * Format (the files under grids/): {"name": "...", "description": "...",
 * "shapes": [{"b":1,"hq":8,...,"causal":false, "source": "where it comes
 * from"}, ...]}. "source" and "model" are free text; other unknown keys in a
 * shape are rejected so typos do not silently tune the wrong shape. */
#ifndef ATTUNE_GRID_H
#define ATTUNE_GRID_H

#include "../common/shape.h"

/* Largest grid accepted. */
#define GRID_MAX_SHAPES 4096

/* Load the grid at path: *shapes malloc'd (caller frees), *n entries.
 * Duplicate shapes are dropped (first kept). Errors: ATTUNE_EIO (cannot
 * read), ATTUNE_EFORMAT (bad JSON or a bad shape, err names the entry),
 * ATTUNE_ETOOBIG (over GRID_MAX_SHAPES). */
int grid_load(const char *path, attn_shape **shapes, int *n, char *err, size_t errlen);

#endif
