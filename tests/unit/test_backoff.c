/*
 * Tests of the redial delays (src/common/backoff.c): each attempt's delay
 * lies in [cap/2, cap] with cap doubling from min to max, a success starts
 * over, and two generators seeded at init do not redial in step.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backoff.h"

static void test_bounds_and_growth(void **state)
{
    (void)state;
    struct backoff b;
    backoff_init(&b, 250, 30000);
    uint64_t cap = 250;
    for (int i = 0; i < 12; i++) {
        uint64_t d = backoff_next(&b);
        assert_true(d >= cap / 2 && d <= cap);
        cap = cap * 2 > 30000 ? 30000 : cap * 2;
    }
    /* at the cap it stays there */
    for (int i = 0; i < 100; i++) {
        uint64_t d = backoff_next(&b);
        assert_true(d >= 15000 && d <= 30000);
    }
    backoff_reset(&b);
    uint64_t d = backoff_next(&b);
    assert_true(d >= 125 && d <= 250);
}

static void test_not_in_step(void **state)
{
    (void)state;
    struct backoff a, b;
    backoff_init(&a, 1000, 1000000);
    backoff_init(&b, 1000, 1000000);
    int same = 0;
    for (int i = 0; i < 10; i++)
        same += backoff_next(&a) == backoff_next(&b);
    assert_true(same < 10);
}

static void test_degenerate_bounds(void **state)
{
    (void)state;
    struct backoff b;
    backoff_init(&b, 0, 0); /* min 1, max raised to min */
    for (int i = 0; i < 5; i++)
        assert_true(backoff_next(&b) <= 1);
    backoff_init(&b, 500, 100); /* max below min: min wins */
    for (int i = 0; i < 5; i++) {
        uint64_t d = backoff_next(&b);
        assert_true(d >= 250 && d <= 500);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounds_and_growth),
        cmocka_unit_test(test_not_in_step),
        cmocka_unit_test(test_degenerate_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
