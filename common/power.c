/* power.c -- Jetson power modes from the files the L4T tools read, the
 * power key of the device identity, and clock sampling (see power.h). */
#include "power.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *attn_power_root(void)
{
    const char *r = getenv("ATTUNE_SYSFS_ROOT");
    return r != NULL ? r : "";
}

/* Read the first line of root/rel into buf (newline stripped). 0 or -1. */
static int read_line(const char *root, const char *rel, char *buf, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s", root, rel);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int ok = fgets(buf, (int)len, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    buf[strcspn(buf, "\r\n")] = 0;
    return 0;
}

/* An integer file (Hz, millidegrees); -1 when unreadable or not a number. */
static long long read_ll(const char *root, const char *rel)
{
    char buf[64], *end;
    if (read_line(root, rel, buf, sizeof buf) != 0)
        return -1;
    long long v = strtoll(buf, &end, 10);
    return end == buf ? -1 : v;
}

static int hz_to_mhz(long long hz) { return hz > 0 ? (int)(hz / 1000000) : 0; }

/* The GPU's devfreq node under root/sys/class/devfreq: Orin's "*.ga10b",
 * Xavier's "*.gv11b", Thor's "gpu-gpc-0" (JetPack 7 also lists other GPU
 * clock domains such as "gpu-nvd-0": a "gpu-gpc" node is preferred, then the
 * first by name, so the choice is stable).
 * Writes "/sys/class/devfreq/<name>" into rel; 0 or -1 when none. */
static int gpu_devfreq(const char *root, char *rel, size_t len)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/sys/class/devfreq", root);
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int found = -1;
    struct dirent *e;
    char best[256] = "";
    while ((e = readdir(d)) != NULL) {
        const char *n = e->d_name, *dot = strrchr(n, '.');
        int gpu = strncmp(n, "gpu", 3) == 0 ||
                  (dot != NULL && (strcmp(dot, ".ga10b") == 0 || strcmp(dot, ".gv11b") == 0 ||
                                   strcmp(dot, ".gb10b") == 0 || strcmp(dot, ".gp10b") == 0));
        int gpc = strncmp(n, "gpu-gpc", 7) == 0, best_gpc = strncmp(best, "gpu-gpc", 7) == 0;
        if (gpu && strlen(n) < sizeof best &&
            (found != 0 || gpc > best_gpc || (gpc == best_gpc && strcmp(n, best) < 0))) {
            snprintf(best, sizeof best, "%s", n);
            found = 0;
        }
    }
    closedir(d);
    if (found == 0)
        snprintf(rel, len, "/sys/class/devfreq/%s", best);
    return found;
}

/* The GPU temperature: the thermal zone typed "gpu-thermal" (L4T's name;
 * matched case-insensitively on its "gpu" prefix). NAN when none. */
static double gpu_temp(const char *root)
{
    for (int i = 0; i < 32; i++) {
        char rel[64], type[64];
        snprintf(rel, sizeof rel, "/sys/class/thermal/thermal_zone%d/type", i);
        if (read_line(root, rel, type, sizeof type) != 0)
            continue;
        if (strncasecmp(type, "gpu", 3) != 0)
            continue;
        snprintf(rel, sizeof rel, "/sys/class/thermal/thermal_zone%d/temp", i);
        long long mc = read_ll(root, rel);
        if (mc >= 0)
            return (double)mc / 1000.0;
    }
    return NAN;
}

/* nvpmodel.conf: "< POWER_MODEL ID=2 NAME=30W >" opens a mode's block, whose
 * lines are "PARAM ARG VALUE" ("GPU MAX_FREQ 1300500000", Hz; -1 or 0 for
 * no cap); "< PM_CONFIG DEFAULT=2 >" names the boot default. Fills the name
 * and clock caps of mode `want` (or, want < 0, only *def). */
