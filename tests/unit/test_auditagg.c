/* Tests of the refusal aggregation (src/control/auditagg.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "auditagg.h"

struct seen {
    unsigned n;
    uint64_t total;
    struct aagg_row first;
    int overflow;
};

static void collect(void *ctx, const struct aagg_row *r)
{
    struct seen *s = ctx;
    if (s->n++ == 0)
        s->first = *r;
    s->total += r->count;
    if (!strcmp(r->source, AAGG_OVERFLOW_SOURCE))
        s->overflow = 1;
}

static void test_aggregate(void **state)
{
    (void)state;
    struct aagg *g;
    assert_int_equal(aagg_new(&g), AL_OK);
    for (int i = 0; i < 1000; i++)
        aagg_add(g, "10.0.0.1", "auth_failed", "unknown API key", i ? "/v1/x" : "/v1/first",
                 1000 + i);
    aagg_add(g, "10.0.0.1", "auth_failed", "no API key or session", "/v1/x", 5000);
    aagg_add(g, "10.0.0.2", "auth_failed", "unknown API key", "/v1/x", 5000);
    assert_int_equal(aagg_count(g), 3);
    struct seen s = {0};
    assert_int_equal(aagg_flush(g, collect, &s), 3);
    assert_int_equal(s.total, 1002);
    assert_int_equal(s.first.count, 1000);
    assert_string_equal(s.first.target, "/v1/first");
    assert_int_equal(s.first.first_ms, 1000);
    assert_int_equal(s.first.last_ms, 1999);
    assert_int_equal(aagg_count(g), 0);
    memset(&s, 0, sizeof s);
    assert_int_equal(aagg_flush(g, collect, &s), 0);
    aagg_free(g);
}

static void test_overflow(void **state)
{
    (void)state;
    struct aagg *g;
    assert_int_equal(aagg_new(&g), AL_OK);
    char src[32];
    for (int i = 0; i < AAGG_MAX_KEYS + 50; i++) {
        (void)snprintf(src, sizeof src, "10.0.%d.%d", i / 256, i % 256);
        aagg_add(g, src, "auth_failed", "unknown API key", "/v1/x", i);
    }
    assert_int_equal(aagg_count(g), AAGG_MAX_KEYS + 1);
    struct seen s = {0};
    assert_int_equal(aagg_flush(g, collect, &s), AAGG_MAX_KEYS + 1);
    assert_int_equal(s.total, AAGG_MAX_KEYS + 50);
    assert_true(s.overflow);
    aagg_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aggregate),
        cmocka_unit_test(test_overflow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
