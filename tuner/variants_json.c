/* variants_json.c -- the table of kernel families as JSON (variants_json.h). */
#include "variants_json.h"

#include <string.h>

#include "../kernels/variant.h"

/* The families of variant v as JSON objects, in table order. */
static json_t *families_of(attn_variant v)
{
    int n;
    const attn_variant_desc *const *f = attn_families(&n);
    json_t *arr = json_array();
    for (int i = 0; arr != NULL && i < n; i++) {
        if (f[i]->variant != v)
            continue;
        json_t *dts = json_array();
        for (int t = 0; dts != NULL && t < ATTN_NDTYPES; t++)
            if ((f[i]->dtypes & ATTN_DTYPE_BIT(t)) &&
                json_array_append_new(dts, json_string(attn_dtype_name((attn_dtype)t))) != 0) {
                json_decref(dts);
                dts = NULL;
            }
        json_t *o = dts == NULL ? NULL
                                : json_pack("{s:s, s:s, s:s, s:s, s:b, s:o}", "family",
                                            f[i]->family, "backend", f[i]->backend, "params",
                                            f[i]->params, "summary", f[i]->summary, "built",
                                            f[i]->kernel != NULL, "dtypes", dts);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

json_t *variants_json(void)
{
    json_t *arr = json_array();
    for (int v = 0; arr != NULL && v < ATTN_MAX_VARIANTS; v++) {
        const attn_variant_desc *f = attn_family_variant((attn_variant)v);
        if (f == NULL)
            continue;
        json_t *fams = families_of((attn_variant)v);
        json_t *o = fams == NULL ? NULL
                                 : json_pack("{s:s, s:i, s:s, s:s, s:o}", "name", f->name, "id", v,
                                             "color", f->color, "summary", f->summary,
                                             "families", fams);
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr != NULL ? json_pack("{s:o}", "variants", arr) : NULL;
}
