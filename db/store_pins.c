/* store_pins.c -- pins as rows of the store (store_pins.h). Pins are few
 * and written rarely: the statements are prepared per call, not cached. */
#include "store_pins.h"

#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define PIN_COLS                                                                    \
    "id, action, tactic, shape, device, model, reason, author, created_at, updated_at, " \
    "removed"

/* A prepared statement of sql on st, or the mapped error. */
static int prepare(store *st, const char *sql, sqlite3_stmt **q)
{
    int src = sqlite3_prepare_v2(st->db, sql, -1, q, NULL);
    return src == SQLITE_OK ? 0 : store_sqlite_err(src);
}

static int pin_row(sqlite3_stmt *q, void *row)
{
    pin *p = row;
    char action[16];
    memset(p, 0, sizeof *p);
    p->id = sqlite3_column_int64(q, 0);
    store_column_text(q, 1, action, sizeof action);
    if (pin_action_parse(action, &p->action) != 0)
        return ATTUNE_EFORMAT;
    store_column_text(q, 2, p->tactic, sizeof p->tactic);
    store_column_text(q, 3, p->shape, sizeof p->shape);
    store_column_text(q, 4, p->device, sizeof p->device);
    store_column_text(q, 5, p->model, sizeof p->model);
    store_column_text(q, 6, p->reason, sizeof p->reason);
    store_column_text(q, 7, p->author, sizeof p->author);
    p->created_at = sqlite3_column_int64(q, 8);
    p->updated_at = sqlite3_column_int64(q, 9);
    p->removed = sqlite3_column_int(q, 10);
    return 0;
}

/* Rows of sql (PIN_COLS; ?1, ?2 bound to a, b when not NULL). */
static int pins_query(store *st, const char *sql, const char *a, const char *b, pin **out,
                      int *n)
{
    sqlite3_stmt *q = NULL;
    void *rows = NULL;
    *out = NULL;
    *n = 0;
    int rc = prepare(st, sql, &q);
    if (rc == 0 && ((a != NULL && store_bind_text(q, 1, a) != 0) ||
                    (b != NULL && store_bind_text(q, 2, b) != 0)))
        rc = ATTUNE_EDB;
    if (rc == 0 && (rc = store_collect(q, sizeof(pin), pin_row, &rows, n)) == 0)
        *out = rows;
    sqlite3_finalize(q);
    return rc;
}

int store_pins_list(store *st, pin **out, int *n)
{
    return pins_query(st, "SELECT " PIN_COLS " FROM pins WHERE removed = 0 ORDER BY id", NULL,
                      NULL, out, n);
}

int store_pins_all(store *st, pin **out, int *n)
{
    return pins_query(st, "SELECT " PIN_COLS " FROM pins ORDER BY id", NULL, NULL, out, n);
}

int store_pins_for(store *st, const attn_device_info *dev, pin **out, int *n)
{
    return pins_query(st,
                      "SELECT " PIN_COLS " FROM pins WHERE removed = 0 AND (device = '' OR "
                      "device = ?1) AND (model = '' OR model = ?2 COLLATE NOCASE) ORDER BY id",
                      dev->id, dev->name, out, n);
}

/* Pins stored now into *count. */
static int pins_count(store *st, int *count)
{
    sqlite3_stmt *q = NULL;
    int rc = prepare(st, "SELECT count(*) FROM pins WHERE removed = 0", &q);
    if (rc == 0 && (rc = store_step_row(q)) == 0)
        *count = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    return rc;
}

/* Bind p's identity (action, tactic, shape, device, model) to ?1..?5. */
static int bind_identity(sqlite3_stmt *q, const pin *p)
{
    return store_bind_text(q, 1, pin_action_name(p->action)) ||
           store_bind_text(q, 2, p->tactic) || store_bind_text(q, 3, p->shape) ||
           store_bind_text(q, 4, p->device) || store_bind_text(q, 5, p->model);
}

/* The stored rule equal to p (any removed state) into *old (old->id 0
 * when none). */
