/*
 * Unit tests for cast: the asciicast v3 writer and its UTF-8 sanitizer.
 * What the writer produces is read back with castread (whose own tests are
 * test_castread.c).
 *
 * Data model: each test that touches files runs in a fresh mkdtemp
 * directory (struct fx), removed by the teardown, which also checks that
 * the test left no file descriptor open. Times are made-up microsecond
 * readings (the writer never reads a clock). Tests that must "crash" a
 * writer (drop it without closing) or lower RLIMIT_FSIZE do it in a forked
 * child, which reports back through a pipe and _exit()s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "cast.h"
#include "castread.h"
#include "testutil.h"

#define FFFD "\xef\xbf\xbd"
#define START_US 5000000LL

struct fx {
    char dir[64];
    char path[128];
    int fds; /* open descriptors at setup */
};

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[512];
        (void)snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        (void)unlink(p);
    }
    closedir(d);
    (void)rmdir(dir);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    (void)snprintf(f->dir, sizeof f->dir, "/tmp/al-test-cast-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    (void)snprintf(f->path, sizeof f->path, "%s/t.cast", f->dir);
    f->fds = tu_count_fds();
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    int fds = tu_count_fds();
    rm_tree(f->dir);
    int leaked = fds != f->fds;
    free(f);
    assert_false(leaked); /* no descriptor left behind */
    return 0;
}

static struct cast_header hdr(void)
{
    struct cast_header h;
    memset(&h, 0, sizeof h);
    h.cols = 80;
    h.rows = 24;
    h.timestamp = -1;
    h.start_us = START_US;
    return h;
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    assert_true(n >= 0);
    assert_int_equal(fseek(fp, 0, SEEK_SET), 0);
    uint8_t *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    assert_int_equal(fclose(fp), 0);
    b[n] = '\0';
    *len = (size_t)n;
    return b;
}

static void spit(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

/* Resume at a size without a stored time: the whole prefix is checked. */
#define AT_SIZE(n) (&(struct cast_mark){.size = (int64_t)(n), .time_us = -1})

static struct cast *create(struct fx *f, const struct cast_header *h)
{
    struct cast *c = NULL;
    char err[256];
    int rc = cast_open(f->path, h, NULL, &c, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("cast_open: %s", err);
    return c;
}

/* Concatenated data of every event of one kind, and the event count. */
struct text {
    uint8_t *p;
    size_t len, events;
};

static struct text collect(struct castread *r, enum castread_kind kind)
{
    struct text t = {malloc(1), 0, 0};
    assert_non_null(t.p);
    struct castread_event ev;
    int rc;
    while ((rc = castread_next(r, &ev)) == 1) {
        if (ev.kind != kind)
            continue;
        t.p = realloc(t.p, t.len + ev.len + 1);
        assert_non_null(t.p);
        memcpy(t.p + t.len, ev.data, ev.len);
        t.len += ev.len;
        t.events++;
    }
    if (rc != 0)
        fail_msg("castread_next: %s", castread_error(r));
    return t;
}

static struct text collect_file(const char *path, enum castread_kind kind)
{
    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    if (castread_open(path, &r, err, sizeof err) != AL_OK)
        fail_msg("castread_open: %s", err);
    struct text t = collect(r, kind);
    castread_close(r);
    return t;
}

static void sanitize_all(const uint8_t *in, size_t n, uint8_t *out, size_t *olen)
{
    struct cast_utf8 st;
    cast_utf8_init(&st);
    size_t m = cast_utf8_sanitize(&st, in, n, out, CAST_UTF8_OUT_MAX(n));
    m += cast_utf8_finish(&st, out + m, 3);
    *olen = m;
}

/* ---- round trip --------------------------------------------------------- */

struct want {
    enum castread_kind kind;
    int64_t t; /* caller clock */
    const char *data;
    size_t len;
    unsigned cols, rows;
    int status;
};

#define S(lit) lit, sizeof lit - 1

static void test_roundtrip_every_kind(void **state)
{
    struct fx *f = *state;
    const char *env[] = {"SHELL=/bin/bash", "LANG=C.UTF-8"};
    struct cast_header h = hdr();
    h.term_type = "xterm-256color";
    h.timestamp = 1700000000;
    h.idle_time_limit_us = 2500000;
    h.command = "/bin/sh -c 'echo \"hi\"'";
    h.title = "D\xc3\xa9mo \xe2\x9c\x93";
    h.env = env;
    h.n_env = 2;
    static const struct want w[] = {
        {CASTREAD_EV_OUTPUT, START_US + 248000, S("\x1b[1;31mHello\x1b[0m\r\n"), 0, 0, 0},
        {CASTREAD_EV_INPUT, START_US + 249000, S("ls\r"), 0, 0, 0},
        {CASTREAD_EV_OUTPUT, START_US + 1249001,
         S("a\0b\x7f\xc2\x85\xe2\x80\xa8\xe2\x80\xa9\"\\\t\b\f/\xf0\x9f\x98\x80\x01"), 0, 0, 0},
        {CASTREAD_EV_RESIZE, START_US + 1300000, S("100x50"), 100, 50, 0},
        {CASTREAD_EV_MARKER, START_US + 1300000, S("chapter 1"), 0, 0, 0},
        {CASTREAD_EV_MARKER, START_US + 2000000, S(""), 0, 0, 0},
        {CASTREAD_EV_OUTPUT, START_US + 9000000, S("Bye!"), 0, 0, 0},
        {CASTREAD_EV_EXIT, START_US + 9000001, S("-7"), 0, 0, -7},
    };
    struct cast *c = create(f, &h);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        switch (w[i].kind) {
        case CASTREAD_EV_OUTPUT:
            assert_int_equal(cast_output(c, w[i].t, w[i].data, w[i].len), AL_OK);
            break;
        case CASTREAD_EV_INPUT:
            assert_int_equal(cast_input(c, w[i].t, w[i].data, w[i].len), AL_OK);
            break;
        case CASTREAD_EV_RESIZE:
            assert_int_equal(cast_resize(c, w[i].t, w[i].cols, w[i].rows), AL_OK);
            break;
        case CASTREAD_EV_MARKER:
            assert_int_equal(cast_marker(c, w[i].t, w[i].data), AL_OK);
            break;
        case CASTREAD_EV_EXIT:
            assert_int_equal(cast_exit(c, w[i].t, w[i].status), AL_OK);
            break;
        default:
            fail();
        }
    }
    assert_int_equal(cast_close(c), AL_OK);

    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0600);

    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    assert_int_equal(castread_open(f->path, &r, err, sizeof err), AL_OK);
    const struct castread_info *in = castread_info(r);
    assert_int_equal(in->version, 3);
    assert_int_equal(in->cols, 80);
    assert_int_equal(in->rows, 24);
    assert_int_equal(in->timestamp, 1700000000);
    assert_int_equal(in->idle_time_limit_us, 2500000);
    assert_string_equal(in->term_type, "xterm-256color");
    assert_string_equal(in->command, h.command);
    assert_string_equal(in->title, h.title);
    struct castread_event ev;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        assert_int_equal(castread_next(r, &ev), 1);
        assert_int_equal(ev.kind, w[i].kind);
        assert_int_equal(ev.time_us, w[i].t - START_US);
        assert_int_equal(ev.len, w[i].len);
        assert_memory_equal(ev.data, w[i].data, w[i].len);
        assert_int_equal(ev.cols, w[i].cols);
        assert_int_equal(ev.rows, w[i].rows);
        assert_int_equal(ev.status, w[i].status);
    }
    assert_string_equal(ev.code, "x");
    assert_int_equal(castread_next(r, &ev), 0);
    assert_int_equal(castread_next(r, &ev), 0);
    assert_int_equal(castread_line(r), 9);
    castread_close(r);

    /* The header line is exactly what the spec's example looks like. */
    size_t n;
    uint8_t *b = slurp(f->path, &n);
    const char *want_hdr =
        "{\"version\":3,\"term\":{\"cols\":80,\"rows\":24,\"type\":\"xterm-256color\"},"
        "\"timestamp\":1700000000,\"idle_time_limit\":2.500000,"
        "\"command\":\"/bin/sh -c 'echo \\\"hi\\\"'\",\"title\":\"D\xc3\xa9mo \xe2\x9c\x93\","
        "\"env\":{\"SHELL\":\"/bin/bash\",\"LANG\":\"C.UTF-8\"}}\n"
        "[0.248000,\"o\",\"\\u001b[1;31mHello\\u001b[0m\\r\\n\"]\n";
    assert_memory_equal(b, want_hdr, strlen(want_hdr));
    assert_non_null(strstr((char *)b, "\"a\\u0000b\\u007f\\u0085\\u2028\\u2029\\\"\\\\\\t\\b\\f/"
                                      "\xf0\x9f\x98\x80\\u0001\"]\n"));
    assert_non_null(strstr((char *)b, "[7.000000,\"o\",\"Bye!\"]\n[0.000001,\"x\",\"-7\"]\n"));
    free(b);
}

