/*
 * bench_runner: what the real airlock-runner costs, end to end, beside the
 * limits of this machine.
 *
 * It starts its own airlock-runner processes (two fresh ones each round,
 * each on a free port of 127.0.0.1, trusting a throw-away key set made by
 * the real airlockd, with a token minted by airlockd for each connection)
 * and drives them as a controller: a controller endpoint
 * (src/common/endpoint.c does all the protocol work) over the small blocking
 * WebSocket client of benchutil.c. Runner A serves the memory and echo
 * measures, runner B the stream alone, so that neither heap holds what the
 * other measure left. Each round measures, the runner and the bare PTY in
 * alternating order:
 *
 *   throughput  MB (10^6 bytes) of deterministic base64 text, 76 columns
 *               and CRLF, through `stty raw -echo; exec cat FILE` in a
 *               terminal of the runner, checked byte for byte, against the
 *               same command under a bare PTY (forkpty, 64 KiB reads of the
 *               master), and against the same bare PTY plus one plain TCP
 *               hop (a relay process of the bench's copying the master into
 *               a loopback connection: the loopback limit of any relay);
 *               from spawning to the last byte. Then the same for
 *               a TUI repaint stream of the same size (bu_gen_tui, the one
 *               bench_vt feeds the model alone), on the same runner B;
 *               beside the runner's CPU, the bench's own kernel time
 *               reading the bare PTY (what any reader of a PTY pays)
 *   echo        ECHO_N one-byte round trips (after ECHO_WARM) to
 *               `stty raw -echo; cat`: a DATA frame on stdin until the byte
 *               comes back on stdout, against write + read on a bare PTY
 *   memory      the runner's VmRSS (and threads, fds) listening, connected,
 *               with IDLE_TERMS idle terminals (cat), and around the stream
 *               (its terminal exited but open, then closed)
 *
 * Tables give min/median/max over rounds and ratios to the bare PTY.
 * Usage: bench_runner [MB] [RUNS] [RUNNER]; airlockd is taken from beside
 * RUNNER. Every wait has a deadline and each phase a watchdog alarm; on any
 * failure it says what and exits 1, stopping only what it started (by pid).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "benchutil.h"
#include "endpoint.h"
#include "frame.h"

enum {
    MAX_RUNS = BU_MAX_RUNS,
    MAX_MB = 1000,
    ECHO_N = 2000,
    ECHO_WARM = 100,
    IDLE_TERMS = 50,
    MAX_TRACK = 64,
    READ_BUF = 65536,
    RING_KB = 4096, /* the runner's default output ring per terminal */
};

#define IDENT "bench-runner"
#define API_VERSION "2024-02-02-preview"
#define ECHO_CMD "stty raw -echo; printf R; exec cat"

/* What the signal handler and bu_fail() must clean up: only what we started. */
static struct {
    volatile pid_t runner; /* the airlock-runner of this round */
    volatile pid_t child;  /* a bare-PTY shell or an airlockd */
    volatile pid_t hop;    /* the plain hop's relay process */
    char dir[200];
    char log[260], data[260], tui[260], jwks[260], key[260];
    const char *runner_path;
    char airlockd[300];
} g;

/* ---- failure, cleanup -------------------------------------------------- */

/* Async-signal-safe: the last 2 KiB of the runner's log, if any. */
static void show_log_tail(void)
{
    if (!g.log[0])
        return;
    int fd = open(g.log, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[2048];
    off_t end = lseek(fd, 0, SEEK_END);
    if (end > 0) {
        (void)lseek(fd, end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0, SEEK_SET);
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            bu_say("---- end of the runner's log ----\n");
            ssize_t r = write(2, buf, (size_t)n);
            (void)r;
            bu_say("----\n");
        }
    }
    close(fd);
}

/* Async-signal-safe: stop our processes, remove our files. */
static void cleanup_all(void)
{
    pid_t c = g.child, r = g.runner, h = g.hop;
    g.child = 0;
    g.runner = 0;
    g.hop = 0;
    bu_stop_pid(h, SIGKILL);
    bu_stop_pid(c, SIGKILL);
    bu_stop_pid(r, SIGTERM);
    if (!g.dir[0])
        return;
    const char *files[] = {g.log, g.data, g.tui, g.jwks, g.key};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i][0])
            (void)unlink(files[i]);
    if (rmdir(g.dir) != 0) {
        bu_say("bench_runner: could not remove ");
        bu_say(g.dir);
        bu_say("\n");
    }
    g.dir[0] = 0;
}

/* What bu_fail() runs: the runner's log, then stop and remove ours. */
static void fail_cleanup(void)
{
    show_log_tail();
    cleanup_all();
}

static void on_signal(int sig)
{
    if (sig == SIGALRM)
        bu_say("bench_runner: error: watchdog: a phase ran past its time limit\n");
    else
        bu_say("bench_runner: interrupted\n");
    show_log_tail();
    cleanup_all();
    _exit(1);
}

/* ---- processes ------------------------------------------------------------ */

static void mint_token(char *tok, size_t cap)
{
    char *argv[] = {g.airlockd, "token",          "--data", g.dir, "--aud", IDENT,
                    "--scope",  "runner:connect", "--ttl",  "600", NULL};
    if (bu_run_capture(argv, tok, cap, &g.child) != 0)
        bu_fail("airlockd token failed (see above)");
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r'))
        tok[--n] = 0;
    if (n == 0 || n >= cap - 1)
        bu_fail("airlockd token printed no usable token");
}