static int parse_conf(const char *root, int want, attn_power *p, int *def, int *emc_cap_mhz)
{
    char path[1024], line[512];
    snprintf(path, sizeof path, "%s/etc/nvpmodel.conf", root);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    int in_mode = 0;
    *def = -1;
    *emc_cap_mhz = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        char *s = line + strspn(line, " \t");
        if (*s == '#')
            continue;
        if (*s == '<') {
            int id;
            char name[64];
            in_mode = 0;
            if (strstr(s, "POWER_MODEL") != NULL) {
                const char *ip = strstr(s, "ID="), *np = strstr(s, "NAME=");
                if (ip != NULL && sscanf(ip, "ID=%d", &id) == 1 && id == want && np != NULL &&
                    sscanf(np, "NAME=%63[^ \t>]", name) == 1) {
                    snprintf(p->mode_name, sizeof p->mode_name, "%.31s", name);
                    in_mode = 1;
                }
            } else if (strstr(s, "PM_CONFIG") != NULL) {
                const char *dp = strstr(s, "DEFAULT=");
                if (dp != NULL && sscanf(dp, "DEFAULT=%d", &id) == 1)
                    *def = id;
            }
            continue;
        }
        char param[64], arg[64];
        long long v;
        if (!in_mode || sscanf(s, "%63s %63s %lld", param, arg, &v) != 3)
            continue;
        if (strcmp(param, "GPU") == 0 && strcmp(arg, "MAX_FREQ") == 0 && v > 0)
            p->gpu_max_mhz = hz_to_mhz(v);
        else if (strcmp(param, "EMC") == 0 && strcmp(arg, "MAX_FREQ") == 0 && v > 0)
            *emc_cap_mhz = hz_to_mhz(v);
    }
    fclose(f);
    return 0;
}

int attn_power_jetson(const char *root, attn_power *out)
{
    if (root == NULL)
        root = attn_power_root();
    memset(out, 0, sizeof *out);
    out->mode_id = -1;
    out->locked = -1;
    out->persistence = -1;
    out->temp_c = NAN;

    /* The mode in force: nvpmodel writes "pmode:0002 fmode:..." to its
     * status file on every change; before the first change the boot default
     * of the conf applies. */
    char buf[128];
    int mode = -1, def = -1, emc_cap = 0;
    if (read_line(root, "/var/lib/nvpmodel/status", buf, sizeof buf) == 0) {
        const char *pm = strstr(buf, "pmode:");
        char *end;
        if (pm != NULL) {
            long v = strtol(pm + 6, &end, 10);
            if (end != pm + 6 && v >= 0 && v < 1000)
                mode = (int)v;
        }
    }
    attn_power conf_caps = *out;
    if (parse_conf(root, mode, &conf_caps, &def, &emc_cap) != 0)
        return ATTUNE_ENODEV;
    if (mode < 0 && def >= 0) {
        mode = def;
        conf_caps = *out;
        parse_conf(root, mode, &conf_caps, &def, &emc_cap);
    }
    snprintf(out->source, sizeof out->source, "jetson");
    out->mode_id = mode;
    snprintf(out->mode_name, sizeof out->mode_name, "%s", conf_caps.mode_name);

    /* The clocks as set now (sysfs wins over the conf's caps: jetson_clocks
     * and manual writes change them). Locked: devfreq's floor raised to its
     * ceiling, which is what jetson_clocks does to the GPU. */
    char rel[320], file[400];
    if (gpu_devfreq(root, rel, sizeof rel) == 0) {
        snprintf(file, sizeof file, "%s/min_freq", rel);
        long long lo = read_ll(root, file);
        snprintf(file, sizeof file, "%s/max_freq", rel);
        long long hi = read_ll(root, file);
        snprintf(file, sizeof file, "%s/cur_freq", rel);
        long long cur = read_ll(root, file);
        out->gpu_min_mhz = hz_to_mhz(lo);
        out->gpu_max_mhz = hz_to_mhz(hi);
        out->gpu_cur_mhz = hz_to_mhz(cur);
        if (lo > 0 && hi > 0)
            out->locked = lo == hi;
    }
    if (out->gpu_max_mhz == 0)
        out->gpu_max_mhz = conf_caps.gpu_max_mhz;
    /* EMC: the bandwidth manager's devfreq node (world-readable on JetPack 6
     * and 7), else BPMP's debugfs (root only), else the mode's cap. */
    long long emc = read_ll(root, "/sys/class/devfreq/bwmgr/max_freq");
    if (emc <= 0)
        emc = read_ll(root, "/sys/kernel/debug/bpmp/debug/clk/emc/max_rate");
    out->emc_max_mhz = emc > 0 ? hz_to_mhz(emc) : emc_cap;
    out->temp_c = gpu_temp(root);
    return 0;
}

