/* pin_rule.c -- pins: checking, normalising and what a rule covers (pin_rule.h). */
#include "pin_rule.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "attune_err.h"

/* The fields of a canonical shape key, in order; "" for the two that are
 * written without a name (dtype, causality). */
static const char *const shape_fields[8] = {"b", "hq", "hkv", "sq", "skv", "d", "", ""};

const char *pin_action_name(pin_action a)
{
    return a == PIN_EXCLUDE ? "exclude" : "force";
}

int pin_action_parse(const char *s, pin_action *out)
{
    if (s != NULL && strcmp(s, "force") == 0)
        *out = PIN_FORCE;
    else if (s != NULL && strcmp(s, "exclude") == 0)
        *out = PIN_EXCLUDE;
    else
        return ATTUNE_EINVAL;
    return 0;
}

/* Free text: shorter than max bytes, no control characters. */
static int check_text(const char *s, size_t max, const char *field, int need, char *err,
                      size_t errlen)
{
    size_t n = strnlen(s, max);
    if (n >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is too long (at most %zu bytes)",
                           field, max - 1);
    if (need && n == 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is required", field);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s holds a control character", field);
    return 0;
}

/* A character of a tactic's key (k) or value (!k). */
static int part_char(int c, int k)
{
    int word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    return k ? word : word || (c >= 'A' && c <= 'Z') || c == '.' || c == '-';
}

/* One part "key=value" of an exclusion prefix: [a-z0-9_]+=[A-Za-z0-9_.-]+. */
static int part_ok(const char *b, size_t n)
{
    const char *eq = memchr(b, '=', n);
    if (eq == NULL || eq == b || eq == b + n - 1)
        return 0;
    for (const char *p = b; p < b + n; p++)
        if (p != eq && !part_char((unsigned char)*p, p < eq))
            return 0;
    return 1;
}

/* The keys a tactic may have (kernels/attn.c), in their canonical order. */
static const char *const tactic_keys[] = {"acc",    "arch",   "eng",    "fold", "graph", "kcfg", "pad",
                                          "persist", "splits", "stages", "tile", "warps", NULL};

/* The key of part (key=value...) must be a tactic key, after prev (the
 * canonical text sorts its keys: a prefix out of order matches nothing).
 * Values are compared as text. prev receives the key. */
static int check_key(const char *t, const char *part, char *prev, size_t plen, char *err,
                     size_t errlen)
{
    size_t n = strcspn(part, "=");
    int known = 0;
    for (int i = 0; tactic_keys[i] != NULL && !known; i++)
        known = strlen(tactic_keys[i]) == n && strncmp(tactic_keys[i], part, n) == 0;
    if (!known)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic '%s': unknown key '%.*s'", t,
                           (int)n, part);
    if (prev[0] != 0 && strncmp(prev, part, n) >= 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic '%s': keys must be in their "
                           "canonical (sorted) order, as attune tactics writes them", t);
    snprintf(prev, plen, "%.*s", (int)n, part);
    return 0;
}

/* An exclusion: a variant name, then whole key=value parts. */
static int check_prefix(const char *t, char *err, size_t errlen)
{
    size_t n = strcspn(t, "/");
    char name[32];
    attn_variant v;
    if (n == 0 || n >= sizeof name)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "tactic '%s' must start with a variant (%s)", t, attn_variant_names());
    memcpy(name, t, n);
    name[n] = 0;
    if (attn_variant_parse(name, &v) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown variant '%s' in tactic '%s' "
                           "(known: %s)", name, t, attn_variant_names());
    char prev[16] = "";
    for (const char *p = t + n; *p == '/';) {
        size_t k = strcspn(p + 1, "/");
        if (!part_ok(p + 1, k))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "tactic '%s': '%.*s' is not a key=value part (a prefix is whole "
                               "parts, e.g. fused/pad=1)", t, (int)k, p + 1);
        int rc = check_key(t, p + 1, prev, sizeof prev, err, errlen);
        if (rc != 0)
            return rc;
        p += 1 + k;
    }
    return 0;
}

