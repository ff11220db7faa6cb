/*
 * Unit tests for castread: the strict asciicast v3/v2 reader (untrusted
 * input), from memory, from a file, from a pipe, and the prefix check the
 * writer resumes with. Round trips with the writer are in test_cast.c.
 *
 * Data model: a "file" is a memfd (struct memfile) opened again by its
 * /proc/self/fd path, so nothing is written to disk; the setup counts open
 * descriptors and the teardown checks that a test left none behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "al_err.h"
#include "castread.h"
#include "testutil.h"

#define H3 "{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}}\n"
#define H2 "{\"version\":2,\"width\":80,\"height\":24}\n"

static int setup(void **state)
{
    int *fds = malloc(sizeof *fds);
    assert_non_null(fds);
    *fds = tu_count_fds();
    *state = fds;
    return 0;
}

static int teardown(void **state)
{
    int *fds = *state;
    int leaked = tu_count_fds() != *fds;
    free(fds);
    assert_false(leaked); /* no descriptor left behind */
    return 0;
}

/* n bytes in an anonymous memory file, with a path that opens it again. */
struct memfile {
    int fd;
    char path[64];
};

static struct memfile memfile(const void *data, size_t n)
{
    struct memfile mf;
    mf.fd = memfd_create("castread-test", MFD_CLOEXEC);
    assert_true(mf.fd >= 0);
    const char *p = data;
    while (n > 0) {
        ssize_t w = write(mf.fd, p, n);
        assert_true(w > 0);
        p += w;
        n -= (size_t)w;
    }
    (void)snprintf(mf.path, sizeof mf.path, "/proc/self/fd/%d", mf.fd);
    return mf;
}

static void memfile_close(struct memfile *mf)
{
    assert_int_equal(close(mf->fd), 0);
}

static void test_reader_rejects_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        unsigned long line;
    } cases[] = {
        {"", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":24}", AL_E_FORMAT, 1},
        {"{\"version\":3,\"version\":3,\"term\":{\"cols\":80,\"rows\":24}}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":24,\"rows\":25}}\n", AL_E_FORMAT, 1},
        {"{\"version\":1,\"width\":80,\"height\":24}\n", AL_E_VERSION, 1},
        {"{\"version\":4,\"term\":{\"cols\":80,\"rows\":24}}\n", AL_E_VERSION, 1},
        {"{\"version\":\"3\",\"term\":{\"cols\":80,\"rows\":24}}\n", AL_E_FORMAT, 1},
        {"{\"version\":3}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":0,\"rows\":24}}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":5000}}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":24},\"title\":5}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":24},\"env\":{\"A\":1}}\n", AL_E_FORMAT, 1},
        {"{\"version\":3,\"term\":{\"cols\":80,\"rows\":24},\"timestamp\":-5}\n", AL_E_FORMAT, 1},
        {"[3]\n", AL_E_FORMAT, 1},
        {"# comment\n" H3, AL_E_FORMAT, 1},
        {H3 "[0.5,\"o\",\"a\"]\n[0.1,\"o\"\n", AL_E_FORMAT, 3},
        {H3 "[0.5,\"o\",\"a\",1]\n", AL_E_FORMAT, 2},
        {H3 "[0.5,\"o\"]\n", AL_E_FORMAT, 2},
        {H3 "{\"a\":1,\"a\":2}\n", AL_E_FORMAT, 2},
        {H3 "[-1,\"o\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[\"1\",\"o\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1e400,\"o\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[2000000000,\"o\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,5,\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"toolongcode\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o o\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"\\u0000\",\"a\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",5]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",null]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"80x\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"0x24\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"080x24\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"80x24 \"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"+80x24\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"r\",\"5000x24\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"x\",\"abc\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"x\",\"\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"x\",\"99999999999\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",\"a\"]\n\n", AL_E_FORMAT, 3},
        {H3 "[1,\"o\",\"a\"] x\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",\"\xff\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",\"\xed\xa0\x80\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",\"\\ud800\"]\n", AL_E_FORMAT, 2},
        {H3 "[1,\"o\",\"a\"]\n[2,\"o\",\"b\"]\n[3,\"o\",\"\"\n", AL_E_FORMAT, 4},
        {H2 "[2.0,\"o\",\"a\"]\n[1.0,\"o\",\"b\"]\n", AL_E_FORMAT, 3},
        {H2 "# comment\n", AL_E_FORMAT, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct castread *r = NULL;
        char err[CASTREAD_ERR_MAX] = "";
        char want[32];
        (void)snprintf(want, sizeof want, "line %lu: ", cases[i].line);
        int rc = castread_open_mem(cases[i].text, strlen(cases[i].text), &r, err, sizeof err);
        if (rc == AL_OK) {
            struct castread_event ev;
            while ((rc = castread_next(r, &ev)) == 1)
                ;
            if (rc == 0)
                fail_msg("case %zu accepted", i);
            assert_int_equal(castread_next(r, &ev), rc); /* sticky */
            assert_int_equal(castread_line(r), cases[i].line);
            (void)snprintf(err, sizeof err, "%s", castread_error(r));
            castread_close(r);
        } else {
            assert_null(r);
        }
        if (rc != cases[i].rc || strncmp(err, want, strlen(want)) != 0)
            fail_msg("case %zu: rc %d (%s), want %d at %s", i, rc, err, cases[i].rc, want);
    }
}

