/*
 * Unit tests for vtwork: every byte pushed reaches its target once and in
 * order, across many wraps of the ring; vtw_sync returns only when the
 * thread has fed everything (with a feed slow enough that it would not
 * otherwise); a full ring says so and calls on_room when room comes back;
 * a push over the room is refused and queues nothing; feed failures reach
 * the loop with their channel and count; vtw_close feeds what is queued;
 * a mark is passed only once every record pushed before it is fed, and
 * on_mark comes for every mark asked for that was not already passed, the
 * earliest first; a thread asleep is woken once per VTW_WAKE_BYTES of
 * paced pushes, not once per push, and a lone small push is still fed,
 * by the loop's timer, without a vtw_sync.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>
#include <uv.h>

#include "al_err.h"
#include "vtwork.h"

#define TARGETS 3
#define SINK_MAX ((size_t)4 * 1024 * 1024)

struct sink {
    uint8_t *buf;
    size_t len;
    _Atomic unsigned feeds;    /* read on the loop while the thread feeds */
    int fail;                  /* every feed fails with AL_E_NOMEM */
    _Atomic unsigned sleep_us; /* each feed takes this long */
    _Atomic int in_feed;       /* a feed runs now */
    _Atomic long tid;          /* the thread's, as the last feed saw it */
};

struct fx {
    uv_loop_t loop;
    struct sink sinks[TARGETS];
    unsigned rooms;
    unsigned errors, error_count;
    uint32_t error_ch;
    int error_rc;
    /* on_mark: how many calls, and at the last one, whether the watched
     * mark was passed and how many feeds sink 0 had had */
    struct vtw *w;
    unsigned marks;
    size_t watch;
    int watch_passed;
    unsigned feeds0;
};

static int feed(void *target, const uint8_t *p, size_t n)
{
    struct sink *s = target;
    atomic_store(&s->in_feed, 1);
    atomic_store(&s->tid, (long)syscall(SYS_gettid));
    unsigned us = atomic_load(&s->sleep_us);
    if (us) {
        struct timespec ts = {0, (long)us * 1000L};
        nanosleep(&ts, NULL);
    }
    s->feeds++;
    int rc = AL_OK;
    if (s->fail) {
        rc = AL_E_NOMEM;
    } else if (s->len + n <= SINK_MAX) {
        memcpy(s->buf + s->len, p, n);
        s->len += n;
    }
    atomic_store(&s->in_feed, 0);
    return rc;
}

static void on_room(void *ud)
{
    struct fx *f = ud;
    f->rooms++;
}

static void on_mark(void *ud)
{
    struct fx *f = ud;
    f->marks++;
    f->watch_passed = vtw_passed(f->w, f->watch);
    f->feeds0 = f->sinks[0].feeds;
}

static void on_error(void *ud, uint32_t ch, int rc, unsigned count)
{
    struct fx *f = ud;
    f->errors++;
    f->error_count += count;
    f->error_ch = ch;
    f->error_rc = rc;
}

static struct vtw *fx_open(struct fx *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    for (int i = 0; i < TARGETS; i++) {
        f->sinks[i].buf = malloc(SINK_MAX);
        assert_non_null(f->sinks[i].buf);
    }
    struct vtw_config c = {
        .feed = feed, .on_room = on_room, .on_error = on_error, .on_mark = on_mark, .ud = f};
    struct vtw *w = NULL;
    assert_int_equal(vtw_new(&f->loop, &c, &w), AL_OK);
    assert_non_null(w);
    f->w = w;
    return w;
}

