/* cli_remote.c -- attune query / jobs / tune --url: the daemon's API from
 * the command line, through libattune_client. */
#include "cli_remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../attune.h"
#include "cli_common.h"
#include "cli_out.h"
#include "cli_tune.h"
#include "common/json_num.h"
#include "common/shape_json.h"
#include "common/shape.h"
#include "tuner/grid.h"

static const char query_usage[] =
    "usage: attune query [--url URL] [--timeout-ms MS] [--device ID]\n"
    "                    (--shape KEY | --b N --hq N --hkv N --sq N --skv N --d N\n"
    "                     --dtype T [--causal]) [--max-rel-err X]\n"
    "                    [--variants LIST] [--json]\n"
    "       attune query [--url URL] [--device ID] --b N ... --d N [--causal]\n"
    "                    --dtype any|T,T... --max-err X [--variants LIST] [--json]\n"
    "\n"
    "Which tactic attuned serves for a shape (GET /v1/tactic), with where the\n"
    "answer comes from: source measured (this shape was tuned), fleet (tuned on\n"
    "fleet_device, the same model), predicted or nearest (the prediction model:\n"
    "time_us is predicted; from_shape is the closest tuned shape it leaned on, at\n"
    "a log-shape distance; nearest when the answer is that shape's winner) or\n"
    "default (nothing qualifies); stale yes when it was measured under another\n"
    "software stack (measured_stack differs from the device's current stack);\n"
    "tuning queued/running while attuned tunes the shape after this miss,\n"
    "refused when it will not (predicted over its budget, or its daily quota used),\n"
    "deferred while it lists a GPU's tactics for a shape it had not seen.\n"
    "\n"
    "With --dtype any (or a list such as bf16,e4m3) and --max-err X: the fastest\n"
    "measured tactic of any of those dtypes whose error against the bf16 answer\n"
    "is at most X (an e4m3 tactic's error against the bf16 values its inputs came\n"
    "from, a 16/32-bit one's own), the dtype that won and why each other one was\n"
    "refused (not measured, over X, slower, no FP8 on the device); exit 3 when\n"
    "none qualifies. attuned only (not file:).\n"
    "\n"
    "  --url URL         the daemon (default $ATTUNE_URL, else " ATTUNE_CLIENT_DEFAULT_URL "),\n"
    "                    or file:PATH: answer in process, by attuned's rules, from a\n"
    "                    database file or an exported table (.json, .json.gz)\n"
    "  --device ID       cpu, a CUDA ordinal (0 is the first GPU), a device id\n"
    "                    or name (fleet devices too); default: the first local GPU\n"
    "                    attuned reports, else its CPU (a table: its GPU 0, else\n"
    "                    its CPU)\n"
    "  --shape KEY       e.g. b1.hq8.hkv1.sq50.skv128.d64.f16.nc (.c: causal)\n"
    "  --max-rel-err X   accuracy bound for this query, 0 < X <= 1\n"
    "  --variants LIST   only tactics of these variants, e.g. cudnn,split,folded\n"
    "                    (fused, fused_splitkv, split, split_repeat, folded, cudnn):\n"
    "                    the best of what a runtime can run; when none of them\n"
    "                    can answer, tactic is empty and source none\n"
    "  --timeout-ms MS   per request (default 2000)\n"
    "  --json            the answer as JSON (fallback/refused flags, error)\n"
    "\n"
    "The answer is printed even when there is none from the daemon: the default\n"
    "tactic " ATTUNE_CLIENT_DEFAULT_TACTIC " (source default), what a runtime's client falls back to\n"
    "(with --variants that leave out fused: no tactic, source none).\n"
    "Exit status: 0 attuned answered; 1 attuned could not be reached or failed\n"
    "(default answer printed); 2 usage; 3 attuned refused the question, e.g. an\n"
    "unknown device or no tactic of --variants for the shape (the fallback\n"
    "answer printed, the error on stderr).\n";

static const char jobs_usage[] =
    "usage: attune jobs [--url URL] [--json | --csv] [--state S] [--device ID]\n"
    "                   [--kind tune|miss]                 list jobs\n"
    "       attune jobs [--url URL] [--json | --csv] [--wait] ID   show one job\n"
    "       attune jobs [--url URL] --cancel [--token-file F] ID         cancel it\n"
    "\n"
    "Jobs of a running attuned, newest first: id, state (queued, running, done,\n"
    "failed, canceled), shapes done/total, device, and the error of a failed\n"
    "job (the table fits the terminal, the error cut; --csv and --json print\n"
    "it whole). --state, --device and --kind (tune: POST /v1/tune, attune tune\n"
    "--url; miss: tune on miss) filter the list. --wait polls until the job is\n"
    "done, failed or canceled, printing a line at each change. --cancel cancels\n"
    "a queued job at once and asks a running one to stop after the tactic in\n"
    "flight (it then reads canceled; measurements taken so far are kept).\n"
    "URL defaults to $ATTUNE_URL, else " ATTUNE_CLIENT_DEFAULT_URL ". The token (for\n"
    "--cancel) comes from --token-file, else $ATTUNE_TOKEN, else the file\n"
    "$ATTUNE_TOKEN_FILE, else ./var/token.\n"
    "Exit status: 0 success (with --wait: the job ended done); 1 error, or with\n"
    "--wait a job that ended failed or canceled; 2 usage.\n";