static void start_runner(int port)
{
    bu_start_runner(g.runner_path, port, IDENT, g.jwks, g.log, &g.runner);
}

static void stop_runner(void)
{
    pid_t pid = g.runner;
    g.runner = 0;
    bu_stop_pid(pid, SIGTERM);
}

/* ---- the data set --------------------------------------------------------- */

struct dataset {
    const uint8_t *p;
    size_t len;
    char cmd[400];
};

/* tui: the TUI repaint stream (bu_gen_tui), else 76-column text. */
static void make_dataset(struct dataset *d, size_t len, int tui)
{
    struct bu_dataset b;
    const char *path = tui ? g.tui : g.data;
    if (tui)
        bu_make_tui_dataset(&b, path, len);
    else
        bu_make_dataset(&b, path, len);
    d->p = b.p;
    d->len = b.len;
    snprintf(d->cmd, sizeof d->cmd, "stty raw -echo; exec cat '%s'", path);
}

/* ---- a small blocking WebSocket client around a controller endpoint ------- */

struct track {
    uint32_t id;
    int opened, exited, closed;
    int32_t code;
    uint8_t signo;
};

struct wsc {
    struct bu_ctl ctl; /* the connection and its controller endpoint */
    int ready;
    struct track t[MAX_TRACK];
    unsigned nt;
    /* the stream under test: checked against expect */
    uint32_t sink_ch;
    const uint8_t *expect;
    uint64_t expect_len, sink_got;
    uint64_t sink_frames, sink_max; /* DATA events of the stream, largest */
    /* the echo terminal */
    uint32_t echo_ch;
    uint64_t echo_got;
    uint8_t echo_last;
};

static struct track *track_of(struct wsc *c, uint32_t id)
{
    for (unsigned i = 0; i < c->nt; i++)
        if (c->t[i].id == id)
            return &c->t[i];
    return NULL;
}

static void on_event(void *ud, const struct ep_event *ev)
{
    struct wsc *c = ud;
    struct track *t = ev->channel ? track_of(c, ev->channel) : NULL;
    switch (ev->type) {
    case EP_EV_READY:
        c->ready = 1;
        break;
    case EP_EV_OPENED:
        if (t)
            t->opened = 1;
        break;
    case EP_EV_DATA:
        if (ev->stream != FR_STDOUT) {
            bu_ws_error(&c->ctl.ws, "channel %u: data on stream %u", (unsigned)ev->channel,
                        ev->stream);
            break;
        }
        if (ev->channel == c->sink_ch && c->sink_ch) {
            if (ev->offset != c->sink_got || c->sink_got + ev->len > c->expect_len)
                bu_ws_error(&c->ctl.ws,
                            "stream: %zu bytes at offset %llu, expected offset %llu of %llu",
                            ev->len, (unsigned long long)ev->offset,
                            (unsigned long long)c->sink_got, (unsigned long long)c->expect_len);
            else if (memcmp(c->expect + c->sink_got, ev->data, ev->len) != 0)
                bu_ws_error(&c->ctl.ws, "stream: bytes differ from the file near offset %llu",
                            (unsigned long long)c->sink_got);
            c->sink_got += ev->len;
            c->sink_frames++;
            if (ev->len > c->sink_max)
                c->sink_max = ev->len;
        } else if (ev->channel == c->echo_ch && c->echo_ch && ev->len > 0) {
            c->echo_got += ev->len;
            c->echo_last = ev->data[ev->len - 1];
        }
        if (ep_consume(c->ctl.ep, ev->channel, ev->stream, ev->len) != AL_OK)
            bu_ws_error(&c->ctl.ws, "ep_consume failed on channel %u", (unsigned)ev->channel);
        break;
    case EP_EV_EXIT:
        if (t) {
            t->exited = 1;
            t->code = ev->exit_code;
            t->signo = ev->signo;
        }
        break;
    case EP_EV_CLOSED:
        if (t)
            t->closed = 1;
        break;
    case EP_EV_LOST:
        bu_ws_error(&c->ctl.ws, "the runner does not know channel %u", (unsigned)ev->channel);
        break;
    case EP_EV_GAP:
        bu_ws_error(&c->ctl.ws, "channel %u: output lost (gap %llu..%llu)", (unsigned)ev->channel,
                    (unsigned long long)ev->offset, (unsigned long long)ev->to);
        break;
    case EP_EV_ERROR:
        bu_ws_error(&c->ctl.ws, "the runner sent ERROR %u on channel %u: %.*s", ev->code,
                    (unsigned)ev->channel, (int)ev->len, (const char *)ev->data);
        break;
    default:
        break;
    }
}

static void ws_flush(struct wsc *c)
{
    bu_ctl_flush(&c->ctl);
}

/* Send what is queued, then one read (waiting at most until deadline_ns), its
 * frames, and our answers. */
static void ws_pump(struct wsc *c, uint64_t deadline_ns)
{
    struct bu_ctl *one = &c->ctl;
    bu_ctl_pump(&one, 1, deadline_ns);
}

static void ws_settle(struct wsc *c, unsigned ms)
{
    uint64_t until = bu_now_ns() + (uint64_t)ms * 1000000u;
    for (uint64_t now = bu_now_ns(); now < until; now = bu_now_ns())
        ws_pump(c, until);
}

typedef int pred_fn(const struct wsc *c, uint32_t arg);

static int p_ready(const struct wsc *c, uint32_t arg)
{
    (void)arg;
    return c->ready;
}

