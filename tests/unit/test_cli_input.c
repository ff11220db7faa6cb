/*
 * Tests of the CLI's input bookkeeping (src/cli/cli_input.c, pure): the
 * held buffer's limit, the copy of unacknowledged bytes and its offsets,
 * what a ROLE does with it (writer: the bytes the host lacks go back in
 * front; viewer: everything is dropped), and a simulation of a flaky
 * connection in which every typed byte that was accepted reaches the host
 * exactly once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "al_err.h"
#include "cli_input.h"
#include "testutil.h"

static void test_hold_limit(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 8, 16), AL_OK);
    assert_int_equal(cli_input_hold(&in, (const uint8_t *)"abcde", 5), 5);
    assert_int_equal(cli_input_hold(&in, (const uint8_t *)"fghij", 5), 3); /* full at 8 */
    assert_int_equal(cli_input_hold(&in, (const uint8_t *)"k", 1), 0);
    assert_int_equal(cli_input_held(&in), 8);
    const uint8_t *p;
    assert_int_equal(cli_input_peek(&in, &p), 8);
    assert_memory_equal(p, "abcdefgh", 8);
    cli_input_free(&in);
    assert_int_equal(cli_input_init(&in, 0, 16), AL_E_INVAL);
    assert_int_equal(cli_input_init(&in, 16, 0), AL_E_INVAL);
}

static void test_sent_acked(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 64, 6), AL_OK);
    cli_input_hold(&in, (const uint8_t *)"0123456789", 10);
    const uint8_t *p;
    assert_int_equal(cli_input_peek(&in, &p), 6); /* limited by the copy's room */
    cli_input_sent(&in, 100, 4);                  /* "0123" at offsets 100..103 */
    assert_int_equal(cli_input_held(&in), 6);
    assert_int_equal(cli_input_unacked(&in), 4);
    assert_int_equal(cli_input_peek(&in, &p), 2);
    assert_memory_equal(p, "45", 2);
    cli_input_sent(&in, 104, 9); /* capped at what peek allowed */
    assert_int_equal(cli_input_unacked(&in), 6);
    assert_int_equal(cli_input_held(&in), 4);
    cli_input_acked(&in, 99); /* below the copy: nothing */
    assert_int_equal(cli_input_unacked(&in), 6);
    cli_input_acked(&in, 103);
    assert_int_equal(cli_input_unacked(&in), 3);
    assert_int_equal(cli_input_peek(&in, &p), 3);
    cli_input_acked(&in, 200); /* beyond: all gone, the copy restarts there */
    assert_int_equal(cli_input_unacked(&in), 0);
    cli_input_sent(&in, 300, 2); /* the stream moved on: the copy restarts at 300 */
    assert_int_equal(cli_input_unacked(&in), 2);
    cli_input_sent(&in, 500, 1); /* not following the copy: it restarts */
    assert_int_equal(cli_input_unacked(&in), 1);
    cli_input_sent(&in, 501, 0);
    cli_input_free(&in);
}

static void test_role_writer(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 64, 64), AL_OK);
    cli_input_hold(&in, (const uint8_t *)"abcdef", 6);
    cli_input_sent(&in, 10, 6);                    /* abcdef at 10..15 */
    cli_input_hold(&in, (const uint8_t *)"XY", 2); /* typed while down */
    /* the host got "ab" (in_next 12), the endpoint dropped the rest (its
     * end is 12 too): cdef go back before XY */
    assert_int_equal(cli_input_role(&in, 12, 12, 1), 4);
    const uint8_t *p;
    assert_int_equal(cli_input_peek(&in, &p), 6);
    assert_memory_equal(p, "cdefXY", 6);
    assert_int_equal(cli_input_unacked(&in), 0);
    cli_input_sent(&in, 12, 6);
    /* the host has everything and more (another writer typed): nothing back */
    assert_int_equal(cli_input_role(&in, 40, 40, 1), 0);
    assert_int_equal(cli_input_held(&in), 0);
    /* the host has less than the copy's start (it lost state): all back */
    cli_input_hold(&in, (const uint8_t *)"mn", 2);
    cli_input_sent(&in, 40, 2);
    assert_int_equal(cli_input_role(&in, 30, 30, 1), 2);
    assert_int_equal(cli_input_peek(&in, &p), 2);
    assert_memory_equal(p, "mn", 2);
    cli_input_free(&in);
}

/* The endpoint kept part of what it had (it had sent it before the ROLE):
 * that part stays in the copy, only the rest goes back. */
static void test_role_endpoint_kept(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 64, 64), AL_OK);
    cli_input_hold(&in, (const uint8_t *)"abcdefgh", 8);
    cli_input_sent(&in, 100, 8); /* 100..107 */
    cli_input_hold(&in, (const uint8_t *)"Z", 1);
    assert_int_equal(cli_input_role(&in, 102, 105, 1), 3); /* fgh back; cde kept */
    assert_int_equal(cli_input_unacked(&in), 3);
    const uint8_t *p;
    assert_int_equal(cli_input_peek(&in, &p), 4);
    assert_memory_equal(p, "fghZ", 4);
    cli_input_sent(&in, 105, 4); /* follows the kept part */
    assert_int_equal(cli_input_unacked(&in), 7);
    cli_input_acked(&in, 109);
    assert_int_equal(cli_input_unacked(&in), 0);
    /* the endpoint kept all: nothing back */
    cli_input_hold(&in, (const uint8_t *)"xy", 2);
    cli_input_sent(&in, 109, 2);
    assert_int_equal(cli_input_role(&in, 109, 111, 1), 0);
    assert_int_equal(cli_input_unacked(&in), 2);
    cli_input_free(&in);
}