/* The bearer token for mutating routes (see jobs_usage). */
int cli_remote_token(const char *file, char *tok, size_t len)
{
    const char *env = getenv("ATTUNE_TOKEN"), *from = "--token-file";
    if (file == NULL && env != NULL && *env != 0) {
        snprintf(tok, len, "%s", env);
        return 0;
    }
    if (file == NULL && (file = getenv("ATTUNE_TOKEN_FILE")) != NULL && *file != 0)
        from = "$ATTUNE_TOKEN_FILE";
    else if (file == NULL || *file == 0)
        file = "./var/token", from = NULL;
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        int e = errno;
        /* say which file, where its name came from, and what to give instead */
        if (from == NULL)
            fprintf(stderr, "attune: no token: $ATTUNE_TOKEN is not set and the default "
                            "token file %s %s (give --token-file FILE, e.g. the daemon's "
                            "token file beside its database)\n",
                    file, e == ENOENT ? "does not exist" : strerror(e));
        else if (e == ENOENT)
            fprintf(stderr, "attune: token file %s (%s) does not exist\n", file, from);
        else
            fprintf(stderr, "attune: cannot read token file %s (%s): %s\n", file, from,
                    strerror(e));
        return -1;
    }
    size_t n = fread(tok, 1, len - 1, f);
    fclose(f);
    tok[n] = 0;
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
        tok[--n] = 0;
    if (n == 0) {
        fprintf(stderr, "attune: token file %s is empty\n", file);
        return -1;
    }
    return 0;
}

/* Append prefix and value percent-encoded (RFC 3986 unreserved kept) to
 * dst; returns the length written. */
size_t cli_remote_param(char *dst, size_t len, const char *prefix, const char *value)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = (size_t)snprintf(dst, len, "%s", prefix);
    for (const unsigned char *p = (const unsigned char *)value; *p && n + 4 < len; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            dst[n++] = (char)*p;
        } else {
            dst[n++] = '%';
            dst[n++] = hex[*p >> 4];
            dst[n++] = hex[*p & 15];
        }
    }
    if (n < len)
        dst[n] = 0;
    return n;
}

/* Print the error of a non-2xx answer. */
void cli_remote_http_error(const char *what, long status, const char *body)
{
    json_error_t je;
    json_t *o = body != NULL ? json_loads(body, 0, &je) : NULL;
    const char *msg = json_string_value(json_object_get(o, "error"));
    fprintf(stderr, "attune: %s: HTTP %ld: %s\n", what, status, msg ? msg : "(no message)");
    json_decref(o);
}

/* 1 when c answers from a table file (file:), in process: no daemon, no
 * HTTP. */
static int from_table(const attune_client *c)
{
    return strncmp(attune_client_url(c), "file:", 5) == 0;
}

/* Say that attuned at c's URL did not answer (why may be NULL), and how to
 * point to it. */
void cli_remote_unreachable(const char *prefix, const attune_client *c, const char *why)
{
    if (from_table(c)) { /* no daemon: a table */
        fprintf(stderr, "%s: %s%s%s\n", prefix, attune_client_url(c),
                why != NULL ? ": " : ": not served from a table file", why != NULL ? why : "");
        return;
    }
    fprintf(stderr, "%s: cannot reach attuned at %s%s%s (is it running? give its "
                    "address with --url URL or ATTUNE_URL)\n",
            prefix, attune_client_url(c), why != NULL ? ": " : "", why != NULL ? why : "");
}

/* The port a URL names, as libcurl (which makes the requests) parses it:
 * -1 when it is not a number in 1..65535, else 0 (none, or a URL that
 * does not parse: the request says why) or the port. */
static long url_port(const char *url)
{
    CURLU *h = curl_url();
    char *port = NULL;
    long v = 0;
    if (h == NULL)
        return 0;
    CURLUcode rc = curl_url_set(h, CURLUPART_URL, url,
                                CURLU_NON_SUPPORT_SCHEME | CURLU_DEFAULT_SCHEME);
    if (rc == CURLUE_BAD_PORT_NUMBER)
        v = -1;
    else if (rc == CURLUE_OK) {
        rc = curl_url_get(h, CURLUPART_PORT, &port, 0);
        if (rc == CURLUE_OK) {
            char *end;
            long n = strtol(port, &end, 10);
            v = *end == 0 && n >= 1 && n <= 65535 ? n : -1;
        }
    }
    curl_free(port);
    curl_url_cleanup(h);
    return v;
}

