/* attune_client.c -- lookups against attuned over HTTP (libcurl), with an
 * in-process cache and the documented fallback. */
#include "attune.h"
#include "attune_client_table.h"

#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_MAX 8                   /* idle curl handles kept (connections reused) */
#define LOOKUP_BODY_MAX (64u << 10)  /* a lookup answer is ~400 bytes */
#define REQUEST_BODY_MAX (256u << 20) /* exports can be large */
#define CACHE_WAYS 4                 /* set-associative: bounded probe */
#define KEY_MAX 384
#define VARIANTS_MAX 128            /* a variants list, as given or canonical */

typedef struct cache_entry {
    char key[KEY_MAX];               /* "" = empty */
    attune_answer ans;
    int64_t expires_ms;
    uint64_t used;                   /* LRU stamp within its set */
} cache_entry;

struct attune_client {
    char *url;                       /* without trailing '/' */
    char *token;
    long timeout_ms;
    long retry_ms;
    pthread_mutex_t mu;              /* guards everything below */
    CURL *pool[POOL_MAX];
    int npool;
    cache_entry *cache;
    int nsets;                       /* entries = nsets * CACHE_WAYS */
    long ttl_ms;
    uint64_t stamp;
    int64_t down_until_ms;           /* fall back without trying until then */
    table_mode *table;               /* a "file:" client: answers in process */
    char default_dev[64];            /* a lookup without a device: this one */
    int64_t default_until_ms;        /* ... until then (then asked again) */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_init_once(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

void attune_default_answer(attune_answer *out, const char *why)
{
    if (out == NULL)
        return;
    memset(out, 0, sizeof *out);
    copy_str(out->tactic, sizeof out->tactic, ATTUNE_CLIENT_DEFAULT_TACTIC);
    copy_str(out->variant, sizeof out->variant, "fused");
    out->pad = 8;
    copy_str(out->source, sizeof out->source, "default");
    out->time_us = out->rel_err = out->max_abs_err = out->distance = NAN;
    copy_str(out->error, sizeof out->error, why);
}

/* Allocate nsets sets of the cache; NULL when nsets == 0. */
static int alloc_cache(int entries, cache_entry **out, int *nsets)
{
    *out = NULL;
    *nsets = 0;
    if (entries <= 0)
        return 0;
    int sets = (entries + CACHE_WAYS - 1) / CACHE_WAYS;
    cache_entry *c = calloc((size_t)sets * CACHE_WAYS, sizeof *c);
    if (c == NULL)
        return ATTUNE_CLIENT_ENOMEM;
    *out = c;
    *nsets = sets;
    return 0;
}

attune_client *attune_client_new(const char *url, long timeout_ms)
{
    pthread_once(&curl_once, curl_init_once);
    if (url == NULL || *url == 0)
        url = getenv("ATTUNE_URL");
    if (url == NULL || *url == 0)
        url = ATTUNE_CLIENT_DEFAULT_URL;
    attune_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    if ((c->url = strdup(url)) == NULL)
        goto fail;
    size_t n = strlen(c->url);
    while (n > 0 && c->url[n - 1] == '/')
        c->url[--n] = 0;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    c->retry_ms = 1000;
    c->ttl_ms = 60000;
    if (alloc_cache(256, &c->cache, &c->nsets) != 0)
        goto fail;
    if (strncmp(c->url, "file:", 5) == 0) { /* file:PATH, file://PATH */
        const char *path = c->url + 5;
        if ((c->table = table_mode_open(strncmp(path, "//", 2) == 0 ? path + 2 : path)) == NULL)
            goto fail;
    }
    pthread_mutex_init(&c->mu, NULL);
    return c;
fail:
    free(c->cache);
    free(c->url);
    free(c);
    return NULL;
}

const char *attune_client_url(const attune_client *c)
{
    return c != NULL ? c->url : "";
}

void attune_client_free(attune_client *c)
{
    if (c == NULL)
        return;
    for (int i = 0; i < c->npool; i++)
        curl_easy_cleanup(c->pool[i]);
    table_mode_close(c->table);
    free(c->cache);
    free(c->url);
    free(c->token);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int attune_client_set_cache(attune_client *c, int entries, long ttl_ms)
{
    if (c == NULL || entries < 0 || entries > (1 << 20) || ttl_ms < 0)
        return ATTUNE_CLIENT_EINVAL;
    cache_entry *fresh;
    int nsets;
    if (alloc_cache(entries, &fresh, &nsets) != 0)
        return ATTUNE_CLIENT_ENOMEM;
    pthread_mutex_lock(&c->mu);
    free(c->cache);
    c->cache = fresh;
    c->nsets = nsets;
    c->ttl_ms = ttl_ms;
    pthread_mutex_unlock(&c->mu);
    return ATTUNE_CLIENT_OK;
}

void attune_client_set_retry(attune_client *c, long retry_ms)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    c->retry_ms = retry_ms > 0 ? retry_ms : 0;
    c->down_until_ms = 0;
    pthread_mutex_unlock(&c->mu);
}

int attune_client_set_token(attune_client *c, const char *token)
{
    if (c == NULL)
        return ATTUNE_CLIENT_EINVAL;
    char *t = NULL;
    if (token != NULL && (t = strdup(token)) == NULL)
        return ATTUNE_CLIENT_ENOMEM;
    pthread_mutex_lock(&c->mu);
    free(c->token);
    c->token = t;
    pthread_mutex_unlock(&c->mu);
    return ATTUNE_CLIENT_OK;
}

void attune_client_clear_cache(attune_client *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    if (c->cache != NULL)
        memset(c->cache, 0, (size_t)c->nsets * CACHE_WAYS * sizeof *c->cache);
    pthread_mutex_unlock(&c->mu);
}

void attune_free(void *p)
{
    free(p);
}

/* ---- cache (c->mu held) */

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static cache_entry *cache_set(attune_client *c, const char *key)
{
    return &c->cache[(fnv1a(key) % (uint64_t)c->nsets) * CACHE_WAYS];
}

static int cache_get(attune_client *c, const char *key, attune_answer *out)
{
    if (c->nsets == 0)
        return 0;
    cache_entry *set = cache_set(c, key);
    int64_t now = now_ms();
    for (int w = 0; w < CACHE_WAYS; w++)
        if (set[w].key[0] != 0 && strcmp(set[w].key, key) == 0) {
            if (set[w].expires_ms <= now) {
                set[w].key[0] = 0;
                return 0;
            }
            set[w].used = ++c->stamp;
            *out = set[w].ans;
            return 1;
        }
    return 0;
}

static void cache_put(attune_client *c, const char *key, const attune_answer *a)
{
    if (c->nsets == 0 || c->ttl_ms == 0)
        return;
    cache_entry *set = cache_set(c, key);
    cache_entry *victim = &set[0];
    for (int w = 0; w < CACHE_WAYS; w++) {
        if (set[w].key[0] == 0 || strcmp(set[w].key, key) == 0) {
            victim = &set[w];
            break;
        }
        if (set[w].used < victim->used)
            victim = &set[w];
    }
    copy_str(victim->key, sizeof victim->key, key);
    victim->ans = *a;
    /* an answer that is not measured yet is re-asked soon: the daemon may
     * be tuning the shape (tune on miss) */
    long ttl = c->ttl_ms;
    if (strcmp(a->source, "measured") != 0 && ttl > ATTUNE_CLIENT_SHORT_TTL_MS)
        ttl = ATTUNE_CLIENT_SHORT_TTL_MS;
    victim->expires_ms = now_ms() + ttl;
    victim->used = ++c->stamp;
}

/* ---- HTTP */

typedef struct buf {
    char *p;
    size_t len, cap, max;
    int overflow;
} buf;

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    buf *b = arg;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->max) {
        b->overflow = 1;
        return 0; /* aborts the transfer */
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (p == NULL)
            return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = 0;
    return n;
}

static CURL *handle_get(attune_client *c)
{
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->npool > 0)
        h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->mu);
    if (h == NULL)
        h = curl_easy_init();
    else
        curl_easy_reset(h); /* options cleared, connection kept */
    return h;
}

