/* pin_json.h -- pins (pin_rule.h) as JSON: the objects of GET /v1/pins, of the
 * "pins" of a fleet table (docs/fleet.md) and of POST /v1/pins' body. */
#ifndef ATTUNE_PIN_JSON_H
#define ATTUNE_PIN_JSON_H

#include <jansson.h>

#include "pin_rule.h"

/* {"id","action","tactic","shape","device","model","reason","author",
 * "created_at"}; NULL on ENOMEM. */
json_t *pin_json(const pin *p);

/* An array of pin_json objects; NULL on ENOMEM. */
json_t *pin_json_array(const pin *p, int n);

/* A pin from untrusted JSON o: an object of the keys above (id and
 * created_at optional, shape, device and model optional strings), then
 * pin_check. where names o in messages ("pins[3]"). 0, or ATTUNE_EINVAL
 * with err naming the key. *out's id is 0 (the store numbers pins). */
int pin_from_json(const json_t *o, const char *where, pin *out, char *err, size_t errlen);

#endif