attune_client *cli_remote_client(const char *cmd, const char *url, long timeout_ms,
                                 int *status)
{
    attune_client *c = attune_client_new(url, timeout_ms);
    *status = 0;
    if (c == NULL) {
        fprintf(stderr, "attune %s: out of memory\n", cmd);
        *status = 1;
        return NULL;
    }
    const char *u = attune_client_url(c);
    if (strncmp(u, "file:", 5) != 0 && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0) {
        *status = cli_usage_error(cmd, "%s %s: give http://HOST:PORT or file:PATH",
                                  url != NULL && *url != 0 ? "--url" : "$ATTUNE_URL", u);
        attune_client_free(c);
        return NULL;
    }
    if (strncmp(u, "file:", 5) != 0 && url_port(u) < 0) {
        *status = cli_usage_error(cmd, "%s %s: the port must be 1-65535",
                                  url != NULL && *url != 0 ? "--url" : "$ATTUNE_URL", u);
        attune_client_free(c);
        return NULL;
    }
    return c;
}

/* GET path and parse the JSON answer; NULL (error printed) unless 200. */
json_t *cli_remote_get_json(attune_client *c, const char *path, const char *what)
{
    long status = 0;
    char *body = NULL;
    if (attune_request(c, "GET", path, NULL, &status, &body) != ATTUNE_CLIENT_OK) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "attune: %s", what);
        cli_remote_unreachable(prefix, c, NULL);
        return NULL;
    }
    json_t *o = NULL;
    if (status != 200) {
        cli_remote_http_error(what, status, body);
    } else {
        json_error_t je;
        o = json_loads(body, 0, &je);
        if (o == NULL)
            fprintf(stderr, "attune: %s: malformed answer\n", what);
    }
    attune_free(body);
    return o;
}

/* ---- attune query */

static void print_num(const char *name, double v)
{
    if (isnan(v))
        printf("%-14s -\n", name);
    else
        printf("%-14s %.6g\n", name, v);
}

/* The answer as text, one "name value" line per field (names as in the
 * JSON answer). */
static void print_answer(const attune_answer *a)
{
    printf("%-14s %s\n%-14s %s\n", "tactic", a->tactic[0] ? a->tactic : "-", "source",
           a->source);
    if (strcmp(a->source, "nearest") == 0 || strcmp(a->source, "predicted") == 0) {
        printf("%-14s %s\n", "from_shape", a->from_shape);
        print_num("distance", a->distance);
    }
    if (strcmp(a->source, "fleet") == 0)
        printf("%-14s %s\n", "fleet_device", a->fleet_device);
    if (a->tuning[0])
        printf("%-14s %s\n", "tuning", a->tuning);
    if (strcmp(a->source, "default") != 0 && strcmp(a->source, "none") != 0) {
        printf("%-14s %s\n", "stale",
               a->stale ? "yes (measured under another software stack)" : "no");
        printf("%-14s %s\n", "measured_stack", a->measured_stack[0] ? a->measured_stack : "-");
    }
    if (a->stack[0])
        printf("%-14s %s\n", "stack", a->stack);
    if (a->device[0])
        printf("%-14s %s\n", "device", a->device);
    print_num("time_us", a->time_us);
    print_num("rel_err", a->rel_err);
}

/* "HTTP 404: unknown device 'x'" -> its message and status, for saying
 * what attuned refused. */
static const char *refusal_text(const char *error, long *status)
{
    char *end;
    *status = 0;
    if (strncmp(error, "HTTP ", 5) != 0)
        return error;
    *status = strtol(error + 5, &end, 10);
    return strncmp(end, ": ", 2) == 0 ? end + 2 : error;
}

/* "..." when the answer's error filled attune_answer.error (the struct is
 * the ABI: a longer message was cut there), else "". */
static const char *cut_mark(const attune_answer *a)
{
    return strlen(a->error) + 1 >= sizeof a->error ? "..." : "";
}

/* The options of `attune query`. */
typedef struct query_args {
    const char *url, *device, *key, *dtype, *mre, *timeout, *fields[6], *variants, *max_err;
    int causal, json;
} query_args;

/* 1 when --dtype names a set ("any", or a comma-separated list). */
static int dtype_is_set(const char *dt)
{
    return dt != NULL && (strcmp(dt, "any") == 0 || strchr(dt, ',') != NULL);
}

/* The question: q from --shape KEY or the six fields and --dtype (dt holds
 * the dtype's name for q->dtype). Returns 0 or 2 (printed). */
