/* cli_remote.c -- attune query / jobs / tune --url: the daemon's API from
 * the command line, through libattune_client. */
#include "cli_remote.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../attune.h"
#include "common/json_num.h"
#include "common/shape_json.h"
#include "kernels/attn.h"
#include "tuner/grid.h"

static const char query_usage[] =
    "usage: attune query [--url URL] [--timeout-ms MS] --device ID\n"
    "                    (--shape KEY | --b N --hq N --hkv N --sq N --skv N --d N\n"
    "                     --dtype T [--causal]) [--max-rel-err X] [--json]\n"
    "\n"
    "Which tactic attuned serves for a shape (GET /v1/tactic), with where the\n"
    "answer comes from: source measured (this shape was tuned), fleet (tuned on\n"
    "fleet_device, the same model), predicted or nearest (the prediction model:\n"
    "time_us is predicted; from_shape is the closest tuned shape it leaned on, at\n"
    "a log-shape distance; nearest when the answer is that shape's winner) or\n"
    "default (nothing qualifies); stale yes when it was measured under another\n"
    "software stack (measured_stack differs from the device's current stack);\n"
    "tuning queued/running while attuned tunes the shape after this miss.\n"
    "\n"
    "  --url URL         the daemon (default $ATTUNE_URL, else " ATTUNE_CLIENT_DEFAULT_URL ")\n"
    "  --device ID       cpu, a CUDA ordinal (0 is the first GPU), a device id\n"
    "                    or name (fleet devices too)\n"
    "  --shape KEY       e.g. b1.hq8.hkv1.sq50.skv128.d64.f16.nc (.c: causal)\n"
    "  --max-rel-err X   accuracy bound for this query, 0 < X <= 1\n"
    "  --timeout-ms MS   per request (default 2000)\n"
    "  --json            the answer as JSON (fallback/refused flags, error)\n"
    "\n"
    "The answer is printed even when there is none from the daemon: the default\n"
    "tactic " ATTUNE_CLIENT_DEFAULT_TACTIC " (source default), what a runtime's client falls back to.\n"
    "Exit status: 0 attuned answered; 1 attuned could not be reached or failed\n"
    "(default answer printed); 2 usage; 3 attuned refused the question, e.g. an\n"
    "unknown device (default answer printed, its error on stderr).\n";

static const char jobs_usage[] =
    "usage: attune jobs [--url URL] [--json] [--state S] [--device ID]   list jobs\n"
    "       attune jobs [--url URL] [--json] [--wait] ID                show one job\n"
    "       attune jobs [--url URL] --cancel [--token-file F] ID         cancel it\n"
    "\n"
    "Jobs of a running attuned, newest first: id, state (queued, running, done,\n"
    "failed, canceled), shapes done/total, device, and the error of a failed\n"
    "job. --state and --device filter the list. --wait polls until the job is\n"
    "done, failed or canceled, printing a line at each change. --cancel cancels\n"
    "a queued job at once and asks a running one to stop after the tactic in\n"
    "flight (it then reads canceled; measurements taken so far are kept).\n"
    "URL defaults to $ATTUNE_URL, else " ATTUNE_CLIENT_DEFAULT_URL ". The token (for\n"
    "--cancel) comes from --token-file, else $ATTUNE_TOKEN, else the file\n"
    "$ATTUNE_TOKEN_FILE, else ./var/token.\n"
    "Exit status: 0 success (with --wait: the job ended done); 1 error, or with\n"
    "--wait a job that ended failed or canceled; 2 usage.\n";

