/* test_attn.c -- shape keys, tactic strings, validation. */
#include "kernels/attn.h"
#include "test.h"
#include "common/hash.h"

static void shape_key_should_round_trip(void)
{
    const char *keys[] = {"b1.hq8.hkv1.sq50.skv1018.d256.f16.nc",
                          "b2.hq16.hkv16.sq8192.skv8192.d128.bf16.c",
                          "b16.hq32.hkv8.sq1.skv4096.d128.f32.nc"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        attn_shape s;
        char err[ATTUNE_ERRLEN], buf[ATTN_SHAPE_KEY_MAX];
        CHECK_EQ_INT(attn_shape_parse(keys[i], &s, err, sizeof err), 0);
        CHECK_STR(attn_shape_key(&s, buf, sizeof buf), keys[i]);
    }
    attn_shape s;
    attn_shape_parse(keys[0], &s, NULL, 0);
    CHECK_EQ_INT(s.b, 1);
    CHECK_EQ_INT(s.hq, 8);
    CHECK_EQ_INT(s.hkv, 1);
    CHECK_EQ_INT(s.sq, 50);
    CHECK_EQ_INT(s.skv, 1018);
    CHECK_EQ_INT(s.d, 256);
    CHECK_EQ_INT(s.dtype, ATTN_F16);
    CHECK_EQ_INT(s.causal, 0);
}

static void shape_parse_should_reject_bad_keys(void)
{
    const char *bad[] = {
        "",                                        /* empty */
        "b1.hq8.hkv3.sq50.skv1018.d256.f16.nc",    /* hq % hkv */
        "b0.hq8.hkv1.sq50.skv1018.d256.f16.nc",    /* zero */
        "b-1.hq8.hkv1.sq50.skv1018.d256.f16.nc",   /* negative */
        "b1.hq8.hkv1.sq50.skv1018.d256.f8.nc",     /* dtype */
        "b1.hq8.hkv1.sq50.skv1018.d256.f16.x",     /* causal flag */
        "b1.hq8.hkv1.sq50.skv1018.d256.f16",       /* truncated */
        "hq8.b1.hkv1.sq50.skv1018.d256.f16.nc",    /* order */
        "b1.hq8.hkv1.sq50.skv1018.d2048.f16.nc",   /* head dim over limit */
        "b99999999999999999999.hq8.hkv1.sq50.skv1018.d256.f16.nc", /* overflow */
        "b1048576.hq1024.hkv1.sq1048576.skv1.d64.f16.nc", /* buffers too large */
        "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc.extra",
        "b1.hq8.hkv1.sq5x.skv1018.d256.f16.nc",
        "b01.hq08.hkv1.sq50.skv1018.d256.f16.nc",  /* not canonical (leading zeros) */
        "b1.hq8.hkv1.sq50.skv1018.d0256.f16.nc",
        "b+1.hq8.hkv1.sq50.skv1018.d256.f16.nc",   /* sign */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_shape s;
        char err[ATTUNE_ERRLEN] = "";
        int rc = attn_shape_parse(bad[i], &s, err, sizeof err);
        CHECK_MSG(rc < 0, "accepted '%s'", bad[i]);
        CHECK_MSG(err[0] != 0, "no message for '%s'", bad[i]);
    }
}

static void tactic_should_round_trip_canonically(void)
{
    const char *canon[] = {"folded/acc=f32/pad=8", "fused/pad=1/tile=64x64",
                           "fused_splitkv/pad=1/splits=16/tile=64x64/warps=4",
                           "split/acc=f16/pad=64", "split_repeat/acc=f32/pad=16",
                           "fused/arch=sm90a/pad=8/stages=2/tile=128x128/warps=12",
                           "fused/arch=sm90a/fold=1/pad=1/splits=8/stages=2/tile=128x128/warps=12",
                           "fused/arch=sm90a/fold=1/pad=1/persist=1/stages=2/tile=128x128/warps=12",
                           "fused/acc=f32/pad=1/tile=64x64/warps=4"};
    for (size_t i = 0; i < sizeof canon / sizeof canon[0]; i++) {
        attn_tactic t;
        char buf[ATTN_TACTIC_STR_MAX];
        CHECK_EQ_INT(attn_tactic_parse(canon[i], &t, NULL, 0), 0);
        CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), canon[i]);
    }
    /* keys out of order parse to the same tactic, printed sorted */
    attn_tactic t;
    char buf[ATTN_TACTIC_STR_MAX];
    CHECK_EQ_INT(attn_tactic_parse("folded/pad=8/acc=f32", &t, NULL, 0), 0);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "folded/acc=f32/pad=8");
    /* acc on fused (the FP32 kernel's key) sorts first there too */
    CHECK_EQ_INT(attn_tactic_parse("fused/warps=4/tile=32x64/pad=1/acc=f32", &t, NULL, 0), 0);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "fused/acc=f32/pad=1/tile=32x64/warps=4");
}

