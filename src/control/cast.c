/*
 * cast: asciicast v3 recordings. See cast.h for the API and format.
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
 *
 *   struct cast_reader owns its line buffer (file source; a memory source
 *   is read in place), the parsed JSON of the current event (ev->data
 *   points into it) and copies of the header strings.
 *
 * Escaping is ours (strict, no allocation per event): '"', '\\', C0
 * controls, DEL, C1 controls and U+2028/U+2029 are escaped, so "any
 * non-printable Unicode codepoints encoded as \uXXXX" holds (asciicast v3,
 * "o - output"). Reading uses jansson with JSON_REJECT_DUPLICATES and
 * JSON_ALLOW_NUL (a terminal may print NUL, written as \u0000).
 */
#include "cast.h"

#include "al_err.h"
#include "al_limits.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
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
#define CAST_MAX_INTERVAL_US ((int64_t)CAST_MAX_INTERVAL_S * CAST_US_PER_S)
#define CAST_RBUF_INITIAL ((size_t)64 * 1024) /* reader line buffer before it grows */

_Static_assert(CAST_LINE_OUT_MAX * 2 <= CAST_WBUF_SIZE, "write buffer holds two longest lines");
_Static_assert(CAST_UTF8_OUT_MAX(CAST_MAX_LABEL) <= CAST_TEXT_MAX, "a label fits the text");
_Static_assert(CAST_WBUF_SIZE <= CAST_MAX_LINE, "a header written can be read back");

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
    int64_t prev_us;      /* caller's clock at the previous event */
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

static int cast_errno_code(int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return AL_E_NOENT;
    case EACCES:
    case EPERM:
    case EROFS:
    case ELOOP: /* O_NOFOLLOW met a symlink */
        return AL_E_PERM;
    case EEXIST:
        return AL_E_EXISTS;
    case ENOMEM:
        return AL_E_NOMEM;
    default:
        return AL_E_IO;
    }
}

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
    return d > (uint64_t)CAST_MAX_INTERVAL_US ? (uint64_t)CAST_MAX_INTERVAL_US : d;
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

int cast_sync(struct cast *c, int64_t *durable_size)
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
    }
    if (durable_size)
        *durable_size = c->durable_size;
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
    if (dfd < 0) {
        int e = errno;
        al_errf(err, cap, "%s: %s", dir, strerror(e));
        return cast_errno_code(e);
    }
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
    if (fd < 0) {
        int e = errno;
        al_errf(err, cap, "%s: %s", path, strerror(e));
        return cast_errno_code(e);
    }
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

static int reader_scan_prefix(int fd, int64_t limit, int64_t *last_us, int *exited, char *err,
                              size_t cap);

static int cast_resume(const char *path, const struct cast_header *h, int64_t resume_size,
                       struct cast **out, char *err, size_t cap)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        int e = errno;
        al_errf(err, cap, "%s: %s", path, strerror(e));
        return cast_errno_code(e);
    }
    struct stat sb;
    int rc = AL_OK;
    int64_t last_us = 0;
    int exited = 0;
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
        rc = reader_scan_prefix(fd, resume_size, &last_us, &exited, err, cap);
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
    c->exited = exited;
    *out = c;
    return AL_OK;
}

int cast_open(const char *path, const struct cast_header *h, int64_t resume_size, struct cast **out,
              char *err, size_t cap)
{
    if (out)
        *out = NULL;
    if (!path || !h || !out || resume_size < 0) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    if (resume_size == 0)
        return cast_create(path, h, out, err, cap);
    return cast_resume(path, h, resume_size, out, err, cap);
}

/* ======================================================================
 * Reader.
 */

struct cast_reader {
    /* Memory source (not owned), read in place. */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    /* File source: fd (owned if own_fd), read sequentially (a pipe will
     * do), at most limit bytes in all (-1: to the end; foff counts them),
     * into buf[start..end). */
    int fd, own_fd, src_eof;
    int64_t foff, limit;
    uint8_t *buf; /* owned, grows up to CAST_MAX_LINE + 1 */
    size_t cap, start, end, scanned;

    unsigned long line; /* lines read so far */
    int last_nl;        /* the last line read ended with '\n' */
    int64_t time_us;    /* time of the last event */
    json_t *cur;        /* owned: the current event (ev->data points into it) */
    int err;
    char msg[CAST_ERR_MAX];
    struct cast_info info;
    char *strs[3]; /* owned copies: term type, command, title */
};

