/* auth.h -- the bearer token of mutating routes and the Host allow-list.
 *
 * The token is a secret shared by the daemon and its operators: 32 random
 * bytes from /dev/urandom written as 64 hex digits in a file readable only
 * by the daemon's user. Compared in constant time so a client cannot learn
 * it byte by byte from response times. The Host check defeats DNS
 * rebinding: a browser page from elsewhere that resolves its own name to
 * 127.0.0.1 still sends its own name as Host. */
#ifndef ATTUNED_AUTH_H
#define ATTUNED_AUTH_H

#include <stddef.h>

/* Longest token accepted, NUL included. */
#define AUTH_TOKEN_MAX 256
/* Shortest token accepted (characters). */
#define AUTH_TOKEN_MIN 16

/* Find and load the token into token[AUTH_TOKEN_MAX]:
 *   explicit_path != NULL: that file, created if missing;
 *   else $CREDENTIALS_DIRECTORY/token when it exists (systemd's
 *   LoadCredential=token:...), never created;
 *   else "token" in the directory of db_path, created if missing.
 * A created file holds 64 hex digits from /dev/urandom and mode 0600. The
 * path used goes to used_path (used_len bytes). A file readable by group or
 * others sets *loose = 1 (the caller warns). Returns 0, or ATTUNE_EIO /
 * ATTUNE_EFORMAT (empty, too short, too long, control characters) with err. */
int auth_token_load(const char *explicit_path, const char *db_path, char *token,
                    char *used_path, size_t used_len, int *loose, char *err,
                    size_t errlen);

/* 1 when the Authorization header value is exactly "Bearer <token>" (scheme
 * case-insensitive), 0 otherwise, in time independent of where they differ. */
int auth_bearer_ok(const char *token, const char *authorization);

/* 1 when the Host header value names a loopback host (localhost,
 * 127.0.0.1, [::1]) or one of extra[0..nextra), with or without ":port",
 * case-insensitively; 0 otherwise (also for NULL or malformed values). */
int auth_host_allowed(const char *host, const char *const *extra, int nextra);

#endif
