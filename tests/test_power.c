/* test_power.c -- power modes read from fixture trees of the L4T files
 * (tests/inputs/jetson-orin/, jetson-thor/), the identity key, and the
 * stack they make. */
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/power.h"
#include "kernels/attn.h"
#include "test.h"

static char orin[PATH_MAX], thor[PATH_MAX];

static void fixture_paths(void)
{
    const char *in = getenv("ATTUNE_TEST_INPUTS");
    if (in == NULL)
        in = "tests/inputs";
    snprintf(orin, sizeof orin, "%s/jetson-orin", in);
    snprintf(thor, sizeof thor, "%s/jetson-thor", in);
}

/* Copy the Orin fixture's conf into a scratch root with the given status
 * line (NULL: no status file) and GPU devfreq min/max (0: no devfreq). */
static void scratch_root(char *root, size_t len, const char *status, long long lo, long long hi)
{
    snprintf(root, len, "/tmp/attune-power-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    char path[PATH_MAX + 128], cmd[3 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/etc' '%s/var/lib/nvpmodel' && cp '%s/etc/nvpmodel.conf' '%s/etc/'",
             root, root, orin, root);
    CHECK(system(cmd) == 0);
    if (status != NULL) {
        snprintf(path, sizeof path, "%s/var/lib/nvpmodel/status", root);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL);
        fprintf(f, "%s\n", status);
        fclose(f);
    }
    if (hi > 0) {
        snprintf(cmd, sizeof cmd, "mkdir -p '%s/sys/class/devfreq/17000000.ga10b' && cd '%s/sys/class/devfreq/17000000.ga10b' && "
                 "echo %lld > min_freq && echo %lld > max_freq && echo %lld > cur_freq",
                 root, root, lo, hi, hi);
        CHECK(system(cmd) == 0);
    }
}

static void rm_root(const char *root)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    CHECK(system(cmd) == 0);
}

static void orin_should_read_mode_clocks_and_temperature(void)
{
    attn_power p;
    char key[ATTN_POWER_KEY_MAX];
    CHECK_EQ_INT(attn_power_jetson(orin, &p), 0);
    CHECK_STR(p.source, "jetson");
    CHECK_EQ_INT(p.mode_id, 2);          /* status: pmode:0002 */
    CHECK_STR(p.mode_name, "30W");
    CHECK_EQ_INT(p.gpu_min_mhz, 306);    /* devfreq, Hz -> MHz */
    CHECK_EQ_INT(p.gpu_max_mhz, 612);
    CHECK_EQ_INT(p.gpu_cur_mhz, 510);
    CHECK_EQ_INT(p.emc_max_mhz, 3199);   /* BPMP debugfs */
    CHECK_EQ_INT(p.locked, 0);
    CHECK_NEAR(p.temp_c, 41.5, 1e-9);    /* the gpu-thermal zone, not cpu's */
    CHECK_STR(attn_power_key(&p, key, sizeof key), "nvpmodel-2-30W");
}

static void thor_should_use_the_boot_default_and_see_locked_clocks(void)
{
    attn_power p;
    char key[ATTN_POWER_KEY_MAX];
    CHECK_EQ_INT(attn_power_jetson(thor, &p), 0);
    CHECK_EQ_INT(p.mode_id, 0);          /* no status file: PM_CONFIG DEFAULT */
    CHECK_STR(p.mode_name, "MAXN");
    CHECK_EQ_INT(p.gpu_min_mhz, 1575);   /* gpu-gpc-0 (not gpu-nvd-0), min == max */
    CHECK_EQ_INT(p.gpu_max_mhz, 1575);
    CHECK_EQ_INT(p.locked, 1);
    CHECK_EQ_INT(p.gpu_cur_mhz, 1575);
    CHECK_EQ_INT(p.emc_max_mhz, 4266);   /* devfreq/bwmgr (MAXN has no cap) */
    CHECK_NEAR(p.temp_c, 52.25, 1e-9);
    CHECK_STR(attn_power_key(&p, key, sizeof key), "nvpmodel-0-MAXN-locked");
}