static void handle_put(attune_client *c, CURL *h)
{
    pthread_mutex_lock(&c->mu);
    if (c->npool < POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h != NULL)
        curl_easy_cleanup(h);
}

/* One request. Returns ATTUNE_CLIENT_OK with *status and the body in b, or
 * ATTUNE_CLIENT_EIO with a message in why. */
static int perform(attune_client *c, const char *method, const char *url, const char *body,
                   size_t max, long *status, buf *b, char *why, size_t whylen)
{
    if (!curl_ok) {
        copy_str(why, whylen, "libcurl failed to initialise");
        return ATTUNE_CLIENT_EIO;
    }
    CURL *h = handle_get(c);
    if (h == NULL) {
        copy_str(why, whylen, "out of memory");
        return ATTUNE_CLIENT_ENOMEM;
    }
    struct curl_slist *hdrs = NULL;
    char auth[512] = "";
    pthread_mutex_lock(&c->mu);
    if (c->token != NULL)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", c->token);
    pthread_mutex_unlock(&c->mu);
    if (auth[0] != 0)
        hdrs = curl_slist_append(hdrs, auth);
    if (body != NULL)
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Accept: application/json");

    memset(b, 0, sizeof *b);
    b->max = max;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM timeouts */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->timeout_ms);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    /* an http_proxy from the environment must not swallow loopback lookups */
    curl_easy_setopt(h, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
    }
    CURLcode rc = curl_easy_perform(h);
    int ret = ATTUNE_CLIENT_OK;
    if (rc != CURLE_OK) {
        snprintf(why, whylen, "%s%s", b->overflow ? "answer too large: " : "",
                 curl_easy_strerror(rc));
        ret = ATTUNE_CLIENT_EIO;
        free(b->p);
        b->p = NULL;
        b->len = 0;
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
    }
    curl_slist_free_all(hdrs);
    handle_put(c, h);
    return ret;
}

