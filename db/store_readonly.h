/* store_readonly.h -- a read-only connection to a store another handle
 * writes: what the daemon's readers use (GET /v1/export streams, the read
 * pool of GET /v1/winners and /v1/drift), so that no read waits behind a
 * write or holds one up (WAL: a reader sees the last commit before its
 * read began and never takes the write lock). */
#ifndef ATTUNE_STORE_READONLY_H
#define ATTUNE_STORE_READONLY_H

#include <stddef.h>

#include "store.h"

/* Open the database at path read-only (SQLITE_OPEN_READONLY: any write
 * through it fails) as a store of its own, with the store's busy timeout.
 * No migration: a read-only connection cannot write one, so the schema
 * must be current (ATTUNE_EVERSION otherwise: open it with store_open
 * first). On error *out is NULL and err says why. */
int store_open_readonly(const char *path, store **out, char *err, size_t errlen);

#endif
