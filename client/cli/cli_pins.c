/* cli_pins.c -- attune pin / unpin / pins (cli_pins.h). The rule is
 * checked by the same code everywhere: pin_check (tuner/pin.h) in the
 * store, which attuned's POST /v1/pins calls too. */
#include "cli_pins.h"

#include <jansson.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../attune.h" /* ATTUNE_CLIENT_DEFAULT_URL */
#include "cli_common.h"
#include "cli_out.h"
#include "common/pin_json.h"
#include "db/store_pins.h"
#include "tuner/pin.h"
#ifdef ATTUNE_HAVE_CLIENT
#include "cli_remote.h"
#endif

static const char pin_usage[] =
    "usage: attune pin (--force TACTIC | --exclude TACTIC) --reason TEXT\n"
    "                  [--shape KEY|PATTERN] [--device ID | --model NAME]\n"
    "                  [--author NAME] [--url URL [--token-file F] | --db FILE] [--json]\n"
    "\n"
    "Forces a tactic, or excludes tactics, in the answers for a shape, a shape\n"
    "pattern or every shape, on one device, every device of a model, or every\n"
    "device. --force takes a complete tactic (attune tactics lists them);\n"
    "--exclude a tactic or a prefix of whole parts (fused/pad=1 excludes\n"
    "fused/pad=1 and fused/pad=1/tile=...). A PATTERN is a shape key whose\n"
    "fields may be wildcards: b*.hq8.hkv1.sq*.skv*.d256.f16.* (sizes written\n"
    "sq*, dtype and causality *). --author defaults to $USER (the login name). Writing the same\n"
    "rule again updates its reason and author. The most specific pin wins, an\n"
    "exclusion beats a force of the same tactic (docs/api.md \"Pins\").\n"
    "--url (default $ATTUNE_URL): through a running attuned, with the token of\n"
    "its mutating routes (--token-file, else $ATTUNE_TOKEN, $ATTUNE_TOKEN_FILE,\n"
    "./var/token); --db FILE: straight into a database (a running attuned on\n"
    "it follows within 2 s). Given neither: $ATTUNE_URL when set, else\n"
    "$ATTUNE_DB when set (and no --token-file), else " ATTUNE_CLIENT_DEFAULT_URL ".\n"
    "Prints the pin (its id is what unpin takes).\n";

static const char unpin_usage[] =
    "usage: attune unpin [--url URL [--token-file F] | --db FILE] ID\n"
    "\n"
    "Removes pin ID (attune pins lists them); answers go back to what the\n"
    "other pins and the measurements say. Given neither --url nor --db:\n"
    "$ATTUNE_URL when set, else $ATTUNE_DB when set (and no --token-file), else\n"
    ATTUNE_CLIENT_DEFAULT_URL ".\n";

static const char pins_usage[] =
    "usage: attune pins [--url URL | --db FILE] [--device ID] [--json | --csv]\n"
    "\n"
    "Lists the pins, oldest first: id, action, tactic, shape (- every shape),\n"
    "device or model (- every device), author and reason. The table fits the\n"
    "terminal (the author left out, the reason cut first); --csv and --json\n"
    "print every field. --device: only those that can apply to that device.\n"
    "Given neither --url nor --db: $ATTUNE_URL when set, else $ATTUNE_DB when\n"
    "set, else " ATTUNE_CLIENT_DEFAULT_URL ".\n";

/* The database of a pin command given no --db: $ATTUNE_DB when nothing
 * names a daemon (no --url, --token-file or $ATTUNE_URL), else NULL
 * (through attuned, at $ATTUNE_URL or the default URL). */
static const char *pins_db_default(const char *db, const char *url, const char *token_file)
{
    const char *env_url = getenv("ATTUNE_URL"), *env_db = getenv("ATTUNE_DB");
    if (db != NULL || url != NULL || token_file != NULL || (env_url != NULL && *env_url != 0))
        return db;
    return env_db != NULL && *env_db != 0 ? env_db : NULL;
}

/* ---- printing */

/* The pins table's columns; at a narrow terminal the author goes first,
 * and the reason is cut. */
static const cli_col pin_cols[] = {
    {"id", 1, 0, 0},    {"action", 0, 0, 0},        {"tactic", 0, 0, 0},
    {"shape", 0, 0, 0}, {"device/model", 0, 0, 0},  {"author", 0, 1, 0},
    {"reason", 0, 0, 1}};

/* Print pins (a JSON array of pin objects, as GET /v1/pins and pin_json
 * write them) as a table, CSV (every field; empty where the table says
 * "-") or JSON. 0 or 1. */
