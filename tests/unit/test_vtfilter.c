/*
 * Tests of the sanitizing filter in front of libvterm (src/runner/vtfilter.c).
 *
 * A recorder collects the units the filter hands on (kind and bytes). The
 * tests check each neutralised libvterm 0.1.4 bug (REP, CSI separators,
 * UTF-8 encoded C1, DECRQSS), the string bounds, UTF-8 repair, that the stream stays
 * in sync after anything dropped, that any split of the input gives the
 * same units as one-shot feeding, invariants of the output over random
 * bytes, and that the filter's width table is exactly libvterm's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <vterm.h>

#include "al_err.h"
#include "testutil.h"
#include "vtfilter.h"

#define REC_MAX (1u << 20) /* bytes a recorder keeps */
#define RANDOM_RUNS 300    /* random inputs for the invariants */

struct rec {
    uint8_t bytes[REC_MAX]; /* every unit's bytes, concatenated */
    size_t len;
    char kinds[REC_MAX / 4]; /* one letter per unit: T C E S O */
    size_t nunits;
    int fail_at; /* return AL_E_NOMEM from this unit on (-1: never) */
};

static int rec_emit(void *ud, const struct vtf_unit *u)
{
    struct rec *r = ud;
    if (r->fail_at >= 0 && (int)r->nunits >= r->fail_at)
        return AL_E_NOMEM;
    assert_true(u->len > 0);
    assert_true(r->len + u->len <= sizeof r->bytes);
    memcpy(r->bytes + r->len, u->bytes, u->len);
    r->len += u->len;
    static const char letter[] = "?TCESO";
    assert_true(r->nunits < sizeof r->kinds - 1);
    r->kinds[r->nunits++] = letter[u->kind];
    r->kinds[r->nunits] = 0;
    if (u->kind == VTF_CSI || u->kind == VTF_ESC)
        assert_non_null(u->seq);
    else
        assert_null(u->seq);
    return 0;
}

static struct rec *rec_new(void)
{
    struct rec *r = calloc(1, sizeof *r);
    assert_non_null(r);
    r->fail_at = -1;
    return r;
}

static struct vtf *filter_new(struct rec *r)
{
    struct vtf *f = NULL;
    assert_int_equal(vtf_new(rec_emit, r, &f), AL_OK);
    return f;
}

/* Filters s in one call; returns the recorder (caller frees). */
static struct rec *run(const char *s, size_t n, struct vtf_stats *st)
{
    struct rec *r = rec_new();
    struct vtf *f = filter_new(r);
    assert_int_equal(vtf_feed(f, (const uint8_t *)s, n), AL_OK);
    if (st)
        vtf_get_stats(f, st);
    vtf_free(f);
    return r;
}

#define RUN(lit, st) run((lit), sizeof(lit) - 1, (st))

static void expect_out(struct rec *r, const char *want, const char *kinds)
{
    size_t n = strlen(want);
    if (r->len != n || memcmp(r->bytes, want, n) != 0) {
        fprintf(stderr, "got %zu bytes: ", r->len);
        for (size_t i = 0; i < r->len; i++)
            fprintf(stderr, r->bytes[i] >= 0x20 && r->bytes[i] < 0x7f ? "%c" : "\\x%02x",
                    r->bytes[i]);
        fprintf(stderr, "\n");
        fail();
    }
    if (kinds)
        assert_string_equal(r->kinds, kinds);
}

static void test_new_invalid(void **state)
{
    (void)state;
    struct vtf *f = (struct vtf *)1;
    assert_int_equal(vtf_new(NULL, NULL, &f), AL_E_INVAL);
    assert_int_equal(vtf_new(rec_emit, NULL, NULL), AL_E_INVAL);
    struct rec *r = rec_new();
    f = filter_new(r);
    assert_int_equal(vtf_feed(NULL, (const uint8_t *)"x", 1), AL_E_INVAL);
    assert_int_equal(vtf_feed(f, NULL, 1), AL_E_INVAL);
    assert_int_equal(vtf_feed(f, NULL, 0), AL_OK);
    vtf_free(f);
    vtf_free(NULL);
    free(r);
}

