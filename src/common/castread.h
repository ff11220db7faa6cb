/*
 * castread: the strict reader of asciicast v3 and v2 recordings (untrusted
 * input).
 *
 * Shared code (al_common): `airlock replay` plays recordings with it, and
 * the control plane's writer (src/control/cast.c) checks the durable prefix
 * of a recording with it before resuming. It holds no secret and does no
 * I/O but reading the one file or memory buffer it is given.
 *
 * Format: newline-delimited JSON as specified at
 * https://docs.asciinema.org/manual/asciicast/v3/ (and .../asciicast/v2/):
 * line 1 is a header object
 *   {"version":3,"term":{"cols":C,"rows":R,"type":T},"timestamp":S,
 *    "idle_time_limit":F,"command":"…","title":"…","env":{"K":"V"}}
 * (v2: "width" and "height" instead of "term"), and every further line one
 * event [time, code, data], where time is seconds since the previous event
 * (v3; v2 has seconds since the start), code one of "o" output, "i" input,
 * "r" resize ("COLSxROWS"), "m" marker (label), "x" exit (status as a
 * decimal string) or a code this reader does not know, and data a JSON
 * string. In v3, a line starting with '#' is a comment.
 *
 * Data model:
 *   struct castread        opaque reader, owned by the caller
 *                          (castread_close): a file or a caller's memory
 *                          buffer (not copied, must outlive the reader), one
 *                          line at a time (at most CASTREAD_MAX_LINE bytes).
 *   struct castread_info   the header, owned by the reader.
 *   struct castread_event  one event; its data points into the reader.
 * Units: times are microseconds (int64_t) since the start of the recording;
 * sizes and counts are bytes.
 *
 * Errors: AL_OK or a negative AL_E_* code (al_err.h); the open functions
 * also write a one-line reason to a caller buffer, and a reader keeps
 * "line N: reason" of its first error (castread_error).
 */
#ifndef CASTREAD_H
#define CASTREAD_H

#include <stddef.h>
#include <stdint.h>

enum {
    CASTREAD_MAX_LINE = 1 << 20,         /* bytes in one line, newline excluded */
    CASTREAD_MAX_CODE = 8,               /* bytes in an event code */
    CASTREAD_ERR_MAX = 256,              /* bytes in a reader's error message */
    CASTREAD_MAX_INTERVAL_S = 1000000000 /* an event time/interval above this is refused */
};

struct castread;

enum castread_kind {
    CASTREAD_EV_OUTPUT, /* "o" */
    CASTREAD_EV_INPUT,  /* "i" */
    CASTREAD_EV_RESIZE, /* "r": cols, rows */
    CASTREAD_EV_MARKER, /* "m" */
    CASTREAD_EV_EXIT,   /* "x": status */
    CASTREAD_EV_OTHER   /* a code this reader does not know: pass it through or
                           ignore it, as the spec requires */
};

struct castread_info {
    int version;                /* 2 or 3 */
    unsigned cols, rows;        /* initial size */
    int64_t timestamp;          /* -1 if absent */
    int64_t idle_time_limit_us; /* -1 if absent */
    const char *term_type;      /* NULL if absent; owned by the reader */
    const char *command, *title;
};

struct castread_event {
    int64_t time_us; /* since the start of the recording */
    enum castread_kind kind;
    char code[CASTREAD_MAX_CODE + 1];
    const uint8_t *data; /* decoded JSON string (may hold NUL bytes), valid until
                            the next castread_next or castread_close */
    size_t len;
    unsigned cols, rows; /* CASTREAD_EV_RESIZE */
    int status;          /* CASTREAD_EV_EXIT */
};

/* The header is parsed here: a bad header fails the open (line 1). A path
 * is read sequentially, so a pipe will do (/dev/stdin). */
int castread_open(const char *path, struct castread **out, char *err, size_t cap);
int castread_open_mem(const void *buf, size_t len, struct castread **out, char *err, size_t cap);
const struct castread_info *castread_info(const struct castread *r);
/* 1: *ev holds the next event; 0: end of the recording; < 0: error, and
 * every later call returns it again (castread_error says which line).
 * Comment lines ("#…", v3) are skipped. */
int castread_next(struct castread *r, struct castread_event *ev);
/* "line N: reason" of the last error, "" if none. */
const char *castread_error(const struct castread *r);
/* The number of the line last read (1 = header). */
unsigned long castread_line(const struct castread *r);
void castread_close(struct castread *r);

/* Check a recording's prefix before appending to it: the first limit bytes
 * of fd, read from its current offset, must be a header of the given
 * version and whole valid event lines, the last one ending with '\n'.
 * *last_us is then the last event's time (0 if none) and *exited whether
 * an "x" event was among them. fd stays open and is not owned. On error,
 * err gets "line N: reason". */
int castread_prefix(int fd, int64_t limit, int version, int64_t *last_us, int *exited, char *err,
                    size_t cap);

/* The bounded form of that check, for a caller that stored the time of the
 * prefix's last event beside its size: only the header line (of the given
 * version) and the prefix's last line are read, whatever limit is. fd is
 * a regular file, read from its start (its offset moves). The last line
 * must end with '\n' exactly at limit, be at most max_line bytes with its
 * '\n' (the longest line the caller's writer produces, at most
 * CASTREAD_MAX_LINE) and be a valid event, not a comment. *last_us is then
 * that event's own time (v3: its interval; v2: its time), -1 if the prefix
 * is the header alone; *last_exit whether it is an "x" event. The lines
 * between are not read: their validity is the caller's to vouch for. On
 * error, err gets "line N: reason" (the header) or "line at byte N:
 * reason" (the last line). */
int castread_prefix_tail(int fd, int64_t limit, int version, size_t max_line, int64_t *last_us,
                         int *last_exit, char *err, size_t cap);

#endif
