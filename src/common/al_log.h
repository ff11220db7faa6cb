/*
 * al_log: one structured line per event on stderr, in one of two formats
 * (the caller's context says which: --log-format text|json):
 *   text  "<unix seconds>.<ms> <program>[<instance>] <level> <message>"
 *   json  {"time":"2026-01-02T03:04:05.678Z","ts":1767323045.678,
 *          "prog":"airlockd","instance":"relay","level":"info","msg":"..."}
 *         one object a line, always these six keys in this order, so that
 *         journald, Loki or Elastic can query them; each string escaped as
 *         JSON (al_log_json_escape: a newline or an escape sequence from a
 *         peer is "\u000a", "\u001b", invalid UTF-8 is U+FFFD), so that it
 *         cannot forge a line either.
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

enum al_log_format { AL_LOG_TEXT = 0, AL_LOG_JSON = 1 };

/* "text" or "json": the format; -1 for anything else. */
int al_log_format_of(const char *name);

void al_vlog(int format, const char *prog, const char *instance, int level, const char *fmt,
             va_list ap) __attribute__((format(printf, 5, 0)));

/* The line al_vlog writes, into out (cap bytes, NUL-terminated, cut to fit
 * but always one whole line ending in '\n'); time in ms since the epoch.
 * Returns the length. For tests and al_vlog itself. */
size_t al_log_format_line(int format, int64_t unix_ms, const char *prog, const char *instance,
                          int level, const char *msg, char *out, size_t cap);

/* in[0..len) as the inside of a JSON string (no quotes) into out (always
 * NUL-terminated, cut to fit cap at a whole character): '"' '\\' and
 * control bytes escaped, valid UTF-8 kept, each byte of invalid UTF-8 as
 * "\ufffd". Returns the length written. */
size_t al_log_json_escape(const char *in, size_t len, char *out, size_t cap);

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
