/* libattune_auto.c -- attune_auto: ask which tactic wins a shape (through
 * libattune_client and its cache), keep one plan per (bucketed shape,
 * stream), run it at the call's lengths. What a runtime calls per layer.
 *
 * Entries are found by a linear scan from the last hit: a model has a few
 * shapes (a prefill, a handful of decode buckets), so the scan is shorter
 * than any hash. One mutex guards the table and is held through a run's
 * host-side enqueue (microseconds): runs through one attune_auto are
 * serialized on the host, which also orders a plan's scratch buffers when
 * two threads share a stream. */
#include "libattune.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../client/attune.h"
#include "../common/attune_err.h"
#include "libattune_priv.h"

#define AUTO_TTL_MEASURED_MS 60000 /* re-ask the client after this long */
#define AUTO_TTL_OTHER_MS 1000     /* predicted/default: the tune may land soon */
#define AUTO_ANYLEN_VARIANTS "fused,fused_splitkv"
#define AUTO_EXACT_CALLS 128 /* a bucket run at one length only this often, */
#define AUTO_EXACT_MS 1000   /* or for this long, plans that length exactly */
#define AUTO_VIEWS_TRIES 4   /* strides told a plan, at most (cuDNN builds) */

typedef struct auto_entry {
    attune_dims key;  /* the bucket ceiling, or a promoted exact shape */
    void *stream;
    int anylen;       /* 1: the bucket's answer among AUTO_ANYLEN_VARIANTS */
    attune_plan *plan;
    char answered[ATTUNE_TACTIC_MAX]; /* the lookup's tactic (the plan's, or
                                          one it fell back from) */
    char source[16];
    int64_t expires_ms;
    uint64_t used;    /* LRU tick */
    /* below the ceiling: the one length seen so far (one_sq = 0: none
     * yet; mixed: more than one), since when and how often (promotion) */
    int64_t one_sq, one_skv, one_since_ms;
    uint64_t one_calls;
    int mixed;
    /* the strides the plan was last told (attune_plan_set_views); captured:
     * it ran under a graph capture since, so its graph is never replaced */
    attune_tensor views[4];
    int views_told, views_tries, captured;
} auto_entry;

