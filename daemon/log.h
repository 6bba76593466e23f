/* log.h -- one line per event: time, level, event, key=value pairs.
 *
 *   2024-05-01T12:00:00.123Z level=info event=listening port=7373
 *
 * Lines go to stderr, or to the file given to log_open() (reopened by
 * log_reopen() on SIGHUP, so logrotate can move it). Safe from any thread:
 * each line is formatted in full, then written with one write(2) under a
 * mutex. Control characters in the formatted line (a client-supplied path
 * holding %0a, say) are replaced by '?' so one event stays one line. */
#ifndef ATTUNED_LOG_H
#define ATTUNED_LOG_H

typedef enum { LOGL_DEBUG = 0, LOGL_INFO = 1, LOGL_WARN = 2, LOGL_ERROR = 3 } log_level;

/* Log to path (append, created 0640) instead of stderr; NULL: stderr.
 * Returns 0 or ATTUNE_EIO (then logging stays on stderr). */
int log_open(const char *path);

/* Reopen the file given to log_open (no-op on stderr). 0 or ATTUNE_EIO. */
int log_reopen(void);

/* Close the file, back to stderr. */
void log_close(void);

/* Lines below level are dropped (default LOGL_INFO). */
void log_set_level(log_level level);
int log_enabled(log_level level);

/* Write one line: `<time> level=<level> event=<event> <fmt...>`; fmt holds
 * the key=value pairs (may be NULL or ""). */
void log_event(log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
