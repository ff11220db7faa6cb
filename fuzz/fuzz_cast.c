/*
 * libFuzzer target for the asciicast modules: castread, the reader of
 * untrusted recordings (shared code in al_common, which fuzz targets link),
 * and cast, the writer's UTF-8 sanitizer, its JSON escaper and its header
 * builder, each read back through castread.
 *
 * Fuzz targets link al_runner/al_common, not al_control, so the writer is
 * compiled into this file (its static helpers are then reachable too).
 * Nothing touches a file: the reader runs over memory, and writer lines
 * are formatted into memory.
 *
 * Data model: the first input byte picks a mode (byte % 4), the rest is
 * the payload:
 *   0  payload is a recording: read every event; times never go back, a
 *      resize is in range, an error is sticky and names its line.
 *   1  payload bytes 0..1 pick two cut points in the rest: sanitizing it
 *      whole, in three pieces and byte by byte gives the same valid UTF-8,
 *      and sanitizing that again changes nothing.
 *   2  payload bytes 0..3 are an interval (µs), the rest event data: the
 *      event line the writer formats, read back after a header, gives the
 *      same interval and exactly the sanitized data.
 *   3  payload is "type\ncommand\ntitle": the header the writer builds is
 *      refused exactly when a string is not valid UTF-8, and otherwise
 *      reads back with the same strings.
 * Every allocation is freed before returning; nothing is kept between runs.
 */
#include "../src/control/cast.c"
#include "castread.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_H3 "{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}}\n"

static void fuzz_read(const uint8_t *p, size_t n)
{
    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    int rc = castread_open_mem(p, n, &r, err, sizeof err);
    if (rc != AL_OK) {
        if (r || strncmp(err, "line 1: ", 8) != 0)
            abort();
        return;
    }
    const struct castread_info *in = castread_info(r);
    if (in->cols < 1 || in->cols > AL_MAX_COLS || in->rows < 1 || in->rows > AL_MAX_ROWS)
        abort();
    struct castread_event ev;
    int64_t last = 0;
    while ((rc = castread_next(r, &ev)) == 1) {
        if (ev.time_us < last || (ev.len > 0 && !ev.data) || ev.code[0] == '\0')
            abort();
        if (ev.kind == CASTREAD_EV_RESIZE &&
            (ev.cols < 1 || ev.cols > AL_MAX_COLS || ev.rows < 1 || ev.rows > AL_MAX_ROWS))
            abort();
        last = ev.time_us;
    }
    if (rc < 0) {
        const char *m = castread_error(r);
        if (strncmp(m, "line ", 5) != 0 || castread_next(r, &ev) != rc)
            abort();
    }
    castread_close(r);
}

static size_t sanitize_whole(const uint8_t *p, size_t n, uint8_t *out)
{
    struct cast_utf8 st;
    cast_utf8_init(&st);
    size_t m = cast_utf8_sanitize(&st, p, n, out, CAST_UTF8_OUT_MAX(n));
    return m + cast_utf8_finish(&st, out + m, 3);
}

static void fuzz_utf8(const uint8_t *p, size_t n)
{
    if (n < 2)
        return;
    size_t len = n - 2;
    const uint8_t *s = p + 2;
    size_t i = len ? p[0] % (len + 1) : 0;
    size_t j = len ? p[1] % (len + 1) : 0;
    if (j < i) {
        size_t t = i;
        i = j;
        j = t;
    }
    size_t cap = CAST_UTF8_OUT_MAX(len) + 3;
    uint8_t *a = malloc(cap), *b = malloc(cap), *c = malloc(cap), *d = malloc(cap + 9);
    if (!a || !b || !c || !d)
        goto done;
    size_t na = sanitize_whole(s, len, a);

    struct cast_utf8 st;
    cast_utf8_init(&st);
    size_t nb = cast_utf8_sanitize(&st, s, i, b, CAST_UTF8_OUT_MAX(i));
    nb += cast_utf8_sanitize(&st, s + i, j - i, b + nb, CAST_UTF8_OUT_MAX(j - i));
    nb += cast_utf8_sanitize(&st, s + j, len - j, b + nb, CAST_UTF8_OUT_MAX(len - j));
    nb += cast_utf8_finish(&st, b + nb, 3);

    cast_utf8_init(&st);
    size_t nc = 0;
    for (size_t k = 0; k < len; k++)
        nc += cast_utf8_sanitize(&st, s + k, 1, c + nc, CAST_UTF8_OUT_MAX(1));
    nc += cast_utf8_finish(&st, c + nc, 3);

    if (na > CAST_UTF8_OUT_MAX(len) || nb != na || nc != na || memcmp(a, b, na) != 0 ||
        memcmp(a, c, na) != 0 || !utf8_valid(a, na))
        abort();
    size_t nd = sanitize_whole(a, na, d);
    if (nd != na || memcmp(a, d, na) != 0)
        abort(); /* valid text passes through unchanged */
    /* Valid input is left exactly as it is. */
    if (utf8_valid(s, len) && (na != len || memcmp(a, s, len) != 0))
        abort();
done:
    free(a);
    free(b);
    free(c);
    free(d);
}