static int p_all_opened(const struct wsc *c, uint32_t arg)
{
    (void)arg;
    for (unsigned i = 0; i < c->nt; i++)
        if (!c->t[i].opened)
            return 0;
    return 1;
}

static int p_all_closed(const struct wsc *c, uint32_t arg)
{
    (void)arg;
    for (unsigned i = 0; i < c->nt; i++)
        if (!c->t[i].closed)
            return 0;
    return 1;
}

static int p_exited(const struct wsc *c, uint32_t ch)
{
    for (unsigned i = 0; i < c->nt; i++)
        if (c->t[i].id == ch)
            return c->t[i].exited;
    return 0;
}

static int p_echo(const struct wsc *c, uint32_t n)
{
    return c->echo_got >= n;
}

static void ws_wait(struct wsc *c, pred_fn *pred, uint32_t arg, unsigned secs, const char *what)
{
    uint64_t deadline = bu_now_ns() + secs * BU_SEC;
    while (!pred(c, arg)) {
        if (bu_now_ns() > deadline)
            bu_fail("timed out after %u s waiting for %s", secs, what);
        ws_pump(c, deadline);
    }
}

static void ws_open(struct wsc *c, int port)
{
    char token[AL_MAX_TOKEN + 2], hdr[AL_MAX_TOKEN + 64], target[128];
    mint_token(token, sizeof token);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", token);
    snprintf(target, sizeof target, "/?identifier=%s&api-version=%s", IDENT, API_VERSION);
    bu_ws_connect(&c->ctl.ws, port, target, hdr);
    bu_ctl_new(&c->ctl, "bench_runner", on_event, c);
    c->ready = 0;
    c->nt = 0;
    c->sink_ch = c->echo_ch = 0;
    bu_ctl_link(&c->ctl);
    ws_wait(c, p_ready, 0, 5, "the runner's HELLO");
}

/* Close politely and wait (1 s at most) for the runner to drop the socket. */
static void ws_close(struct wsc *c)
{
    bu_ctl_end(&c->ctl);
}

static struct fr_str fs(const char *s)
{
    struct fr_str r = {s, (uint16_t)strlen(s)};
    return r;
}

/* Open a terminal running sh -c cmd (cmd NULL: cat). */
static uint32_t ws_open_term(struct wsc *c, const char *cmd)
{
    if (c->nt >= MAX_TRACK)
        bu_fail("too many channels");
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.mode = FR_MODE_PTY;
    o.cols = 80;
    o.rows = 24;
    o.term = fs("xterm-256color");
    if (cmd) {
        o.argc = 3;
        o.argv[0] = fs("/bin/sh");
        o.argv[1] = fs("-c");
        o.argv[2] = fs(cmd);
    } else {
        o.argc = 1;
        o.argv[0] = fs("/bin/cat");
    }
    long id = ep_open(c->ctl.ep, &o);
    if (id <= 0)
        bu_fail("ep_open: %s", al_strerror((int)id));
    struct track *t = &c->t[c->nt++];
    memset(t, 0, sizeof *t);
    t->id = (uint32_t)id;
    return (uint32_t)id;
}

static void ws_close_term(struct wsc *c, uint32_t ch)
{
    int rc = ep_close(c->ctl.ep, ch);
    if (rc != AL_OK)
        bu_fail("ep_close: %s", al_strerror(rc));
}

/* ---- the measures ----------------------------------------------------------- */

/* The runner states whose memory is read. */
enum { M_IDLE, M_CONN, M_TERMS, M_PRE, M_EXITED, M_CLOSED, M_COUNT };

/* One stream through both paths: the text one, or the TUI one. */
struct stream_res {
    double tput_bare, tput_hop, tput_run, cpu_run;
    double user_run;            /* the runner's user time alone (cpu_run: user and kernel), s */
    double sys_bare;            /* the bench's own kernel time reading the bare PTY, s */
    double cpu_client;          /* the bench's own CPU (the client) during the runner's stream, s */
    double idle_bare, idle_run; /* the machine's idle share during each stream, per cent */
    double bare_avg_read, bare_max_read, run_avg_data, run_max_data; /* bytes */
};

struct round_res {
    struct stream_res text, tui;    /* memory is measured around the text stream */
    double lat_bare[4], lat_run[4]; /* p50 p90 p99 max, microseconds */
    struct bu_mem m[M_COUNT];
};

static unsigned stream_secs(size_t len)
{
    return 20u + (unsigned)(len / 5000000u); /* 5 MB/s at the least */
}

static void watchdog(unsigned secs)
{
    alarm(secs);
}

static double tput_bare(const struct dataset *d, struct stream_res *rr)
{
    static uint8_t buf[READ_BUF];
    int m;
    double sys0, sys1;
    (void)bu_self_cpu(&sys0);
    struct bu_cpustat st0 = bu_cpustat_now();
    uint64_t t0 = bu_now_ns();
    pid_t pid = bu_pty_spawn(d->cmd, &m, &g.child);
    uint64_t deadline = t0 + stream_secs(d->len) * BU_SEC;
    size_t got = 0, reads = 0, max = 0;
    while (got < d->len) {
        size_t n = bu_pty_read(m, buf, sizeof buf, deadline);
        reads++;
        if (n > max)
            max = n;
        if (n == 0)
            bu_fail("bare PTY: the stream ended after %zu of %zu bytes", got, d->len);
        if (got + n > d->len || memcmp(d->p + got, buf, n) != 0)
            bu_fail("bare PTY: bytes differ from the file near offset %zu", got);
        got += n;
    }
    uint64_t t1 = bu_now_ns();
    rr->idle_bare = bu_idle_pct(st0, bu_cpustat_now());
    (void)bu_self_cpu(&sys1);
    bu_pty_stop(pid, m, &g.child);
    rr->sys_bare = sys1 - sys0;
    rr->bare_avg_read = (double)d->len / (double)reads;
    rr->bare_max_read = (double)max;
    return (double)d->len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* The relay process of the plain hop: copies the PTY's master to fd until
 * the PTY ends, in READ_BUF reads and blocking writes, nothing else; exits
 * 0 at the PTY's end, 1 on any error (the bench then fails on a short
 * stream). No bu_fail here: that would clean up the bench's files. */