int attune_request(attune_client *c, const char *method, const char *path, const char *body,
                   long *status, char **response)
{
    if (response != NULL)
        *response = NULL;
    if (c == NULL || method == NULL || path == NULL || status == NULL || response == NULL ||
        path[0] != '/')
        return ATTUNE_CLIENT_EINVAL;
    if (c->table != NULL)
        return ATTUNE_CLIENT_EIO; /* a file, no daemon to ask */
    size_t n = strlen(c->url) + strlen(path) + 1;
    char *url = malloc(n);
    if (url == NULL)
        return ATTUNE_CLIENT_ENOMEM;
    snprintf(url, n, "%s%s", c->url, path);
    buf b;
    char why[256];
    int rc = perform(c, method, url, body, REQUEST_BODY_MAX, status, &b, why, sizeof why);
    free(url);
    if (rc != ATTUNE_CLIENT_OK)
        return rc;
    if (b.p == NULL && (b.p = calloc(1, 1)) == NULL)
        return ATTUNE_CLIENT_ENOMEM;
    *response = b.p;
    return ATTUNE_CLIENT_OK;
}

/* ---- lookup */

static int valid_query(const attune_shape_q *q, char *why, size_t whylen)
{
    const long long v[] = {q->b, q->hq, q->hkv, q->sq, q->skv, q->d};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (v[i] < 1 || v[i] > (1LL << 20)) {
            copy_str(why, whylen, "shape sizes must be in [1, 2^20]");
            return 0;
        }
    if (q->hq % q->hkv != 0) {
        copy_str(why, whylen, "hq must be a multiple of hkv");
        return 0;
    }
    if (q->dtype == NULL || (strcmp(q->dtype, "f16") != 0 && strcmp(q->dtype, "bf16") != 0 &&
                             strcmp(q->dtype, "f32") != 0 && strcmp(q->dtype, "e4m3") != 0)) {
        copy_str(why, whylen, "dtype must be f16, bf16, f32 or e4m3");
        return 0;
    }
    if (q->causal != 0 && q->causal != 1) {
        copy_str(why, whylen, "causal must be 0 or 1");
        return 0;
    }
    if (q->device != NULL && (q->device[0] == 0 || strlen(q->device) > 128)) {
        copy_str(why, whylen, "device must be a non-empty spec of at most 128 bytes");
        return 0;
    }
    return 1;
}

