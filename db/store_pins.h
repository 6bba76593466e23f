/* store_pins.h -- pins (tuner/pin.h) as rows of the store: add, remove,
 * list, and merge from an imported table (schema version 6, docs/schema.md).
 *
 * A pin's identity is (action, tactic, shape, device, model, the model in
 * any case): writing the same rule again keeps its id and creation time
 * and takes the new reason and author. At most PIN_MAX pins are in force.
 * A removed pin stays as a tombstone (removed = 1, never listed nor
 * answered) so that merges (imports, fleet sync) are last-writer-wins by
 * updated_at: a removal is not undone by an older copy of the rule. */
#ifndef ATTUNE_STORE_PINS_H
#define ATTUNE_STORE_PINS_H

#include "../common/pin_rule.h"
#include "store.h"

/* Check p (pin_check: normalised in place) and store it in its own
 * transaction. p->created_at 0 is now. On success p->id is the row's id
 * and *added (may be NULL) 1 when it is new, 0 when an equal rule was
 * updated. ATTUNE_EINVAL (err says why), ATTUNE_ETOOBIG (PIN_MAX pins
 * already), or a store error. */
int store_pin_put(store *st, pin *p, int *added, char *err, size_t errlen);

/* Remove pin id (a tombstone, updated now); *out (may be NULL) receives it
 * as it was. 0 or ATTUNE_ENOTFOUND (no such pin in force). */
int store_pin_delete(store *st, int64_t id, pin *out);

/* Every pin in force, oldest first; *out malloc'd (NULL when *n == 0). */
int store_pins_list(store *st, pin **out, int *n);

/* The same with the tombstones (removed = 1): what fleet sync pushes. */
int store_pins_all(store *st, pin **out, int *n);

/* The pins that can apply to device dev (its id, its model's name, or
 * every device): what its exported table carries. As store_pins_list. */
int store_pins_for(store *st, const attn_device_info *dev, pin **out, int *n);

/* Inside a transaction (store_import's, a fleet pull's): merge each of
 * p[0..n) (checked already; updated_at 0: its created_at), a rule or a
 * tombstone: it replaces the stored equal rule only when it changed later.
 * *added counts the rules it put in force. Past PIN_MAX rules in force:
 * with skipped NULL (an import), ATTUNE_ETOOBIG (the caller rolls back);
 * else the new rules that do not fit are left out and counted in
 * *skipped, the rest merged as usual (tombstones and changes to stored
 * rules always are), the rules that can apply to a device of this store
 * (its devices table) given the room first, then p's order. */
int store_pins_merge(store *st, const pin *p, int n, int *added, int *skipped);

#endif