/* A line of exactly CASTREAD_MAX_LINE bytes is read; one more byte is not.
 * Through memory and through a file (whose buffer has to grow). */
static void test_reader_line_limit(void **state)
{
    (void)state;
    static const char pre[] = "[1,\"o\",\"";
    static const char post[] = "\"]";
    for (int extra = 0; extra <= 1; extra++) {
        size_t line = CASTREAD_MAX_LINE + (size_t)extra;
        size_t hl = strlen(H3);
        size_t total = hl + line + 1;
        char *b = malloc(total);
        assert_non_null(b);
        memcpy(b, H3, hl);
        memcpy(b + hl, pre, sizeof pre - 1);
        memset(b + hl + sizeof pre - 1, 'a', line - (sizeof pre - 1) - (sizeof post - 1));
        memcpy(b + hl + line - (sizeof post - 1), post, sizeof post - 1);
        b[total - 1] = '\n';
        struct memfile mf = memfile(b, total);
        for (int src = 0; src < 2; src++) {
            struct castread *r = NULL;
            char err[CASTREAD_ERR_MAX];
            int rc = src ? castread_open(mf.path, &r, err, sizeof err)
                         : castread_open_mem(b, total, &r, err, sizeof err);
            assert_int_equal(rc, AL_OK);
            struct castread_event ev;
            rc = castread_next(r, &ev);
            if (extra == 0) {
                assert_int_equal(rc, 1);
                assert_int_equal(ev.len, line - (sizeof pre - 1) - (sizeof post - 1));
                assert_int_equal(castread_next(r, &ev), 0);
            } else {
                assert_int_equal(rc, AL_E_TOOBIG);
                assert_string_equal(castread_error(r), "line 2: line longer than 1048576 bytes");
            }
            castread_close(r);
        }
        memfile_close(&mf);
        /* No newline anywhere in a huge header: refused without reading it all. */
        if (extra) {
            struct castread *r = NULL;
            memset(b, ' ', total);
            assert_int_equal(castread_open_mem(b, total, &r, NULL, 0), AL_E_TOOBIG);
        }
        free(b);
    }
}

