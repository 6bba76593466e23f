/* attn.c -- shapes, tactics and stacks: validation and canonical text. */
#include "attn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "variant.h"

const int attn_pads[ATTN_NPADS] = {1, 8, 16, 64};

static const char *const dtype_names[ATTN_NDTYPES] = {"f16", "bf16", "f32", "e4m3"};
static const char *const graph_names[] = {"", "sdpa", "comp"};

const char *attn_dtype_name(attn_dtype t)
{
    return (unsigned)t < ATTN_NDTYPES ? dtype_names[t] : "?";
}

int attn_dtype_parse(const char *s, attn_dtype *out)
{
    for (int i = 0; i < ATTN_NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) {
            *out = (attn_dtype)i;
            return 0;
        }
    return ATTUNE_EINVAL;
}

size_t attn_dtype_size(attn_dtype t)
{
    return t == ATTN_F32 ? 4 : t == ATTN_E4M3 ? 1 : 2;
}

int attn_shape_validate(const attn_shape *s, char *err, size_t errlen)
{
    const struct { const char *name; int64_t v; } f[] = {
        {"b", s->b}, {"hq", s->hq}, {"hkv", s->hkv},
        {"sq", s->sq}, {"skv", s->skv}, {"d", s->d}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < 1)
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s=%lld must be at least 1", f[i].name, (long long)f[i].v);
        if (f[i].v > ATTN_MAX_DIM)
            return attune_fail(err, errlen, ATTUNE_ETOOBIG,
                               "%s=%lld exceeds the limit %lld", f[i].name,
                               (long long)f[i].v, (long long)ATTN_MAX_DIM);
    }
    if (s->d > ATTN_MAX_HEADDIM)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG, "d=%lld exceeds the limit %d",
                           (long long)s->d, ATTN_MAX_HEADDIM);
    if (s->hq % s->hkv != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "hq=%lld is not a multiple of hkv=%lld",
                           (long long)s->hq, (long long)s->hkv);
    if ((unsigned)s->dtype >= ATTN_NDTYPES)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown dtype %d", (int)s->dtype);
    if (s->causal != 0 && s->causal != 1)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "causal must be 0 or 1");
    /* Each factor is <= 2^20, so pairwise products fit; check stepwise. */
    double q = (double)s->b * (double)s->hq * (double)s->sq * (double)s->d;
    double kv = (double)s->b * (double)s->hkv * (double)s->skv * (double)s->d;
    if (q > (double)ATTN_MAX_ELEMS || kv > (double)ATTN_MAX_ELEMS)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG,
                           "shape has %.3g query / %.3g key elements, over the limit %lld",
                           q, kv, (long long)ATTN_MAX_ELEMS);
    return 0;
}

char *attn_shape_key(const attn_shape *s, char *buf, size_t buflen)
{
    snprintf(buf, buflen, "b%lld.hq%lld.hkv%lld.sq%lld.skv%lld.d%lld.%s.%s",
             (long long)s->b, (long long)s->hq, (long long)s->hkv, (long long)s->sq,
             (long long)s->skv, (long long)s->d, attn_dtype_name(s->dtype),
             s->causal ? "c" : "nc");
    return buf;
}

/* Parse "<prefix><decimal>" from *p up to the next '.', advancing *p. */
static int parse_field(const char **p, const char *prefix, int64_t *out,
                       char *err, size_t errlen)
{
    size_t n = strlen(prefix);
    if (strncmp(*p, prefix, n) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "expected field '%s' at '%.20s'", prefix, *p);
    const char *s = *p + n;
    if (*s < '0' || *s > '9')
        return attune_fail(err, errlen, ATTUNE_EINVAL, "field '%s' needs a number", prefix);
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || v > ATTN_MAX_DIM)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG, "field '%s' is too large", prefix);
    if (*end != '.')
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "field '%s' must be followed by '.'", prefix);
    *out = v;
    *p = end + 1;
    return 0;
}

