/*
 * cast: the asciicast v3 recording writer of the control plane (al_control).
 *
 * Durable and resumable: a recording survives a crash of airlockd and is
 * continued exactly where it was durable (docs/recording.md). The strict
 * reader of recordings is shared code, src/common/castread.h; this writer
 * uses it to check a recording before resuming it.
 *
 * Format: newline-delimited JSON as specified at
 * https://docs.asciinema.org/manual/asciicast/v3/: line 1 is a header object
 *   {"version":3,"term":{"cols":C,"rows":R,"type":T},"timestamp":S,
 *    "idle_time_limit":F,"command":"…","title":"…","env":{"K":"V"}}
 * and every further line one event [interval, code, data], where interval is
 * seconds since the previous event, code one of "o" output, "i" input,
 * "r" resize ("COLSxROWS"), "m" marker (label), "x" exit (status as a
 * decimal string), and data a JSON string.
 *
 * Data model:
 *   struct cast         opaque writer, owned by the caller (cast_close): one
 *                       recording file, a bounded write buffer
 *                       (CAST_WBUF_SIZE bytes), the time of the previous
 *                       event, and a UTF-8 carry for output and for input.
 *   struct cast_utf8    caller-owned state of the streaming UTF-8
 *                       sanitizer: up to 3 bytes of an incomplete sequence.
 * Units: times are microseconds (int64_t); sizes and counts are bytes.
 * The writer never reads a clock: callers pass now_us from one monotonic
 * clock, the same one as cast_header.start_us. An interval is capped at
 * the reader's CASTREAD_MAX_INTERVAL_S.
 *
 * Errors: AL_OK or a negative AL_E_* code (al_err.h); open functions also
 * write a one-line reason to a caller buffer. A write or fsync error puts
 * the writer in a failed state (see cast_status) and cuts the file back to
 * its durable size, so that it still ends with a whole line.
 */
#ifndef CAST_H
#define CAST_H

#include <stddef.h>
#include <stdint.h>

enum {
    CAST_VERSION = 3,            /* the version the writer produces */
    CAST_EVENT_MAX_BYTES = 4096, /* raw bytes per written "o"/"i" event; longer
                                    chunks become several events */
    CAST_WBUF_SIZE = 64 * 1024,  /* writer buffer, flushed when full or at sync */
    CAST_MAX_LABEL = 1024,       /* bytes in a marker label */
    CAST_MAX_ENV = 256,          /* env entries in a header written */
    CAST_MAX_HEADER_STR = 4096,  /* bytes in a header string written */
};

/* ---------------------------------------------------------------------------
 * UTF-8 sanitizer (pure, used by the writer; exposed for tests and fuzzing).
 * Follows the WHATWG Encoding Standard UTF-8 decoder: every maximal subpart
 * of an ill-formed sequence (stray continuation bytes, overlongs, surrogates
 * U+D800..U+DFFF, values above U+10FFFF, bytes F5..FF) becomes one U+FFFD;
 * an incomplete sequence at the end of a chunk is carried to the next call,
 * so the output does not depend on where the input was split.
 */
struct cast_utf8 {
    uint8_t seq[3]; /* bytes of the incomplete sequence seen so far */
    uint8_t len;    /* how many of seq are used (0..3) */
    uint8_t need;   /* continuation bytes still expected */
    uint8_t lower;  /* accepted range of the next continuation byte */
    uint8_t upper;
};

/* Worst-case output of cast_utf8_sanitize for n input bytes. */
#define CAST_UTF8_OUT_MAX(n) (3 * ((size_t)(n) + 3))

void cast_utf8_init(struct cast_utf8 *st);
/* Sanitize in[0..n) into out; returns the bytes written, always valid
 * UTF-8. An incomplete tail stays in st. With cap < CAST_UTF8_OUT_MAX(n)
 * (or a NULL argument) nothing is consumed and 0 is returned. */
size_t cast_utf8_sanitize(struct cast_utf8 *st, const uint8_t *in, size_t n, uint8_t *out,
                          size_t cap);
/* End of stream: an incomplete sequence becomes U+FFFD (cap >= 3). */
size_t cast_utf8_finish(struct cast_utf8 *st, uint8_t *out, size_t cap);

/* ---------------------------------------------------------------------------
 * Writer.
 */
struct cast;

