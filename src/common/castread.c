/*
 * castread: the asciicast v3/v2 reader. See castread.h for the API and the
 * format.
 *
 * Data model: struct castread owns its line buffer (file source; a memory
 * source is read in place), the parsed JSON of the current event (ev->data
 * points into it) and copies of the header strings. A file source is read
 * sequentially, at most a limit of bytes if one is set (castread_prefix),
 * into buf[start..end): whole lines are handed out from it, the rest moved
 * to the front, and the buffer grows up to CASTREAD_MAX_LINE + 1 bytes.
 * Times: each event's time is summed (v3) or taken (v2) as integer
 * microseconds; time_us is the last one.
 *
 * Parsing uses jansson with JSON_REJECT_DUPLICATES and JSON_ALLOW_NUL (a
 * terminal may print NUL, written as \u0000); jansson also refuses invalid
 * UTF-8 and trailing garbage.
 */
#include "castread.h"

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
#include <unistd.h>

#define CASTREAD_US_PER_S 1000000
#define CASTREAD_RBUF_INITIAL ((size_t)64 * 1024) /* line buffer before it grows */

struct castread {
    /* Memory source (not owned), read in place. */
    const uint8_t *mem;
    size_t mem_len, mem_pos;
    /* File source: fd (owned if own_fd), read sequentially (a pipe will
     * do), at most limit bytes in all (-1: to the end; foff counts them),
     * into buf[start..end). */
    int fd, own_fd, src_eof;
    int64_t foff, limit;
    uint8_t *buf; /* owned, grows up to CASTREAD_MAX_LINE + 1 */
    size_t cap, start, end, scanned;

    unsigned long line; /* lines read so far */
    int64_t line_at;    /* >= 0: the line looked at is the one at this byte
                           offset, its number unknown (castread_prefix_tail) */
    int last_nl;        /* the last line read ended with '\n' */
    int64_t time_us;    /* time of the last event */
    json_t *cur;        /* owned: the current event (ev->data points into it) */
    int err;
    char msg[CASTREAD_ERR_MAX];
    struct castread_info info;
    char *strs[3]; /* owned copies: term type, command, title */
};

static int rd_fail(struct castread *r, int code, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int rd_fail(struct castread *r, int code, unsigned long line, const char *fmt, ...)
{
    char why[CASTREAD_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    if (vsnprintf(why, sizeof why, fmt, ap) < 0)
        why[0] = '\0';
    va_end(ap);
    if (r->line_at >= 0)
        al_errf(r->msg, sizeof r->msg, "line at byte %lld: %s", (long long)r->line_at, why);
    else
        al_errf(r->msg, sizeof r->msg, "line %lu: %s", line, why);
    r->err = code;
    return code;
}

/* The next line without its '\n': 1, 0 at the end, < 0 on error. */
static int rd_line_file(struct castread *r, const uint8_t **p, size_t *n)
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
        if (r->end - r->start > CASTREAD_MAX_LINE)
            return rd_fail(r, AL_E_TOOBIG, r->line + 1, "line longer than %d bytes",
                           CASTREAD_MAX_LINE);
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
            size_t ncap = r->cap * 2 > (size_t)CASTREAD_MAX_LINE + 1 ? (size_t)CASTREAD_MAX_LINE + 1
                                                                     : r->cap * 2;
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

static int rd_line(struct castread *r, const uint8_t **p, size_t *n)
{
    int rc;
    if (r->buf) {
        rc = rd_line_file(r, p, n);
    } else if (r->mem_pos >= r->mem_len) {
        rc = 0;
    } else {
        size_t avail = r->mem_len - r->mem_pos;
        size_t scan = avail < (size_t)CASTREAD_MAX_LINE + 1 ? avail : (size_t)CASTREAD_MAX_LINE + 1;
        const uint8_t *start = r->mem + r->mem_pos;
        const uint8_t *nl = memchr(start, '\n', scan);
        if (!nl && avail > CASTREAD_MAX_LINE)
            return rd_fail(r, AL_E_TOOBIG, r->line + 1, "line longer than %d bytes",
                           CASTREAD_MAX_LINE);
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

static json_t *rd_json(struct castread *r, const uint8_t *p, size_t n)
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

/* A JSON number of seconds in [0, CASTREAD_MAX_INTERVAL_S] as microseconds. */
static int rd_seconds(const json_t *v, int64_t *us)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || i > CASTREAD_MAX_INTERVAL_S)
            return -1;
        *us = (int64_t)i * CASTREAD_US_PER_S;
        return 0;
    }
    if (!json_is_real(v))
        return -1;
    double d = json_real_value(v);
    if (!isfinite(d) || d < 0 || d > CASTREAD_MAX_INTERVAL_S)
        return -1;
    /* Exact for the six decimals the writer prints: d * 1e6 is within 2^-20 of the
     * integer below 2^50 (1e9 s), so rounding recovers it. */
    *us = (int64_t)(d * CASTREAD_US_PER_S + 0.5);
    return 0;
}

/* Optional string member: copied into *dst (NUL-free). */
static int rd_hdr_str(struct castread *r, json_t *o, const char *key, char **dst)
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

static int rd_dim(struct castread *r, json_t *o, const char *key, unsigned max, unsigned *dst)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
        return rd_fail(r, AL_E_FORMAT, 1, "header \"%s\" is not an integer in 1..%u", key, max);
    *dst = (unsigned)json_integer_value(v);
    return AL_OK;
}

