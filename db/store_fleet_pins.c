/* store_fleet_pins.c -- pins in fleet tables (store_fleet_pins.h). */
#include "store_fleet_pins.h"

#include <stdio.h>
#include <stdlib.h>

#include "../common/pin_json.h"

int store_fleet_pins_put(store *st, const attn_device_info *dev, json_t *root)
{
    pin *p = NULL;
    int n = 0;
    int rc = store_pins_for(st, dev, &p, &n);
    if (rc == 0 && n > 0) {
        json_t *arr = pin_json_array(p, n);
        rc = arr == NULL || json_object_set_new(root, "pins", arr) != 0 ? ATTUNE_ENOMEM : 0;
    }
    free(p);
    return rc;
}

int store_fleet_pins_read(const json_t *root, const attn_device_info *dev, pin **out, int *n, char *err,
                          size_t errlen)
{
    const json_t *arr = json_object_get(root, "pins");
    *out = NULL;
    *n = 0;
    if (arr == NULL)
        return 0;
    if (!json_is_array(arr))
        return attune_fail(err, errlen, ATTUNE_EFORMAT, "table: \"pins\" must be an array");
    size_t k = json_array_size(arr);
    if (k > PIN_MAX)
        return attune_fail(err, errlen, ATTUNE_ETOOBIG, "table: %zu pins, over the limit of %d",
                           k, PIN_MAX);
    if (k == 0)
        return 0;
    pin *p = calloc(k, sizeof *p);
    if (p == NULL)
        return attune_fail(err, errlen, ATTUNE_ENOMEM, "out of memory");
    for (size_t i = 0; i < k; i++) {
        char where[32];
        snprintf(where, sizeof where, "pins[%zu]", i);
        if (pin_from_json(json_array_get(arr, i), where, &p[i], err, errlen) != 0) {
            free(p);
            return ATTUNE_EFORMAT;
        }
        if (!pin_device_covers(&p[i], dev)) { /* store_pins_for's rule: what an export puts here */
            attune_fail(err, errlen, ATTUNE_EFORMAT,
                        "%s: a pin for device '%s' model '%s' cannot apply to the table's device '%s' "
                        "('%s'): a table carries only the pins of its own device, its model or every "
                        "device",
                        where, p[i].device, p[i].model, dev->id, dev->name);
            free(p);
            return ATTUNE_EFORMAT;
        }
    }
    *out = p;
    *n = (int)k;
    return 0;
}