int attn_shape_parse(const char *key, attn_shape *out, char *err, size_t errlen)
{
    if (key == NULL || strlen(key) >= ATTN_SHAPE_KEY_MAX)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape key missing or too long");
    attn_shape s = {0};
    const char *p = key;
    int rc;
    if ((rc = parse_field(&p, "b", &s.b, err, errlen)) ||
        (rc = parse_field(&p, "hq", &s.hq, err, errlen)) ||
        (rc = parse_field(&p, "hkv", &s.hkv, err, errlen)) ||
        (rc = parse_field(&p, "sq", &s.sq, err, errlen)) ||
        (rc = parse_field(&p, "skv", &s.skv, err, errlen)) ||
        (rc = parse_field(&p, "d", &s.d, err, errlen)))
        return rc;
    const char *dot = strchr(p, '.');
    if (dot == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "shape key '%s' lacks the causal flag", key);
    char dt[8];
    size_t dl = (size_t)(dot - p);
    if (dl >= sizeof dt)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown dtype in '%s'", key);
    memcpy(dt, p, dl);
    dt[dl] = 0;
    if (attn_dtype_parse(dt, &s.dtype) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "unknown dtype '%s' (expected f16, bf16, f32 or e4m3)", dt);
    if (strcmp(dot + 1, "c") == 0)
        s.causal = 1;
    else if (strcmp(dot + 1, "nc") == 0)
        s.causal = 0;
    else
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "causal flag must be 'c' or 'nc', not '%s'", dot + 1);
    if ((rc = attn_shape_validate(&s, err, errlen)) != 0)
        return rc;
    /* one spelling per shape: keys name rows in files, logs and caches, so
     * "b01.hq08..." (which strtoll reads as b1.hq8) is refused, not folded */
    char canon[ATTN_SHAPE_KEY_MAX];
    if (strcmp(attn_shape_key(&s, canon, sizeof canon), key) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "shape key '%.80s' is not canonical (expected %s)", key, canon);
    *out = s;
    return 0;
}

double attn_shape_flops(const attn_shape *s)
{
    double pairs;
    if (!s->causal) {
        pairs = (double)s->sq * (double)s->skv;
    } else {
        pairs = 0;
        for (int64_t i = 0; i < s->sq; i++)
            pairs += (double)attn_visible_keys(s, i);
    }
    return 4.0 * (double)s->b * (double)s->hq * pairs * (double)s->d;
}

/* Variant names are the table's (kernels/variants.c): a registered family
 * names its variant too. */
const char *attn_variant_name(attn_variant v)
{
    const attn_variant_desc *f = attn_family_variant(v);
    return f != NULL ? f->name : "?";
}

int attn_variant_parse(const char *s, attn_variant *out)
{
    int n;
    const attn_variant_desc *const *fams = attn_families(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(s, fams[i]->name) == 0) {
            *out = fams[i]->variant;
            return 0;
        }
    return ATTUNE_EINVAL;
}

