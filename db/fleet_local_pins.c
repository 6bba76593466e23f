/* fleet_local_pins.c -- a store's pins exchanged with the fleet server
 * (fleet_pins.h). */
#include <stdio.h>
#include <stdlib.h>

#include "fleet_pins.h"
#include "store_internal.h"
#include "store_pins.h"

typedef struct merge_args {
    const pin *p;
    int n;
    int added;     /* out */
    int skipped;   /* out: rules past PIN_MAX, left out */
} merge_args;

static int merge_tx(store *st, void *ctx)
{
    merge_args *a = ctx;
    return store_pins_merge(st, a->p, a->n, &a->added, &a->skipped);
}

/* Check every pulled pin (the server's values are untrusted): 0, or
 * ATTUNE_EFORMAT naming the first bad one. */
static int check_pulled(pin *p, int n, char *err, size_t errlen)
{
    char why[ATTUNE_ERRLEN];
    for (int i = 0; i < n; i++)
        if (pin_check(&p[i], why, sizeof why) != 0 || p[i].updated_at < 0)
            return attune_fail(err, errlen, ATTUNE_EFORMAT, "pulled pin %d (%s %s): %s", i,
                               pin_action_name(p[i].action), p[i].tactic, why);
    return 0;
}

int fleet_local_pins(store *st, fleet_pg *c, int *pushed, int *added, int *skipped,
                     char *err, size_t errlen)
{
    pin *mine = NULL, *theirs = NULL;
    int nmine = 0, ntheirs = 0;
    *pushed = *added = *skipped = 0;
    int rc = store_pins_all(st, &mine, &nmine);
    if (rc != 0) {
        attune_fail(err, errlen, rc, "cannot read the pins: %s", attune_strerror(rc));
        goto out;
    }
    /* nothing to send, nothing to merge: no transaction on either side */
    if (nmine > 0 && (rc = fleet_pg_pins_push(c, mine, nmine, err, errlen)) != 0)
        goto out;
    *pushed = nmine;
    if ((rc = fleet_pg_pins_pull(c, &theirs, &ntheirs, err, errlen)) != 0 ||
        (rc = check_pulled(theirs, ntheirs, err, errlen)) != 0 || ntheirs == 0)
        goto out;
    merge_args a = {.p = theirs, .n = ntheirs};
    if ((rc = store_tx(st, merge_tx, &a)) != 0) {
        attune_fail(err, errlen, rc, "cannot store the pulled pins: %s", attune_strerror(rc));
        goto out;
    }
    *added = a.added;
    *skipped = a.skipped;
out:
    free(mine);
    free(theirs);
    return rc;
}
