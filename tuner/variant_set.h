/* variant_set.h -- "ask for what you can run": a set of variants that
 * limits the candidates of an answer (issue 24 item 4, DESIGN.md "Ask among
 * what you can run").
 *
 * A set is a bit mask over attn_variant (bit v = 1u << v, v below
 * ATTN_MAX_VARIANTS: the variants of kernels/variant.h's table, a
 * registered one too); 0 is "every variant", the meaning of a query
 * without variants=. The text form is a comma-separated list of variant
 * names (`cudnn,split,folded`); the canonical text lists them in id order
 * (fused, fused_splitkv, split, split_repeat, folded, cudnn, then
 * registered ones), so two spellings of one set share a cache entry. */
#ifndef ATTUNE_VARIANT_SET_H
#define ATTUNE_VARIANT_SET_H

#include <stddef.h>
#include <stdint.h>

#include "../db/store.h"
#include "select.h"

typedef uint32_t variant_set;

/* Every built-in variant: the same as 0 for a filter, spelled out. */
#define VARIANT_SET_ALL ((variant_set)((1u << ATTN_NVARIANTS) - 1))

/* Parse a comma-separated list of variant names (spaces around names are
 * allowed, repeats too). NULL or "" gives 0 (every variant). An unknown or
 * empty name is ATTUNE_EINVAL with err naming it and the known names
 * (without naming the option: the caller prefixes it); *out untouched. */
int variant_set_parse(const char *list, variant_set *out, char *err, size_t errlen);

/* 1 when s allows v (s == 0 allows everything). */
int variant_set_has(variant_set s, attn_variant v);

/* 1 when s allows the variant of tactic text (its text up to the first
 * '/'); a tactic whose variant this build does not know is allowed only by
 * the empty set. */
int variant_set_has_tactic(variant_set s, const char *tactic);

/* Canonical text of s into buf ("" for 0). Returns buf. */
char *variant_set_str(variant_set s, char *buf, size_t len);

/* The known variant names, comma-separated, for error messages. */
const char *variant_set_names(void);

/* select_winner (select.h) among the rows of m[0..n) that s allows, as if
 * they were every row of the shape: the bound relative to the most
 * accurate tactic and the incumbent's hysteresis both count among the
 * allowed rows only. Returns the index into m of the winner, -1 when no
 * allowed row is eligible, or ATTUNE_ENOMEM. s == 0: select_winner. */
int variant_set_winner(const store_measurement *m, int n, const select_policy *p,
                       double override_max_rel_err, variant_set s);

#endif