/* The tactic of p: complete and canonical for a force, a prefix of whole
 * parts for an exclusion. */
static int check_tactic(pin *p, char *err, size_t errlen)
{
    int rc = check_text(p->tactic, sizeof p->tactic, "tactic", 1, err, errlen);
    if (rc != 0)
        return rc;
    if (p->action == PIN_EXCLUDE)
        return check_prefix(p->tactic, err, errlen);
    attn_tactic t;
    char why[ATTUNE_ERRLEN];
    if (attn_tactic_parse(p->tactic, &t, why, sizeof why) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "a forced tactic must be complete "
                           "(e.g. fused/pad=8; see attune tactics): '%s': %s", p->tactic, why);
    attn_tactic_str(&t, p->tactic, sizeof p->tactic);
    return 0;
}

/* Field i of a pattern, [b, b+n): a wildcard ("*" or "<name>*"), or its
 * canonical text (checked later, as a whole key). 1 for a wildcard. */
static int field_wild(int i, const char *b, size_t n)
{
    size_t nl = strlen(shape_fields[i]);
    return (n == 1 && b[0] == '*') ||
           (nl > 0 && n == nl + 1 && strncmp(b, shape_fields[i], nl) == 0 && b[nl] == '*');
}

/* A stand-in for a wildcard field so the key parses: sizes 1, f16, nc. */
static const char *const field_fill[8] = {"b1", "hq1", "hkv1", "sq1", "skv1", "d1", "f16",
                                          "nc"};

/* Split a shape pattern into 8 fields; normalise wildcards into out and
 * the same with stand-ins into probe (a wildcard hq takes a fixed hkv's
 * value, so hq % hkv holds). Returns the count of fixed fields, or -1 when
 * it is not 8 fields. Buffers of 2 * ATTN_SHAPE_KEY_MAX bytes. */
static int split_pattern(const char *s, char *out, char *probe)
{
    const char *f[8];
    int n[8], wild[8], fixed = 0;
    const char *p = s;
    for (int i = 0; i < 8; i++) {
        n[i] = (int)strcspn(p, ".");
        f[i] = p;
        wild[i] = field_wild(i, p, (size_t)n[i]);
        fixed += !wild[i];
        if ((i < 7 && p[n[i]] != '.') || (i == 7 && p[n[i]] != 0))
            return -1;
        p += n[i] + 1;
    }
    size_t o = 0, q = 0, cap = 2 * ATTN_SHAPE_KEY_MAX;
    for (int i = 0; i < 8; i++) {
        const char *sep = i ? "." : "";
        if (wild[i])
            o += (size_t)snprintf(out + o, cap - o, "%s%s*", sep, shape_fields[i]);
        else
            o += (size_t)snprintf(out + o, cap - o, "%s%.*s", sep, n[i], f[i]);
        if (wild[i] && i == 1 && !wild[2]) /* hq takes hkv's number */
            q += (size_t)snprintf(probe + q, cap - q, ".hq%.*s", n[2] > 3 ? n[2] - 3 : 0,
                                  f[2] + 3);
        else if (wild[i])
            q += (size_t)snprintf(probe + q, cap - q, "%s%s", sep, field_fill[i]);
        else
            q += (size_t)snprintf(probe + q, cap - q, "%s%.*s", sep, n[i], f[i]);
    }
    return fixed;
}

