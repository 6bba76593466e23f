/* attune_err.c -- error code descriptions and the detail-message helper. */
#include "attune_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *attune_strerror(int code)
{
    if (code == 0)
        return "success";
    switch (code) {
#define ATTUNE_ERR_CASE(name, c, msg, http) case c: return msg;
        ATTUNE_ERRNO_MAP(ATTUNE_ERR_CASE)
#undef ATTUNE_ERR_CASE
    }
    return "unknown error";
}

int attune_http_status(int code)
{
    switch (code) {
#define ATTUNE_ERR_HTTP(name, c, msg, http) case c: return http;
        ATTUNE_ERRNO_MAP(ATTUNE_ERR_HTTP)
#undef ATTUNE_ERR_HTTP
    }
    return 500;
}

int attune_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}
