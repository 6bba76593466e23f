/* device_model.h -- the model a device is one of: what two hosts of one
 * GPU model agree on (issue 27 item 5).
 *
 * A model is the device's name, kind, compute capability, SM count and the
 * memory the model is built with. The memory a driver reports is not that:
 * one H200 read 143,771 MiB in one place and 143,155 MiB in the stored
 * tables (ECC, driver reservations and carve-outs take different bites),
 * so a model keyed by the exact figure split one model in two and fleet
 * answers stopped matching. The model's memory is the reported total
 * rounded up to the next size memory is built in (GiB: 1, 2, 3, 4, 6, 8,
 * 10, 11, 12, 16, 20, 24, 32, 40, 48, 64, 80, 94, 96, 128, 144, 180, 192,
 * 256, 288, then multiples of 32): a driver only ever reports less than the
 * memory that is there, and the sizes lie far enough apart that what ECC
 * or a reservation takes (6.25% at most) stays within one. The same rule
 * serves the CPU backend's host memory. docs/fleet.md, "Models". */
#ifndef ATTUNE_DEVICE_MODEL_H
#define ATTUNE_DEVICE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../common/device_id.h"

/* The model's memory in GiB for a reported total of memory_mb MiB; 0 when
 * the memory is unknown (memory_mb <= 0). */
int64_t device_model_memory_gib(int64_t memory_mb);

/* 1 when a and b are devices of one model (fields above; names compared
 * byte for byte), else 0. */
int device_model_same(const attn_device_info *a, const attn_device_info *b);

/* The model's canonical text, "NVIDIA H200|cuda|9.0|132|144G", into out:
 * what the fleet's model id (fleet_model_id) hashes. */
void device_model_text(const attn_device_info *d, char *out, size_t len);

#endif