static void fx_close(struct fx *f, struct vtw *w)
{
    vtw_close(w);
    assert_int_equal(uv_run(&f->loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    for (int i = 0; i < TARGETS; i++)
        free(f->sinks[i].buf);
}

/* The byte at position i of target t's stream. */
static uint8_t byte_of(int t, size_t i)
{
    return (uint8_t)(i * 31u + (size_t)t * 7u + (i >> 9));
}

static void test_order_across_wraps(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    size_t sent[TARGETS] = {0};
    for (int t = 0; t < TARGETS; t++)
        f.sinks[t].sleep_us = 200; /* slower than the pushes: the ring fills */
    static uint8_t chunk[VTW_PUSH_MAX];
    unsigned seed = 12345, waits = 0;
    /* about 24 rings' worth, in pushes of 1 byte to VTW_PUSH_MAX */
    while (sent[0] + sent[1] + sent[2] < 24u * VTW_RING) {
        seed = seed * 1103515245u + 12345u;
        int t = (int)((seed >> 16) % TARGETS);
        size_t n = 1 + (seed >> 3) % ((seed & 1) ? 97u : VTW_PUSH_MAX);
        for (size_t i = 0; i < n; i++)
            chunk[i] = byte_of(t, sent[t] + i);
        size_t room = vtw_room(w, n);
        if (room < n) { /* the loop would poll again on on_room */
            unsigned before = f.rooms;
            while (f.rooms == before)
                assert_int_equal(uv_run(&f.loop, UV_RUN_ONCE), 1);
            waits++;
            continue; /* the same draw would differ: just draw again */
        }
        assert_true(room <= VTW_PUSH_MAX);
        assert_int_equal(vtw_push(w, &f.sinks[t], (uint32_t)t, chunk, n), AL_OK);
        sent[t] += n;
    }
    vtw_sync(w);
    for (int t = 0; t < TARGETS; t++) {
        assert_int_equal(f.sinks[t].len, sent[t]);
        for (size_t i = 0; i < sent[t]; i++)
            if (f.sinks[t].buf[i] != byte_of(t, i))
                fail_msg("target %d: byte %zu of %zu differs", t, i, sent[t]);
    }
    assert_true(waits > 0); /* the ring did fill */
    assert_int_equal(f.errors, 0);
    fx_close(&f, w);
}

static void test_sync_waits_for_the_thread(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    f.sinks[0].sleep_us = 2000; /* 20 feeds: 40 ms */
    uint8_t b[100];
    memset(b, 'x', sizeof b);
    for (int i = 0; i < 20; i++)
        assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, sizeof b), AL_OK);
    vtw_sync(w);
    assert_int_equal(f.sinks[0].feeds, 20);
    assert_int_equal(f.sinks[0].len, 2000);
    assert_int_equal(atomic_load(&f.sinks[0].in_feed), 0);
    vtw_sync(w); /* nothing queued: returns at once */
    fx_close(&f, w);
}

static void test_wakes_after_idle(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    uint8_t b[64];
    memset(b, 'w', sizeof b);
    for (int i = 0; i < 5; i++) {
        struct timespec ts = {0, 5000000L}; /* the thread has gone to sleep */
        nanosleep(&ts, NULL);
        assert_int_equal(vtw_push(w, &f.sinks[1], 1, b, sizeof b), AL_OK);
        vtw_sync(w);
        assert_int_equal(f.sinks[1].len, (size_t)(i + 1) * sizeof b);
    }
    fx_close(&f, w);
}

static void test_full_ring_and_refused_push(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    f.sinks[0].sleep_us = 20000; /* the thread is slow: the ring fills */
    uint8_t b[4096];
    memset(b, 'y', sizeof b);
    size_t pushed = 0;
    while (vtw_room(w, sizeof b) >= sizeof b) {
        assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, sizeof b), AL_OK);
        pushed += sizeof b;
    }
    assert_true(pushed >= VTW_RING - 2 * (sizeof b + 64));
    size_t room = vtw_room(w, sizeof b);
    assert_true(room < sizeof b);
    assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, room + 8), AL_E_LIMIT);
    assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, 0), AL_E_INVAL);
    assert_int_equal(vtw_push(w, NULL, 0, b, 1), AL_E_INVAL);
    /* on_room comes, on the loop, once the thread has made room */
    while (f.rooms == 0)
        assert_int_equal(uv_run(&f.loop, UV_RUN_ONCE), 1);
    assert_true(vtw_room(w, sizeof b) >= sizeof b);
    f.sinks[0].sleep_us = 0;
    vtw_sync(w);
    assert_int_equal(f.sinks[0].len, pushed); /* the refused pushes queued nothing */
    fx_close(&f, w);
}