struct cast_header {
    unsigned cols, rows;         /* initial size, 1..AL_MAX_COLS / AL_MAX_ROWS */
    const char *term_type;       /* "term"."type", or NULL to omit */
    int64_t timestamp;           /* Unix seconds at the start; < 0 to omit */
    int64_t idle_time_limit_us;  /* <= 0 to omit */
    const char *command, *title; /* NULL to omit */
    const char *const *env;      /* n_env "NAME=value" strings (may be NULL if 0) */
    size_t n_env;
    int64_t start_us; /* clock reading at time 0 of the recording: the first
                         event's interval is measured from it */
};

struct cast_status {
    int err;              /* AL_OK, or the error that failed the writer */
    int sys_errno;        /* errno of the failed write/fsync, else 0 */
    int64_t size;         /* file size once the buffer is written */
    int64_t durable_size; /* size made durable by the last successful sync */
    /* Raw bytes passed to cast_output/cast_input by this writer: total,
     * and those whose events lie within durable_size. */
    uint64_t out_total, out_durable;
    uint64_t in_total, in_durable;
    uint32_t out_pending, in_pending; /* bytes held in the UTF-8 carries */
    uint64_t events;                  /* event lines produced */
    /* After a failure: raw output/input bytes and events that will never be
     * made durable (everything since the last sync, then every later call). */
    uint64_t lost_out, lost_in, lost_events;
};

/* A point of a recording: what cast_sync reports as durable, and what a
 * caller persists to resume there. */
struct cast_mark {
    int64_t size;    /* bytes, ending on a line boundary */
    int64_t time_us; /* the time of the last event within size: the sum of
                        the intervals (0 if none); -1: not known */
    int exited;      /* the "x" event lies within size (it is the last) */
};

/*
 * Open a recording at path.
 * at NULL (or at->size 0): create it (O_CREAT|O_EXCL, mode 0600, O_CLOEXEC,
 *   a symlink is not followed; AL_E_EXISTS if present), write the header
 *   and make file and directory entry durable before returning, so that
 *   cast_status().durable_size is the header's size.
 * at->size > 0: reopen an existing v3 recording written by this module,
 *   truncate it at at->size and append, after a check (AL_E_FORMAT if it
 *   fails, also when the file is shorter):
 *   - at->time_us < 0 (not known): the first at->size bytes must be a
 *     header and whole valid event lines, all read; the time and the exit
 *     are learnt from them;
 *   - at->time_us >= 0 (stored with the size): only the header and the last
 *     line are read: the header must be v3, the last line a valid event
 *     ending exactly at at->size, its interval at most at->time_us, and an
 *     "x" event exactly when at->exited (with no event: time 0, no exit).
 *   Time continues from the last kept event: h->start_us plus its time.
 *   Only h->start_us is used; the header fields come from the file.
 * On failure nothing is left open, and a file created by this call is
 * removed.
 */
int cast_open(const char *path, const struct cast_header *h, const struct cast_mark *at,
              struct cast **out, char *err, size_t cap);
/* Start a new recording on an open, empty, writable fd, which the writer
 * takes over (closed by cast_close, or here on failure). Nothing is written
 * before the first flush; no directory fsync. For sinks the caller opened
 * itself (openat in a data dir, tests on /dev/full). */
int cast_open_fd(int fd, const struct cast_header *h, struct cast **out, char *err, size_t cap);

/* Events. now_us is a reading of the caller's clock; the interval is
 * now_us minus the previous event's now_us (0 if the clock went back). */
int cast_output(struct cast *c, int64_t now_us, const void *bytes, size_t n);
int cast_input(struct cast *c, int64_t now_us, const void *bytes, size_t n);
int cast_resize(struct cast *c, int64_t now_us, unsigned cols, unsigned rows);
/* label: NUL-terminated, at most CAST_MAX_LABEL bytes; invalid UTF-8 is
 * replaced. */
int cast_marker(struct cast *c, int64_t now_us, const char *label);
/* The last event: incomplete UTF-8 held for output or input is written as
 * U+FFFD first. Later events get AL_E_STATE. */
int cast_exit(struct cast *c, int64_t now_us, int status);

/* Write the buffer and fdatasync. *durable (may be NULL) is the point now
 * durable (after a failure: the last good one); its size always ends on a
 * line boundary, and its time is known. What to persist for resume is
 * (stream bytes before this writer + status.out_durable, *durable). */
int cast_sync(struct cast *c, struct cast_mark *durable);
void cast_status(const struct cast *c, struct cast_status *st);
/* Write the buffer, fdatasync and close; frees c. Incomplete UTF-8 is not
 * written (a resumed writer gets those bytes again). Returns the writer's
 * error, if any. */
int cast_close(struct cast *c);

#endif
