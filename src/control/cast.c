/*
 * cast: the asciicast v3 recording writer. See cast.h for the API and
 * format; the reader is src/common/castread.c.
 *
 * Data model:
 *   struct cast (writer) owns the recording's fd and two fixed buffers:
 *     wbuf   CAST_WBUF_SIZE bytes of whole lines not yet written; a line is
 *            formatted in place once room for the longest possible line
 *            (CAST_LINE_OUT_MAX) is free, else the buffer is written first;
 *     text   the sanitized UTF-8 of one event (at most
 *            CAST_UTF8_OUT_MAX(CAST_EVENT_MAX_BYTES) bytes).
 *   Sizes: file_size counts bytes handed to write(), so the logical size is
 *   file_size + wlen; durable_size is file_size at the last successful
 *   fdatasync, always on a line boundary. Time: prev_us is the caller's
 *   clock at the previous event (start_us before the first); intervals are
 *   integer microseconds printed as "S.UUUUUU", so the times a reader adds
 *   up are exact. The first failed write/fsync sets err; from then on every
 *   call only counts what it was given as lost and returns err.
 *   time_us is the recording's own time, the sum of the intervals written
 *   (what a reader adds up); time_durable and exited_durable are time_us
 *   and exited at the last successful sync (cast_sync's mark).
 *   Resuming checks the file's durable prefix first: all of it with
 *   castread_prefix() when the caller knows only its size, its header and
 *   last line with castread_prefix_tail() when it also stored the time,
 *   so that a restart does not read recordings whole.
 *
 * Escaping is ours (strict, no allocation per event): '"', '\\', C0
 * controls, DEL, C1 controls and U+2028/U+2029 are escaped, so "any
 * non-printable Unicode codepoints encoded as \uXXXX" holds (asciicast v3,
 * "o - output"); a NUL byte is written as \u0000.
 */
#include "cast.h"

#include "al_err.h"
#include "al_limits.h"
#include "castread.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest JSON string body for n raw bytes: every raw byte (or carried
 * byte) becomes at most 6 bytes ("\u001b"; an invalid byte is 3 bytes of
 * U+FFFD; a C1 control is 2 bytes in, 6 out). */
#define CAST_ESC_MAX(n) (6 * ((size_t)(n) + 3))
/* Longest event line: '[' interval(20 digits '.' 6) ',"c","' body '"]\n'. */
#define CAST_LINE_OUT_MAX (CAST_ESC_MAX(CAST_EVENT_MAX_BYTES) + 64)
#define CAST_TEXT_MAX CAST_UTF8_OUT_MAX(CAST_EVENT_MAX_BYTES)
#define CAST_US_PER_S 1000000
#define CAST_MAX_INTERVAL_US ((int64_t)CASTREAD_MAX_INTERVAL_S * CAST_US_PER_S)

_Static_assert(CAST_LINE_OUT_MAX * 2 <= CAST_WBUF_SIZE, "write buffer holds two longest lines");
_Static_assert(CAST_UTF8_OUT_MAX(CAST_MAX_LABEL) <= CAST_TEXT_MAX, "a label fits the text");
_Static_assert((long)CAST_WBUF_SIZE <= (long)CASTREAD_MAX_LINE,
               "a header written can be read back");

static const uint8_t cast_fffd[3] = {0xEF, 0xBF, 0xBD};

/* ======================================================================
 * UTF-8 sanitizer: the WHATWG Encoding Standard's "UTF-8 decoder" (the
 * Unicode "maximal subpart" practice, Unicode Standard §3.9), emitting the
 * bytes of each valid code point and U+FFFD for each error.
 */

static void utf8_reset(struct cast_utf8 *st)
{
    st->len = 0;
    st->need = 0;
    st->lower = 0x80;
    st->upper = 0xBF;
}

void cast_utf8_init(struct cast_utf8 *st)
{
    memset(st->seq, 0, sizeof st->seq);
    utf8_reset(st);
}

