/* attune.h -- the attune client library: ask a running attuned which
 * attention implementation (tactic) to use for a shape on a device.
 *
 * What a C or C++ runtime links (libattune_client, libcurl inside). This
 * header is self-contained: it needs nothing else from attune. Without a
 * daemon (a Jetson that ships a table): attune_client_new("file:PATH").
 *
 *   attune_client *c = attune_client_new("http://127.0.0.1:7373", 200);
 *   attune_shape_q q = {.b = 1, .hq = 8, .hkv = 1, .sq = 50, .skv = 1018,
 *                       .d = 256, .dtype = "f16", .causal = 0};
 *   attune_answer a;
 *   attune_lookup(c, &q, 0, &a);          // a.tactic: "folded/acc=f32/pad=8"
 *   attune_client_free(c);
 *
 * Without .device the lookup is for the first local GPU attuned reports,
 * else its CPU (a CPU-only host). Device "0" is the first CUDA GPU: on a
 * host without one it is an unknown device, refused
 * (ATTUNE_CLIENT_REJECTED, default answer).
 *
 * A lookup never makes its runtime fail: when the daemon is unreachable,
 * slow, or refuses the question, the answer is still filled, with the
 * documented default tactic (ATTUNE_CLIENT_DEFAULT_TACTIC, source
 * "default"), and the return code says it was a fallback. Answers from the
 * daemon are cached in-process (bounded, with a time to live); after a
 * failure to reach the daemon, lookups fall back at once for a short
 * retry interval instead of waiting for the timeout each time.
 *
 * Thread safety: every function may be called from any thread on a shared
 * client, except attune_client_free (no call may be in flight) and the
 * setters (call them before sharing the client). */
#ifndef ATTUNE_CLIENT_H
#define ATTUNE_CLIENT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The answer when nothing better is known: the fused kernel exists for
 * every shape on every device, and pad=8 keeps rows aligned. Identical to
 * the daemon's own default (docs/api.md). */
#define ATTUNE_CLIENT_DEFAULT_TACTIC "fused/pad=8"
#define ATTUNE_CLIENT_DEFAULT_URL "http://127.0.0.1:7373"

/* Return codes of attune_lookup. Non-negative codes always come with a
 * usable answer. */
#define ATTUNE_CLIENT_OK 0          /* the daemon answered (maybe from the cache) */
#define ATTUNE_CLIENT_FALLBACK 1    /* daemon unreachable, timed out or failing:
                                       default answer */
#define ATTUNE_CLIENT_REJECTED 2    /* the daemon refused the question (unknown
                                       device, invalid shape): default answer */
#define ATTUNE_CLIENT_EINVAL (-1)   /* bad arguments; the answer (if any) holds
                                       the default */
#define ATTUNE_CLIENT_ENOMEM (-2)
#define ATTUNE_CLIENT_EIO (-3)      /* attune_request: no HTTP answer */

typedef struct attune_client attune_client;

/* A lookup: one attention shape on one device (DESIGN.md "Words"). */
typedef struct attune_shape_q {
    const char *device;  /* "cpu", CUDA ordinal "0" (the first GPU),
                            "GPU-<uuid>", or a device name; NULL: the first
                            local GPU attuned reports, else its CPU (asked
                            once: GET /v1/devices, kept for the cache's
                            TTL); a "file:" client: the file's GPU 0, else
                            its CPU */
    long long b, hq, hkv, sq, skv, d; /* all >= 1, hq % hkv == 0 */
    const char *dtype;   /* "f16", "bf16", "f32" or "e4m3" (FP8: q, k, v in
                            e4m3 with per-tensor descales, out bf16) */
    int causal;          /* 0 or 1 */
} attune_shape_q;

typedef struct attune_answer {
    char tactic[96];     /* canonical, e.g. "folded/acc=f32/pad=8" */
    char variant[32];    /* "fused", "fused_splitkv", "split", "split_repeat",
                            "folded", "cudnn" */
    int pad;             /* sq and skv rounded up to this multiple */
    char source[16];     /* "measured", "fleet", "nearest", "predicted",
                            "default" or "pinned" (an operator's pin,
                            docs/api.md "Pins"); "none" (tactic "") when
                            a lookup limited to variants has no tactic
                            (attune_lookup_in) */
    int stale;           /* measured on another software stack */
    double time_us;      /* kernel time per call; NaN when unknown */
    double rel_err;      /* relative L2 error vs float64; NaN when unknown */
    double max_abs_err;  /* NaN when unknown */
    char device[64];     /* the device id the daemon resolved; "" on fallback */
    char shape[128];     /* canonical shape key */
    char error[160];     /* why this is a fallback; "" otherwise */
    /* Appended fields (new fields only ever go here, so the ones above keep
     * their offsets; the struct grew, so a program built with an older
     * attune.h must be rebuilt before it runs against this library). */
    char from_shape[128]; /* source "nearest": the tuned shape that answered;
                             "measured": the shape itself; "" for default */
    double distance;     /* nearest: distance to from_shape (docs/api.md: each
                            doubling or halving of a size counts 1); 0 for
                            measured; NaN for default */
    char measured_stack[24]; /* stack of the answering measurement; "" for default */
    char stack[24];      /* the device's current stack; stale means the two
                            differ; "" on fallback */
    char tuning[16];     /* "queued" or "running": the daemon is tuning this
                            shape (tune on miss); "refused": it will not
                            (predicted over its budget, or its daily quota
                            used: the daemon's answer says which); "" otherwise */
    char fleet_device[64]; /* source "fleet": the device that measured it */
} attune_answer;

