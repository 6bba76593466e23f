/* query.c -- libFuzzer harness: attuned's own parsers of query values and
 * headers (daemon/http.c): the strict decimal of max_rel_err
 * (http_parse_real) and the Content-Type rule (http_content_type_json).
 * The first byte picks the parser. Properties: no crash; an accepted
 * number is finite, written only with digits, '.', 'e/E', '+/-' (after
 * the e), and equals strtod's reading; an accepted Content-Type starts
 * with application/json followed by nothing, blanks or a ';'. */
#include <math.h>
#include <strings.h>

#include "../daemon/http.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    char *s = fuzz_cstr(data + 1, size - 1);
    if (data[0] & 1) {
        double v;
        if (http_parse_real(s, &v) == 0) {
            FUZZ_CHECK(isfinite(v) && v >= 0);
            FUZZ_CHECK(s[0] != ' ' && s[0] != '+' && s[0] != '-');
            FUZZ_CHECK(strspn(s, "0123456789.eE+-") == strlen(s));
            FUZZ_CHECK(v == strtod(s, NULL));
        }
    } else if (http_content_type_json(s)) {
        FUZZ_CHECK(strncasecmp(s, "application/json", 16) == 0);
        const char *p = s + 16;
        p += strspn(p, " \t");
        FUZZ_CHECK(*p == 0 || *p == ';');
    }
    free(s);
    return 0;
}