static const char tune_usage[] =
    "usage: attune tune --url URL --device ID (--shape KEY ... | --grid FILE)\n"
    "                   [--token-file F] [--wait] [--quiet]\n"
    "\n"
    "Queue a tuning job on a running attuned (POST /v1/tune) and print its id.\n"
    "The daemon measures every applicable tactic of each shape on its device,\n"
    "skipping tactics it already has, and serves each result as it is taken.\n"
    "\n"
    "  --url URL         the daemon, e.g. " ATTUNE_CLIENT_DEFAULT_URL "\n"
    "  --device ID       a device of the daemon's host: cpu, a CUDA ordinal (0 is\n"
    "                    the first GPU), a device id or name\n"
    "  --shape KEY       canonical key, e.g. b1.hq8.hkv1.sq50.skv128.d64.f16.nc\n"
    "                    (repeatable); or --grid FILE, a grids/*.json file\n"
    "  --token-file F    the bearer token; default $ATTUNE_TOKEN, else the file\n"
    "                    $ATTUNE_TOKEN_FILE, else ./var/token (the daemon's token\n"
    "                    file; /etc/attune/token under systemd)\n"
    "  --wait            follow the job to its end, a line at each change\n"
    "  --quiet           with --wait: no progress lines\n"
    "\n"
    "Without --url, `attune tune --db FILE` tunes straight into a database file\n"
    "(see `attune tune --help`).\n"
    "Exit status: 0 queued (with --wait: the job ended done); 1 error, or with\n"
    "--wait a job that ended failed or canceled; 2 usage.\n";

/* ---- options: --name VALUE, --flag, positionals */

typedef struct ropt {
    const char *name;
    const char **value;  /* NULL for a flag */
    int *flag;
    const char ***multi; /* repeatable */
    int *nmulti;
} ropt;

static int parse(int argc, char **argv, const ropt *opts, const char **pos, int maxpos,
                 int *npos, const char *usage)
{
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 3;
        }
        if (a[0] == '-' && a[1] != 0) {
            const ropt *o = NULL;
            for (const ropt *p = opts; p->name != NULL; p++)
                if (strcmp(p->name, a) == 0)
                    o = p;
            if (o == NULL) {
                fprintf(stderr, "attune %s: unknown option %s\n%s", argv[0], a, usage);
                return 2;
            }
            if (o->flag != NULL) {
                *o->flag = 1;
                continue;
            }
            if (i + 1 >= argc) {
                fprintf(stderr, "attune %s: option %s needs a value\n", argv[0], a);
                return 2;
            }
            const char *v = argv[++i];
            if (o->multi != NULL) {
                const char **g = realloc(*o->multi, (size_t)(*o->nmulti + 1) * sizeof *g);
                if (g == NULL)
                    return 1;
                g[(*o->nmulti)++] = v;
                *o->multi = g;
            } else {
                *o->value = v;
            }
        } else {
            if (*npos >= maxpos) {
                fprintf(stderr, "attune %s: unexpected argument '%s'\n", argv[0], a);
                return 2;
            }
            pos[(*npos)++] = a;
        }
    }
    return 0;
}