/* Cache lifetime of an answer that is not "measured" (predicted, nearest,
 * fleet, default): short, so a runtime picks up the measured winner once
 * the daemon's tune on miss has measured the shape. */
#define ATTUNE_CLIENT_SHORT_TTL_MS 1000

/* New client for the daemon at url (NULL: $ATTUNE_URL, else
 * ATTUNE_CLIENT_DEFAULT_URL). timeout_ms bounds each request, connect
 * included (<= 0: 1000).
 * url "file:PATH" (or "file://PATH"): no daemon; lookups are answered in
 * process, read-only, from the database file or exported table (.json,
 * .json.gz) at PATH, by attuned's own lookup code and rules:
 * libattune_lookup.so.1 (installed with attuned; $ATTUNE_LOOKUP_LIB
 * overrides), loaded on this call, reads the file once, here. Every
 * device of the file answers as a device of another host would in
 * attuned ("cpu" and "0" name the file's CPU and GPU 0; docs/api.md
 * "Lookups without a daemon"). When the library or the file cannot be
 * read, every lookup falls back (ATTUNE_CLIENT_FALLBACK) with the reason
 * in the answer's error; attune_request answers ATTUNE_CLIENT_EIO. Cache: 256 answers, 60 s (answers not measured:
 * ATTUNE_CLIENT_SHORT_TTL_MS, or the TTL when shorter); retry interval
 * after a failure: 1000 ms. Returns NULL on ENOMEM only: a daemon that is down is
 * not an error here. */
attune_client *attune_client_new(const char *url, long timeout_ms);

/* The daemon URL c talks to, as resolved by attune_client_new (argument,
 * else $ATTUNE_URL, else the default; no trailing '/'), e.g. to name it in
 * an error message. Valid until attune_client_free; "" for NULL. */
const char *attune_client_url(const attune_client *c);

/* Free the client and its cache. NULL is a no-op. */
void attune_client_free(attune_client *c);

/* Cache size in answers (0 disables caching) and their time to live.
 * Returns ATTUNE_CLIENT_OK or ATTUNE_CLIENT_EINVAL / ENOMEM (the old cache
 * is kept then). */
int attune_client_set_cache(attune_client *c, int entries, long ttl_ms);

/* After a failure to reach the daemon, fall back at once for retry_ms
 * (0: always try the network). */
void attune_client_set_retry(attune_client *c, long retry_ms);

/* Bearer token sent by attune_request (for POST/DELETE routes); NULL
 * clears it. Returns ATTUNE_CLIENT_OK or ATTUNE_CLIENT_ENOMEM. */
int attune_client_set_token(attune_client *c, const char *token);

/* Fill out with the default answer (source "default"), error text = why
 * (may be NULL). */
void attune_default_answer(attune_answer *out, const char *why);

/* Which tactic to use for q. max_rel_err > 0 overrides the daemon's
 * accuracy bound (relative L2 error); 0 uses it. out is always filled (when
 * non-NULL). Returns ATTUNE_CLIENT_OK, ATTUNE_CLIENT_FALLBACK,
 * ATTUNE_CLIENT_REJECTED or ATTUNE_CLIENT_EINVAL (c, q or out NULL, or q
 * invalid: then no request is made). */
int attune_lookup(attune_client *c, const attune_shape_q *q, double max_rel_err,
                  attune_answer *out);

/* The same among the variants the caller can run (docs/api.md "Ask for
 * what you can run"): variants is a comma-separated list of variant names
 * ("cudnn,split,folded"; NULL or "" = every variant, attune_lookup). The
 * answer is the best tactic of those variants by the daemon's rules. The
 * cache keeps one answer per (device, shape, bound, set of variants); the
 * set's spelling does not matter ("split,cudnn" = "cudnn , split").
 * Fallbacks: the default tactic when the set allows fused, else no tactic
 * at all: tactic "" and source "none" (nothing of the set is known to run;
 * the caller uses its own path). So is the answer when attuned says that
 * the backend lists none of the variants for the shape (HTTP 404:
 * ATTUNE_CLIENT_REJECTED, its reason in error). A list that is not names
 * ([a-z0-9_], comma-separated) is ATTUNE_CLIENT_EINVAL without a request;
 * an unknown name is refused by attuned (ATTUNE_CLIENT_REJECTED). */
int attune_lookup_in(attune_client *c, const attune_shape_q *q, const char *variants,
                     double max_rel_err, attune_answer *out);

/* The device a lookup without one is for (attune_shape_q.device NULL):
 * the id of the first local GPU attuned reports (GET /v1/devices), else of
 * its first local device (the CPU), into buf (len bytes; 64 hold any id).
 * Kept for the cache's TTL, as lookups keep it. Returns ATTUNE_CLIENT_OK;
 * FALLBACK (unreachable, failing, or no local device) or REJECTED (a 4xx)
 * with buf holding why; EINVAL for a "file:" client (its lookups ask the
 * file's GPU 0, else its CPU) or bad arguments. */
int attune_default_device(attune_client *c, char *buf, size_t len);

/* Drop every cached answer. */
void attune_client_clear_cache(attune_client *c);

/* Raw request for tools: method ("GET", "POST", "DELETE"), path with query
 * ("/v1/jobs/3"), body (JSON text or NULL). The token is sent when set.
 * On an HTTP answer of any status returns ATTUNE_CLIENT_OK with *status and
 * *response (malloc'd, NUL-terminated; release with attune_free); else
 * ATTUNE_CLIENT_EIO (unreachable, timeout; *response NULL) or EINVAL /
 * ENOMEM. */
int attune_request(attune_client *c, const char *method, const char *path, const char *body,
                   long *status, char **response);

/* Free memory returned by this library. */
void attune_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
