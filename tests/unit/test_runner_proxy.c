/*
 * Unit tests for runner_proxy: the runner's credential proxy listener on a
 * real loopback socket and a real unix socket, its host endpoint linked in
 * process to a controller endpoint (frames moved between the two by the
 * test). The addresses it accepts (loopback only); the canned 503 while no
 * link is ready; an agent's bytes carried raw on a proxy channel and the
 * controller's answer written back whole, then the connection closed; a
 * controller that does not serve the proxy: the connection is closed; a
 * link that drops mid-answer: the connection is closed at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "al_err.h"
#include "endpoint.h"
#include "frame.h"
#include "runner_proxy.h"

#define STEP_MAX 4000 /* loop turns a test waits at most (1 ms each) */

struct fix {
    uv_loop_t loop;
    struct ep *host, *ctl;
    struct runner_proxy *px;
    int ctl_serves;
    /* what the controller saw of its proxy channel */
    uint32_t ch;
    char got[4096];
    size_t got_len;
    int opened, closed, eof;
    char sock[108];
};

static void host_event(void *ud, const struct ep_event *ev)
{
    struct fix *f = ud;
    if (fr_is_proxy_channel(ev->channel) && f->px)
        runner_proxy_event(f->px, ev);
}

static void ctl_event(void *ud, const struct ep_event *ev)
{
    struct fix *f = ud;
    switch (ev->type) {
    case EP_EV_PROXY_OPEN:
        f->opened++;
        f->ch = ev->channel;
        break;
    case EP_EV_DATA:
        if (f->got_len + ev->len <= sizeof f->got) {
            memcpy(f->got + f->got_len, ev->data, ev->len);
            f->got_len += ev->len;
        }
        assert_int_equal(ep_consume(f->ctl, ev->channel, ev->stream, ev->len), 0);
        break;
    case EP_EV_EOF:
        f->eof++;
        break;
    case EP_EV_CLOSED:
        f->closed++;
        break;
    default:
        break;
    }
}

/* Move frames both ways until neither side has any. */
static void pump(struct fix *f)
{
    static uint8_t buf[AL_MAX_FRAME];
    for (int moved = 1, i = 0; moved && i < 1000; i++) {
        moved = 0;
        long n;
        while ((n = ep_output(f->host, buf, sizeof buf, 0)) > 0) {
            (void)ep_input(f->ctl, buf, (size_t)n, 0);
            moved = 1;
        }
        while ((n = ep_output(f->ctl, buf, sizeof buf, 0)) > 0) {
            (void)ep_input(f->host, buf, (size_t)n, 0);
            moved = 1;
        }
    }
}

static void turn(struct fix *f)
{
    pump(f);
    (void)uv_run(&f->loop, UV_RUN_NOWAIT);
    pump(f);
    usleep(1000);
}

static void link_up(struct fix *f)
{
    ep_link_up(f->host, 0);
    ep_link_up(f->ctl, 0);
    pump(f);
    assert_true(ep_ready(f->host));
}

static void fix_init(struct fix *f, int serves, const char *sock)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    struct ep_config c;
    ep_config_default(&c, FR_ROLE_HOST);
    c.ping_interval_us = c.idle_timeout_us = 0;
    c.on_event = host_event;
    c.ud = f;
    assert_int_equal(ep_new(&c, &f->host), 0);
    ep_config_default(&c, FR_ROLE_CONTROLLER);
    c.ping_interval_us = c.idle_timeout_us = 0;
    c.on_event = ctl_event;
    c.ud = f;
    c.serves_proxy = serves;
    assert_int_equal(ep_new(&c, &f->ctl), 0);
    if (sock)
        (void)snprintf(f->sock, sizeof f->sock, "%s", sock);
    struct runner_proxy_config pc = {
        .listen = "127.0.0.1:0", .socket = sock, .ep = f->host, .wake = NULL, .log = NULL};
    char why[256];
    assert_int_equal(runner_proxy_new(&f->loop, &pc, &f->px, why, sizeof why), 0);
    assert_true(runner_proxy_port(f->px) > 0);
}

static void fix_free(struct fix *f)
{
    runner_proxy_free(f->px);
    for (int i = 0; i < 100 && uv_run(&f->loop, UV_RUN_NOWAIT); i++)
        ;
    assert_int_equal(uv_loop_close(&f->loop), 0);
    ep_free(f->host);
    ep_free(f->ctl);
}

static int dial(struct fix *f)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)runner_proxy_port(f->px))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
    assert_true(rc == 0 || errno == EINPROGRESS);
    return fd;
}

/* Read from fd while turning the loop, until EOF (returns the bytes) or
 * the steps run out (fails). */
static size_t read_all(struct fix *f, int fd, char *out, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < STEP_MAX; i++) {
        turn(f);
        ssize_t n = read(fd, out + len, cap - 1 - len);
        if (n > 0) {
            len += (size_t)n;
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            out[len] = '\0';
            return len;
        }
    }
    fail_msg("the connection was not closed (%zu bytes read)", len);
    return 0;
}

static void wait_for(struct fix *f, const int *flag, const char *what)
{
    for (int i = 0; i < STEP_MAX && !*flag; i++)
        turn(f);
    if (!*flag)
        fail_msg("%s did not happen", what);
}