static void test_errors_reach_the_loop(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    f.sinks[1].fail = 1;
    uint8_t b[10] = {0};
    for (int i = 0; i < 5; i++)
        assert_int_equal(vtw_push(w, &f.sinks[1], 42, b, sizeof b), AL_OK);
    assert_int_equal(vtw_push(w, &f.sinks[0], 7, b, sizeof b), AL_OK);
    vtw_sync(w);
    while (f.error_count < 5)
        assert_int_equal(uv_run(&f.loop, UV_RUN_ONCE), 1);
    assert_int_equal(f.error_count, 5);
    assert_int_equal(f.error_ch, 42);
    assert_int_equal(f.error_rc, AL_E_NOMEM);
    assert_int_equal(f.sinks[0].len, sizeof b);
    fx_close(&f, w);
}

static void test_close_feeds_what_is_queued(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    f.sinks[2].sleep_us = 1000;
    uint8_t b[300];
    memset(b, 'z', sizeof b);
    for (int i = 0; i < 30; i++)
        assert_int_equal(vtw_push(w, &f.sinks[2], 2, b, sizeof b), AL_OK);
    vtw_close(w); /* joins the thread: every record fed first */
    assert_int_equal(f.sinks[2].feeds, 30);
    assert_int_equal(f.sinks[2].len, 30 * sizeof b);
    assert_int_equal(uv_run(&f.loop, UV_RUN_DEFAULT), 0);
    assert_int_equal(uv_loop_close(&f.loop), 0);
    for (int i = 0; i < TARGETS; i++)
        free(f.sinks[i].buf);
}

static void on_guard(uv_timer_t *h)
{
    (void)h;
    fail_msg("no on_mark within 5 s");
}

/* Runs the loop until on_mark has come (a guard timer fails the test
 * after 5 s). */
static void wait_mark(struct fx *f, unsigned before)
{
    uv_timer_t guard;
    assert_int_equal(uv_timer_init(&f->loop, &guard), 0);
    assert_int_equal(uv_timer_start(&guard, on_guard, 5000, 0), 0);
    while (f->marks == before)
        (void)uv_run(&f->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&guard, NULL);
    (void)uv_run(&f->loop, UV_RUN_NOWAIT);
}

static void test_marks(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    /* nothing queued: a mark is passed at once, and no call comes */
    size_t m0 = vtw_mark(w);
    assert_true(vtw_passed(w, m0));
    assert_int_equal(vtw_notify(w, m0), 1);
    /* ten slow records for sink 0, the mark, ten slow ones for sink 1 */
    f.sinks[0].sleep_us = 3000;
    f.sinks[1].sleep_us = 20000; /* 200 ms: the loop has long seen the call */
    uint8_t b[200];
    memset(b, 'm', sizeof b);
    for (int i = 0; i < 10; i++)
        assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, sizeof b), AL_OK);
    size_t m1 = vtw_mark(w);
    for (int i = 0; i < 10; i++)
        assert_int_equal(vtw_push(w, &f.sinks[1], 1, b, sizeof b), AL_OK);
    size_t m2 = vtw_mark(w);
    assert_true(m1 > m0 && m2 > m1);
    assert_false(vtw_passed(w, m1));
    f.watch = m1;
    assert_int_equal(vtw_notify(w, m1), 0);
    wait_mark(&f, 0);
    /* the call came once sink 0's ten were fed, while sink 1's were not */
    assert_true(f.watch_passed);
    assert_int_equal(f.feeds0, 10);
    assert_false(vtw_passed(w, m2));
    /* two marks asked for, the later first: the call comes once the
     * earlier is passed, not held for the later (three records of 200 ms
     * for sink 0, whose ten were fed, lie between them); the later is
     * asked for again and called too */
    size_t m3 = vtw_mark(w);
    f.sinks[0].sleep_us = 200000;
    for (int i = 0; i < 3; i++)
        assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, sizeof b), AL_OK);
    size_t m4 = vtw_mark(w);
    f.watch = m2;
    unsigned before = f.marks;
    assert_int_equal(vtw_notify(w, m4), 0);
    assert_int_equal(vtw_notify(w, m2), 0);
    wait_mark(&f, before);
    assert_true(f.watch_passed);
    assert_true(vtw_passed(w, m2) && vtw_passed(w, m3));
    assert_false(vtw_passed(w, m4));
    assert_int_equal(f.sinks[1].feeds, 10);
    f.watch = m4;
    before = f.marks;
    if (vtw_notify(w, m4) == 0)
        wait_mark(&f, before);
    assert_true(vtw_passed(w, m4));
    assert_int_equal(f.sinks[0].feeds, 13);
    /* racing a quick thread: each mark asked for is passed at once or
     * its call comes; none is lost */
    f.sinks[0].sleep_us = f.sinks[1].sleep_us = 0;
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(vtw_push(w, &f.sinks[i & 1], 0, b, 1 + (size_t)i % sizeof b), AL_OK);
        size_t m = vtw_mark(w);
        f.watch = m;
        before = f.marks;
        if (vtw_notify(w, m) == 0) {
            wait_mark(&f, before);
            assert_true(vtw_passed(w, m));
        }
    }
    fx_close(&f, w);
}