static void test_reader_accepts_spec_examples(void **state)
{
    (void)state;
    /* The example of docs.asciinema.org/manual/asciicast/v3, verbatim. */
    static const char v3[] =
        "{\"version\": 3, \"term\": {\"cols\": 80, \"rows\": 24, \"type\": \"xterm-256color\"}, "
        "\"timestamp\": 1504467315, \"title\": \"Demo\", \"env\": {\"SHELL\": \"/bin/zsh\"}}\n"
        "# event stream follows the header\n"
        "[0.248, \"o\", \"\\u001b[1;31mHello \\u001b[32mWorld!\\u001b[0m\\n\"]\n"
        "[1.001, \"o\", \"That was ok\\rThis is better.\"]\n"
        "[3.500, \"m\", \"\"]\n"
        "[0.143, \"o\", \"Now... \"]\n"
        "# terminal window resized to 90 cols and 30 rows\n"
        "[2.050, \"r\", \"90x30\"]\n"
        "[1.541, \"o\", \"Bye!\"]\n"
        "[0.887, \"x\", \"0\"]\n";
    static const int64_t t3[] = {248000, 1249000, 4749000, 4892000, 6942000, 8483000, 9370000};
    static const enum castread_kind k3[] = {
        CASTREAD_EV_OUTPUT, CASTREAD_EV_OUTPUT, CASTREAD_EV_MARKER, CASTREAD_EV_OUTPUT,
        CASTREAD_EV_RESIZE, CASTREAD_EV_OUTPUT, CASTREAD_EV_EXIT};
    /* The v2 example of docs.asciinema.org/manual/asciicast/v2 (absolute
     * times), with an unknown code, CRLF and no final newline. */
    static const char v2[] =
        "{\"version\": 2, \"width\": 80, \"height\": 24, \"timestamp\": 1504467315, \"title\": "
        "\"Demo\", \"env\": {\"TERM\": \"xterm-256color\", \"SHELL\": \"/bin/zsh\"}, "
        "\"theme\": {\"fg\": \"#d0d0d0\"}}\n"
        "[0.248848, \"o\", \"\\u001b[1;31mHello \\u001b[32mWorld!\\u001b[0m\\n\"]\r\n"
        "[1.001376, \"o\", \"That was ok\\rThis is better.\"]\n"
        "[1.500000, \"m\", \"\"]\n"
        "[2.143733, \"o\", \"Now... \"]\n"
        "[3.000000, \"zz\", \"future\"]\n"
        "[4.050000, \"r\", \"80x24\"]\n"
        "[6.541828, \"o\", \"Bye!\"]";
    static const int64_t t2[] = {248848, 1001376, 1500000, 2143733, 3000000, 4050000, 6541828};
    static const enum castread_kind k2[] = {
        CASTREAD_EV_OUTPUT, CASTREAD_EV_OUTPUT, CASTREAD_EV_MARKER, CASTREAD_EV_OUTPUT,
        CASTREAD_EV_OTHER,  CASTREAD_EV_RESIZE, CASTREAD_EV_OUTPUT};
    for (int v = 0; v < 2; v++) {
        const char *text = v ? v2 : v3;
        const int64_t *t = v ? t2 : t3;
        const enum castread_kind *k = v ? k2 : k3;
        struct memfile mf = memfile(text, strlen(text));
        for (int src = 0; src < 2; src++) {
            struct castread *r = NULL;
            char err[CASTREAD_ERR_MAX];
            int rc = src ? castread_open(mf.path, &r, err, sizeof err)
                         : castread_open_mem(text, strlen(text), &r, err, sizeof err);
            if (rc != AL_OK)
                fail_msg("%s", err);
            const struct castread_info *in = castread_info(r);
            assert_int_equal(in->version, v ? 2 : 3);
            assert_int_equal(in->cols, 80);
            assert_int_equal(in->timestamp, 1504467315);
            assert_string_equal(in->title, "Demo");
            assert_int_equal(in->idle_time_limit_us, -1);
            struct castread_event ev;
            for (int i = 0; i < 7; i++) {
                assert_int_equal(castread_next(r, &ev), 1);
                assert_int_equal(ev.time_us, t[i]);
                assert_int_equal(ev.kind, k[i]);
            }
            if (v) {
                assert_string_equal(ev.code, "o");
                assert_memory_equal(ev.data, "Bye!", 4);
            } else {
                assert_int_equal(ev.status, 0);
            }
            assert_int_equal(castread_next(r, &ev), 0);
            castread_close(r);
        }
        memfile_close(&mf);
    }
}