static void non_jetson_root_should_be_enodev(void)
{
    attn_power p;
    char root[64];
    snprintf(root, sizeof root, "/tmp/attune-power-XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    CHECK_EQ_INT(attn_power_jetson(root, &p), ATTUNE_ENODEV);
    rmdir(root);
}

static void mode_change_should_change_the_key(void)
{
    char root[PATH_MAX], a[ATTN_POWER_KEY_MAX], b[ATTN_POWER_KEY_MAX];
    attn_power p;
    scratch_root(root, sizeof root, "pmode:0001 fmode:quiet", 0, 0);
    CHECK_EQ_INT(attn_power_jetson(root, &p), 0);
    CHECK_EQ_INT(p.mode_id, 1);
    CHECK_EQ_INT(p.gpu_max_mhz, 408);    /* no devfreq: the mode's cap */
    CHECK_EQ_INT(p.emc_max_mhz, 2133);
    CHECK_EQ_INT(p.locked, -1);
    CHECK_STR(attn_power_key(&p, a, sizeof a), "nvpmodel-1-15W");
    rm_root(root);

    /* jetson_clocks in the same mode is another state too */
    scratch_root(root, sizeof root, "pmode:0001", 408000000, 408000000);
    CHECK_EQ_INT(attn_power_jetson(root, &p), 0);
    CHECK_EQ_INT(p.locked, 1);
    CHECK_STR(attn_power_key(&p, b, sizeof b), "nvpmodel-1-15W-locked");
    rm_root(root);

    /* A garbled status falls back on the boot default (30W) */
    scratch_root(root, sizeof root, "garbage", 0, 0);
    CHECK_EQ_INT(attn_power_jetson(root, &p), 0);
    CHECK_EQ_INT(p.mode_id, 2);
    rm_root(root);
}

static void key_should_keep_only_safe_characters(void)
{
    attn_power p;
    char key[ATTN_POWER_KEY_MAX];
    memset(&p, 0, sizeof p);
    snprintf(p.source, sizeof p.source, "jetson");
    p.mode_id = 7;
    snprintf(p.mode_name, sizeof p.mode_name, "MODE 15W/'x'");
    p.locked = 0;
    CHECK_STR(attn_power_key(&p, key, sizeof key), "nvpmodel-7-MODE_15W__x_");
    snprintf(p.source, sizeof p.source, "nvml");
    p.power_limit_w = 700;
    CHECK_STR(attn_power_key(&p, key, sizeof key), "pl-700W");
    p.source[0] = 0;
    CHECK_STR(attn_power_key(&p, key, sizeof key), "");
}

/* The backends put the key into the stack: under the Orin fixture the CPU
 * device's stack carries nvpmodel-2-30W, and another mode gives another
 * stack id. */
static void cpu_stack_should_carry_the_power_mode(void)
{
    char root[PATH_MAX];
    attn_device_info info;
    attn_stack plain, st30, st15;
    unsetenv("ATTUNE_SYSFS_ROOT");
    CHECK_EQ_INT(attn_cpu_ops.device_info(0, &info, &plain), 0);
    setenv("ATTUNE_SYSFS_ROOT", orin, 1);
    CHECK_EQ_INT(attn_cpu_ops.device_info(0, &info, &st30), 0);
    CHECK_STR(st30.power, "nvpmodel-2-30W");
    scratch_root(root, sizeof root, "pmode:0001", 0, 0);
    setenv("ATTUNE_SYSFS_ROOT", root, 1);
    CHECK_EQ_INT(attn_cpu_ops.device_info(0, &info, &st15), 0);
    CHECK_STR(st15.power, "nvpmodel-1-15W");
    CHECK(strcmp(st30.id, st15.id) != 0);
    CHECK(strcmp(st30.id, plain.id) != 0);
    /* The CPU has no GPU clock to sample, Jetson or not. */
    double mhz, temp;
    CHECK_EQ_INT(attn_power_sample(&info, &mhz, &temp), ATTUNE_ENODEV);
    /* A CUDA device on a Jetson samples the devfreq clock. */
    snprintf(info.kind, sizeof info.kind, "cuda");
    setenv("ATTUNE_SYSFS_ROOT", orin, 1);
    CHECK_EQ_INT(attn_power_sample(&info, &mhz, &temp), 0);
    CHECK_NEAR(mhz, 510, 1e-9);
    CHECK_NEAR(temp, 41.5, 1e-9);
    char line[256];
    attn_power_describe(&info, line, sizeof line);
    CHECK_STR(line, "nvpmodel 2 (30W), GPU 306-612 MHz (now 510), EMC 3199 MHz, clocks not "
                    "locked, 41.5 C");
    unsetenv("ATTUNE_SYSFS_ROOT");
    rm_root(root);
}

int main(void)
{
    fixture_paths();
    RUN(orin_should_read_mode_clocks_and_temperature);
    RUN(thor_should_use_the_boot_default_and_see_locked_clocks);
    RUN(non_jetson_root_should_be_enodev);
    RUN(mode_change_should_change_the_key);
    RUN(key_should_keep_only_safe_characters);
    RUN(cpu_stack_should_carry_the_power_mode);
    return test_summary();
}
