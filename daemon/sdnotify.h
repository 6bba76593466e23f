/* sdnotify.h -- systemd's readiness protocol without libsystemd.
 *
 * With Type=notify, systemd passes $NOTIFY_SOCKET: an AF_UNIX datagram
 * socket path (a leading '@' names the abstract namespace). A datagram
 * "READY=1" says start-up finished; "STOPPING=1" that shutdown began. */
#ifndef ATTUNED_SDNOTIFY_H
#define ATTUNED_SDNOTIFY_H

/* Send state (e.g. "READY=1") to $NOTIFY_SOCKET. Returns 1 when sent, 0
 * when no socket is set (not run by systemd), ATTUNE_EIO on failure. */
int sdnotify_send(const char *state);

#endif
