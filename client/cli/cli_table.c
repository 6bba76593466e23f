/* cli_table.c -- `attune export` and `attune import`: fleet tables
 * (docs/fleet.md) out of and into a database file. */
#include "cli_table.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_common.h"
#include "common/table_file.h"

static const char export_help[] =
    "usage: attune export [--db FILE] [--device ID] [-o FILE]\n"
    "\n"
    "Writes the device's measurements, all stacks, with provenance as a fleet\n"
    "table (docs/fleet.md) to stdout or FILE (-o, --output; written beside, then\n"
    "renamed). --db defaults to $ATTUNE_DB, else the installed service's database\n"
    "(" ATTUNE_SYSTEM_DB ") when it exists; --device to the first GPU of this\n"
    "host, else cpu. Rows of a tune not completed here (in flight, canceled or\n"
    "failed) stay out until a tune of their shape completes; stderr counts them.\n";

static const char import_help[] =
    "usage: attune import [--db FILE] TABLE.json\n"
    "\n"
    "Validates the fleet table completely (types, ranges, tactics, duplicates,\n"
    "sizes), then merges it in one transaction: a row replaces a stored one only\n"
    "when newer. Any problem rejects the whole table; the database is unchanged\n"
    "(and one that did not exist is not created). --db defaults to $ATTUNE_DB,\n"
    "else the installed service's database (" ATTUNE_SYSTEM_DB ") when it exists.\n"
    "TABLE.json may be - for stdin, and gzip-compressed (TABLE.json.gz, as the\n"
    "H200 tables in bench/).\n";

/* Write text and a newline to path beside, then rename: a crash never
 * leaves half a table. Returns 0 or -1 (printed). */
static int write_file(const char *path, const char *text)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "attune: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        fprintf(stderr, "attune: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int cli_export_main(int argc, char **argv)
{
    const char *db = NULL, *device = NULL, *outp = NULL;
    int rc;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, &db},
                            {"device", 0, CLI_VALUE, &device},
                            {"output", 'o', CLI_VALUE, &outp},
                            {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, export_help, NULL, &rc))
        return rc;
    if ((rc = cli_db_default("export", &db)) != 0)
        return rc;
    device = cli_device_default(device);
    store *st;
    if (cli_store_open(db, 0, &st) != 0)
        return 1;
    char *json = NULL;
    attn_device_info info;
    attn_stack stack;
    rc = 1;
    if (cli_device_resolve(st, device, NULL, NULL, &info, &stack) != 0)
        goto out;
    int erc = store_export(st, info.id, &json);
    if (erc != 0) {
        fprintf(stderr, "attune: export of %s failed: %s\n", info.id, attune_strerror(erc));
        goto out;
    }
    int64_t held = 0;
    if (store_export_held_back(st, info.id, &held) == 0 && held > 0)
        fprintf(stderr,
                "attune: %lld row%s of tunes not completed (in flight, canceled or failed) "
                "left out; they go once a tune of their shape completes\n",
                (long long)held, held == 1 ? "" : "s");
    if (outp && strcmp(outp, "-") != 0) {
        if (write_file(outp, json) != 0)
            goto out;
    } else {
        puts(json);
    }
    rc = 0;
out:
    free(json);
    store_close(st);
    return rc;
}

/* Remove the database file at path and its SQLite companions. */
static void remove_db(const char *path)
{
    static const char *const ext[] = {"", "-wal", "-shm", "-journal"};
    char buf[4096];
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        snprintf(buf, sizeof buf, "%s%s", path, ext[i]);
        unlink(buf);
    }
}

int cli_import_main(int argc, char **argv)
{
    const char *db = NULL;
    cli_pos pos = {.max = 1};
    int rc;
    const cli_opt opts[] = {{"db", 0, CLI_VALUE, &db}, {NULL, 0, 0, NULL}};
    if (cli_parse(argc, argv, opts, import_help, &pos, &rc))
        return rc;
    if (pos.n != 1)
        return cli_usage_error("import", "needs one TABLE.json");
    if ((rc = cli_db_default("import", &db)) != 0)
        return rc;
    char *json, rerr[ATTUNE_ERRLEN] = "";
    size_t len;
    if (table_file_read(pos.v[0], (size_t)64 << 20, &json, &len, rerr, sizeof rerr) != 0) {
        fprintf(stderr, "attune: %s\n", rerr);
        return 1;
    }
    /* a database this import creates goes again when the table is refused:
     * "unchanged" means no new file either */
    int created = access(db, F_OK) != 0 && errno == ENOENT;
    store *st;
    if (cli_store_open(db, 1, &st) != 0) {
        free(json);
        return 1;
    }
    store_import_stats stats;
    char err[ATTUNE_ERRLEN] = "";
    rc = store_import(st, json, len, &stats, err, sizeof err);
    store_close(st);
    free(json);
    if (rc != 0) {
        if (created)
            remove_db(db);
        fprintf(stderr, "attune: import of %s rejected, %s: %s\n", pos.v[0],
                created ? "no database created" : "database unchanged",
                err[0] ? err : attune_strerror(rc));
        return 1;
    }
#define S_(n) ((n) == 1 ? "" : "s")
    printf("imported %s: %d measurement%s written, %d skipped (not newer), %d device%s, "
           "%d stack%s, %d pin%s\n", pos.v[0], stats.measurements, S_(stats.measurements),
           stats.skipped, stats.devices, S_(stats.devices), stats.stacks, S_(stats.stacks),
           stats.pins, S_(stats.pins));
#undef S_
    return 0;
}
