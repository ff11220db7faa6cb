/*
 * Tests of the CLI's small pure helpers: how ages and round trips are
 * shown (src/cli/cli_fmt.c) and how HTTP answers map to exit codes and
 * hints (src/cli/cli_err.c), the codes `airlock --help` lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "cli_err.h"
#include "cli_fmt.h"
#include "testutil.h"

#define NOW 1800000000LL

static void test_age(void **state)
{
    (void)state;
    char b[32];
    cli_fmt_age(b, sizeof b, 0, NOW);
    assert_string_equal(b, "-");
    cli_fmt_age(b, sizeof b, -5, NOW);
    assert_string_equal(b, "-");
    cli_fmt_age(b, sizeof b, NOW * 1000, NOW);
    assert_string_equal(b, "0s");
    cli_fmt_age(b, sizeof b, (NOW + 100) * 1000, NOW); /* a clock ahead: now */
    assert_string_equal(b, "0s");
    cli_fmt_age(b, sizeof b, (NOW - 59) * 1000 + 999, NOW);
    assert_string_equal(b, "59s");
    cli_fmt_age(b, sizeof b, (NOW - 60) * 1000, NOW);
    assert_string_equal(b, "1m");
    cli_fmt_age(b, sizeof b, (NOW - 3599) * 1000, NOW);
    assert_string_equal(b, "59m");
    cli_fmt_age(b, sizeof b, (NOW - 3600) * 1000, NOW);
    assert_string_equal(b, "1h");
    cli_fmt_age(b, sizeof b, (NOW - 86399) * 1000, NOW);
    assert_string_equal(b, "23h");
    cli_fmt_age(b, sizeof b, (NOW - 86400 * 3) * 1000, NOW);
    assert_string_equal(b, "3d");
    char tiny[3];
    cli_fmt_age(tiny, sizeof tiny, (NOW - 86400 * 300) * 1000, NOW); /* truncated, terminated */
    assert_string_equal(tiny, "30");
}

static void test_rtt(void **state)
{
    (void)state;
    char b[32];
    cli_fmt_rtt(b, sizeof b, 0);
    assert_string_equal(b, "-");
    cli_fmt_rtt(b, sizeof b, -1);
    assert_string_equal(b, "-");
    cli_fmt_rtt(b, sizeof b, 420);
    assert_string_equal(b, "0.4ms");
    cli_fmt_rtt(b, sizeof b, 12345);
    assert_string_equal(b, "12.3ms");
}

static void test_exit_codes(void **state)
{
    (void)state;
    assert_int_equal(cli_exit_of_status(401), CLI_EXIT_AUTH);
    assert_int_equal(cli_exit_of_status(403), CLI_EXIT_FORBIDDEN);
    assert_int_equal(cli_exit_of_status(404), CLI_EXIT_NOTFOUND);
    assert_int_equal(cli_exit_of_status(400), CLI_EXIT_REFUSED);
    assert_int_equal(cli_exit_of_status(409), CLI_EXIT_REFUSED);
    assert_int_equal(cli_exit_of_status(413), CLI_EXIT_REFUSED);
    assert_int_equal(cli_exit_of_status(429), CLI_EXIT_REFUSED);
    assert_int_equal(cli_exit_of_status(500), CLI_EXIT_OTHER);
    assert_int_equal(cli_exit_of_status(503), CLI_EXIT_OTHER);
    assert_int_equal(cli_exit_of_status(302), CLI_EXIT_PROTO); /* not an error answer we know */
    assert_int_equal(cli_exit_of_status(0), CLI_EXIT_PROTO);
    /* the codes are distinct, and none is a signal's */
    int codes[] = {CLI_EXIT_USAGE, CLI_EXIT_REFUSED, CLI_EXIT_NOTFOUND, CLI_EXIT_DOWN,
                   CLI_EXIT_OTHER, CLI_EXIT_PROTO,   CLI_EXIT_AUTH,     CLI_EXIT_FORBIDDEN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        assert_true(codes[i] > 0 && codes[i] < CLI_EXIT_SIGNAL_BASE);
        for (size_t j = i + 1; j < sizeof codes / sizeof codes[0]; j++)
            assert_int_not_equal(codes[i], codes[j]);
    }
}

static void test_hints(void **state)
{
    (void)state;
    assert_non_null(strstr(cli_status_hint(401), "API key"));
    assert_non_null(strstr(cli_status_hint(403), "role"));
    assert_string_equal(cli_status_hint(404), "not found");
    assert_non_null(strstr(cli_status_hint(429), "later"));
    assert_non_null(strstr(cli_status_hint(502), "failed"));
    assert_non_null(strstr(cli_status_hint(418), "refused"));
    assert_non_null(cli_status_hint(0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_age),
        cmocka_unit_test(test_rtt),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_hints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
