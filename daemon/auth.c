/* auth.c -- token file handling, constant-time compare, Host allow-list. */
#include "auth.h"

#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/attune_err.h"

/* 32 random bytes as 64 hex digits and a newline into hex[66]. */
static int random_hex(char *hex, char *err, size_t errlen)
{
    unsigned char raw[32];
    int rfd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (rfd < 0)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot open /dev/urandom: %s",
                           strerror(errno));
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t r = read(rfd, raw + got, sizeof raw - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            close(rfd);
            return attune_fail(err, errlen, ATTUNE_EIO, "cannot read /dev/urandom");
        }
        got += (size_t)r;
    }
    close(rfd);
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(hex + 2 * i, 3, "%02x", raw[i]);
    hex[sizeof raw * 2] = '\n';
    hex[sizeof raw * 2 + 1] = 0;
    return 0;
}

/* fsync the directory of path, so a link made in it survives a power
 * loss. Best effort: the token is already whole in its file. */
static void sync_dir_of(const char *path)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path) >=
             (int)sizeof dir)
        return;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* Write a fresh token file at path, never a partial one: the token is
 * written and synced in a temporary file beside it (mkstemp: mode 0600
 * from the start), then link()ed to path, which fails with EEXIST when a
 * racing creator won (theirs is read, as with O_EXCL). On a filesystem
 * without hard links it is renamed into place when path does not exist
 * (a racing creator could then lose its token: starts are not raced
 * there in practice). A crash at any point leaves no token file or a
 * whole one; an empty one would refuse every later start. A crash can
 * leave the temporary (path.XXXXXX). */
static int create_token_file(const char *path, char *err, size_t errlen)
{
    char hex[66], tmp[4096];
    int rc = random_hex(hex, err, errlen);
    if (rc != 0)
        return rc;
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp)
        return attune_fail(err, errlen, ATTUNE_EINVAL, "token file path too long");
    int fd = mkstemp(tmp);
    if (fd < 0)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot create token file %s: %s", tmp,
                           strerror(errno));
    size_t len = strlen(hex);
    ssize_t w = write(fd, hex, len);
    rc = (w == (ssize_t)len && fsync(fd) == 0) ? 0 : ATTUNE_EIO;
    if (close(fd) != 0)
        rc = ATTUNE_EIO;
    int linked = rc == 0 ? link(tmp, path) : -1, link_errno = errno;
    if (linked != 0 && rc == 0 && link_errno != EEXIST && access(path, F_OK) != 0 &&
        rename(tmp, path) == 0) { /* no hard links here (EPERM, ENOTSUP, ...): moved */
        sync_dir_of(path);
        return 0;
    }
    unlink(tmp);
    if (rc != 0)
        return attune_fail(err, errlen, rc, "cannot write token file %s", tmp);
    if (linked != 0 && link_errno != EEXIST) /* EEXIST: someone else made it: read theirs */
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot create token file %s: %s", path,
                           strerror(link_errno));
    sync_dir_of(path);
    return 0;
}

/* Read the token at path into token; trims surrounding whitespace. */
static int read_token_file(const char *path, char *token, int *loose, char *err,
                           size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return attune_fail(err, errlen, ATTUNE_EIO, "cannot open token file %s: %s", path,
                           strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) == 0 && (sb.st_mode & 077) != 0)
        *loose = 1;
    char buf[AUTH_TOKEN_MAX + 8];
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            close(fd);
            return attune_fail(err, errlen, ATTUNE_EIO, "cannot read token file %s", path);
        }
        if (r == 0 || len + (size_t)r >= sizeof buf - 1) {
            len += (size_t)(r > 0 ? r : 0);
            break;
        }
        len += (size_t)r;
    }
    close(fd);
    buf[len] = 0;
    char *s = buf;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
                     s[n - 1] == '\r'))
        s[--n] = 0;
    if (n < AUTH_TOKEN_MIN || n >= AUTH_TOKEN_MAX)
        return attune_fail(err, errlen, ATTUNE_EFORMAT,
                           "token in %s must be %d to %d characters", path, AUTH_TOKEN_MIN,
                           AUTH_TOKEN_MAX - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return attune_fail(err, errlen, ATTUNE_EFORMAT,
                               "token in %s holds a space or control character", path);
    memcpy(token, s, n + 1);
    return 0;
}