/* ---- UTF-8 ---------------------------------------------------------------- */

static const uint8_t mixed[] = "a\xe2\x82\xac"
                               "b\xf0\x9f\x98\x80"
                               "c\xc3\xa9\xe4\xb8\xad"
                               "\xe2\x82"
                               "A\xff\xed\xa0\x80\xf0\x9f\x98"
                               "Z\xf4\x8f\xbf\xbf\xc2";

static void test_utf8_split_every_boundary(void **state)
{
    (void)state;
    const size_t n = sizeof mixed - 1;
    uint8_t whole[CAST_UTF8_OUT_MAX(sizeof mixed)];
    size_t wlen;
    sanitize_all(mixed, n, whole, &wlen);
    /* Every pair of cut points (one or two cuts, or none). */
    for (size_t i = 0; i <= n; i++) {
        for (size_t j = i; j <= n; j++) {
            uint8_t out[CAST_UTF8_OUT_MAX(sizeof mixed) + 16];
            struct cast_utf8 st;
            cast_utf8_init(&st);
            size_t m = cast_utf8_sanitize(&st, mixed, i, out, CAST_UTF8_OUT_MAX(i));
            m += cast_utf8_sanitize(&st, mixed + i, j - i, out + m, CAST_UTF8_OUT_MAX(j - i));
            m += cast_utf8_sanitize(&st, mixed + j, n - j, out + m, CAST_UTF8_OUT_MAX(n - j));
            m += cast_utf8_finish(&st, out + m, 3);
            assert_int_equal(m, wlen);
            assert_memory_equal(out, whole, wlen);
        }
    }
    /* One byte at a time. */
    uint8_t out[CAST_UTF8_OUT_MAX(sizeof mixed) + 16];
    struct cast_utf8 st;
    cast_utf8_init(&st);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += cast_utf8_sanitize(&st, mixed + i, 1, out + m, CAST_UTF8_OUT_MAX(1));
    m += cast_utf8_finish(&st, out + m, 3);
    assert_int_equal(m, wlen);
    assert_memory_equal(out, whole, wlen);
}

/* The same through the writer and the reader: a valid multi-byte text cut
 * at every byte boundary records the same text as uncut. */
static void test_utf8_split_through_writer(void **state)
{
    struct fx *f = *state;
    static const uint8_t text[] = "\xe2\x82\xac\xf0\x9f\x98\x80\xc3\xa9\xe4\xb8\xad!";
    const size_t n = sizeof text - 1;
    struct cast_header h = hdr();
    for (size_t i = 0; i <= n; i++) {
        assert_int_equal(unlink(f->path) == 0 || errno == ENOENT, 1);
        struct cast *c = create(f, &h);
        assert_int_equal(cast_output(c, START_US + 1, text, i), AL_OK);
        assert_int_equal(cast_output(c, START_US + 2, text + i, n - i), AL_OK);
        assert_int_equal(cast_close(c), AL_OK);
        struct text t = collect_file(f->path, CASTREAD_EV_OUTPUT);
        assert_int_equal(t.len, n);
        assert_memory_equal(t.p, text, n);
        assert_true(t.events >= 1 && t.events <= 2);
        free(t.p);
    }
}