static int print_pins(const json_t *arr, cli_format fmt)
{
    if (fmt == CLI_JSON) {
        json_t *root = json_pack("{s:O}", "pins", arr);
        char *t = root != NULL ? json_dumps(root, JSON_INDENT(2)) : NULL;
        json_decref(root);
        if (t == NULL)
            return 1;
        puts(t);
        free(t);
        return 0;
    }
    cli_table *t = cli_table_new(pin_cols, 7);
    for (size_t i = 0; t != NULL && i < json_array_size(arr); i++) {
        const json_t *o = json_array_get(arr, i);
#define PIN_FIELD(k) (json_string_value(json_object_get(o, k)) ? json_string_value(json_object_get(o, k)) : "")
        const char *dev = PIN_FIELD("device"), *model = PIN_FIELD("model");
        const char *shape = PIN_FIELD("shape"), *none = fmt == CLI_CSV ? "" : "-";
        char id[24];
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(o, "id")));
        const char *cells[7] = {id, PIN_FIELD("action"), PIN_FIELD("tactic"),
                                shape[0] ? shape : none, dev[0] ? dev : model[0] ? model : none,
                                PIN_FIELD("author"), PIN_FIELD("reason")};
#undef PIN_FIELD
        if (cli_table_add(t, cells) != 0) {
            cli_table_free(t);
            t = NULL;
        }
    }
    if (t == NULL)
        return 1;
    cli_table_print(t, fmt, cli_term_width(), stdout);
    cli_table_free(t);
    return 0;
}

/* ---- the options of attune pin */

typedef struct pin_args {
    const char *force, *exclude, *reason, *shape, *device, *model, *author;
    const char *url, *token_file, *db;
    int json;
} pin_args;

/* The pin the options describe as JSON (the body of POST /v1/pins). */
static json_t *pin_body(const pin_args *a)
{
    const char *author = a->author;
    if (author == NULL)
        author = getenv("USER");
    if (author == NULL)
        author = getenv("LOGNAME");
    struct passwd *pw = author == NULL ? getpwuid(getuid()) : NULL;
    if (pw != NULL)
        author = pw->pw_name;
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "action", a->force ? "force" : "exclude",
                          "tactic", a->force ? a->force : a->exclude, "reason",
                          a->reason ? a->reason : "", "author", author ? author : "");
    if (o != NULL && a->shape != NULL)
        json_object_set_new(o, "shape", json_string(a->shape));
    if (o != NULL && a->device != NULL)
        json_object_set_new(o, "device", json_string(a->device));
    if (o != NULL && a->model != NULL)
        json_object_set_new(o, "model", json_string(a->model));
    return o;
}

/* Options checked that the server (or store) cannot tell apart: which
 * action, and where the pin goes. 0 or the usage status. */
static int pin_args_check(const pin_args *a)
{
    if ((a->force == NULL) == (a->exclude == NULL))
        return cli_usage_error("pin", "give exactly one of --force TACTIC and --exclude "
                                      "TACTIC");
    if (a->reason == NULL || a->reason[0] == 0)
        return cli_usage_error("pin", "--reason TEXT is required: say why, for whoever "
                                      "finds the pin later");
    if (a->device != NULL && a->model != NULL)
        return cli_usage_error("pin", "give --device or --model, not both");
    if (a->db != NULL && (a->url != NULL || a->token_file != NULL))
        return cli_usage_error("pin", "--db writes the database itself: no --url or "
                                      "--token-file with it");
    return 0;
}

/* ---- straight into a database (--db) */

/* p's device spec as the id the store knows (cpu, ordinal, id, name); a
 * force of one shape for a device of this host must be a tactic its
 * backend lists for the shape (attuned checks the same). 0 or 1 (said). */
static int db_device(store *st, pin *p)
{
    attn_device local;
    attn_device_info info;
    attn_stack stack;
    int is_local = 0;
    if (cli_device_resolve(st, p->device, &local, &is_local, &info, &stack) != 0)
        return 1;
    snprintf(p->device, sizeof p->device, "%s", info.id);
    char why[ATTUNE_ERRLEN];
    if (is_local && pin_check(p, why, sizeof why) == 0 && pin_force_listed(p, &local) == 0) {
        fprintf(stderr, "attune pin: device %s does not list tactic %s for %s (attune tactics "
                "--device %s --shape %s lists them)\n", p->device, p->tactic, p->shape,
                p->device, p->shape);
        return 1;
    }
    return 0;
}

/* Print one pin (a store's) as pin_print_pins does. */
static int print_one(const pin *p, int json)
{
    json_t *arr = pin_json_array(p, 1);
    int rc = arr != NULL ? print_pins(arr, json ? CLI_JSON : CLI_TEXT) : 1;
    json_decref(arr);
    return rc;
}

