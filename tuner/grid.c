/* grid.c -- load shape grids from JSON files. */
#include "grid.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../common/shape_json.h"

int grid_load(const char *path, attn_shape **shapes, int *n, char *err, size_t errlen)
{
    json_error_t jerr;
    attn_shape *out = NULL;
    int rc = 0, cnt = 0;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (jerr.line < 0 || strstr(jerr.text, "unable to open") != NULL)
            return attune_fail(err, errlen, ATTUNE_EIO, "cannot read grid %s: %s", path, jerr.text);
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "grid %s:%d: %s", path, jerr.line,
                           jerr.text);
    }
    json_t *arr = json_object_get(root, "shapes");
    if (!json_is_array(arr)) {
        rc = attune_fail(err, errlen, ATTUNE_EFORMAT, "grid %s has no \"shapes\" array", path);
        goto fail;
    }
    size_t len = json_array_size(arr);
    if (len > GRID_MAX_SHAPES) {
        rc = attune_fail(err, errlen, ATTUNE_ETOOBIG, "grid %s has %zu shapes, over the limit %d",
                         path, len, GRID_MAX_SHAPES);
        goto fail;
    }
    out = malloc((len ? len : 1) * sizeof *out);
    if (out == NULL) {
        rc = ATTUNE_ENOMEM;
        goto fail;
    }
    for (size_t i = 0; i < len; i++) {
        json_t *e = json_array_get(arr, i);
        /* Only the documented notes may ride along with a shape. */
        json_t *copy = json_is_object(e) ? json_copy(e) : NULL;
        if (copy) {
            json_object_del(copy, "source");
            json_object_del(copy, "model");
        }
        char msg[ATTUNE_ERRLEN];
        attn_shape s;
        int prc = shape_json_parse(copy ? copy : e, 0, &s, msg, sizeof msg);
        json_decref(copy);
        if (prc != 0) {
            rc = attune_fail(err, errlen, ATTUNE_EFORMAT, "grid %s, shape %zu: %s", path, i, msg);
            goto fail;
        }
        int dup = 0;
        for (int j = 0; j < cnt && !dup; j++)
            dup = memcmp(&out[j], &s, sizeof s) == 0;
        if (!dup)
            out[cnt++] = s;
    }
    json_decref(root);
    *shapes = out;
    *n = cnt;
    return 0;
fail:
    free(out);
    json_decref(root);
    return rc;
}