static void tactic_parse_should_reject_bad_text(void)
{
    const char *bad[] = {"", "warp/pad=1", "fused", "fused/pad=3", "fused/pad=8/pad=8",
                         "split/acc=f64/pad=1", "fused/pad=1/tile=64", "fused/pad=1/colour=red",
                         "fused/pad=1/tile=0x64", "fused/pad=-8", "fused/arch=sm80/pad=1",
                         "fused/arch=sm90a/arch=sm90a/pad=1", "fused/pad=1/stages=0",
                         "fused/fold=1/pad=1", "fused/arch=sm90a/fold=2/pad=1", "split/fold=1/pad=1",
                         "fused/pad=1/persist=1", "fused/arch=sm90a/pad=1/persist=2",
                         "fused/arch=sm90a/pad=1/persist=0", "cudnn/eng=1/graph=sdpa/kcfg=0/pad=1/persist=1",
                         "fused/arch=sm90a/pad=1/persist=1/persist=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        attn_tactic t;
        char err[ATTUNE_ERRLEN] = "";
        CHECK_MSG(attn_tactic_parse(bad[i], &t, err, sizeof err) < 0, "accepted '%s'", bad[i]);
    }
}

/* The variant words (common/tactic.h): the built-in ones, one a family
 * registers at run time (attn_family_register calls attn_variant_register),
 * and what is refused: another word for an id, the word of another id,
 * text that is not a word, an id out of range. */
static void variant_words_should_be_one_word_per_id(void)
{
    static const char *const builtin[ATTN_NVARIANTS] = {"fused", "fused_splitkv", "split",
                                                        "split_repeat", "folded", "cudnn"};
    attn_variant got;
    for (int v = 0; v < ATTN_NVARIANTS; v++) {
        CHECK_STR(attn_variant_name((attn_variant)v), builtin[v]);
        CHECK_EQ_INT(attn_variant_parse(builtin[v], &got), 0);
        CHECK_EQ_INT((int)got, v);
    }
    CHECK_STR(attn_variant_names(), "fused, fused_splitkv, split, split_repeat, folded, cudnn");
    const attn_variant toy = (attn_variant)(ATTN_NVARIANTS + 3), other = (attn_variant)(toy + 1);
    attn_tactic t;
    char buf[ATTN_TACTIC_STR_MAX];
    CHECK_STR(attn_variant_name(toy), "?");
    CHECK_EQ_INT(attn_tactic_parse("toy2/pad=8", &t, NULL, 0), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_variant_register(toy, "toy2"), 0);
    CHECK_EQ_INT(attn_variant_register(toy, "toy2"), 0); /* again: the same word */
    CHECK_EQ_INT(attn_variant_parse("toy2", &got), 0);
    CHECK_EQ_INT((int)got, (int)toy);
    CHECK_EQ_INT(attn_tactic_parse("toy2/pad=8", &t, NULL, 0), 0);
    CHECK_STR(attn_tactic_str(&t, buf, sizeof buf), "toy2/pad=8");
    CHECK_STR(attn_variant_names(),
              "fused, fused_splitkv, split, split_repeat, folded, cudnn, toy2");
    CHECK_EQ_INT(attn_variant_register(toy, "toy3"), ATTUNE_EINVAL);   /* another word */
    CHECK_EQ_INT(attn_variant_register(other, "toy2"), ATTUNE_EINVAL); /* toy's word */
    CHECK_EQ_INT(attn_variant_register(other, "fused"), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_variant_register(ATTN_SPLIT, "splat"), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_variant_register(ATTN_SPLIT, "split"), 0);
    const char *notword[] = {"", "Toy", "toy/x", "to y", "toy=1", "a,b", "t\xc3\xb6y",
                             "abcdefghijklmnopqrstuvwxyz012345"}; /* 32 characters */
    for (size_t i = 0; i < sizeof notword / sizeof notword[0]; i++)
        CHECK_MSG(attn_variant_register(other, notword[i]) == ATTUNE_EINVAL, "took '%s'",
                  notword[i]);
    CHECK_EQ_INT(attn_variant_register(other, NULL), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_variant_register((attn_variant)ATTN_MAX_VARIANTS, "toy4"), ATTUNE_EINVAL);
    CHECK_STR(attn_variant_name(other), "?");
    attn_variant_reset();
    CHECK_EQ_INT(attn_variant_parse("toy2", &got), ATTUNE_EINVAL);
    CHECK_EQ_INT(attn_tactic_parse("toy2/pad=8", &t, NULL, 0), ATTUNE_EINVAL);
    CHECK_STR(attn_variant_name(toy), "?");
    CHECK_STR(attn_variant_name(ATTN_CUDNN), "cudnn");
}