static void test_invalid_bytes_become_fffd(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        size_t len;
        const char *out;
    } cases[] = {
        {S("\x80"), FFFD},
        {S("\xc0\x80"), FFFD FFFD},                   /* overlong NUL */
        {S("\xc1\xbf"), FFFD FFFD},                   /* overlong */
        {S("\xe0\x80\x80"), FFFD FFFD FFFD},          /* overlong 3-byte */
        {S("\xe0\x9f\xbf"), FFFD FFFD FFFD},          /* overlong 3-byte */
        {S("\xed\xa0\x80"), FFFD FFFD FFFD},          /* surrogate U+D800 */
        {S("\xed\xbf\xbf"), FFFD FFFD FFFD},          /* surrogate U+DFFF */
        {S("\xf0\x80\x80\x80"), FFFD FFFD FFFD FFFD}, /* overlong 4-byte */
        {S("\xf4\x90\x80\x80"), FFFD FFFD FFFD FFFD}, /* above U+10FFFF */
        {S("\xf5\xfe\xff"), FFFD FFFD FFFD},
        {S("\xe2\x82"
           "A"),
         FFFD "A"}, /* truncated: one U+FFFD for the maximal subpart */
        {S("\xf0\x9f\x98"), FFFD},
        {S("a\xffz"), "a" FFFD "z"},
        {S("\xe2\x82\xac\xf4\x8f\xbf\xbf\xed\x9f\xbf"),
         "\xe2\x82\xac\xf4\x8f\xbf\xbf\xed\x9f\xbf"}, /* valid edges */
        {S("\xef\xbf\xbd"), FFFD},                    /* U+FFFD itself is text */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t out[64];
        size_t m;
        sanitize_all((const uint8_t *)cases[i].in, cases[i].len, out, &m);
        assert_int_equal(m, strlen(cases[i].out));
        assert_memory_equal(out, cases[i].out, m);
    }
    /* A too small output buffer is refused, not overrun. */
    struct cast_utf8 st;
    cast_utf8_init(&st);
    uint8_t small[8];
    assert_int_equal(cast_utf8_sanitize(&st, (const uint8_t *)"abc", 3, small, sizeof small), 0);
}

static void test_invalid_bytes_through_writer(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    struct cast *c = create(f, &h);
    assert_int_equal(cast_output(c, START_US, "a\xff\xc0\x80z", 5), AL_OK);
    assert_int_equal(cast_input(c, START_US, "\xed\xa0\x80", 3), AL_OK);
    /* Held at the end of a chunk: not written until completed ... */
    assert_int_equal(cast_output(c, START_US, "ok\xe2\x82", 4), AL_OK);
    struct cast_status st;
    struct cast_mark d;
    assert_int_equal(cast_sync(c, &d), AL_OK);
    cast_status(c, &st);
    assert_int_equal(st.out_pending, 2);
    assert_int_equal(st.out_total, 9);
    assert_int_equal(st.out_durable, 7); /* the pair to persist excludes them */
    assert_int_equal(st.durable_size, d.size);
    assert_int_equal(d.time_us, 0);
    assert_false(d.exited);
    /* ... and replaced when the stream ends. */
    assert_int_equal(cast_exit(c, START_US, 0), AL_OK);
    assert_int_equal(cast_output(c, START_US, "late", 4), AL_E_STATE);
    assert_int_equal(cast_close(c), AL_OK);
    struct text t = collect_file(f->path, CASTREAD_EV_OUTPUT);
    const char want[] = "a" FFFD FFFD FFFD "zok" FFFD;
    assert_int_equal(t.len, sizeof want - 1);
    assert_memory_equal(t.p, want, t.len);
    free(t.p);
    t = collect_file(f->path, CASTREAD_EV_INPUT);
    assert_int_equal(t.len, 9);
    assert_memory_equal(t.p, FFFD FFFD FFFD, 9);
    free(t.p);
}

/* ---- the file is JSON, line by line --------------------------------------- */

static void test_every_line_is_strict_json(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    h.title = "t";
    struct cast *c = create(f, &h);
    uint64_t seed = 0x5eed;
    size_t total = 0;
    uint8_t *all = malloc(200 * 3 * CAST_EVENT_MAX_BYTES);
    assert_non_null(all);
    int64_t now = START_US;
    /* Random chunks of random bytes, some longer than one event. */
    for (int i = 0; i < 200; i++) {
        size_t n = (size_t)(tu_rand(&seed) % (3 * CAST_EVENT_MAX_BYTES));
        for (size_t k = 0; k < n; k++)
            all[total + k] = (uint8_t)tu_rand(&seed);
        now += (int64_t)(tu_rand(&seed) % 5000000);
        assert_int_equal(cast_output(c, now, all + total, n), AL_OK);
        total += n;
        if (i % 17 == 0)
            assert_int_equal(cast_resize(c, now, 1 + i, 1 + i / 2), AL_OK);
    }
    assert_int_equal(cast_exit(c, now, 3), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);

    size_t len;
    uint8_t *b = slurp(f->path, &len);
    assert_true(len > 0 && b[len - 1] == '\n');
    size_t lines = 0;
    for (size_t pos = 0; pos < len;) {
        uint8_t *nl = memchr(b + pos, '\n', len - pos);
        assert_non_null(nl);
        size_t n = (size_t)(nl - (b + pos));
        /* Longest line: 6 bytes per raw byte of one event, plus framing. */
        assert_true(n <= 6 * (CAST_EVENT_MAX_BYTES + 3) + 64);
        for (size_t k = 0; k < n; k++) {
            uint8_t ch = b[pos + k];
            assert_true(ch >= 0x20 && ch != 0x7f); /* controls are escaped */
            if (ch == 0xc2 && k + 1 < n)
                assert_true(b[pos + k + 1] >= 0xa0); /* so are C1 controls */
        }
        json_error_t je;
        json_t *j = json_loadb((char *)b + pos, n, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!j)
            fail_msg("line %zu: %s", lines + 1, je.text);
        if (lines == 0) {
            assert_true(json_is_object(j));
            assert_int_equal(json_integer_value(json_object_get(j, "version")), 3);
        } else {
            assert_true(json_is_array(j) && json_array_size(j) == 3);
            assert_true(json_is_number(json_array_get(j, 0)));
            assert_true(json_is_string(json_array_get(j, 1)));
            assert_true(json_is_string(json_array_get(j, 2)));
        }
        json_decref(j);
        lines++;
        pos += n + 1;
    }
    assert_true(lines > 200);
    free(b);

    /* And the recorded text is the sanitized input, in order. */
    uint8_t *want = malloc(CAST_UTF8_OUT_MAX(total));
    assert_non_null(want);
    size_t wlen;
    sanitize_all(all, total, want, &wlen);
    struct text t = collect_file(f->path, CASTREAD_EV_OUTPUT);
    assert_int_equal(t.len, wlen);
    assert_memory_equal(t.p, want, wlen);
    free(t.p);
    free(want);
    free(all);
}

