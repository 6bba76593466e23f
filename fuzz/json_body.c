/* json_body.c -- libFuzzer harness: what POST /v1/tune does with a body
 * before any database work: the nesting pre-check (http_json_depth_ok),
 * jansson with duplicate keys refused, and every shape through
 * shape_json_parse. Properties: no crash; a body nested deeper than the
 * limit never reaches the parser; an accepted shape is valid and its JSON
 * parses back to the same shape. */
#include <jansson.h>

#include "../common/shape_json.h"
#include "../daemon/http.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!http_json_depth_ok((const char *)data, size, ATTUNED_JSON_DEPTH_MAX))
        return 0;
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL)
        return 0;
    json_t *shapes = json_object_get(root, "shapes");
    size_t n = json_array_size(shapes);
    for (size_t i = 0; i < n && i < 4096; i++) {
        attn_shape s, t;
        char err[ATTUNE_ERRLEN];
        if (shape_json_parse(json_array_get(shapes, i), 0, &s, err, sizeof err) != 0)
            continue;
        FUZZ_CHECK(attn_shape_validate(&s, NULL, 0) == 0);
        json_t *back = shape_json_new(&s);
        FUZZ_CHECK(back != NULL);
        FUZZ_CHECK(shape_json_parse(back, 0, &t, NULL, 0) == 0);
        FUZZ_CHECK(memcmp(&s, &t, sizeof s) == 0);
        json_decref(back);
    }
    json_decref(root);
    return 0;
}
