/*
 * Unit tests for ratelim: the burst, the steady rate, the wait it reports,
 * recovery after idleness, and that a refused event counts for nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ratelim.h"

#define MS 1000u

static void test_burst_then_refused(void **state)
{
    (void)state;
    struct ratelim l;
    ratelim_init(&l, 100 * MS, 4);
    uint64_t now = 5000000;
    for (int i = 0; i < 4; i++)
        assert_int_equal(ratelim_take(&l, now), 1);
    assert_int_equal(ratelim_take(&l, now), 0);
    assert_int_equal(ratelim_next(&l, now), now + 100 * MS);
    /* refusals count for nothing: the wait does not grow */
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ratelim_take(&l, now + 50 * MS), 0);
    assert_int_equal(ratelim_next(&l, now + 50 * MS), now + 100 * MS);
    assert_int_equal(ratelim_take(&l, now + 100 * MS), 1);
    assert_int_equal(ratelim_take(&l, now + 100 * MS), 0);
}

static void test_steady_rate_bounds_a_flood(void **state)
{
    (void)state;
    struct ratelim l;
    ratelim_init(&l, 50 * MS, 8);
    uint64_t start = 1000000, allowed = 0;
    /* 2000 attempts a millisecond apart: 2 s at most 8 + 2000/50 events */
    for (uint64_t i = 0; i < 2000; i++)
        allowed += (uint64_t)ratelim_take(&l, start + i * MS);
    assert_true(allowed >= 40);
    assert_true(allowed <= 8 + 40);
}

static void test_idle_restores_burst(void **state)
{
    (void)state;
    struct ratelim l;
    ratelim_init(&l, 10 * MS, 3);
    uint64_t now = 0;
    for (int i = 0; i < 3; i++)
        assert_int_equal(ratelim_take(&l, now), 1);
    assert_int_equal(ratelim_take(&l, now), 0);
    now += 10 * 1000 * MS; /* a long quiet */
    for (int i = 0; i < 3; i++)
        assert_int_equal(ratelim_take(&l, now), 1);
    assert_int_equal(ratelim_take(&l, now), 0);
}

static void test_degenerate_arguments(void **state)
{
    (void)state;
    struct ratelim l;
    ratelim_init(&l, 0, 0); /* taken as one per microsecond, burst 1 */
    assert_int_equal(ratelim_take(&l, 7), 1);
    assert_int_equal(ratelim_take(&l, 7), 0);
    assert_int_equal(ratelim_next(&l, 7), 8);
    assert_int_equal(ratelim_take(&l, 8), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_refused),
        cmocka_unit_test(test_steady_rate_bounds_a_flood),
        cmocka_unit_test(test_idle_restores_burst),
        cmocka_unit_test(test_degenerate_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
