/* Tests of the log helpers (src/common/al_log.c): escaping, rate limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "al_log.h"

static void test_escape(void **state)
{
    (void)state;
    char out[64];
    const char in[] = "a\nb\r\tc\\d\x1b[2J\x7f\xc3\xa9";
    size_t n = al_log_escape(in, sizeof in - 1, out, sizeof out);
    assert_string_equal(out, "a\\nb\\r\\tc\\\\d\\x1b[2J\\x7f\xc3\xa9");
    assert_int_equal(n, strlen(out));
    /* a NUL inside the bytes is escaped too */
    assert_int_equal(al_log_escape("x\0y", 3, out, sizeof out), 6);
    assert_string_equal(out, "x\\x00y");
    /* cut to fit, never in the middle of an escape */
    assert_int_equal(al_log_escape("ab\ncd", 5, out, 4), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(al_log_escape("abc", 3, out, 0), 0);
}

static void test_lograte(void **state)
{
    (void)state;
    struct al_lograte r = {0};
    assert_int_equal(al_lograte_hit(&r, 0, 1000), 1); /* the first event is a line */
    for (int i = 1; i < 100; i++)
        assert_int_equal(al_lograte_hit(&r, (uint64_t)i, 1000), 0);
    assert_int_equal(al_lograte_hit(&r, 1000, 1000), 100); /* 99 held + this one */
    assert_int_equal(al_lograte_hit(&r, 1500, 1000), 0);
    assert_int_equal(al_lograte_hit(&r, 5000, 1000), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_lograte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
