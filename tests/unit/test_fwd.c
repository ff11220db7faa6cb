/*
 * fwd: the credential proxy's forwarder, through real sockets. The
 * forwarder runs on its own libuv loop in a thread; the test is the agent
 * (TCP clients to 127.0.0.1) and the runner (a unix socket it listens on),
 * with blocking calls bounded by poll timeouts.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "al_err.h"
#include "fwd.h"
#include "testutil.h"

#define WAIT_MS 5000
#define BIG (1u << 20) /* bytes each way */

struct fx {
    uv_loop_t loop;
    uv_async_t stop;
    pthread_t th;
    struct fwd *f;
    int port;
    int srv; /* the "runner": a listening unix socket */
    char dir[64];
    char path[96];
    int fds_before;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_stop(uv_async_t *a)
{
    struct fx *x = a->data;
    fwd_free(x->f);
    uv_close((uv_handle_t *)a, NULL);
}

static void *loop_main(void *arg)
{
    struct fx *x = arg;
    (void)uv_run(&x->loop, UV_RUN_DEFAULT);
    return NULL;
}

/* A forwarder to a unix socket at x->path; with_server: listening there. */
static struct fx *start(int with_server)
{
    struct fx *x = calloc(1, sizeof *x);
    assert_non_null(x);
    x->fds_before = tu_count_fds();
    (void)snprintf(x->dir, sizeof x->dir, "/tmp/al-fwd-XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    (void)snprintf(x->path, sizeof x->path, "%s/proxy.sock", x->dir);
    x->srv = -1;
    if (with_server) {
        x->srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un u = {.sun_family = AF_UNIX};
        (void)snprintf(u.sun_path, sizeof u.sun_path, "%s", x->path);
        assert_int_equal(bind(x->srv, (struct sockaddr *)&u, sizeof u), 0);
        assert_int_equal(listen(x->srv, 64), 0);
    }
    int lfd = -1;
    char err[256] = "";
    assert_int_equal(fwd_listen(0, &lfd, err, sizeof err), AL_OK);
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    x->port = ntohs(a.sin_port);
    assert_int_equal(uv_loop_init(&x->loop), 0);
    struct fwd_config cfg = {.listen_fd = lfd, .socket = x->path};
    assert_int_equal(fwd_new(&x->loop, &cfg, &x->f, err, sizeof err), AL_OK);
    assert_int_equal(uv_async_init(&x->loop, &x->stop, on_stop), 0);
    x->stop.data = x;
    assert_int_equal(pthread_create(&x->th, NULL, loop_main, x), 0);
    return x;
}

static void stop(struct fx *x)
{
    (void)uv_async_send(&x->stop);
    assert_int_equal(pthread_join(x->th, NULL), 0);
    assert_int_equal(uv_loop_close(&x->loop), 0); /* every handle closed */
    if (x->srv >= 0)
        (void)close(x->srv);
    (void)unlink(x->path);
    (void)rmdir(x->dir);
    assert_int_equal(tu_count_fds(), x->fds_before);
    free(x);
}

static int client(const struct fx *x)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)x->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof a), 0);
    return c;
}

static int accept_one(const struct fx *x)
{
    struct pollfd p = {.fd = x->srv, .events = POLLIN};
    assert_int_equal(poll(&p, 1, WAIT_MS), 1);
    int s = accept4(x->srv, NULL, NULL, SOCK_CLOEXEC);
    assert_true(s >= 0);
    return s;
}

/* Read until n bytes or EOF (the bytes read), within WAIT_MS. */
static size_t read_n(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    int64_t deadline = now_ms() + WAIT_MS;
    while (got < n) {
        int left = (int)(deadline - now_ms());
        assert_true(left > 0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0)
            continue;
        ssize_t m = read(fd, buf + got, n - got);
        if (m == 0 || (m < 0 && errno == ECONNRESET))
            break;
        assert_true(m > 0 || errno == EINTR);
        if (m > 0)
            got += (size_t)m;
    }
    return got;
}

/* Write all of buf to a while reading what arrives on b into out (n bytes),
 * so that neither side's buffers fill up with the other waiting. */