static int rd_fail(struct cast_reader *r, int code, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int rd_fail(struct cast_reader *r, int code, unsigned long line, const char *fmt, ...)
{
    char why[CAST_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(why, sizeof why, fmt, ap) < 0)
        why[0] = '\0';
    va_end(ap);
    al_errf(r->msg, sizeof r->msg, "line %lu: %s", line, why);
    r->err = code;
    return code;
}

/* The next line without its '\n': 1, 0 at the end, < 0 on error. */
static int rd_line_file(struct cast_reader *r, const uint8_t **p, size_t *n)
{
    for (;;) {
        const uint8_t *nl = memchr(r->buf + r->scanned, '\n', r->end - r->scanned);
        if (nl) {
            *p = r->buf + r->start;
            *n = (size_t)(nl - *p);
            r->start = r->scanned = (size_t)(nl - r->buf) + 1;
            r->last_nl = 1;
            return 1;
        }
        r->scanned = r->end;
        if (r->end - r->start > CAST_MAX_LINE)
            return rd_fail(r, AL_E_TOOBIG, r->line + 1, "line longer than %d bytes", CAST_MAX_LINE);
        if (r->src_eof) {
            if (r->end == r->start)
                return 0;
            *p = r->buf + r->start;
            *n = r->end - r->start;
            r->start = r->scanned = r->end;
            r->last_nl = 0;
            return 1;
        }
        if (r->start > 0) {
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->end -= r->start;
            r->scanned -= r->start;
            r->start = 0;
        }
        if (r->end == r->cap) {
            size_t ncap =
                r->cap * 2 > (size_t)CAST_MAX_LINE + 1 ? (size_t)CAST_MAX_LINE + 1 : r->cap * 2;
            uint8_t *nb = realloc(r->buf, ncap);
            if (!nb)
                return rd_fail(r, AL_E_NOMEM, r->line + 1, "out of memory");
            r->buf = nb;
            r->cap = ncap;
        }
        size_t want = r->cap - r->end;
        if (r->limit >= 0 && (int64_t)want > r->limit - r->foff)
            want = (size_t)(r->limit - r->foff);
        if (want == 0) {
            r->src_eof = 1;
            continue;
        }
        ssize_t got = read(r->fd, r->buf + r->end, want);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            return rd_fail(r, AL_E_IO, r->line + 1, "read: %s", strerror(errno));
        if (got == 0)
            r->src_eof = 1;
        r->end += (size_t)got;
        r->foff += got;
    }
}

static int rd_line(struct cast_reader *r, const uint8_t **p, size_t *n)
{
    int rc;
    if (r->buf) {
        rc = rd_line_file(r, p, n);
    } else if (r->mem_pos >= r->mem_len) {
        rc = 0;
    } else {
        size_t avail = r->mem_len - r->mem_pos;
        size_t scan = avail < (size_t)CAST_MAX_LINE + 1 ? avail : (size_t)CAST_MAX_LINE + 1;
        const uint8_t *start = r->mem + r->mem_pos;
        const uint8_t *nl = memchr(start, '\n', scan);
        if (!nl && avail > CAST_MAX_LINE)
            return rd_fail(r, AL_E_TOOBIG, r->line + 1, "line longer than %d bytes", CAST_MAX_LINE);
        *p = start;
        *n = nl ? (size_t)(nl - start) : avail;
        r->mem_pos += *n + (nl ? 1 : 0);
        r->last_nl = nl != NULL;
        rc = 1;
    }
    if (rc == 1)
        r->line++;
    return rc;
}

static json_t *rd_json(struct cast_reader *r, const uint8_t *p, size_t n)
{
    if (n == 0) {
        rd_fail(r, AL_E_FORMAT, r->line, "empty line");
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!j)
        rd_fail(r, AL_E_FORMAT, r->line, "invalid JSON at column %d: %s", je.column, je.text);
    return j;
}

/* A JSON number of seconds in [0, CAST_MAX_INTERVAL_S] as microseconds. */
static int rd_seconds(const json_t *v, int64_t *us)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || i > CAST_MAX_INTERVAL_S)
            return -1;
        *us = (int64_t)i * CAST_US_PER_S;
        return 0;
    }
    if (!json_is_real(v))
        return -1;
    double d = json_real_value(v);
    if (!isfinite(d) || d < 0 || d > CAST_MAX_INTERVAL_S)
        return -1;
    /* Exact for the six decimals we write: d * 1e6 is within 2^-20 of the
     * integer below 2^50 (1e9 s), so rounding recovers it. */
    *us = (int64_t)(d * CAST_US_PER_S + 0.5);
    return 0;
}