/* How many times the thread with this tid has gone to sleep by itself. */
static long sleeps_of(long tid)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    long n = -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
            break;
    fclose(fp);
    assert_true(n >= 0);
    return n;
}

/* A flowing terminal's reads, paced so that the thread catches up and
 * goes to sleep between them: it is woken about once per VTW_WAKE_BYTES,
 * not once per read (each of those wake-ups costs both CPUs a switch). */
static void test_wakes_batched(void **state)
{
    (void)state;
    enum { PUSHES = 64 };
    struct fx f;
    struct vtw *w = fx_open(&f);
    static uint8_t b[4096];
    memset(b, 'p', sizeof b);
    assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, 16), AL_OK);
    vtw_sync(w); /* the thread has fed once: its tid is known */
    long tid = atomic_load(&f.sinks[0].tid);
    assert_true(tid > 0);
    long before = sleeps_of(tid);
    for (int i = 0; i < PUSHES; i++) {
        struct timespec ts = {0, 100000L}; /* 100 us: a 4 KiB feed takes a few */
        nanosleep(&ts, NULL);
        /* the loop does not turn here: its timer (VTW_WAKE_MS) would wake
         * the thread as often as a loaded machine stretches the pauses */
        assert_int_equal(vtw_push(w, &f.sinks[0], 0, b, sizeof b), AL_OK);
    }
    vtw_sync(w);
    long sleeps = sleeps_of(tid) - before;
    assert_int_equal(f.sinks[0].len, 16 + PUSHES * sizeof b);
    /* 256 KiB: 8 wakes by size; one per push (64) before batching */
    if (sleeps > PUSHES / 4)
        fail_msg("the thread slept %ld times for %d pushes", sleeps, PUSHES);
    fx_close(&f, w);
}

/* A push too small to wake the thread is fed anyway, once the loop runs
 * its timer: a quiet terminal's model is never left behind. */
static void test_lone_push_is_fed(void **state)
{
    (void)state;
    struct fx f;
    struct vtw *w = fx_open(&f);
    uint8_t b[10];
    memset(b, 'q', sizeof b);
    struct timespec ts = {0, 5000000L}; /* the thread has gone to sleep */
    nanosleep(&ts, NULL);
    assert_int_equal(vtw_push(w, &f.sinks[2], 2, b, sizeof b), AL_OK);
    /* the loop turns (never blocking: nothing else would wake it) for
     * 5 s at the most */
    for (int i = 0; vtw_busy(w); i++) {
        if (i == 5000)
            fail_msg("a lone push was not fed within 5 s");
        (void)uv_run(&f.loop, UV_RUN_NOWAIT);
        struct timespec ms = {0, 1000000L};
        nanosleep(&ms, NULL);
    }
    assert_int_equal(f.sinks[2].len, sizeof b);
    fx_close(&f, w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_across_wraps),
        cmocka_unit_test(test_sync_waits_for_the_thread),
        cmocka_unit_test(test_wakes_after_idle),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_full_ring_and_refused_push),
        cmocka_unit_test(test_errors_reach_the_loop),
        cmocka_unit_test(test_close_feeds_what_is_queued),
        cmocka_unit_test(test_wakes_batched),
        cmocka_unit_test(test_lone_push_is_fed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
