/* shape_key.c -- libFuzzer harness: the canonical shape key parser
 * (attn_shape_parse), which every API and CLI shape goes through.
 * Properties: no crash; an accepted key is valid and is exactly its own
 * canonical spelling (issue 15 item 8: one spelling per shape). */
#include "../common/shape.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *key = fuzz_cstr(data, size);
    attn_shape s;
    char err[ATTUNE_ERRLEN], canon[ATTN_SHAPE_KEY_MAX];
    if (attn_shape_parse(key, &s, err, sizeof err) == 0) {
        FUZZ_CHECK(attn_shape_validate(&s, NULL, 0) == 0);
        FUZZ_CHECK(strcmp(attn_shape_key(&s, canon, sizeof canon), key) == 0);
    } else {
        FUZZ_CHECK(err[0] != 0); /* a refusal says why */
    }
    free(key);
    return 0;
}