static void test_plain_passes(void **state)
{
    (void)state;
    struct rec *r = RUN("hello \033[1;31mred\033[0m\r\n\033]0;t\007\033(0q\033(B", NULL);
    expect_out(r, "hello \033[1;31mred\033[0m\r\n\033]0;t\033\\\033(0q\033(B", "TSTSCOETE");
    free(r);
    /* CR LF together is one control unit; CR or LF alone, one each */
    r = RUN("a\r\rb\n\r\n\n\r", NULL);
    expect_out(r, "a\r\rb\n\r\n\n\r", "TCCTCCCC");
    free(r);
}

/* REP is never handed on: the filter repeats the last base character. */
static void test_rep(void **state)
{
    (void)state;
    struct vtf_stats st;
    struct rec *r = RUN("ab\033[3b|", &st);
    expect_out(r, "abbbb|", "T");
    assert_int_equal(st.rep_expanded, 1);
    free(r);

    r = RUN("\033[b\033[3bx", &st); /* nothing to repeat yet */
    expect_out(r, "x", "T");
    assert_int_equal(st.rep_dropped, 2);
    free(r);

    r = RUN("\342\200\213\033[5b", &st); /* ZWSP is zero-width: not a base */
    expect_out(r, "\342\200\213", "T");
    assert_int_equal(st.rep_dropped, 1);
    free(r);

    r = RUN("e\314\201\033[2b", &st); /* repeats the base, not the mark */
    expect_out(r, "e\314\201ee", "T");
    free(r);

    r = RUN("\344\270\226\033[b", &st);
    expect_out(r, "\344\270\226\344\270\226", "T");
    free(r);

    r = RUN("x\033[99999999b", &st); /* capped */
    assert_int_equal(r->len, 1 + VTF_MAX_REP);
    free(r);

    r = RUN("x\033[?2b\033[2$b\033c\033[2b", &st); /* not plain REP; RIS forgets */
    expect_out(r, "x\033c", "TE");
    assert_int_equal(st.rep_dropped, 3);
    free(r);
}

static void test_csi_separators(void **state)
{
    (void)state;
    char in[256], want[256];
    /* 15 separators pass (libvterm's array holds 16 arguments)... */
    snprintf(in, sizeof in, "\033[%s1m", ";;;;;;;;;;;;;;;");
    struct vtf_stats st;
    struct rec *r = run(in, strlen(in), &st);
    expect_out(r, in, "S");
    free(r);
    /* ...16 and more are dropped, and what follows still arrives. */
    for (int n = 16; n < 200; n += 23) {
        size_t k = 0;
        k += (size_t)snprintf(in + k, sizeof in - k, "\033[");
        for (int i = 0; i < n; i++)
            in[k++] = i % 3 ? ';' : ':';
        k += (size_t)snprintf(in + k, sizeof in - k, "38mok");
        r = run(in, k, &st);
        expect_out(r, "ok", "T");
        assert_int_equal(st.csi_dropped, 1);
        free(r);
    }
    /* Sub-parameters keep their colons. */
    r = RUN("\033[4:3;38:2::1:2:3m", NULL);
    expect_out(r, "\033[4:3;38:2::1:2:3m", "S");
    free(r);
    (void)want;
}

/* A CSI is handed on as it came when that is its canonical form, and
 * rebuilt when not (a leading zero, a DEL or a control inside, a clamped
 * parameter), whole or fed a byte at a time. */
static void test_csi_canonical(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out, *kinds;
    } cases[] = {
        {"\033[007;0;00m", "\033[7;0;0m", "S"},
        {"\033[1\1772m", "\033[12m", "S"},
        {"\033[1\n;2H", "\n\033[1;2H", "CS"},
        {"\033[?25h\033[;5H\033[38:2::1:2:3m", "\033[?25h\033[;5H\033[38:2::1:2:3m", "SSS"},
        {"\033[0m\033[10;20r\033[>1c", "\033[0m\033[10;20r\033[>1c", "SSS"},
        {"\033[65535;065535;70000X", "\033[65535;65535;65535X", "S"},
        {"\033[1 q\033[!p\033[2$p", "\033[1 q\033[!p\033[2$p", "SSS"},
        /* an SGR's trailing bare 38 or 48 goes (libvterm would read stale
         * arguments); 38 and 48 as a colour's values stay */
        {"\033[1;38m\033[;48m\033[38m", "\033[1m\033[m", "SS"},
        {"\033[4;38;48mx\033[4;48;38m", "\033[4;38;48mx\033[4;48;38m",
         "STS"}, /* palettes 48 and 38 */
        {"\033[38;5;38m\033[48;2;1;2;48m\033[38;7;48m", "\033[38;5;38m\033[48;2;1;2;48m\033[38;7m",
         "SSS"},
        {"\033[38:5m\033[?38m", "\033[38:5m\033[?38m", "SS"},
        /* with sub-parameters before it, a bare 38 is still bare; as one's
         * sub-parameter (4:38) it is not */
        {"\033[4:3;38m\033[4:38m\033[38:5:1;48m", "\033[4:3m\033[4:38m\033[38:5:1m", "SSS"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rec *r = run(cases[i].in, strlen(cases[i].in), NULL);
        expect_out(r, cases[i].out, cases[i].kinds);
        free(r);
        r = rec_new();
        struct vtf *f = filter_new(r);
        for (const char *c = cases[i].in; *c; c++)
            assert_int_equal(vtf_feed(f, (const uint8_t *)c, 1), AL_OK);
        vtf_free(f);
        expect_out(r, cases[i].out, cases[i].kinds);
        free(r);
    }
}

