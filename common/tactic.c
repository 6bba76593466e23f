/* tactic.c -- tactics: the variant words and canonical text (tactic.h). */
#include "tactic.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const int attn_pads[ATTN_NPADS] = {1, 8, 16, 64};

static const char *const graph_names[] = {"", "sdpa", "comp"};

/* The variant words by id: the built-in ones (DESIGN.md "Variants"; each
 * family of kernels/variants.c names its variant by the same word, which
 * tests/test_variant.c checks), then those registered with a family. */
static const char *variant_words[ATTN_MAX_VARIANTS] = {
    [ATTN_FUSED] = "fused",
    [ATTN_FUSED_SPLITKV] = "fused_splitkv",
    [ATTN_SPLIT] = "split",
    [ATTN_SPLIT_REPEAT] = "split_repeat",
    [ATTN_FOLDED] = "folded",
    [ATTN_CUDNN] = "cudnn",
};

const char *attn_variant_name(attn_variant v)
{
    return (unsigned)v < ATTN_MAX_VARIANTS && variant_words[v] != NULL ? variant_words[v] : "?";
}

int attn_variant_parse(const char *s, attn_variant *out)
{
    for (int i = 0; i < ATTN_MAX_VARIANTS; i++)
        if (variant_words[i] != NULL && strcmp(s, variant_words[i]) == 0) {
            *out = (attn_variant)i;
            return 0;
        }
    return ATTUNE_EINVAL;
}

const char *attn_variant_names(void)
{
    static _Thread_local char buf[512];
    size_t n = 0;
    buf[0] = 0;
    for (int v = 0; v < ATTN_MAX_VARIANTS; v++) {
        if (variant_words[v] == NULL)
            continue;
        int w = snprintf(buf + n, sizeof buf - n, "%s%s", n ? ", " : "", variant_words[v]);
        if (w < 0 || (size_t)w >= sizeof buf - n)
            break;
        n += (size_t)w;
    }
    return buf;
}

/* 1 when s is 1 to 31 characters of [a-z0-9_]: a word that tactic text,
 * variant sets (commas) and shape patterns read back unchanged. */
static int is_word(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 31)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return 1;
}

int attn_variant_register(attn_variant v, const char *name)
{
    if ((unsigned)v >= ATTN_MAX_VARIANTS || name == NULL || !is_word(name))
        return ATTUNE_EINVAL;
    for (int i = 0; i < ATTN_MAX_VARIANTS; i++)
        if (i != (int)v && variant_words[i] != NULL && strcmp(variant_words[i], name) == 0)
            return ATTUNE_EINVAL; /* one id per word */
    if (variant_words[v] != NULL)
        return strcmp(variant_words[v], name) == 0 ? 0 : ATTUNE_EINVAL; /* one word per id */
    variant_words[v] = name;
    return 0;
}

void attn_variant_reset(void)
{
    for (int i = ATTN_NVARIANTS; i < ATTN_MAX_VARIANTS; i++)
        variant_words[i] = NULL;
}

char *attn_tactic_str(const attn_tactic *t, char *buf, size_t buflen)
{
    size_t n = 0;
    n += (size_t)snprintf(buf + n, buflen - n, "%s", attn_variant_name(t->variant));
    /* keys in sorted order: acc, arch, eng, fold, graph, kcfg, pad, persist,
     * splits, stages, tile, warps (fold and persist never meet the cudnn
     * keys: see the parser) */
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
    if (t->persist > 0 && n < buflen)
        n += (size_t)snprintf(buf + n, buflen - n, "/persist=%d", t->persist);
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
        } else if (strcmp(k, "persist") == 0) {
            bit = 2048;
            bad = parse_pos(v, 1, &t.persist) != 0;
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
    /* fold=1 and persist=1 are forms of the Hopper fused kernel only. */
    if ((seen & 1024) && (t.variant != ATTN_FUSED || !(seen & 32)))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "fold= belongs to fused arch=sm90a tactics, not '%s'", s);
    if ((seen & 2048) && (t.variant != ATTN_FUSED || !(seen & 32)))
        return attune_fail(err, errlen, ATTUNE_EINVAL, "persist= belongs to fused arch=sm90a tactics, not '%s'",
                           s);
    if (t.variant == ATTN_CUDNN && (seen & (1 | 4 | 8 | 16 | 32 | 64)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "cudnn tactic '%s' takes only eng, graph, kcfg and pad", s);
    if (t.variant != ATTN_CUDNN && (seen & (128 | 256 | 512)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "eng, graph and kcfg belong to cudnn tactics, not '%s'", s);
    *out = t;
    return 0;
}
