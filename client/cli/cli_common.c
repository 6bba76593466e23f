/* cli_common.c -- the database, device and shape-list helpers the attune
 * commands share. */
#include "cli_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tuner/grid.h"

int cli_db_default(const char *cmd, const char **db)
{
    if (*db != NULL)
        return 0;
    const char *env = getenv("ATTUNE_DB");
    if (env != NULL && env[0] != 0) {
        *db = env;
        return 0;
    }
    if (access(ATTUNE_SYSTEM_DB, F_OK) == 0 || errno == EACCES) {
        *db = ATTUNE_SYSTEM_DB;
        return 0;
    }
    return cli_usage_error(cmd, "no database: give --db FILE or set ATTUNE_DB (the "
                                "installed service's " ATTUNE_SYSTEM_DB " does not exist)");
}

const char *cli_device_default(const char *device)
{
    if (device != NULL)
        return device;
    attn_device devs[16];
    int n = attn_devices(devs, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(devs[i].info.kind, "cuda") == 0)
            return "0";
    return "cpu";
}

int cli_store_open(const char *path, int create, store **st)
{
    char err[ATTUNE_ERRLEN] = "";
    int rc = store_open(path, create, st, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "attune: database %s: %s\n", path, err[0] ? err : attune_strerror(rc));
    return rc;
}

int cli_device_resolve(store *st, const char *spec, attn_device *local, int *is_local,
                       attn_device_info *info, attn_stack *stack)
{
    attn_device dev;
    char err[ATTUNE_ERRLEN];
    if (is_local != NULL)
        *is_local = 0;
    if (attn_device_resolve(spec, &dev, err, sizeof err) == 0) {
        *info = dev.info;
        *stack = dev.stack;
        if (local != NULL)
            *local = dev;
        if (is_local != NULL)
            *is_local = 1;
        return 0;
    }
    if (st != NULL && store_device_get(st, spec, info, stack) == 0)
        return 0;
    fprintf(stderr, "attune: unknown device '%s': not on this host and not in the database\n",
            spec);
    return ATTUNE_ENODEV;
}

int cli_shapes_load(const char *cmd, const char *grid, const cli_multi *keys,
                    attn_shape **shapes, int *n)
{
    char err[ATTUNE_ERRLEN];
    *shapes = NULL;
    *n = 0;
    if (grid != NULL) {
        if (grid_load(grid, shapes, n, err, sizeof err) != 0) {
            fprintf(stderr, "attune %s: %s\n", cmd, err);
            return 1;
        }
        return 0;
    }
    if ((*shapes = calloc((size_t)keys->n, sizeof **shapes)) == NULL) {
        fprintf(stderr, "attune %s: out of memory\n", cmd);
        return 1;
    }
    for (int i = 0; i < keys->n; i++)
        if (attn_shape_parse(keys->v[i], &(*shapes)[i], err, sizeof err) != 0) {
            fprintf(stderr, "attune %s: --shape %s: %s\n", cmd, keys->v[i], err);
            free(*shapes);
            *shapes = NULL;
            return 2;
        }
    *n = keys->n;
    return 0;
}

void cli_fmt_num(char *buf, size_t len, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, len, fmt, v);
    else
        snprintf(buf, len, "-");
}
