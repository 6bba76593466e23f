/* fleet_pg_internal.h -- what fleet_pg.c and fleet_pg_schema.c share: the
 * connection handle and libpq error mapping. Not part of the contract
 * (db/fleet_pg.h is). */
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
    int staged;      /* the temporary staging tables exist */
    fleet_idmap shapes, tactics, stacks, devices, models;
};

/* Run a command that returns no rows; 0, or the mapped error with err. */
int fleet_pg_cmd(fleet_pg *c, const char *sql, char *err, size_t errlen);

/* Map a failed result (r may be NULL; it is not cleared) to an attune
 * code with err "what: server message": ATTUNE_EIO when the connection
 * is gone, ATTUNE_EDB otherwise. */
int fleet_pg_fail(fleet_pg *c, const PGresult *r, const char *what, char *err,
                  size_t errlen);

/* Create or migrate the server schema (fleet_pg_schema.c). */
int fleet_pg_schema_migrate(fleet_pg *c, char *err, size_t errlen);

#endif
