/* device_id.h -- a device's identity and the stack its numbers belong to
 * (DESIGN.md "Words": device, stack; "Identity"), and how a device spec
 * names a device.
 *
 * The lowest layer (docs/design.md "Layers"): the backends fill these
 * (kernels/attn.h attn_ops.device_info), the store keeps them, the lookup
 * and the CLI match specs against them. The power mode, part of the
 * identity, is read beside it (power.h). */
#ifndef ATTN_DEVICE_ID_H
#define ATTN_DEVICE_ID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_device_info {
    char id[64];      /* CUDA: "GPU-<uuid>"; CPU: "CPU-<16 hex of host+model>" */
    char name[128];   /* "NVIDIA H200", CPU model name */
    char kind[8];     /* "cpu" or "cuda" */
    int index;        /* CUDA ordinal; -1 for the CPU */
    int cc_major, cc_minor; /* 0.0 for the CPU */
    int sm_count;     /* CPU: logical cores */
    int64_t memory_mb;
    int clock_mhz, mem_clock_mhz; /* 0 when unknown */
} attn_device_info;

typedef struct attn_stack {
    char driver[32];   /* CUDA driver version, "" for the CPU */
    char runtime[32];  /* CUDA runtime version, or "cpu" */
    char blas[32];     /* vendor libraries: "cublas-13.1.0", plus "+cudnn-9.14.0"
                          when the cudnn variant is built in; "" when unused */
    char attune[32];   /* ATTUNE_VERSION */
    char kernels[24];  /* hash of the kernels' build (sources + flags) */
    char power[48];    /* power mode (common/power.h): "nvpmodel-0-MAXN",
                          "pl-700W", "" when none is known */
    char id[24];       /* 16 hex: hash of all fields above; the stack's key */
} attn_stack;

/* Fill st->id from the other fields. An empty power adds nothing to the
 * hash, so stacks recorded before power modes keep their ids. */
void attn_stack_finish(attn_stack *st);

/* A device spec read as a CUDA ordinal: its value when spec is 1 to 6
 * decimal digits, -2 when it is digits but longer (no such ordinal), -1
 * when it is not an ordinal at all (cpu, a UUID, a name). One rule for the
 * CLI's registry and the daemon's index. */
int attn_device_ordinal(const char *spec);

/* How well spec names the device described by info (DESIGN.md "Words"),
 * the one matcher of the CLI, the store and the daemon's index:
 *   "cpu" (any case)  the CPU backend's device of this host;
 *   an ordinal "0"    the CUDA device of that index on this host;
 *   anything else     the device whose id is spec exactly (ids are kept
 *                     byte for byte: two fleet ids may differ only in case)
 *                     or whose name is spec, case-insensitive.
 * local: info is a device of this host (cpu and ordinals name no other).
 * Returns ATTN_MATCH_NONE, ATTN_MATCH_NAME, or ATTN_MATCH_EXACT (cpu, an
 * ordinal or the id): callers take an exact match over a name match, so a
 * device whose name is another's id cannot shadow it. */
enum { ATTN_MATCH_NONE = 0, ATTN_MATCH_NAME = 1, ATTN_MATCH_EXACT = 2 };
int attn_device_match(const char *spec, const attn_device_info *info, int local);

#ifdef __cplusplus
}
#endif

#endif