static void fuzz_line(const uint8_t *p, size_t n)
{
    if (n < 4)
        return;
    uint64_t us =
        (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    us *= 977; /* reach seconds, keep odd microseconds */
    const uint8_t *s = p + 4;
    size_t len = n - 4;
    if (len > CAST_EVENT_MAX_BYTES)
        len = CAST_EVENT_MAX_BYTES;
    size_t hl = sizeof FUZZ_H3 - 1;
    uint8_t *text = malloc(CAST_TEXT_MAX);
    uint8_t *buf = malloc(hl + CAST_LINE_OUT_MAX);
    struct castread *r = NULL;
    if (!text || !buf)
        goto done;
    size_t m = sanitize_whole(s, len, text);
    memcpy(buf, FUZZ_H3, hl);
    size_t ln = fmt_event(buf + hl, us, p[0] % 2 ? 'o' : 'i', text, m);
    if (ln > CAST_LINE_OUT_MAX)
        abort();
    struct castread_event ev;
    if (castread_open_mem(buf, hl + ln, &r, NULL, 0) != AL_OK || castread_next(r, &ev) != 1 ||
        ev.time_us != (int64_t)us || ev.len != m || (m > 0 && memcmp(ev.data, text, m) != 0) ||
        castread_next(r, &ev) != 0)
        abort();
done:
    castread_close(r);
    free(text);
    free(buf);
}

/* Split p[0..n) at '\n' into up to three NUL-terminated strings. */
static void fuzz_header(const uint8_t *p, size_t n)
{
    char *copy = malloc(n + 1);
    uint8_t *out = malloc(CAST_WBUF_SIZE);
    struct castread *r = NULL;
    if (!copy || !out)
        goto done;
    memcpy(copy, p, n);
    copy[n] = '\0';
    char *f[3] = {copy, NULL, NULL};
    for (int k = 1; k < 3; k++) {
        char *nl = f[k - 1] ? strchr(f[k - 1], '\n') : NULL;
        if (nl) {
            *nl = '\0';
            f[k] = nl + 1;
        }
    }
    struct cast_header h;
    memset(&h, 0, sizeof h);
    h.cols = 80;
    h.rows = 24;
    h.timestamp = -1;
    h.term_type = f[0];
    h.command = f[1];
    h.title = f[2];
    int valid = 1;
    for (int k = 0; k < 3; k++)
        if (f[k] && !utf8_valid((const uint8_t *)f[k], strlen(f[k])))
            valid = 0;
    size_t len = 0;
    int rc = header_build(&h, out, CAST_WBUF_SIZE, &len, NULL, 0);
    if (rc == AL_E_TOOBIG)
        goto done;
    if ((rc == AL_OK) != valid)
        abort();
    if (rc != AL_OK)
        goto done;
    if (castread_open_mem(out, len, &r, NULL, 0) != AL_OK)
        abort();
    const struct castread_info *in = castread_info(r);
    const char *got[3] = {in->term_type, in->command, in->title};
    for (int k = 0; k < 3; k++)
        if ((f[k] == NULL) != (got[k] == NULL) || (f[k] && strcmp(f[k], got[k]) != 0))
            abort();
done:
    castread_close(r);
    free(copy);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0:
        fuzz_read(p, n);
        break;
    case 1:
        fuzz_utf8(p, n);
        break;
    case 2:
        fuzz_line(p, n);
        break;
    default:
        fuzz_header(p, n);
        break;
    }
    return 0;
}