static void test_csi_limits(void **state)
{
    (void)state;
    struct vtf_stats st;
    char in[VTF_MAX_CSI_LEN + 32];
    /* A CSI longer than VTF_MAX_CSI_LEN (made of intermediates-free digits). */
    size_t k = 0;
    in[k++] = 0x1b;
    in[k++] = '[';
    while (k < VTF_MAX_CSI_LEN + 4)
        in[k++] = '0';
    memcpy(in + k, "Hok", 3);
    k += 3;
    struct rec *r = run(in, k, &st);
    expect_out(r, "ok", "T");
    assert_int_equal(st.csi_dropped, 1);
    free(r);

    r = RUN("\033[99999999999999999999;0070000;65535;65536H", &st); /* clamped */
    expect_out(r, "\033[65535;65535;65535;65535H", "S");
    assert_int_equal(st.params_clamped, 3);
    free(r);

    /* Malformed: parameter after intermediate, leader not first, too many
     * intermediates, high byte inside: each dropped, stream in sync. */
    r = RUN("\033[1$2pA\033[1?hB\033[1$$$pC\033[1\303\251D", &st);
    expect_out(r, "ABC\303\251D", "T");
    assert_int_equal(st.csi_dropped, 4);
    free(r);

    /* C0 controls inside a CSI run at once; ESC and CAN abort it. */
    r = RUN("\033[1\n2H\033[3\033[4m\033[5\030x", &st);
    expect_out(r, "\n\033[12H\033[4mx", "CSST");
    free(r);
}

static void test_c1_and_utf8(void **state)
{
    (void)state;
    struct vtf_stats st;
    /* UTF-8 encoded C1 (U+0080..U+009F) dropped; U+00A0 kept. */
    struct rec *r = RUN("\302\215\033[K\302\233\302\237a\302\240", &st);
    expect_out(r, "\033[Ka\302\240", "ST");
    assert_int_equal(st.c1_dropped, 3);
    free(r);

    /* Invalid UTF-8 becomes U+FFFD: stray continuation, overlong, surrogate,
     * above U+10FFFF, truncated before ASCII, raw C1 byte, FE/FF. */
    r = RUN("\x80|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe4\xb8"
            "A|\x9b|\xfe\xff",
            &st);
    const char *want = "\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
                       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd"
                       "A|\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd";
    expect_out(r, want, "T");
    free(r);

    /* U+FFFE and U+FFFF (libvterm refuses them) become U+FFFD. */
    r = RUN("\xef\xbf\xbe\xef\xbf\xbf", NULL);
    expect_out(r, "\xef\xbf\xbd\xef\xbf\xbd", "T");
    free(r);

    /* A partial sequence waits for the next call. */
    r = rec_new();
    struct vtf *f = filter_new(r);
    assert_int_equal(vtf_feed(f, (const uint8_t *)"a\xe4", 2), AL_OK);
    expect_out(r, "a", "T");
    assert_int_equal(vtf_feed(f, (const uint8_t *)"\xb8\x96", 2), AL_OK);
    expect_out(r, "a\xe4\xb8\x96", "TT");
    vtf_free(f);
    free(r);
}

static void test_combining_limit(void **state)
{
    (void)state;
    char in[256] = "e";
    size_t k = 1;
    for (int i = 0; i < 20; i++) {
        memcpy(in + k, "\314\201", 2);
        k += 2;
    }
    in[k++] = 'x';
    struct vtf_stats st;
    struct rec *r = run(in, k, &st);
    assert_int_equal(r->len, 1 + 2 * VTF_MAX_COMBINING + 1);
    assert_int_equal(st.combining_dropped, 20 - VTF_MAX_COMBINING);
    free(r);
}