static int pin_find(store *st, const pin *p, pin *old)
{
    sqlite3_stmt *q = NULL;
    int rc = prepare(st,
                     "SELECT " PIN_COLS " FROM pins WHERE action = ?1 AND tactic = ?2 AND "
                     "shape = ?3 AND device = ?4 AND model = ?5",
                     &q);
    memset(old, 0, sizeof *old);
    if (rc == 0 && bind_identity(q, p) != 0)
        rc = ATTUNE_EDB;
    if (rc == 0 && (rc = store_step_row(q)) == 0)
        rc = pin_row(q, old);
    sqlite3_finalize(q);
    return rc == ATTUNE_ENOTFOUND ? 0 : rc;
}

/* Write p over the stored row old (old->id 0: insert), every field. */
static int pin_store(store *st, pin *p, const pin *old)
{
    sqlite3_stmt *q = NULL;
    int rc = prepare(st, old->id != 0
                             ? "UPDATE pins SET reason = ?6, author = ?7, created_at = ?8, "
                               "updated_at = ?9, removed = ?10 WHERE id = ?11"
                             : "INSERT INTO pins(action, tactic, shape, device, model, reason, "
                               "author, created_at, updated_at, removed) VALUES (?1, ?2, ?3, "
                               "?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                     &q);
    if (rc == 0 && ((old->id == 0 && bind_identity(q, p)) || store_bind_text(q, 6, p->reason) ||
                    store_bind_text(q, 7, p->author) ||
                    sqlite3_bind_int64(q, 8, p->created_at) ||
                    sqlite3_bind_int64(q, 9, p->updated_at) || sqlite3_bind_int(q, 10, p->removed) ||
                    (old->id != 0 && sqlite3_bind_int64(q, 11, old->id))))
        rc = ATTUNE_EDB;
    if (rc == 0 && (rc = store_exec(q)) == 0)
        p->id = old->id != 0 ? old->id : sqlite3_last_insert_rowid(st->db);
    sqlite3_finalize(q);
    return rc;
}

/* Write p (inside a transaction). local: a rule written here now, which
 * always wins (a rewrite keeps the id and, unless the rule was removed,
 * the creation time); else a merged one (an import, a fleet pull), which
 * wins only when it changed later than the stored one (updated_at). p->id
 * set; *added 1 when the rule is now in force and was not. */
static int pin_write(store *st, pin *p, int local, int *added)
{
    pin old;
    int count = 0, rc = pin_find(st, p, &old);
    *added = 0;
    if (rc != 0)
        return rc;
    if (old.id != 0 && !local && p->updated_at <= old.updated_at) {
        p->id = old.id; /* the stored one is as new or newer */
        return 0;
    }
    if (local && old.id != 0 && !old.removed)
        p->created_at = old.created_at;
    if (local && p->updated_at <= old.updated_at) /* seconds: later than the last change */
        p->updated_at = old.updated_at + 1;
    int was_in_force = old.id != 0 && !old.removed;
    if (!p->removed && !was_in_force && (rc = pins_count(st, &count)) == 0 && count >= PIN_MAX)
        return ATTUNE_ETOOBIG;
    if (rc == 0 && (rc = pin_store(st, p, &old)) == 0)
        *added = !p->removed && !was_in_force;
    return rc;
}

typedef struct put_args {
    pin *p;
    int added;
} put_args;

static int put_tx(store *st, void *ctx)
{
    put_args *a = ctx;
    return pin_write(st, a->p, 1, &a->added);
}

int store_pin_put(store *st, pin *p, int *added, char *err, size_t errlen)
{
    int rc = pin_check(p, err, errlen);
    if (rc != 0)
        return rc;
    if (p->created_at == 0)
        p->created_at = store_now();
    p->updated_at = store_now();
    p->removed = 0;
    put_args a = {.p = p};
    if ((rc = store_tx(st, put_tx, &a)) == ATTUNE_ETOOBIG)
        return attune_fail(err, errlen, rc, "%d pins are stored already: remove some first",
                           PIN_MAX);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "storing the pin failed: %s", attune_strerror(rc));
    if (added != NULL)
        *added = a.added;
    return 0;
}

