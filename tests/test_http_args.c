/* test_http_args.c -- the daemon's strict request arguments (daemon/http.c):
 * allowed/repeated/empty parameters, integers, shapes given as a key or as
 * fields, max_rel_err and the other plain numbers, JSON Content-Type and
 * nesting depth. The query string itself is split by libmicrohttpd; these
 * are the checks on what it hands over. */
#include "daemon/http.h"
#include "test.h"

/* Arguments as libmicrohttpd hands them: pairs, NULL value for "?key". */
static http_args args(int n, const char *const *kv)
{
    http_args a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < n; i++) {
        a.key[i] = kv[2 * i];
        a.val[i] = kv[2 * i + 1];
    }
    a.n = n;
    return a;
}

static const char *const shape_args[] = {"device", "shape", "b", "hq", "hkv", "sq", "skv",
                                         "d", "dtype", "causal", "max_rel_err", NULL};

static void args_check_should_refuse_unknown_repeated_and_empty(void)
{
    char err[ATTUNE_ERRLEN];
    const char *ok[] = {"device", "cpu", "shape", "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc"};
    http_args a = args(2, ok);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), 0);
    CHECK_STR(http_arg(&a, "device"), "cpu");
    CHECK(http_arg(&a, "b") == NULL);
    const char *unknown[] = {"device", "cpu", "devise", "x"};
    a = args(2, unknown);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "unknown parameter 'devise'") != NULL, "%s", err);
    const char *twice[] = {"device", "cpu", "device", "0"};
    a = args(2, twice);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "repeated") != NULL, "%s", err);
    const char *empty[] = {"device", ""};
    a = args(1, empty);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
    const char *novalue[] = {"device", NULL};
    a = args(1, novalue);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
    const char *ctrl[] = {"dev\001ce", "x"};
    a = args(1, ctrl);
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strchr(err, '\x01') == NULL, "control byte echoed: %s", err);
    a = args(0, NULL);
    a.overflow = 1;
    CHECK_EQ_INT(http_args_check(&a, shape_args, err, sizeof err), ATTUNE_EINVAL);
}

static void arg_int_should_take_plain_decimals_in_range(void)
{
    char err[ATTUNE_ERRLEN];
    int64_t v = 0;
    const char *kv[] = {"n", "42", "neg", "-3", "x", "4x2", "big", "99999999999999999999",
                        "sp", " 1", "plus", "+1", "hex", "0x10", "zero", "0", "lz", "01",
                        "lzz", "007", "negz", "-01"};
    http_args a = args(11, kv);
    CHECK_EQ_INT(http_arg_int(&a, "n", 1, 100, &v, err, sizeof err), 0);
    CHECK_EQ_INT(v, 42);
    CHECK_EQ_INT(http_arg_int(&a, "zero", 0, 100, &v, err, sizeof err), 0);
    CHECK_EQ_INT(v, 0);
    /* one spelling per number, as shape keys: b=01 as b01 (issue 29 item 9) */
    CHECK_EQ_INT(http_arg_int(&a, "lz", 0, 100, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "leading zero") != NULL, "%s", err);
    CHECK_EQ_INT(http_arg_int(&a, "lzz", 0, 100, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_EQ_INT(http_arg_int(&a, "negz", -100, 100, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_EQ_INT(http_arg_int(&a, "n", 1, 41, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "too large") != NULL, "%s", err);
    CHECK_EQ_INT(http_arg_int(&a, "neg", 1, 100, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "too small") != NULL, "%s", err);
    CHECK_EQ_INT(http_arg_int(&a, "big", 1, INT64_MAX, &v, err, sizeof err), ATTUNE_EINVAL);
    for (const char *k = "x"; k != NULL; k = strcmp(k, "x") == 0    ? "sp"
                                             : strcmp(k, "sp") == 0 ? "plus"
                                             : strcmp(k, "plus") == 0 ? "hex"
                                                                      : NULL)
        CHECK_MSG(http_arg_int(&a, k, 0, 100, &v, err, sizeof err) == ATTUNE_EINVAL, "%s", k);
    CHECK_EQ_INT(http_arg_int(&a, "missing", 0, 1, &v, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "missing parameter 'missing'") != NULL, "%s", err);
}

static void args_shape_should_take_a_key_or_every_field(void)
{
    char err[ATTUNE_ERRLEN];
    attn_shape s;
    const char *by_key[] = {"shape", "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc"};
    http_args a = args(1, by_key);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), 0);
    CHECK(s.b == 1 && s.hq == 8 && s.hkv == 1 && s.sq == 50 && s.skv == 1018 && s.d == 256 &&
          s.dtype == ATTN_F16 && s.causal == 0);
    const char *fields[] = {"b", "2", "hq", "8", "hkv", "2", "sq", "1", "skv", "4096",
                            "d", "128", "dtype", "bf16", "causal", "true"};
    a = args(8, fields);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), 0);
    CHECK(s.b == 2 && s.hkv == 2 && s.skv == 4096 && s.dtype == ATTN_BF16 && s.causal == 1);
    char key[ATTN_SHAPE_KEY_MAX];
    CHECK_STR(attn_shape_key(&s, key, sizeof key), "b2.hq8.hkv2.sq1.skv4096.d128.bf16.c");

    static const char *const bad_keys[] = {
        "b01.hq08.hkv1.sq50.skv1018.d256.f16.nc", /* not canonical */
        "b1.hq8.hkv3.sq50.skv1018.d256.f16.nc",   /* hq % hkv != 0 */
        "b1.hq8.hkv1.sq50.skv1018.d256.f8.nc",    /* dtype */
        "b1.hq8.hkv1.sq50.skv1018.d256.f16",      /* causal missing */
        "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc.x", "", "b0.hq8.hkv1.sq50.skv1018.d256.f16.nc"};
    for (size_t i = 0; i < sizeof bad_keys / sizeof bad_keys[0]; i++) {
        const char *kv[] = {"shape", bad_keys[i]};
        a = args(1, kv);
        CHECK_MSG(http_args_shape(&a, &s, err, sizeof err) == ATTUNE_EINVAL, "'%s' accepted",
                  bad_keys[i]);
    }
    const char *both[] = {"shape", "b1.hq8.hkv1.sq50.skv1018.d256.f16.nc", "b", "1"};
    a = args(2, both);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "not both") != NULL, "%s", err);
    const char *no_dtype[] = {"b", "1", "hq", "8", "hkv", "1", "sq", "1", "skv", "8",
                              "d", "64", "causal", "0"};
    a = args(7, no_dtype);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "dtype") != NULL, "%s", err);
    const char *bad_causal[] = {"b", "1", "hq", "8", "hkv", "1", "sq", "1", "skv", "8",
                                "d", "64", "dtype", "f16", "causal", "yes"};
    a = args(8, bad_causal);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), ATTUNE_EINVAL);
    const char *zero[] = {"b", "0", "hq", "8", "hkv", "1", "sq", "1", "skv", "8",
                          "d", "64", "dtype", "f16", "causal", "0"};
    a = args(8, zero);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), ATTUNE_EINVAL);
}