static void hop_relay(int m, int fd)
{
    static uint8_t buf[READ_BUF];
    for (;;) {
        ssize_t n = read(m, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno == EIO))
            _exit(0);
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                _exit(1);
            struct pollfd pfd = {m, POLLIN, 0};
            (void)poll(&pfd, 1, 1000);
            continue;
        }
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                _exit(1);
            off += w;
        }
    }
}

/* The loopback limit: the same command under a bare PTY whose master a
 * relay process of the bench's own copies into a TCP connection on
 * 127.0.0.1 (TCP_NODELAY), which the bench reads in READ_BUF reads and
 * compares the same way. One plain hop: no protocol, no framing, no flow
 * control, no screen model. From the fork to the last byte. */
static double tput_hop(const struct dataset *d)
{
    static uint8_t buf[READ_BUF];
    int port;
    int ls = bu_tcp_listen(1, &port, "plain hop");
    int m;
    uint64_t t0 = bu_now_ns();
    pid_t pid = bu_pty_spawn(d->cmd, &m, &g.child);
    pid_t relay = fork();
    if (relay < 0)
        bu_fail("fork: %s", strerror(errno));
    if (relay == 0) {
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        int fd = bu_tcp_connect(port);
        if (fd < 0)
            _exit(1);
        hop_relay(m, fd);
    }
    g.hop = relay;
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    close(ls);
    if (c < 0)
        bu_fail("plain hop: accept: %s", strerror(errno));
    uint64_t deadline = t0 + stream_secs(d->len) * BU_SEC;
    size_t got = 0;
    while (got < d->len) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bu_fail("plain hop: the stream ended after %zu of %zu bytes", got, d->len);
        if (got + (size_t)n > d->len || memcmp(d->p + got, buf, (size_t)n) != 0)
            bu_fail("plain hop: bytes differ from the file near offset %zu", got);
        got += (size_t)n;
        if (bu_now_ns() > deadline)
            bu_fail("plain hop: %zu of %zu bytes after %u s", got, d->len, stream_secs(d->len));
    }
    uint64_t t1 = bu_now_ns();
    close(c);
    int st;
    if (bu_wait_bounded(relay, 2000, &st) != 0) {
        (void)kill(relay, SIGKILL);
        (void)waitpid(relay, NULL, 0);
    }
    g.hop = 0;
    bu_pty_stop(pid, m, &g.child);
    return (double)d->len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* m: where to put the memory figures around the stream, or NULL. */