static void test_strings(void **state)
{
    (void)state;
    struct vtf_stats st;
    /* OSC by BEL or ST; DCS, SOS, PM, APC dropped; C0 inside ignored. */
    struct rec *r =
        RUN("\033]2;a\tb\007\033P$qm\033\\\033_apc\033\\\033^pm\033\\\033Xsos\033\\x", &st);
    expect_out(r, "\033]2;ab\033\\x", "OT");
    assert_int_equal(st.strings_dropped, 4);
    free(r);

    /* ESC inside a string aborts it and starts a sequence; CAN aborts. */
    r = RUN("\033]2;abc\033[1mX\033]2;def\030Y", &st);
    expect_out(r, "\033[1mXY", "ST");
    assert_int_equal(st.strings_dropped, 2);
    free(r);

    /* At the limit passes; one byte more is dropped whole; in sync after. */
    static char big[VTF_MAX_STRING + 16];
    memcpy(big, "\033]2;", 4);
    memset(big + 4, 'a', VTF_MAX_STRING - 2);
    memcpy(big + VTF_MAX_STRING + 2, "\007z", 2);
    r = run(big, VTF_MAX_STRING + 4, &st);
    assert_int_equal(r->len, 2 + VTF_MAX_STRING + 2 + 1);
    assert_string_equal(r->kinds, "OT");
    free(r);
    memset(big + 4, 'a', VTF_MAX_STRING - 1);
    memcpy(big + VTF_MAX_STRING + 3, "\007z", 2);
    r = run(big, VTF_MAX_STRING + 5, &st);
    expect_out(r, "z", "T");
    assert_int_equal(st.strings_dropped, 1);
    free(r);

    /* A BEL in a DCS is not its end; an unknown DECRQSS never reaches
     * libvterm (it would format its answer from the wrong argument). */
    r = RUN("\033Pq\007r\033\\s\033P$q?\033\\", NULL);
    expect_out(r, "s", "T");
    free(r);
}

static void test_esc(void **state)
{
    (void)state;
    struct vtf_stats st;
    /* Intermediates pass; libvterm would start a CSI or string on these
     * finals even after an intermediate, so they are dropped. */
    struct rec *r = RUN("\033#8\033(0\033 F\033(P\033([a\033((((0\033\\b\033\303\251", &st);
    expect_out(r, "\033#8\033(0\033 Fab\303\251", "EEET");
    assert_int_equal(st.esc_dropped, 4);
    free(r);
}

static void test_emit_error(void **state)
{
    (void)state;
    struct rec *r = rec_new();
    r->fail_at = 1;
    struct vtf *f = filter_new(r);
    assert_int_equal(vtf_feed(f, (const uint8_t *)"ab\033[1mcd", 8), AL_E_NOMEM);
    /* The filter stays usable. */
    r->fail_at = -1;
    assert_int_equal(vtf_feed(f, (const uint8_t *)"\033[2mz", 5), AL_OK);
    assert_int_equal(r->kinds[r->nunits - 1], 'T');
    vtf_free(f);
    free(r);
}

static void test_narrow(void **state)
{
    (void)state;
    struct rec *r = rec_new();
    struct vtf *f = filter_new(r);
    vtf_set_narrow(f, 1);
    assert_int_equal(vtf_feed(f,
                              (const uint8_t *)"\xe4\xb8\x96"
                                               "a",
                              4),
                     AL_OK);
    expect_out(r,
               "\xef\xbf\xbd"
               "a",
               "T");
    vtf_set_narrow(f, 0);
    vtf_reset(f);
    assert_int_equal(vtf_feed(f, (const uint8_t *)"\xe4\xb8\x96", 3), AL_OK);
    vtf_free(f);
    free(r);
}

static const char split_input[] =
    "plain \033[1;38;2;1;2;3mtrue\033[m \xe4\xb8\x96\xcc\x81 \033]0;title \xc3\xa9\007"
    "\033P$qm\033\\\033_drop\033\\ab\033[3b\302\215\033[;;;;;;;;;;;;;;;;;;mx\033(0q\033[?1049h"
    "\xf0\x9f\x98\x80\xed\xa0\x80\033[1\n2H\033]2;\033[1m\033[99999C";

