/* grow.h -- doubling growth for malloc'd arrays collected row by row. */
#ifndef ATTUNE_GROW_H
#define ATTUNE_GROW_H

#include <limits.h>
#include <stdlib.h>

#include "attune_err.h"

/* Make room for element index `count` in *arr (capacity *cap elements of
 * `size` bytes), doubling from 16. Returns 0, or ATTUNE_ENOMEM with *arr
 * and *cap unchanged (the caller still owns and frees *arr). */
static inline int grow_array(void *arr, int *cap, int count, size_t size)
{
    if (count < *cap)
        return 0;
    if (*cap > INT_MAX / 2)
        return ATTUNE_ENOMEM;
    int ncap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*(void **)arr, (size_t)ncap * size);
    if (grown == NULL)
        return ATTUNE_ENOMEM;
    *(void **)arr = grown;
    *cap = ncap;
    return 0;
}

#endif