static void visible_keys_should_align_bottom_right(void)
{
    attn_shape s = {1, 1, 1, 4, 10, 8, ATTN_F16, 1};
    CHECK_EQ_INT(attn_visible_keys(&s, 0), 7); /* j <= 0 + 6 */
    CHECK_EQ_INT(attn_visible_keys(&s, 3), 10);
    attn_shape t = {1, 1, 1, 10, 4, 8, ATTN_F16, 1};
    CHECK_EQ_INT(attn_visible_keys(&t, 0), 0); /* sq > skv: early rows see nothing */
    CHECK_EQ_INT(attn_visible_keys(&t, 6), 1);
    CHECK_EQ_INT(attn_visible_keys(&t, 9), 4);
    t.causal = 0;
    CHECK_EQ_INT(attn_visible_keys(&t, 0), 4);
}

static void flops_should_count_visible_pairs(void)
{
    attn_shape s = {2, 4, 4, 8, 8, 16, ATTN_F16, 0};
    CHECK_NEAR(attn_shape_flops(&s), 4.0 * 2 * 4 * 8 * 8 * 16, 0);
    s.causal = 1; /* 1+2+...+8 = 36 pairs */
    CHECK_NEAR(attn_shape_flops(&s), 4.0 * 2 * 4 * 36 * 16, 0);
}

static void stack_id_should_depend_on_every_field(void)
{
    attn_stack a = {"580.1", "13.0", "13.0.1", "0.1.0", "abc", "", ""};
    attn_stack b = a;
    attn_stack_finish(&a);
    attn_stack_finish(&b);
    CHECK_STR(a.id, b.id);
    CHECK_EQ_INT(strlen(a.id), 16);
    snprintf(b.driver, sizeof b.driver, "580.2");
    attn_stack_finish(&b);
    CHECK(strcmp(a.id, b.id) != 0);
}

/* The power mode is part of the identity; an unknown one ("") leaves the
 * id as it was computed before power modes existed (the five fields). */
static void stack_id_should_depend_on_power_mode_only_when_known(void)
{
    attn_stack a = {"580.1", "13.0", "13.0.1", "0.1.0", "abc", "", ""};
    attn_stack_finish(&a);
    uint64_t h = hash_fnv1a64_init();
    const char *parts[] = {"580.1", "13.0", "13.0.1", "0.1.0", "abc"};
    for (int i = 0; i < 5; i++)
        h = hash_fnv1a64(h, parts[i], strlen(parts[i]) + 1);
    char old[24];
    snprintf(old, sizeof old, "%016llx", (unsigned long long)h);
    CHECK_STR(a.id, old);
    attn_stack maxn = a, w15 = a;
    snprintf(maxn.power, sizeof maxn.power, "nvpmodel-0-MAXN");
    snprintf(w15.power, sizeof w15.power, "nvpmodel-1-15W");
    attn_stack_finish(&maxn);
    attn_stack_finish(&w15);
    CHECK(strcmp(maxn.id, a.id) != 0);
    CHECK(strcmp(maxn.id, w15.id) != 0);
}

static void device_ordinal_should_read_digits_only(void)
{
    CHECK_EQ_INT(attn_device_ordinal("0"), 0);
    CHECK_EQ_INT(attn_device_ordinal("7"), 7);
    CHECK_EQ_INT(attn_device_ordinal("999999"), 999999);
    CHECK_EQ_INT(attn_device_ordinal("4294967296"), -2); /* would wrap to 0 in int */
    CHECK_EQ_INT(attn_device_ordinal(""), -1);
    CHECK_EQ_INT(attn_device_ordinal("cpu"), -1);
    CHECK_EQ_INT(attn_device_ordinal("-1"), -1);
    CHECK_EQ_INT(attn_device_ordinal("GPU-0"), -1);
}