/* Any split of the input gives the same units' bytes as one call. */
static void test_split_every_byte(void **state)
{
    (void)state;
    size_t n = sizeof split_input - 1;
    struct rec *whole = run(split_input, n, NULL);
    struct rec *r = rec_new();
    struct vtf *f = filter_new(r);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(vtf_feed(f, (const uint8_t *)split_input + i, 1), AL_OK);
    vtf_free(f);
    assert_int_equal(r->len, whole->len);
    assert_memory_equal(r->bytes, whole->bytes, whole->len);
    free(r);
    for (size_t cut = 1; cut < n; cut++) {
        r = rec_new();
        f = filter_new(r);
        assert_int_equal(vtf_feed(f, (const uint8_t *)split_input, cut), AL_OK);
        assert_int_equal(vtf_feed(f, (const uint8_t *)split_input + cut, n - cut), AL_OK);
        vtf_free(f);
        assert_int_equal(r->len, whole->len);
        assert_memory_equal(r->bytes, whole->bytes, whole->len);
        free(r);
    }
    free(whole);
}

/* kinds with each run of text units ('T') or controls ('C': CR LF is one
 * unit or two) as one, into out (cap). */
static void squeeze_text(const char *kinds, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *k = kinds; *k && n + 1 < cap; k++)
        if (!((*k == 'T' || *k == 'C') && n > 0 && out[n - 1] == *k))
            out[n++] = *k;
    out[n] = 0;
}

/* Printable runs of every length up to 40 ended by each byte at the edges
 * of the word scan's range (ascii_run takes eight bytes at a time): the
 * units are those of the same bytes fed one at a time, which never reach
 * the word scan. */
static void test_printable_runs(void **state)
{
    (void)state;
    static const char *const enders[] = {"\x00",     "\x1f",   "\x7f", "\x80",     "\xff",
                                         "\xc3\xa9", "\033[m", "\r\n", "\x7e\xff", "\xff\x7e"};
    static const char edge[] = " ~!}0Az"; /* 0x20, 0x7e and between */
    char in[128];
    for (size_t e = 0; e < sizeof enders / sizeof enders[0]; e++) {
        for (size_t len = 0; len <= 40; len++) {
            size_t n = 0;
            for (size_t i = 0; i < len; i++)
                in[n++] = edge[(i * 5 + len) % (sizeof edge - 1)];
            size_t el = strlen(enders[e]) ? strlen(enders[e]) : 1; /* "\x00" is one byte */
            memcpy(in + n, enders[e], el);
            n += el;
            memcpy(in + n, "tail text", 9);
            n += 9;
            struct rec *whole = run(in, n, NULL);
            struct rec *r = rec_new();
            struct vtf *f = filter_new(r);
            for (size_t i = 0; i < n; i++)
                assert_int_equal(vtf_feed(f, (const uint8_t *)in + i, 1), AL_OK);
            vtf_free(f);
            assert_int_equal(r->len, whole->len);
            assert_memory_equal(r->bytes, whole->bytes, whole->len);
            char a[64], b[64]; /* the kinds, a run of units of one kind as one */
            squeeze_text(whole->kinds, a, sizeof a);
            squeeze_text(r->kinds, b, sizeof b);
            assert_string_equal(a, b);
            free(r);
            free(whole);
        }
    }
}

/* Units the filter hands on, re-parsed: no REP, at most VTF_MAX_CSI_SEPS
 * separators, no C1 code point, valid UTF-8, bounded strings, text marked
 * ASCII or narrow only when it is, a control alone or CR LF. */
