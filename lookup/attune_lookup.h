/* attune_lookup.h -- libattune_lookup: attuned's answers in process, from
 * a database file or an exported table (issue 24 item 3).
 *
 * The engine behind the clients' file mode: libattune_client loads it
 * (dlopen) for a client made with a "file:PATH" URL, and the Python
 * client (ctypes) for Client(table=PATH). Both then parse the same JSON
 * as from attuned. A runtime may also call it directly:
 *
 *   attune_table *t;
 *   char err[256], *json;
 *   attune_table_open("/opt/model/attune-table.json.gz", &t, err, sizeof err);
 *   long long dims[6] = {1, 8, 1, 50, 1018, 256};  // b, hq, hkv, sq, skv, d
 *   int status = attune_table_tactic(t, "0", dims, "f16", 0, 0, NULL, &json);
 *   // status 200: json is GET /v1/tactic's answer; 400/404: {"error": ...}
 *   attune_table_free(json);
 *   attune_table_close(t);
 *
 * Same rules as attuned (lookup/index.h, docs/api.md "Where an answer
 * comes from"), with the file's devices taken as devices of another host
 * (lookup/lookup_file.h says what that changes). The file is read once, at
 * open. Thread safety: any number of threads may call attune_table_tactic
 * on one table; attune_table_close with no call in flight. */
#ifndef ATTUNE_LOOKUP_H
#define ATTUNE_LOOKUP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this interface (dlsym'd by the clients). */
#define ATTUNE_TABLE_ABI 1
int attune_table_abi(void);

typedef struct attune_table attune_table;

/* Read the database or table at path. 0 with *out, or a negative code
 * (attune's error codes) with err saying why (*out NULL). */
int attune_table_open(const char *path, attune_table **out, char *err, size_t errlen);

/* The answer for a shape, as attuned's GET /v1/tactic: device (as its
 * device=), dims = {b, hq, hkv, sq, skv, d}, dtype "f16"/"bf16"/"f32",
 * causal 0/1, max_rel_err (0: the default bound, else in (0, 1]), variants
 * (NULL or "": all; else as variants=). Returns the HTTP status the daemon
 * would (200; 400 bad argument; 404 unknown device or no tactic of the
 * variants; 500 out of memory) with *json the body (malloc'd; release with
 * attune_table_free; NULL only when out of memory). */
int attune_table_tactic(attune_table *t, const char *device, const long long dims[6],
                        const char *dtype, int causal, double max_rel_err,
                        const char *variants, char **json);

void attune_table_free(void *p);
void attune_table_close(attune_table *t);

#ifdef __cplusplus
}
#endif

#endif
