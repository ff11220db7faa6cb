/* Tests of connection admission (src/common/connlim.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "al_err.h"
#include "connlim.h"

static int k[8]; /* connection keys */

static void test_limits(void **state)
{
    (void)state;
    struct clim *t;
    struct clim_limits zero = {0, 1, 0};
    assert_int_equal(clim_new(&zero, &t), AL_E_INVAL);
    struct clim_limits lim = {4, 2, 1000};
    assert_int_equal(clim_new(&lim, &t), AL_OK);
    int s[8];
    assert_int_equal(clim_admit(t, "10.0.0.1", 0, &s[0]), CLIM_ADMITTED);
    assert_int_equal(clim_admit(t, "10.0.0.1", 0, &s[1]), CLIM_ADMITTED);
    assert_int_equal(clim_admit(t, "10.0.0.1", 0, &s[2]), CLIM_PER_IP);
    assert_int_equal(s[2], -1);
    assert_int_equal(clim_admit(t, "10.0.0.2", 0, &s[2]), CLIM_ADMITTED);
    assert_int_equal(clim_admit(t, "10.0.0.3", 0, &s[3]), CLIM_ADMITTED);
    assert_int_equal(clim_admit(t, "10.0.0.4", 0, &s[4]), CLIM_FULL);
    assert_int_equal(clim_count(t), 4);
    assert_int_equal(clim_count_addr(t, "10.0.0.1"), 2);
    for (int i = 0; i < 4; i++)
        clim_bind(t, s[i], &k[i]);
    /* a key going frees its slot; an unknown key is no error */
    assert_int_equal(clim_release(t, &k[0]), 0);
    assert_int_equal(clim_release(t, &k[0]), -1);
    assert_int_equal(clim_release(t, &k[7]), -1);
    assert_int_equal(clim_count_addr(t, "10.0.0.1"), 1);
    assert_int_equal(clim_admit(t, "10.0.0.1", 0, &s[0]), CLIM_ADMITTED);
    clim_release_slot(t, s[0]); /* never bound: the caller frees it */
    assert_int_equal(clim_count(t), 3);
    assert_string_not_equal(clim_verdict_text(CLIM_PER_IP), clim_verdict_text(CLIM_FULL));
    clim_free(t);
}

static void test_deadlines(void **state)
{
    (void)state;
    struct clim *t;
    struct clim_limits lim = {8, 8, 1000};
    assert_int_equal(clim_new(&lim, &t), AL_OK);
    int s;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(clim_admit(t, "a", (uint64_t)i * 100, &s), CLIM_ADMITTED);
        clim_bind(t, s, &k[i]);
    }
    const void *out[8];
    assert_int_equal(clim_expired(t, 999, out, 8), 0);
    assert_int_equal(clim_expired(t, 1000, out, 8), 1);
    assert_ptr_equal(out[0], &k[0]);
    assert_int_equal(clim_expired(t, 1000, out, 8), 0); /* listed once */
    clim_set_deadline(t, &k[1], 0);                     /* answered: no deadline */
    clim_set_deadline(t, &k[2], 5000);                  /* re-armed */
    assert_int_equal(clim_expired(t, 4999, out, 8), 0);
    assert_int_equal(clim_expired(t, 5000, out, 1), 1);
    assert_ptr_equal(out[0], &k[2]);
    /* an admitted slot without a key is never listed */
    assert_int_equal(clim_admit(t, "a", 0, &s), CLIM_ADMITTED);
    assert_int_equal(clim_expired(t, 100000, out, 8), 0);
    clim_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_deadlines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