static int check_unit(void *ud, const struct vtf_unit *u)
{
    (void)ud;
    const uint8_t *b = u->bytes;
    switch (u->kind) {
    case VTF_TEXT:
        for (size_t i = 0; u->ascii && i < u->len; i++) /* the flag the fast path trusts */
            assert_true(b[i] >= 0x20 && b[i] <= 0x7e);
        for (size_t i = 0; i < u->len;) {
            uint32_t cp;
            size_t k;
            if (b[i] < 0x80) {
                cp = b[i];
                k = 1;
            } else if (b[i] >= 0xc2 && b[i] <= 0xdf) {
                cp = b[i] & 0x1fu;
                k = 2;
            } else if (b[i] >= 0xe0 && b[i] <= 0xef) {
                cp = b[i] & 0x0fu;
                k = 3;
            } else {
                assert_true(b[i] >= 0xf0 && b[i] <= 0xf4);
                cp = b[i] & 0x07u;
                k = 4;
            }
            assert_true(i + k <= u->len);
            for (size_t j = 1; j < k; j++) {
                assert_int_equal(b[i + j] & 0xc0, 0x80);
                cp = (cp << 6) | (b[i + j] & 0x3fu);
            }
            assert_true(vtf_cp_width(cp) >= 0); /* no controls, C1, surrogates */
            if (u->narrow)                      /* the flag the fast path trusts to count glyphs */
                assert_int_equal(vtf_cp_width(cp), 1);
            uint8_t enc[4];
            assert_int_equal(vtf_utf8_encode(cp, enc), k); /* shortest form */
            i += k;
        }
        break;
    case VTF_CTRL:
        if (u->len == 2) { /* CR LF, together */
            assert_int_equal(b[0], '\r');
            assert_int_equal(b[1], '\n');
            break;
        }
        assert_int_equal(u->len, 1);
        assert_true(b[0] < 0x20 && b[0] != 0x1b && b[0] != 0 && b[0] != 0x18 && b[0] != 0x1a);
        break;
    case VTF_CSI: {
        int seps = 0;
        for (size_t i = 2; i + 1 < u->len; i++)
            if (b[i] == ';' || b[i] == ':')
                seps++;
        assert_true(seps <= VTF_MAX_CSI_SEPS);
        assert_true(u->len <= 2 + VTF_MAX_CSI_LEN);
        assert_true(b[u->len - 1] != 'b');
        assert_true(b[u->len - 1] >= 0x40 && b[u->len - 1] <= 0x7e);
        break;
    }
    case VTF_OSC:
        assert_true(u->len <= 2 + VTF_MAX_STRING + 2);
        for (size_t i = 2; i + 2 < u->len; i++)
            assert_true(b[i] >= 0x20 && b[i] != 0x7f);
        break;
    default:
        break;
    }
    return 0;
}

/* What a cut stream is in the middle of, as bytes (vtf_pending): one case a
 * row, a table. */
static void test_pending(void **state)
{
    (void)state;
    static const struct {
        const char *fed, *pending;
    } cases[] = {
        {"plain text", ""},
        {"\xe4\xb8", "\xe4\xb8"},             /* a code point begun */
        {"\xf0\x9f\x98", "\xf0\x9f\x98"},     /* three of four bytes */
        {"x\033", "\033"},                    /* an ESC */
        {"\033(", "\033("},                   /* an ESC and its intermediate */
        {"\033[", "\033["},                   /* a CSI begun */
        {"\033[38;2;10;2", "\033[38;2;10;2"}, /* the parameter in progress */
        {"\033[?25", "\033[?25"},             /* a leader */
        {"\033[4:", "\033[4:"},               /* a sub-parameter separator */
        {"\033[0010", "\033[10"},             /* rebuilt from the parse */
        {"\033[1\"", "\033[1\""},             /* an intermediate */
        {"\033]2;a ti", "\033]2;a ti"},       /* an OSC's body so far */
        {"\033]2;t\033", "\033]2;t\033"},     /* and its terminator begun */
        {"\033Pxyz", "\033P"},                /* a dropped string: its introducer */
        {"\033[31mdone\033]0;t\007", ""},     /* all whole again */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct rec *r = rec_new();
        struct vtf *f = filter_new(r);
        assert_int_equal(vtf_feed(f, (const uint8_t *)cases[i].fed, strlen(cases[i].fed)), AL_OK);
        uint8_t out[VTF_PENDING_MAX];
        size_t n = vtf_pending(f, out, sizeof out);
        if (n != strlen(cases[i].pending) || memcmp(out, cases[i].pending, n) != 0) {
            fprintf(stderr, "case %zu: %zu bytes pending, want %zu\n", i, n,
                    strlen(cases[i].pending));
            fail();
        }
        assert_int_equal(vtf_pending(f, out, 2), n < 2 ? n : 2); /* never past cap */
        vtf_free(f);
        free(r);
    }
    uint8_t out[4];
    assert_int_equal(vtf_pending(NULL, out, sizeof out), 0);
}

