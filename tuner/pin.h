/* pin.h -- an operator's pins at a lookup: the pins that apply to one
 * (device, shape), the exclusions and forces among them, and the winner
 * they leave (issue 28 item 1, DESIGN.md "Pins"; the rules and their
 * precedence: docs/api.md "Pins").
 *
 * The rule itself (what a pin is, checking it, what it covers) is
 * common/pin_rule.h, included here; storage is db/store_pins.h; answering
 * is lookup/index.h. */
#ifndef ATTUNE_PIN_H
#define ATTUNE_PIN_H

#include <stddef.h>
#include <stdint.h>

#include "../common/pin_rule.h"
#include "../db/store.h"
#include "../kernels/attn.h"
#include "select.h"
#include "variant_set.h"

/* For a force of one shape key: whether device dev's backend lists its
 * tactic for that shape (1 or 0); -1 when p is no such force (a pattern,
 * every shape, an exclusion) or listing fails. What `attune pin --db`
 * checks for a device of this host (attuned: index_tactic_listed). */
int pin_force_listed(const pin *p, const attn_device *dev);

/* The pins of one lookup: those of pins[0..n) that apply to (dev, key).
 * Reads pins in place (they must outlive the match). */
typedef struct pin_match {
    const pin *pins;
    int n;
    const attn_device_info *dev;
    const char *key;
    int nforce, nexclude;     /* how many apply */
} pin_match;

/* Collect the pins applying to (dev, key). Returns nforce + nexclude. */
int pin_match_init(pin_match *m, const pin *pins, int n, const attn_device_info *dev,
                   const char *key);

/* The exclusion of m that covers tactic, or NULL. m NULL: NULL. */
const pin *pin_match_excluded(const pin_match *m, const char *tactic);

/* The k-th best force of m (k = 0 the best, by pin_beats), or NULL when
 * fewer apply. */
const pin *pin_match_force(const pin_match *m, int k);

/* variant_set_winner (variant_set.h) among the rows of m[0..n) that vs
 * allows and no exclusion of pm covers (pm NULL or without exclusions:
 * variant_set_winner). Returns the index into m, -1, or ATTUNE_ENOMEM. */
int pin_winner(const store_measurement *m, int n, const select_policy *p, double mre,
               variant_set vs, const pin_match *pm);

#endif
