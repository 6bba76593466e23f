/* store_fleet_pins.h -- the "pins" of a fleet table (docs/fleet.md): what
 * store_export / the streamed export write and store_import reads. Inside
 * db/ only. */
#ifndef ATTUNE_STORE_FLEET_PINS_H
#define ATTUNE_STORE_FLEET_PINS_H

#include <jansson.h>

#include "store_pins.h"

/* Set root's "pins" to the pins that can apply to dev (store_pins_for),
 * when there is any: a table without pins stays readable by builds from
 * before pins. 0 or an error. */
int store_fleet_pins_put(store *st, const attn_device_info *dev, json_t *root);

/* The "pins" of an untrusted table root (absent: none) for the table's
 * device dev, each checked (pin_from_json) and required to be one that
 * can apply to dev (device "" or dev's id, model "" or dev's name: what
 * store_fleet_pins_put exports), so that a table cannot pin another
 * device: *out malloc'd (NULL when *n == 0). 0, or ATTUNE_EFORMAT /
 * ETOOBIG with err naming the first bad pin. */
int store_fleet_pins_read(const json_t *root, const attn_device_info *dev, pin **out, int *n, char *err,
                          size_t errlen);

#endif
