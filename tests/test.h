/* test.h -- the tiny test harness every tests/test_<module>.c uses.
 *
 *   static void parse_should_reject_zero(void) { CHECK(x == 1); CHECK_NEAR(a, b, 1e-6); }
 *   int main(void) { RUN(parse_should_reject_zero); return test_summary(); }
 *
 * A failed CHECK prints file:line and the expression, and marks the test
 * failed; the test function goes on (so one run shows every failure).
 * TEST_SKIP_CODE (77) is what GPU tests return when no GPU is present;
 * ctest maps it to "skipped" through SKIP_RETURN_CODE. */
#ifndef ATTUNE_TEST_H
#define ATTUNE_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_SKIP_CODE 77

static int test_failures_ __attribute__((unused));
static int test_checks_ __attribute__((unused));
static const char *test_current_ __attribute__((unused));

#define CHECK(expr)                                                          \
    do {                                                                     \
        test_checks_++;                                                      \
        if (!(expr)) {                                                       \
            test_failures_++;                                                \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__,       \
                    __LINE__, test_current_, #expr);                         \
        }                                                                    \
    } while (0)

#define CHECK_MSG(expr, ...)                                                 \
    do {                                                                     \
        test_checks_++;                                                      \
        if (!(expr)) {                                                       \
            test_failures_++;                                                \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed: ", __FILE__,       \
                    __LINE__, test_current_, #expr);                         \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                   \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld",              \
              (long long)(a), (long long)(b))

#define CHECK_STR(a, b)                                                      \
    CHECK_MSG(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

#define CHECK_NEAR(a, b, tol)                                                \
    CHECK_MSG(fabs((double)(a) - (double)(b)) <= (tol), "%.9g vs %.9g (tol %g)", \
              (double)(a), (double)(b), (double)(tol))

#define RUN(fn)                                                              \
    do {                                                                     \
        int before_ = test_failures_;                                        \
        test_current_ = #fn;                                                 \
        fn();                                                                \
        fprintf(stderr, "%s %s\n", test_failures_ == before_ ? "ok  " : "FAIL", #fn); \
    } while (0)

static inline int test_summary(void)
{
    fprintf(stderr, "%d checks, %d failed\n", test_checks_, test_failures_);
    return test_failures_ ? 1 : 0;
}

/* A fresh temporary directory (mkdtemp), path in buf. Exits on failure:
 * tests may exit. */
#include <unistd.h>
static inline void test_tmpdir(char *buf, size_t len)
{
    const char *base = getenv("TMPDIR");
    snprintf(buf, len, "%s/attune-test-XXXXXX", base ? base : "/tmp");
    if (mkdtemp(buf) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
}

#endif
