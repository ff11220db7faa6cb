/*
 * Tests of the CLI's output queue (src/cli/cli_outq.c, pure): bytes come
 * out in order however the writes are cut, credit is reported per tag
 * only for bytes written (or dropped on purpose), the limit is exact, a
 * fresh snapshot drops what was not begun but finishes a piece begun,
 * and a model check with random pushes, writes and drops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "al_err.h"
#include "cli_outq.h"
#include "testutil.h"

/* Write at most n bytes out of q into sink (as writev would). */
static size_t drain(struct cli_outq *q, size_t n, uint8_t *sink, size_t *sink_len,
                    size_t credit[CLI_OUTQ_TAGS])
{
    struct iovec iov[CLI_OUTQ_IOV_MAX];
    int k = cli_outq_iov(q, iov, CLI_OUTQ_IOV_MAX);
    size_t done = 0;
    for (int i = 0; i < k && done < n; i++) {
        size_t take = iov[i].iov_len < n - done ? iov[i].iov_len : n - done;
        memcpy(sink + *sink_len, iov[i].iov_base, take);
        *sink_len += take;
        done += take;
    }
    cli_outq_advance(q, done, credit);
    return done;
}

static void test_order_and_credit(void **state)
{
    (void)state;
    struct cli_outq q;
    cli_outq_init(&q, 100);
    size_t credit[CLI_OUTQ_TAGS] = {0};
    assert_int_equal(cli_outq_push(&q, (const uint8_t *)"hello ", 6, 1), AL_OK);
    assert_int_equal(cli_outq_push(&q, (const uint8_t *)"[status]", 8, CLI_OUTQ_NOCREDIT), AL_OK);
    assert_int_equal(cli_outq_push(&q, (const uint8_t *)"err", 3, 2), AL_OK);
    assert_int_equal(cli_outq_len(&q), 17);
    assert_int_equal(cli_outq_room(&q), 83);
    uint8_t sink[64];
    size_t sl = 0;
    /* a short write inside the first piece: credit only for those bytes */
    assert_int_equal(drain(&q, 4, sink, &sl, credit), 4);
    assert_int_equal(credit[1], 4);
    assert_int_equal(credit[2], 0);
    assert_int_equal(drain(&q, 9, sink, &sl, credit), 9);
    assert_int_equal(credit[1], 6);
    assert_int_equal(credit[2], 0); /* the status line holds no credit */
    assert_int_equal(drain(&q, 100, sink, &sl, credit), 4);
    assert_int_equal(credit[2], 3);
    assert_int_equal(sl, 17);
    assert_memory_equal(sink, "hello [status]err", 17);
    assert_int_equal(cli_outq_len(&q), 0);
    assert_int_equal(cli_outq_iov(&q, NULL, 0), 0);
    /* advancing an empty queue, or past its end, is harmless */
    cli_outq_advance(&q, 10, credit);
    assert_int_equal(cli_outq_push(&q, (const uint8_t *)"ab", 2, 0), AL_OK);
    cli_outq_advance(&q, 10, credit);
    assert_int_equal(credit[0], 2);
    assert_int_equal(cli_outq_len(&q), 0);
    cli_outq_free(&q);
}

static void test_limit(void **state)
{
    (void)state;
    struct cli_outq q;
    cli_outq_init(&q, 10);
    uint8_t b[11] = {0};
    assert_int_equal(cli_outq_push(&q, b, 11, 0), AL_E_TOOBIG);
    assert_int_equal(cli_outq_len(&q), 0);
    assert_int_equal(cli_outq_push(&q, b, 6, 0), AL_OK);
    assert_int_equal(cli_outq_push(&q, b, 5, 0), AL_E_TOOBIG); /* nothing of it queued */
    assert_int_equal(cli_outq_len(&q), 6);
    assert_int_equal(cli_outq_push(&q, b, 4, 0), AL_OK); /* exactly full */
    assert_int_equal(cli_outq_room(&q), 0);
    assert_int_equal(cli_outq_push(&q, b, 1, CLI_OUTQ_NOCREDIT), AL_E_TOOBIG);
    assert_int_equal(cli_outq_push(&q, b, 0, 0), AL_OK); /* nothing is always fine */
    assert_int_equal(cli_outq_push(&q, b, 1, CLI_OUTQ_TAGS), AL_E_INVAL);
    assert_int_equal(cli_outq_push(&q, b, 1, -2), AL_E_INVAL);
    cli_outq_advance(&q, 3, NULL);
    assert_int_equal(cli_outq_room(&q), 3);
    cli_outq_free(&q);
    assert_int_equal(cli_outq_len(&q), 0);
}

