/* Tests of the log helpers (src/common/al_log.c): escaping, the text and
 * JSON lines, rate limits. */
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

static void test_json_escape(void **state)
{
    (void)state;
    char out[128];
    /* quotes, backslashes, control bytes, an escape sequence, valid UTF-8 */
    const char in[] = "a\"b\\c\n\x1b[2J\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    size_t n = al_log_json_escape(in, sizeof in - 1, out, sizeof out);
    assert_string_equal(out,
                        "a\\\"b\\\\c\\u000a\\u001b[2J\\u007f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    assert_int_equal(n, strlen(out));
    /* invalid UTF-8: a lone continuation, an overlong '/', a surrogate, a
     * sequence cut short, a code point past U+10FFFF: each byte U+FFFD */
    assert_int_equal(al_log_json_escape("\x80", 1, out, sizeof out), 6);
    assert_string_equal(out, "\\ufffd");
    al_log_json_escape("\xc0\xaf", 2, out, sizeof out);
    assert_string_equal(out, "\\ufffd\\ufffd");
    al_log_json_escape("\xed\xa0\x80", 3, out, sizeof out);
    assert_string_equal(out, "\\ufffd\\ufffd\\ufffd");
    al_log_json_escape("x\xe2\x82", 3, out, sizeof out);
    assert_string_equal(out, "x\\ufffd\\ufffd");
    al_log_json_escape("\xf4\x90\x80\x80", 4, out, sizeof out);
    assert_string_equal(out, "\\ufffd\\ufffd\\ufffd\\ufffd");
    /* a NUL is a control byte; cut to fit at a whole character */
    assert_int_equal(al_log_json_escape("x\0y", 3, out, sizeof out), 8);
    assert_string_equal(out, "x\\u0000y");
    assert_int_equal(al_log_json_escape("ab\ncd", 5, out, 6), 2);
    assert_string_equal(out, "ab");
    assert_int_equal(al_log_json_escape("\xc3\xa9\xc3\xa9", 4, out, 4), 2);
    assert_string_equal(out, "\xc3\xa9");
}

static void test_format_line(void **state)
{
    (void)state;
    char out[512];
    assert_int_equal(al_log_format_of("text"), AL_LOG_TEXT);
    assert_int_equal(al_log_format_of("json"), AL_LOG_JSON);
    assert_int_equal(al_log_format_of("JSON"), -1);
    assert_int_equal(al_log_format_of(NULL), -1);
    /* 2026-01-02T03:04:05.678Z */
    const int64_t ms = 1767323045678LL;
    size_t n =
        al_log_format_line(AL_LOG_TEXT, ms, "airlockd", "relay", 1, "hi\nthere", out, sizeof out);
    assert_string_equal(out, "1767323045.678 airlockd[relay] info hi\\nthere\n");
    assert_int_equal(n, strlen(out));
    /* a peer's string cannot forge a line or a key: one object, six keys */
    n = al_log_format_line(AL_LOG_JSON, ms, "airlock-runner", "sbx\"1", 0,
                           "x\n{\"level\":\"info\"}\x1b[2J\xff", out, sizeof out);
    assert_string_equal(out, "{\"time\":\"2026-01-02T03:04:05.678Z\",\"ts\":1767323045.678,"
                             "\"prog\":\"airlock-runner\",\"instance\":\"sbx\\\"1\","
                             "\"level\":\"error\",\"msg\":\"x\\u000a{\\\"level\\\":\\\"info\\\"}"
                             "\\u001b[2J\\ufffd\"}\n");
    assert_int_equal(n, strlen(out));
    /* no instance: "-"; a level past debug is debug */
    al_log_format_line(AL_LOG_JSON, 5, "p", NULL, 7, "m", out, sizeof out);
    assert_string_equal(out, "{\"time\":\"1970-01-01T00:00:00.005Z\",\"ts\":0.005,\"prog\":\"p\","
                             "\"instance\":\"-\",\"level\":\"debug\",\"msg\":\"m\"}\n");
    /* too small a buffer: still one line */
    n = al_log_format_line(AL_LOG_JSON, ms, "p", "i", 1, "a long message", out, 16);
    assert_int_equal(n, 15);
    assert_int_equal(out[14], '\n');
    assert_null(memchr(out, '\n', 14));
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
        cmocka_unit_test(test_json_escape),
        cmocka_unit_test(test_format_line),
        cmocka_unit_test(test_lograte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