static attn_device_info device(const char *kind, int index, const char *id, const char *name)
{
    attn_device_info d;
    memset(&d, 0, sizeof d);
    snprintf(d.kind, sizeof d.kind, "%s", kind);
    snprintf(d.id, sizeof d.id, "%s", id);
    snprintf(d.name, sizeof d.name, "%s", name);
    d.index = index;
    return d;
}

static void device_match_should_follow_the_spec_rules(void)
{
    attn_device_info cpu = device("cpu", -1, "CPU-924137ba40e768d8", "AMD EPYC");
    attn_device_info gpu = device("cuda", 1, "GPU-aaaa-1111", "NVIDIA H200");
    /* cpu and ordinals: local devices only, by kind and index */
    CHECK_EQ_INT(attn_device_match("cpu", &cpu, 1), ATTN_MATCH_EXACT);
    CHECK_EQ_INT(attn_device_match("CPU", &cpu, 1), ATTN_MATCH_EXACT);
    CHECK_EQ_INT(attn_device_match("cpu", &cpu, 0), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("cpu", &gpu, 1), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("1", &gpu, 1), ATTN_MATCH_EXACT);
    CHECK_EQ_INT(attn_device_match("0", &gpu, 1), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("1", &gpu, 0), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("-1", &cpu, 1), ATTN_MATCH_NONE);
    /* ids exactly, byte for byte; names in any case */
    CHECK_EQ_INT(attn_device_match("GPU-aaaa-1111", &gpu, 0), ATTN_MATCH_EXACT);
    CHECK_EQ_INT(attn_device_match("GPU-AAAA-1111", &gpu, 0), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("CPU-924137ba40e768d8", &cpu, 1), ATTN_MATCH_EXACT);
    CHECK_EQ_INT(attn_device_match("nvidia h200", &gpu, 0), ATTN_MATCH_NAME);
    CHECK_EQ_INT(attn_device_match("NVIDIA H200", &gpu, 1), ATTN_MATCH_NAME);
    CHECK_EQ_INT(attn_device_match("NVIDIA H20", &gpu, 1), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match("", &gpu, 1), ATTN_MATCH_NONE);
    CHECK_EQ_INT(attn_device_match(NULL, &gpu, 1), ATTN_MATCH_NONE);
    /* a name that is another device's id: the id is the exact match */
    attn_device_info odd = device("cuda", 2, "GPU-bbbb", "GPU-aaaa-1111");
    CHECK_EQ_INT(attn_device_match("GPU-aaaa-1111", &odd, 0), ATTN_MATCH_NAME);
}

static void device_resolve_should_find_the_cpu(void)
{
    attn_device d;
    char err[ATTUNE_ERRLEN];
    CHECK_EQ_INT(attn_device_resolve("cpu", &d, err, sizeof err), 0);
    CHECK(strcmp(d.info.kind, "cpu") == 0);
    attn_device byid;
    CHECK_EQ_INT(attn_device_resolve(d.info.id, &byid, err, sizeof err), 0);
    CHECK(strcmp(byid.info.id, d.info.id) == 0);
    CHECK_EQ_INT(attn_device_resolve("no such device", &d, err, sizeof err), ATTUNE_ENODEV);
    CHECK(strstr(err, "unknown device") != NULL);
    CHECK_EQ_INT(attn_device_resolve("4294967296", &d, err, sizeof err), ATTUNE_ENODEV);
    CHECK(strstr(err, "ordinal") != NULL);
}

int main(void)
{
    RUN(shape_key_should_round_trip);
    RUN(shape_parse_should_reject_bad_keys);
    RUN(tactic_should_round_trip_canonically);
    RUN(tactic_parse_should_reject_bad_text);
    RUN(variant_words_should_be_one_word_per_id);
    RUN(visible_keys_should_align_bottom_right);
    RUN(flops_should_count_visible_pairs);
    RUN(stack_id_should_depend_on_every_field);
    RUN(stack_id_should_depend_on_power_mode_only_when_known);
    RUN(device_ordinal_should_read_digits_only);
    RUN(device_match_should_follow_the_spec_rules);
    RUN(device_resolve_should_find_the_cpu);
    return test_summary();
}
