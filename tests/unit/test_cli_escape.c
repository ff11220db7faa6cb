/*
 * Tests of the CLI's detach-sequence filter (src/cli/cli_escape.c, pure):
 * the sequence only at the start of a line, each action, '~~', an
 * unknown byte after '~', a sequence split across reads, another escape
 * character, none at all, and a small output buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "cli_escape.h"
#include "testutil.h"

/* Feed s in one call; returns what came out (NUL-terminated in out). */
static size_t feed(struct cli_escape *e, const char *s, char *out, size_t cap, size_t *used,
                   enum cli_esc_action *act)
{
    size_t n =
        cli_escape_feed(e, (const uint8_t *)s, strlen(s), (uint8_t *)out, cap - 1, used, act);
    out[n] = 0;
    return n;
}

static void test_detach_at_start(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    assert_int_equal(feed(&e, "~.rest", out, sizeof out, &used, &act), 0);
    assert_int_equal(act, CLI_ESC_DETACH);
    assert_int_equal(used, 2); /* stops after the action */
}

static void test_only_after_enter(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    feed(&e, "a~.", out, sizeof out, &used, &act);
    assert_string_equal(out, "a~.");
    assert_int_equal(act, CLI_ESC_NONE);
    assert_int_equal(used, 3);
    feed(&e, "ls\r~.", out, sizeof out, &used, &act);
    assert_string_equal(out, "ls\r");
    assert_int_equal(act, CLI_ESC_DETACH);
    assert_int_equal(used, 5);
    cli_escape_init(&e, '~');
    feed(&e, "x\n~t", out, sizeof out, &used, &act);
    assert_string_equal(out, "x\n");
    assert_int_equal(act, CLI_ESC_TAKEOVER);
}

static void test_actions(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    feed(&e, "~?", out, sizeof out, &used, &act);
    assert_int_equal(act, CLI_ESC_HELP);
    assert_string_equal(out, "");
    /* after help or takeover a new sequence may follow at once */
    feed(&e, "~t", out, sizeof out, &used, &act);
    assert_int_equal(act, CLI_ESC_TAKEOVER);
    feed(&e, "~.", out, sizeof out, &used, &act);
    assert_int_equal(act, CLI_ESC_DETACH);
}

static void test_tilde_tilde_and_other(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    feed(&e, "~~.", out, sizeof out, &used, &act);
    assert_string_equal(out, "~."); /* one ~ sent; the line is no longer at its start */
    assert_int_equal(act, CLI_ESC_NONE);
    cli_escape_init(&e, '~');
    feed(&e, "~x", out, sizeof out, &used, &act);
    assert_string_equal(out, "~x");
    assert_int_equal(act, CLI_ESC_NONE);
    /* ~ then Enter: both sent, and the next line may start a sequence */
    cli_escape_init(&e, '~');
    feed(&e, "~\r~.", out, sizeof out, &used, &act);
    assert_string_equal(out, "~\r");
    assert_int_equal(act, CLI_ESC_DETACH);
}

static void test_split_across_reads(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    feed(&e, "echo\r", out, sizeof out, &used, &act);
    feed(&e, "~", out, sizeof out, &used, &act);
    assert_string_equal(out, ""); /* held back: it may start a sequence */
    assert_int_equal(act, CLI_ESC_NONE);
    feed(&e, ".", out, sizeof out, &used, &act);
    assert_int_equal(act, CLI_ESC_DETACH);
    cli_escape_init(&e, '~');
    feed(&e, "~", out, sizeof out, &used, &act);
    feed(&e, "q", out, sizeof out, &used, &act);
    assert_string_equal(out, "~q");
}

static void test_other_char_and_none(void **state)
{
    (void)state;
    struct cli_escape e;
    char out[64];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '%');
    feed(&e, "~.", out, sizeof out, &used, &act);
    assert_string_equal(out, "~.");
    cli_escape_init(&e, '%');
    feed(&e, "%.", out, sizeof out, &used, &act);
    assert_int_equal(act, CLI_ESC_DETACH);
    cli_escape_init(&e, -1);
    feed(&e, "~.\r~.~~", out, sizeof out, &used, &act);
    assert_string_equal(out, "~.\r~.~~");
    assert_int_equal(act, CLI_ESC_NONE);
}

static void test_small_output(void **state)
{
    (void)state;
    struct cli_escape e;
    uint8_t out[4];
    size_t used;
    enum cli_esc_action act;
    cli_escape_init(&e, '~');
    /* cap 3: room for one byte at a time plus a possible pending escape */
    const uint8_t in[] = "abcdef";
    size_t n = cli_escape_feed(&e, in, 6, out, 3, &used, &act);
    assert_true(n <= 3);
    assert_int_equal(used, n);
    assert_memory_equal(out, in, n);
    size_t total = n;
    while (total < 6) {
        n = cli_escape_feed(&e, in + total, 6 - total, out, 3, &used, &act);
        assert_true(used > 0);
        assert_memory_equal(out, in + total, n);
        total += used;
    }
}

/* With no escape character the filter is the identity on any bytes. */
static void test_random_identity(void **state)
{
    (void)state;
    uint64_t seed = 42;
    struct cli_escape e;
    cli_escape_init(&e, -1);
    for (int round = 0; round < 200; round++) {
        uint8_t in[257], out[258];
        size_t n = tu_rand(&seed) % sizeof in;
        for (size_t i = 0; i < n; i++)
            in[i] = (uint8_t)tu_rand(&seed);
        size_t used;
        enum cli_esc_action act;
        size_t o = cli_escape_feed(&e, in, n, out, sizeof out, &used, &act);
        assert_int_equal(o, n);
        assert_int_equal(used, n);
        assert_memory_equal(out, in, n);
        assert_int_equal(act, CLI_ESC_NONE);
    }
}

/* With '~', output never exceeds input plus one pending '~', and only a
 * sequence at a line start is taken out. */
static void test_random_bounds(void **state)
{
    (void)state;
    uint64_t seed = 7;
    static const uint8_t alphabet[] = {'~', '.', 't', '?', '\r', '\n', 'a'};
    for (int round = 0; round < 500; round++) {
        struct cli_escape e;
        cli_escape_init(&e, '~');
        uint8_t in[64], out[66];
        size_t n = 1 + tu_rand(&seed) % sizeof in;
        for (size_t i = 0; i < n; i++)
            in[i] = alphabet[tu_rand(&seed) % sizeof alphabet];
        size_t used;
        enum cli_esc_action act;
        size_t o = cli_escape_feed(&e, in, n, out, sizeof out, &used, &act);
        assert_true(used <= n);
        assert_true(o <= used + 1);
        if (act == CLI_ESC_NONE)
            assert_int_equal(used, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detach_at_start),
        cmocka_unit_test(test_only_after_enter),
        cmocka_unit_test(test_actions),
        cmocka_unit_test(test_tilde_tilde_and_other),
        cmocka_unit_test(test_split_across_reads),
        cmocka_unit_test(test_other_char_and_none),
        cmocka_unit_test(test_small_output),
        cmocka_unit_test(test_random_identity),
        cmocka_unit_test(test_random_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
