/* power.h -- moved: the power mode is part of the device identity and
 * lives beside it, common/power.h (docs/design.md "Layers"). This
 * forward keeps the backends' `#include "../power.h"` building until they
 * include common/power.h themselves; nothing else should include it. */
#ifndef ATTN_POWER_FORWARD_H
#define ATTN_POWER_FORWARD_H

#include "../common/power.h"

#endif
