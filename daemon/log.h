/* log.h -- one line per event: time, level, event, key=value pairs.
 *
 *   2024-05-01T12:00:00.123Z level=info event=listening port=7373
 *
 * Lines go to stderr, or to the file given to log_open() (reopened by
 * log_reopen() on SIGHUP, so logrotate can move it). Safe from any thread:
 * each line is formatted in full, then written with one write(2) under a
 * mutex.
 *
 * Values are bare words (numbers, ids, shape keys, tactics: attune's own
 * vocabulary, [A-Za-z0-9._:/=-]) or quoted. Every value that comes from
 * outside (an error text of libpq, SQLite or the C library, a path, a
 * device or model name, a client's text, libmicrohttpd's messages) goes
 * through log_quote() (LOG_Q), the one escaping function: a reader
 * splitting on key="..." recovers it exactly, and no text can end its field
 * or forge another (tests/test_log.c, tests/it_log_escape.py). As a last
 * resort any control character left in a formatted line becomes '?', so
 * one event stays one line. */
#ifndef ATTUNED_LOG_H
#define ATTUNED_LOG_H

#include <stddef.h>

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

/* The quoted form of outside text s for a log value, written into buf
 * (len bytes, at least 8) and returned: `"` + s + `"`, with `"` and `\`
 * escaped by a backslash, newline, carriage return and tab as \n \r \t,
 * every other byte below 0x20 and every byte from 0x7f up as \xHH, and
 * white space at its end dropped (libpq ends its messages with a newline).
 * Past len, s is cut at a whole escape and the value ends with `..."`.
 * s NULL: `"-"`. Never fails. */
const char *log_quote(const char *s, char *buf, size_t len);

/* log_quote into a buffer of the enclosing statement (a compound literal:
 * it lives until the end of the block holding the log_event call). */
#define LOG_QUOTE_MAX 512
#define LOG_Q(s) log_quote((s), (char[LOG_QUOTE_MAX]){0}, LOG_QUOTE_MAX)

#endif
