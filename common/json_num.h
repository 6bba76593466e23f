/* json_num.h -- numbers in JSON: the one way attune writes a double.
 *
 * A finite double is written in the shortest of %.15g, %.16g and %.17g
 * that strtod reads back to the same double (0.1, not 0.10000000000000001);
 * a real keeps a fraction or exponent so it reads back as a real (2 ->
 * 2.0). NaN and the infinities are not JSON numbers: they are written as
 * null, never as Infinity. jansson prints reals at one fixed precision, so
 * json_num_dumps rewrites each real of its text to the shortest form. */
#ifndef ATTUNE_JSON_NUM_H
#define ATTUNE_JSON_NUM_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* Enough for "-2.2250738585072014e-308" and its terminator. */
#define JSON_NUM_MAX 32

/* Shortest digits of finite v that read back exactly ("0.1", "2", "1e+300"),
 * into buf[JSON_NUM_MAX]; returns the length. v must be finite. Also for
 * text formats that are not JSON (PostgreSQL COPY). */
int json_num_shortest(double v, char buf[JSON_NUM_MAX]);

/* v as a JSON value: "null" when not finite, else the shortest digits with
 * ".0" added when they would read back as an integer. Returns the length. */
int json_num_format(double v, char buf[JSON_NUM_MAX]);

/* v as a jansson value: a real, or null when v is not finite. NULL on
 * ENOMEM (as jansson's constructors). */
json_t *json_num(double v);

/* json_dumps(j, flags) with every real written by json_num_format. Returns
 * a malloc'd string (caller frees) or NULL on ENOMEM / a value jansson
 * cannot dump. JSON_REAL_PRECISION in flags is ignored. */
char *json_num_dumps(const json_t *j, size_t flags);

/* json_num_dumps to f. 0 or -1 (as json_dumpf). */
int json_num_dumpf(const json_t *j, FILE *f, size_t flags);

#endif
