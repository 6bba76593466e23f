/* store_check.c -- field checks shared by the tuner's writes and imports: whatever
 * the store accepts from the tuner it also accepts back from its own export. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "store_internal.h"

/* ---- field checks */

/* s is shorter than max bytes and made of [A-Za-z0-9._-], plus ':' when
 * colon (ids: "GPU-<uuid>" has none, fleet ids may); an empty s is
 * refused when nonempty. */
static int check_chars(const char *s, size_t max, int colon, int nonempty, const char *field,
                       char *err, size_t errlen)
{
    size_t n = strnlen(s, max);
    if (n == 0 && nonempty)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is empty", field);
    if (n >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is longer than %zu bytes", field,
                           max - 1);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || (colon && c == ':')))
            return attune_fail(err, errlen, ATTUNE_EINVAL,
                               "%s contains a character other than A-Z a-z 0-9 . _ %s-", field,
                               colon ? ": " : "");
    }
    return 0;
}

int store_check_id(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    return check_chars(s, max, 1, 1, field, err, errlen);
}

int store_check_hex16(const char *s, const char *field, char *err, size_t errlen)
{
    size_t n = strnlen(s, 17);
    int ok = n == 16;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f');
    return ok ? 0
              : attune_fail(err, errlen, ATTUNE_EINVAL,
                            "%s must be 16 lowercase hex digits", field);
}

/* 1 if s is well-formed UTF-8 (no overlong forms, surrogates or code
 * points past U+10FFFF) without control characters (C0, DEL, C1): text we
 * store may end up on a terminal. */
static int text_ok(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f)
                return 0;
            s++;
            continue;
        }
        int len;
        unsigned cp, min;
        if ((c & 0xe0) == 0xc0) {
            len = 2, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3, cp = c & 0x0f, min = 0x800;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4, cp = c & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        for (int i = 1; i < len; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ||
            (cp >= 0x80 && cp <= 0x9f))
            return 0;
        s += len;
    }
    return 1;
}

int store_check_text(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    if (strnlen(s, max) >= max)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s is longer than %zu bytes", field,
                           max - 1);
    if (!text_ok((const unsigned char *)s))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "%s is not UTF-8 text without control characters", field);
    return 0;
}

int store_check_word(const char *s, size_t max, const char *field, char *err, size_t errlen)
{
    return check_chars(s, max, 0, 0, field, err, errlen);
}

static int check_range(int64_t v, int64_t lo, int64_t hi, const char *field, char *err,
                       size_t errlen)
{
    if (v < lo || v > hi)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%lld is outside [%lld, %lld]",
                           field, (long long)v, (long long)lo, (long long)hi);
    return 0;
}

int store_check_device(const attn_device_info *d, char *err, size_t errlen)
{
    int rc;
    if ((rc = store_check_id(d->id, sizeof d->id, "device id", err, errlen)) != 0 ||
        (rc = store_check_text(d->name, sizeof d->name, "device name", err, errlen)) != 0)
        return rc;
    if (strcmp(d->kind, "cpu") != 0 && strcmp(d->kind, "cuda") != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "device kind must be cpu or cuda");
    if ((rc = check_range(d->index, -1, 4095, "device index", err, errlen)) != 0 ||
        (rc = check_range(d->cc_major, 0, 99, "cc major", err, errlen)) != 0 ||
        (rc = check_range(d->cc_minor, 0, 99, "cc minor", err, errlen)) != 0 ||
        (rc = check_range(d->sm_count, 0, STORE_MAX_COUNT, "sm_count", err, errlen)) != 0 ||
        (rc = check_range(d->memory_mb, 0, STORE_MAX_MEMORY_MB, "memory_mb", err, errlen)) != 0 ||
        (rc = check_range(d->clock_mhz, 0, STORE_MAX_COUNT, "clock_mhz", err, errlen)) != 0 ||
        (rc = check_range(d->mem_clock_mhz, 0, STORE_MAX_COUNT, "mem_clock_mhz", err, errlen)) != 0)
        return rc;
    return 0;
}

int store_check_stack(const attn_stack *s, char *err, size_t errlen)
{
    int rc;
    if ((rc = store_check_text(s->driver, sizeof s->driver, "stack driver", err, errlen)) != 0 ||
        (rc = store_check_text(s->runtime, sizeof s->runtime, "stack runtime", err, errlen)) != 0 ||
        (rc = store_check_text(s->blas, sizeof s->blas, "stack blas", err, errlen)) != 0 ||
        (rc = store_check_text(s->attune, sizeof s->attune, "stack attune", err, errlen)) != 0 ||
        (rc = store_check_text(s->kernels, sizeof s->kernels, "stack kernels", err, errlen)) != 0 ||
        (rc = store_check_word(s->power, sizeof s->power, "stack power", err, errlen)) != 0 ||
        (rc = store_check_hex16(s->id, "stack id", err, errlen)) != 0)
        return rc;
    attn_stack want = *s;
    attn_stack_finish(&want);
    if (strcmp(want.id, s->id) != 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "stack id %s does not match its fields (expected %s)", s->id,
                           want.id);
    return 0;
}