/* Store pin p (checked by pin_from_json) in a->db. */
static int pin_db(const pin_args *a, pin p)
{
    store *st = NULL;
    char err[512];
    int added = 0, rc = 1;
    if (cli_store_open(a->db, 0, &st) != 0)
        return 1;
    if (p.device[0] != 0 && db_device(st, &p) != 0)
        goto out;
    if (store_pin_put(st, &p, &added, err, sizeof err) != 0) {
        fprintf(stderr, "attune pin: %s\n", err);
        goto out;
    }
    rc = print_one(&p, a->json);
out:
    store_close(st);
    return rc;
}

static int unpin_db(const char *db, long long id)
{
    store *st = NULL;
    pin p;
    if (cli_store_open(db, 0, &st) != 0)
        return 1;
    int rc = store_pin_delete(st, id, &p);
    store_close(st);
    if (rc == ATTUNE_ENOTFOUND)
        fprintf(stderr, "attune unpin: no pin %lld (attune pins --db %s lists them)\n", id, db);
    else if (rc != 0)
        fprintf(stderr, "attune unpin: %s\n", attune_strerror(rc));
    else
        printf("pin %lld removed (%s %s)\n", id, pin_action_name(p.action), p.tactic);
    return rc != 0;
}

static int pins_db(const char *db, const char *device, cli_format fmt)
{
    store *st = NULL;
    pin *p = NULL;
    int n = 0, rc = 1;
    attn_device local;
    attn_device_info info;
    attn_stack stack;
    int is_local = 0;
    if (cli_store_open(db, 0, &st) != 0)
        return 1;
    if (device != NULL && cli_device_resolve(st, device, &local, &is_local, &info, &stack) != 0)
        goto out;
    rc = device != NULL ? store_pins_for(st, &info, &p, &n) : store_pins_list(st, &p, &n);
    if (rc != 0) {
        fprintf(stderr, "attune pins: %s\n", attune_strerror(rc));
        goto out;
    }
    json_t *arr = pin_json_array(p, n);
    rc = arr != NULL ? print_pins(arr, fmt) : 1;
    json_decref(arr);
out:
    free(p);
    store_close(st);
    return rc;
}

/* ---- through attuned (--url) */

#ifdef ATTUNE_HAVE_CLIENT
/* Send method path (body may be NULL) with the token; *out the answer's
 * JSON when its status is one of ok1, ok2. Returns the exit status. */
static int call(const char *url, const char *token_file, const char *method, const char *path,
                const char *body, long ok1, long ok2, const char *what, json_t **out)
{
    char tok[512], *resp = NULL;
    long status = 0;
    int rc;
    *out = NULL;
    attune_client *c = cli_remote_client(what + strlen("attune "), url, 10000, &rc);
    if (c == NULL)
        return rc;
    rc = 1;
    if (cli_remote_token(token_file, tok, sizeof tok) != 0 ||
        attune_client_set_token(c, tok) != ATTUNE_CLIENT_OK)
        goto out;
    if (attune_request(c, method, path, body, &status, &resp) != ATTUNE_CLIENT_OK) {
        cli_remote_unreachable(what, c, NULL);
        goto out;
    }
    if (status != ok1 && status != ok2) {
        cli_remote_http_error(what + strlen("attune "), status, resp);
        goto out;
    }
    json_error_t je;
    rc = (*out = json_loads(resp, 0, &je)) == NULL;
out:
    attune_free(resp);
    attune_client_free(c);
    return rc;
}

static int pin_url(const pin_args *a, json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    json_t *o = NULL;
    int rc = text == NULL ? 1
                          : call(a->url, a->token_file, "POST", "/v1/pins", text, 201, 200,
                                 "attune pin", &o);
    free(text);
    if (rc == 0) {
        json_t *arr = json_pack("[O]", json_object_get(o, "pin"));
        rc = arr != NULL ? print_pins(arr, a->json ? CLI_JSON : CLI_TEXT) : 1;
        json_decref(arr);
    }
    json_decref(o);
    return rc;
}

static int unpin_url(const char *url, const char *token_file, long long id)
{
    char path[64];
    json_t *o = NULL;
    snprintf(path, sizeof path, "/v1/pins/%lld", id);
    int rc = call(url, token_file, "DELETE", path, NULL, 200, 200, "attune unpin", &o);
    if (rc == 0)
        printf("pin %lld removed (%s %s)\n", id,
               json_string_value(json_object_get(json_object_get(o, "deleted"), "action")),
               json_string_value(json_object_get(json_object_get(o, "deleted"), "tactic")));
    json_decref(o);
    return rc;
}

