/*
 * Tests of the one error list (src/common/al_err.c): every code of
 * AL_ERR_MAP has its message and name, the messages users read are the
 * ones they always were, errno folds into codes through one table, and
 * al_errf_errno keeps the system's text in the reason (truncated as
 * al_errf would).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "al_err.h"

static void test_every_code_named(void **state)
{
    (void)state;
    static const int codes[] = {
#define CODE(name, value, msg) AL_E_##name,
        AL_ERR_MAP(CODE)
#undef CODE
    };
    size_t n = sizeof codes / sizeof codes[0];
    assert_int_equal(n, 26);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(codes[i], -(int)(i + 1)); /* dense, fixed values */
        assert_string_not_equal(al_strerror(codes[i]), "unknown error");
        assert_string_not_equal(al_err_name(codes[i]), "AL_E_UNKNOWN");
        for (size_t k = 0; k < i; k++) {
            assert_string_not_equal(al_strerror(codes[i]), al_strerror(codes[k]));
            assert_string_not_equal(al_err_name(codes[i]), al_err_name(codes[k]));
        }
    }
    assert_string_equal(al_strerror(AL_OK), "success");
    assert_string_equal(al_err_name(AL_OK), "AL_OK");
    assert_string_equal(al_strerror(-27), "unknown error");
    assert_string_equal(al_strerror(1), "unknown error");
    assert_string_equal(al_err_name(-27), "AL_E_UNKNOWN");
}

/* Messages that logs, the wire and docs show: unchanged. */
static void test_messages_kept(void **state)
{
    (void)state;
    assert_string_equal(al_strerror(AL_E_NOMEM), "out of memory");
    assert_string_equal(al_strerror(AL_E_TOOBIG), "size limit exceeded");
    assert_string_equal(al_strerror(AL_E_PROTO), "protocol violation");
    assert_string_equal(al_strerror(AL_E_LIMIT), "count limit reached");
    assert_string_equal(al_strerror(AL_E_PERM), "permission denied or unsafe permissions");
    assert_string_equal(al_strerror(AL_E_NOENT), "not found");
    assert_string_equal(al_strerror(AL_E_TIMEOUT), "timed out");
    assert_string_equal(al_strerror(AL_E_CLOSED), "closed");
    assert_string_equal(al_err_name(AL_E_NOENT), "AL_E_NOENT");
    assert_string_equal(al_err_name(AL_E_CLOSED), "AL_E_CLOSED");
}

static void test_from_errno(void **state)
{
    (void)state;
    static const struct {
        int e, code;
    } cases[] = {
        {ENOENT, AL_E_NOENT},  {ENOTDIR, AL_E_NOENT},
        {ESRCH, AL_E_NOENT},   {ECHILD, AL_E_NOENT},
        {EACCES, AL_E_PERM},   {EPERM, AL_E_PERM},
        {EROFS, AL_E_PERM},    {ELOOP, AL_E_PERM},
        {EEXIST, AL_E_EXISTS}, {ENOMEM, AL_E_NOMEM},
        {E2BIG, AL_E_TOOBIG},  {ENAMETOOLONG, AL_E_TOOBIG},
        {EAGAIN, AL_E_AGAIN},  {EWOULDBLOCK, AL_E_AGAIN},
        {EIO, AL_E_IO},        {EISDIR, AL_E_IO},
        {ENOSPC, AL_E_IO},     {EPIPE, AL_E_IO},
        {0, AL_E_IO},          {-1, AL_E_IO},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(al_err_from_errno(cases[i].e), cases[i].code);
}

static void test_errf_errno(void **state)
{
    (void)state;
    char buf[128];
    char want[128];
    assert_int_equal(al_errf_errno(buf, sizeof buf, ENOENT, "cannot open %s", "/x"), AL_E_NOENT);
    (void)snprintf(want, sizeof want, "cannot open /x: %s", strerror(ENOENT));
    assert_string_equal(buf, want);

    /* Truncated exactly as al_errf with ": %s" would be. */
    for (size_t cap = 1; cap < 40; cap++) {
        char a[64], b[64];
        memset(a, 'x', sizeof a);
        memset(b, 'x', sizeof b);
        assert_int_equal(al_errf_errno(a, cap, EACCES, "cannot run '%s'", "prog"), AL_E_PERM);
        al_errf(b, cap, "cannot run '%s': %s", "prog", strerror(EACCES));
        assert_memory_equal(a, b, cap);
    }

    /* No buffer: only the code. */
    assert_int_equal(al_errf_errno(NULL, 0, EEXIST, "x"), AL_E_EXISTS);
    buf[0] = 'k';
    assert_int_equal(al_errf_errno(buf, 0, ENOSPC, "x"), AL_E_IO);
    assert_int_equal(buf[0], 'k');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_code_named),
        cmocka_unit_test(test_messages_kept),
        cmocka_unit_test(test_from_errno),
        cmocka_unit_test(test_errf_errno),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