static void pump(int a, const uint8_t *buf, int b, uint8_t *out, size_t n)
{
    size_t sent = 0, got = 0;
    int64_t deadline = now_ms() + 4 * WAIT_MS;
    while (got < n) {
        int left = (int)(deadline - now_ms());
        assert_true(left > 0);
        struct pollfd p[2] = {{.fd = sent < n ? a : -1, .events = POLLOUT},
                              {.fd = b, .events = POLLIN}};
        if (poll(p, 2, left) <= 0)
            continue;
        if (p[0].revents & POLLOUT) {
            ssize_t m = send(a, buf + sent, n - sent > 65536 ? 65536 : n - sent, MSG_DONTWAIT);
            if (m > 0)
                sent += (size_t)m;
        }
        if (p[1].revents & (POLLIN | POLLHUP)) {
            ssize_t m = recv(b, out + got, n - got, MSG_DONTWAIT);
            assert_true(m != 0); /* no EOF before all of it */
            if (m > 0)
                got += (size_t)m;
        }
    }
}

static uint8_t *random_bytes(size_t n, uint64_t seed)
{
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)tu_rand(&seed);
    return b;
}

/* A megabyte each way, byte for byte, on three connections in turn. */
static void test_copies_both_ways(void **state)
{
    (void)state;
    struct fx *x = start(1);
    uint8_t *up = random_bytes(BIG, 1), *down = random_bytes(BIG, 2), *got = malloc(BIG);
    assert_non_null(got);
    for (int k = 0; k < 3; k++) {
        int c = client(x);
        int s = accept_one(x);
        pump(c, up, s, got, BIG);
        assert_memory_equal(got, up, BIG);
        pump(s, down, c, got, BIG);
        assert_memory_equal(got, down, BIG);
        (void)close(c);
        assert_int_equal(read_n(s, got, 1), 0); /* the agent's close reaches the runner */
        (void)close(s);
    }
    free(up);
    free(down);
    free(got);
    stop(x);
}

/* The agent's half close is the runner's EOF, and the answer still comes
 * whole, then its EOF: nothing is lost to a reset. */
static void test_half_close_both_ways(void **state)
{
    (void)state;
    struct fx *x = start(1);
    int c = client(x);
    int s = accept_one(x);
    assert_int_equal(write(c, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    assert_int_equal(shutdown(c, SHUT_WR), 0);
    uint8_t buf[64];
    assert_int_equal(read_n(s, buf, sizeof buf), 18);
    uint8_t *answer = random_bytes(300000, 3), *got = malloc(300000);
    assert_non_null(got);
    pump(s, answer, c, got, 300000);
    assert_memory_equal(got, answer, 300000);
    assert_int_equal(shutdown(s, SHUT_WR), 0);
    assert_int_equal(read_n(c, buf, sizeof buf), 0); /* then its EOF */
    (void)close(c);
    (void)close(s);
    free(answer);
    free(got);
    stop(x);
}

/* No runner socket: the agent's connection is closed at once. */
static void test_no_socket_closes_at_once(void **state)
{
    (void)state;
    struct fx *x = start(0);
    int64_t t0 = now_ms();
    int c = client(x);
    uint8_t buf[8];
    assert_int_equal(read_n(c, buf, sizeof buf), 0);
    assert_true(now_ms() - t0 < 2000);
    (void)close(c);
    stop(x);
}

/* The runner ends its answer (EOF) and the agent never closes: the
 * forwarder closes both sides after FWD_CLOSE_MS, not before, not never. */
static void test_closed_after_the_answer(void **state)
{
    (void)state;
    struct fx *x = start(1);
    int c = client(x);
    int s = accept_one(x);
    assert_int_equal(write(s, "answer", 6), 6);
    assert_int_equal(shutdown(s, SHUT_WR), 0);
    uint8_t buf[16];
    assert_int_equal(read_n(c, buf, sizeof buf), 6); /* the answer, then its EOF */
    int64_t t0 = now_ms();
    struct pollfd p = {.fd = s, .events = POLLIN};
    assert_int_equal(poll(&p, 1, FWD_CLOSE_MS + 2 * FWD_TICK_MS + 2000), 1);
    assert_int_equal(read(s, buf, sizeof buf), 0); /* the forwarder closed the runner's side */
    int64_t took = now_ms() - t0;
    assert_true(took >= FWD_CLOSE_MS - FWD_TICK_MS);
    (void)close(c);
    (void)close(s);
    stop(x);
}

/* FWD_MAX_CONNS at once are carried; one more is closed at once, and the
 * next one after a slot frees is carried again. */
static void test_max_conns(void **state)
{
    (void)state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rlim_t want = 4 * FWD_MAX_CONNS + 64; /* both ends here, and the forwarder's two */
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
        skip();
    struct rlimit raised = {want, rl.rlim_max};
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur < want)
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &raised), 0);
    struct fx *x = start(1);
    int *c = calloc(FWD_MAX_CONNS, sizeof *c), *s = calloc(FWD_MAX_CONNS, sizeof *s);
    assert_non_null(c);
    assert_non_null(s);
    for (int i = 0; i < FWD_MAX_CONNS; i++) {
        c[i] = client(x);
        s[i] = accept_one(x); /* the forwarder connected it: it is counted */
    }
    uint8_t buf[4];
    int extra = client(x);
    assert_int_equal(read_n(extra, buf, sizeof buf), 0); /* closed at once */
    (void)close(extra);
    struct pollfd p = {.fd = x->srv, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 200), 0);     /* and never reached the runner */
    assert_int_equal(write(c[7], "ok", 2), 2); /* the others still carry */
    assert_int_equal(read_n(s[7], buf, 2), 2);
    (void)close(c[0]);
    assert_int_equal(read_n(s[0], buf, sizeof buf), 0);
    (void)close(s[0]); /* both directions end: the slot is free */
    int64_t deadline = now_ms() + WAIT_MS, carried = 0;
    while (!carried && now_ms() < deadline) {
        c[0] = client(x);
        p.revents = 0;
        if (poll(&p, 1, 200) == 1) {
            s[0] = accept_one(x);
            carried = 1;
        } else {
            (void)close(c[0]); /* the forwarder had not seen the close yet */
        }
    }
    assert_true(carried);
    for (int i = 0; i < FWD_MAX_CONNS; i++) {
        (void)close(c[i]);
        (void)close(s[i]);
    }
    free(c);
    free(s);
    stop(x);
    (void)setrlimit(RLIMIT_NOFILE, &rl);
}