/* A time in microseconds: NaN (not measured) or finite in [0, max]. */
static int check_time(double v, const char *field, char *err, size_t errlen)
{
    if (isnan(v))
        return 0;
    if (!isfinite(v) || v < 0 || v > STORE_MAX_TIME_US)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "%s=%g is outside [0, %g]", field, v,
                           STORE_MAX_TIME_US);
    return 0;
}

/* An error statistic: NaN (not checked) or finite and >= 0. */
static int check_error(double v, const char *field, char *err, size_t errlen)
{
    if (isnan(v))
        return 0;
    if (!isfinite(v) || v < 0)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "%s=%g must be a finite number >= 0 (or null)", field, v);
    return 0;
}

int store_check_not_future(int64_t t, const char *field, char *err, size_t errlen)
{
    int64_t now = store_now();
    if (t > now + STORE_FUTURE_SLACK_S)
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "%s=%lld is more than %d s after this host's clock (%lld): the "
                           "clock that wrote it (or this one) is set wrong",
                           field, (long long)t, STORE_FUTURE_SLACK_S, (long long)now);
    return 0;
}

int store_check_measurement(const store_measurement *m, char *canon, char *err,
                            size_t errlen)
{
    int rc;
    attn_tactic t;
    if ((rc = store_check_id(m->device_id, sizeof m->device_id, "device id", err, errlen)) != 0 ||
        (rc = store_check_hex16(m->stack_id, "stack id", err, errlen)) != 0)
        return rc;
    if ((rc = attn_shape_validate(&m->shape, err, errlen)) != 0)
        return rc;
    if (strnlen(m->tactic, sizeof m->tactic) >= sizeof m->tactic)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "tactic is too long");
    if ((rc = attn_tactic_parse(m->tactic, &t, err, errlen)) != 0)
        return rc;
    attn_tactic_str(&t, canon, ATTN_TACTIC_STR_MAX);
    if ((unsigned)m->status > STORE_INACCURATE)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "unknown status %d", (int)m->status);
    if ((rc = check_time(m->time_us, "time_us", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_min, "time_us_min", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_max, "time_us_max", err, errlen)) != 0 ||
        (rc = check_time(m->time_us_copies, "time_us_copies", err, errlen)) != 0)
        return rc;
    /* An ok measurement was checked and timed: it has both numbers. */
    if (m->status == STORE_OK && (!isfinite(m->time_us) || !isfinite(m->rel_err)))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "status ok needs a time_us and a rel_err (got %g, %g)", m->time_us,
                           m->rel_err);
    /* The median lies between min and max of the same samples. */
    if (!isnan(m->time_us) && !isnan(m->time_us_min) && !isnan(m->time_us_max) &&
        !(m->time_us_min <= m->time_us && m->time_us <= m->time_us_max))
        return attune_fail(err, errlen, ATTUNE_EINVAL,
                           "time_us_min <= time_us <= time_us_max does not hold (%g, %g, %g)",
                           m->time_us_min, m->time_us, m->time_us_max);
    if ((rc = check_range(m->n, 0, STORE_MAX_N, "n", err, errlen)) != 0 ||
        (rc = check_error(m->max_abs_err, "max_abs_err", err, errlen)) != 0 ||
        (rc = check_error(m->rel_err, "rel_err", err, errlen)) != 0 ||
        (rc = check_error(m->src_rel_err, "src_rel_err", err, errlen)) != 0 ||
        (rc = store_check_word(m->mode, sizeof m->mode, "mode", err, errlen)) != 0 ||
        (rc = store_check_word(m->l2, sizeof m->l2, "l2", err, errlen)) != 0 ||
        (rc = check_range(m->rows_checked, 0, INT_MAX, "rows_checked", err, errlen)) != 0 ||
        (rc = store_check_text(m->note, sizeof m->note, "note", err, errlen)) != 0 ||
        (rc = store_check_text(m->host, sizeof m->host, "host", err, errlen)) != 0 ||
        (rc = check_range(m->taken_at, 0, STORE_MAX_TAKEN_AT, "taken_at", err, errlen)) != 0)
        return rc;
    return 0;
}