/* Optional string member: copied into *dst (NUL-free). */
static int rd_hdr_str(struct cast_reader *r, json_t *o, const char *key, char **dst)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return AL_OK;
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return rd_fail(r, AL_E_FORMAT, 1, "header \"%s\" is not a string", key);
    *dst = strdup(json_string_value(v));
    if (!*dst)
        return rd_fail(r, AL_E_NOMEM, 1, "out of memory");
    return AL_OK;
}

static int rd_dim(struct cast_reader *r, json_t *o, const char *key, unsigned max, unsigned *dst)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
        return rd_fail(r, AL_E_FORMAT, 1, "header \"%s\" is not an integer in 1..%u", key, max);
    *dst = (unsigned)json_integer_value(v);
    return AL_OK;
}

static int rd_header_obj(struct cast_reader *r, json_t *h)
{
    struct cast_info *in = &r->info;
    if (!json_is_object(h))
        return rd_fail(r, AL_E_FORMAT, 1, "header is not a JSON object");
    json_t *v = json_object_get(h, "version");
    if (!json_is_integer(v))
        return rd_fail(r, AL_E_FORMAT, 1, "header has no integer \"version\"");
    if (json_integer_value(v) != 2 && json_integer_value(v) != 3)
        return rd_fail(r, AL_E_VERSION, 1, "asciicast version %lld is not supported (2 or 3)",
                       (long long)json_integer_value(v));
    in->version = (int)json_integer_value(v);
    int rc;
    if (in->version == 3) {
        json_t *term = json_object_get(h, "term");
        if (!json_is_object(term))
            return rd_fail(r, AL_E_FORMAT, 1, "header has no \"term\" object");
        if ((rc = rd_dim(r, term, "cols", AL_MAX_COLS, &in->cols)) != AL_OK ||
            (rc = rd_dim(r, term, "rows", AL_MAX_ROWS, &in->rows)) != AL_OK ||
            (rc = rd_hdr_str(r, term, "type", &r->strs[0])) != AL_OK)
            return rc;
    } else if ((rc = rd_dim(r, h, "width", AL_MAX_COLS, &in->cols)) != AL_OK ||
               (rc = rd_dim(r, h, "height", AL_MAX_ROWS, &in->rows)) != AL_OK) {
        return rc;
    }
    if ((rc = rd_hdr_str(r, h, "command", &r->strs[1])) != AL_OK ||
        (rc = rd_hdr_str(r, h, "title", &r->strs[2])) != AL_OK)
        return rc;
    in->term_type = r->strs[0];
    in->command = r->strs[1];
    in->title = r->strs[2];
    in->timestamp = -1;
    if ((v = json_object_get(h, "timestamp")) != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return rd_fail(r, AL_E_FORMAT, 1, "header \"timestamp\" is not an integer >= 0");
        in->timestamp = json_integer_value(v);
    }
    in->idle_time_limit_us = -1;
    if ((v = json_object_get(h, "idle_time_limit")) != NULL &&
        rd_seconds(v, &in->idle_time_limit_us) != 0)
        return rd_fail(r, AL_E_FORMAT, 1, "header \"idle_time_limit\" is not a number >= 0");
    if ((v = json_object_get(h, "env")) != NULL) {
        const char *k;
        json_t *ev;
        if (!json_is_object(v))
            return rd_fail(r, AL_E_FORMAT, 1, "header \"env\" is not an object");
        json_object_foreach(v, k, ev)
        {
            if (!json_is_string(ev))
                return rd_fail(r, AL_E_FORMAT, 1, "header env value is not a string");
        }
    }
    /* Other members: ignored, as the v3 spec requires. */
    return AL_OK;
}

static int rd_header(struct cast_reader *r)
{
    const uint8_t *p = NULL;
    size_t n = 0;
    int rc = rd_line(r, &p, &n);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return rd_fail(r, AL_E_FORMAT, 1, "empty recording (no header)");
    json_t *h = rd_json(r, p, n);
    if (!h)
        return r->err;
    rc = rd_header_obj(r, h);
    json_decref(h);
    return rc;
}

