/* answer_json.h -- the answer of GET /v1/tactic as JSON text: the one text
 * attuned sends and an in-process lookup (lookup_file.h) returns, so both
 * say the same thing in the same words (docs/api.md "GET /v1/tactic"). */
#ifndef ATTUNE_ANSWER_JSON_H
#define ATTUNE_ANSWER_JSON_H

#include <stddef.h>

#include "index.h"

/* Variant name and pad of a canonical tactic, for the answers' convenience
 * fields; unparsable text (an imported oddity) gives variant = its text up
 * to the first '/' and pad 0. */
void answer_tactic_parts(const char *tactic, char *variant, size_t vlen, int *pad);

/* The JSON object of ans: mre > 0 and vs != 0 are echoed (max_rel_err,
 * variants); tuning ("queued", "running" or NULL) is tune on miss's state.
 * Returns the text (malloc'd, caller frees) with its length in *len, or
 * NULL on ENOMEM. */
char *answer_json(const index_answer *ans, double mre, variant_set vs, const char *tuning,
                  size_t *len);

/* Why index_lookup_in found no tactic of vs (ATTUNE_ENOTFOUND) for ans's
 * shape and device, into buf: the error text of the 404. The listed
 * variants when the backend lists none of vs; else the exclusion pins when
 * any applied; else that nothing measured qualifies. */
void answer_no_tactic_text(const index_answer *ans, variant_set vs, char *buf, size_t len);

#endif