static size_t utf8_run(struct cast_utf8 *st, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t o = 0, i = 0;
    while (i < n) {
        uint8_t b = in[i];
        if (st->need == 0) {
            i++;
            if (b < 0x80) {
                out[o++] = b;
                continue;
            }
            if (b >= 0xC2 && b <= 0xDF) {
                st->need = 1;
            } else if (b >= 0xE0 && b <= 0xEF) {
                if (b == 0xE0)
                    st->lower = 0xA0; /* no overlongs */
                if (b == 0xED)
                    st->upper = 0x9F; /* no surrogates */
                st->need = 2;
            } else if (b >= 0xF0 && b <= 0xF4) {
                if (b == 0xF0)
                    st->lower = 0x90; /* no overlongs */
                if (b == 0xF4)
                    st->upper = 0x8F; /* nothing above U+10FFFF */
                st->need = 3;
            } else {
                memcpy(out + o, cast_fffd, 3); /* 80..C1, F5..FF */
                o += 3;
                continue;
            }
            st->seq[0] = b;
            st->len = 1;
            continue;
        }
        if (b < st->lower || b > st->upper) {
            /* The bytes held are a maximal subpart: one U+FFFD, and b is
             * looked at again as the start of what follows. */
            utf8_reset(st);
            memcpy(out + o, cast_fffd, 3);
            o += 3;
            continue;
        }
        i++;
        st->lower = 0x80;
        st->upper = 0xBF;
        if (--st->need == 0) {
            memcpy(out + o, st->seq, st->len);
            o += st->len;
            out[o++] = b;
            st->len = 0;
        } else {
            st->seq[st->len++] = b;
        }
    }
    return o;
}

size_t cast_utf8_sanitize(struct cast_utf8 *st, const uint8_t *in, size_t n, uint8_t *out,
                          size_t cap)
{
    /* Each byte consumed (held or new) yields at most 3 bytes. */
    if (!st || (!in && n > 0) || !out || cap < CAST_UTF8_OUT_MAX(n))
        return 0;
    return utf8_run(st, in, n, out);
}

size_t cast_utf8_finish(struct cast_utf8 *st, uint8_t *out, size_t cap)
{
    if (!st || !out || cap < sizeof cast_fffd || st->need == 0)
        return 0;
    utf8_reset(st);
    memcpy(out, cast_fffd, sizeof cast_fffd);
    return sizeof cast_fffd;
}

/* ======================================================================
 * Formatting: JSON string bodies, numbers, event lines, the header.
 */

/* Escape valid UTF-8 s[0..n) as a JSON string body; out needs 6*n bytes. */
static size_t json_escape(uint8_t *out, const uint8_t *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = s[i];
        unsigned cp;
        if (b == '"' || b == '\\') {
            out[o++] = '\\';
            out[o++] = b;
            continue;
        }
        if (b < 0x20 || b == 0x7F) {
            char sh = b == '\b'   ? 'b'
                      : b == '\f' ? 'f'
                      : b == '\n' ? 'n'
                      : b == '\r' ? 'r'
                      : b == '\t' ? 't'
                                  : 0;
            if (sh) {
                out[o++] = '\\';
                out[o++] = (uint8_t)sh;
                continue;
            }
            cp = b;
        } else if (b == 0xC2 && i + 1 < n && s[i + 1] >= 0x80 && s[i + 1] <= 0x9F) {
            cp = s[++i]; /* C1 control U+0080..U+009F */
        } else if (b == 0xE2 && i + 2 < n && s[i + 1] == 0x80 &&
                   (s[i + 2] == 0xA8 || s[i + 2] == 0xA9)) {
            cp = 0x2000u | (s[i + 2] & 0x3Fu); /* U+2028, U+2029 */
            i += 2;
        } else {
            out[o++] = b;
            continue;
        }
        out[o++] = '\\';
        out[o++] = 'u';
        out[o++] = (uint8_t)hex[(cp >> 12) & 0xF];
        out[o++] = (uint8_t)hex[(cp >> 8) & 0xF];
        out[o++] = (uint8_t)hex[(cp >> 4) & 0xF];
        out[o++] = (uint8_t)hex[cp & 0xF];
    }
    return o;
}