static int query_shape(const query_args *a, attune_shape_q *q, char *dt, size_t dtlen)
{
    static const char *const names[6] = {"--b", "--hq", "--hkv", "--sq", "--skv", "--d"};
    if (a->key != NULL) {
        attn_shape s;
        char err[ATTUNE_ERRLEN];
        /* a field beside the key would be a second, silent question */
        const char *also = a->dtype != NULL ? "--dtype" : a->causal ? "--causal" : NULL;
        for (int i = 0; i < 6 && also == NULL; i++)
            if (a->fields[i] != NULL)
                also = names[i];
        if (also != NULL)
            return cli_usage_error("query", "give either --shape KEY or the shape's fields "
                                   "(%s), not both", also);
        if (attn_shape_parse(a->key, &s, err, sizeof err) != 0)
            return cli_usage_error("query", "--shape %s: %s", a->key, err);
        q->b = s.b; q->hq = s.hq; q->hkv = s.hkv; q->sq = s.sq; q->skv = s.skv; q->d = s.d;
        snprintf(dt, dtlen, "%s", attn_dtype_name(s.dtype));
        q->dtype = dt;
        q->causal = s.causal;
        return 0;
    }
    long long *dst[6] = {&q->b, &q->hq, &q->hkv, &q->sq, &q->skv, &q->d};
    for (int i = 0; i < 6; i++)
        if (a->fields[i] == NULL || cli_llong(a->fields[i], dst[i]) != 0)
            return cli_usage_error("query", "give --shape KEY or an integer %s", names[i]);
    if (a->dtype == NULL)
        return cli_usage_error("query", "--dtype f16|bf16|f32|e4m3 is required");
    if (dtype_is_set(a->dtype) && a->max_err == NULL)
        return cli_usage_error("query", "--dtype %s needs --max-err X", a->dtype);
    q->dtype = a->dtype;
    q->causal = a->causal;
    return 0;
}

/* Parse the options into a, q, the bound and the timeout. Returns 0, or the
 * exit status to return (-1 after --help). */
static int query_args_parse(int argc, char **argv, query_args *a, attune_shape_q *q, char *dt,
                            size_t dtlen, double *mre, long long *tmo)
{
    const cli_opt opts[] = {{"url", 0, CLI_VALUE, &a->url},
                            {"timeout-ms", 0, CLI_VALUE, &a->timeout},
                            {"device", 0, CLI_VALUE, &a->device},
                            {"shape", 0, CLI_VALUE, &a->key},
                            {"b", 0, CLI_VALUE, &a->fields[0]},
                            {"hq", 0, CLI_VALUE, &a->fields[1]},
                            {"hkv", 0, CLI_VALUE, &a->fields[2]},
                            {"sq", 0, CLI_VALUE, &a->fields[3]},
                            {"skv", 0, CLI_VALUE, &a->fields[4]},
                            {"d", 0, CLI_VALUE, &a->fields[5]},
                            {"dtype", 0, CLI_VALUE, &a->dtype},
                            {"causal", 0, CLI_FLAG, &a->causal},
                            {"max-rel-err", 0, CLI_VALUE, &a->mre},
                            {"variants", 0, CLI_VALUE, &a->variants},
                            {"max-err", 0, CLI_VALUE, &a->max_err},
                            {"json", 0, CLI_FLAG, &a->json},
                            {NULL, 0, 0, NULL}};
    int status;
    if (cli_parse(argc, argv, opts, query_usage, NULL, &status))
        return status == 0 ? -1 : status;
    q->device = a->device; /* NULL: the client's default (attune.h) */
    int rc = query_shape(a, q, dt, dtlen);
    if (rc != 0)
        return rc;
    *mre = 0;
    if (a->mre != NULL && (cli_double(a->mre, mre) != 0 || !(*mre > 0 && *mre <= 1)))
        return cli_usage_error("query", "--max-rel-err must be in (0, 1]");
    *tmo = 2000;
    if (a->timeout != NULL && (cli_llong(a->timeout, tmo) != 0 || *tmo < 1 || *tmo > 600000))
        return cli_usage_error("query", "--timeout-ms must be 1..600000");
    return 0;
}

/* The answer as JSON, with whether it is a fallback or a refusal; an
 * answer that names no device or shape (a refusal, a fallback) names the
 * asked ones (device, q). */