static int rd_header_obj(struct castread *r, json_t *h)
{
    struct castread_info *in = &r->info;
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

static int rd_header(struct castread *r)
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

static int rd_event(struct castread *r, json_t *j, struct castread_event *ev)
{
    if (!json_is_array(j) || json_array_size(j) != 3)
        return rd_fail(r, AL_E_FORMAT, r->line, "event is not a 3-element array");
    int64_t t;
    if (rd_seconds(json_array_get(j, 0), &t) != 0)
        return rd_fail(r, AL_E_FORMAT, r->line, "event time is not a number in 0..%d",
                       CASTREAD_MAX_INTERVAL_S);
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
    if (clen == 0 || clen > CASTREAD_MAX_CODE)
        return rd_fail(r, AL_E_FORMAT, r->line, "event code is not a string of 1..%d characters",
                       CASTREAD_MAX_CODE);
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
    ev->kind = CASTREAD_EV_OTHER;
    if (clen == 1) {
        switch (cs[0]) {
        case 'o':
            ev->kind = CASTREAD_EV_OUTPUT;
            break;
        case 'i':
            ev->kind = CASTREAD_EV_INPUT;
            break;
        case 'm':
            ev->kind = CASTREAD_EV_MARKER;
            break;
        case 'r':
            ev->kind = CASTREAD_EV_RESIZE;
            if (rd_size(ev->data, ev->len, &ev->cols, &ev->rows) != 0)
                return rd_fail(r, AL_E_FORMAT, r->line, "resize data is not COLSxROWS");
            break;
        case 'x':
            ev->kind = CASTREAD_EV_EXIT;
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

int castread_next(struct castread *r, struct castread_event *ev)
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

const struct castread_info *castread_info(const struct castread *r)
{
    return r ? &r->info : NULL;
}

const char *castread_error(const struct castread *r)
{
    return r ? r->msg : "";
}

unsigned long castread_line(const struct castread *r)
{
    return r ? r->line : 0;
}

void castread_close(struct castread *r)
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

static struct castread *rd_new(void)
{
    struct castread *r = calloc(1, sizeof *r);
    if (r) {
        r->fd = -1;
        r->limit = -1;
        r->line_at = -1;
    }
    return r;
}

/* Attach a file source; fd is owned by the reader only if own. */
static int rd_attach_fd(struct castread *r, int fd, int own, int64_t limit)
{
    r->fd = fd;
    r->own_fd = own;
    r->limit = limit;
    r->cap = CASTREAD_RBUF_INITIAL;
    r->buf = malloc(r->cap);
    return r->buf ? AL_OK : AL_E_NOMEM;
}

/* Open finished: report a header error and free, or hand r out. */
static int rd_finish_open(struct castread *r, struct castread **out, char *err, size_t cap)
{
    int rc = rd_header(r);
    if (rc != AL_OK) {
        al_errf(err, cap, "%s", r->msg);
        castread_close(r);
        return rc;
    }
    *out = r;
    return AL_OK;
}

int castread_open(const char *path, struct castread **out, char *err, size_t cap)
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
        return al_err_from_errno(e);
    }
    struct castread *r = rd_new();
    if (!r || rd_attach_fd(r, fd, 1, -1) != AL_OK) {
        if (r)
            castread_close(r); /* closes fd */
        else
            (void)close(fd); /* read-only */
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    return rd_finish_open(r, out, err, cap);
}

int castread_open_mem(const void *buf, size_t len, struct castread **out, char *err, size_t cap)
{
    if (out)
        *out = NULL;
    if ((!buf && len > 0) || !out) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    struct castread *r = rd_new();
    if (!r) {
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    r->mem = buf;
    r->mem_len = len;
    return rd_finish_open(r, out, err, cap);
}

/* A reader of fd's first limit bytes, its header read and of the version
 * to resume (the rc and r->msg say otherwise); *out is NULL, with the
 * error in err, only when it could not be made. */
static int rd_open_prefix(int fd, int64_t limit, int version, struct castread **out, char *err,
                          size_t cap)
{
    struct castread *r = rd_new();
    if (!r || rd_attach_fd(r, fd, 0, limit) != AL_OK) {
        castread_close(r);
        al_errf(err, cap, "out of memory");
        return AL_E_NOMEM;
    }
    *out = r;
    int rc = rd_header(r);
    if (rc == AL_OK && r->info.version != version)
        rc = rd_fail(r, AL_E_VERSION, 1, "only a v%d recording can be resumed", version);
    return rc;
}

int castread_prefix(int fd, int64_t limit, int version, int64_t *last_us, int *exited, char *err,
                    size_t cap)
{
    if (fd < 0 || limit < 0 || !last_us || !exited) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    *exited = 0;
    struct castread *r = NULL;
    int rc = rd_open_prefix(fd, limit, version, &r, err, cap);
    if (!r)
        return rc;
    struct castread_event ev;
    memset(&ev, 0, sizeof ev);
    if (rc == AL_OK) {
        while ((rc = castread_next(r, &ev)) == 1) {
            if (ev.kind == CASTREAD_EV_EXIT)
                *exited = 1;
        }
    }
    if (rc == 0 && !r->last_nl)
        rc = rd_fail(r, AL_E_FORMAT, r->line, "the size to resume at is not at a line end");
    if (rc == 0)
        *last_us = r->time_us;
    else
        al_errf(err, cap, "%s", r->msg);
    castread_close(r);
    return rc;
}

/* Read buf[0..n) at byte off of r's file, which must hold them. */
static int rd_pread(struct castread *r, int64_t off, uint8_t *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(r->fd, buf + got, n - got, (off_t)(off + (int64_t)got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return rd_fail(r, AL_E_IO, r->line, "read: %s", strerror(errno));
        if (k == 0)
            return rd_fail(r, AL_E_FORMAT, r->line, "the file ends before byte %lld",
                           (long long)off + (long long)n);
        got += (size_t)k;
    }
    return AL_OK;
}

/* After the header: the last line of the first limit bytes, read from at
 * most max_line + 1 bytes before limit (the line and the '\n' before it). */
static int rd_tail(struct castread *r, int64_t limit, size_t max_line, int64_t *last_us,
                   int *last_exit)
{
    int64_t hdr_end = r->foff - (int64_t)(r->end - r->start);
    if (hdr_end == limit)
        return AL_OK; /* the header alone: no event */
    int64_t lo = limit - (int64_t)max_line - 1;
    if (lo < hdr_end)
        lo = hdr_end;
    size_t n = (size_t)(limit - lo);
    uint8_t *buf = malloc(n);
    if (!buf)
        return rd_fail(r, AL_E_NOMEM, r->line, "out of memory");
    r->line_at = limit;
    int rc = rd_pread(r, lo, buf, n);
    if (rc == AL_OK && buf[n - 1] != '\n')
        rc = rd_fail(r, AL_E_FORMAT, 0, "the size to resume at is not at a line end");
    size_t s = n - 1;
    while (rc == AL_OK && s > 0 && buf[s - 1] != '\n')
        s--;
    if (rc == AL_OK && s == 0 && lo > hdr_end)
        rc = rd_fail(r, AL_E_FORMAT, 0, "the last line is longer than %zu bytes", max_line);
    struct castread_event ev;
    memset(&ev, 0, sizeof ev);
    if (rc == AL_OK) {
        r->line_at = lo + (int64_t)s;
        if (r->info.version == 3 && s < n - 1 && buf[s] == '#')
            rc = rd_fail(r, AL_E_FORMAT, 0, "the last line is a comment, not an event");
    }
    if (rc == AL_OK) {
        r->cur = rd_json(r, buf + s, n - 1 - s);
        rc = r->cur ? rd_event(r, r->cur, &ev) : r->err;
    }
    if (rc == AL_OK) {
        *last_us = ev.time_us;
        *last_exit = ev.kind == CASTREAD_EV_EXIT;
    }
    free(buf);
    return rc;
}

int castread_prefix_tail(int fd, int64_t limit, int version, size_t max_line, int64_t *last_us,
                         int *last_exit, char *err, size_t cap)
{
    if (fd < 0 || limit < 0 || max_line < 2 || max_line > (size_t)CASTREAD_MAX_LINE || !last_us ||
        !last_exit) {
        al_errf(err, cap, "invalid argument");
        return AL_E_INVAL;
    }
    *last_us = -1;
    *last_exit = 0;
    if (lseek(fd, 0, SEEK_SET) != 0) {
        int e = errno;
        al_errf(err, cap, "seek: %s", strerror(e));
        return AL_E_IO;
    }
    struct castread *r = NULL;
    int rc = rd_open_prefix(fd, limit, version, &r, err, cap);
    if (!r)
        return rc;
    if (rc == AL_OK && !r->last_nl)
        rc = rd_fail(r, AL_E_FORMAT, 1, "the size to resume at is not at a line end");
    if (rc == AL_OK)
        rc = rd_tail(r, limit, max_line, last_us, last_exit);
    if (rc != AL_OK)
        al_errf(err, cap, "%s", r->msg);
    castread_close(r);
    return rc;
}
