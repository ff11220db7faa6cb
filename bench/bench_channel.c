/*
 * bench_channel: how much the airlock.v1 protocol layer costs, beside the
 * limits of this machine, measured in one run.
 *
 *   bare PTY        a child writes into a PTY, the parent reads it
 *   raw loopback    a child writes into TCP on 127.0.0.1, the parent reads
 *   airlock.v1      the same bytes through a host and a controller endpoint
 *                   in two processes over TCP on 127.0.0.1: DATA frames one
 *                   way, ACK frames (credit) the other, each length-prefixed
 *                   as a WebSocket message would be
 *
 * Each is run RUNS times (interleaved, so drift hits all alike); the table
 * gives the median MB/s and its ratio to the two limits.
 * Usage: bench_channel [MB] [RUNS]
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "al_limits.h"
#include "benchutil.h"
#include "endpoint.h"
#include "frame.h"

enum { CHUNK = 4096, MAX_RUNS = 21 };

static void fill(char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (char)('A' + i % 26);
}

static double bench_pty(size_t total)
{
    int master;
    struct termios tio;
    memset(&tio, 0, sizeof tio);
    cfmakeraw(&tio);
    pid_t pid = forkpty(&master, NULL, &tio, NULL);
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char buf[CHUNK];
        fill(buf, sizeof buf);
        for (size_t done = 0; done < total; done += sizeof buf)
            if (bu_write_all(1, buf, sizeof buf) != 0)
                _exit(1);
        _exit(0);
    }
    char buf[65536];
    size_t got = 0;
    double t0 = bu_now_s();
    while (got < total) {
        ssize_t r = read(master, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    double dt = bu_now_s() - t0;
    close(master);
    waitpid(pid, NULL, 0);
    return got >= total ? (double)total / dt / 1e6 : -1;
}

/* A connected TCP pair on 127.0.0.1 with TCP_NODELAY. */
static int tcp_pair(int fds[2])
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 1) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        close(ls);
        return -1;
    }
    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&a, sizeof a) != 0) {
        close(ls);
        return -1;
    }
    fds[1] = accept(ls, NULL, NULL);
    close(ls);
    int one = 1;
    (void)setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)setsockopt(fds[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fds[1] < 0 ? -1 : 0;
}

static double bench_loopback(size_t total)
{
    int fds[2];
    if (tcp_pair(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        char buf[CHUNK];
        fill(buf, sizeof buf);
        for (size_t done = 0; done < total; done += sizeof buf)
            if (bu_write_all(fds[0], buf, sizeof buf) != 0)
                _exit(1);
        _exit(0);
    }
    close(fds[0]);
    char buf[65536];
    size_t got = 0;
    double t0 = bu_now_s();
    while (got < total) {
        ssize_t r = read(fds[1], buf, sizeof buf);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    double dt = bu_now_s() - t0;
    close(fds[1]);
    waitpid(pid, NULL, 0);
    return got >= total ? (double)total / dt / 1e6 : -1;
}

/* Length-prefixed messages over a stream socket, as WebSocket would frame. */
static int send_msg(int fd, const uint8_t *p, size_t n)
{
    uint8_t hdr[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
    return bu_write_all(fd, hdr, 4) == 0 && bu_write_all(fd, p, n) == 0 ? 0 : -1;
}

static long recv_msg(int fd, uint8_t *p, size_t cap)
{
    uint8_t hdr[4];
    if (bu_read_all(fd, hdr, 4) != 0)
        return -1;
    size_t n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
    if (n > cap || bu_read_all(fd, p, n) != 0)
        return -1;
    return (long)n;
}

struct ctl_state {
    struct ep *ep;
    uint64_t got;
};

static void ctl_event(void *ud, const struct ep_event *ev)
{
    struct ctl_state *s = ud;
    if (ev->type == EP_EV_DATA) {
        s->got += ev->len;
        (void)ep_consume(s->ep, ev->channel, ev->stream, ev->len);
    }
}

static void host_event(void *ud, const struct ep_event *ev)
{
    struct ep *ep = *(struct ep **)ud;
    if (ev->type == EP_EV_OPEN)
        (void)ep_opened(ep, ev->channel, 1);
}

static int flush_out(struct ep *ep, int fd, uint8_t *buf)
{
    long n;
    while ((n = ep_output(ep, buf, AL_MAX_FRAME, 0)) > 0)
        if (send_msg(fd, buf, (size_t)n) != 0)
            return -1;
    return n < 0 ? -1 : 0;
}

/* The host side, in the child: writes `total` bytes of output. */
static void host_proc(int fd, size_t total)
{
    static uint8_t buf[AL_MAX_FRAME];
    struct ep *ep = NULL;
    struct ep_config c;
    ep_config_default(&c, FR_ROLE_HOST);
    c.on_event = host_event;
    c.ud = &ep;
    c.ping_interval_us = c.idle_timeout_us = 0;
    if (ep_new(&c, &ep) != 0)
        _exit(1);
    ep_link_up(ep, 0);
    char data[CHUNK];
    fill(data, sizeof data);
    size_t written = 0;
    uint32_t ch = 1;
    int opened = 0;
    for (;;) {
        if (opened && written < total) {
            long n = ep_write(ep, ch, FR_STDOUT, (const uint8_t *)data,
                              total - written < CHUNK ? total - written : CHUNK);
            if (n < 0)
                _exit(1);
            written += (size_t)n;
            if (written == total)
                (void)ep_exit(ep, ch, 0, 0, 0);
        }
        if (flush_out(ep, fd, buf) != 0)
            _exit(0); /* the controller closed: done */
        /* read what the controller sent when blocked or when it is there */
        int blocked = !opened || written == total || ep_writable(ep, ch, FR_STDOUT) == 0;
        int avail = 0;
        if (!blocked) {
            struct timeval tv = {0, 0};
            fd_set rs;
            FD_ZERO(&rs);
            FD_SET(fd, &rs);
            avail = select(fd + 1, &rs, NULL, NULL, &tv) > 0;
        }
        if (blocked || avail) {
            long n = recv_msg(fd, buf, sizeof buf);
            if (n < 0)
                _exit(0);
            (void)ep_input(ep, buf, (size_t)n, 0);
            opened = opened || ep_channel_count(ep) > 0;
        }
    }
}

static double bench_endpoints(size_t total)
{
    int fds[2];
    if (tcp_pair(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[1]);
        host_proc(fds[0], total);
        _exit(0);
    }
    close(fds[0]);
    int fd = fds[1];
    static uint8_t buf[AL_MAX_FRAME];
    struct ctl_state s = {0};
    struct ep_config c;
    ep_config_default(&c, FR_ROLE_CONTROLLER);
    c.on_event = ctl_event;
    c.ud = &s;
    c.ping_interval_us = c.idle_timeout_us = 0;
    if (ep_new(&c, &s.ep) != 0)
        return -1;
    ep_link_up(s.ep, 0);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"yes", 3};
    (void)ep_open(s.ep, &o);
    double t0 = bu_now_s();
    double rate = -1;
    for (;;) {
        if (flush_out(s.ep, fd, buf) != 0)
            break;
        long n = recv_msg(fd, buf, sizeof buf);
        if (n < 0)
            break;
        (void)ep_input(s.ep, buf, (size_t)n, 0);
        if (s.got >= total) {
            rate = (double)total / (bu_now_s() - t0) / 1e6;
            break;
        }
    }
    ep_free(s.ep);
    close(fd);
    waitpid(pid, NULL, 0);
    return rate;
}

int main(int argc, char **argv)
{
    long mb = argc > 1 ? bu_arg_long(argv[1], 1, 10000) : 200;
    long runs = argc > 2 ? bu_arg_long(argv[2], 1, MAX_RUNS) : 5;
    if (mb < 0 || runs < 0 || argc > 3) {
        fprintf(stderr, "usage: bench_channel [MB 1..10000] [RUNS 1..%d]\n", MAX_RUNS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    size_t total = (size_t)mb << 20;
    double pty[MAX_RUNS], lo[MAX_RUNS], ours[MAX_RUNS];
    for (int i = 0; i < runs; i++) {
        pty[i] = bench_pty(total);
        lo[i] = bench_loopback(total);
        ours[i] = bench_endpoints(total);
        if (pty[i] < 0 || lo[i] < 0 || ours[i] < 0) {
            fprintf(stderr, "bench_channel: run %d failed\n", i + 1);
            return 1;
        }
    }
    double mp = bu_median(pty, (int)runs), ml = bu_median(lo, (int)runs),
           mo = bu_median(ours, (int)runs);
    printf("bench_channel: %ld MiB one way, median of %ld interleaved runs\n\n", mb, runs);
    printf("| path | MB/s | / bare PTY | / raw loopback |\n|---|---|---|---|\n");
    printf("| bare PTY (limit) | %.1f | 1.00 | %.2f |\n", mp, mp / ml);
    printf("| raw TCP loopback (limit) | %.1f | %.2f | 1.00 |\n", ml, ml / mp);
    printf("| airlock.v1 endpoints over loopback | %.1f | %.2f | %.2f |\n", mo, mo / mp, mo / ml);
    return 0;
}
