/* pin_rule.h -- an operator's pin, the rule itself: force a tactic, or
 * exclude tactics, for a shape, a shape pattern, a device or a device model
 * (issue 28 item 1, DESIGN.md "Pins"; the rules and their precedence:
 * docs/api.md "Pins").
 *
 * A pin is a rule, not a measurement: it has a scope (shape: "" any, a
 * canonical key, or a pattern whose fields may be wildcards; device: "" any,
 * a device id, or a model name), an action and a tactic text, and says who
 * wrote it and why. This module holds the rule's vocabulary: checking a
 * pin, normalising its text, and whether it covers a (device, shape,
 * tactic). It is a word of the lowest layer (docs/design.md "Layers"), so
 * the store keeps pins without the tuner: storage is db/store_pins.h, JSON
 * pin_json.h; the pins of one lookup and the winner they leave are
 * tuner/pin.h; answering is lookup/index.h. */
#ifndef ATTUNE_PIN_RULE_H
#define ATTUNE_PIN_RULE_H

#include <stddef.h>
#include <stdint.h>

#include "device_id.h"
#include "shape.h"
#include "tactic.h"

/* Pins kept at most (a store refuses more): every lookup may read them all. */
#define PIN_MAX 1024
#define PIN_REASON_MAX 256
#define PIN_AUTHOR_MAX 64

typedef enum { PIN_FORCE = 0, PIN_EXCLUDE = 1 } pin_action;

typedef struct pin {
    int64_t id;                        /* the store's; 0 before it is stored */
    pin_action action;
    char tactic[ATTN_TACTIC_STR_MAX];  /* force: a complete canonical tactic;
                                          exclude: one, or a prefix of whole
                                          '/'-separated parts (fused/pad=1) */
    char shape[ATTN_SHAPE_KEY_MAX];    /* "" any shape; a canonical key; a
                                          pattern: b*.hq8.hkv1.sq*.skv*.d256.f16.* */
    char device[64];                   /* "" or one device id */
    char model[64];                    /* "" or a device name (any case) */
    char reason[PIN_REASON_MAX];
    char author[PIN_AUTHOR_MAX];
    int64_t created_at;                /* unix seconds */
    /* Merging (imports, fleet sync): the last writer of a rule wins. */
    int64_t updated_at;                /* last written or removed, unix seconds */
    int removed;                       /* 1: a tombstone (never answers) */
} pin;

/* "force", "exclude" */
const char *pin_action_name(pin_action a);
/* 0, or ATTUNE_EINVAL for another word. */
int pin_action_parse(const char *s, pin_action *out);

/* Check every field of p and normalise it in place: the tactic of a force
 * to its canonical text, a shape key to its canonical text, a pattern's
 * wildcards to `<field>*` (`*` for dtype and causality) and a pattern of
 * wildcards only to "" (any shape). Refuses (ATTUNE_EINVAL, err naming the
 * field and what is expected): an unknown action; an empty tactic, a force
 * that is not a complete tactic, an exclusion whose first part is not a
 * variant or whose other parts are not key=value; a shape that is neither
 * a key nor a pattern of 8 fields; both device and model; an empty reason
 * or author; text with control characters or too long. */
int pin_check(pin *p, char *err, size_t errlen);

/* 1 when the pattern (or key, or "") covers shape key. */
int pin_shape_covers(const char *pattern, const char *key);

/* 1 when tactic is the pin's tactic (force), or equal to it or starting
 * with it followed by '/' (exclude). */
int pin_tactic_matches(const pin *p, const char *tactic);

/* 1 when p can apply to device dev: its id, its model (name, any case),
 * or every device. */
int pin_device_covers(const pin *p, const attn_device_info *dev);

/* 1 when p applies to device dev (id exact, model by name in any case, or
 * every device) and shape key. */
int pin_applies(const pin *p, const attn_device_info *dev, const char *key);

/* How specific p is: the larger wins (docs/api.md "Pins"): first the
 * shape (a key 9, a pattern its number of fixed fields, any shape 0), then
 * the device (an id 2, a model 1, any 0). */
int pin_rank(const pin *p);

/* 1 when a beats b: higher rank, else the newer (larger id). */
int pin_beats(const pin *a, const pin *b);

#endif
