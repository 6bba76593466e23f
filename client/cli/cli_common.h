/* cli_common.h -- what several attune commands share: opening the database,
 * naming the device an offline command means, reading the shape list of a
 * tune, and the text forms of numbers. */
#ifndef ATTUNE_CLI_COMMON_H
#define ATTUNE_CLI_COMMON_H

#include <stddef.h>

#include "cli_opts.h"
#include "db/store.h"
#include "kernels/attn.h"

/* The database of the installed service (systemd/attuned.service's
 * StateDirectory), what offline commands read when given none. */
#ifndef ATTUNE_SYSTEM_DB
#define ATTUNE_SYSTEM_DB "/var/lib/attune/attune.db"
#endif

/* The database an offline command uses when *db is NULL: $ATTUNE_DB when
 * set, else ATTUNE_SYSTEM_DB when it exists (or exists unreadable: opening
 * it then says so). Returns 0 with *db set, or 2 after printing a usage
 * error that says what to give. */
int cli_db_default(const char *cmd, const char **db);

/* The device an offline command means when given none (device NULL): the
 * first GPU of this host ("0"), else "cpu"; else device itself. */
const char *cli_device_default(const char *device);

/* Open the database at path (create: make it when missing). Returns 0, or
 * the store's error code after printing it with the path. */
int cli_store_open(const char *path, int create, store **st);

/* The device an offline command means: one of this host (cpu, an ordinal,
 * a local id or name; *local set when local is not NULL) or, failing that,
 * one known only from the database (imported). Fills info and the stack its
 * rows are read under (the device's current one; the latest stored one for
 * a stored device). Returns 0, or ATTUNE_ENODEV after printing a line. */
int cli_device_resolve(store *st, const char *spec, attn_device *local, int *is_local,
                       attn_device_info *info, attn_stack *stack);

/* The shapes of a tune: those of the grid file, or the canonical keys given
 * (exactly one of grid and keys). *shapes malloc'd (caller frees). Returns
 * 0, 1 (a file or memory error, printed) or 2 (a bad key, printed). */
int cli_shapes_load(const char *cmd, const char *grid, const cli_multi *keys,
                    attn_shape **shapes, int *n);

/* v printed with fmt, or "-" when not measured (NaN, Inf). */
void cli_fmt_num(char *buf, size_t len, const char *fmt, double v);

#endif