static void test_random_invariants(void **state)
{
    (void)state;
    static const char *const pieces[] = {"\033",
                                         "[",
                                         "]",
                                         "P",
                                         "_",
                                         "\\",
                                         ";",
                                         ":",
                                         "?",
                                         "b",
                                         "m",
                                         "H",
                                         "1",
                                         "9",
                                         "\007",
                                         "\302\215",
                                         "\xcc\x81",
                                         "\xe4\xb8\x96",
                                         "\x80",
                                         "\xff",
                                         "\030",
                                         "a",
                                         " ",
                                         "\n",
                                         "$",
                                         "#",
                                         "(",
                                         "0",
                                         "\xe2\x94\x82",
                                         "\xc3\xa9"};
    uint8_t buf[4096];
    for (uint64_t seed = 1; seed <= RANDOM_RUNS; seed++) {
        uint64_t rng = seed * 0x2545f4914f6cdd1dULL;
        size_t n = 0;
        while (n < sizeof buf - 8) {
            uint64_t x = tu_rand(&rng);
            if (x % 5 == 0) {
                buf[n++] = (uint8_t)(x >> 8);
            } else {
                const char *p = pieces[(x >> 8) % (sizeof pieces / sizeof pieces[0])];
                size_t k = strlen(p);
                memcpy(buf + n, p, k);
                n += k;
            }
        }
        struct vtf *f = NULL;
        assert_int_equal(vtf_new(check_unit, NULL, &f), AL_OK);
        size_t at = 0;
        while (at < n) { /* random chunks */
            size_t k = 1 + tu_rand(&rng) % 97;
            if (k > n - at)
                k = n - at;
            assert_int_equal(vtf_feed(f, buf + at, k), AL_OK);
            at += k;
        }
        vtf_free(f);
    }
}

/* The width table is libvterm 0.1.4's: print "a" then each code point into
 * a real libvterm and see whether it joined cell 0 (width 0) or where the
 * cursor went. Every code point from U+00A0 to U+10FFFF. */
static void test_width_table_matches_libvterm(void **state)
{
    (void)state;
    VTerm *vt = vterm_new(2, 8);
    assert_non_null(vt);
    vterm_set_utf8(vt, 1);
    VTermScreen *sc = vterm_obtain_screen(vt);
    vterm_screen_reset(sc, 1);
    VTermState *st = vterm_obtain_state(vt);
    vterm_input_write(vt, " \033[H\033[2J", 8);
    unsigned mismatches = 0;
    for (uint32_t cp = 0xa0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff) {
            assert_int_equal(vtf_cp_width(cp), -1);
            continue;
        }
        char b[16] = "\033[H\033[Ka";
        uint8_t u[4];
        size_t k = vtf_utf8_encode(cp, u);
        assert_true(k > 0);
        memcpy(b + 7, u, k);
        vterm_input_write(vt, b, 7 + k);
        VTermScreenCell c0, c1;
        memset(&c0, 0, sizeof c0);
        memset(&c1, 0, sizeof c1);
        vterm_screen_get_cell(sc, (VTermPos){0, 0}, &c0);
        vterm_screen_get_cell(sc, (VTermPos){0, 1}, &c1);
        VTermPos pos;
        vterm_state_get_cursorpos(st, &pos);
        int lib;
        if (c0.chars[1] == cp)
            lib = 0;
        else if (c1.chars[0] == cp)
            lib = pos.col - 1;
        else
            lib = -1; /* refused: U+FFFE, U+FFFF */
        if (lib != vtf_cp_width(cp) && mismatches++ < 10)
            fprintf(stderr, "U+%04X: libvterm %d, table %d\n", (unsigned)cp, lib, vtf_cp_width(cp));
    }
    vterm_free(vt);
    assert_int_equal(mismatches, 0);
    assert_int_equal(vtf_cp_width(0x7f), -1);
    assert_int_equal(vtf_cp_width(0x9b), -1);
    assert_int_equal(vtf_cp_width('a'), 1);
    assert_int_equal(vtf_cp_width(0x110000), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_invalid),
        cmocka_unit_test(test_plain_passes),
        cmocka_unit_test(test_rep),
        cmocka_unit_test(test_csi_separators),
        cmocka_unit_test(test_csi_limits),
        cmocka_unit_test(test_csi_canonical),
        cmocka_unit_test(test_c1_and_utf8),
        cmocka_unit_test(test_combining_limit),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_esc),
        cmocka_unit_test(test_emit_error),
        cmocka_unit_test(test_narrow),
        cmocka_unit_test(test_split_every_byte),
        cmocka_unit_test(test_printable_runs),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_width_table_matches_libvterm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