static void print_answer_json(const attune_answer *a, int rc, const char *device,
                              const attune_shape_q *q)
{
    char key[ATTN_SHAPE_KEY_MAX] = "";
    attn_shape s = {q->b, q->hq, q->hkv, q->sq, q->skv, q->d, ATTN_F16, q->causal};
    if (attn_dtype_parse(q->dtype, &s.dtype) == 0) /* parsed before the lookup */
        attn_shape_key(&s, key, sizeof key);
    json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:b, s:b, s:b}", "device",
                          a->device[0] ? a->device : device, "shape", a->shape[0] ? a->shape : key,
                          "tactic", a->tactic, "pad", a->pad, "source",
                          a->source, "stale", a->stale, "fallback", rc != ATTUNE_CLIENT_OK,
                          "refused", rc == ATTUNE_CLIENT_REJECTED);
    if (o == NULL)
        return;
    json_object_set_new(o, "variant", json_string(a->variant));
    json_object_set_new(o, "time_us", json_num(a->time_us));
    json_object_set_new(o, "rel_err", json_num(a->rel_err));
    const struct {
        const char *name, *value;
    } opt[] = {{"stack", a->stack},
               {"measured_stack", a->measured_stack},
               {"tuning", a->tuning},
               {"fleet_device", a->fleet_device}};
    for (size_t i = 0; i < sizeof opt / sizeof opt[0]; i++)
        if (opt[i].value[0])
            json_object_set_new(o, opt[i].name, json_string(opt[i].value));
    if (strcmp(a->source, "nearest") == 0 || strcmp(a->source, "predicted") == 0) {
        json_object_set_new(o, "from_shape", json_string(a->from_shape));
        json_object_set_new(o, "distance", json_num(a->distance));
    }
    if (a->error[0]) {
        char err[sizeof a->error + 4];
        snprintf(err, sizeof err, "%s%s", a->error, cut_mark(a));
        json_object_set_new(o, "error", json_string(err));
    }
    char *text = json_num_dumps(o, JSON_INDENT(2));
    if (text != NULL)
        puts(text);
    free(text);
    json_decref(o);
}

/* Say why the answer is the default one, and return the exit status: 0
 * answered, 3 refused, 1 unreachable or failing. */
static int query_outcome(int rc, const attune_answer *a, const attune_client *c)
{
    if (rc == ATTUNE_CLIENT_REJECTED) {
        long status;
        const char *msg = refusal_text(a->error, &status);
        fprintf(stderr, "attune query: %s refused the question: %s%s",
                from_table(c) ? "the table" : "attuned", msg,
                cut_mark(a));
        if (status > 0 && !from_table(c))
            fprintf(stderr, " (HTTP %ld)", status);
        fprintf(stderr, "; printed the %s answer a runtime would get\n",
                a->tactic[0] ? "default" : "fallback (no tactic)");
        return 3;
    }
    if (rc == ATTUNE_CLIENT_OK)
        return 0;
    /* a 5xx or a garbled answer: reached, but failing */
    if (strncmp(a->error, "HTTP ", 5) == 0 || strstr(a->error, "malformed") != NULL)
        fprintf(stderr, "attune query: attuned at %s failed: %s%s\n", attune_client_url(c),
                a->error, cut_mark(a));
    else
        cli_remote_unreachable("attune query", c, a->error);
    fprintf(stderr, "attune query: printed the %s answer\n",
            a->tactic[0] ? "default" : "fallback (no tactic)");
    return 1;
}

/* The cross-dtype question (--dtype any|LIST --max-err X): GET /v1/tactic
 * with dtype= the set and max_err= (docs/api.md "Which dtype"); the chosen
 * dtype and tactic, then every dtype's verdict and why (--json: attuned's
 * answer). 0 answered, 3 no dtype qualified (or refused), 1 unreachable. */
static int query_dtypes(const query_args *a, const attune_shape_q *q, attune_client *c)
{
    char path[1024];
    if (from_table(c))
        return cli_usage_error("query", "--dtype %s (which dtype?) is attuned's question, not "
                               "answered from a table file: ask for one dtype",
                               a->dtype);
    size_t n = cli_remote_param(path, sizeof path, "/v1/tactic?device=",
                                cli_device_default(a->device));
    n += (size_t)snprintf(path + n, sizeof path - n,
                          "&b=%lld&hq=%lld&hkv=%lld&sq=%lld&skv=%lld&d=%lld&causal=%d", q->b,
                          q->hq, q->hkv, q->sq, q->skv, q->d, q->causal);
    n += cli_remote_param(path + n, sizeof path - n, "&dtype=", a->dtype);
    n += cli_remote_param(path + n, sizeof path - n, "&max_err=", a->max_err);
    if (a->variants != NULL)
        n += cli_remote_param(path + n, sizeof path - n, "&variants=", a->variants);
    if (n >= sizeof path)
        return cli_usage_error("query", "the question is too long");
    long status = 0;
    char *body = NULL;
    if (attune_request(c, "GET", path, NULL, &status, &body) != ATTUNE_CLIENT_OK) {
        cli_remote_unreachable("attune query", c, NULL);
        return 1;
    }
    json_error_t je;
    json_t *o = json_loads(body, 0, &je);
    attune_free(body);
    const char *err = json_string_value(json_object_get(o, "error"));
    json_t *cands = json_object_get(o, "candidates");
    int rc = status == 200 ? 0 : status >= 500 || o == NULL ? 1 : 3;
    if (a->json && o != NULL) {
        char *text = json_num_dumps(o, JSON_INDENT(2));
        if (text != NULL)
            puts(text);
        free(text);
    } else if (status == 200) {
        static const char *const keys[] = {"dtype", "tactic", "shape", "source", "device"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
            printf("%-14s %s\n", keys[i], json_string_value(json_object_get(o, keys[i])));
        static const char *const nums[] = {"time_us", "rel_err", "src_rel_err", "err",
                                           "max_err"};
        for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
            json_t *v = json_object_get(o, nums[i]);
            if (v != NULL) /* src_rel_err: e4m3 answers only */
                print_num(nums[i], json_is_number(v) ? json_number_value(v) : NAN);
        }
    }
    if (!a->json && json_is_array(cands)) {
        size_t i;
        json_t *k;
        printf("candidates (error against the bf16 answer):\n");
        json_array_foreach(cands, i, k)
            printf("  %-5s %-15s %s\n", json_string_value(json_object_get(k, "dtype")),
                   json_string_value(json_object_get(k, "verdict")),
                   json_string_value(json_object_get(k, "why")));
    }
    if (status != 200)
        fprintf(stderr, "attune query: %s (HTTP %ld)\n", err ? err : "malformed answer",
                status);
    json_decref(o);
    return rc;
}