static double tput_runner(struct wsc *c, int port, const struct dataset *d, struct stream_res *rr,
                          struct bu_mem *m)
{
    ws_open(c, port);
    ws_settle(c, 100);
    if (m)
        m[M_PRE] = bu_mem_of(g.runner);
    double user0, user1;
    double cpu0 = bu_cpu_split(g.runner, &user0), self0 = bu_self_cpu(NULL);
    c->expect = d->p;
    c->expect_len = d->len;
    c->sink_got = c->sink_frames = c->sink_max = 0;
    struct bu_cpustat st0 = bu_cpustat_now();
    uint64_t t0 = bu_now_ns();
    uint32_t ch = ws_open_term(c, d->cmd);
    c->sink_ch = ch;
    ws_flush(c);
    uint64_t deadline = t0 + stream_secs(d->len) * BU_SEC;
    while (c->sink_got < d->len) {
        if (bu_now_ns() > deadline)
            bu_fail("runner: %llu of %zu bytes after %u s", (unsigned long long)c->sink_got, d->len,
                    stream_secs(d->len));
        ws_pump(c, deadline);
    }
    uint64_t t1 = bu_now_ns();
    rr->idle_run = bu_idle_pct(st0, bu_cpustat_now());
    ws_wait(c, p_exited, ch, 10, "EXIT after the stream");
    const struct track *t = track_of(c, ch);
    if (t->code != 0 || t->signo != 0)
        bu_fail("runner: the stream's command ended with code %d, signal %u", (int)t->code,
                (unsigned)t->signo);
    struct ep_stream_info si;
    if (ep_stream_info(c->ctl.ep, ch, FR_STDOUT, &si) != AL_OK || si.end != d->len || !si.eof)
        bu_fail("runner: the stream did not end at %zu bytes", d->len);
    rr->cpu_run = bu_cpu_split(g.runner, &user1) - cpu0;
    rr->user_run = user1 - user0;
    rr->cpu_client = bu_self_cpu(NULL) - self0;
    rr->run_avg_data = (double)d->len / (double)c->sink_frames;
    rr->run_max_data = (double)c->sink_max;
    ws_settle(c, 200);
    if (m)
        m[M_EXITED] = bu_mem_of(g.runner);
    ws_close_term(c, ch);
    ws_wait(c, p_all_closed, 0, 10, "CLOSE of the stream's terminal");
    c->sink_ch = 0;
    ws_settle(c, 200);
    if (m)
        m[M_CLOSED] = bu_mem_of(g.runner);
    ws_close(c);
    return (double)d->len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* p50, p90, p99 (nearest rank) and max of n samples, sorted in place. */

static void lat_bare(double out[4])
{
    static double s[ECHO_N];
    bu_lat_bare(ECHO_CMD, ECHO_WARM, ECHO_N, s, &g.child, out);
}

static void lat_runner(struct wsc *c, int port, double out[4])
{
    static double s[ECHO_N];
    ws_open(c, port);
    uint32_t ch = ws_open_term(c, ECHO_CMD);
    c->echo_ch = ch;
    c->echo_got = 0;
    ws_flush(c);
    ws_wait(c, p_echo, 1, 10, "the echo command to start");
    if (c->echo_got != 1 || c->echo_last != 'R')
        bu_fail("runner: the echo command did not start cleanly");
    for (int i = 0; i < ECHO_WARM + ECHO_N; i++) {
        uint8_t b = (uint8_t)('a' + i % 26);
        uint64_t want = c->echo_got + 1;
        uint64_t t0 = bu_now_ns();
        if (ep_write(c->ctl.ep, ch, FR_STDIN, &b, 1) != 1)
            bu_fail("runner: no stdin credit at round trip %d", i);
        ws_flush(c);
        uint64_t deadline = t0 + 2 * BU_SEC;
        while (c->echo_got < want) {
            if (bu_now_ns() > deadline)
                bu_fail("runner: no echo within 2 s at round trip %d", i);
            ws_pump(c, deadline);
        }
        uint64_t t1 = bu_now_ns();
        if (c->echo_got != want || c->echo_last != b)
            bu_fail("runner: round trip %d brought back the wrong bytes", i);
        if (i >= ECHO_WARM)
            s[i - ECHO_WARM] = (double)(t1 - t0) / 1e3;
    }
    c->echo_ch = 0;
    ws_close_term(c, ch);
    ws_wait(c, p_all_closed, 0, 10, "CLOSE of the echo terminal");
    ws_close(c);
    bu_percentiles(s, ECHO_N, out);
}

static void mem_phase(struct wsc *c, int port, struct round_res *rr)
{
    bu_sleep_ms(200);
    rr->m[M_IDLE] = bu_mem_of(g.runner);
    ws_open(c, port);
    ws_settle(c, 200);
    rr->m[M_CONN] = bu_mem_of(g.runner);
    uint32_t ids[IDLE_TERMS];
    for (int i = 0; i < IDLE_TERMS; i++)
        ids[i] = ws_open_term(c, NULL);
    ws_flush(c);
    ws_wait(c, p_all_opened, 0, 30, "the idle terminals to open");
    ws_settle(c, 500);
    rr->m[M_TERMS] = bu_mem_of(g.runner);
    for (int i = 0; i < IDLE_TERMS; i++)
        ws_close_term(c, ids[i]);
    ws_flush(c);
    ws_wait(c, p_all_closed, 0, 30, "the idle terminals to close");
    ws_close(c);
}

/* ---- report -------------------------------------------------------------- */

static void mem_row(const char *what, const struct round_res *rr, int n, int state)
{
    double rss[MAX_RUNS] = {0}, thr[MAX_RUNS] = {0}, fds[MAX_RUNS] = {0};
    for (int i = 0; i < n; i++) {
        const struct bu_mem *m = &rr[i].m[state];
        rss[i] = (double)m->rss_kb;
        thr[i] = m->threads;
        fds[i] = m->fds;
    }
    char a[64], b[64], f[64];
    printf("| %s | %s | %s | %s |\n", what, bu_fmt3(a, sizeof a, rss, n, 0),
           bu_fmt3(b, sizeof b, thr, n, 0),
           rr[0].m[state].fds < 0 ? "n/a" : bu_fmt3(f, sizeof f, fds, n, 0));
}

/* One row of the streams table: the text stream (tui 0) or the TUI one. */
static void stream_row(const char *what, const struct round_res *rr, int n, int tui, size_t len)
{
    double b[MAX_RUNS] = {0}, r[MAX_RUNS] = {0}, q[MAX_RUNS] = {0}, cpu[MAX_RUNS] = {0};
    double kb[MAX_RUNS] = {0}, us[MAX_RUNS] = {0}, cl[MAX_RUNS] = {0};
    double ib[MAX_RUNS] = {0}, ir[MAX_RUNS] = {0}, h[MAX_RUNS] = {0}, hq[MAX_RUNS] = {0};
    for (int i = 0; i < n; i++) {
        const struct stream_res *s = tui ? &rr[i].tui : &rr[i].text;
        b[i] = s->tput_bare;
        h[i] = s->tput_hop;
        hq[i] = s->tput_run / s->tput_hop;
        r[i] = s->tput_run;
        q[i] = s->tput_run / s->tput_bare;
        cpu[i] = s->cpu_run / ((double)len / 1e9);
        kb[i] = s->sys_bare / ((double)len / 1e9);
        us[i] = s->user_run / ((double)len / 1e9);
        cl[i] = s->cpu_client / ((double)len / 1e9);
        ib[i] = s->idle_bare;
        ir[i] = s->idle_run;
    }
    char x1[96], x2[96], x3[96], x4[96], x5[96], x6[96], x7[96], x8[96], x9[96], x10[96], x11[96];
    printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", what,
           bu_fmt3(x1, sizeof x1, b, n, 1), bu_fmt3(x10, sizeof x10, h, n, 1),
           bu_fmt3(x2, sizeof x2, r, n, 1), bu_fmt3(x3, sizeof x3, q, n, 2),
           bu_fmt3(x11, sizeof x11, hq, n, 2), bu_fmt3(x5, sizeof x5, kb, n, 1),
           bu_fmt3(x4, sizeof x4, cpu, n, 1), bu_fmt3(x6, sizeof x6, us, n, 1),
           bu_fmt3(x7, sizeof x7, cl, n, 1), bu_fmt3(x8, sizeof x8, ib, n, 0),
           bu_fmt3(x9, sizeof x9, ir, n, 0));
}