/* "COLSxROWS", each 1..max, no sign, no leading zero, no spaces. */
static int rd_size(const uint8_t *s, size_t n, unsigned *cols, unsigned *rows)
{
    unsigned v[2] = {0, 0};
    size_t i = 0;
    for (int k = 0; k < 2; k++) {
        size_t d = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && d < 6) {
            if (d == 1 && v[k] == 0)
                return -1;
            v[k] = v[k] * 10 + (unsigned)(s[i++] - '0');
            d++;
        }
        if (d == 0)
            return -1;
        if (k == 0 && (i >= n || s[i++] != 'x'))
            return -1;
    }
    if (i != n || v[0] < 1 || v[0] > AL_MAX_COLS || v[1] < 1 || v[1] > AL_MAX_ROWS)
        return -1;
    *cols = v[0];
    *rows = v[1];
    return 0;
}

/* A decimal int, optional '-', as the "x" event's data. */
static int rd_status(const uint8_t *s, size_t n, int *status)
{
    size_t i = n > 0 && s[0] == '-' ? 1 : 0;
    if (i == n || n - i > 10)
        return -1;
    long long v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (s[0] == '-')
        v = -v;
    if (v < INT_MIN || v > INT_MAX)
        return -1;
    *status = (int)v;
    return 0;
}

static int rd_event(struct cast_reader *r, json_t *j, struct cast_event *ev)
{
    if (!json_is_array(j) || json_array_size(j) != 3)
        return rd_fail(r, AL_E_FORMAT, r->line, "event is not a 3-element array");
    int64_t t;
    if (rd_seconds(json_array_get(j, 0), &t) != 0)
        return rd_fail(r, AL_E_FORMAT, r->line, "event time is not a number in 0..%d",
                       CAST_MAX_INTERVAL_S);
    if (r->info.version == 3) {
        if (t > INT64_MAX - r->time_us)
            return rd_fail(r, AL_E_TOOBIG, r->line, "recording time overflows");
        t += r->time_us;
    } else if (t < r->time_us) {
        return rd_fail(r, AL_E_FORMAT, r->line, "event time goes backwards");
    }
    json_t *code = json_array_get(j, 1);
    size_t clen = json_is_string(code) ? json_string_length(code) : 0;
    const char *cs = json_is_string(code) ? json_string_value(code) : "";
    if (clen == 0 || clen > CAST_MAX_CODE)
        return rd_fail(r, AL_E_FORMAT, r->line, "event code is not a string of 1..%d characters",
                       CAST_MAX_CODE);
    for (size_t i = 0; i < clen; i++)
        if (cs[i] <= 0x20 || cs[i] >= 0x7F)
            return rd_fail(r, AL_E_FORMAT, r->line, "event code is not printable ASCII");
    json_t *data = json_array_get(j, 2);
    if (!json_is_string(data))
        return rd_fail(r, AL_E_FORMAT, r->line, "event data is not a string");

    memset(ev, 0, sizeof *ev);
    ev->time_us = t;
    memcpy(ev->code, cs, clen);
    ev->data = (const uint8_t *)json_string_value(data);
    ev->len = json_string_length(data);
    ev->kind = CAST_EV_OTHER;
    if (clen == 1) {
        switch (cs[0]) {
        case 'o':
            ev->kind = CAST_EV_OUTPUT;
            break;
        case 'i':
            ev->kind = CAST_EV_INPUT;
            break;
        case 'm':
            ev->kind = CAST_EV_MARKER;
            break;
        case 'r':
            ev->kind = CAST_EV_RESIZE;
            if (rd_size(ev->data, ev->len, &ev->cols, &ev->rows) != 0)
                return rd_fail(r, AL_E_FORMAT, r->line, "resize data is not COLSxROWS");
            break;
        case 'x':
            ev->kind = CAST_EV_EXIT;
            if (rd_status(ev->data, ev->len, &ev->status) != 0)
                return rd_fail(r, AL_E_FORMAT, r->line, "exit data is not an integer");
            break;
        default:
            break;
        }
    }
    r->time_us = t;
    return AL_OK;
}

