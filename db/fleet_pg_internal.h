/* fleet_pg_internal.h -- what the db/fleet_pg*.c files share: the
 * connection handle, libpq error mapping, dimension ids and the model
 * refresh. Not part of the contract (db/fleet_pg.h is). */
#ifndef ATTUNE_FLEET_PG_INTERNAL_H
#define ATTUNE_FLEET_PG_INTERNAL_H

#include <libpq-fe.h>

#include "../common/attune_err.h"
#include "fleet_pg.h"

/* string -> server id, for shapes, tactics, stacks, devices, models:
 * dimension rows never change id once committed, so a connection looks
 * each up once. */
typedef struct fleet_idmap {
    char **keys;
    int *ids;
    size_t cap, n;   /* cap a power of two; open addressing */
} fleet_idmap;

struct fleet_pg {
    PGconn *conn;
    int schema_version;
    fleet_idmap shapes, tactics, stacks, devices, models;
};

/* Run a command that returns no rows; 0, or the mapped error with err. */
int fleet_pg_cmd(fleet_pg *c, const char *sql, char *err, size_t errlen);

/* The same with n text parameters ($1..$n); what names it in err. */
int fleet_pg_cmd_params(fleet_pg *c, const char *sql, int n, const char *const *params,
                        const char *what, char *err, size_t errlen);

/* A query of one value with n text parameters: 0 with *v the first row's
 * first column (strtoll) and *found 1, or *found 0 (and *v untouched)
 * when there is no row; else the mapped error, what naming it in err. */
int fleet_pg_value(fleet_pg *c, const char *sql, int n, const char *const *params,
                   int64_t *v, int *found, const char *what, char *err, size_t errlen);

/* Map a failed result (r may be NULL; it is not cleared) to an attune
 * code with err "what: server message": ATTUNE_EIO when the connection
 * is gone, ATTUNE_EDB otherwise. */
int fleet_pg_fail(fleet_pg *c, const PGresult *r, const char *what, char *err,
                  size_t errlen);

/* ROLLBACK when the connection is up, ignoring errors (failure paths,
 * where the first error is the one to report). */
void fleet_pg_rollback(fleet_pg *c);

/* Create or migrate the server schema (fleet_pg_schema.c). */
int fleet_pg_schema_migrate(fleet_pg *c, char *err, size_t errlen);

/* ---- dimension rows (fleet_pg_dims.c): the server id of a value,
 * upserted in its own autocommit statement on first use and cached on c.
 * Must not run inside a push's transaction (a failed upsert would abort
 * it). 0 or the mapped error. */
void fleet_pg_idmap_free(fleet_idmap *m);
int fleet_pg_model_dim(fleet_pg *c, const attn_device_info *d, int *id, char *err,
                       size_t errlen);
int fleet_pg_device_dim(fleet_pg *c, const attn_device_info *d, const char *host, int model,
                        int *id, char *err, size_t errlen);
int fleet_pg_stack_dim(fleet_pg *c, const attn_stack *s, int *id, char *err, size_t errlen);
int fleet_pg_shape_dim(fleet_pg *c, const attn_shape *s, const char *key, int *id, char *err,
                       size_t errlen);
int fleet_pg_tactic_dim(fleet_pg *c, const char *tactic, int *id, char *err, size_t errlen);

/* The same ids from the connection's cache alone, without a server call
 * (a push plans its next batch while the connection is busy): the id, or
 * -1 when not cached; fleet_pg_device_cached: 1 when the device's and its
 * model's ids both are. */
int fleet_pg_shape_cached(const fleet_pg *c, const char *key);
int fleet_pg_tactic_cached(const fleet_pg *c, const char *tactic);
int fleet_pg_stack_cached(const fleet_pg *c, const attn_stack *s);
int fleet_pg_device_cached(const fleet_pg *c, const attn_device_info *d);

/* ---- aggregates (fleet_pg_agg.c) */

/* Server id of d's model, -1 when the server has never seen it. */
int fleet_pg_model_lookup(fleet_pg *c, const attn_device_info *d, int *id, char *err,
                          size_t errlen);

/* Recompute the dirty groups of one model in one transaction, under the
 * model's advisory lock. wait = 0: when another session holds the lock,
 * or the model was refreshed less than min_age_s ago, do nothing. *groups
 * accumulates the groups recomputed. */
int fleet_pg_refresh_model(fleet_pg *c, int model, int min_age_s, int wait, int64_t *groups,
                           char *err, size_t errlen);

#endif