/* ---- time ----------------------------------------------------------------- */

static void test_intervals_exact(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    h.start_us = 1000;
    static const struct {
        int64_t now;
        const char *line; /* expected start of the event line */
        int64_t t;        /* expected time read back */
    } ev[] = {
        {1000, "[0.000000,", 0},
        {1001, "[0.000001,", 1},
        {1001 + 999999, "[0.999999,", 1000000},
        {2001000, "[1.000000,", 2000000},
        {2001000 + 123456789123456LL, "[123456789.123456,", 2000000 + 123456789123456LL},
        {500, "[0.000000,", 2000000 + 123456789123456LL}, /* clock went back */
        {510, "[0.000010,", 2000000 + 123456789123466LL},
        {510 + 1000000000000000LL, "[1000000000.000000,",
         2000000 + 123456789123466LL + 1000000000000000LL},
        {510 + 1000000000000000LL + 2000000000000000LL, "[1000000000.000000,",
         2000000 + 123456789123466LL + 2000000000000000LL}, /* capped */
    };
    struct cast *c = create(f, &h);
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++)
        assert_int_equal(cast_marker(c, ev[i].now, ""), AL_OK);
    /* Many small odd intervals: no drift (integer microseconds). */
    uint64_t seed = 7;
    int64_t now = ev[sizeof ev / sizeof ev[0] - 1].now;
    int64_t t0 = ev[sizeof ev / sizeof ev[0] - 1].t;
    int64_t times[5000];
    for (int i = 0; i < 5000; i++) {
        int64_t d = (int64_t)(tu_rand(&seed) % 1000) * 333333 / 1000;
        now += d;
        times[i] = t0 + (now - ev[sizeof ev / sizeof ev[0] - 1].now);
        assert_int_equal(cast_output(c, now, "x", 1), AL_OK);
    }
    assert_int_equal(cast_close(c), AL_OK);

    size_t len;
    uint8_t *b = slurp(f->path, &len);
    const char *p = strchr((char *)b, '\n') + 1;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        assert_memory_equal(p, ev[i].line, strlen(ev[i].line));
        p = strchr(p, '\n') + 1;
    }
    free(b);

    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    assert_int_equal(castread_open(f->path, &r, err, sizeof err), AL_OK);
    struct castread_event e;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        assert_int_equal(castread_next(r, &e), 1);
        assert_int_equal(e.time_us, ev[i].t);
    }
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(castread_next(r, &e), 1);
        assert_int_equal(e.time_us, times[i]);
    }
    assert_int_equal(castread_next(r, &e), 0);
    castread_close(r);
}

/* ---- big chunks and the bounded buffer ------------------------------------ */

static void test_long_chunk_split_and_buffer_bounded(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    struct cast *c = create(f, &h);
    struct cast_status st;
    cast_status(c, &st);
    const int64_t header = st.durable_size;
    assert_true(header > 0);
    /* "€" (3 bytes) repeated: event cuts fall inside characters. */
    const size_t n = 3 * CAST_EVENT_MAX_BYTES + 100;
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t) "\xe2\x82\xac"[i % 3];
    struct stat sb;
    for (int i = 0; i < 40; i++) {
        assert_int_equal(cast_output(c, START_US + i, buf, n - n % 3), AL_OK);
        cast_status(c, &st);
        assert_int_equal(stat(f->path, &sb), 0);
        /* Written when full: what is not on disk fits one buffer. */
        assert_true(st.size - sb.st_size <= CAST_WBUF_SIZE);
        assert_true(sb.st_size >= header);
        assert_int_equal(st.durable_size, header); /* nothing synced yet */
    }
    assert_true(sb.st_size > header); /* buffers were written before any sync */
    struct cast_mark d;
    assert_int_equal(cast_sync(c, &d), AL_OK);
    cast_status(c, &st);
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(d.size, st.size);
    assert_int_equal(d.size, sb.st_size);
    assert_int_equal(d.time_us, 39); /* START_US + 39 */
    assert_int_equal(st.out_durable, 40 * (n - n % 3));
    assert_int_equal(cast_close(c), AL_OK);

    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    assert_int_equal(castread_open(f->path, &r, err, sizeof err), AL_OK);
    struct castread_event ev;
    size_t got = 0, events = 0;
    int rc;
    while ((rc = castread_next(r, &ev)) == 1) {
        assert_int_equal(ev.len % 3, 0); /* never half a character */
        assert_true(ev.len <= CAST_EVENT_MAX_BYTES + 3);
        assert_int_equal(ev.time_us, (int64_t)(events / 4)); /* same time per chunk */
        got += ev.len;
        events++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(events, 40 * 4);
    assert_int_equal(got, 40 * (n - n % 3));
    castread_close(r);
    free(buf);
}

/* ---- resume --------------------------------------------------------------- */

/* A scripted session: output chunks (cut inside characters), some resizes
 * and markers. */
struct step {
    char kind;     /* 'o', 'r', 'm' */
    int64_t t;     /* clock */
    size_t off, n; /* output: bytes [off, off+n) of the stream */
};

enum { NSTEPS = 60 };

static uint8_t stream_bytes[NSTEPS * 700];
static struct step steps[NSTEPS];
static size_t stream_len;

static void make_script(void)
{
    uint64_t seed = 99;
    size_t off = 0;
    int64_t t = START_US;
    for (int i = 0; i < NSTEPS; i++) {
        t += (int64_t)(tu_rand(&seed) % 2000000);
        steps[i].t = t;
        if (i % 10 == 5) {
            steps[i].kind = i % 20 == 5 ? 'r' : 'm';
            continue;
        }
        size_t n = 1 + (size_t)(tu_rand(&seed) % 600);
        for (size_t k = 0; k < n; k++)
            stream_bytes[off + k] =
                (uint8_t) "h\xc3\xa9llo \xe2\x82\xac\xf0\x9f\x98\x80\n"[(off + k) % 16];
        steps[i].kind = 'o';
        steps[i].off = off;
        steps[i].n = n;
        off += n;
    }
    stream_len = off;
}