static void report(const struct round_res *rr, int n, size_t len)
{
    char a[96], b[96], c3[96], d[96];
    double v1[MAX_RUNS] = {0}, v2[MAX_RUNS] = {0}, v3[MAX_RUNS] = {0}, v4[MAX_RUNS] = {0};
    time_t now = time(NULL);
    struct tm tm;
    char date[64] = "?";
    if (gmtime_r(&now, &tm))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    struct utsname un;
    if (uname(&un) != 0)
        memset(&un, 0, sizeof un);
    printf("bench_runner: %s, %s %s %s, %ld CPUs; %d interleaved rounds, two fresh "
           "airlock-runners each (A: memory and echo, B: the stream)\n\n",
           date, un.sysname, un.release, un.machine, sysconf(_SC_NPROCESSORS_ONLN), n);

    /* throughput */
    for (int i = 0; i < n; i++) {
        v1[i] = rr[i].text.tput_bare;
        v2[i] = rr[i].text.tput_run;
        v3[i] = rr[i].text.tput_run / rr[i].text.tput_bare;
        v4[i] = rr[i].text.cpu_run;
    }
    struct bu_stat3 sb = bu_stat3_of(v1, n), sr = bu_stat3_of(v2, n), sc = bu_stat3_of(v4, n);
    printf("Output throughput: %zu bytes (%.0f MB) of base64 text, 76 columns + CRLF, through "
           "`stty raw -echo; exec cat FILE`, from spawn to the last byte, verified byte for "
           "byte. Cells: min/median/max over rounds.\n\n",
           len, (double)len / 1e6);
    printf("| path | MB/s | / bare PTY (medians) | / bare PTY, same round |\n|---|---|---|---|\n");
    printf("| bare PTY: forkpty, 64 KiB reads (limit) | %s | 1.00 | 1.00 |\n",
           bu_fmt3(a, sizeof a, v1, n, 1));
    {
        double h[MAX_RUNS] = {0}, hq[MAX_RUNS] = {0};
        char x1[96], x2[96];
        for (int i = 0; i < n; i++) {
            h[i] = rr[i].text.tput_hop;
            hq[i] = rr[i].text.tput_hop / rr[i].text.tput_bare;
        }
        struct bu_stat3 sh = bu_stat3_of(h, n);
        printf("| the same PTY + one plain TCP hop: a relay process, 64 KiB reads and writes "
               "(loopback limit) | %s | %.2f | %s |\n",
               bu_fmt3(x1, sizeof x1, h, n, 1), sh.med / sb.med, bu_fmt3(x2, sizeof x2, hq, n, 2));
    }
    printf("| airlock-runner: airlock.v1 over WebSocket, C client | %s | %.2f | %s |\n\n",
           bu_fmt3(b, sizeof b, v2, n, 1), sr.med / sb.med, bu_fmt3(c3, sizeof c3, v3, n, 2));
    printf("Runner CPU (utime+stime, children excluded) per stream: %s s, i.e. %.1f "
           "core-s/GB at the median.\n\n",
           bu_fmt3(d, sizeof d, v4, n, 2), sc.med / ((double)len / 1e9));

    printf("Both streams (%.0f MB each; the TUI one: bench_vt's full-screen repaint on the "
           "alternate screen, cursor addressing, 256 colours and truecolour, a scroll region), "
           "the runner beside the bare PTY in the same round. Cells: min/median/max over "
           "rounds.\n\n",
           (double)len / 1e6);
    printf("| stream | bare PTY MB/s (limit) | PTY + one plain TCP hop MB/s (loopback limit) | "
           "runner MB/s | runner ÷ bare PTY, same round | runner ÷ plain hop, same round | "
           "bare PTY reader's kernel CPU core-s/GB (floor) | runner CPU core-s/GB | of which "
           "user | the bench's client CPU core-s/GB | machine idle during the bare PTY's stream, "
           "%% | machine idle during the runner's stream, %% |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    stream_row("76-column text", rr, n, 0, len);
    stream_row("TUI repaint", rr, n, 1, len);
    printf("\n");

    for (int i = 0; i < n; i++) {
        v1[i] = rr[i].text.bare_avg_read;
        v2[i] = rr[i].text.bare_max_read;
        v3[i] = rr[i].text.run_avg_data;
        v4[i] = rr[i].text.run_max_data;
    }
    printf("Sizes: bare PTY reads average %s bytes (largest %s); the runner's DATA frames "
           "carry %s bytes on average (largest %s).\n\n",
           bu_fmt3(a, sizeof a, v1, n, 0), bu_fmt3(b, sizeof b, v2, n, 0),
           bu_fmt3(c3, sizeof c3, v3, n, 0), bu_fmt3(d, sizeof d, v4, n, 0));

    /* echo latency */
    printf("Keystroke echo, `stty raw -echo; cat`: %d one-byte round trips after %d warm-up, "
           "per round. Microseconds; cells: min/median/max over rounds of each per-round "
           "statistic.\n\n",
           ECHO_N, ECHO_WARM);
    printf("| path | p50 µs | p90 µs | p99 µs | max µs |\n|---|---|---|---|---|\n");
    const char *names[3] = {"bare PTY: write + read on the master (limit)",
                            "airlock-runner: DATA on stdin, back on stdout",
                            "runner − bare PTY, same round"};
    for (int row = 0; row < 3; row++) {
        printf("| %s |", names[row]);
        for (int k = 0; k < 4; k++) {
            if (row == 2 && k == 3) {
                printf(" — |"); /* a difference of two maxima says little */
                continue;
            }
            for (int i = 0; i < n; i++)
                v1[i] = row == 0   ? rr[i].lat_bare[k]
                        : row == 1 ? rr[i].lat_run[k]
                                   : rr[i].lat_run[k] - rr[i].lat_bare[k];
            printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 0));
        }
        printf("\n");
    }
    printf("\n");

    /* memory */
    printf("Runner memory: VmRSS KB, threads and open fds from /proc (min/median/max over "
           "rounds).\n\n");
    printf("| runner state | VmRSS KB | threads | fds |\n|---|---|---|---|\n");
    mem_row("listening, no connection", rr, n, M_IDLE);
    mem_row("connected, no terminal", rr, n, M_CONN);
    char what[128];
    snprintf(what, sizeof what, "%d idle terminals (`cat`)", IDLE_TERMS);
    mem_row(what, rr, n, M_TERMS);
    for (int i = 0; i < n; i++) {
        v1[i] = (double)(rr[i].m[M_TERMS].rss_kb - rr[i].m[M_CONN].rss_kb) / IDLE_TERMS;
        v2[i] = (double)(rr[i].m[M_TERMS].threads - rr[i].m[M_CONN].threads) / IDLE_TERMS;
        v3[i] = (double)(rr[i].m[M_TERMS].fds - rr[i].m[M_CONN].fds) / IDLE_TERMS;
    }
    printf("| per idle terminal (Δ / %d) | %s | %s | %s |\n", IDLE_TERMS,
           bu_fmt3(a, sizeof a, v1, n, 1), bu_fmt3(b, sizeof b, v2, n, 2),
           rr[0].m[M_TERMS].fds < 0 ? "n/a" : bu_fmt3(c3, sizeof c3, v3, n, 2));
    mem_row("a fresh runner, connected, before the stream", rr, n, M_PRE);
    snprintf(what, sizeof what, "after the %.0f MB stream, terminal exited, not closed",
             (double)len / 1e6);
    mem_row(what, rr, n, M_EXITED);
    mem_row("same, after CLOSE", rr, n, M_CLOSED);
    for (int i = 0; i < n; i++) {
        v1[i] = (double)(rr[i].m[M_EXITED].rss_kb - rr[i].m[M_PRE].rss_kb);
        v2[i] = v1[i] / RING_KB;
        v3[i] = (double)(rr[i].m[M_CLOSED].rss_kb - rr[i].m[M_PRE].rss_kb);
    }
    printf("\nGrowth over the stream (exited − before): %s KB, i.e. %s × the %d KiB output ring; "
           "after CLOSE: %s KB.\n\n",
           bu_fmt3(a, sizeof a, v1, n, 0), bu_fmt3(b, sizeof b, v2, n, 2), RING_KB,
           bu_fmt3(c3, sizeof c3, v3, n, 0));

    /* every round */
    printf("Every round:\n\n| round | bare MB/s | runner MB/s | ratio | bare p50/p99 µs | runner "
           "p50/p99 µs | RSS idle KB | KB per idle terminal | RSS growth over the stream KB "
           "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        printf("| %d | %.1f | %.1f | %.2f | %.0f/%.0f | %.0f/%.0f | %ld | %.1f | %ld |\n", i + 1,
               rr[i].text.tput_bare, rr[i].text.tput_run,
               rr[i].text.tput_run / rr[i].text.tput_bare, rr[i].lat_bare[0], rr[i].lat_bare[2],
               rr[i].lat_run[0], rr[i].lat_run[2], rr[i].m[M_IDLE].rss_kb,
               (double)(rr[i].m[M_TERMS].rss_kb - rr[i].m[M_CONN].rss_kb) / IDLE_TERMS,
               rr[i].m[M_EXITED].rss_kb - rr[i].m[M_PRE].rss_kb);
}

