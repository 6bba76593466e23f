/* routes.h -- the HTTP entry points that server.c hands to libmicrohttpd. */
#ifndef ATTUNED_ROUTES_H
#define ATTUNED_ROUTES_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>

/* Register route labels with metrics. Call once before server_start. */
void routes_init(void);

/* MHD_AccessHandlerCallback; cls is the attuned. */
enum MHD_Result routes_access(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version,
                              const char *upload_data, size_t *upload_data_size,
                              void **req_cls);

/* MHD_RequestCompletedCallback: frees the request state. */
void routes_completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode toe);

#endif