/* Run step i, feeding output from stream offset from (>= steps[i].off). */
static void run_step(struct cast *c, int i, size_t from)
{
    const struct step *s = &steps[i];
    if (s->kind == 'r')
        assert_int_equal(cast_resize(c, s->t, 100 + (unsigned)i, 30), AL_OK);
    else if (s->kind == 'm')
        assert_int_equal(cast_marker(c, s->t, "mark"), AL_OK);
    else if (from < s->off + s->n)
        assert_int_equal(cast_output(c, s->t, stream_bytes + from, s->off + s->n - from), AL_OK);
}

struct pair {
    uint64_t stream_off;
    uint32_t pending;      /* UTF-8 bytes held at the sync */
    struct cast_mark mark; /* what cast_sync made durable */
    int64_t file_size_at_crash;
};

static void copy_file(const char *from, const char *to)
{
    size_t n;
    uint8_t *b = slurp(from, &n);
    (void)unlink(to);
    spit(to, b, n);
    free(b);
}

/* Resume the crashed writer's file at path from mark, replay what follows
 * the persisted pair p, exit: the file must equal a[0..alen). */
static void resume_and_finish(const char *path, const struct cast_header *h,
                              const struct cast_mark *mark, const struct pair *p, int cut,
                              const uint8_t *a, size_t alen)
{
    char err[256];
    struct cast *c = NULL;
    if (cast_open(path, h, mark, &c, err, sizeof err) != AL_OK)
        fail_msg("resume (time %lld): %s", (long long)mark->time_us, err);
    struct cast_status st;
    cast_status(c, &st);
    assert_int_equal(st.durable_size, p->mark.size);
    /* the point resumed at, whichever way its time was found */
    struct cast_mark m;
    assert_int_equal(cast_sync(c, &m), AL_OK);
    assert_int_equal(m.size, p->mark.size);
    assert_int_equal(m.time_us, p->mark.time_us);
    assert_int_equal(m.exited, 0);
    int first = 0;
    while (first < NSTEPS &&
           (steps[first].kind != 'o' || steps[first].off + steps[first].n <= p->stream_off))
        first++;
    /* Non-output steps after the cut are replayed by the caller too. */
    for (int i = cut < first ? cut : first; i < NSTEPS; i++) {
        if (steps[i].kind == 'o')
            run_step(c, i, steps[i].off > p->stream_off ? steps[i].off : p->stream_off);
        else if (i >= cut)
            run_step(c, i, 0);
    }
    assert_int_equal(cast_exit(c, steps[NSTEPS - 1].t + 5, 0), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    size_t blen;
    uint8_t *b = slurp(path, &blen);
    assert_int_equal(blen, alen);
    assert_memory_equal(b, a, alen);
    free(b);
}

static void test_resume_equals_uninterrupted(void **state)
{
    struct fx *f = *state;
    make_script();
    struct cast_header h = hdr();
    h.title = "resume";

    /* A: uninterrupted. */
    char patha[160], pathb[160];
    (void)snprintf(patha, sizeof patha, "%s/a.cast", f->dir);
    (void)snprintf(pathb, sizeof pathb, "%s/b.cast", f->dir);
    struct cast *c = NULL;
    assert_int_equal(cast_open(patha, &h, NULL, &c, NULL, 0), AL_OK);
    for (int i = 0; i < NSTEPS; i++)
        run_step(c, i, steps[i].off);
    assert_int_equal(cast_exit(c, steps[NSTEPS - 1].t + 5, 0), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    size_t alen;
    uint8_t *a = slurp(patha, &alen);

    int held = 0;
    for (int cut = 1; cut < NSTEPS; cut += 3) {
        assert_int_equal(unlink(f->path) == 0 || errno == ENOENT, 1);
        /* B, in a child that "crashes": steps up to cut, sync (the pair is
         * persisted), more steps and a big write that reaches the file,
         * then _exit without closing. */
        int pfd[2];
        assert_int_equal(pipe(pfd), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            struct pair p;
            memset(&p, 0, sizeof p);
            struct cast *w = NULL;
            if (cast_open(f->path, &h, NULL, &w, NULL, 0) != AL_OK)
                _exit(2);
            for (int i = 0; i < cut; i++)
                run_step(w, i, steps[i].off);
            struct cast_status st;
            if (cast_sync(w, &p.mark) != AL_OK)
                _exit(3);
            cast_status(w, &st);
            p.stream_off = st.out_durable;
            p.pending = st.out_pending;
            for (int i = cut; i < NSTEPS && i < cut + 4; i++)
                run_step(w, i, steps[i].off);
            static uint8_t junk[CAST_WBUF_SIZE * 2];
            memset(junk, 'j', sizeof junk);
            if (cast_output(w, steps[NSTEPS - 1].t, junk, sizeof junk) != AL_OK)
                _exit(4);
            struct stat sb;
            if (stat(f->path, &sb) != 0)
                _exit(5);
            p.file_size_at_crash = sb.st_size;
            if (write(pfd[1], &p, sizeof p) != (ssize_t)sizeof p)
                _exit(6);
            _exit(0); /* crash: the writer is never closed */
        }
        (void)close(pfd[1]);
        struct pair p;
        assert_int_equal(read(pfd[0], &p, sizeof p), (ssize_t)sizeof p);
        (void)close(pfd[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_true(p.file_size_at_crash > p.mark.size); /* a tail to cut off */
        assert_true(p.mark.time_us > 0);
        held += p.pending > 0;

        /* Restart: resume at the durable point, stream from the durable
         * offset (the runner replays from there), same clock; once with
         * the time stored with the size (only the header and the last
         * line are read), once without it (a row from before schema 8:
         * all of the prefix is read). */
        copy_file(f->path, pathb);
        resume_and_finish(f->path, &h, &p.mark, &p, cut, a, alen);
        resume_and_finish(pathb, &h, AT_SIZE(p.mark.size), &p, cut, a, alen);
    }
    assert_true(held >= 2); /* some cuts fell inside a character */
    free(a);
}

static void test_resume_refuses_bad_prefix(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    struct cast *c = create(f, &h);
    struct cast_mark hd, d1, d2;
    assert_int_equal(cast_sync(c, &hd), AL_OK); /* the header alone */
    assert_int_equal(cast_output(c, START_US + 10, "hello", 5), AL_OK);
    assert_int_equal(cast_sync(c, &d1), AL_OK);
    assert_int_equal(cast_exit(c, START_US + 20, 1), AL_OK);
    assert_int_equal(cast_sync(c, &d2), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    assert_int_equal(hd.time_us, 0);
    assert_int_equal(d1.time_us, 10);
    assert_false(d1.exited);
    assert_int_equal(d2.time_us, 20);
    assert_true(d2.exited);
    char err[256];
    /* Not at a line end: with the time stored or not. */
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(d1.size - 1), &c, err, sizeof err),
                     AL_E_FORMAT);
    assert_null(c);
    assert_non_null(strstr(err, "line"));
    struct cast_mark m = d1;
    m.size = d1.size - 1;
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_null(c);
    assert_non_null(strstr(err, "not at a line end"));
    m.size = d1.size + 1; /* inside the exit line: the line "ends" in its middle */
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "not at a line end"));
    m.size = hd.size - 1; /* inside the header */
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    /* Longer than the file. */
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(1 << 20), &c, err, sizeof err), AL_E_FORMAT);
    m = d2;
    m.size = 1 << 20;
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "shorter than its durable size"));
    /* A stored time or exit the last line contradicts. */
    m = d1;
    m.time_us = 9; /* less than the last interval alone */
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "stored time"));
    m = d1;
    m.exited = 1;
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "exit flag"));
    m = d2;
    m.exited = 0;
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "exit flag"));
    m = hd;
    m.time_us = 1; /* no event, yet some time */
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "stored time"));
    assert_null(c);
    /* Missing file, negative size or time. */
    char other[160];
    (void)snprintf(other, sizeof other, "%s/none.cast", f->dir);
    assert_int_equal(cast_open(other, &h, AT_SIZE(10), &c, err, sizeof err), AL_E_NOENT);
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(-1), &c, err, sizeof err), AL_E_INVAL);
    m = d1;
    m.time_us = -2;
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_INVAL);
    /* A v2 recording or garbage, with the time stored or not. */
    static const char v2[] = "{\"version\":2,\"width\":80,\"height\":24}\n";
    spit(other, v2, sizeof v2 - 1);
    assert_int_equal(cast_open(other, &h, AT_SIZE(sizeof v2 - 1), &c, err, sizeof err),
                     AL_E_VERSION);
    m = (struct cast_mark){sizeof v2 - 1, 0, 0};
    assert_int_equal(cast_open(other, &h, &m, &c, err, sizeof err), AL_E_VERSION);
    spit(other, "garbage\n", 8);
    assert_int_equal(cast_open(other, &h, AT_SIZE(8), &c, err, sizeof err), AL_E_FORMAT);
    m = (struct cast_mark){8, 0, 0};
    assert_int_equal(cast_open(other, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "line 1"));
    /* Resume after the exit event: the recording is finished. */
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(d2.size), &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 30, "x", 1), AL_E_STATE);
    assert_int_equal(cast_close(c), AL_OK);
    assert_int_equal(cast_open(f->path, &h, &d2, &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 30, "x", 1), AL_E_STATE);
    assert_int_equal(cast_close(c), AL_OK);
    /* At the header alone, with its time 0: fine (the file is cut there). */
    copy_file(f->path, other);
    assert_int_equal(cast_open(other, &h, &hd, &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 3, "z", 1), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    struct text z = collect_file(other, CASTREAD_EV_OUTPUT);
    assert_int_equal(z.len, 1);
    free(z.p);
    /* At d1 (stored time): the exit line is cut off and new events follow
     * "hello", timed from the stored time. */
    assert_int_equal(cast_open(f->path, &h, &d1, &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 40, " world", 6), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    size_t len;
    uint8_t *b = slurp(f->path, &len);
    assert_non_null(strstr((char *)b, "[0.000010,\"o\",\"hello\"]\n[0.000030,\"o\",\" world\"]\n"));
    assert_null(strstr((char *)b, "\"x\""));
    free(b);
    /* The same without the stored time (a row from before schema 8). */
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(d1.size), &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 45, "!", 1), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    b = slurp(f->path, &len);
    assert_non_null(strstr((char *)b, "[0.000010,\"o\",\"hello\"]\n[0.000035,\"o\",\"!\"]\n"));
    free(b);
}

