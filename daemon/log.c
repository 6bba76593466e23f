/* log.c -- event lines on stderr or a reopenable log file. */
#include "log.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/attune_err.h"

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = STDERR_FILENO;
static char *log_path;
static volatile int log_min = LOGL_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

static int open_file(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
}

int log_open(const char *path)
{
    if (path == NULL) {
        log_close();
        return 0;
    }
    int fd = open_file(path);
    if (fd < 0)
        return ATTUNE_EIO;
    char *copy = strdup(path);
    if (copy == NULL) {
        close(fd);
        return ATTUNE_ENOMEM;
    }
    pthread_mutex_lock(&log_mu);
    if (log_fd != STDERR_FILENO)
        close(log_fd);
    free(log_path);
    log_fd = fd;
    log_path = copy;
    pthread_mutex_unlock(&log_mu);
    return 0;
}

int log_reopen(void)
{
    int rc = 0;
    pthread_mutex_lock(&log_mu);
    if (log_path != NULL) {
        int fd = open_file(log_path);
        if (fd < 0) {
            rc = ATTUNE_EIO; /* keep writing to the old file */
        } else {
            close(log_fd);
            log_fd = fd;
        }
    }
    pthread_mutex_unlock(&log_mu);
    return rc;
}

void log_close(void)
{
    pthread_mutex_lock(&log_mu);
    if (log_fd != STDERR_FILENO)
        close(log_fd);
    log_fd = STDERR_FILENO;
    free(log_path);
    log_path = NULL;
    pthread_mutex_unlock(&log_mu);
}

void log_set_level(log_level level)
{
    log_min = (int)level;
}

int log_enabled(log_level level)
{
    return (int)level >= log_min;
}

void log_event(log_level level, const char *event, const char *fmt, ...)
{
    if ((int)level < log_min)
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof line, "%Y-%m-%dT%H:%M:%S", &tm);
    int k = snprintf(line + n, sizeof line - n, ".%03ldZ level=%s event=%s",
                     ts.tv_nsec / 1000000L, level_names[level & 3], event);
    if (k > 0)
        n += (size_t)k;
    if (fmt != NULL && *fmt != 0 && n + 2 < sizeof line) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        k = vsnprintf(line + n, sizeof line - n, fmt, ap);
        va_end(ap);
        if (k > 0)
            n += (size_t)k;
    }
    if (n > sizeof line - 2)
        n = sizeof line - 2; /* truncated: still one line */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
    line[n++] = '\n';
    pthread_mutex_lock(&log_mu);
    const char *p = line;
    while (n > 0) {
        ssize_t w = write(log_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* nowhere left to complain */
        p += w;
        n -= (size_t)w;
    }
    pthread_mutex_unlock(&log_mu);
}

const char *log_quote(const char *s, char *buf, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    assert(len >= 8);
    if (s == NULL)
        s = "-";
    size_t end = strlen(s);
    while (end > 0 && (s[end - 1] == ' ' || s[end - 1] == '\n' || s[end - 1] == '\r' ||
                       s[end - 1] == '\t'))
        end--;
    size_t o = 0, cut = 1;
    buf[o++] = '"';
    for (size_t i = 0; i < end; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[4];
        size_t n = 2;
        e[0] = '\\';
        if (c == '"' || c == '\\') {
            e[1] = (char)c;
        } else if (c == '\n') {
            e[1] = 'n';
        } else if (c == '\r') {
            e[1] = 'r';
        } else if (c == '\t') {
            e[1] = 't';
        } else if (c < 0x20 || c >= 0x7f) {
            e[1] = 'x';
            e[2] = hex[c >> 4];
            e[3] = hex[c & 15];
            n = 4;
        } else {
            e[0] = (char)c;
            n = 1;
        }
        if (o + n + 2 > len) { /* no room for it and `"`: back to the last cut */
            o = cut;
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        memcpy(buf + o, e, n);
        o += n;
        if (o + 5 <= len) /* `..."` and the NUL still fit after this escape */
            cut = o;
    }
    buf[o++] = '"';
    buf[o] = 0;
    return buf;
}