static int parse_ll(const char *s, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

/* The bearer token for mutating routes (see jobs_usage). */
static int load_token(const char *file, char *tok, size_t len)
{
    const char *env = getenv("ATTUNE_TOKEN");
    if (file == NULL && env != NULL && *env != 0) {
        snprintf(tok, len, "%s", env);
        return 0;
    }
    if (file == NULL)
        file = getenv("ATTUNE_TOKEN_FILE");
    if (file == NULL)
        file = "./var/token";
    FILE *f = fopen(file, "r");
    if (f == NULL) {
        fprintf(stderr, "attune: cannot read token file %s: %s (use --token-file)\n", file,
                strerror(errno));
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
static size_t append_param(char *dst, size_t len, const char *prefix, const char *value)
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
static void print_http_error(const char *what, long status, const char *body)
{
    json_error_t je;
    json_t *o = body != NULL ? json_loads(body, 0, &je) : NULL;
    const char *msg = json_string_value(json_object_get(o, "error"));
    fprintf(stderr, "attune: %s: HTTP %ld: %s\n", what, status, msg ? msg : "(no message)");
    json_decref(o);
}

/* Say that attuned at c's URL did not answer (why may be NULL), and how to
 * point to it. */
static void print_unreachable(const char *prefix, const attune_client *c, const char *why)
{
    fprintf(stderr, "%s: cannot reach attuned at %s%s%s (is it running? give its "
                    "address with --url URL or ATTUNE_URL)\n",
            prefix, attune_client_url(c), why != NULL ? ": " : "", why != NULL ? why : "");
}

/* GET path and parse the JSON answer; NULL (error printed) unless 200. */
static json_t *get_json(attune_client *c, const char *path, const char *what)
{
    long status = 0;
    char *body = NULL;
    if (attune_request(c, "GET", path, NULL, &status, &body) != ATTUNE_CLIENT_OK) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "attune: %s", what);
        print_unreachable(prefix, c, NULL);
        return NULL;
    }
    json_t *o = NULL;
    if (status != 200) {
        print_http_error(what, status, body);
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
    printf("%-14s %s\n%-14s %s\n", "tactic", a->tactic, "source", a->source);
    if (strcmp(a->source, "nearest") == 0 || strcmp(a->source, "predicted") == 0) {
        printf("%-14s %s\n", "from_shape", a->from_shape);
        print_num("distance", a->distance);
    }
    if (strcmp(a->source, "fleet") == 0)
        printf("%-14s %s\n", "fleet_device", a->fleet_device);
    if (a->tuning[0])
        printf("%-14s %s\n", "tuning", a->tuning);
    if (strcmp(a->source, "default") != 0) {
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

int cli_query_main(int argc, char **argv)
{
    const char *url = NULL, *device = NULL, *key = NULL, *dtype = NULL, *mre_s = NULL,
               *tmo_s = NULL, *fields[6] = {NULL};
    int causal = 0, json = 0, npos, rc;
    const ropt opts[] = {{"--url", &url, NULL, NULL, NULL},
                         {"--timeout-ms", &tmo_s, NULL, NULL, NULL},
                         {"--device", &device, NULL, NULL, NULL},
                         {"--shape", &key, NULL, NULL, NULL},
                         {"--b", &fields[0], NULL, NULL, NULL},
                         {"--hq", &fields[1], NULL, NULL, NULL},
                         {"--hkv", &fields[2], NULL, NULL, NULL},
                         {"--sq", &fields[3], NULL, NULL, NULL},
                         {"--skv", &fields[4], NULL, NULL, NULL},
                         {"--d", &fields[5], NULL, NULL, NULL},
                         {"--dtype", &dtype, NULL, NULL, NULL},
                         {"--causal", NULL, &causal, NULL, NULL},
                         {"--max-rel-err", &mre_s, NULL, NULL, NULL},
                         {"--json", NULL, &json, NULL, NULL},
                         {NULL, NULL, NULL, NULL, NULL}};
    if ((rc = parse(argc, argv, opts, NULL, 0, &npos, query_usage)) != 0)
        return rc == 3 ? 0 : rc;
    if (device == NULL) {
        fprintf(stderr, "attune query: --device is required\n%s", query_usage);
        return 2;
    }
    attune_shape_q q = {.device = device};
    char dt[8] = "";
    if (key != NULL) {
        attn_shape s;
        char err[ATTUNE_ERRLEN];
        if (attn_shape_parse(key, &s, err, sizeof err) != 0) {
            fprintf(stderr, "attune query: --shape %s: %s\n", key, err);
            return 2;
        }
        q.b = s.b; q.hq = s.hq; q.hkv = s.hkv; q.sq = s.sq; q.skv = s.skv; q.d = s.d;
        snprintf(dt, sizeof dt, "%s", attn_dtype_name(s.dtype));
        q.dtype = dt;
        q.causal = s.causal;
    } else {
        static const char *const names[6] = {"--b", "--hq", "--hkv", "--sq", "--skv", "--d"};
        long long *dst[6] = {&q.b, &q.hq, &q.hkv, &q.sq, &q.skv, &q.d};
        for (int i = 0; i < 6; i++)
            if (fields[i] == NULL || parse_ll(fields[i], dst[i]) != 0) {
                fprintf(stderr, "attune query: give --shape KEY or an integer %s\n", names[i]);
                return 2;
            }
        if (dtype == NULL) {
            fprintf(stderr, "attune query: --dtype f16|bf16|f32 is required\n");
            return 2;
        }
        q.dtype = dtype;
        q.causal = causal;
    }
    double mre = 0;
    if (mre_s != NULL) {
        char *end;
        mre = strtod(mre_s, &end);
        if (end == mre_s || *end || !(mre > 0 && mre <= 1)) {
            fprintf(stderr, "attune query: --max-rel-err must be in (0, 1]\n");
            return 2;
        }
    }
    long long tmo = 2000;
    if (tmo_s != NULL && (parse_ll(tmo_s, &tmo) != 0 || tmo < 1 || tmo > 600000)) {
        fprintf(stderr, "attune query: --timeout-ms must be 1..600000\n");
        return 2;
    }
    attune_client *c = attune_client_new(url, (long)tmo);
    if (c == NULL) {
        fprintf(stderr, "attune query: out of memory\n");
        return 1;
    }
    attune_answer a;
    rc = attune_lookup(c, &q, mre, &a);
    if (rc == ATTUNE_CLIENT_EINVAL) {
        fprintf(stderr, "attune query: %s\n", a.error);
        attune_client_free(c);
        return 2;
    }
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:s, s:b, s:b, s:b}", "device", a.device,
                              "shape", a.shape, "tactic", a.tactic, "pad", a.pad, "source",
                              a.source, "stale", a.stale, "fallback", rc != ATTUNE_CLIENT_OK,
                              "refused", rc == ATTUNE_CLIENT_REJECTED);
        if (o != NULL) {
            json_object_set_new(o, "variant", json_string(a.variant));
            json_object_set_new(o, "time_us", json_num(a.time_us));
            json_object_set_new(o, "rel_err", json_num(a.rel_err));
            if (a.stack[0])
                json_object_set_new(o, "stack", json_string(a.stack));
            if (a.measured_stack[0])
                json_object_set_new(o, "measured_stack", json_string(a.measured_stack));
            if (a.tuning[0])
                json_object_set_new(o, "tuning", json_string(a.tuning));
            if (a.fleet_device[0])
                json_object_set_new(o, "fleet_device", json_string(a.fleet_device));
            if (strcmp(a.source, "nearest") == 0 || strcmp(a.source, "predicted") == 0) {
                json_object_set_new(o, "from_shape", json_string(a.from_shape));
                json_object_set_new(o, "distance", json_num(a.distance));
            }
            if (a.error[0])
                json_object_set_new(o, "error", json_string(a.error));
            char *text = json_num_dumps(o, JSON_INDENT(2));
            if (text != NULL)
                puts(text);
            free(text);
            json_decref(o);
        }
    } else {
        print_answer(&a);
    }
    if (rc == ATTUNE_CLIENT_REJECTED) {
        long status;
        const char *msg = refusal_text(a.error, &status);
        fprintf(stderr, "attune query: attuned refused the question: %s", msg);
        if (status > 0)
            fprintf(stderr, " (HTTP %ld)", status);
        fprintf(stderr, "; printed the default answer a runtime would get\n");
        rc = 3;
    } else if (rc != ATTUNE_CLIENT_OK) {
        /* a 5xx or a garbled answer: reached, but failing */
        if (strncmp(a.error, "HTTP ", 5) == 0 || strstr(a.error, "malformed") != NULL)
            fprintf(stderr, "attune query: attuned at %s failed: %s\n", attune_client_url(c),
                    a.error);
        else
            print_unreachable("attune query", c, a.error);
        fprintf(stderr, "attune query: printed the default answer\n");
        rc = 1;
    }
    attune_client_free(c);
    return rc;
}

/* ---- attune jobs */

static void print_job_line(json_t *j)
{
    const char *err = json_string_value(json_object_get(j, "error"));
    printf("%6lld  %-9s %5lld/%-5lld %s%s%s\n",
           (long long)json_integer_value(json_object_get(j, "id")),
           json_string_value(json_object_get(j, "state")),
           (long long)json_integer_value(json_object_get(j, "done")),
           (long long)json_integer_value(json_object_get(j, "total")),
           json_string_value(json_object_get(j, "device")), err ? "  " : "", err ? err : "");
}

/* The column names above print_job_line's. */
static void print_job_header(void)
{
    printf("%6s  %-9s %-11s %s\n", "ID", "STATE", " DONE/TOTAL", "DEVICE");
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
        json_t *j = get_json(c, path, "job");
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

int cli_jobs_main(int argc, char **argv)
{
    const char *url = NULL, *token_file = NULL, *state = NULL, *device = NULL, *pos[1];
    int json = 0, cancel = 0, wait = 0, npos, rc;
    const ropt opts[] = {{"--url", &url, NULL, NULL, NULL},
                         {"--token-file", &token_file, NULL, NULL, NULL},
                         {"--state", &state, NULL, NULL, NULL},
                         {"--device", &device, NULL, NULL, NULL},
                         {"--json", NULL, &json, NULL, NULL},
                         {"--cancel", NULL, &cancel, NULL, NULL},
                         {"--wait", NULL, &wait, NULL, NULL},
                         {NULL, NULL, NULL, NULL, NULL}};
    if ((rc = parse(argc, argv, opts, pos, 1, &npos, jobs_usage)) != 0)
        return rc == 3 ? 0 : rc;
    long long id = 0;
    if (npos == 1 && (parse_ll(pos[0], &id) != 0 || id < 1)) {
        fprintf(stderr, "attune jobs: job id must be a positive integer\n");
        return 2;
    }
    if ((cancel || wait) && npos == 0) {
        fprintf(stderr, "attune jobs: --cancel and --wait need a job id\n%s", jobs_usage);
        return 2;
    }
    attune_client *c = attune_client_new(url, 10000);
    if (c == NULL)
        return 1;
    rc = 1;
    char path[512];
    if (cancel) {
        char tok[512];
        long status = 0;
        char *body = NULL;
        if (load_token(token_file, tok, sizeof tok) != 0 ||
            attune_client_set_token(c, tok) != ATTUNE_CLIENT_OK)
            goto out;
        snprintf(path, sizeof path, "/v1/jobs/%lld", id);
        if (attune_request(c, "DELETE", path, NULL, &status, &body) != ATTUNE_CLIENT_OK) {
            print_unreachable("attune jobs", c, NULL);
            goto out;
        }
        if (status == 200) {
            json_error_t je;
            json_t *j = json_loads(body, 0, &je);
            if (json_is_true(json_object_get(j, "cancel_requested")))
                printf("job %lld: cancel requested; it stops after the tactic in flight "
                       "(measurements taken so far are kept); follow it with "
                       "`attune jobs --wait %lld`\n", id, id);
            else
                printf("job %lld: canceled\n", id);
            if (j != NULL) {
                print_job_header();
                print_job_line(j);
            }
            json_decref(j);
            rc = 0;
        } else {
            print_http_error("cancel", status, body);
        }
        attune_free(body);
        goto out;
    }
    if (npos == 1) {
        if (wait) {
            rc = wait_job(c, id, json);
            goto out;
        }
        snprintf(path, sizeof path, "/v1/jobs/%lld", id);
    } else {
        size_t k = (size_t)snprintf(path, sizeof path, "/v1/jobs");
        if (state != NULL)
            k += append_param(path + k, sizeof path - k, "?state=", state);
        if (device != NULL && k < sizeof path)
            append_param(path + k, sizeof path - k, state ? "&device=" : "?device=", device);
    }
    json_t *o = get_json(c, path, "jobs");
    if (o == NULL)
        goto out;
    if (json) {
        char *text = json_num_dumps(o, JSON_INDENT(2));
        if (text != NULL)
            puts(text);
        free(text);
    } else if (npos == 1) {
        print_job_header();
        print_job_line(o);
    } else {
        size_t i;
        json_t *j;
        json_t *arr = json_object_get(o, "jobs");
        if (json_array_size(arr) == 0)
            printf("no jobs\n");
        else
            print_job_header();
        json_array_foreach(arr, i, j)
            print_job_line(j);
    }
    json_decref(o);
    rc = 0;
out:
    attune_client_free(c);
    return rc;
}

/* ---- attune tune --url */

int cli_tune_remote_main(int argc, char **argv)
{
    const char *url = NULL, *device = NULL, *grid = NULL, *token_file = NULL;
    const char **keys = NULL;
    int nkeys = 0, wait = 0, quiet = 0, npos, rc;
    attn_shape *shapes = NULL;
    int n = 0;
    attune_client *c = NULL;
    json_t *body = NULL;
    char *text = NULL, *resp = NULL;
    const ropt opts[] = {{"--url", &url, NULL, NULL, NULL},
                         {"--device", &device, NULL, NULL, NULL},
                         {"--grid", &grid, NULL, NULL, NULL},
                         {"--shape", NULL, NULL, &keys, &nkeys},
                         {"--token-file", &token_file, NULL, NULL, NULL},
                         {"--wait", NULL, &wait, NULL, NULL},
                         {"--quiet", NULL, &quiet, NULL, NULL},
                         {NULL, NULL, NULL, NULL, NULL}};
    if ((rc = parse(argc, argv, opts, NULL, 0, &npos, tune_usage)) != 0) {
        free(keys);
        return rc == 3 ? 0 : rc;
    }
    rc = 2;
    if (device == NULL || (grid == NULL) == (nkeys == 0)) {
        fprintf(stderr, "attune tune: needs --device and either --shape KEY... or --grid "
                        "FILE\n%s", tune_usage);
        goto out;
    }
    char err[ATTUNE_ERRLEN];
    if (grid != NULL) {
        if (grid_load(grid, &shapes, &n, err, sizeof err) != 0) {
            fprintf(stderr, "attune tune: grid %s: %s\n", grid, err);
            goto out;
        }
    } else {
        if ((shapes = calloc((size_t)nkeys, sizeof *shapes)) == NULL)
            goto out;
        for (n = 0; n < nkeys; n++)
            if (attn_shape_parse(keys[n], &shapes[n], err, sizeof err) != 0) {
                fprintf(stderr, "attune tune: --shape %s: %s\n", keys[n], err);
                goto out;
            }
    }
    rc = 1;
    json_t *arr = json_array();
    body = json_pack("{s:s, s:o}", "device", device, "shapes", arr);
    if (body == NULL)
        goto out;
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, shape_json_new(&shapes[i]));
    if ((text = json_num_dumps(body, JSON_COMPACT)) == NULL)
        goto out;
    char tok[512];
    if (load_token(token_file, tok, sizeof tok) != 0)
        goto out;
    if ((c = attune_client_new(url, 30000)) == NULL || attune_client_set_token(c, tok) != 0)
        goto out;
    long status = 0;
    if (attune_request(c, "POST", "/v1/tune", text, &status, &resp) != ATTUNE_CLIENT_OK) {
        print_unreachable("attune tune", c, NULL);
        goto out;
    }
    if (status != 202) {
        print_http_error("tune", status, resp);
        goto out;
    }
    json_error_t je;
    json_t *o = json_loads(resp, 0, &je);
    long long id = json_integer_value(json_object_get(o, "job"));
    json_decref(o);
    printf("job %lld queued: %d shapes on %s\n", id, n, device);
    fflush(stdout);
    rc = wait ? wait_job(c, id, quiet) : 0;
out:
    attune_free(resp);
    free(text);
    json_decref(body);
    attune_client_free(c);
    free(shapes);
    free(keys);
    return rc;
}
