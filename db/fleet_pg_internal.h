/* fleet_pg_internal.h -- what the db/fleet_pg*.c files share: the
 * connection handle, libpq error mapping, dimension ids and the model
 * refresh. Not part of the contract (db/fleet_pg.h is). */
#ifndef ATTUNE_FLEET_PG_INTERNAL_H
#define ATTUNE_FLEET_PG_INTERNAL_H

#include <libpq-fe.h>
#include <time.h>

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

/* conn is the connection in use: lanes[0], the one fleet_pg_connect
 * opened, except while a push stream works on its second lane (a second
 * session to the same server, opened on first need and kept: a bulk push
 * copies two batches' rows at once, one on each lane, fleet_pg_push.c).
 * The id caches serve both: a dimension row's id is the server's,
 * committed before any use. A push stream's lane threads work on copies of
 * the handle (conn: their lane's session) and never touch the caches; the
 * stream's own thread fills them. */
struct fleet_pg {
    PGconn *conn;
    PGconn *lanes[2];
    int lane;           /* conn == lanes[lane] */
    time_t lane_failed; /* when the second lane could not be opened (0: it could):
                           one lane only for a minute after */
    char *url;          /* to open the second lane (carries no password) */
    char *pin_host, *pin_port; /* lane 0's server, read on the caller's thread when lane 0
                                  connected: lane 1 opens there while a lane thread may be
                                  using lane 0 (one thread per PGconn, libpq's rule) */
    int schema_version;
    int conflict;       /* the last fleet_pg_fail was a conflict (fleet_pg_conflicted) */
    fleet_idmap shapes, tactics, stacks, devices, models;
};

/* Work on lane i (0 or 1; lane 1 must be open). */
void fleet_pg_lane_use(fleet_pg *c, int i);

/* Open lane 1 when it is not (a session as fleet_pg_connect makes one,
 * without the schema check); 0, or an error code when it cannot be opened
 * (remembered: no second try on this handle). Does not change the lane in
 * use. */
int fleet_pg_lane_open(fleet_pg *c);

/* Close lane 1 unless it is open and idle (no transaction, no result
 * pending), and start lane 0 a new session unless it is idle and out of
 * pipeline mode, so that a stream that failed leaves nothing half done
 * (no transaction holding its locks); switches to lane 0. */
void fleet_pg_lane_settle(fleet_pg *c);

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

/* Dimension rows upserted many at once (a batch's, in one round trip):
 * fleet_pg_dims_add_* sends the upsert of a value not cached (nor added
 * before), its own transaction, in pipeline mode after whatever the
 * connection has in flight; fleet_pg_dims_send flushes; fleet_pg_dims_read reads the
 * answers (after those of anything sent before it) and caches the ids
 * (last: leave pipeline mode). 0 or an error code (read: with err). Start
 * from FLEET_DIMS_REQ_INIT, end with fleet_pg_dims_req_free (which
 * leaves it ready for reuse). */
enum { FLEET_DIM_MODEL, FLEET_DIM_DEVICE, FLEET_DIM_STACK, FLEET_DIM_SHAPE, FLEET_DIM_TACTIC };

typedef struct fleet_dims_req {
    int n, cap;
    int *kind;
    char **key;
    int sent_ok;
} fleet_dims_req;

#define FLEET_DIMS_REQ_INIT {0, 0, NULL, NULL, 1}

int fleet_pg_dims_add_model(fleet_pg *c, fleet_dims_req *q, const attn_device_info *d);
int fleet_pg_dims_add_device(fleet_pg *c, fleet_dims_req *q, const attn_device_info *d,
                             const char *host);
int fleet_pg_dims_add_stack(fleet_pg *c, fleet_dims_req *q, const attn_stack *s);
int fleet_pg_dims_add_shape(fleet_pg *c, fleet_dims_req *q, const attn_shape *s,
                            const char *key);
int fleet_pg_dims_add_tactic(fleet_pg *c, fleet_dims_req *q, const char *tactic);
void fleet_pg_dims_send(fleet_pg *c, fleet_dims_req *q);
int fleet_pg_dims_read(fleet_pg *c, fleet_dims_req *q, int last, char *err, size_t errlen);
void fleet_pg_dims_req_free(fleet_dims_req *q);

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
