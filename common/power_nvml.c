/* power_nvml.c -- a discrete GPU's clocks, power limit, persistence and
 * temperature through NVML, loaded with dlopen at first use.
 *
 * libnvidia-ml ships with the driver, not with the toolkit: linking it
 * would make attune fail to start on a host without a driver (or build
 * without the toolkit). dlopen keeps it optional; the few entry points used
 * are declared here with NVML's documented C types (handles are pointers,
 * enums are ints, nvmlReturn_t 0 is success). */
#include "power.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

typedef void *nvml_device; /* nvmlDevice_t */

enum { NVML_OK = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0 };

static struct {
    int ok; /* 1 when loaded and initialized */
    int (*by_uuid)(const char *, nvml_device *);
    int (*clock)(nvml_device, int, unsigned *);
    int (*max_clock)(nvml_device, int, unsigned *);
    int (*power_limit)(nvml_device, unsigned *); /* milliwatts */
    int (*persistence)(nvml_device, int *);
    int (*temperature)(nvml_device, int, unsigned *);
} nvml;

static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;

/* Load and initialize NVML once per process; it stays loaded (NVML's own
 * init is reference counted and cheap to keep; shutting it down between
 * samples would cost a driver round trip per tactic). */
static void nvml_load(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    nvml.by_uuid = (int (*)(const char *, nvml_device *))dlsym(h, "nvmlDeviceGetHandleByUUID");
    nvml.clock = (int (*)(nvml_device, int, unsigned *))dlsym(h, "nvmlDeviceGetClockInfo");
    nvml.max_clock = (int (*)(nvml_device, int, unsigned *))dlsym(h, "nvmlDeviceGetMaxClockInfo");
    nvml.power_limit =
        (int (*)(nvml_device, unsigned *))dlsym(h, "nvmlDeviceGetEnforcedPowerLimit");
    nvml.persistence = (int (*)(nvml_device, int *))dlsym(h, "nvmlDeviceGetPersistenceMode");
    nvml.temperature =
        (int (*)(nvml_device, int, unsigned *))dlsym(h, "nvmlDeviceGetTemperature");
    if (init == NULL || nvml.by_uuid == NULL || init() != NVML_OK) {
        dlclose(h);
        return;
    }
    nvml.ok = 1;
}

int attn_power_nvml(const char *uuid, attn_power *out)
{
    memset(out, 0, sizeof *out);
    out->mode_id = -1;
    out->locked = -1;
    out->persistence = -1;
    out->temp_c = NAN;
    pthread_once(&nvml_once, nvml_load);
    nvml_device dev = NULL;
    if (!nvml.ok || uuid == NULL || nvml.by_uuid(uuid, &dev) != NVML_OK)
        return ATTUNE_ENODEV;
    unsigned v = 0;
    int e = 0;
    snprintf(out->source, sizeof out->source, "nvml");
    if (nvml.clock != NULL && nvml.clock(dev, NVML_CLOCK_SM, &v) == NVML_OK)
        out->gpu_cur_mhz = (int)v;
    if (nvml.max_clock != NULL && nvml.max_clock(dev, NVML_CLOCK_SM, &v) == NVML_OK)
        out->gpu_max_mhz = (int)v;
    if (nvml.power_limit != NULL && nvml.power_limit(dev, &v) == NVML_OK)
        out->power_limit_w = (int)((v + 500) / 1000);
    if (nvml.persistence != NULL && nvml.persistence(dev, &e) == NVML_OK)
        out->persistence = e != 0;
    if (nvml.temperature != NULL && nvml.temperature(dev, NVML_TEMPERATURE_GPU, &v) == NVML_OK)
        out->temp_c = v;
    return 0;
}
