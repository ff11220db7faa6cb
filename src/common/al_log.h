/*
 * al_log: one structured line per event on stderr,
 *   "<unix seconds>.<ms> <program>[<instance>] <level> <message>"
 * Levels: 0 error, 1 info, 2 debug. The caller filters by level.
 *
 * One event is one line whatever a peer sent: the message is escaped
 * (al_log_escape) before it is written, so a newline, a carriage return or
 * an escape sequence in a string from the network (a runner's ERROR text,
 * an identifier, a URI) cannot forge a line or repaint a terminal.
 *
 * al_lograte: a log line about an event that a peer can repeat at will
 * (refused connections, accept errors) is written at most once per
 * interval, with the count of the events it stands for.
 */
#ifndef AL_LOG_H
#define AL_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

void al_vlog(const char *prog, const char *instance, int level, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

/* Copy in[0..len) to out (always NUL-terminated, cut to fit cap): bytes
 * 0x20..0x7e and UTF-8 bytes >= 0x80 as they are, '\\' as "\\\\", \n \r \t
 * as "\\n" "\\r" "\\t", every other control byte as "\\xHH". Returns the
 * length written. */
size_t al_log_escape(const char *in, size_t len, char *out, size_t cap);

struct al_lograte {
    uint64_t next_ms;    /* the next line may be written at this time */
    unsigned long count; /* events since the last line */
};

/* Count one event at now_ms. Returns the number of events the caller's
 * line should report (this one included) when a line is due, else 0. */
unsigned long al_lograte_hit(struct al_lograte *r, uint64_t now_ms, uint64_t interval_ms);

#endif
