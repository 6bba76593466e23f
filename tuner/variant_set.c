/* variant_set.c -- sets of variants a caller can run (variant_set.h). */
#include "variant_set.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/attune_err.h"
#include "../kernels/variant.h"

/* The names of the table's variants (kernels/variants.c) in id order,
 * rebuilt per call (a registered variant is named too), per thread. */
const char *variant_set_names(void)
{
    static _Thread_local char buf[512];
    size_t n = 0;
    buf[0] = 0;
    for (int v = 0; v < ATTN_MAX_VARIANTS; v++) {
        const attn_variant_desc *f = attn_family_variant((attn_variant)v);
        if (f == NULL)
            continue;
        int w = snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "", f->name);
        if (w < 0 || (size_t)w >= sizeof buf - n)
            break;
        n += (size_t)w;
    }
    return buf;
}

/* The name of [b, e) with surrounding spaces cut, into buf; its length. */
static size_t trimmed(const char *b, const char *e, char *buf, size_t len)
{
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    size_t n = (size_t)(e - b);
    if (n >= len)
        n = len - 1;
    memcpy(buf, b, n);
    buf[n] = 0;
    return (size_t)(e - b);
}

int variant_set_parse(const char *list, variant_set *out, char *err, size_t errlen)
{
    variant_set s = 0;
    if (list == NULL || *list == 0) {
        *out = 0;
        return 0;
    }
    for (const char *p = list;;) {
        const char *comma = strchr(p, ',');
        const char *end = comma != NULL ? comma : p + strlen(p);
        char name[32];
        attn_variant v;
        size_t n = trimmed(p, end, name, sizeof name);
        if (n == 0)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "an empty name in the list (write e.g. cudnn,split,folded)");
        if (n >= sizeof name || attn_variant_parse(name, &v) != 0)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "unknown variant '%.32s' (known: %s)", name,
                               variant_set_names());
        s |= 1u << v;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *out = s;
    return 0;
}

int variant_set_has(variant_set s, attn_variant v)
{
    return s == 0 || ((unsigned)v < ATTN_MAX_VARIANTS && (s & (1u << v)) != 0);
}

int variant_set_has_tactic(variant_set s, const char *tactic)
{
    if (s == 0)
        return 1;
    char name[32];
    size_t n = strcspn(tactic, "/");
    if (n >= sizeof name)
        return 0;
    memcpy(name, tactic, n);
    name[n] = 0;
    attn_variant v;
    return attn_variant_parse(name, &v) == 0 && variant_set_has(s, v);
}

char *variant_set_str(variant_set s, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (int v = 0; v < ATTN_MAX_VARIANTS && s != 0; v++)
        if (s & (1u << v)) {
            int w = snprintf(buf + n, len - n, "%s%s", n ? "," : "",
                             attn_variant_name((attn_variant)v));
            if (w < 0 || (size_t)w >= len - n)
                break;
            n += (size_t)w;
        }
    return buf;
}

int variant_set_winner(const store_measurement *m, int n, const select_policy *p,
                       double override_max_rel_err, variant_set s)
{
    if (s == 0)
        return select_winner(m, n, p, override_max_rel_err);
    int k = 0, all = 1;
    for (int i = 0; i < n; i++)
        all &= variant_set_has_tactic(s, m[i].tactic);
    if (all)
        return select_winner(m, n, p, override_max_rel_err);
    store_measurement *c = malloc((size_t)(n > 0 ? n : 1) * sizeof *c);
    int *from = malloc((size_t)(n > 0 ? n : 1) * sizeof *from);
    int w = ATTUNE_ENOMEM;
    if (c != NULL && from != NULL) {
        for (int i = 0; i < n; i++)
            if (variant_set_has_tactic(s, m[i].tactic)) {
                from[k] = i;
                c[k++] = m[i];
            }
        w = select_winner(c, k, p, override_max_rel_err);
        w = w >= 0 ? from[w] : w;
    }
    free(c);
    free(from);
    return w;
}