/* The cross-dtype question's shape: the fields, dtype as a set, max_err
 * (issue 30 item 3). */
static void args_dims_should_take_the_fields_and_a_set_of_dtypes(void)
{
    char err[ATTUNE_ERRLEN];
    attn_shape s;
    unsigned set = 0;
    double me = -1;
    const char *kv[] = {"b", "1", "hq", "8", "hkv", "1", "sq", "50", "skv", "1018", "d", "256",
                        "dtype", "bf16,e4m3", "causal", "true", "max_err", "0.05"};
    http_args a = args(9, kv);
    CHECK_EQ_INT(http_args_dims(&a, &s, &set, err, sizeof err), 0);
    CHECK_EQ_INT(set, (1u << ATTN_BF16) | (1u << ATTN_E4M3));
    CHECK(s.skv == 1018 && s.d == 256 && s.causal == 1 && s.dtype == ATTN_BF16);
    CHECK_EQ_INT(http_arg_max_err(&a, &me, err, sizeof err), 0);
    CHECK_NEAR(me, 0.05, 0);
    kv[13] = "any";
    a = args(9, kv);
    CHECK_EQ_INT(http_args_dims(&a, &s, &set, err, sizeof err), 0);
    CHECK_EQ_INT(set, (1u << ATTN_NDTYPES) - 1);
    kv[13] = "e4m3"; /* one dtype is a set of one */
    a = args(9, kv);
    CHECK_EQ_INT(http_args_dims(&a, &s, &set, err, sizeof err), 0);
    CHECK_EQ_INT(set, 1u << ATTN_E4M3);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), 0); /* and a plain shape */
    CHECK_EQ_INT(s.dtype, ATTN_E4M3);
    kv[13] = "bf16,f8";
    a = args(9, kv);
    CHECK_EQ_INT(http_args_dims(&a, &s, &set, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "'f8'") != NULL, "%s", err);
    CHECK_EQ_INT(http_args_shape(&a, &s, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "e4m3") != NULL && strstr(err, "max_err") != NULL, "%s", err);
    kv[17] = "0";
    a = args(9, kv);
    CHECK_EQ_INT(http_arg_max_err(&a, &me, err, sizeof err), ATTUNE_EINVAL);
    kv[17] = "1e-3";
    a = args(9, kv);
    CHECK(http_arg_max_err(&a, &me, err, sizeof err) == 0 && me == 1e-3);
    a = args(8, kv); /* no max_err: 0 */
    CHECK(http_arg_max_err(&a, &me, err, sizeof err) == 0 && me == 0);
    const char *key[] = {"shape", "b1.hq8.hkv1.sq50.skv1018.d256.bf16.nc"};
    a = args(1, key);
    CHECK_EQ_INT(http_args_dims(&a, &s, &set, err, sizeof err), ATTUNE_EINVAL);
    CHECK_MSG(strstr(err, "not shape=") != NULL, "%s", err);
}

