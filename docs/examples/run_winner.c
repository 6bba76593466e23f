/* run_winner.c -- ask attuned for a shape's tactic, then run it (docs/libattune.md).
 * cc run_winner.c $(pkg-config --cflags --libs libattune attune_client) -o run_winner
 * (pkg-config reads the installed layout: cmake --install first, docs/libattune.md) */
#include <attune.h>
#include <libattune.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    attune_shape_q q = {.device = "cpu", .b = 1, .hq = 8, .hkv = 1, .sq = 50, .skv = 128, .d = 64, .dtype = "f16"};
    attune_answer a;
    attune_client *c = attune_client_new(argc > 1 ? argv[1] : NULL, 200);
    attune_lookup(c, &q, 0, &a);                     /* never fails: a default when the daemon is down */
    attune_dims s = {1, 8, 1, 50, 128, 64, ATTUNE_DTYPE_F16, 0};
    uint16_t *qb = calloc(8 * 50 * 64, 2), *kb = calloc(128 * 64, 2), *vb = calloc(128 * 64, 2), *ob = calloc(8 * 50 * 64, 2);
    attune_tensor tq = {qb, 8 * 50 * 64, 50 * 64, 64}, tk = {kb, 128 * 64, 128 * 64, 64}, tv = {vb, 128 * 64, 128 * 64, 64}, to = {ob, 8 * 50 * 64, 50 * 64, 64};
    attune_dev *dev;
    attune_plan *plan;
    char err[256] = "";
    int rc = attune_dev_open(q.device, &dev, err, sizeof err) || attune_plan_create(dev, &s, a.tactic, &plan, err, sizeof err) ||
             attune_plan_run(plan, &tq, &tk, &tv, &to, 0, 0, NULL);
    printf("%s (%s): %s\n", a.tactic, a.source, rc ? (err[0] ? err : "run failed") : "ran");
    return rc != 0;
}