static void test_role_viewer(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 64, 64), AL_OK);
    cli_input_hold(&in, (const uint8_t *)"abc", 3);
    cli_input_sent(&in, 0, 2);
    assert_int_equal(cli_input_role(&in, 1, 2, 0), 2); /* "c" held + "b" unacked */
    assert_int_equal(cli_input_held(&in), 0);
    assert_int_equal(cli_input_unacked(&in), 0);
    cli_input_free(&in);
}

/* A full held buffer and a full copy still fit when the copy comes back. */
static void test_role_when_full(void **state)
{
    (void)state;
    struct cli_input in;
    assert_int_equal(cli_input_init(&in, 4, 4), AL_OK);
    cli_input_hold(&in, (const uint8_t *)"abcd", 4);
    cli_input_sent(&in, 0, 4);
    assert_int_equal(cli_input_hold(&in, (const uint8_t *)"efgh", 4), 4);
    assert_int_equal(cli_input_role(&in, 0, 0, 1), 4);
    assert_int_equal(cli_input_held(&in), 8);
    const uint8_t *p;
    assert_int_equal(cli_input_peek(&in, &p), 4);
    assert_memory_equal(p, "abcdefgh", 8);
    assert_int_equal(cli_input_hold(&in, (const uint8_t *)"i", 1), 0); /* over held_max */
    cli_input_free(&in);
}

/*
 * The property: a client types, sends within a credit, the host receives
 * a prefix of what is in flight and acknowledges (lazily) a prefix of what
 * it received, and the connection drops at random. On each reconnect the
 * host says where stdin goes on (ROLE in_next = what it holds) and the
 * endpoint keeps a random part of what it had written from there (what it
 * had sent again before the ROLE) and resends it, dropping the rest.
 * Every byte the client accepted reaches the host exactly once, in order.
 */
static void test_flaky_link_exactly_once(void **state)
{
    (void)state;
    uint64_t seed = 99;
    static uint8_t typed[1 << 18], host[1 << 18], ep[1 << 18];
    for (int round = 0; round < 40; round++) {
        struct cli_input in;
        assert_int_equal(cli_input_init(&in, 512, 2048), AL_OK);
        size_t tl = 0, hl = 0; /* accepted typed bytes; bytes the host holds */
        uint64_t end = 0;      /* the endpoint's stdin end; ep[] holds its bytes by offset */
        uint64_t acked = 0;    /* what the host acknowledged */
        uint64_t wire = 0;     /* bytes [hl, wire) are on the wire, in order */
        uint8_t next = 1;
        int linked = 1;
        for (int step = 0; step < 3000; step++) {
            unsigned op = (unsigned)(tu_rand(&seed) % 12);
            if (op < 4) { /* type */
                uint8_t b[64];
                size_t n = 1 + tu_rand(&seed) % sizeof b;
                for (size_t i = 0; i < n; i++)
                    b[i] = next++;
                size_t k = cli_input_hold(&in, b, n);
                next = (uint8_t)(next - (n - k)); /* what did not fit was never typed */
                memcpy(typed + tl, b, k);
                tl += k;
            } else if (op < 7 && linked) { /* the endpoint takes and sends */
                cli_input_acked(&in, acked);
                const uint8_t *p;
                size_t n = cli_input_peek(&in, &p);
                size_t credit = 1024 - (size_t)(end - acked); /* a 1 KiB window */
                if (n > credit)
                    n = credit;
                memcpy(ep + end, p, n);
                cli_input_sent(&in, end, n);
                end += n;
                wire = end;
            } else if (op < 10 && linked) { /* the host receives some, acks lazily */
                size_t n = wire > hl ? tu_rand(&seed) % (wire - hl + 1) : 0;
                memcpy(host + hl, ep + hl, n);
                hl += n;
                if (tu_rand(&seed) % 3 == 0)
                    acked = hl;
            } else if (op == 10) { /* the connection drops: the wire is lost */
                linked = 0;
                wire = hl;
            } else if (!linked) { /* back: ROLE; the endpoint keeps [hl, kept) */
                linked = 1;
                uint64_t kept = hl + (end > hl ? tu_rand(&seed) % (end - hl + 1) : 0);
                end = kept;
                acked = hl;
                wire = kept; /* it resends them */
                (void)cli_input_role(&in, hl, kept, 1);
            }
        }
        /* a last good connection: everything goes through */
        if (!linked) {
            end = hl;
            acked = hl;
            wire = hl;
            (void)cli_input_role(&in, hl, hl, 1);
        }
        memcpy(host + hl, ep + hl, wire - hl);
        hl = wire;
        acked = hl;
        for (int guard = 0; guard < 100000 && cli_input_held(&in) > 0; guard++) {
            cli_input_acked(&in, acked);
            const uint8_t *p;
            size_t n = cli_input_peek(&in, &p);
            memcpy(host + hl, p, n);
            cli_input_sent(&in, end, n);
            end += n;
            hl += n;
            acked = hl;
        }
        assert_int_equal(cli_input_held(&in), 0);
        assert_int_equal(hl, tl);
        assert_memory_equal(host, typed, tl);
        cli_input_free(&in);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hold_limit),
        cmocka_unit_test(test_sent_acked),
        cmocka_unit_test(test_role_writer),
        cmocka_unit_test(test_role_endpoint_kept),
        cmocka_unit_test(test_role_viewer),
        cmocka_unit_test(test_role_when_full),
        cmocka_unit_test(test_flaky_link_exactly_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