/* Write a recording by hand: the header, then the given event lines. */
static int64_t handmade(const char *path, const char *const *lines, size_t n)
{
    static const char head[] = "{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}}\n";
    size_t cap = sizeof head;
    for (size_t i = 0; i < n; i++)
        cap += strlen(lines[i]) + 1;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t len = sizeof head - 1;
    memcpy(b, head, len);
    for (size_t i = 0; i < n; i++) {
        size_t k = strlen(lines[i]);
        memcpy(b + len, lines[i], k);
        len += k;
        b[len++] = '\n';
    }
    spit(path, b, len);
    free(b);
    return (int64_t)len;
}

/*
 * The bounded check reads the header and the last line only: a recording
 * whose middle was garbled by hand resumes with the stored time (its
 * garbage is not read), and is refused by the full check without it; a
 * garbled, truncated, commented or too long last line is refused with it.
 */
static void test_resume_reads_only_the_ends(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    struct cast *c = create(f, &h);
    static char chunk[3000];
    memset(chunk, 'm', sizeof chunk);
    for (int i = 1; i <= 200; i++)
        assert_int_equal(cast_output(c, START_US + i * 1000, chunk, sizeof chunk), AL_OK);
    assert_int_equal(cast_output(c, START_US + 300000, "last", 4), AL_OK);
    struct cast_mark d;
    assert_int_equal(cast_sync(c, &d), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    assert_int_equal(d.time_us, 300000);
    /* Garble the 100th line's middle: not JSON any more. */
    size_t len;
    uint8_t *b = slurp(f->path, &len);
    assert_int_equal((int64_t)len, d.size);
    uint8_t *p = b;
    for (int i = 0; i < 100; i++) {
        p = memchr(p, '\n', len - (size_t)(p - b));
        assert_non_null(p);
        p++;
    }
    memcpy(p + 20, "\"]}{garbage", 11);
    spit(f->path, b, len);
    free(b);
    char err[256];
    char copy[160];
    (void)snprintf(copy, sizeof copy, "%s/copy.cast", f->dir);
    copy_file(f->path, copy);
    assert_int_equal(cast_open(copy, &h, AT_SIZE(d.size), &c, err, sizeof err), AL_E_FORMAT);
    assert_null(c);
    assert_non_null(strstr(err, "line 101: invalid JSON"));
    assert_int_equal(cast_open(f->path, &h, &d, &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_output(c, START_US + 300002, "more", 4), AL_OK);
    struct cast_mark after;
    assert_int_equal(cast_sync(c, &after), AL_OK);
    assert_int_equal(after.time_us, 300002);
    assert_int_equal(cast_close(c), AL_OK);
    b = slurp(f->path, &len);
    assert_int_equal((int64_t)len, after.size);
    assert_non_null(strstr((char *)b, "[0.100000,\"o\",\"last\"]\n[0.000002,\"o\",\"more\"]\n"));
    free(b);

    /* Bad last lines, each refused with a stored time. Also a valid event
     * longer than the writer's longest line: the full check takes it (a
     * reader's limit is CASTREAD_MAX_LINE), the bounded one does not look
     * further back than the writer's longest line. */
    size_t bn = 8 * CAST_EVENT_MAX_BYTES;
    char *big = malloc(bn + 32);
    assert_non_null(big);
    memcpy(big, "[0.5,\"o\",\"", 10);
    memset(big + 10, 'q', bn);
    memcpy(big + 10 + bn, "\"]", 3);
    static const struct {
        const char *last;
        const char *why;
    } bad[] = {
        {"[0.5,\"o\",\"abc\"", "invalid JSON"},
        {"[0.5,\"o\"]", "3-element array"},
        {"[-1,\"o\",\"abc\"]", "event time"},
        {"[0.5,\"r\",\"80by24\"]", "COLSxROWS"},
        {"[0.5,\"x\",\"zero\"]", "exit data"},
        {"# a comment", "comment"},
        {"", "empty line"},
        {"[0.5,\"o\",\"\xff\"]", "invalid JSON"},
    };
    const char *ok_line = "[0.25,\"o\",\"fine\"]";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *lines[] = {ok_line, bad[i].last};
        struct cast_mark m = {handmade(f->path, lines, 2), 750000, 0};
        c = NULL;
        assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
        assert_null(c);
        if (!strstr(err, bad[i].why) || !strstr(err, "line at byte"))
            fail_msg("case %zu: %s", i, err);
    }
    const char *lines[] = {ok_line, big};
    struct cast_mark m = {handmade(f->path, lines, 2), 750000, 0};
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "longer than"));
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(m.size), &c, err, sizeof err), AL_OK);
    struct cast_mark learnt;
    assert_int_equal(cast_sync(c, &learnt), AL_OK);
    assert_int_equal(learnt.time_us, 750000);
    assert_int_equal(cast_close(c), AL_OK);
    free(big);
    /* A torn last line (the prefix ends inside it). */
    const char *torn[] = {ok_line, "[0.5,\"o\",\"abcdef\"]"};
    m = (struct cast_mark){handmade(f->path, torn, 2) - 5, 750000, 0};
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_E_FORMAT);
    assert_non_null(strstr(err, "not at a line end"));
    /* The first event right after the header is the last: found. */
    const char *one[] = {ok_line};
    m = (struct cast_mark){handmade(f->path, one, 1), 250000, 0};
    assert_int_equal(cast_open(f->path, &h, &m, &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
}

/* ---- failures ------------------------------------------------------------- */

static void test_full_disk_dev_full(void **state)
{
    (void)state;
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        skip();
    struct cast_header h = hdr();
    struct cast *c = NULL;
    assert_int_equal(cast_open_fd(fd, &h, &c, NULL, 0), AL_OK);
    assert_int_equal(cast_output(c, START_US + 1, "hello", 5), AL_OK); /* buffered */
    assert_int_equal(cast_input(c, START_US + 2, "ab\xe2", 3), AL_OK);
    struct cast_mark d = {-1, -1, 1};
    assert_int_equal(cast_sync(c, &d), AL_E_IO);
    assert_int_equal(d.size, 0);
    assert_int_equal(d.time_us, 0);
    assert_false(d.exited);
    struct cast_status st;
    cast_status(c, &st);
    assert_int_equal(st.err, AL_E_IO);
    assert_int_equal(st.sys_errno, ENOSPC);
    assert_int_equal(st.durable_size, 0);
    assert_int_equal(st.lost_out, 5);
    assert_int_equal(st.lost_in, 3); /* including the byte held */
    assert_int_equal(st.lost_events, 2);
    /* Every later call fails the same way, fast, and counts what it lost. */
    struct timespec t0, t1;
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t0), 0);
    static uint8_t big[CAST_WBUF_SIZE * 4];
    for (int i = 0; i < 10000; i++)
        assert_int_equal(cast_output(c, START_US + 3, big, sizeof big), AL_E_IO);
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &t1), 0);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) < 500000000L);
    assert_int_equal(cast_input(c, START_US + 3, "q", 1), AL_E_IO);
    assert_int_equal(cast_resize(c, START_US + 3, 10, 10), AL_E_IO);
    assert_int_equal(cast_marker(c, START_US + 3, "m"), AL_E_IO);
    assert_int_equal(cast_exit(c, START_US + 3, 0), AL_E_IO);
    assert_int_equal(cast_sync(c, &d), AL_E_IO);
    assert_int_equal(d.size, 0);
    cast_status(c, &st);
    assert_int_equal(st.lost_out, 5 + 10000ULL * sizeof big);
    assert_int_equal(st.lost_in, 4);
    assert_int_equal(st.lost_events, 2 + 10000 + 4);
    assert_int_equal(cast_close(c), AL_E_IO);
}