/* The shape of p: "", a canonical key, or a pattern (see pin.h). */
static int check_shape(pin *p, char *err, size_t errlen)
{
    char out[2 * ATTN_SHAPE_KEY_MAX], probe[2 * ATTN_SHAPE_KEY_MAX], why[ATTUNE_ERRLEN];
    attn_shape s;
    if (check_text(p->shape, sizeof p->shape, "shape", 0, err, errlen) != 0)
        return ATTUNE_EINVAL;
    if (p->shape[0] == 0 || strcmp(p->shape, "*") == 0) {
        p->shape[0] = 0;
        return 0;
    }
    int fixed = split_pattern(p->shape, out, probe);
    if (fixed < 0 || strlen(out) >= sizeof p->shape)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape '%s' is neither a shape key "
                           "(b1.hq8.hkv1.sq50.skv1018.d256.f16.nc) nor a pattern of its 8 fields "
                           "with wildcards (b*.hq8.hkv1.sq*.skv*.d256.f16.*)", p->shape);
    /* the wildcards filled with the smallest values: what fails is fixed */
    if (attn_shape_parse(probe, &s, why, sizeof why) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape '%s': %s", p->shape, why);
    char canon[ATTN_SHAPE_KEY_MAX];
    if (strcmp(attn_shape_key(&s, canon, sizeof canon), probe) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape '%s' is not canonical (write "
                           "its fields as a shape key does: b1.hq8...f16.nc)", p->shape);
    if (fixed == 8)
        attn_shape_key(&s, out, sizeof out);
    if (fixed == 0)
        out[0] = 0;
    snprintf(p->shape, sizeof p->shape, "%s", out);
    return 0;
}

int pin_check(pin *p, char *err, size_t errlen)
{
    int rc;
    if (p->action != PIN_FORCE && p->action != PIN_EXCLUDE)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "action must be force or exclude");
    if ((rc = check_tactic(p, err, errlen)) != 0 || (rc = check_shape(p, err, errlen)) != 0 ||
        (rc = check_text(p->device, sizeof p->device, "device", 0, err, errlen)) != 0 ||
        (rc = check_text(p->model, sizeof p->model, "model", 0, err, errlen)) != 0 ||
        (rc = check_text(p->reason, sizeof p->reason, "reason", 1, err, errlen)) != 0 ||
        (rc = check_text(p->author, sizeof p->author, "author", 1, err, errlen)) != 0)
        return rc;
    if (p->device[0] != 0 && p->model[0] != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "give a device or a model, not both");
    if (p->created_at < 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "created_at must not be negative");
    return 0;
}

int pin_shape_covers(const char *pattern, const char *key)
{
    if (pattern[0] == 0)
        return 1;
    for (int i = 0; i < 8; i++) {
        size_t pn = strcspn(pattern, "."), kn = strcspn(key, ".");
        if (!(pattern[pn - (pn > 0)] == '*' && pn > 0) &&
            (pn != kn || strncmp(pattern, key, pn) != 0))
            return 0;
        if (i < 7 && (pattern[pn] != '.' || key[kn] != '.'))
            return 0;
        pattern += pn + (i < 7);
        key += kn + (i < 7);
    }
    return 1;
}

int pin_tactic_matches(const pin *p, const char *tactic)
{
    size_t n = strlen(p->tactic);
    if (p->action == PIN_FORCE)
        return strcmp(p->tactic, tactic) == 0;
    return strncmp(p->tactic, tactic, n) == 0 && (tactic[n] == 0 || tactic[n] == '/');
}

int pin_device_covers(const pin *p, const attn_device_info *dev)
{
    return (p->device[0] == 0 || strcmp(p->device, dev->id) == 0) &&
           (p->model[0] == 0 || strcasecmp(p->model, dev->name) == 0);
}

int pin_applies(const pin *p, const attn_device_info *dev, const char *key)
{
    return pin_device_covers(p, dev) && pin_shape_covers(p->shape, key);
}

int pin_rank(const pin *p)
{
    int shape = 0;
    if (p->shape[0] != 0) {
        shape = 9; /* a key */
        if (strchr(p->shape, '*') != NULL) {
            shape = 8;
            for (const char *c = p->shape; *c; c++)
                shape -= *c == '*';
        }
    }
    return shape * 3 + (p->device[0] != 0 ? 2 : p->model[0] != 0 ? 1 : 0);
}

int pin_beats(const pin *a, const pin *b)
{
    int ra = pin_rank(a), rb = pin_rank(b);
    return ra != rb ? ra > rb : a->id > b->id;
}