int cast_next(struct cast_reader *r, struct cast_event *ev)
{
    if (!r || !ev)
        return AL_E_INVAL;
    if (r->err)
        return r->err;
    json_decref(r->cur);
    r->cur = NULL;
    for (;;) {
        const uint8_t *p = NULL;
        size_t n = 0;
        int rc = rd_line(r, &p, &n);
        if (rc <= 0)
            return rc;
        if (r->info.version == 3 && n > 0 && p[0] == '#')
            continue; /* comment (v3 spec) */
        r->cur = rd_json(r, p, n);
        if (!r->cur)
            return r->err;
        rc = rd_event(r, r->cur, ev);
        if (rc != AL_OK) {
            json_decref(r->cur);
            r->cur = NULL;
            return rc;
        }
        return 1;
    }
}

const struct cast_info *cast_reader_info(const struct cast_reader *r)
{
    return r ? &r->info : NULL;
}

const char *cast_reader_error(const struct cast_reader *r)
{
    return r ? r->msg : "";
}

unsigned long cast_reader_line(const struct cast_reader *r)
{
    return r ? r->line : 0;
}

void cast_reader_close(struct cast_reader *r)
{
    if (!r)
        return;
    json_decref(r->cur);
    for (size_t i = 0; i < sizeof r->strs / sizeof r->strs[0]; i++)
        free(r->strs[i]);
    free(r->buf);
    if (r->own_fd && r->fd >= 0)
        (void)close(r->fd); /* read-only: nothing can be lost */
    free(r);
}

static struct cast_reader *rd_new(void)
{
    struct cast_reader *r = calloc(1, sizeof *r);
    if (r) {
        r->fd = -1;
        r->limit = -1;
    }
    return r;
}

/* Attach a file source; fd is owned by the reader only if own. */
static int rd_attach_fd(struct cast_reader *r, int fd, int own, int64_t limit)
{
    r->fd = fd;
    r->own_fd = own;
    r->limit = limit;
    r->cap = CAST_RBUF_INITIAL;
    r->buf = malloc(r->cap);
    return r->buf ? AL_OK : AL_E_NOMEM;
}

/* Open finished: report a header error and free, or hand r out. */
static int rd_finish_open(struct cast_reader *r, struct cast_reader **out, char *err, size_t cap)
{
    int rc = rd_header(r);
    if (rc != AL_OK) {
        al_errf(err, cap, "%s", r->msg);
        cast_reader_close(r);
        return rc;
    }
    *out = r;
    return AL_OK;
}

int cast_reader_open(const char *path, struct cast_reader **out, char *err, size_t cap)
{
    if (out)
        *out = NULL;
    if (!path || !out) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        al_errf(err, cap, "%s: %s", path, strerror(e));
        return cast_errno_code(e);
    }
    struct cast_reader *r = rd_new();
    if (!r || rd_attach_fd(r, fd, 1, -1) != AL_OK) {
        if (r)
            cast_reader_close(r); /* closes fd */
        else
            (void)close(fd); /* read-only */
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    return rd_finish_open(r, out, err, cap);
}

int cast_reader_open_mem(const void *buf, size_t len, struct cast_reader **out, char *err,
                         size_t cap)
{
    if (out)
        *out = NULL;
    if ((!buf && len > 0) || !out) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    struct cast_reader *r = rd_new();
    if (!r) {
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    r->mem = buf;
    r->mem_len = len;
    return rd_finish_open(r, out, err, cap);
}

/* For resume: the first limit bytes of fd must be a v3 header and whole
 * valid event lines. *last_us is the last event's time, *exited whether an
 * "x" event was seen. fd stays open. */
static int reader_scan_prefix(int fd, int64_t limit, int64_t *last_us, int *exited, char *err,
                              size_t cap)
{
    struct cast_reader *r = rd_new();
    if (!r || rd_attach_fd(r, fd, 0, limit) != AL_OK) {
        cast_reader_close(r);
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    int rc = rd_header(r);
    if (rc == AL_OK && r->info.version != CAST_VERSION)
        rc = rd_fail(r, AL_E_VERSION, 1, "only a v%d recording can be resumed", CAST_VERSION);
    struct cast_event ev;
    memset(&ev, 0, sizeof ev);
    if (rc == AL_OK) {
        while ((rc = cast_next(r, &ev)) == 1) {
            if (ev.kind == CAST_EV_EXIT)
                *exited = 1;
        }
    }
    if (rc == 0 && !r->last_nl)
        rc = rd_fail(r, AL_E_FORMAT, r->line, "the size to resume at is not at a line end");
    if (rc == 0) {
        *last_us = r->time_us;
    } else {
        al_errf(err, cap, "resume: %s", r->msg);
    }
    cast_reader_close(r);
    return rc;
}