static double num_or_nan(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Fill a from the daemon's JSON answer; 0 when it has the required fields. */
static int parse_answer(const char *text, size_t len, attune_answer *a)
{
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return -1;
    }
    const char *tactic = json_string_value(json_object_get(o, "tactic"));
    const char *source = json_string_value(json_object_get(o, "source"));
    if (tactic == NULL || source == NULL || strlen(tactic) >= sizeof a->tactic) {
        json_decref(o);
        return -1;
    }
    memset(a, 0, sizeof *a);
    copy_str(a->tactic, sizeof a->tactic, tactic);
    copy_str(a->source, sizeof a->source, source);
    copy_str(a->variant, sizeof a->variant,
             json_string_value(json_object_get(o, "variant")));
    copy_str(a->device, sizeof a->device, json_string_value(json_object_get(o, "device")));
    copy_str(a->shape, sizeof a->shape, json_string_value(json_object_get(o, "shape")));
    json_t *pad = json_object_get(o, "pad");
    a->pad = json_is_integer(pad) ? (int)json_integer_value(pad) : 0;
    a->stale = json_is_true(json_object_get(o, "stale"));
    a->time_us = num_or_nan(o, "time_us");
    a->rel_err = num_or_nan(o, "rel_err");
    a->max_abs_err = num_or_nan(o, "max_abs_err");
    copy_str(a->measured_stack, sizeof a->measured_stack,
             json_string_value(json_object_get(o, "measured_stack")));
    copy_str(a->stack, sizeof a->stack, json_string_value(json_object_get(o, "stack")));
    const char *tuning = json_string_value(json_object_get(o, "tuning"));
    /* "refused: predicted 6.5 h (budget 60 s)": the word fits, the reason not */
    copy_str(a->tuning, sizeof a->tuning,
             tuning != NULL && strncmp(tuning, "refused", 7) == 0 ? "refused" : tuning);
    if (strcmp(a->source, "nearest") == 0 || strcmp(a->source, "predicted") == 0) {
        copy_str(a->from_shape, sizeof a->from_shape,
                 json_string_value(json_object_get(o, "from_shape")));
        a->distance = num_or_nan(o, "distance");
    } else if (strcmp(a->source, "fleet") == 0) {
        copy_str(a->from_shape, sizeof a->from_shape, a->shape);
        copy_str(a->fleet_device, sizeof a->fleet_device,
                 json_string_value(json_object_get(o, "fleet_device")));
        a->distance = 0;
    } else if (strcmp(a->source, "measured") == 0) {
        copy_str(a->from_shape, sizeof a->from_shape, a->shape);
        a->distance = 0;
    } else {
        a->distance = NAN;
    }
    json_decref(o);
    return 0;
}

