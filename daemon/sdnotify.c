/* sdnotify.c -- one datagram to $NOTIFY_SOCKET. */
#include "sdnotify.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/attune_err.h"

int sdnotify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || *path == 0)
        return 0;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    size_t n = strlen(path);
    if ((path[0] != '/' && path[0] != '@') || n >= sizeof sa.sun_path)
        return ATTUNE_EIO;
    memcpy(sa.sun_path, path, n);
    if (path[0] == '@')
        sa.sun_path[0] = 0; /* abstract namespace */
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return ATTUNE_EIO;
    ssize_t w = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
    close(fd);
    return w == (ssize_t)strlen(state) ? 1 : ATTUNE_EIO;
}
