/* Tests of lws's log lines, rate-limited (src/ws/wslog.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <libwebsockets.h>

#include "al_log.h"
#include "wslog.h"

/* A peer repeating an lws error at will gets one line per interval, with
 * the count of the lines it stands for; the newline lws ends a line with
 * is dropped (al_vlog writes its own). */
static void test_rate(void **state)
{
    (void)state;
    char out[64];
    wslog_init(LLL_ERR, AL_LOG_TEXT, "test", "lws", 0);
    const unsigned long long t0 = 1000000;
    assert_int_equal(wslog_filter(LLL_ERR, "Ran out of header data space\n", t0, out, sizeof out),
                     1);
    assert_string_equal(out, "Ran out of header data space");
    for (int i = 0; i < 500; i++)
        assert_int_equal(wslog_filter(LLL_ERR, "Ran out of header data space\n", t0 + (unsigned)i,
                                      out, sizeof out),
                         0);
    /* a warning has its own limit */
    assert_int_equal(wslog_filter(LLL_WARN, "w\n", t0 + 1, out, sizeof out), 1);
    /* the next interval's first line reports the ones it stood for */
    assert_int_equal(wslog_filter(LLL_ERR, "again\n", t0 + WSLOG_INTERVAL_MS, out, sizeof out),
                     501);
    assert_string_equal(out, "again");
    assert_int_equal(wslog_filter(LLL_ERR, "again\n", t0 + WSLOG_INTERVAL_MS + 1, out, sizeof out),
                     0);
}

/* A long line is cut to the buffer; with AIRLOCK_LWS_DEBUG every line passes. */
static void test_cut_and_verbatim(void **state)
{
    (void)state;
    char out[8];
    wslog_init(LLL_ERR, AL_LOG_TEXT, "test", "lws", 0);
    assert_int_equal(wslog_filter(LLL_ERR, "0123456789abcdef", 5, out, sizeof out), 1);
    assert_string_equal(out, "0123456");
    wslog_init(0xfff, AL_LOG_TEXT, "test", "lws", 1);
    for (int i = 0; i < 10; i++)
        assert_int_equal(wslog_filter(LLL_ERR, "x\n", 5, out, sizeof out), 1);
    lws_set_log_level(0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate),
        cmocka_unit_test(test_cut_and_verbatim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
