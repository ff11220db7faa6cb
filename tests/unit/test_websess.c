/* websess: the session cookie, the WebSocket CSRF token, the sign-in rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "websess.h"

static void test_cookie_nth(void **state)
{
    (void)state;
    char v[WEBSESS_VALUE_MAX];
    assert_int_equal(websess_cookie_nth("a=1; airlock_session=als_x; b=2", false, 0, v, sizeof v),
                     AL_OK);
    assert_string_equal(v, "als_x");
    assert_int_equal(
        websess_cookie_nth("airlock_session=one;airlock_session=two", false, 1, v, sizeof v),
        AL_OK);
    assert_string_equal(v, "two");
    assert_int_equal(websess_cookie_nth("airlock_session=one", false, 1, v, sizeof v), AL_E_NOENT);
    /* a longer or shorter name is another cookie */
    assert_int_equal(
        websess_cookie_nth("xairlock_session=a; airlock_sessionx=b", false, 0, v, sizeof v),
        AL_E_NOENT);
    assert_int_equal(websess_cookie_nth("", false, 0, v, sizeof v), AL_E_NOENT);
    /* under TLS only the __Host- one is ours, and the other way round */
    assert_int_equal(websess_cookie_nth("airlock_session=plain", true, 0, v, sizeof v), AL_E_NOENT);
    assert_int_equal(
        websess_cookie_nth("airlock_session=plain; __Host-airlock_session=h", true, 0, v, sizeof v),
        AL_OK);
    assert_string_equal(v, "h");
    assert_int_equal(websess_cookie_nth("__Host-airlock_session=h", false, 0, v, sizeof v),
                     AL_E_NOENT);
    assert_int_equal(websess_cookie_nth("airlock_session=0123456789", false, 0, v, 5), AL_E_TOOBIG);
    assert_int_equal(websess_cookie_nth(NULL, false, 0, v, sizeof v), AL_E_INVAL);
}

static void test_set_cookie(void **state)
{
    (void)state;
    char c[WEBSESS_SET_COOKIE_MAX];
    assert_int_equal(websess_set_cookie(false, "als_v", 60, c, sizeof c), AL_OK);
    assert_string_equal(c, "airlock_session=als_v; HttpOnly; SameSite=Strict; Path=/; Max-Age=60");
    assert_int_equal(websess_set_cookie(true, "als_v", 60, c, sizeof c), AL_OK);
    assert_string_equal(
        c, "__Host-airlock_session=als_v; HttpOnly; SameSite=Strict; Path=/; Max-Age=60; Secure");
    assert_null(strstr(c, "Domain"));
    assert_int_equal(websess_set_cookie(true, NULL, 60, c, sizeof c), AL_OK);
    assert_string_equal(
        c, "__Host-airlock_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0; Secure");
    assert_int_equal(websess_set_cookie(false, "als_v", 60, c, 10), AL_E_TOOBIG);
    assert_string_equal(c, "");
    assert_int_equal(websess_set_cookie(false, "als_v", -1, c, sizeof c), AL_E_INVAL);
}

static void test_ws_csrf(void **state)
{
    (void)state;
    char t[WEBSESS_VALUE_MAX];
    assert_int_equal(websess_ws_csrf("airlock.v1, airlock-csrf.alc_abc", t, sizeof t), AL_OK);
    assert_string_equal(t, "alc_abc");
    assert_int_equal(websess_ws_csrf("airlock-csrf.alc_x,airlock.v1", t, sizeof t), AL_OK);
    assert_string_equal(t, "alc_x");
    assert_int_equal(websess_ws_csrf("airlock.v1", t, sizeof t), AL_E_NOENT);
    assert_int_equal(websess_ws_csrf("airlock.v1, airlock-csrf.", t, sizeof t), AL_E_NOENT);
    assert_int_equal(websess_ws_csrf("airlock-csrf.0123456789", t, 5), AL_E_TOOBIG);
    assert_int_equal(websess_ws_csrf(NULL, t, sizeof t), AL_E_INVAL);
}

static void test_origin_same(void **state)
{
    (void)state;
    assert_true(websess_origin_same("http://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_false(websess_origin_same("http://127.0.0.1:3000", "127.0.0.1:8080", false));
    assert_false(websess_origin_same("https://127.0.0.1:8080", "127.0.0.1:8080", false));
    assert_true(websess_origin_same("https://127.0.0.1:8080", "127.0.0.1:8080", true));
    assert_false(websess_origin_same("http://127.0.0.1:8080", "127.0.0.1:8080", true));
    assert_false(websess_origin_same("null", "127.0.0.1:8080", false));
    assert_false(websess_origin_same("http://127.0.0.1:8080/", "127.0.0.1:8080", false));
    assert_false(websess_origin_same(NULL, "127.0.0.1:8080", false));
    assert_false(websess_origin_same("http://", "", false));
}

static void test_login_rules(void **state)
{
    (void)state;
    static const struct {
        const char *ct, *origin, *site;
        int want;
    } cases[] = {
        {"application/json", NULL, NULL, AL_OK},
        {"application/json; charset=utf-8", "http://h:1", "same-origin", AL_OK},
        {"Application/JSON", NULL, "none", AL_OK},
        {"text/plain", NULL, NULL, AL_E_FORMAT},
        {"application/x-www-form-urlencoded", "http://h:1", NULL, AL_E_FORMAT},
        {"multipart/form-data", NULL, NULL, AL_E_FORMAT},
        {"application/jsonp", NULL, NULL, AL_E_FORMAT},
        {NULL, NULL, NULL, AL_E_FORMAT},
        {"application/json", "http://h:2", NULL, AL_E_PERM},
        {"application/json", "null", NULL, AL_E_PERM},
        {"application/json", NULL, "same-site", AL_E_PERM},
        {"application/json", NULL, "cross-site", AL_E_PERM},
        {"application/json", "http://h:1", "cross-site", AL_E_PERM},
    };
    char why[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct websess_login r = {cases[i].ct, cases[i].origin, cases[i].site, "h:1", false};
        int rc = websess_login_check(&r, why, sizeof why);
        if (rc != cases[i].want)
            fail_msg("case %zu: %d, want %d (%s)", i, rc, cases[i].want, why);
        assert_true(rc == AL_OK ? why[0] == 0 : why[0] != 0);
    }
    assert_int_equal(websess_login_check(NULL, why, sizeof why), AL_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cookie_nth),  cmocka_unit_test(test_set_cookie),
        cmocka_unit_test(test_ws_csrf),     cmocka_unit_test(test_origin_same),
        cmocka_unit_test(test_login_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
