/* power.h -- the power mode a device runs in, and its GPU clock right now.
 *
 * A measurement belongs to (device, power mode, stack) (DESIGN.md,
 * "Identity"): the same Orin at 15 W and at MAXN has other clocks and other
 * winners. This module reads what decides the mode and reduces it to one
 * short key that becomes part of the stack (attn_stack.power), so a row
 * tuned in another mode is never the current stack's row:
 *
 *   Jetson (L4T)   the nvpmodel mode (id and name, /var/lib/nvpmodel/status
 *                  and /etc/nvpmodel.conf) and whether jetson_clocks locked
 *                  the GPU clock (devfreq min_freq == max_freq):
 *                  "nvpmodel-0-MAXN", "nvpmodel-2-30W-locked". It applies
 *                  to the CPU device as well: nvpmodel also sets the cores
 *                  online and their clocks.
 *   discrete GPU   the enforced power limit through NVML, loaded at run
 *                  time (no link dependency): "pl-700W".
 *   otherwise      "" (no power mode known; the stack id is then what it
 *                  was before power modes existed).
 *
 * It sits beside the device identity it is part of (device_id.h), in the
 * lowest layer (docs/design.md "Layers"): the backends fill attn_stack.power
 * from it, the tuner samples clocks and the CLI describes the mode with it.
 *
 * Every file is read under a root directory: "" (the real one) unless the
 * environment sets ATTUNE_SYSFS_ROOT, which tests point at fixture trees
 * (tests/inputs/jetson-orin/, jetson-thor/). */
#ifndef ATTN_POWER_H
#define ATTN_POWER_H

#include <stddef.h>

#include "attune_err.h"
#include "device_id.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest power key, NUL included (attn_stack.power). */
#define ATTN_POWER_KEY_MAX 48

typedef struct attn_power {
    char source[8];        /* "jetson", "nvml", "" when nothing was readable */
    int mode_id;           /* nvpmodel id; -1 when unknown or not a Jetson */
    char mode_name[32];    /* nvpmodel NAME ("MAXN", "15W"); "" when unknown */
    int locked;            /* 1: clocks locked (jetson_clocks); 0 no; -1 unknown */
    int gpu_min_mhz, gpu_max_mhz, gpu_cur_mhz; /* 0 when unknown */
    int emc_max_mhz;       /* Jetson memory clock limit; 0 when unknown */
    int power_limit_w;     /* NVML enforced power limit; 0 when unknown */
    int persistence;       /* NVML persistence mode 1/0; -1 unknown */
    double temp_c;         /* GPU temperature, NAN when unknown */
} attn_power;

/* The root every file is read under: $ATTUNE_SYSFS_ROOT, or "". */
const char *attn_power_root(void);

/* Read a Jetson's power state under root (NULL: attn_power_root()).
 * Returns 0, or ATTUNE_ENODEV when root has no /etc/nvpmodel.conf (not a
 * Jetson). Fields that cannot be read stay unknown; the mode comes from the
 * status file, else the conf's PM_CONFIG DEFAULT. */
int attn_power_jetson(const char *root, attn_power *out);

/* Read a discrete GPU's clocks, power limit, persistence and temperature
 * through NVML, by UUID ("GPU-..."). ATTUNE_ENODEV when NVML is absent or
 * does not know the GPU. Thread-safe (NVML is loaded once). */
int attn_power_nvml(const char *uuid, attn_power *out);

/* The power state of a device: Jetson files first (an integrated GPU and
 * the CPU of a Jetson), NVML for other CUDA devices, nothing for the CPU
 * elsewhere. Always fills out (source "" when nothing was readable). */
void attn_power_read(const attn_device_info *info, attn_power *out);

/* The identity key of p into buf (ATTN_POWER_KEY_MAX bytes): see the file
 * comment. Only [A-Za-z0-9._-]. "" when p has no mode. Returns buf. */
char *attn_power_key(const attn_power *p, char *buf, size_t len);

/* One line for people: "nvpmodel 2 (30W), GPU 306-1300 MHz (now 612),
 * EMC 3199 MHz, clocks not locked, 41.5 C" or "power limit 700 W, SM
 * 1980 MHz max (now 345), persistence on". Reads the device's power state
 * (attn_power_read); "" when nothing is known. Returns buf. */
char *attn_power_describe(const attn_device_info *info, char *buf, size_t len);

/* The GPU clock now (MHz) and temperature (C, NAN unknown) of a device,
 * for the tuner's throttling check. Returns 0, or ATTUNE_ENODEV when the
 * device has no readable clock (the CPU, no NVML). */
int attn_power_sample(const attn_device_info *info, double *mhz, double *temp_c);

#ifdef __cplusplus
}
#endif

#endif
