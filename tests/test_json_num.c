/* test_json_num.c -- common/json_num: shortest numbers that read back. */
#include <float.h>
#include <math.h>
#include <stdint.h>

#include "../common/json_num.h"
#include "test.h"

/* Doubles where fixed precisions go wrong: 0.1 and 0.3 need 17 digits at
 * %.17g but one at %.15g; 0.1 + 0.2 and 1/3 need 16/17; the extremes and
 * subnormals need the exponent; 2^53 + 2 is an even integer past 2^53. */
static const double tricky[] = {
    0.1, 0.2, 0.3, 0.1 + 0.2, 1.0 / 3.0, 2.0 / 3.0, 1.0, 2.0, 100.0, 1e21, 1e22, 1e23,
    123.456, 1067.0000000000002, 9007199254740994.0, 9007199254740993.0, 4503599627370497.5,
    DBL_MAX, -DBL_MAX, DBL_MIN, 4.9406564584124654e-324, 2.2250738585072009e-308,
    DBL_EPSILON, 1.0 + DBL_EPSILON, 1.0 - DBL_EPSILON / 2, -0.0, 0.0, 5e-7, 1e-5,
    0.000123456789012345678, 299792458.0, 3.141592653589793, 2.718281828459045,
    1.7976931348623157e308, 0.30000000000000004, 1e-300 * 1e-10,
};
#define NTRICKY (sizeof tricky / sizeof tricky[0])

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void format_should_read_back_exactly(void)
{
    for (size_t i = 0; i < NTRICKY; i++) {
        char buf[JSON_NUM_MAX], wide[40];
        int n = json_num_format(tricky[i], buf);
        CHECK_EQ_INT(n, (int)strlen(buf));
        double back = strtod(buf, NULL);
        CHECK_MSG(same_bits(back, tricky[i]), "%s read back as %.17g, wrote %.17g", buf,
                  back, tricky[i]);
        /* never longer than 17 digits would be, plus the ".0" of a real */
        int w = snprintf(wide, sizeof wide, "%.17g", tricky[i]);
        CHECK_MSG(n <= w + 2, "%s longer than %s", buf, wide);
        CHECK_MSG(strpbrk(buf, ".e") != NULL, "%s would read back as an integer", buf);
    }
}

static void format_should_be_short_for_short_decimals(void)
{
    char buf[JSON_NUM_MAX];
    json_num_format(0.1, buf);
    CHECK_STR(buf, "0.1");
    json_num_format(0.3, buf);
    CHECK_STR(buf, "0.3");
    json_num_format(123.456, buf);
    CHECK_STR(buf, "123.456");
    json_num_format(2.0, buf);
    CHECK_STR(buf, "2.0");
    json_num_format(-0.0, buf);
    CHECK_STR(buf, "-0.0");
    json_num_format(1e300, buf);
    CHECK_STR(buf, "1e+300");
    /* needs all 17: 0.1 + 0.2 is not 0.3 */
    json_num_format(0.1 + 0.2, buf);
    CHECK_STR(buf, "0.30000000000000004");
    json_num_shortest(5.0, buf);
    CHECK_STR(buf, "5");
}

static void format_should_write_null_for_non_finite(void)
{
    char buf[JSON_NUM_MAX];
    CHECK_EQ_INT(json_num_format(NAN, buf), 4);
    CHECK_STR(buf, "null");
    json_num_format(INFINITY, buf);
    CHECK_STR(buf, "null");
    json_num_format(-INFINITY, buf);
    CHECK_STR(buf, "null");
    json_t *j = json_num(INFINITY);
    CHECK(json_is_null(j));
    json_decref(j);
    j = json_num(NAN);
    CHECK(json_is_null(j));
    json_decref(j);
    j = json_num(0.25);
    CHECK(json_is_real(j) && json_real_value(j) == 0.25);
    json_decref(j);
}

static void dumps_should_shorten_reals_only(void)
{
    json_t *o = json_pack("{s:f,s:f,s:I,s:s,s:[f,f,n],s:f}", "a", 0.1, "b\"1.10000000000000001",
                          0.1 + 0.2, "big", (json_int_t)INT64_MAX, "s",
                          "0.10000000000000001 \\\" 2.5", "arr", 1e23, -2.0, "x", 7.0);
    CHECK(o != NULL);
    char *t = json_num_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(17));
    CHECK(t != NULL);
    if (t != NULL)
        CHECK_STR(t, "{\"a\":0.1,\"b\\\"1.10000000000000001\":0.30000000000000004,"
                     "\"big\":9223372036854775807,\"s\":\"0.10000000000000001 \\\\\\\" 2.5\","
                     "\"arr\":[1e+23,-2.0,null],\"x\":7.0}");
    /* and every real reads back as the same double */
    json_error_t e;
    json_t *back = t != NULL ? json_loads(t, 0, &e) : NULL;
    CHECK(back != NULL && json_equal(back, o));
    json_decref(back);
    free(t);
    json_decref(o);
}

static void dumps_should_read_back_every_tricky_value(void)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < NTRICKY; i++)
        json_array_append_new(arr, json_num(tricky[i]));
    char *t = json_num_dumps(arr, JSON_INDENT(2));
    CHECK(t != NULL);
    json_error_t e;
    json_t *back = t != NULL ? json_loads(t, 0, &e) : NULL;
    CHECK(back != NULL && json_array_size(back) == NTRICKY);
    for (size_t i = 0; back != NULL && i < NTRICKY; i++) {
        json_t *v = json_array_get(back, i);
        CHECK_MSG(json_is_real(v) && same_bits(json_real_value(v), tricky[i]),
                  "element %zu: %.17g", i, tricky[i]);
    }
    json_decref(back);
    free(t);
    json_decref(arr);
}

/* The per-thread cache of shortest forms (issue 29 item 6) answers with
 * the text of exactly the same bits: 4096 values (16 per cache slot, so
 * every slot is overwritten many times) written twice, in two orders, read
 * back the same and exactly; 0.0 and -0.0 (bits differ) stay apart. */
static void shortest_should_not_change_when_cached(void)
{
    enum { N = 4096 };
    static char first[N][JSON_NUM_MAX];
    double v[N];
    for (int i = 0; i < N; i++)
        v[i] = (i + 1) * 0.1 + i * 1e-9;
    for (int i = 0; i < N; i++)
        json_num_shortest(v[i], first[i]);
    for (int i = N - 1; i >= 0; i--) {
        char again[JSON_NUM_MAX];
        json_num_shortest(v[i], again);
        CHECK_MSG(strcmp(again, first[i]) == 0, "%s then %s", first[i], again);
        CHECK(strtod(again, NULL) == v[i]);
    }
    char a[JSON_NUM_MAX], b[JSON_NUM_MAX];
    json_num_shortest(0.0, a);
    json_num_shortest(-0.0, b);
    CHECK_MSG(strcmp(a, "0") == 0 && strcmp(b, "-0") == 0, "%s %s", a, b);
    json_num_shortest(-0.0, b);
    json_num_shortest(0.0, a);
    CHECK_MSG(strcmp(a, "0") == 0 && strcmp(b, "-0") == 0, "%s %s", a, b);
}

int main(void)
{
    RUN(format_should_read_back_exactly);
    RUN(format_should_be_short_for_short_decimals);
    RUN(format_should_write_null_for_non_finite);
    RUN(dumps_should_shorten_reals_only);
    RUN(dumps_should_read_back_every_tricky_value);
    RUN(shortest_should_not_change_when_cached);
    return test_summary();
}