int cli_query_main(int argc, char **argv)
{
    query_args args = {0};
    attune_shape_q q = {0};
    char dt[8] = "";
    double mre;
    long long tmo;
    int rc = query_args_parse(argc, argv, &args, &q, dt, sizeof dt, &mre, &tmo);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    attune_client *c = cli_remote_client("query", args.url, (long)tmo, &rc);
    if (c == NULL)
        return rc;
    attune_answer a;
    if (args.variants != NULL && args.variants[0] == 0) {
        fprintf(stderr, "attune query: --variants is empty (e.g. cudnn,split,folded)\n");
        attune_client_free(c);
        return 2;
    }
    if (args.max_err != NULL) {
        rc = args.mre != NULL ? cli_usage_error("query", "--max-rel-err does not apply with "
                                                         "--max-err (a question over dtypes)")
             : args.key != NULL ? cli_usage_error("query", "--max-err takes the shape fields "
                                                           "and --dtype any|LIST, not --shape")
                                : query_dtypes(&args, &q, c);
        attune_client_free(c);
        return rc;
    }
    rc = attune_lookup_in(c, &q, args.variants, mre, &a);
    if (rc == ATTUNE_CLIENT_EINVAL) {
        fprintf(stderr, "attune query: %s%s\n", a.error, cut_mark(&a));
        attune_client_free(c);
        return 2;
    }
    if (args.json)
        print_answer_json(&a, rc, cli_device_default(args.device), &q);
    else
        print_answer(&a);
    rc = query_outcome(rc, &a, c);
    attune_client_free(c);
    return rc;
}

/* ---- attune jobs */

static void print_job_line(json_t *j)
{
    const char *err = json_string_value(json_object_get(j, "error"));
    const char *kind = json_string_value(json_object_get(j, "kind"));
    printf("%6lld  %-4s  %-9s %5lld/%-5lld %s%s%s\n",
           (long long)json_integer_value(json_object_get(j, "id")), kind ? kind : "tune",
           json_string_value(json_object_get(j, "state")),
           (long long)json_integer_value(json_object_get(j, "done")),
           (long long)json_integer_value(json_object_get(j, "total")),
           json_string_value(json_object_get(j, "device")), err ? "  " : "", err ? err : "");
}

/* The column names above print_job_line's. */
static void print_job_header(void)
{
    printf("%6s  %-4s  %-9s %-11s %s\n", "ID", "KIND", "STATE", " DONE/TOTAL", "DEVICE");
}

static int job_finished(json_t *j)
{
    const char *s = json_string_value(json_object_get(j, "state"));
    return s == NULL || strcmp(s, "done") == 0 || strcmp(s, "failed") == 0 ||
           strcmp(s, "canceled") == 0;
}

/* Poll job id every half second until it ends; print progress lines. */
static int wait_job(attune_client *c, long long id, int quiet)
{
    char path[64];
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    long long last_done = -1;
    char last_state[16] = "";
    for (;;) {
        json_t *j = cli_remote_get_json(c, path, "job");
        if (j == NULL)
            return 1;
        long long done = json_integer_value(json_object_get(j, "done"));
        const char *s = json_string_value(json_object_get(j, "state"));
        if (!quiet && (done != last_done || strcmp(s ? s : "", last_state) != 0)) {
            if (last_done < 0)
                print_job_header();
            print_job_line(j);
            last_done = done;
            snprintf(last_state, sizeof last_state, "%s", s ? s : "");
        }
        if (job_finished(j)) {
            int ok = s != NULL && strcmp(s, "done") == 0;
            json_decref(j);
            return ok ? 0 : 1;
        }
        json_decref(j);
        usleep(500000);
    }
}

static int print_jobs(json_t *arr, cli_format fmt);

