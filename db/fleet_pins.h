/* fleet_pins.h -- operator pins (tuner/pin.h) in fleet sync: every store
 * sends its pins, tombstones included, to the fleet server and takes the
 * server's back, each rule merged last-writer-wins by updated_at (as
 * imports do, db/store_pins.h). A pin written or removed on one host so
 * reaches every host of the fleet at their next push or pull. */
#ifndef ATTUNE_FLEET_PINS_H
#define ATTUNE_FLEET_PINS_H

#include "../common/pin_rule.h"
#include "fleet_pg.h"

/* Pins (and tombstones) the server keeps at most. */
#define FLEET_PINS_MAX (4 * PIN_MAX)

/* Upsert p[0..n) on the server in one transaction: a rule replaces the
 * server's copy only when it changed later. 0 or the mapped error
 * (ATTUNE_EUNSUPP without libpq). */
int fleet_pg_pins_push(fleet_pg *c, const pin *p, int n, char *err, size_t errlen);

/* The FLEET_PINS_MAX pins the server changed last (updated_at, newest
 * first), tombstones included, as sent (untrusted: the caller checks
 * each); *out malloc'd (NULL when *n == 0). Tombstones are never deleted,
 * so the server may hold more: the oldest are left out, never the rules
 * changed since. */
int fleet_pg_pins_pull(fleet_pg *c, pin **out, int *n, char *err, size_t errlen);

/* The exchange of one store: push its pins, then pull the server's and
 * merge each that passes pin_check, in one local transaction (a bad one
 * refuses the pull, the store unchanged). *pushed, *added: rules sent, and
 * rules the pull put in force here. The store keeps at most PIN_MAX rules
 * in force, and the server may hold more (every host's device pins): the
 * new rules past the limit are left out, counted in *skipped, and the
 * rest merged (store_pins_merge: the rules of this store's devices first,
 * then the newest), not an error. fleet_local_push_pending and
 * fleet_local_pull end with it. */
int fleet_local_pins(store *st, fleet_pg *c, int *pushed, int *added, int *skipped,
                     char *err, size_t errlen);

#endif