/* The buffer fills while the disk is full: the event call itself fails. */
static void test_full_disk_on_buffer_flush(void **state)
{
    (void)state;
    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        skip();
    struct cast_header h = hdr();
    struct cast *c = NULL;
    assert_int_equal(cast_open_fd(fd, &h, &c, NULL, 0), AL_OK);
    uint8_t chunk[1000];
    memset(chunk, 'a', sizeof chunk);
    int rc = AL_OK;
    size_t sent = 0;
    for (int i = 0; i < 1000 && rc == AL_OK; i++) {
        rc = cast_output(c, START_US, chunk, sizeof chunk);
        sent += sizeof chunk;
    }
    assert_int_equal(rc, AL_E_IO);
    assert_true(sent <= 2 * CAST_WBUF_SIZE);
    struct cast_status st;
    cast_status(c, &st);
    assert_int_equal(st.sys_errno, ENOSPC);
    assert_int_equal(st.lost_out, sent);
    assert_int_equal(cast_close(c), AL_E_IO);
}

/* A real file that stops growing (RLIMIT_FSIZE, EFBIG) after a sync; the
 * durable size does not move, and resuming there once the limit is gone
 * gives a valid recording. */
static void test_write_error_then_resume(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)signal(SIGXFSZ, SIG_IGN);
        struct cast *c = NULL;
        struct cast_mark d = {0, 0, 0};
        if (cast_open(f->path, &h, NULL, &c, NULL, 0) != AL_OK ||
            cast_output(c, START_US + 1, "before\n", 7) != AL_OK || cast_sync(c, &d) != AL_OK)
            _exit(2);
        struct rlimit rl = {(rlim_t)d.size + 1000, (rlim_t)d.size + 1000};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(3);
        static uint8_t chunk[CAST_WBUF_SIZE];
        memset(chunk, 'z', sizeof chunk);
        int rc = cast_output(c, START_US + 2, chunk, sizeof chunk);
        if (rc == AL_OK)
            rc = cast_sync(c, NULL);
        struct cast_status st;
        cast_status(c, &st);
        struct cast_mark after = {0, 0, 0};
        int ok = rc == AL_E_IO && st.sys_errno == EFBIG && st.durable_size == d.size &&
                 cast_sync(c, &after) == AL_E_IO && after.size == d.size &&
                 after.time_us == d.time_us && st.lost_out == sizeof chunk &&
                 cast_sync(c, NULL) == AL_E_IO && cast_close(c) == AL_E_IO;
        if (write(pfd[1], &d, sizeof d) != (ssize_t)sizeof d)
            _exit(4);
        _exit(ok ? 0 : 5);
    }
    (void)close(pfd[1]);
    struct cast_mark d = {0, 0, 0};
    assert_int_equal(read(pfd[0], &d, sizeof d), (ssize_t)sizeof d);
    (void)close(pfd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(d.time_us, 1);
    struct stat sb;
    assert_int_equal(stat(f->path, &sb), 0);
    assert_int_equal(sb.st_size, d.size); /* the partial write was cut back */
    struct text whole = collect_file(f->path, CASTREAD_EV_OUTPUT); /* reads clean */
    assert_int_equal(whole.len, 7);
    free(whole.p);

    struct cast *c = NULL;
    char err[256];
    if (cast_open(f->path, &h, &d, &c, err, sizeof err) != AL_OK) /* with its stored time */
        fail_msg("resume: %s", err);
    assert_int_equal(cast_output(c, START_US + 3, "after", 5), AL_OK);
    assert_int_equal(cast_exit(c, START_US + 4, 0), AL_OK);
    assert_int_equal(cast_close(c), AL_OK);
    struct text t = collect_file(f->path, CASTREAD_EV_OUTPUT);
    assert_int_equal(t.len, 12);
    assert_memory_equal(t.p, "before\nafter", 12);
    free(t.p);
}