static int pins_url(const char *url, const char *device, cli_format fmt)
{
    char path[512] = "/v1/pins";
    if (device != NULL)
        cli_remote_param(path + strlen(path), sizeof path - strlen(path), "?device=", device);
    int rc;
    attune_client *c = cli_remote_client("pins", url, 10000, &rc);
    if (c == NULL)
        return rc;
    json_t *o = cli_remote_get_json(c, path, "pins");
    rc = o != NULL ? print_pins(json_object_get(o, "pins"), fmt) : 1;
    json_decref(o);
    attune_client_free(c);
    return rc;
}
#else
static int no_client(const char *cmd)
{
    fprintf(stderr, "attune %s: --url needs the client library (built when libcurl is found); "
                    "use --db FILE\n", cmd);
    return 1;
}
#endif

/* ---- the commands */

int cli_pin_main(int argc, char **argv)
{
    pin_args a = {0};
    int rc;
    const cli_opt opts[] = {{"force", 0, CLI_VALUE, &a.force},
                            {"exclude", 0, CLI_VALUE, &a.exclude},
                            {"reason", 0, CLI_VALUE, &a.reason},
                            {"shape", 0, CLI_VALUE, &a.shape},
                            {"device", 0, CLI_VALUE, &a.device},
                            {"model", 0, CLI_VALUE, &a.model},
                            {"author", 0, CLI_VALUE, &a.author},
                            {"url", 0, CLI_VALUE, &a.url},
                            {"token-file", 0, CLI_VALUE, &a.token_file},
                            {"db", 0, CLI_VALUE, &a.db},
                            {"json", 0, CLI_FLAG, &a.json},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, pin_usage, NULL, &rc))
        return rc;
    a.db = pins_db_default(a.db, a.url, a.token_file);
    if ((rc = pin_args_check(&a)) != 0)
        return rc;
    json_t *body = pin_body(&a);
    if (body == NULL)
        return 1;
    /* the pin's form (tactic, shape pattern, lengths), as attuned and the
     * store check it: a bad value is a usage error here, before any call */
    pin form;
    char why[512];
    if (pin_from_json(body, "pin", &form, why, sizeof why) != 0) {
        json_decref(body);
        return cli_usage_error("pin", why);
    }
#ifdef ATTUNE_HAVE_CLIENT
    rc = a.db != NULL ? pin_db(&a, form) : pin_url(&a, body);
#else
    rc = a.db != NULL ? pin_db(&a, form) : no_client("pin");
#endif
    json_decref(body);
    return rc;
}

int cli_unpin_main(int argc, char **argv)
{
    const char *url = NULL, *token_file = NULL, *db = NULL;
    int rc;
    long long id = 0;
    cli_pos pos = {.max = 1};
    const cli_opt opts[] = {{"url", 0, CLI_VALUE, &url},
                            {"token-file", 0, CLI_VALUE, &token_file},
                            {"db", 0, CLI_VALUE, &db},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, unpin_usage, &pos, &rc))
        return rc;
    if (pos.n != 1 || cli_llong(pos.v[0], &id) != 0 || id < 1)
        return cli_usage_error("unpin", "give the pin's id, a positive integer (attune pins "
                                        "lists them)");
    if (db != NULL && (url != NULL || token_file != NULL))
        return cli_usage_error("unpin", "--db and --url are exclusive");
    db = pins_db_default(db, url, token_file);
    if (db != NULL)
        return unpin_db(db, id);
#ifdef ATTUNE_HAVE_CLIENT
    return unpin_url(url, token_file, id);
#else
    return no_client("unpin");
#endif
}

int cli_pins_main(int argc, char **argv)
{
    const char *url = NULL, *db = NULL, *device = NULL;
    int json = 0, csv = 0, rc;
    cli_format fmt;
    const cli_opt opts[] = {{"url", 0, CLI_VALUE, &url},
                            {"db", 0, CLI_VALUE, &db},
                            {"device", 0, CLI_VALUE, &device},
                            {"json", 0, CLI_FLAG, &json},
                            {"csv", 0, CLI_FLAG, &csv},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, pins_usage, NULL, &rc))
        return rc;
    if ((rc = cli_format_pick("pins", json, csv, &fmt)) != 0)
        return rc;
    if (db != NULL && url != NULL)
        return cli_usage_error("pins", "--db and --url are exclusive");
    db = pins_db_default(db, url, NULL);
    if (db != NULL)
        return pins_db(db, device, fmt);
#ifdef ATTUNE_HAVE_CLIENT
    return pins_url(url, device, fmt);
#else
    return no_client("pins");
#endif
}
