/* fuzz.h -- what every libFuzzer harness of fuzz/ shares: the input as a
 * NUL-terminated string, and a check that aborts (a crash libFuzzer
 * reports with the input) when a property of the parser fails. */
#ifndef ATTUNE_FUZZ_H
#define ATTUNE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, \
                    #cond);                                                     \
            abort();                                                            \
        }                                                                       \
    } while (0)

/* data[0..size) as a malloc'd C string (an embedded NUL ends it early, as
 * it would for any C caller). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

#endif