/* The error text of a 4xx/5xx answer, for a fallback's error field. */
static void error_text(const char *text, size_t len, long status, char *why, size_t whylen)
{
    json_error_t je;
    json_t *o = text != NULL ? json_loadb(text, len, 0, &je) : NULL;
    const char *msg = json_string_value(json_object_get(o, "error"));
    snprintf(why, whylen, "HTTP %ld: %s", status, msg != NULL ? msg : "no error text");
    json_decref(o);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The canonical text of a variants list into out (names trimmed, sorted,
 * repeats dropped: "split, cudnn,split" -> "cudnn,split"; "" for NULL or
 * ""), so that two spellings of one set share a cache entry. Names are
 * checked for their characters only ([a-z0-9_]); attuned knows which
 * exist. 0, or -1 with why set. */
static int canon_variants(const char *list, char *out, size_t len, char *why, size_t whylen)
{
    char copy[VARIANTS_MAX];
    const char *names[16];
    int n = 0;
    out[0] = 0;
    if (list == NULL || list[0] == 0)
        return 0;
    if (strlen(list) >= sizeof copy) {
        copy_str(why, whylen, "variants: list too long");
        return -1;
    }
    copy_str(copy, sizeof copy, list);
    for (char *t = copy, *next; t != NULL; t = next) {
        if ((next = strchr(t, ',')) != NULL)
            *next++ = 0;
        while (*t == ' ')
            t++;
        for (char *e = t + strlen(t); e > t && e[-1] == ' ';)
            *--e = 0;
        if (*t == 0 || strspn(t, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(t) ||
            n == (int)(sizeof names / sizeof names[0])) {
            snprintf(why, whylen, "variants: '%.40s' is not a list of variant names "
                     "(e.g. cudnn,split,folded)", list);
            return -1;
        }
        names[n++] = t;
    }
    if (n == 0) {
        snprintf(why, whylen, "variants: '%.40s' names no variant", list);
        return -1;
    }
    qsort(names, (size_t)n, sizeof names[0], cmp_str);
    size_t k = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(names[i], names[i - 1]) != 0)
            k += (size_t)snprintf(out + k, len - k, "%s%s", k ? "," : "", names[i]);
    return 0;
}

/* 1 when the canonical list allows the variant name v ("" allows all). */
static int variants_allow(const char *canon, const char *v)
{
    size_t n = strlen(v);
    if (canon[0] == 0)
        return 1;
    for (const char *p = canon; (p = strstr(p, v)) != NULL; p += n)
        if ((p == canon || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
            return 1;
    return 0;
}

/* The fallback answer of a lookup limited to variants (canonical): the
 * default when the set allows fused, else no tactic (source "none"). */
static void fallback_answer(attune_answer *out, const char *why, const char *variants)
{
    attune_default_answer(out, why);
    if (variants_allow(variants, "fused"))
        return;
    out->tactic[0] = out->variant[0] = 0;
    out->pad = 0;
    copy_str(out->source, sizeof out->source, "none");
}

/* The cache key of a lookup: device, shape, bound and variants. */
static void lookup_key(const attune_shape_q *q, const char *device, double max_rel_err,
                       const char *variants, char *key, size_t len)
{
    snprintf(key, len, "%s|b%lld.hq%lld.hkv%lld.sq%lld.skv%lld.d%lld.%s.%s|%.17g|%s", device,
             q->b, q->hq, q->hkv, q->sq, q->skv, q->d, q->dtype, q->causal ? "c" : "nc",
             max_rel_err, variants);
}

/* The URL of GET /v1/tactic for the lookup into url. 0, or -1 with why. */
static int lookup_url(const attune_client *c, const attune_shape_q *q, const char *device,
                      double max_rel_err, const char *variants, char *url, size_t len,
                      char *why, size_t whylen)
{
    char *dev_esc = curl_easy_escape(NULL, device, 0);
    if (dev_esc == NULL) {
        copy_str(why, whylen, "out of memory");
        return -1;
    }
    int n = snprintf(url, len,
                     "%s/v1/tactic?device=%s&b=%lld&hq=%lld&hkv=%lld&sq=%lld&skv=%lld"
                     "&d=%lld&dtype=%s&causal=%d",
                     c->url, dev_esc, q->b, q->hq, q->hkv, q->sq, q->skv, q->d, q->dtype,
                     q->causal);
    curl_free(dev_esc);
    if (max_rel_err > 0 && n > 0 && (size_t)n < len)
        n += snprintf(url + n, len - (size_t)n, "&max_rel_err=%.17g", max_rel_err);
    if (variants[0] != 0 && n > 0 && (size_t)n < len)
        n += snprintf(url + n, len - (size_t)n, "&variants=%s", variants);
    if (n < 0 || (size_t)n >= len) {
        copy_str(why, whylen, "daemon URL too long");
        return -1;
    }
    return 0;
}

/* Check the arguments of a lookup; the canonical variants into canon.
 * ATTUNE_CLIENT_OK, or EINVAL with out holding the fallback. */
static int lookup_check(attune_client *c, const attune_shape_q *q, const char *variants,
                        double max_rel_err, char *canon, size_t len, attune_answer *out)
{
    char why[256];
    if (c == NULL || q == NULL) {
        attune_default_answer(out, "no client or no query");
        return ATTUNE_CLIENT_EINVAL;
    }
    if (canon_variants(variants, canon, len, why, sizeof why) != 0) {
        fallback_answer(out, why, "-");
        return ATTUNE_CLIENT_EINVAL;
    }
    if (!valid_query(q, why, sizeof why)) {
        fallback_answer(out, why, canon);
        return ATTUNE_CLIENT_EINVAL;
    }
    if (!(max_rel_err >= 0 && max_rel_err <= 1)) { /* NaN fails too */
        fallback_answer(out, "max_rel_err must be 0 (daemon's bound) or in (0, 1]", canon);
        return ATTUNE_CLIENT_EINVAL;
    }
    return ATTUNE_CLIENT_OK;
}

int attune_lookup(attune_client *c, const attune_shape_q *q, double max_rel_err,
                  attune_answer *out)
{
    return attune_lookup_in(c, q, NULL, max_rel_err, out);
}

/* Ask the daemon (the lookup's cache missed): the answer into out, the
 * return code of attune_lookup_in. */
static int ask_daemon(attune_client *c, const char *url, const char *key, const char *canon,
                      attune_answer *out)
{
    char why[256];
    long status = 0;
    buf b;
    int rc = perform(c, "GET", url, NULL, LOOKUP_BODY_MAX, &status, &b, why, sizeof why);
    if (rc != ATTUNE_CLIENT_OK || status >= 500) {
        if (rc == ATTUNE_CLIENT_OK)
            error_text(b.p, b.len, status, why, sizeof why);
        free(b.p);
        pthread_mutex_lock(&c->mu);
        if (c->retry_ms > 0)
            c->down_until_ms = now_ms() + c->retry_ms;
        pthread_mutex_unlock(&c->mu);
        fallback_answer(out, why, canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    if (status != 200) {
        error_text(b.p, b.len, status, why, sizeof why);
        free(b.p);
        fallback_answer(out, why, canon);
        return ATTUNE_CLIENT_REJECTED;
    }
    attune_answer a;
    int bad = b.p == NULL || parse_answer(b.p, b.len, &a) != 0;
    free(b.p);
    if (bad) {
        fallback_answer(out, "malformed answer from attuned", canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    pthread_mutex_lock(&c->mu);
    cache_put(c, key, &a);
    pthread_mutex_unlock(&c->mu);
    *out = a;
    return ATTUNE_CLIENT_OK;
}

/* Ask the table of a "file:" client (the lookup's cache missed): the
 * answer into out, the return code of attune_lookup_in. The same JSON as
 * from attuned, so the same parser. */
static int ask_table(attune_client *c, const attune_shape_q *q, const char *device,
                     double max_rel_err, const char *key, const char *canon,
                     attune_answer *out)
{
    char why[256], *json = NULL;
    int status = table_mode_ask(c->table, q, device, max_rel_err, canon, &json, why,
                                sizeof why);
    attune_answer a;
    if (status < 0) {
        fallback_answer(out, why, canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    if (status != 200) {
        error_text(json, strlen(json), status, why, sizeof why);
        free(json);
        fallback_answer(out, why, canon);
        return status >= 500 ? ATTUNE_CLIENT_FALLBACK : ATTUNE_CLIENT_REJECTED;
    }
    int bad = parse_answer(json, strlen(json), &a) != 0;
    free(json);
    if (bad) {
        fallback_answer(out, "malformed answer from libattune_lookup", canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    pthread_mutex_lock(&c->mu);
    cache_put(c, key, &a);
    pthread_mutex_unlock(&c->mu);
    *out = a;
    return ATTUNE_CLIENT_OK;
}

/* The device of the first entry of a GET /v1/devices answer that is local
 * and of kind "cuda", else of the first local one (the CPU), into out.
 * 0, or -1 when the answer lists no local device or is not one. */
static int pick_default(const char *text, size_t len, char *out, size_t outlen)
{
    json_error_t je;
    json_t *o = json_loadb(text, len, 0, &je);
    json_t *arr = json_object_get(o, "devices");
    const char *gpu = NULL, *any = NULL;
    size_t i;
    json_t *d;
    json_array_foreach(arr, i, d) {
        const char *id = json_string_value(json_object_get(d, "id"));
        const char *kind = json_string_value(json_object_get(d, "kind"));
        if (id == NULL || id[0] == 0 || strlen(id) >= outlen ||
            !json_is_true(json_object_get(d, "local")))
            continue;
        if (any == NULL)
            any = id;
        if (gpu == NULL && kind != NULL && strcmp(kind, "cuda") == 0)
            gpu = id;
    }
    int rc = gpu != NULL || any != NULL ? 0 : -1;
    if (rc == 0)
        copy_str(out, outlen, gpu != NULL ? gpu : any);
    json_decref(o);
    return rc;
}

/* The device a lookup without one means (q->device NULL): the first local
 * GPU attuned reports, else its first local device (GET /v1/devices), kept
 * for the cache's TTL (at least a second). 0 with out set, or
 * ATTUNE_CLIENT_FALLBACK / REJECTED with why (the lookup falls back). */
static int default_device(attune_client *c, char *out, size_t len, char *why, size_t whylen)
{
    pthread_mutex_lock(&c->mu);
    int have = c->default_dev[0] != 0 && c->default_until_ms > now_ms();
    if (have)
        copy_str(out, len, c->default_dev);
    long ttl = c->ttl_ms > 1000 ? c->ttl_ms : 1000;
    pthread_mutex_unlock(&c->mu);
    if (have)
        return 0;
    size_t n = strlen(c->url) + sizeof "/v1/devices";
    char *url = malloc(n);
    if (url == NULL) {
        copy_str(why, whylen, "out of memory");
        return ATTUNE_CLIENT_FALLBACK;
    }
    snprintf(url, n, "%s/v1/devices", c->url);
    long status = 0;
    buf b;
    int rc = perform(c, "GET", url, NULL, REQUEST_BODY_MAX, &status, &b, why, whylen);
    free(url);
    if (rc != ATTUNE_CLIENT_OK || status != 200) {
        if (rc == ATTUNE_CLIENT_OK)
            error_text(b.p, b.len, status, why, whylen);
        free(b.p);
        pthread_mutex_lock(&c->mu);
        if (c->retry_ms > 0 && (rc != ATTUNE_CLIENT_OK || status >= 500))
            c->down_until_ms = now_ms() + c->retry_ms;
        pthread_mutex_unlock(&c->mu);
        return rc == ATTUNE_CLIENT_OK && status < 500 ? ATTUNE_CLIENT_REJECTED
                                                      : ATTUNE_CLIENT_FALLBACK;
    }
    rc = b.p != NULL ? pick_default(b.p, b.len, out, len) : -1;
    free(b.p);
    if (rc != 0) {
        copy_str(why, whylen, "attuned reports no local device (GET /v1/devices)");
        return ATTUNE_CLIENT_FALLBACK;
    }
    pthread_mutex_lock(&c->mu);
    copy_str(c->default_dev, sizeof c->default_dev, out);
    c->default_until_ms = now_ms() + ttl;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

int attune_default_device(attune_client *c, char *out, size_t len)
{
    char why[256];
    if (c == NULL || out == NULL || len == 0)
        return ATTUNE_CLIENT_EINVAL;
    if (c->table != NULL) {
        copy_str(out, len, "a table file has no daemon to report devices");
        return ATTUNE_CLIENT_EINVAL;
    }
    int rc = default_device(c, out, len, why, sizeof why);
    if (rc != 0)
        copy_str(out, len, why);
    return rc;
}

/* A "file:" client's lookup without a device: GPU 0 of the file, else its
 * CPU (the file's devices answer as another host's: "0" and "cpu" name
 * them by kind). The answer into out, the return code of
 * attune_lookup_in. */
static int ask_table_default(attune_client *c, const attune_shape_q *q, double max_rel_err,
                             const char *canon, attune_answer *out)
{
    char key[KEY_MAX];
    lookup_key(q, "0", max_rel_err, canon, key, sizeof key);
    int rc = ask_table(c, q, "0", max_rel_err, key, canon, out);
    if (rc != ATTUNE_CLIENT_REJECTED || strstr(out->error, "unknown device") == NULL)
        return rc;
    lookup_key(q, "cpu", max_rel_err, canon, key, sizeof key);
    return ask_table(c, q, "cpu", max_rel_err, key, canon, out);
}

int attune_lookup_in(attune_client *c, const attune_shape_q *q, const char *variants,
                     double max_rel_err, attune_answer *out)
{
    char why[256], canon[VARIANTS_MAX], dflt[64];
    if (out == NULL)
        return ATTUNE_CLIENT_EINVAL;
    int rc = lookup_check(c, q, variants, max_rel_err, canon, sizeof canon, out);
    if (rc != ATTUNE_CLIENT_OK)
        return rc;
    /* no device: "" in the cache key until resolved (file mode: "0" or
     * "cpu", asked in turn; a daemon: the device it names first) */
    const char *device = q->device != NULL ? q->device : "";
    char key[KEY_MAX];
    lookup_key(q, device, max_rel_err, canon, key, sizeof key);

    pthread_mutex_lock(&c->mu);
    int hit = cache_get(c, key, out);
    int down = !hit && c->down_until_ms > now_ms();
    pthread_mutex_unlock(&c->mu);
    if (hit)
        return ATTUNE_CLIENT_OK;
    if (c->table != NULL && q->device == NULL) {
        rc = ask_table_default(c, q, max_rel_err, canon, out);
        if (rc == ATTUNE_CLIENT_OK) {
            pthread_mutex_lock(&c->mu);
            cache_put(c, key, out);
            pthread_mutex_unlock(&c->mu);
        }
        return rc;
    }
    if (c->table != NULL)
        return ask_table(c, q, device, max_rel_err, key, canon, out);
    if (down) {
        fallback_answer(out, "attuned unreachable (recent failure; retrying later)", canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    if (q->device == NULL) {
        if ((rc = default_device(c, dflt, sizeof dflt, why, sizeof why)) != 0) {
            fallback_answer(out, why, canon);
            return rc;
        }
        device = dflt;
        lookup_key(q, device, max_rel_err, canon, key, sizeof key);
        pthread_mutex_lock(&c->mu);
        int hit2 = cache_get(c, key, out);
        pthread_mutex_unlock(&c->mu);
        if (hit2)
            return ATTUNE_CLIENT_OK;
    }
    char url[1024];
    if (lookup_url(c, q, device, max_rel_err, canon, url, sizeof url, why, sizeof why) != 0) {
        fallback_answer(out, why, canon);
        return ATTUNE_CLIENT_FALLBACK;
    }
    return ask_daemon(c, url, key, canon, out);
}