static void test_addr_ok(void **state)
{
    (void)state;
    static const struct {
        const char *addr;
        int ok;
    } cases[] = {
        {"127.0.0.1:0", 1},     {"127.0.0.1:8091", 1}, {"127.9.8.7:65535", 1},
        {"[::1]:0", 1},         {"0.0.0.0:8091", 0},   {"10.0.0.1:80", 0},
        {"[::]:80", 0},         {"127.0.0.1", 0},      {"127.0.0.1:", 0},
        {"127.0.0.1:65536", 0}, {"127.0.0.1:-1", 0},   {":80", 0},
        {"localhost:80", 0},    {"127.0.0.1:8x", 0},   {"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (runner_proxy_addr_ok(cases[i].addr) != cases[i].ok)
            fail_msg("%s: expected %d", cases[i].addr, cases[i].ok);
    assert_int_equal(runner_proxy_addr_ok(NULL), 0);
}

static void test_503_without_link(void **state)
{
    (void)state;
    static struct fix f;
    char sock[] = "/tmp/airlock-rpx-XXXXXX";
    assert_non_null(mkdtemp(sock));
    char path[64];
    (void)snprintf(path, sizeof path, "%s/proxy.sock", sock);
    fix_init(&f, 1, path);
    /* TCP */
    int fd = dial(&f);
    char buf[4096];
    size_t n = read_all(&f, fd, buf, sizeof buf);
    assert_true(n > 0);
    assert_non_null(strstr(buf, "HTTP/1.1 503 Service Unavailable\r\n"));
    assert_non_null(strstr(buf, "Connection: close\r\n"));
    assert_non_null(strstr(buf, "\"type\": \"airlock_proxy\", \"status\": 503"));
    close(fd);
    /* the unix socket: the same, mode 0666 */
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0666);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(connect(u, (struct sockaddr *)&sa, sizeof sa), 0);
    n = read_all(&f, u, buf, sizeof buf);
    assert_non_null(strstr(buf, "503"));
    close(u);
    fix_free(&f);
    assert_int_equal(access(path, F_OK), -1); /* removed at the end */
    rmdir(sock);
}

static void test_carried_raw(void **state)
{
    (void)state;
    static struct fix f;
    fix_init(&f, 1, NULL);
    link_up(&f);
    int fd = dial(&f);
    wait_for(&f, &f.opened, "PROXY_OPEN");
    assert_true(fr_is_proxy_channel(f.ch));
    /* the agent's bytes, whatever they are: no HTTP is parsed */
    static const char req[] = "NOT HTTP AT ALL\r\n\x01\x02 whatever";
    for (int i = 0; i < STEP_MAX && write(fd, req, sizeof req - 1) < 0; i++)
        turn(&f);
    for (int i = 0; i < STEP_MAX && f.got_len < sizeof req - 1; i++)
        turn(&f);
    assert_int_equal(f.got_len, sizeof req - 1);
    assert_memory_equal(f.got, req, sizeof req - 1);
    /* an answer of several windows, then its end */
    static char big[600 * 1024];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (char)('a' + i % 26);
    size_t sent = 0, got = 0;
    static char in[sizeof big + 1];
    int eof_sent = 0;
    for (int i = 0; i < 20 * STEP_MAX; i++) {
        if (sent < sizeof big) {
            long n =
                ep_write(f.ctl, f.ch, FR_STDIN, (const uint8_t *)big + sent, sizeof big - sent);
            assert_true(n >= 0);
            sent += (size_t)n;
        } else if (!eof_sent) {
            assert_int_equal(ep_eof(f.ctl, f.ch, FR_STDIN), 0);
            eof_sent = 1;
        }
        turn(&f);
        ssize_t n = read(fd, in + got, sizeof in - got);
        if (n > 0)
            got += (size_t)n;
        else if (n == 0)
            break;
    }
    assert_int_equal(got, sizeof big);
    assert_memory_equal(in, big, sizeof big);
    close(fd);
    /* the runner closed the channel once the answer was written */
    for (int i = 0; i < STEP_MAX && ep_proxy_count(f.ctl); i++)
        turn(&f);
    assert_int_equal(ep_proxy_count(f.ctl), 0);
    assert_int_equal(ep_proxy_count(f.host), 0);
    fix_free(&f);
}

static void test_refused_and_dropped(void **state)
{
    (void)state;
    static struct fix f;
    char buf[256];
    /* a controller that does not serve the proxy: the connection is closed */
    fix_init(&f, 0, NULL);
    link_up(&f);
    int fd = dial(&f);
    assert_int_equal(read_all(&f, fd, buf, sizeof buf), 0);
    close(fd);
    for (int i = 0; i < STEP_MAX && runner_proxy_conns(f.px); i++)
        turn(&f);
    assert_int_equal(runner_proxy_conns(f.px), 0);
    assert_int_equal(ep_proxy_count(f.host), 0);
    fix_free(&f);

    /* the link drops mid-answer: cut at once, and then the 503 */
    fix_init(&f, 1, NULL);
    link_up(&f);
    fd = dial(&f);
    wait_for(&f, &f.opened, "PROXY_OPEN");
    assert_int_equal(ep_write(f.ctl, f.ch, FR_STDIN, (const uint8_t *)"HTTP/1.1 200 OK\r\n", 17),
                     17);
    for (int i = 0; i < 50; i++)
        turn(&f);
    ep_link_down(f.host);
    ep_link_down(f.ctl);
    size_t n = read_all(&f, fd, buf, sizeof buf);
    assert_int_equal(n, 17); /* what came, then the end */
    close(fd);
    assert_int_equal(f.closed, 1);
    fd = dial(&f);
    n = read_all(&f, fd, buf, sizeof buf);
    assert_non_null(strstr(buf, "503"));
    close(fd);
    fix_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr_ok),
        cmocka_unit_test(test_503_without_link),
        cmocka_unit_test(test_carried_raw),
        cmocka_unit_test(test_refused_and_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