/* Stopped with connections open: every handle and descriptor goes. */
static void test_free_with_open_connections(void **state)
{
    (void)state;
    struct fx *x = start(1);
    int c[4], s[4];
    for (int i = 0; i < 4; i++) {
        c[i] = client(x);
        s[i] = accept_one(x);
    }
    assert_int_equal(write(c[0], "x", 1), 1);
    (void)uv_async_send(&x->stop);
    assert_int_equal(pthread_join(x->th, NULL), 0);
    assert_int_equal(uv_loop_close(&x->loop), 0);
    uint8_t buf[4];
    for (int i = 0; i < 4; i++) {
        assert_true(read_n(c[i], buf, sizeof buf) == 0);
        (void)close(c[i]);
        (void)close(s[i]);
    }
    (void)close(x->srv);
    (void)unlink(x->path);
    (void)rmdir(x->dir);
    assert_int_equal(tu_count_fds(), x->fds_before);
    free(x);
}

static void test_bad_config(void **state)
{
    (void)state;
    int lfd = -1;
    char err[256] = "";
    assert_int_equal(fwd_listen(70000, &lfd, err, sizeof err), AL_E_INVAL);
    assert_int_equal(fwd_listen(0, &lfd, err, sizeof err), AL_OK);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct fwd *f = NULL;
    struct fwd_config cfg = {.listen_fd = lfd, .socket = "relative.sock"};
    assert_int_equal(fwd_new(&loop, &cfg, &f, err, sizeof err), AL_E_INVAL);
    assert_null(f);
    assert_non_null(strstr(err, "absolute path"));
    assert_int_equal(fcntl(lfd, F_GETFD), -1); /* taken, and closed */
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* libuv opens a pipe of its own, once per process, at its first loop:
 * opened before the tests count descriptors, it is not taken for a leak. */
static int libuv_once(void **state)
{
    (void)state;
    uv_loop_t l;
    if (uv_loop_init(&l) != 0)
        return -1;
    return uv_loop_close(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copies_both_ways),
        cmocka_unit_test(test_half_close_both_ways),
        cmocka_unit_test(test_no_socket_closes_at_once),
        cmocka_unit_test(test_closed_after_the_answer),
        cmocka_unit_test(test_max_conns),
        cmocka_unit_test(test_free_with_open_connections),
        cmocka_unit_test(test_bad_config),
    };
    return cmocka_run_group_tests(tests, libuv_once, NULL);
}