int auth_token_load(const char *explicit_path, const char *db_path, char *token,
                    char *used_path, size_t used_len, int *loose, char *err, size_t errlen)
{
    int create = 1;
    *loose = 0;
    if (explicit_path != NULL) {
        snprintf(used_path, used_len, "%s", explicit_path);
    } else {
        const char *cred = getenv("CREDENTIALS_DIRECTORY");
        char path[4096];
        if (cred != NULL && *cred != 0 &&
            snprintf(path, sizeof path, "%s/token", cred) < (int)sizeof path &&
            access(path, F_OK) == 0) {
            snprintf(used_path, used_len, "%s", path);
            create = 0;
        } else {
            const char *slash = strrchr(db_path, '/');
            if (slash == NULL)
                snprintf(used_path, used_len, "token");
            else
                snprintf(used_path, used_len, "%.*s/token", (int)(slash - db_path), db_path);
        }
    }
    if (create && access(used_path, F_OK) != 0) {
        int rc = create_token_file(used_path, err, errlen);
        if (rc != 0)
            return rc;
    }
    return read_token_file(used_path, token, loose, err, errlen);
}

int auth_bearer_ok(const char *token, const char *authorization)
{
    if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
        return 0;
    const char *given = authorization + 7;
    while (*given == ' ')
        given++;
    /* Walk the full length of the expected token whatever the input, and
     * fold the length difference in: no early exit on the first mismatch. */
    size_t tn = strlen(token), gn = strlen(given);
    unsigned diff = (unsigned)(tn != gn);
    for (size_t i = 0; i < tn; i++) {
        unsigned char g = i < gn ? (unsigned char)given[i] : 0;
        diff |= (unsigned)(g ^ (unsigned char)token[i]);
    }
    return diff == 0;
}

/* Length of the host part of a Host header value (without ":port"), or 0
 * when the value is malformed. */
static size_t host_name_len(const char *host)
{
    const char *colon;
    if (host[0] == '[') {
        const char *close = strchr(host, ']');
        if (close == NULL)
            return 0;
        colon = close[1] == ':' ? close + 1 : NULL;
        if (colon == NULL && close[1] != 0)
            return 0;
    } else {
        colon = strchr(host, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL)
            return 0; /* bare IPv6 must be bracketed */
    }
    if (colon == NULL)
        return strlen(host);
    const char *p = colon + 1;
    if (*p == 0 || strlen(p) > 5)
        return 0;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return (size_t)(colon - host);
}

static int name_is(const char *name, size_t n, const char *want)
{
    return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

/* 1 when the bracketed host name[0..n) ("[fd00::2]") and the allowed
 * entry (bare "fd00::2", as --bind takes it, or bracketed) are the same
 * IPv6 address, however each is spelled. */
static int same_ipv6(const char *name, size_t n, const char *entry)
{
    char a[INET6_ADDRSTRLEN + 2], b[INET6_ADDRSTRLEN + 2];
    struct in6_addr x, y;
    if (n < 3 || name[0] != '[' || name[n - 1] != ']' || n - 2 >= sizeof a)
        return 0;
    memcpy(a, name + 1, n - 2);
    a[n - 2] = 0;
    size_t m = strlen(entry);
    if (m >= 2 && entry[0] == '[' && entry[m - 1] == ']') {
        entry++;
        m -= 2;
    }
    if (m >= sizeof b)
        return 0;
    memcpy(b, entry, m);
    b[m] = 0;
    return inet_pton(AF_INET6, a, &x) == 1 && inet_pton(AF_INET6, b, &y) == 1 &&
           memcmp(&x, &y, sizeof x) == 0;
}

int auth_host_allowed(const char *host, const char *const *extra, int nextra)
{
    static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
    if (host == NULL || *host == 0)
        return 0;
    size_t n = host_name_len(host);
    if (n == 0)
        return 0;
    for (size_t i = 0; i < sizeof loopback / sizeof loopback[0]; i++)
        if (name_is(host, n, loopback[i]))
            return 1;
    for (int i = 0; i < nextra; i++)
        if (extra[i] != NULL && (name_is(host, n, extra[i]) || same_ipv6(host, n, extra[i])))
            return 1;
    return 0;
}