typedef struct delete_args {
    int64_t id;
    pin *out;
} delete_args;

static int delete_tx(store *st, void *ctx)
{
    delete_args *a = ctx;
    sqlite3_stmt *q = NULL;
    int rc = prepare(st, "SELECT " PIN_COLS " FROM pins WHERE id = ?1 AND removed = 0", &q);
    if (rc == 0 && sqlite3_bind_int64(q, 1, a->id) != SQLITE_OK)
        rc = ATTUNE_EDB;
    if (rc == 0 && (rc = store_step_row(q)) == 0)
        rc = pin_row(q, a->out);
    sqlite3_finalize(q);
    q = NULL;
    /* a tombstone: the removal is itself merged (last writer wins) */
    if (rc == 0)
        rc = prepare(st, "UPDATE pins SET removed = 1, updated_at = max(?2, updated_at + 1) "
                         "WHERE id = ?1", &q);
    if (rc == 0)
        rc = sqlite3_bind_int64(q, 1, a->id) != SQLITE_OK ||
                     sqlite3_bind_int64(q, 2, store_now()) != SQLITE_OK
                 ? ATTUNE_EDB
                 : store_exec(q);
    sqlite3_finalize(q);
    return rc;
}

int store_pin_delete(store *st, int64_t id, pin *out)
{
    pin tmp;
    delete_args a = {.id = id, .out = out != NULL ? out : &tmp};
    return store_tx(st, delete_tx, &a);
}

/* local[i] 1 when p[i] can apply to a device of the store
 * (pin_device_covers over its devices table: this host's, imported and
 * pulled ones): a rule in force here, not only kept for the rest of the
 * fleet; tombstones count as local (merged first). One statement for all
 * n, each pin asked once. */
static int pins_local(store *st, const pin *p, int n, unsigned char *local)
{
    sqlite3_stmt *q = NULL;
    int rc = prepare(st,
                     "SELECT 1 FROM devices WHERE (?1 = '' OR id = ?1) AND "
                     "(?2 = '' OR name = ?2 COLLATE NOCASE) LIMIT 1",
                     &q);
    for (int i = 0; i < n && rc == 0; i++) {
        local[i] = 1;
        if (p[i].removed)
            continue;
        sqlite3_reset(q);
        if (store_bind_text(q, 1, p[i].device) || store_bind_text(q, 2, p[i].model))
            rc = ATTUNE_EDB;
        else if ((rc = store_step_row(q)) == ATTUNE_ENOTFOUND) {
            local[i] = 0;
            rc = 0;
        }
    }
    sqlite3_finalize(q);
    return rc;
}

/* skipped NULL: one pass, in order, PIN_MAX an error. Else two: first the
 * tombstones and the rules of this store's devices, then the others, so
 * that the room left goes to the rules in force here; a new rule past the
 * limit is left out (pin_write refuses it before writing anything). */
int store_pins_merge(store *st, const pin *p, int n, int *added, int *skipped)
{
    *added = 0;
    if (skipped != NULL)
        *skipped = 0;
    unsigned char *local = NULL;
    int rc = 0;
    if (skipped != NULL && n > 0) {
        if ((local = malloc((size_t)n)) == NULL)
            return ATTUNE_ENOMEM;
        rc = pins_local(st, p, n, local);
    }
    for (int pass = 0; rc == 0 && pass < (skipped != NULL ? 2 : 1); pass++) {
        for (int i = 0; rc == 0 && i < n; i++) {
            pin c = p[i];
            int inserted = 0;
            if (c.updated_at == 0)
                c.updated_at = c.created_at; /* a table's pin changed when it was made */
            if (local != NULL && local[i] != (pass == 0))
                continue;
            rc = pin_write(st, &c, 0, &inserted);
            if (rc == ATTUNE_ETOOBIG && skipped != NULL) {
                (*skipped)++;
                rc = 0;
                continue;
            }
            if (rc == 0)
                *added += inserted;
        }
    }
    free(local);
    return rc;
}
