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

/* name, code, description, HTTP status: the one place where attuned maps
 * an error to a status (attune_http_status; daemon/http.h http_fail). */
#define ATTUNE_ERRNO_MAP(X)                                          \
    X(EINVAL,    -1,  "invalid argument",                 400)       \
    X(ENOMEM,    -2,  "out of memory",                    500)       \
    X(ENODEV,    -3,  "no such device",                   404)       \
    X(EUNSUPP,   -4,  "not supported for this shape",     400)       \
    X(EIO,       -5,  "I/O error",                        500)       \
    X(EDB,       -6,  "database error",                   500)       \
    X(EFORMAT,   -7,  "malformed input",                  400)       \
    X(ECANCELED, -8,  "canceled",                         409)       \
    X(EGPU,      -9,  "GPU runtime error",                500)       \
    X(EBLAS,     -10, "BLAS library error",               500)       \
    X(ENOTFOUND, -11, "not found",                        404)       \
    X(EBUSY,     -12, "busy",                             503)       \
    X(ERANGE,    -13, "value out of range",               400)       \
    X(EVERSION,  -14, "unsupported version",              400)       \
    X(ETOOBIG,   -15, "too large",                        413)       \
    X(EEXIST,    -16, "already exists",                   409)       \
    X(ESTATE,    -17, "not possible in the current state", 409)      \
    X(EGPULOST,  -18, "GPU context lost (a kernel faulted)", 503)

typedef enum {
#define ATTUNE_ERR_ENUM(name, code, msg, http) ATTUNE_##name = (code),
    ATTUNE_ERRNO_MAP(ATTUNE_ERR_ENUM)
#undef ATTUNE_ERR_ENUM
} attune_errno;

/* Length of the detail message buffers that functions fill on error. */
#define ATTUNE_ERRLEN 256

/* Fixed description of code; "unknown error" for codes not in the map,
 * "success" for 0. Never NULL. */
const char *attune_strerror(int code);

/* The HTTP status that answers code (the map's last column): 4xx for the
 * caller's errors, 5xx for the server's; 500 for codes not in the map. */
int attune_http_status(int code);

/* snprintf into err (if err != NULL and errlen > 0), then return code.
 * Lets a failing function say `return attune_fail(err, errlen, ATTUNE_EINVAL,
 * "hq=%d is not a multiple of hkv=%d", hq, hkv);` in one line. */
int attune_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __cplusplus
}
#endif

#endif
