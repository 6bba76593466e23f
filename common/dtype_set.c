/* dtype_set.c -- sets of dtypes in text (dtype_set.h). */
#include "dtype_set.h"

#include <stdio.h>
#include <string.h>

#include "attune_err.h"

int dtype_set_text(const char *text)
{
    return text != NULL && (strcmp(text, "any") == 0 || strchr(text, ',') != NULL);
}

int dtype_set_parse(const char *text, unsigned *set, char *err, size_t errlen)
{
    *set = 0;
    if (text == NULL || *text == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no dtype given");
    if (strcmp(text, "any") == 0) {
        *set = DTYPE_SET_ALL;
        return 0;
    }
    for (const char *p = text;;) {
        size_t n = strcspn(p, ",");
        char word[16];
        attn_dtype t;
        if (n == 0 || n >= sizeof word)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "dtypes '%.48s': expected any, or names of f16, bf16, f32 and "
                               "e4m3 separated by commas",
                               text);
        memcpy(word, p, n);
        word[n] = 0;
        if (attn_dtype_parse(word, &t) != 0)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "unknown dtype '%s' in '%.48s' (expected f16, bf16, f32 or e4m3)",
                               word, text);
        if (*set & (1u << t))
            return attune_fail(err, errlen, ATTUNE_EINVAL, "dtype '%s' given twice in '%.48s'",
                               word, text);
        *set |= 1u << t;
        if (p[n] == 0)
            return 0;
        p += n + 1;
    }
}

const char *dtype_set_str(unsigned set, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int t = 0; t < ATTN_NDTYPES; t++)
        if (set & (1u << t))
            k += (size_t)snprintf(buf + k, k < len ? len - k : 0, "%s%s", k ? "," : "",
                                  attn_dtype_name((attn_dtype)t));
    return buf;
}