/* DELETE the job; prints what happened. Returns the exit status. */
static int cancel_job(attune_client *c, long long id, const char *token_file)
{
    char tok[512], path[64];
    long status = 0;
    char *body = NULL;
    if (cli_remote_token(token_file, tok, sizeof tok) != 0 ||
        attune_client_set_token(c, tok) != ATTUNE_CLIENT_OK)
        return 1;
    snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    if (attune_request(c, "DELETE", path, NULL, &status, &body) != ATTUNE_CLIENT_OK) {
        cli_remote_unreachable("attune jobs", c, NULL);
        return 1;
    }
    int rc = 1;
    if (status == 200) {
        json_error_t je;
        json_t *j = json_loads(body, 0, &je);
        const char *state = json_string_value(json_object_get(j, "state"));
        /* cancel_requested stays set once the job reads canceled: the state
         * says whether it still runs */
        if (state != NULL && strcmp(state, "running") == 0 &&
            json_is_true(json_object_get(j, "cancel_requested")))
            printf("job %lld: cancel requested; it stops after the tactic in flight "
                   "(measurements taken so far are kept); follow it with "
                   "`attune jobs --wait %lld`\n", id, id);
        else if (state == NULL || strcmp(state, "canceled") == 0)
            printf("job %lld: canceled\n", id);
        else /* done or failed (attuned answers 409 for those) */
            printf("job %lld: %s, nothing to cancel\n", id, state);
        /* the job as `attune jobs ID` shows it (print_jobs' table) */
        json_t *one = j != NULL ? json_pack("[O]", j) : NULL;
        rc = one != NULL ? print_jobs(one, CLI_TEXT) : 0;
        json_decref(one);
        json_decref(j);
    } else {
        cli_remote_http_error("cancel", status, body);
    }
    attune_free(body);
    return rc;
}

/* A job list's columns; at a narrow terminal the error is cut. */
static const cli_col job_cols[] = {{"id", 1, 0, 0},    {"kind", 0, 0, 0},
                                   {"state", 0, 0, 0}, {"done", 1, 0, 0},
                                   {"total", 1, 0, 0}, {"device", 0, 0, 0},
                                   {"error", 0, 0, 1}};

/* Jobs (JSON objects of arr) as a table or CSV. 0 or 1 (out of memory). */
static int print_jobs(json_t *arr, cli_format fmt)
{
    cli_table *t = cli_table_new(job_cols, 7);
    size_t i;
    json_t *j;
    json_array_foreach(arr, i, j) {
        char id[24], done[24], total[24];
        const char *kind = json_string_value(json_object_get(j, "kind"));
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(j, "id")));
        snprintf(done, sizeof done, "%lld",
                 (long long)json_integer_value(json_object_get(j, "done")));
        snprintf(total, sizeof total, "%lld",
                 (long long)json_integer_value(json_object_get(j, "total")));
        const char *cells[7] = {id, kind ? kind : "tune",
                                json_string_value(json_object_get(j, "state")), done, total,
                                json_string_value(json_object_get(j, "device")),
                                json_string_value(json_object_get(j, "error"))};
        if (t != NULL && cli_table_add(t, cells) != 0) {
            cli_table_free(t);
            t = NULL;
        }
    }
    if (t == NULL) {
        fprintf(stderr, "attune: out of memory\n");
        return 1;
    }
    if (fmt == CLI_TEXT && cli_table_rows(t) == 0)
        printf("no jobs\n");
    else
        cli_table_print(t, fmt, cli_term_width(), stdout);
    cli_table_free(t);
    return 0;
}

/* Print one job (id > 0) or the list (filtered by state, device and kind,
 * any may be NULL), as a table, CSV or JSON. Returns the exit status. */
static int show_jobs(attune_client *c, long long id, const char *const filter[3],
                     cli_format fmt)
{
    static const char *const names[3] = {"state=", "device=", "kind="};
    char path[512];
    if (id > 0) {
        snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    } else {
        size_t k = (size_t)snprintf(path, sizeof path, "/v1/jobs");
        char sep = '?', pre[16];
        for (int i = 0; i < 3; i++) {
            if (filter[i] == NULL || k >= sizeof path)
                continue;
            snprintf(pre, sizeof pre, "%c%s", sep, names[i]);
            k += cli_remote_param(path + k, sizeof path - k, pre, filter[i]);
            sep = '&';
        }
    }
    json_t *o = cli_remote_get_json(c, path, "jobs");
    if (o == NULL)
        return 1;
    int rc = 0;
    if (fmt == CLI_JSON) {
        char *text = json_num_dumps(o, JSON_INDENT(2));
        if (text != NULL)
            puts(text);
        free(text);
    } else if (id > 0) {
        json_t *one = json_pack("[O]", o);
        rc = one != NULL ? print_jobs(one, fmt) : 1;
        json_decref(one);
    } else {
        rc = print_jobs(json_object_get(o, "jobs"), fmt);
    }
    json_decref(o);
    return rc;
}