static void max_rel_err_should_be_a_plain_number_in_0_1(void)
{
    char err[ATTUNE_ERRLEN];
    double v = -1;
    http_args a = args(0, NULL);
    CHECK_EQ_INT(http_arg_max_rel_err(&a, &v, err, sizeof err), 0);
    CHECK(v == 0); /* absent: the policy's bound */
    static const char *const good[] = {"0.01", "1e-3", ".5", "1", "5E-2", "0.000001"};
    static const double want[] = {0.01, 1e-3, 0.5, 1, 5e-2, 1e-6};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const char *kv[] = {"max_rel_err", good[i]};
        a = args(1, kv);
        CHECK_MSG(http_arg_max_rel_err(&a, &v, err, sizeof err) == 0 && v == want[i], "%s",
                  good[i]);
    }
    static const char *const bad[] = {"0",   "1.5", "-0.1", "+0.1", " 0.1", "0.1 ", "0x1p-3",
                                      "inf", "nan", "1e999", "1e",  ".",    "e-3",  "0,1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *kv[] = {"max_rel_err", bad[i]};
        a = args(1, kv);
        CHECK_MSG(http_arg_max_rel_err(&a, &v, err, sizeof err) == ATTUNE_EINVAL,
                  "'%s' accepted", bad[i]);
    }
    CHECK_MSG(strstr(err, "(0, 1]") != NULL, "%s", err);
}

static void content_type_and_depth_should_be_strict(void)
{
    CHECK(http_content_type_json("application/json"));
    CHECK(http_content_type_json("Application/JSON; charset=utf-8"));
    CHECK(!http_content_type_json("application/jsonxyz"));
    CHECK(!http_content_type_json("text/json"));
    CHECK(!http_content_type_json(NULL));
    CHECK(http_json_depth_ok("{\"a\":[1,{\"b\":2}]}", 17, 3));
    CHECK(!http_json_depth_ok("[[[[1]]]]", 9, 3));
    CHECK(http_json_depth_ok("[\"[[[[\\\"[[[\"]", 13, 1)); /* brackets inside a string */
}

/* The error map's HTTP column: the only place a status is chosen for an
 * error (http_fail); an unknown device is a 404, never a 500. */
static void error_map_should_give_each_error_its_status(void)
{
    CHECK_EQ_INT(attune_http_status(ATTUNE_EINVAL), 400);
    CHECK_EQ_INT(attune_http_status(ATTUNE_EFORMAT), 400);
    CHECK_EQ_INT(attune_http_status(ATTUNE_ENODEV), 404);
    CHECK_EQ_INT(attune_http_status(ATTUNE_ENOTFOUND), 404);
    CHECK_EQ_INT(attune_http_status(ATTUNE_ESTATE), 409);
    CHECK_EQ_INT(attune_http_status(ATTUNE_ETOOBIG), 413);
    CHECK_EQ_INT(attune_http_status(ATTUNE_EBUSY), 503);
    CHECK_EQ_INT(attune_http_status(ATTUNE_ENOMEM), 500);
    CHECK_EQ_INT(attune_http_status(ATTUNE_EDB), 500);
    CHECK_EQ_INT(attune_http_status(-999), 500);
    /* every code of the map has a 4xx/5xx status */
    for (int c = -1; strcmp(attune_strerror(c), "unknown error") != 0; c--) {
        int st = attune_http_status(c);
        CHECK_MSG(st >= 400 && st <= 599, "code %d: status %d", c, st);
    }
}

int main(void)
{
    RUN(error_map_should_give_each_error_its_status);
    RUN(args_check_should_refuse_unknown_repeated_and_empty);
    RUN(arg_int_should_take_plain_decimals_in_range);
    RUN(args_shape_should_take_a_key_or_every_field);
    RUN(args_dims_should_take_the_fields_and_a_set_of_dtypes);
    RUN(max_rel_err_should_be_a_plain_number_in_0_1);
    RUN(content_type_and_depth_should_be_strict);
    return test_summary();
}
