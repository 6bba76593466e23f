/* libattune_priv.h -- what libattune's own files share and its ABI does not
 * export (libattune.map keeps these local). */
#ifndef LIBATTUNE_PRIV_H
#define LIBATTUNE_PRIV_H

#include "libattune.h"

/* 1 while stream is capturing a CUDA graph on dev's backend (nothing may
 * allocate or build on it then), else 0. */
int attune_dev_capturing(const attune_dev *dev, void *stream);

/* 1 when shape is one libattune takes (sizes within attune's limits,
 * hq a multiple of hkv, a known dtype: what attune_plan_create checks of
 * the shape), else 0. */
int attune_dims_ok(const attune_dims *shape);

#endif
