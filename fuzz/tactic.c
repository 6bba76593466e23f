/* tactic.c -- libFuzzer harness: the tactic parser (attn_tactic_parse),
 * which reads tactic strings from the store, imports and the API.
 * Properties: no crash; an accepted tactic prints canonically, and the
 * canonical text parses back to the same tactic and the same text. */
#include "../common/tactic.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size);
    attn_tactic t, u;
    char err[ATTUNE_ERRLEN], a[256], b[256];
    if (attn_tactic_parse(s, &t, err, sizeof err) == 0) {
        attn_tactic_str(&t, a, sizeof a);
        FUZZ_CHECK(attn_tactic_parse(a, &u, NULL, 0) == 0);
        attn_tactic_str(&u, b, sizeof b);
        FUZZ_CHECK(strcmp(a, b) == 0);
    }
    free(s);
    return 0;
}
