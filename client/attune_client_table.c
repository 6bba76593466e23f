/* attune_client_table.c -- the client's file mode (attune_client_table.h). */
#define _GNU_SOURCE 1 /* dladdr: where this library lies */
#include "attune_client_table.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LOOKUP_SONAME "libattune_lookup.so.1"

/* dlopen libattune_lookup: $ATTUNE_LOOKUP_LIB, else the file beside this
 * library (an install or the build tree), else by its SONAME. */
static void *load_lookup(char *why, size_t whylen)
{
    const char *env = getenv("ATTUNE_LOOKUP_LIB");
    if (env != NULL && env[0] != 0) {
        void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
        if (h == NULL)
            snprintf(why, whylen, "cannot load %s: %s", env, dlerror());
        return h;
    }
    Dl_info info;
    char path[4096];
    if (dladdr((void *)table_mode_open, &info) != 0 && info.dli_fname != NULL) {
        const char *slash = strrchr(info.dli_fname, '/');
        int n = slash != NULL ? (int)(slash - info.dli_fname) : 0;
        snprintf(path, sizeof path, "%.*s/" LOOKUP_SONAME, n, info.dli_fname);
        if (slash != NULL && access(path, R_OK) == 0)
            return dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    void *h = dlopen(LOOKUP_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        snprintf(why, whylen, "cannot load " LOOKUP_SONAME " (installed with attuned; or set "
                 "ATTUNE_LOOKUP_LIB): %s", dlerror());
    return h;
}

/* Resolve the functions and open the table. 0, or -1 with tm->error. */
static int open_table(table_mode *tm, const char *path)
{
    int (*abi)(void);
    int (*open_)(const char *, void **, char *, size_t);
    /* POSIX: a data pointer from dlsym converts to a function pointer */
    *(void **)&abi = dlsym(tm->lib, "attune_table_abi");
    *(void **)&open_ = dlsym(tm->lib, "attune_table_open");
    *(void **)&tm->tactic = dlsym(tm->lib, "attune_table_tactic");
    *(void **)&tm->free_ = dlsym(tm->lib, "attune_table_free");
    *(void **)&tm->close_ = dlsym(tm->lib, "attune_table_close");
    if (!abi || !open_ || !tm->tactic || !tm->free_ || !tm->close_ || abi() != 1) {
        snprintf(tm->error, sizeof tm->error, "libattune_lookup: not the interface of "
                 "version 1");
        return -1;
    }
    char err[256];
    if (open_(path, &tm->t, err, sizeof err) != 0) {
        snprintf(tm->error, sizeof tm->error, "%s", err);
        tm->t = NULL;
        return -1;
    }
    return 0;
}

table_mode *table_mode_open(const char *path)
{
    table_mode *tm = calloc(1, sizeof *tm);
    if (tm == NULL)
        return NULL;
    if ((tm->lib = load_lookup(tm->error, sizeof tm->error)) != NULL)
        open_table(tm, path);
    return tm;
}

void table_mode_close(table_mode *tm)
{
    if (tm == NULL)
        return;
    if (tm->t != NULL)
        tm->close_(tm->t);
    if (tm->lib != NULL)
        dlclose(tm->lib);
    free(tm);
}

int table_mode_ask(table_mode *tm, const attune_shape_q *q, const char *device,
                   double max_rel_err, const char *variants, char **json, char *why,
                   size_t whylen)
{
    *json = NULL;
    if (tm->t == NULL) {
        snprintf(why, whylen, "%s", tm->error);
        return -1;
    }
    const long long dims[6] = {q->b, q->hq, q->hkv, q->sq, q->skv, q->d};
    char *text = NULL;
    int status = tm->tactic(tm->t, device, dims, q->dtype, q->causal, max_rel_err,
                            variants[0] ? variants : NULL, &text);
    if (text == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    /* the text is the other library's: copied, freed by its free */
    *json = strdup(text);
    tm->free_(text);
    if (*json == NULL) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    return status;
}