static size_t fmt_u64(uint8_t *out, uint64_t v)
{
    uint8_t tmp[20];
    size_t n = 0;
    do {
        tmp[n++] = (uint8_t)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static size_t fmt_i64(uint8_t *out, int64_t v)
{
    if (v >= 0)
        return fmt_u64(out, (uint64_t)v);
    out[0] = '-';
    return 1 + fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

/* Microseconds as seconds with exactly six decimals: "12.000345". */
static size_t fmt_seconds(uint8_t *out, uint64_t us)
{
    size_t o = fmt_u64(out, us / CAST_US_PER_S);
    uint64_t frac = us % CAST_US_PER_S;
    out[o++] = '.';
    for (uint64_t d = CAST_US_PER_S / 10; d > 0; d /= 10)
        out[o++] = (uint8_t)('0' + frac / d % 10);
    return o;
}

/* One event line: [interval,"code","body"]\n. text is valid UTF-8 of at
 * most CAST_TEXT_MAX bytes; out holds CAST_LINE_OUT_MAX. */
static size_t fmt_event(uint8_t *out, uint64_t interval_us, char code, const uint8_t *text,
                        size_t n)
{
    size_t o = 0;
    out[o++] = '[';
    o += fmt_seconds(out + o, interval_us);
    out[o++] = ',';
    out[o++] = '"';
    out[o++] = (uint8_t)code;
    out[o++] = '"';
    out[o++] = ',';
    out[o++] = '"';
    o += json_escape(out + o, text, n);
    out[o++] = '"';
    out[o++] = ']';
    out[o++] = '\n';
    return o;
}

/* A bounded builder for the header line. */
struct cast_sb {
    uint8_t *p;
    size_t len, cap;
    int full;
};

static void sb_raw(struct cast_sb *sb, const void *s, size_t n)
{
    if (sb->full || sb->cap - sb->len < n) {
        sb->full = 1;
        return;
    }
    memcpy(sb->p + sb->len, s, n);
    sb->len += n;
}

static void sb_lit(struct cast_sb *sb, const char *s)
{
    sb_raw(sb, s, strlen(s));
}

static void sb_u64(struct cast_sb *sb, uint64_t v)
{
    uint8_t tmp[24];
    size_t n = fmt_u64(tmp, v);
    sb_raw(sb, tmp, n);
}

/* s[0..n) must be valid UTF-8 without NUL (checked by the caller). */
static void sb_str(struct cast_sb *sb, const char *s, size_t n)
{
    sb_raw(sb, "\"", 1);
    if (sb->full || sb->cap - sb->len < 6 * n + 1) {
        sb->full = 1;
        return;
    }
    sb->len += json_escape(sb->p + sb->len, (const uint8_t *)s, n);
    sb_raw(sb, "\"", 1);
}

/* Strictly valid UTF-8 (the sanitizer's rules, no error allowed). */
static int utf8_valid(const uint8_t *s, size_t n)
{
    unsigned need = 0;
    uint8_t lower = 0x80, upper = 0xBF;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = s[i];
        if (need == 0) {
            if (b < 0x80)
                continue;
            if (b >= 0xC2 && b <= 0xDF) {
                need = 1;
            } else if (b >= 0xE0 && b <= 0xEF) {
                lower = b == 0xE0 ? 0xA0 : 0x80;
                upper = b == 0xED ? 0x9F : 0xBF;
                need = 2;
            } else if (b >= 0xF0 && b <= 0xF4) {
                lower = b == 0xF0 ? 0x90 : 0x80;
                upper = b == 0xF4 ? 0x8F : 0xBF;
                need = 3;
            } else {
                return 0;
            }
            continue;
        }
        if (b < lower || b > upper)
            return 0;
        lower = 0x80;
        upper = 0xBF;
        need--;
    }
    return need == 0;
}

/* A header string: valid UTF-8 (a C string holds no NUL). */
static int header_str_ok(const char *s, size_t *len)
{
    *len = strlen(s);
    return utf8_valid((const uint8_t *)s, *len);
}

static int header_build(const struct cast_header *h, uint8_t *out, size_t cap, size_t *len,
                        char *err, size_t errcap)
{
    if (h->cols < 1 || h->cols > AL_MAX_COLS || h->rows < 1 || h->rows > AL_MAX_ROWS) {
        al_errf(err, errcap, "terminal size %ux%u out of range", h->cols, h->rows);
        return AL_E_INVAL;
    }
    if (h->n_env > CAST_MAX_ENV || (h->n_env > 0 && !h->env)) {
        al_errf(err, errcap, "%zu env entries (at most %d)", h->n_env, CAST_MAX_ENV);
        return h->n_env > CAST_MAX_ENV ? AL_E_TOOBIG : AL_E_INVAL;
    }
    if (h->idle_time_limit_us > CAST_MAX_INTERVAL_US) {
        al_errf(err, errcap, "idle time limit too large");
        return AL_E_INVAL;
    }
    struct cast_sb sb = {out, 0, cap, 0};
    size_t n;
    sb_lit(&sb, "{\"version\":3,\"term\":{\"cols\":");
    sb_u64(&sb, h->cols);
    sb_lit(&sb, ",\"rows\":");
    sb_u64(&sb, h->rows);
    if (h->term_type) {
        if (!header_str_ok(h->term_type, &n))
            goto bad_utf8;
        sb_lit(&sb, ",\"type\":");
        sb_str(&sb, h->term_type, n);
    }
    sb_lit(&sb, "}");
    if (h->timestamp >= 0) {
        sb_lit(&sb, ",\"timestamp\":");
        sb_u64(&sb, (uint64_t)h->timestamp);
    }
    if (h->idle_time_limit_us > 0) {
        uint8_t tmp[32];
        size_t tn = fmt_seconds(tmp, (uint64_t)h->idle_time_limit_us);
        sb_lit(&sb, ",\"idle_time_limit\":");
        sb_raw(&sb, tmp, tn);
    }
    if (h->command) {
        if (!header_str_ok(h->command, &n))
            goto bad_utf8;
        sb_lit(&sb, ",\"command\":");
        sb_str(&sb, h->command, n);
    }
    if (h->title) {
        if (!header_str_ok(h->title, &n))
            goto bad_utf8;
        sb_lit(&sb, ",\"title\":");
        sb_str(&sb, h->title, n);
    }
    if (h->n_env > 0) {
        sb_lit(&sb, ",\"env\":{");
        for (size_t i = 0; i < h->n_env; i++) {
            const char *e = h->env[i];
            const char *eq = e ? strchr(e, '=') : NULL;
            if (!eq || eq == e) {
                al_errf(err, errcap, "env entry %zu is not NAME=value", i);
                return AL_E_INVAL;
            }
            size_t klen = (size_t)(eq - e);
            for (size_t j = 0; j < i; j++) {
                if (strncmp(h->env[j], e, klen + 1) == 0) {
                    al_errf(err, errcap, "env entry %zu repeats a name", i);
                    return AL_E_INVAL;
                }
            }
            if (!header_str_ok(e, &n))
                goto bad_utf8;
            if (i > 0)
                sb_lit(&sb, ",");
            sb_str(&sb, e, klen);
            sb_lit(&sb, ":");
            sb_str(&sb, eq + 1, n - klen - 1);
        }
        sb_lit(&sb, "}");
    }
    sb_lit(&sb, "}\n");
    if (sb.full) {
        al_errf(err, errcap, "header longer than %zu bytes", cap);
        return AL_E_TOOBIG;
    }
    *len = sb.len;
    return AL_OK;
bad_utf8:
    al_errf(err, errcap, "header string is not valid UTF-8");
    return AL_E_INVAL;
}

/* ======================================================================
 * Writer.
 */

struct cast {
    int fd;               /* owned */
    int err;              /* AL_OK, or what failed the writer */
    int sys_errno;        /* errno of that failure */
    int exited;           /* the "x" event was written */
    int exited_durable;   /* ... and made durable */
    int64_t prev_us;      /* caller's clock at the previous event */
    int64_t time_us;      /* the recording's time: the sum of the intervals */
    int64_t time_durable; /* time_us at the last successful fdatasync */
    int64_t file_size;    /* bytes handed to write() (the fd's offset) */
    int64_t durable_size; /* file_size at the last successful fdatasync */
    size_t wlen;          /* bytes used in wbuf */
    struct cast_utf8 out_u8, in_u8;
    uint64_t out_total, out_durable, in_total, in_durable;
    uint64_t events, events_durable;
    uint64_t lost_out, lost_in, lost_events;
    uint8_t text[CAST_TEXT_MAX];
    uint8_t wbuf[CAST_WBUF_SIZE];
};

/* Enter the failed state: everything not yet durable is lost, and the file
 * is cut back to what was (best effort: shrinking needs no space), so that
 * it ends with a whole line and stays a valid recording. */
static int cast_fail(struct cast *c, int e)
{
    c->err = AL_E_IO;
    c->sys_errno = e;
    if (c->durable_size > 0 && ftruncate(c->fd, (off_t)c->durable_size) == 0 &&
        lseek(c->fd, (off_t)c->durable_size, SEEK_SET) == (off_t)c->durable_size)
        c->file_size = c->durable_size;
    c->lost_out = c->out_total - c->out_durable;
    c->lost_in = c->in_total - c->in_durable;
    c->lost_events = c->events - c->events_durable;
    return c->err;
}

static int cast_flush(struct cast *c)
{
    size_t off = 0;
    while (off < c->wlen) {
        ssize_t w = write(c->fd, c->wbuf + off, c->wlen - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : EIO;
            c->file_size += (int64_t)off;
            c->wlen = 0;
            return cast_fail(c, e);
        }
        off += (size_t)w;
    }
    c->file_size += (int64_t)off;
    c->wlen = 0;
    return AL_OK;
}

/* The interval to write for an event at now_us (0 if the clock went back:
 * the time base then restarts at now_us). */
static uint64_t cast_interval(struct cast *c, int64_t now_us)
{
    uint64_t d = 0;
    if (now_us > c->prev_us)
        d = (uint64_t)now_us - (uint64_t)c->prev_us;
    c->prev_us = now_us;
    if (d > (uint64_t)CAST_MAX_INTERVAL_US)
        d = (uint64_t)CAST_MAX_INTERVAL_US;
    c->time_us = c->time_us > INT64_MAX - (int64_t)d ? INT64_MAX : c->time_us + (int64_t)d;
    return d;
}

static int cast_emit(struct cast *c, int64_t now_us, char code, const uint8_t *text, size_t n)
{
    if (CAST_WBUF_SIZE - c->wlen < CAST_LINE_OUT_MAX) {
        int rc = cast_flush(c);
        if (rc != AL_OK)
            return rc;
    }
    c->wlen += fmt_event(c->wbuf + c->wlen, cast_interval(c, now_us), code, text, n);
    c->events++;
    return AL_OK;
}

/* A call made after the failure: count it as lost. */
static int cast_failed_call(struct cast *c, uint64_t *lost, size_t n)
{
    if (lost)
        *lost += n;
    c->lost_events++;
    return c->err;
}

static int cast_stream(struct cast *c, int64_t now_us, char code, const void *bytes, size_t n)
{
    int is_out = code == 'o';
    if (!c)
        return AL_E_INVAL;
    if (c->err)
        return cast_failed_call(c, is_out ? &c->lost_out : &c->lost_in, n);
    if (!bytes && n > 0)
        return AL_E_INVAL;
    if (c->exited)
        return AL_E_STATE;
    struct cast_utf8 *st = is_out ? &c->out_u8 : &c->in_u8;
    *(is_out ? &c->out_total : &c->in_total) += n;
    const uint8_t *p = bytes;
    while (n > 0) {
        size_t k = n < CAST_EVENT_MAX_BYTES ? n : CAST_EVENT_MAX_BYTES;
        size_t m = cast_utf8_sanitize(st, p, k, c->text, sizeof c->text);
        if (m > 0) {
            int rc = cast_emit(c, now_us, code, c->text, m);
            if (rc != AL_OK)
                return rc;
        }
        p += k;
        n -= k;
    }
    return AL_OK;
}

int cast_output(struct cast *c, int64_t now_us, const void *bytes, size_t n)
{
    return cast_stream(c, now_us, 'o', bytes, n);
}

int cast_input(struct cast *c, int64_t now_us, const void *bytes, size_t n)
{
    return cast_stream(c, now_us, 'i', bytes, n);
}

/* Common entry checks of the non-stream events. */
static int cast_event_check(struct cast *c)
{
    if (!c)
        return AL_E_INVAL;
    if (c->err)
        return cast_failed_call(c, NULL, 0);
    if (c->exited)
        return AL_E_STATE;
    return AL_OK;
}

int cast_resize(struct cast *c, int64_t now_us, unsigned cols, unsigned rows)
{
    int rc = cast_event_check(c);
    if (rc != AL_OK)
        return rc;
    if (cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    uint8_t d[32];
    size_t n = fmt_u64(d, cols);
    d[n++] = 'x';
    n += fmt_u64(d + n, rows);
    return cast_emit(c, now_us, 'r', d, n);
}

int cast_marker(struct cast *c, int64_t now_us, const char *label)
{
    int rc = cast_event_check(c);
    if (rc != AL_OK)
        return rc;
    if (!label)
        label = "";
    size_t n = strnlen(label, (size_t)CAST_MAX_LABEL + 1);
    if (n > CAST_MAX_LABEL)
        return AL_E_TOOBIG;
    struct cast_utf8 st;
    cast_utf8_init(&st);
    size_t m = cast_utf8_sanitize(&st, (const uint8_t *)label, n, c->text, sizeof c->text);
    m += cast_utf8_finish(&st, c->text + m, sizeof c->text - m);
    return cast_emit(c, now_us, 'm', c->text, m);
}

int cast_exit(struct cast *c, int64_t now_us, int status)
{
    int rc = cast_event_check(c);
    if (rc != AL_OK)
        return rc;
    /* The stream ends: what is held can no longer complete. */
    size_t m = cast_utf8_finish(&c->out_u8, c->text, sizeof c->text);
    if (m > 0 && (rc = cast_emit(c, now_us, 'o', c->text, m)) != AL_OK)
        return rc;
    m = cast_utf8_finish(&c->in_u8, c->text, sizeof c->text);
    if (m > 0 && (rc = cast_emit(c, now_us, 'i', c->text, m)) != AL_OK)
        return rc;
    uint8_t d[24];
    size_t dn = fmt_i64(d, status);
    rc = cast_emit(c, now_us, 'x', d, dn);
    if (rc == AL_OK)
        c->exited = 1;
    return rc;
}

int cast_sync(struct cast *c, struct cast_mark *durable)
{
    if (!c)
        return AL_E_INVAL;
    int rc = c->err;
    if (rc == AL_OK)
        rc = cast_flush(c);
    if (rc == AL_OK && c->file_size != c->durable_size) {
        while (fdatasync(c->fd) != 0) {
            if (errno != EINTR) {
                rc = cast_fail(c, errno);
                break;
            }
        }
    }
    if (rc == AL_OK) {
        c->durable_size = c->file_size;
        c->out_durable = c->out_total - c->out_u8.len;
        c->in_durable = c->in_total - c->in_u8.len;
        c->events_durable = c->events;
        c->time_durable = c->time_us;
        c->exited_durable = c->exited;
    }
    if (durable) {
        durable->size = c->durable_size;
        durable->time_us = c->time_durable;
        durable->exited = c->exited_durable;
    }
    return rc;
}

void cast_status(const struct cast *c, struct cast_status *st)
{
    if (!st)
        return;
    memset(st, 0, sizeof *st);
    if (!c) {
        st->err = AL_E_INVAL;
        return;
    }
    st->err = c->err;
    st->sys_errno = c->sys_errno;
    st->size = c->file_size + (int64_t)c->wlen;
    st->durable_size = c->durable_size;
    st->out_total = c->out_total;
    st->out_durable = c->out_durable;
    st->in_total = c->in_total;
    st->in_durable = c->in_durable;
    st->out_pending = c->out_u8.len;
    st->in_pending = c->in_u8.len;
    st->events = c->events;
    st->lost_out = c->lost_out;
    st->lost_in = c->lost_in;
    st->lost_events = c->lost_events;
}

int cast_close(struct cast *c)
{
    if (!c)
        return AL_OK;
    int rc = c->err ? c->err : cast_sync(c, NULL);
    if (close(c->fd) != 0 && rc == AL_OK)
        rc = AL_E_IO;
    free(c);
    return rc;
}

static int cast_new(int fd, int64_t start_us, struct cast **out, char *err, size_t cap)
{
    struct cast *c = malloc(sizeof *c);
    if (!c) {
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    memset(c, 0, offsetof(struct cast, text));
    c->fd = fd;
    c->prev_us = start_us;
    cast_utf8_init(&c->out_u8);
    cast_utf8_init(&c->in_u8);
    *out = c;
    return AL_OK;
}

int cast_open_fd(int fd, const struct cast_header *h, struct cast **out, char *err, size_t cap)
{
    if (out)
        *out = NULL;
    if (fd < 0 || !h || !out) {
        if (fd >= 0)
            (void)close(fd); /* taken over: nothing to report about it */
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    struct cast *c = NULL;
    int rc = cast_new(fd, h->start_us, &c, err, cap);
    if (rc == AL_OK)
        rc = header_build(h, c->wbuf, sizeof c->wbuf, &c->wlen, err, cap);
    if (rc != AL_OK) {
        free(c);
        (void)close(fd); /* the error reported is the one above */
        return rc;
    }
    *out = c;
    return AL_OK;
}

/* fsync the directory holding path, so a new entry is durable. */
static int fsync_parent(const char *path, char *err, size_t cap)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 1;
    if (n >= sizeof dir) {
        al_errf(err, cap, "path too long");
        return AL_E_TOOBIG;
    }
    if (!slash)
        memcpy(dir, ".", 1);
    else if (n == 0)
        memcpy(dir, "/", ++n);
    else
        memcpy(dir, path, n);
    dir[n] = '\0';
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return al_errf_errno(err, cap, errno, "%s", dir);
    int e = fsync(dfd) != 0 ? errno : 0;
    if (close(dfd) != 0 && e == 0)
        e = errno;
    if (e != 0) {
        al_errf(err, cap, "fsync %s: %s", dir, strerror(e));
        return AL_E_IO;
    }
    return AL_OK;
}

static int cast_create(const char *path, const struct cast_header *h, struct cast **out, char *err,
                       size_t cap)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return al_errf_errno(err, cap, errno, "%s", path);
    struct cast *c = NULL;
    int rc = cast_open_fd(fd, h, &c, err, cap);
    if (rc == AL_OK && (rc = cast_sync(c, NULL)) != AL_OK)
        al_errf(err, cap, "%s: writing the header: %s", path, strerror(c->sys_errno));
    if (rc == AL_OK)
        rc = fsync_parent(path, err, cap);
    if (rc != AL_OK) {
        if (c)
            (void)cast_close(c); /* already failing with rc */
        (void)unlink(path);      /* best effort: leave no half-made file */
        return rc;
    }
    *out = c;
    return AL_OK;
}

/* The bounded check: the header and the last line of the first at->size
 * bytes, against the time and exit stored with that size. */
static int cast_check_tail(int fd, const struct cast_mark *at, char *why, size_t cap)
{
    int64_t line_us = -1;
    int line_x = 0;
    int rc = castread_prefix_tail(fd, at->size, CAST_VERSION, CAST_LINE_OUT_MAX, &line_us, &line_x,
                                  why, cap);
    if (rc != AL_OK)
        return rc;
    if (line_us < 0 ? at->time_us != 0 || at->exited : line_us > at->time_us) {
        al_errf(why, cap, "the stored time %lld us does not match the last line (%s %lld us)",
                (long long)at->time_us, line_us < 0 ? "no event," : "interval",
                (long long)(line_us < 0 ? 0 : line_us));
        return AL_E_FORMAT;
    }
    if (line_x != (at->exited != 0)) {
        al_errf(why, cap, "the stored exit flag (%d) does not match the last line (%s)",
                at->exited != 0, line_x ? "an exit" : "not an exit");
        return AL_E_FORMAT;
    }
    return AL_OK;
}

static int cast_resume(const char *path, const struct cast_header *h, const struct cast_mark *at,
                       struct cast **out, char *err, size_t cap)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return al_errf_errno(err, cap, errno, "%s", path);
    struct stat sb;
    int rc = AL_OK;
    const int64_t resume_size = at->size;
    int64_t last_us = at->time_us;
    int exited = at->exited != 0;
    if (fstat(fd, &sb) != 0) {
        al_errf(err, cap, "%s: %s", path, strerror(errno));
        rc = AL_E_IO;
    } else if (!S_ISREG(sb.st_mode)) {
        al_errf(err, cap, "%s: not a regular file", path);
        rc = AL_E_FORMAT;
    } else if (sb.st_size < resume_size) {
        al_errf(err, cap, "%s: %lld bytes, shorter than its durable size %lld", path,
                (long long)sb.st_size, (long long)resume_size);
        rc = AL_E_FORMAT;
    } else {
        char why[CASTREAD_ERR_MAX];
        if (at->time_us >= 0)
            rc = cast_check_tail(fd, at, why, sizeof why);
        else
            rc = castread_prefix(fd, resume_size, CAST_VERSION, &last_us, &exited, why, sizeof why);
        if (rc != AL_OK)
            al_errf(err, cap, "resume: %s", why);
    }
    if (rc == AL_OK &&
        (ftruncate(fd, resume_size) != 0 || lseek(fd, resume_size, SEEK_SET) != resume_size)) {
        al_errf(err, cap, "%s: truncating to %lld: %s", path, (long long)resume_size,
                strerror(errno));
        rc = AL_E_IO;
    }
    struct cast *c = NULL;
    if (rc == AL_OK)
        rc = cast_new(fd, h->start_us, &c, err, cap);
    if (rc != AL_OK) {
        (void)close(fd); /* read-only use so far; the error is rc */
        return rc;
    }
    /* Continue the time base at the last kept event (saturating). */
    c->prev_us = h->start_us > INT64_MAX - last_us ? INT64_MAX : h->start_us + last_us;
    c->file_size = c->durable_size = resume_size;
    c->time_us = c->time_durable = last_us;
    c->exited = c->exited_durable = exited;
    *out = c;
    return AL_OK;
}

int cast_open(const char *path, const struct cast_header *h, const struct cast_mark *at,
              struct cast **out, char *err, size_t cap)
{
    if (out)
        *out = NULL;
    if (!path || !h || !out || (at && (at->size < 0 || at->time_us < -1))) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    if (!at || at->size == 0)
        return cast_create(path, h, out, err, cap);
    return cast_resume(path, h, at, out, err, cap);
}