void attn_power_read(const attn_device_info *info, attn_power *out)
{
    if (attn_power_jetson(NULL, out) == 0)
        return;
    if (info != NULL && strcmp(info->kind, "cuda") == 0 && attn_power_nvml(info->id, out) == 0)
        return;
    memset(out, 0, sizeof *out);
    out->mode_id = -1;
    out->locked = -1;
    out->persistence = -1;
    out->temp_c = NAN;
}

/* Append "-" and s reduced to [A-Za-z0-9._] (others become '_'). */
static void append_word(char *buf, size_t len, const char *s)
{
    size_t n = strlen(buf);
    if (n + 1 < len)
        buf[n++] = '-';
    for (; *s && n + 1 < len; s++)
        buf[n++] = (isalnum((unsigned char)*s) || *s == '.' || *s == '_') ? *s : '_';
    buf[n] = 0;
}

char *attn_power_key(const attn_power *p, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    buf[0] = 0;
    if (strcmp(p->source, "jetson") == 0) {
        if (p->mode_id >= 0)
            snprintf(buf, len, "nvpmodel-%d", p->mode_id);
        else
            snprintf(buf, len, "nvpmodel-unknown");
        if (p->mode_name[0] != 0)
            append_word(buf, len, p->mode_name);
        if (p->locked == 1)
            append_word(buf, len, "locked");
    } else if (strcmp(p->source, "nvml") == 0 && p->power_limit_w > 0) {
        snprintf(buf, len, "pl-%dW", p->power_limit_w);
    }
    return buf;
}

int attn_power_sample(const attn_device_info *info, double *mhz, double *temp_c)
{
    *mhz = 0;
    *temp_c = NAN;
    if (info == NULL || strcmp(info->kind, "cuda") != 0)
        return ATTUNE_ENODEV;
    attn_power p;
    const char *root = attn_power_root();
    char rel[320], file[400];
    if (gpu_devfreq(root, rel, sizeof rel) == 0) {
        snprintf(file, sizeof file, "%s/cur_freq", rel);
        long long cur = read_ll(root, file);
        if (cur <= 0)
            return ATTUNE_ENODEV;
        *mhz = (double)cur / 1e6;
        *temp_c = gpu_temp(root);
        return 0;
    }
    if (attn_power_nvml(info->id, &p) != 0 || p.gpu_cur_mhz <= 0)
        return ATTUNE_ENODEV;
    *mhz = p.gpu_cur_mhz;
    *temp_c = p.temp_c;
    return 0;
}

/* Append printf-style text to buf, separated by ", " from what is there. */
static void add(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n > 0 && n + 2 < len) {
        memcpy(buf + n, ", ", 3);
        n += 2;
    }
    if (n + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

char *attn_power_describe(const attn_device_info *info, char *buf, size_t len)
{
    attn_power p;
    if (len == 0)
        return buf;
    buf[0] = 0;
    attn_power_read(info, &p);
    if (strcmp(p.source, "jetson") == 0) {
        if (p.mode_id >= 0)
            add(buf, len, "nvpmodel %d (%s)", p.mode_id, p.mode_name[0] ? p.mode_name : "?");
        else
            add(buf, len, "nvpmodel mode unknown");
        if (p.gpu_max_mhz > 0)
            add(buf, len, "GPU %d-%d MHz (now %d)", p.gpu_min_mhz, p.gpu_max_mhz, p.gpu_cur_mhz);
        if (p.emc_max_mhz > 0)
            add(buf, len, "EMC %d MHz", p.emc_max_mhz);
        if (p.locked >= 0)
            add(buf, len, "clocks %s", p.locked ? "locked (jetson_clocks)" : "not locked");
    } else if (strcmp(p.source, "nvml") == 0) {
        if (p.power_limit_w > 0)
            add(buf, len, "power limit %d W", p.power_limit_w);
        if (p.gpu_max_mhz > 0)
            add(buf, len, "SM %d MHz max (now %d)", p.gpu_max_mhz, p.gpu_cur_mhz);
        if (p.persistence >= 0)
            add(buf, len, "persistence %s", p.persistence ? "on" : "off");
    }
    if (buf[0] != 0 && isfinite(p.temp_c))
        add(buf, len, "%.1f C", p.temp_c);
    return buf;
}