/* ---- main ------------------------------------------------------------------- */

static void setup_dir(void)
{
    bu_make_tmpdir(g.dir, sizeof g.dir, "bench_runner");
    snprintf(g.log, sizeof g.log, "%s/runner.log", g.dir);
    snprintf(g.data, sizeof g.data, "%s/stream.txt", g.dir);
    snprintf(g.tui, sizeof g.tui, "%s/stream-tui.bin", g.dir);
    snprintf(g.jwks, sizeof g.jwks, "%s/jwks.json", g.dir);
    snprintf(g.key, sizeof g.key, "%s/signing-key.pem", g.dir);
    char out[1024];
    char *argv[] = {g.airlockd, "keygen", "--data", g.dir, NULL};
    if (bu_run_capture(argv, out, sizeof out, &g.child) != 0)
        bu_fail("airlockd keygen failed (see above)");
    if (access(g.jwks, R_OK) != 0)
        bu_fail("airlockd keygen made no %s", g.jwks);
}

int main(int argc, char **argv)
{
    bu_init("bench_runner", fail_cleanup);
    long mb = argc > 1 ? bu_arg_long(argv[1], 1, MAX_MB) : 200;
    long runs = argc > 2 ? bu_arg_long(argv[2], 1, MAX_RUNS) : 5;
    g.runner_path = argc > 3 ? argv[3] : "./build/airlock-runner";
    if (mb < 0 || runs < 0 || argc > 4) {
        fprintf(stderr,
                "usage: bench_runner [MB 1..%d] [RUNS 1..%d] [RUNNER]\n"
                "  defaults: 200 5 ./build/airlock-runner; airlockd must sit beside RUNNER\n",
                MAX_MB, MAX_RUNS);
        return 2;
    }
    const char *slash = strrchr(g.runner_path, '/');
    int dl = slash ? (int)(slash - g.runner_path) : 1;
    int n =
        snprintf(g.airlockd, sizeof g.airlockd, "%.*s/airlockd", dl, slash ? g.runner_path : ".");
    if (n < 0 || (size_t)n >= sizeof g.airlockd)
        bu_fail("RUNNER path too long");
    if (access(g.runner_path, X_OK) != 0)
        bu_fail("no runner at %s (build it, or give its path)", g.runner_path);
    if (access(g.airlockd, X_OK) != 0)
        bu_fail("no airlockd beside the runner at %s", g.airlockd);

    bu_catch_signals(on_signal);

    watchdog(120);
    setup_dir();
    struct dataset d, dt;
    make_dataset(&d, (size_t)mb * 1000000u, 0);
    make_dataset(&dt, (size_t)mb * 1000000u, 1);

    static struct wsc c;
    bu_ws_init(&c.ctl.ws, "the runner");

    static struct round_res rr[MAX_RUNS];
    unsigned phase_s = stream_secs(d.len) + 60u;
    for (int r = 0; r < runs; r++) {
        struct round_res *x = &rr[r];
        /* runner A: memory idle and with idle terminals, then echo latency */
        watchdog(120);
        int port = bu_free_port();
        start_runner(port);
        mem_phase(&c, port, x);
        watchdog(120);
        if (r % 2 == 0) { /* alternate which goes first */
            lat_runner(&c, port, x->lat_run);
            lat_bare(x->lat_bare);
        } else {
            lat_bare(x->lat_bare);
            lat_runner(&c, port, x->lat_run);
        }
        stop_runner();
        /* runner B, fresh so that its heap holds nothing of the above: the stream */
        watchdog(phase_s);
        port = bu_free_port();
        start_runner(port);
        if (r % 2 == 0)
            x->text.tput_run = tput_runner(&c, port, &d, &x->text, x->m);
        watchdog(phase_s);
        x->text.tput_bare = tput_bare(&d, &x->text);
        watchdog(phase_s);
        x->text.tput_hop = tput_hop(&d);
        watchdog(phase_s);
        if (r % 2 != 0)
            x->text.tput_run = tput_runner(&c, port, &d, &x->text, x->m);
        /* the TUI repaint stream, on the same runner, in the same order */
        watchdog(phase_s);
        if (r % 2 == 0)
            x->tui.tput_run = tput_runner(&c, port, &dt, &x->tui, NULL);
        watchdog(phase_s);
        x->tui.tput_bare = tput_bare(&dt, &x->tui);
        watchdog(phase_s);
        x->tui.tput_hop = tput_hop(&dt);
        watchdog(phase_s);
        if (r % 2 != 0)
            x->tui.tput_run = tput_runner(&c, port, &dt, &x->tui, NULL);
        watchdog(60);
        stop_runner();
        fprintf(
            stderr,
            "round %d/%ld: MB/s bare %.1f hop %.1f runner %.1f (%.2f of bare, %.2f of the hop), "
            "TUI bare %.1f hop %.1f runner %.1f (%.2f, %.2f; %.1f core-s/GB); echo p50/p99 µs "
            "bare %.0f/%.0f runner %.0f/%.0f; RSS idle %ld KB, %.1f KB per idle terminal, +%ld "
            "KB over the stream\n",
            r + 1, runs, x->text.tput_bare, x->text.tput_hop, x->text.tput_run,
            x->text.tput_run / x->text.tput_bare, x->text.tput_run / x->text.tput_hop,
            x->tui.tput_bare, x->tui.tput_hop, x->tui.tput_run, x->tui.tput_run / x->tui.tput_bare,
            x->tui.tput_run / x->tui.tput_hop, x->tui.cpu_run / ((double)dt.len / 1e9),
            x->lat_bare[0], x->lat_bare[2], x->lat_run[0], x->lat_run[2], x->m[M_IDLE].rss_kb,
            (double)(x->m[M_TERMS].rss_kb - x->m[M_CONN].rss_kb) / IDLE_TERMS,
            x->m[M_EXITED].rss_kb - x->m[M_PRE].rss_kb);
    }
    alarm(0);
    report(rr, (int)runs, d.len);
    munmap((void *)d.p, d.len);
    munmap((void *)dt.p, dt.len);
    cleanup_all();
    bu_ws_free(&c.ctl.ws);
    return 0;
}