int cli_jobs_main(int argc, char **argv)
{
    const char *url = NULL, *token_file = NULL, *filter[3] = {NULL, NULL, NULL};
    int json = 0, csv = 0, cancel = 0, wait = 0, rc;
    cli_format fmt;
    cli_pos pos = {.max = 1};
    const cli_opt opts[] = {{"url", 0, CLI_VALUE, &url},
                            {"token-file", 0, CLI_VALUE, &token_file},
                            {"state", 0, CLI_VALUE, &filter[0]},
                            {"device", 0, CLI_VALUE, &filter[1]},
                            {"kind", 0, CLI_VALUE, &filter[2]},
                            {"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {"cancel", 0, CLI_FLAG, &cancel},
                            {"wait", 0, CLI_FLAG, &wait},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, jobs_usage, &pos, &rc))
        return rc;
    if ((rc = cli_format_pick("jobs", json, csv, &fmt)) != 0)
        return rc;
    long long id = 0;
    if (pos.n == 1 && (cli_llong(pos.v[0], &id) != 0 || id < 1))
        return cli_usage_error("jobs", "job id must be a positive integer");
    if ((cancel || wait) && pos.n == 0)
        return cli_usage_error("jobs", "--cancel and --wait need a job id");
    static const char *const states[] = {"queued", "running", "done", "failed", "canceled"};
    int known = filter[0] == NULL;
    for (size_t i = 0; i < sizeof states / sizeof states[0] && !known; i++)
        known = strcmp(filter[0], states[i]) == 0;
    if (!known)
        return cli_usage_error("jobs", "--state must be queued, running, done, failed or canceled");
    if (filter[2] != NULL && strcmp(filter[2], "tune") != 0 && strcmp(filter[2], "miss") != 0)
        return cli_usage_error("jobs", "--kind must be tune or miss");
    attune_client *c = cli_remote_client("jobs", url, 10000, &rc);
    if (c == NULL)
        return rc;
    if (cancel)
        rc = cancel_job(c, id, token_file);
    else if (wait)
        rc = wait_job(c, id, json);
    else
        rc = show_jobs(c, id, filter, fmt);
    attune_client_free(c);
    return rc;
}

/* ---- attune tune --url */

/* POST the shapes as a job; *id the job's. Returns the exit status. */
static int queue_job(attune_client *c, const char *device, const attn_shape *shapes, int n,
                     int force, long long *id)
{
    json_t *arr = json_array();
    json_t *body = json_pack("{s:s, s:o, s:b}", "device", device, "shapes", arr, "force", force);
    char *text = NULL, *resp = NULL;
    long status = 0;
    int rc = 1;
    if (body == NULL)
        goto out;
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, shape_json_new(&shapes[i]));
    if ((text = json_num_dumps(body, JSON_COMPACT)) == NULL)
        goto out;
    if (attune_request(c, "POST", "/v1/tune", text, &status, &resp) != ATTUNE_CLIENT_OK) {
        cli_remote_unreachable("attune tune", c, NULL);
        goto out;
    }
    if (status != 202) {
        cli_remote_http_error("tune", status, resp);
        goto out;
    }
    json_error_t je;
    json_t *o = json_loads(resp, 0, &je);
    *id = json_integer_value(json_object_get(o, "job"));
    const char *warn = json_string_value(json_object_get(o, "warning")); /* --force-long */
    if (warn != NULL)
        fprintf(stderr, "attune tune: warning: %s\n", warn);
    json_decref(o);
    rc = 0;
out:
    attune_free(resp);
    free(text);
    json_decref(body);
    return rc;
}

int cli_tune_remote(const cli_tune_args *a)
{
    attn_shape *shapes = NULL;
    attune_client *c = NULL;
    char tok[512];
    long long id = 0;
    int n = 0, rc = cli_shapes_load("tune", a->grid, &a->shapes, &shapes, &n);
    if (rc != 0)
        goto out;
    if ((c = cli_remote_client("tune", a->url, 30000, &rc)) == NULL)
        goto out;
    rc = 1;
    if (cli_remote_token(a->token_file, tok, sizeof tok) != 0 ||
        attune_client_set_token(c, tok) != 0)
        goto out;
    char dflt[256];
    const char *device = a->device;
    if (device == NULL) { /* the daemon's first local GPU, else its CPU */
        if (attune_default_device(c, dflt, sizeof dflt) != ATTUNE_CLIENT_OK) {
            cli_remote_unreachable("attune tune", c, dflt);
            goto out;
        }
        device = dflt;
    }
    if ((rc = queue_job(c, device, shapes, n, a->force_long, &id)) != 0)
        goto out;
    printf("job %lld queued: %d shape%s on %s\n", id, n, n == 1 ? "" : "s", device);
    fflush(stdout);
    rc = a->wait ? wait_job(c, id, a->quiet) : 0;
out:
    attune_client_free(c);
    free(shapes);
    return rc;
}