static void test_drop_unstarted(void **state)
{
    (void)state;
    struct cli_outq q;
    cli_outq_init(&q, 1000);
    size_t credit[CLI_OUTQ_TAGS] = {0};
    cli_outq_push(&q, (const uint8_t *)"\033[1;31mred", 10, 1);
    cli_outq_push(&q, (const uint8_t *)"more", 4, 1);
    cli_outq_push(&q, (const uint8_t *)"old snapshot", 12, CLI_OUTQ_NOCREDIT);
    cli_outq_push(&q, (const uint8_t *)"x", 1, 2);
    uint8_t sink[64];
    size_t sl = 0;
    drain(&q, 3, sink, &sl, credit); /* "\033[1" written: the sequence is begun */
    assert_int_equal(credit[1], 3);
    size_t dropped = cli_outq_drop_unstarted(&q, credit);
    assert_int_equal(dropped, 4 + 12 + 1);
    assert_int_equal(credit[1], 3 + 4); /* dropped data is credited: superseded */
    assert_int_equal(credit[2], 1);
    assert_int_equal(cli_outq_len(&q), 7); /* the rest of the begun piece stays */
    cli_outq_push(&q, (const uint8_t *)"NEW", 3, CLI_OUTQ_NOCREDIT);
    drain(&q, 100, sink, &sl, credit);
    assert_int_equal(sl, 13);
    assert_memory_equal(sink, "\033[1;31mredNEW", 13);
    assert_int_equal(credit[1], 10 + 4);
    /* nothing begun: everything goes */
    cli_outq_push(&q, (const uint8_t *)"abc", 3, 1);
    assert_int_equal(cli_outq_drop_unstarted(&q, credit), 3);
    assert_int_equal(cli_outq_len(&q), 0);
    assert_int_equal(cli_outq_drop_unstarted(&q, credit), 0);
    cli_outq_push(&q, (const uint8_t *)"abc", 3, 1); /* the tail is right after a drop */
    cli_outq_push(&q, (const uint8_t *)"def", 3, 1);
    sl = 0;
    drain(&q, 100, sink, &sl, credit);
    assert_memory_equal(sink, "abcdef", 6);
    cli_outq_free(&q);
}

static void test_clear_and_iov_cap(void **state)
{
    (void)state;
    struct cli_outq q;
    cli_outq_init(&q, 1 << 20);
    size_t credit[CLI_OUTQ_TAGS] = {0};
    for (int i = 0; i < CLI_OUTQ_IOV_MAX + 10; i++)
        assert_int_equal(cli_outq_push(&q, (const uint8_t *)"ab", 2, i % 2 ? 1 : CLI_OUTQ_NOCREDIT),
                         AL_OK);
    struct iovec iov[CLI_OUTQ_IOV_MAX];
    assert_int_equal(cli_outq_iov(&q, iov, 3), 3);
    assert_int_equal(cli_outq_iov(&q, iov, CLI_OUTQ_IOV_MAX), CLI_OUTQ_IOV_MAX);
    cli_outq_advance(&q, 1, credit);
    assert_int_equal(cli_outq_clear(&q, credit), 2 * (CLI_OUTQ_IOV_MAX + 10) - 1);
    /* the odd pieces hold credit: (CLI_OUTQ_IOV_MAX + 10) / 2 of 2 bytes */
    assert_int_equal(credit[1], CLI_OUTQ_IOV_MAX + 10);
    assert_int_equal(cli_outq_len(&q), 0);
    cli_outq_free(&q);
}

/* Random pushes, short writes and drops against a model: what comes out is
 * the pushed bytes in order minus the dropped pieces; credit = data bytes
 * written or dropped, and all of it once the queue is empty. */
static void test_random_model(void **state)
{
    (void)state;
    uint64_t seed = 1234;
    static uint8_t expect[1 << 16], sink[1 << 16];
    for (int round = 0; round < 50; round++) {
        struct cli_outq q;
        cli_outq_init(&q, 4096);
        size_t credit[CLI_OUTQ_TAGS] = {0}, pushed[CLI_OUTQ_TAGS] = {0};
        size_t el = 0, sl = 0;
        uint8_t next = 0;
        /* the model: a list of (start in expect, len, tag, started) */
        struct {
            size_t start, len;
            int tag;
        } m[512];
        size_t mh = 0, mt = 0, head_pos = 0;
        for (int step = 0; step < 300; step++) {
            unsigned op = (unsigned)(tu_rand(&seed) % 10);
            if (op < 5 && mt < 512) {
                size_t n = 1 + tu_rand(&seed) % 200;
                int tag = (int)(tu_rand(&seed) % 4) - 1; /* -1: no credit */
                uint8_t b[200];
                for (size_t i = 0; i < n; i++)
                    b[i] = next++;
                int rc = cli_outq_push(&q, b, n, tag);
                if (rc == AL_E_TOOBIG) {
                    next = (uint8_t)(next - n);
                    continue;
                }
                assert_int_equal(rc, AL_OK);
                m[mt].start = el;
                m[mt].len = n;
                m[mt].tag = tag;
                mt++;
                memcpy(expect + el, b, n);
                el += n;
                if (tag >= 0)
                    pushed[tag] += n;
            } else if (op < 9) {
                size_t want = tu_rand(&seed) % 300, before = sl;
                size_t got = drain(&q, want, sink, &sl, credit);
                /* follow the model */
                size_t k = got;
                while (k > 0) {
                    size_t left = m[mh].len - head_pos;
                    size_t t = left < k ? left : k;
                    assert_memory_equal(sink + before, expect + m[mh].start + head_pos, t);
                    before += t;
                    head_pos += t;
                    k -= t;
                    if (head_pos == m[mh].len) {
                        mh++;
                        head_pos = 0;
                    }
                }
            } else {
                size_t first = head_pos > 0 ? mh + 1 : mh, dropped = 0;
                for (size_t i = first; i < mt; i++)
                    dropped += m[i].len;
                assert_int_equal(cli_outq_drop_unstarted(&q, credit), dropped);
                mt = first;
            }
            size_t qlen = 0;
            for (size_t i = mh; i < mt; i++)
                qlen += m[i].len;
            assert_int_equal(cli_outq_len(&q), qlen - head_pos);
        }
        drain(&q, SIZE_MAX, sink, &sl, credit);
        assert_int_equal(cli_outq_len(&q), 0);
        for (int t = 0; t < CLI_OUTQ_TAGS; t++)
            assert_int_equal(credit[t], pushed[t]);
        cli_outq_free(&q);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_credit), cmocka_unit_test(test_limit),
        cmocka_unit_test(test_drop_unstarted),   cmocka_unit_test(test_clear_and_iov_cap),
        cmocka_unit_test(test_random_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