/* A pipe will do as a file (`airlock replay /dev/stdin`). */
static void test_reader_from_pipe(void **state)
{
    (void)state;
    static const char text[] = H3 "[0.5,\"o\",\"a\"]\n[0.25,\"x\",\"3\"]\n";
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(write(pfd[1], text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    assert_int_equal(close(pfd[1]), 0);
    char path[64];
    (void)snprintf(path, sizeof path, "/proc/self/fd/%d", pfd[0]);
    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    if (castread_open(path, &r, err, sizeof err) != AL_OK)
        fail_msg("%s", err);
    struct castread_event ev;
    assert_int_equal(castread_next(r, &ev), 1);
    assert_int_equal(ev.time_us, 500000);
    assert_int_equal(castread_next(r, &ev), 1);
    assert_int_equal(ev.time_us, 750000);
    assert_int_equal(ev.status, 3);
    assert_int_equal(castread_next(r, &ev), 0);
    castread_close(r);
    assert_int_equal(close(pfd[0]), 0);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct castread *r = NULL;
    char err[CASTREAD_ERR_MAX];
    assert_int_equal(castread_open("/nonexistent/x.cast", &r, err, sizeof err), AL_E_NOENT);
    assert_null(r);
    assert_string_equal(err, "/nonexistent/x.cast: No such file or directory");
    assert_int_equal(castread_open(NULL, &r, err, sizeof err), AL_E_INVAL);
    assert_int_equal(castread_open_mem(NULL, 1, &r, err, sizeof err), AL_E_INVAL);
    assert_null(r);
    /* A header error is reported on line 1, with no reader handed out. */
    assert_int_equal(castread_open_mem("{}\n", 3, &r, err, sizeof err), AL_E_FORMAT);
    assert_null(r);
    assert_string_equal(err, "line 1: header has no integer \"version\"");
    /* Calls on no reader are harmless. */
    assert_null(castread_info(NULL));
    assert_string_equal(castread_error(NULL), "");
    assert_int_equal(castread_line(NULL), 0);
    castread_close(NULL);
}

/* castread_prefix: only the first limit bytes count, they must end at a
 * line end, the version must be the one asked for. */
static void test_prefix(void **state)
{
    (void)state;
    static const char text[] = H3 "[0.5,\"o\",\"a\"]\n[0.25,\"x\",\"3\"]\n[1,\"o\",\"b\"]\n";
    const int64_t l1 = (int64_t)strlen(H3), l2 = l1 + 14, l3 = l2 + 15;
    struct memfile mf = memfile(text, sizeof text - 1);
    struct {
        int64_t limit;
        int version, rc;
        int64_t last_us;
        int exited;
    } cases[] = {
        {l1, 3, AL_OK, 0, 0},                             /* the header alone */
        {l2, 3, AL_OK, 500000, 0},                        /* one event */
        {l3, 3, AL_OK, 750000, 1},                        /* up to the exit */
        {(int64_t)sizeof text - 1, 3, AL_OK, 1750000, 1}, /* all of it */
        {l2 - 1, 3, AL_E_FORMAT, 0, 0},                   /* an event without its newline */
        {l1 - 1, 3, AL_E_FORMAT, 0, 0},                   /* the header without its newline */
        {0, 3, AL_E_FORMAT, 0, 0},                        /* nothing at all */
        {l2, 2, AL_E_VERSION, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int fd = dup(mf.fd);
        assert_true(fd >= 0);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        int64_t last = -1;
        int exited = -1;
        char err[CASTREAD_ERR_MAX] = "";
        int rc =
            castread_prefix(fd, cases[i].limit, cases[i].version, &last, &exited, err, sizeof err);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d (%s), want %d", i, rc, err, cases[i].rc);
        if (rc == AL_OK) {
            assert_int_equal(last, cases[i].last_us);
            assert_int_equal(exited, cases[i].exited);
        } else {
            assert_int_equal(strncmp(err, "line ", 5), 0);
        }
        /* Only the limit was read, and fd stays the caller's. */
        off_t at = lseek(fd, 0, SEEK_CUR);
        assert_true(at <= cases[i].limit);
        assert_int_equal(close(fd), 0);
    }
    int64_t last;
    int exited;
    assert_int_equal(castread_prefix(-1, 10, 3, &last, &exited, NULL, 0), AL_E_INVAL);
    assert_int_equal(castread_prefix(mf.fd, -1, 3, &last, &exited, NULL, 0), AL_E_INVAL);
    memfile_close(&mf);
}

/* The bounded check: the header and the last line, whatever lies between
 * (the middle line here is not JSON); max_line bounds how far back the
 * last line's start is looked for. */
static void test_prefix_tail(void **state)
{
    (void)state;
    static const char text[] =
        H3 "[0.5,\"o\",\"a\"]\nnot json at all\n[0.25,\"x\",\"3\"]\n[1,\"o\",\"b\"]\n";
    const int64_t l1 = (int64_t)strlen(H3), l2 = l1 + 14, l3 = l2 + 16, l4 = l3 + 15;
    struct memfile mf = memfile(text, sizeof text - 1);
    struct {
        int64_t limit;
        int version;
        size_t max_line;
        int rc;
        int64_t last_us;
        int last_exit;
    } cases[] = {
        {l1, 3, 64, AL_OK, -1, 0},     /* the header alone */
        {l2, 3, 64, AL_OK, 500000, 0}, /* one event */
        {l4, 3, 64, AL_OK, 250000, 1}, /* the exit (the garbage before is not read) */
        {l4 + 12, 3, 64, AL_OK, 1000000, 0},
        {l4 + 12, 3, 12, AL_OK, 1000000, 0}, /* a line of exactly max_line bytes */
        {l4 + 12, 3, 11, AL_E_FORMAT, 0, 0}, /* one more than max_line */
        {l3, 3, 64, AL_E_FORMAT, 0, 0},      /* the garbage is the last line */
        {l2 - 1, 3, 64, AL_E_FORMAT, 0, 0},  /* not at a line end */
        {l1 - 1, 3, 64, AL_E_FORMAT, 0, 0},  /* inside the header */
        {0, 3, 64, AL_E_FORMAT, 0, 0},       /* nothing at all */
        {l4 + 13, 3, 64, AL_E_FORMAT, 0, 0}, /* beyond the file */
        {l2, 2, 64, AL_E_VERSION, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t last = -2;
        int x = -1;
        char err[CASTREAD_ERR_MAX] = "";
        int rc = castread_prefix_tail(mf.fd, cases[i].limit, cases[i].version, cases[i].max_line,
                                      &last, &x, err, sizeof err);
        if (rc != cases[i].rc)
            fail_msg("case %zu: rc %d (%s), want %d", i, rc, err, cases[i].rc);
        if (rc == AL_OK) {
            assert_int_equal(last, cases[i].last_us);
            assert_int_equal(x, cases[i].last_exit);
        } else {
            assert_int_equal(strncmp(err, "line ", 5), 0);
        }
    }
    int64_t last;
    int x;
    assert_int_equal(castread_prefix_tail(-1, 10, 3, 64, &last, &x, NULL, 0), AL_E_INVAL);
    assert_int_equal(castread_prefix_tail(mf.fd, -1, 3, 64, &last, &x, NULL, 0), AL_E_INVAL);
    assert_int_equal(castread_prefix_tail(mf.fd, l2, 3, 1, &last, &x, NULL, 0), AL_E_INVAL);
    assert_int_equal(
        castread_prefix_tail(mf.fd, l2, 3, (size_t)CASTREAD_MAX_LINE + 1, &last, &x, NULL, 0),
        AL_E_INVAL);
    memfile_close(&mf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reader_rejects_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_line_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_accepts_spec_examples, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reader_from_pipe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_prefix_tail, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