static void test_open_errors(void **state)
{
    struct fx *f = *state;
    struct cast_header h = hdr();
    struct cast *c = NULL;
    char err[256];
    struct stat sb;
    h.cols = 0;
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_INVAL);
    assert_int_equal(stat(f->path, &sb), -1); /* nothing left behind */
    h = hdr();
    h.title = "bad \xff";
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_INVAL);
    h = hdr();
    const char *dup[] = {"A=1", "A=2"};
    h.env = dup;
    h.n_env = 2;
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_INVAL);
    const char *noeq[] = {"A"};
    h.env = noeq;
    h.n_env = 1;
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_INVAL);
    h.n_env = CAST_MAX_ENV + 1;
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_TOOBIG);
    h = hdr();
    static char huge[CAST_WBUF_SIZE];
    memset(huge, 't', sizeof huge - 1);
    h.title = huge;
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_TOOBIG);
    assert_int_equal(stat(f->path, &sb), -1);
    /* An existing file is never replaced; a symlink is not followed. */
    h = hdr();
    c = create(f, &h);
    assert_int_equal(cast_close(c), AL_OK);
    assert_int_equal(cast_open(f->path, &h, NULL, &c, err, sizeof err), AL_E_EXISTS);
    char link[160];
    (void)snprintf(link, sizeof link, "%s/link.cast", f->dir);
    assert_int_equal(symlink(f->path, link), 0);
    assert_int_equal(cast_open(link, &h, NULL, &c, err, sizeof err), AL_E_EXISTS);
    struct cast_status st;
    int64_t size;
    {
        size_t n;
        uint8_t *b = slurp(f->path, &n);
        size = (int64_t)n;
        free(b);
    }
    assert_int_equal(cast_open(link, &h, AT_SIZE(size), &c, err, sizeof err), AL_E_PERM);
    assert_null(c);
    /* Event argument checks leave the writer usable. */
    assert_int_equal(cast_open(f->path, &h, AT_SIZE(size), &c, err, sizeof err), AL_OK);
    assert_int_equal(cast_resize(c, START_US, 0, 10), AL_E_INVAL);
    assert_int_equal(cast_resize(c, START_US, 10, 5000), AL_E_INVAL);
    static char label[CAST_MAX_LABEL + 2];
    memset(label, 'l', CAST_MAX_LABEL + 1);
    assert_int_equal(cast_marker(c, START_US, label), AL_E_TOOBIG);
    label[CAST_MAX_LABEL] = '\0';
    assert_int_equal(cast_marker(c, START_US, label), AL_OK);
    assert_int_equal(cast_output(c, START_US, NULL, 1), AL_E_INVAL);
    assert_int_equal(cast_output(c, START_US, NULL, 0), AL_OK);
    cast_status(c, &st);
    assert_int_equal(st.err, AL_OK);
    assert_int_equal(st.events, 1);
    assert_int_equal(cast_close(c), AL_OK);
    assert_int_equal(cast_open_fd(-1, &h, &c, err, sizeof err), AL_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_every_kind, setup, teardown),
        cmocka_unit_test(test_utf8_split_every_boundary),
        cmocka_unit_test_setup_teardown(test_utf8_split_through_writer, setup, teardown),
        cmocka_unit_test(test_invalid_bytes_become_fffd),
        cmocka_unit_test_setup_teardown(test_invalid_bytes_through_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_line_is_strict_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_intervals_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_chunk_split_and_buffer_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_equals_uninterrupted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_refuses_bad_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_reads_only_the_ends, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_dev_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_disk_on_buffer_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error_then_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
