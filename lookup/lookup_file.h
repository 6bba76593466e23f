/* lookup_file.h -- lookups without a daemon (issue 24 item 3): a database
 * file or an exported table loaded, read-only, into the lookup index that
 * attuned answers from (index.h), so an in-process lookup answers by the
 * same rules, in the same JSON (answer_json.h).
 *
 * The file is read once, at open: a database is copied into memory
 * (store_open_snapshot: never written, an older schema migrated in the
 * copy); a table (`attune export`, GET /v1/export; gzip-compressed or not)
 * is validated and merged into an empty in-memory store as `attune
 * import` would. Every device of the file is then loaded as attuned loads
 * a device of another host (a fleet device): its rows count whole (no
 * tune is in flight in a file), its current stack is its latest stored
 * one, and a predicted answer chooses among the CPU backend's listing for
 * a CPU device and among the families the device measured for a GPU (this
 * process probes no GPU). "cpu" and a CUDA ordinal name the file's devices
 * of that kind (index_set_host_specs), besides ids and names. The policy
 * is the default one (tuner/select.h). */
#ifndef ATTUNE_LOOKUP_FILE_H
#define ATTUNE_LOOKUP_FILE_H

#include <stddef.h>

#include "index.h"

/* Largest table read (after inflating): the thirteen H200 tables are
 * 2-3 MB each. */
#define LOOKUP_FILE_MAX ((size_t)1 << 30)

/* Load the database or table at path into a new index (*out; free with
 * index_free). A file that starts like SQLite is a database, anything
 * else a table. Returns 0, or an error with err saying why: cannot read
 * (ATTUNE_EIO), not a table (ATTUNE_EFORMAT, EVERSION, ETOOBIG), no
 * device in it (ATTUNE_ENOTFOUND), ENOMEM. */
int lookup_file_open(const char *path, index_state **out, char *err, size_t errlen);

#endif
