/* sesswatch: the WebSockets of web sessions, when each session is due for
 * a lookup, and what ends with a session. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "sesswatch.h"

#define EVERY UINT64_C(1000)

static const char HA[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
static const char HB[] = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

/* Distinct connection pointers. */
static int conns[8];

struct ended {
    void *conn[8];
    unsigned n;
    struct sesswatch *w; /* set: fn removes what it is handed, as api_ws_closed would */
};

static void on_end(void *ud, void *conn)
{
    struct ended *e = ud;
    if (e->n < 8)
        e->conn[e->n++] = conn;
    sesswatch_remove(e->w, conn);
}

static void test_new_and_bad_args(void **state)
{
    (void)state;
    struct sesswatch *w = NULL;
    assert_int_equal(sesswatch_new(0, EVERY, &w), AL_E_INVAL);
    assert_null(w);
    assert_int_equal(sesswatch_new(4, 0, &w), AL_E_INVAL);
    assert_int_equal(sesswatch_new(4, EVERY, NULL), AL_E_INVAL);
    assert_int_equal(sesswatch_new(4, EVERY, &w), AL_OK);
    char longer[SESSWATCH_HANDLE_MAX + 2];
    memset(longer, 'c', sizeof longer - 1);
    longer[sizeof longer - 1] = 0;
    assert_int_equal(sesswatch_add(w, longer, &conns[0], 0), AL_E_INVAL);
    assert_int_equal(sesswatch_add(w, "", &conns[0], 0), AL_E_INVAL);
    assert_int_equal(sesswatch_add(w, NULL, &conns[0], 0), AL_E_INVAL);
    assert_int_equal(sesswatch_add(w, HA, NULL, 0), AL_E_INVAL);
    assert_int_equal(sesswatch_add(NULL, HA, &conns[0], 0), AL_E_INVAL);
    char out[SESSWATCH_HANDLE_MAX + 1];
    assert_int_equal(sesswatch_due(w, 0, out, SESSWATCH_HANDLE_MAX), AL_E_INVAL);
    assert_int_equal(sesswatch_due(w, 0, out, sizeof out), AL_E_NOENT);
    assert_int_equal(sesswatch_end(w, NULL, on_end, NULL), 0);
    sesswatch_remove(w, &conns[0]); /* not watched: nothing */
    sesswatch_remove(NULL, &conns[0]);
    assert_int_equal(sesswatch_count(w), 0);
    assert_int_equal(sesswatch_count(NULL), 0);
    sesswatch_free(w);
    sesswatch_free(NULL);
}

/* The table is bounded: cap connections, each once; a freed slot is reused. */
static void test_limit_and_once(void **state)
{
    (void)state;
    struct sesswatch *w;
    assert_int_equal(sesswatch_new(2, EVERY, &w), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[0], 0), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[0], 0), AL_E_EXISTS);
    assert_int_equal(sesswatch_add(w, HB, &conns[1], 0), AL_OK);
    assert_int_equal(sesswatch_add(w, HB, &conns[2], 0), AL_E_LIMIT);
    assert_int_equal(sesswatch_count(w), 2);
    sesswatch_remove(w, &conns[0]);
    assert_int_equal(sesswatch_count(w), 1);
    assert_int_equal(sesswatch_add(w, HB, &conns[2], 0), AL_OK);
    assert_int_equal(sesswatch_count(w), 2);
    sesswatch_free(w);
}

/* A session is due one interval after its first connection, once for all
 * its connections, the soonest first; looked up, it is due again one
 * interval later. */
static void test_due(void **state)
{
    (void)state;
    struct sesswatch *w;
    char out[SESSWATCH_HANDLE_MAX + 1];
    assert_int_equal(sesswatch_new(8, EVERY, &w), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[0], 100), AL_OK);
    assert_int_equal(sesswatch_add(w, HB, &conns[1], 500), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[2], 900), AL_OK); /* due with conns[0] */
    assert_int_equal(sesswatch_due(w, 100 + EVERY - 1, out, sizeof out), AL_E_NOENT);
    assert_int_equal(sesswatch_due(w, 100 + EVERY, out, sizeof out), AL_OK);
    assert_string_equal(out, HA);
    assert_int_equal(sesswatch_due(w, 100 + EVERY, out, sizeof out), AL_E_NOENT);
    /* both late: the one due sooner comes first, each once */
    assert_int_equal(sesswatch_due(w, 5000, out, sizeof out), AL_OK);
    assert_string_equal(out, HB);
    assert_int_equal(sesswatch_due(w, 5000, out, sizeof out), AL_OK);
    assert_string_equal(out, HA);
    assert_int_equal(sesswatch_due(w, 5000, out, sizeof out), AL_E_NOENT);
    assert_int_equal(sesswatch_due(w, 5000 + EVERY, out, sizeof out), AL_OK);
    sesswatch_free(w);
}

/* A session that ends takes all its connections, and only those. */
static void test_end(void **state)
{
    (void)state;
    struct sesswatch *w;
    char out[SESSWATCH_HANDLE_MAX + 1];
    assert_int_equal(sesswatch_new(8, EVERY, &w), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[0], 0), AL_OK);
    assert_int_equal(sesswatch_add(w, HB, &conns[1], 0), AL_OK);
    assert_int_equal(sesswatch_add(w, HA, &conns[2], 0), AL_OK);
    struct ended e = {.n = 0, .w = w};
    assert_int_equal(sesswatch_end(w, HA, on_end, &e), 2);
    assert_int_equal(e.n, 2);
    assert_ptr_equal(e.conn[0], &conns[0]);
    assert_ptr_equal(e.conn[1], &conns[2]);
    assert_int_equal(sesswatch_count(w), 1);
    assert_int_equal(sesswatch_end(w, HA, on_end, &e), 0);
    /* what is left is HB's alone */
    assert_int_equal(sesswatch_due(w, EVERY, out, sizeof out), AL_OK);
    assert_string_equal(out, HB);
    assert_int_equal(sesswatch_end(w, HB, NULL, NULL), 1);
    assert_int_equal(sesswatch_count(w), 0);
    assert_int_equal(sesswatch_due(w, 10 * EVERY, out, sizeof out), AL_E_NOENT);
    sesswatch_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_bad_args),
        cmocka_unit_test(test_limit_and_once),
        cmocka_unit_test(test_due),
        cmocka_unit_test(test_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