struct attune_auto {
    attune_dev *dev;
    char who[128]; /* the device word lookups use: its id, else its name */
    attune_client *client;
    pthread_mutex_t mu;
    auto_entry *e;
    int n, cap, hint;
    attune_plan **retired; /* replaced plans: a captured graph may hold them */
    int nretired, capretired;
    uint64_t tick;
    const float *descale[3]; /* e4m3: q, k, v (attune_auto_set_descales) */
    attune_auto_stats stats; /* its counters; entries and retired set when read */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int attune_auto_new(attune_dev *dev, const char *url, int capacity, attune_auto **out,
                    char *err, size_t errlen)
{
    if (out == NULL || dev == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no device or no place for the result");
    *out = NULL;
    attune_auto *a = calloc(1, sizeof *a);
    int cap = capacity > 0 ? capacity : ATTUNE_AUTO_DEFAULT_CAPACITY;
    if (a != NULL) {
        a->e = calloc((size_t)cap, sizeof *a->e);
        a->retired = calloc((size_t)cap, sizeof *a->retired);
        a->client = attune_client_new(url, 1000);
    }
    if (a == NULL || a->e == NULL || a->retired == NULL || a->client == NULL) {
        if (a != NULL) {
            attune_client_free(a->client);
            free(a->retired);
            free(a->e);
        }
        free(a);
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&a->mu, NULL);
    a->dev = dev;
    snprintf(a->who, sizeof a->who, "%s", attune_dev_id(dev));
    a->cap = cap;
    a->capretired = cap;
    *out = a;
    return 0;
}

int attune_auto_get_stats(attune_auto *a, attune_auto_stats *out, size_t size)
{
    if (a == NULL || out == NULL)
        return ATTUNE_EINVAL;
    pthread_mutex_lock(&a->mu);
    attune_auto_stats s = a->stats;
    s.entries = a->n;
    s.retired = a->nretired;
    pthread_mutex_unlock(&a->mu);
    memcpy(out, &s, size < sizeof s ? size : sizeof s);
    return 0;
}

void attune_auto_free(attune_auto *a)
{
    if (a == NULL)
        return;
    for (int i = 0; i < a->n; i++)
        attune_plan_destroy(a->e[i].plan);
    for (int i = 0; i < a->nretired; i++)
        attune_plan_destroy(a->retired[i]);
    attune_client_free(a->client);
    pthread_mutex_destroy(&a->mu);
    free(a->retired);
    free(a->e);
    free(a);
}

/* A plan that is being replaced: kept until attune_auto_free (a captured
 * graph may still launch it), the oldest destroyed when the list is full. */
static void retire(attune_auto *a, attune_plan *p)
{
    if (p == NULL)
        return;
    if (a->nretired == a->capretired) {
        attune_plan_destroy(a->retired[0]);
        memmove(a->retired, a->retired + 1, (size_t)(a->nretired - 1) * sizeof *a->retired);
        a->nretired--;
    }
    a->retired[a->nretired++] = p;
}

static int dims_eq(const attune_dims *x, const attune_dims *y)
{
    return x->b == y->b && x->hq == y->hq && x->hkv == y->hkv && x->sq == y->sq &&
           x->skv == y->skv && x->d == y->d && x->dtype == y->dtype && x->causal == y->causal;
}

static auto_entry *find(attune_auto *a, const attune_dims *key, void *stream, int anylen)
{
    for (int j = 0; j < a->n; j++) {
        int i = (a->hint + j) % a->n;
        auto_entry *e = &a->e[i];
        if (e->stream == stream && e->anylen == anylen && dims_eq(&e->key, key)) {
            a->hint = i;
            return e;
        }
    }
    return NULL;
}

/* A free slot: a new one, else the least recently used entry's (its plan
 * destroyed: cudaFree orders it after the work in flight). */
static auto_entry *slot(attune_auto *a)
{
    if (a->n < a->cap)
        return &a->e[a->n++];
    auto_entry *lru = &a->e[0];
    for (int i = 1; i < a->n; i++)
        if (a->e[i].used < lru->used)
            lru = &a->e[i];
    attune_plan_destroy(lru->plan);
    a->stats.evictions++;
    memset(lru, 0, sizeof *lru);
    return lru;
}

static const char *dtype_word(int dtype)
{
    switch (dtype) {
    case ATTUNE_DTYPE_F16:
        return "f16";
    case ATTUNE_DTYPE_BF16:
        return "bf16";
    case ATTUNE_DTYPE_E4M3: /* not f32's answer: e4m3 lists its own tactics */
        return "e4m3";
    default:
        return "f32";
    }
}

/* The client's answer for key among variants (NULL: all); always filled:
 * the default on failure. Returns the client's code: ATTUNE_CLIENT_FALLBACK
 * when nothing answered (the daemon unreachable, timed out or failing). */
static int ask(attune_auto *a, const attune_dims *key, const char *variants,
               attune_answer *ans)
{
    attune_shape_q q = {a->who, key->b, key->hq, key->hkv, key->sq, key->skv,
                        key->d, dtype_word(key->dtype), key->causal};
    int rc = attune_lookup_in(a->client, &q, variants, 0, ans);
    a->stats.lookups++;
    const char *name = attune_dev_name(a->dev);
    if (rc == ATTUNE_CLIENT_REJECTED && strcmp(a->who, name) != 0) {
        /* a source that does not know this device's id (a table tuned on
         * another device of its model, shipped to this one): by its name */
        q.device = name;
        a->stats.lookups++;
        if ((rc = attune_lookup_in(a->client, &q, variants, 0, ans)) != ATTUNE_CLIENT_REJECTED)
            snprintf(a->who, sizeof a->who, "%s", name);
    }
    return rc;
}

/* The daemon's default for key on this device (index.h): the first
 * listed fused tactic with pad=8, else the first fused, else the first
 * listed. The client's offline default, "fused/pad=8", names no complete
 * tactic on a backend whose fused tactics have more keys (CUDA's tiles). */
static int listed_default(attune_auto *a, const attune_dims *key, char out[ATTUNE_TACTIC_MAX],
                          char *err, size_t errlen)
{
    enum { CAP = 512 };
    char(*list)[ATTUNE_TACTIC_MAX] = malloc(CAP * sizeof *list);
    if (list == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    int n = attune_tactics(a->dev, key, list, CAP, err, errlen);
    n = n > CAP ? CAP : n;
    int pick = -1;
    for (int i = 0; i < n && pick < 0; i++)
        if (strncmp(list[i], "fused/", 6) == 0 && strstr(list[i], "/pad=8") != NULL)
            pick = i;
    for (int i = 0; i < n && pick < 0; i++)
        if (strncmp(list[i], "fused", 5) == 0)
            pick = i;
    if (pick < 0 && n > 0)
        pick = 0;
    if (pick >= 0)
        snprintf(out, ATTUNE_TACTIC_MAX, "%s", list[pick]);
    free(list);
    if (n < 0)
        return n;
    return pick < 0 ? attune_fail(err, errlen, ATTUNE_EUNSUPP, "the device lists no tactic")
                    : 0;
}

/* Plan ans's tactic for key, else the device's default tactic (the answer
 * may name one this build cannot plan, or be the client's offline
 * default); source says which. 0 or a code. */
static int plan_answer(attune_auto *a, const attune_dims *key, const attune_answer *ans,
                       attune_plan **plan, char source[16], char *err, size_t errlen)
{
    char fallback[ATTUNE_TACTIC_MAX];
    snprintf(source, 16, "%s", ans->source);
    int rc = attune_plan_create(a->dev, key, ans->tactic, plan, err, errlen);
    if (rc == 0)
        return 0;
    snprintf(source, 16, "default");
    if ((rc = listed_default(a, key, fallback, err, errlen)) != 0)
        return rc;
    return attune_plan_create(a->dev, key, fallback, plan, err, errlen);
}

/* Whether p runs every length up to its planned ones at the speed the
 * tuner measured at them: our fused kernels take lengths as arguments.
 * cuDNN's graphs fix them (a plan per length), and the GEMM families at
 * pad 1 meet lengths cuBLAS runs slowly (2049 keys: unaligned rows). */
static int any_length(const attune_plan *p)
{
    return strncmp(attune_plan_tactic(p), "fused", 5) == 0;
}

/* bucket_entry's lookup and plan for an entry e (*e; NULL: none yet)
 * that is missing or expired, at time now; not while stream captures. */
static int refresh(attune_auto *a, const attune_dims *key, int anylen, void *stream,
                   auto_entry **ep, int64_t now, char *err, size_t errlen)
{
    auto_entry *e = *ep;
    attune_answer ans;
    int asked = ask(a, key, anylen ? AUTO_ANYLEN_VARIANTS : NULL, &ans);
    if (e != NULL && asked == ATTUNE_CLIENT_FALLBACK) {
        /* nothing answered: the plan it has is still the best known */
        e->expires_ms = now + AUTO_TTL_OTHER_MS;
        return 0;
    }
    if (e == NULL || strcmp(e->answered, ans.tactic) != 0) {
        attune_plan *p = NULL;
        char source[16];
        int rc = plan_answer(a, key, &ans, &p, source, err, errlen);
        if (rc != 0 && e != NULL) { /* the old plan still runs */
            e->expires_ms = now + AUTO_TTL_OTHER_MS;
            return 0;
        }
        if (rc != 0)
            return rc;
        a->stats.plans++;
        auto_entry keep = {0};
        if (e != NULL) {
            retire(a, e->plan);
            keep = *e;
        } else {
            e = slot(a);
        }
        *e = (auto_entry){.key = *key, .stream = stream, .anylen = anylen, .plan = p,
                          .one_sq = keep.one_sq, .one_skv = keep.one_skv,
                          .one_since_ms = keep.one_since_ms, .one_calls = keep.one_calls,
                          .mixed = keep.mixed};
        snprintf(e->answered, sizeof e->answered, "%s", ans.tactic);
        snprintf(e->source, sizeof e->source, "%s", source);
    } else if (strcmp(e->answered, attune_plan_tactic(e->plan)) == 0) {
        snprintf(e->source, sizeof e->source, "%s", ans.source);
    }
    /* an answer planned as the default stays "default" until it changes */
    e->expires_ms = now + (strcmp(e->source, "measured") == 0 ? AUTO_TTL_MEASURED_MS
                                                              : AUTO_TTL_OTHER_MS);
    *ep = e;
    return 0;
}

/* The entry of the bucket key on stream (anylen: the answer among the
 * families whose kernels take any length), looked up and planned as
 * needed. An expired entry asks again and plans only when the answer
 * changed. It keeps its plan, and asks again a second later, when the
 * source does not answer (a daemon restarting: its default is no answer)
 * or the new answer cannot be planned. While stream captures a CUDA graph
 * nothing is asked, planned or freed (plans allocate): an entry runs the
 * plan it has, a missing one is ATTUNE_EBUSY. Stamps the entry used. */
static int bucket_entry(attune_auto *a, const attune_dims *key, int anylen, void *stream,
                        auto_entry **out, char *err, size_t errlen)
{
    auto_entry *e = find(a, key, stream, anylen);
    int64_t now = now_ms();
    if (e == NULL || now >= e->expires_ms) {
        if (attune_dev_capturing(a->dev, stream)) {
            if (e == NULL)
                return attune_fail(err, errlen, ATTUNE_EBUSY,
                                   "no plan for this shape on the capturing stream: prepare it "
                                   "(attune_auto_prepare, or a run) on that stream before the "
                                   "capture");
        } else {
            int rc = refresh(a, key, anylen, stream, &e, now, err, errlen);
            if (rc != 0)
                return rc;
        }
    }
    e->used = ++a->tick;
    *out = e;
    return 0;
}

/* Count a call at shape's lengths (below its bucket's ceiling) on the
 * bucket's entry b (per stream); 1 when the bucket has run this one length only,
 * AUTO_EXACT_CALLS times or for AUTO_EXACT_MS (an encoder, a fixed
 * prompt: its length deserves its own answer and plan), else 0. A decode
 * step meets a new length within a few calls, so its bucket never
 * promotes one. */
static int promote(auto_entry *b, const attune_dims *shape, int64_t now)
{
    if (b->one_sq == 0) {
        b->one_sq = shape->sq, b->one_skv = shape->skv, b->one_since_ms = now;
        b->one_calls = 0;
    }
    if (b->one_sq != shape->sq || b->one_skv != shape->skv)
        b->mixed = 1;
    if (b->mixed)
        return 0;
    b->one_calls++;
    return b->one_calls >= AUTO_EXACT_CALLS ||
           (b->one_calls >= 2 && now - b->one_since_ms >= AUTO_EXACT_MS);
}

/* Whether shape (below its bucket's ceiling) was promoted to its own
 * entry on any stream: a length proven to run alone on one stream gets
 * its plan on the others at once (a side stream that replays a model's
 * calls in a CUDA graph, say). */
static int promoted(const attune_auto *a, const attune_dims *shape)
{
    for (int i = 0; i < a->n; i++)
        if (!a->e[i].anylen && a->e[i].plan != NULL && dims_eq(&a->e[i].key, shape))
            return 1;
    return 0;
}

static int same_strides(const attune_tensor *x, const attune_tensor *y)
{
    return x->stride_b == y->stride_b && x->stride_h == y->stride_h && x->stride_s == y->stride_s;
}

/* Tell e's plan the strides of the call's tensors t (NULL: a prepare,
 * none) when it runs at its planned lengths, so a cuDNN graph reads and
 * writes them in place (attune_plan_set_views); not while the stream
 * captures, and at most AUTO_VIEWS_TRIES times per entry. Once the entry
 * has run under a capture its strides are never told (again): a views
 * graph replaces the graph (and may free the workspace) that the
 * captured graph launches.
 * A refusal leaves the copies: nothing to report. */
static void tell_views(attune_auto *a, auto_entry *e, const attune_dims *shape,
                       const attune_tensor *t, void *stream)
{
    if (t == NULL || !dims_eq(&e->key, shape) ||
        strncmp(attune_plan_tactic(e->plan), "cudnn", 5) != 0)
        return;
    const int same = e->views_told && same_strides(&e->views[0], &t[0]) &&
                     same_strides(&e->views[1], &t[1]) && same_strides(&e->views[2], &t[2]) &&
                     same_strides(&e->views[3], &t[3]);
    if (!e->captured && attune_dev_capturing(a->dev, stream))
        e->captured = 1; /* a captured graph holds its graph and workspace now */
    if (same || e->captured || e->views_tries >= AUTO_VIEWS_TRIES)
        return;
    e->views_tries++;
    e->views_told = 1;
    memcpy(e->views, t, sizeof e->views);
    (void)attune_plan_set_views(e->plan, &t[0], &t[1], &t[2], &t[3], stream, NULL, 0);
}

/* The entry that runs shape: its bucket's answer, unless the call's
 * lengths are not the bucket's ceiling and that answer is no fused kernel;
 * then the bucket's best fused kernel (asked among AUTO_ANYLEN_VARIANTS),
 * which runs every length of the bucket without another plan. A bucket
 * that has run one length only (promote) gets that length's own answer
 * and plan. t: the call's q, k, v, out (NULL for a prepare). */
static int entry_for(attune_auto *a, const attune_dims *shape, const attune_tensor *t,
                     void *stream, auto_entry **out, char *err, size_t errlen)
{
    attune_dims key = *shape;
    key.sq = attune_bucket_len(shape->sq);
    key.skv = attune_bucket_len(shape->skv);
    /* a ceiling over the size limits where the call is not (up to a
     * quarter octave longer): the call's own lengths are its bucket (a
     * few comparisons, no allocation) */
    if (!dims_eq(&key, shape) && !attune_dims_ok(&key))
        key = *shape;
    auto_entry *b;
    int rc = bucket_entry(a, &key, 0, stream, &b, err, errlen);
    if (rc != 0)
        return rc;
    if (!dims_eq(&key, shape)) {
        int exact = promoted(a, shape) || promote(b, shape, now_ms());
        /* a new exact entry plans: not while this stream captures (plans
         * allocate); one it already has runs */
        if (exact && find(a, shape, stream, 0) == NULL && attune_dev_capturing(a->dev, stream))
            exact = 0;
        if (exact)
            rc = bucket_entry(a, shape, 0, stream, &b, err, errlen);
        else if (!any_length(b->plan))
            rc = bucket_entry(a, &key, 1, stream, &b, err, errlen);
        if (rc != 0)
            return rc;
    }
    tell_views(a, b, shape, t, stream);
    /* every time: the plan may be new (a changed answer, a promotion, the
     * LRU's), the pointers may have been set since; a store of three */
    if (shape->dtype == ATTUNE_DTYPE_E4M3)
        (void)attune_plan_set_descales(b->plan, a->descale[0], a->descale[1], a->descale[2]);
    b->used = ++a->tick;
    *out = b;
    return 0;
}

int attune_auto_set_descales(attune_auto *a, const float *q, const float *k, const float *v)
{
    if (a == NULL)
        return ATTUNE_EINVAL;
    pthread_mutex_lock(&a->mu);
    a->descale[0] = q;
    a->descale[1] = k;
    a->descale[2] = v;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

int attune_auto_prepare(attune_auto *a, const attune_dims *shape, void *stream,
                        attune_choice *out, char *err, size_t errlen)
{
    if (a == NULL || shape == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no attune_auto or no shape");
    pthread_mutex_lock(&a->mu);
    auto_entry *e;
    int rc = entry_for(a, shape, NULL, stream, &e, err, errlen);
    if (rc == 0 && out != NULL) {
        memset(out, 0, sizeof *out);
        snprintf(out->tactic, sizeof out->tactic, "%s", attune_plan_tactic(e->plan));
        snprintf(out->source, sizeof out->source, "%s", e->source);
        snprintf(out->planned, sizeof out->planned, "%s", attune_plan_shape(e->plan));
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int attune_auto_run(attune_auto *a, const attune_dims *shape, const attune_tensor *q,
                    const attune_tensor *k, const attune_tensor *v, const attune_tensor *out,
                    void *stream, char *err, size_t errlen)
{
    if (a == NULL || shape == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "no attune_auto or no shape");
    if (shape->sq < 1 || shape->skv < 1) /* 0 would mean "the planned" to a plan */
        return attune_fail(err, errlen, ATTUNE_EINVAL, "lengths sq=%lld skv=%lld under 1",
                           (long long)shape->sq, (long long)shape->skv);
    if (q == NULL || k == NULL || v == NULL || out == NULL)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "a tensor is missing");
    pthread_mutex_lock(&a->mu);
    auto_entry *e;
    const attune_tensor t[4] = {*q, *k, *v, *out};
    int rc = entry_for(a, shape, t, stream, &e, err, errlen);
    if (rc == 0) {
        rc = attune_plan_run(e->plan, q, k, v, out, shape->sq, shape->skv, stream);
        if (rc == 0)
            a->stats.runs++;
        if (rc != 0)
            attune_fail(err, errlen, rc, "%s planned for %s: %s", attune_plan_tactic(e->plan),
                        attune_plan_shape(e->plan), attune_strerror(rc));
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}