char *attn_tactic_str(const attn_tactic *t, char *buf, size_t buflen)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, buflen - n, "%s", attn_variant_name(t->variant));
    /* keys in sorted order: acc, arch, eng, fold, graph, kcfg, pad, splits,
     * stages, tile, warps (fold never meets the cudnn keys: see the parser) */
    if (t->acc != ATTN_ACC_NONE && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/acc=%s",
                              t->acc == ATTN_ACC_F16 ? "f16" : "f32");
    if (t->arch == ATTN_ARCH_SM90A && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/arch=sm90a");
    if (t->variant == ATTN_CUDNN && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/eng=%d/graph=%s/kcfg=%d", t->eng,
                              (unsigned)t->graph <= ATTN_GRAPH_COMP ? graph_names[t->graph] : "?",
                              t->kcfg);
    if (t->fold > 0 && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/fold=%d", t->fold);
    if (n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/pad=%d", t->pad);
    if (t->splits > 0 && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/splits=%d", t->splits);
    if (t->stages > 0 && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/stages=%d", t->stages);
    if (t->tile_m > 0 && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/tile=%dx%d", t->tile_m, t->tile_n);
    if (t->warps > 0 && n < buflen)
        snprintf(buf + n, buflen - n, "/warps=%d", t->warps);
    return buf;
}

/* Parse a non-negative int in [0, max] that fills the whole string. */
static int parse_nonneg(const char *s, long max, int *out)
{
    if (*s < '0' || *s > '9')
        return ATTUNE_EINVAL;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > max)
        return ATTUNE_EINVAL;
    *out = (int)v;
    return 0;
}

/* Parse a positive int in [1, max] that fills the whole string. */
static int parse_pos(const char *s, int max, int *out)
{
    if (*s < '0' || *s > '9')
        return ATTUNE_EINVAL;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > max)
        return ATTUNE_EINVAL;
    *out = (int)v;
    return 0;
}

int attn_tactic_parse(const char *s, attn_tactic *out, char *err, size_t errlen)
{
    if (s == NULL || strlen(s) >= ATTN_TACTIC_STR_MAX)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic missing or too long");
    char buf[ATTN_TACTIC_STR_MAX];
    strcpy(buf, s);
    attn_tactic t = {0};
    char *save = NULL;
    char *tok = strtok_r(buf, "/", &save);
    if (tok == NULL || attn_variant_parse(tok, &t.variant) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown variant in tactic '%s'", s);
    unsigned seen = 0;
    while ((tok = strtok_r(NULL, "/", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (eq == NULL)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic parameter '%s' lacks '='", tok);
        *eq = 0;
        const char *k = tok, *v = eq + 1;
        unsigned bit;
        int bad = 0;
        if (strcmp(k, "acc") == 0) {
            bit = 1;
            if (strcmp(v, "f16") == 0) t.acc = ATTN_ACC_F16;
            else if (strcmp(v, "f32") == 0) t.acc = ATTN_ACC_F32;
            else bad = 1;
        } else if (strcmp(k, "pad") == 0) {
            bit = 2;
            bad = parse_pos(v, 64, &t.pad) != 0 ||
                  (t.pad != 1 && t.pad != 8 && t.pad != 16 && t.pad != 64);
        } else if (strcmp(k, "splits") == 0) {
            bit = 4;
            bad = parse_pos(v, 1024, &t.splits) != 0;
        } else if (strcmp(k, "tile") == 0) {
            bit = 8;
            char *x = strchr(v, 'x');
            if (x == NULL) {
                bad = 1;
            } else {
                *x = 0;
                bad = parse_pos(v, 1024, &t.tile_m) || parse_pos(x + 1, 1024, &t.tile_n);
            }
        } else if (strcmp(k, "warps") == 0) {
            bit = 16;
            bad = parse_pos(v, 32, &t.warps) != 0;
        } else if (strcmp(k, "arch") == 0) {
            bit = 32;
            if (strcmp(v, "sm90a") == 0) t.arch = ATTN_ARCH_SM90A;
            else bad = 1;
        } else if (strcmp(k, "stages") == 0) {
            bit = 64;
            bad = parse_pos(v, 8, &t.stages) != 0;
        } else if (strcmp(k, "eng") == 0) {
            bit = 128;
            bad = parse_nonneg(v, 1000000, &t.eng) != 0;
        } else if (strcmp(k, "graph") == 0) {
            bit = 256;
            if (strcmp(v, "sdpa") == 0) t.graph = ATTN_GRAPH_SDPA;
            else if (strcmp(v, "comp") == 0) t.graph = ATTN_GRAPH_COMP;
            else bad = 1;
        } else if (strcmp(k, "kcfg") == 0) {
            bit = 512;
            bad = parse_nonneg(v, 2147483647L, &t.kcfg) != 0;
        } else if (strcmp(k, "fold") == 0) {
            bit = 1024;
            bad = parse_pos(v, 1, &t.fold) != 0;
        } else {
            return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown tactic parameter '%s'", k);
        }
        if (bad)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "bad value for tactic parameter '%s'", k);
        if (seen & bit)
            return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic parameter '%s' repeated", k);
        seen |= bit;
    }
    if (!(seen & 2))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic '%s' lacks pad=", s);
    /* The cudnn keys name one execution plan: all three or none. */
    if (t.variant == ATTN_CUDNN && (seen & (128 | 256 | 512)) != (128 | 256 | 512))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "cudnn tactic '%s' needs eng=, graph= and kcfg=", s);
    /* fold=1 is a form of the Hopper fused kernel only. */
    if ((seen & 1024) && (t.variant != ATTN_FUSED || !(seen & 32)))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "fold= belongs to fused arch=sm90a tactics, not '%s'", s);
    if (t.variant == ATTN_CUDNN && (seen & (1 | 4 | 8 | 16 | 32 | 64)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "cudnn tactic '%s' takes only eng, graph, kcfg and pad", s);
    if (t.variant != ATTN_CUDNN && (seen & (128 | 256 | 512)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "eng, graph and kcfg belong to cudnn tactics, not '%s'", s);
    *out = t;
    return 0;
}

void attn_stack_finish(attn_stack *st)
{
    uint64_t h = hash_fnv1a64_init();
    const char *parts[] = {st->driver, st->runtime, st->blas, st->attune, st->kernels};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        h = hash_fnv1a64(h, parts[i], strlen(parts[i]) + 1); /* NUL separates */
    }
    /* A measurement belongs to (device, power mode, stack): another mode is
     * another stack, so its rows are never this mode's own. */
    if (st->power[0] != 0)
        h = hash_fnv1a64(h, st->power, strlen(st->power) + 1);
    snprintf(st->id, sizeof st->id, "%016llx", (unsigned long long)h);
}

/* ---- caller buffers */

void attn_io_contiguous(const attn_shape *s, const void *q, const void *k, const void *v,
                        void *o, attn_io *io)
{
    const int64_t d = s->d;
    memset(io, 0, sizeof *io);
    io->q = (attn_tensor){(void *)q, s->hq * s->sq * d, s->sq * d, d};
    io->o = (attn_tensor){o, s->hq * s->sq * d, s->sq * d, d};
    io->k = (attn_tensor){(void *)k, s->hkv * s->skv * d, s->skv * d, d};
    io->v = (attn_tensor){(void *)v, s->hkv * s->skv * d, s->skv * d, d};
    io->sq = s->sq;
    io->skv = s->skv;
}

/* 0 when view t has data and non-negative strides. */
static int tensor_ok(const attn_tensor *t)
{
    return t->data != NULL && t->sb >= 0 && t->sh >= 0 && t->ss >= 0;
}

int attn_io_check(const attn_shape *s, const attn_io *io, attn_shape *run, char *err,
                  size_t errlen)
{
    if (s == NULL || io == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no shape or no buffers");
    static const char *const names[4] = {"q", "k", "v", "out"};
    const attn_tensor *t[4] = {&io->q, &io->k, &io->v, &io->o};
    for (int i = 0; i < 4; i++)
        if (!tensor_ok(t[i]))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s: NULL data or a negative stride", names[i]);
    const int64_t sq = io->sq != 0 ? io->sq : s->sq, skv = io->skv != 0 ? io->skv : s->skv;
    if (sq < 1 || sq > s->sq)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "sq=%lld outside 1..%lld (the plan's)", (long long)sq,
                           (long long)s->sq);
    if (skv < 1 || skv > s->skv)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "skv=%lld outside 1..%lld (the plan's)", (long long)skv,
                           (long long)s->skv);
    if (run != NULL) {
        *run = *s;
        run->sq = sq;
        run->skv = skv;
    }
    return 0;
}
