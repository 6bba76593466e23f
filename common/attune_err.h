/* attune_err.h -- error codes shared by every attune library module.
 *
 * Library functions return 0 on success or one of the negative codes below
 * (libuv style). attune_strerror() gives a fixed English description; the
 * detail of what exactly was wrong goes into a caller-provided message
 * buffer (char *err, size_t errlen) where a function takes one. */
#ifndef ATTUNE_ERR_H
#define ATTUNE_ERR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTUNE_ERRNO_MAP(X)                                  \
    X(EINVAL,    -1,  "invalid argument")                    \
    X(ENOMEM,    -2,  "out of memory")                       \
    X(ENODEV,    -3,  "no such device")                      \
    X(EUNSUPP,   -4,  "not supported for this shape")        \
    X(EIO,       -5,  "I/O error")                           \
    X(EDB,       -6,  "database error")                      \
    X(EFORMAT,   -7,  "malformed input")                     \
    X(ECANCELED, -8,  "canceled")                            \
    X(EGPU,      -9,  "GPU runtime error")                   \
    X(EBLAS,     -10, "BLAS library error")                  \
    X(ENOTFOUND, -11, "not found")                           \
    X(EBUSY,     -12, "busy")                                \
    X(ERANGE,    -13, "value out of range")                  \
    X(EVERSION,  -14, "unsupported version")                 \
    X(ETOOBIG,   -15, "too large")                           \
    X(EEXIST,    -16, "already exists")

typedef enum {
#define ATTUNE_ERR_ENUM(name, code, msg) ATTUNE_##name = (code),
    ATTUNE_ERRNO_MAP(ATTUNE_ERR_ENUM)
#undef ATTUNE_ERR_ENUM
} attune_errno;

/* Length of the detail message buffers that functions fill on error. */
#define ATTUNE_ERRLEN 256

/* Fixed description of code; "unknown error" for codes not in the map,
 * "success" for 0. Never NULL. */
const char *attune_strerror(int code);

/* snprintf into err (if err != NULL and errlen > 0), then return code.
 * Lets a failing function say `return attune_fail(err, errlen, ATTUNE_EINVAL,
 * "hq=%d is not a multiple of hkv=%d", hq, hkv);` in one line. */
int attune_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif
