/*
 * bench_runner: what the real airlock-runner costs, end to end, beside the
 * limits of this machine.
 *
 * It starts its own airlock-runner processes (two fresh ones each round,
 * each on a free port of 127.0.0.1, trusting a throw-away key set made by
 * the real airlockd, with a token minted by airlockd for each connection)
 * and drives them as a controller: a controller endpoint
 * (src/common/endpoint.c does all the protocol work) over a small blocking
 * WebSocket client of its own. Runner A serves the memory and echo
 * measures, runner B the stream alone, so that neither heap holds what the
 * other measure left. Each round measures, the runner and the bare PTY in
 * alternating order:
 *
 *   throughput  MB (10^6 bytes) of deterministic base64 text, 76 columns
 *               and CRLF, through `stty raw -echo; exec cat FILE` in a
 *               terminal of the runner, checked byte for byte, against the
 *               same command under a bare PTY (forkpty, 64 KiB reads of the
 *               master); from spawning to the last byte
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
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "benchutil.h"
#include "endpoint.h"
#include "frame.h"

enum {
    MAX_RUNS = 21,
    MAX_MB = 1000,
    ECHO_N = 2000,
    ECHO_WARM = 100,
    IDLE_TERMS = 50,
    MAX_TRACK = 64,
    LINE_COLS = 76,
    RX_CAP = 1 << 20,
    TX_CAP = 2 * (AL_MAX_FRAME + 14),
    READ_BUF = 65536,
    RING_KB = 4096, /* the runner's default output ring per terminal */
};

#define IDENT "bench-runner"
#define API_VERSION "2024-02-02-preview"
#define ECHO_CMD "stty raw -echo; printf R; exec cat"
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define SEC 1000000000ull /* nanoseconds */

/* What the signal handler and fail() must clean up: only what we started. */
static struct {
    volatile pid_t runner; /* the airlock-runner of this round */
    volatile pid_t child;  /* a bare-PTY shell or an airlockd */
    char dir[200];
    char log[260], data[260], jwks[260], key[260];
    const char *runner_path;
    char airlockd[300];
} g;

/* ---- time, failure, cleanup -------------------------------------------- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

static uint64_t now_us(void)
{
    return now_ns() / 1000u;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void say(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

/* Async-signal-safe: wait up to 5 s for pid after first_sig, then SIGKILL. */
static void stop_pid(pid_t pid, int first_sig)
{
    if (pid <= 0)
        return;
    (void)kill(pid, first_sig);
    for (int i = 0; i < 100; i++) {
        if (waitpid(pid, NULL, WNOHANG) != 0)
            return;
        struct timespec ts = {0, 50000000L};
        (void)nanosleep(&ts, NULL);
    }
    (void)kill(pid, SIGKILL);
    (void)waitpid(pid, NULL, 0);
}

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
            say("---- end of the runner's log ----\n");
            ssize_t r = write(2, buf, (size_t)n);
            (void)r;
            say("----\n");
        }
    }
    close(fd);
}

/* Async-signal-safe: stop our processes, remove our files. */
static void cleanup_all(void)
{
    pid_t c = g.child, r = g.runner;
    g.child = 0;
    g.runner = 0;
    stop_pid(c, SIGKILL);
    stop_pid(r, SIGTERM);
    if (!g.dir[0])
        return;
    const char *files[] = {g.log, g.data, g.jwks, g.key};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i][0])
            (void)unlink(files[i]);
    if (rmdir(g.dir) != 0) {
        say("bench_runner: could not remove ");
        say(g.dir);
        say("\n");
    }
    g.dir[0] = 0;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("bench_runner: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    (void)fflush(stderr);
    show_log_tail();
    cleanup_all();
    exit(1);
}

static void on_signal(int sig)
{
    if (sig == SIGALRM)
        say("bench_runner: error: watchdog: a phase ran past its time limit\n");
    else
        say("bench_runner: interrupted\n");
    show_log_tail();
    cleanup_all();
    _exit(1);
}

/* ---- processes ------------------------------------------------------------ */

/* Reap pid within ms; 0 and *st set, or -1 if it is still running. */
static int wait_bounded(pid_t pid, unsigned ms, int *st)
{
    for (unsigned i = 0; i <= ms / 10u; i++) {
        pid_t w = waitpid(pid, st, WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return -1;
        sleep_ms(10);
    }
    return -1;
}

/* Run argv (no shell), its stdout into out (NUL-terminated); 0 if it exited 0. */
static int run_capture(char *const argv[], char *out, size_t cap)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        if (dup2(p[1], 1) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    g.child = pid;
    close(p[1]);
    size_t len = 0;
    uint64_t deadline = now_ns() + 10 * SEC;
    for (;;) {
        uint64_t now = now_ns();
        if (now >= deadline)
            fail("%s %s did not finish within 10 s", argv[0], argv[1]);
        struct pollfd pfd = {p[0], POLLIN, 0};
        int pr = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
        if (pr < 0 && errno != EINTR)
            fail("poll: %s", strerror(errno));
        if (pr <= 0)
            continue;
        char buf[1024];
        ssize_t n = read(p[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        size_t take = (size_t)n < cap - 1 - len ? (size_t)n : cap - 1 - len;
        memcpy(out + len, buf, take);
        len += take;
    }
    close(p[0]);
    out[len] = 0;
    int st = 0;
    if (wait_bounded(pid, 10000, &st) != 0)
        fail("%s %s did not exit", argv[0], argv[1]);
    g.child = 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void mint_token(char *tok, size_t cap)
{
    char *argv[] = {g.airlockd, "token",          "--data", g.dir, "--aud", IDENT,
                    "--scope",  "runner:connect", "--ttl",  "600", NULL};
    if (run_capture(argv, tok, cap) != 0)
        fail("airlockd token failed (see above)");
    size_t n = strlen(tok);
    while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r'))
        tok[--n] = 0;
    if (n == 0 || n >= cap - 1)
        fail("airlockd token printed no usable token");
}

static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        fail("socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0)
        fail("cannot find a free port: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

static int tcp_connect(int port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    int one = 1;
    (void)setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return s;
}

static void start_runner(int port)
{
    char listen_on[64];
    snprintf(listen_on, sizeof listen_on, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid < 0)
        fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        int lf = open(g.log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul < 0 || lf < 0 || dup2(nul, 0) < 0 || dup2(lf, 1) < 0 || dup2(lf, 2) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        execl(g.runner_path, "airlock-runner", "--listen", listen_on, "--identifier", IDENT,
              "--jwks", g.jwks, (char *)NULL);
        _exit(127);
    }
    g.runner = pid;
    for (int i = 0; i < 200; i++) { /* 5 s */
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            g.runner = 0;
            fail("%s exited at start (%s %d)", g.runner_path,
                 WIFEXITED(st) ? "exit code" : "signal",
                 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        int fd = tcp_connect(port);
        if (fd >= 0) {
            close(fd);
            return;
        }
        sleep_ms(25);
    }
    fail("%s is not listening on %s after 5 s", g.runner_path, listen_on);
}

static void stop_runner(void)
{
    pid_t pid = g.runner;
    g.runner = 0;
    stop_pid(pid, SIGTERM);
}

/* ---- /proc ---------------------------------------------------------------- */

struct mem {
    long rss_kb;
    int threads, fds;
};

static long status_field(const char *buf, const char *name)
{
    const char *p = strstr(buf, name);
    if (!p)
        return -1;
    return strtol(p + strlen(name), NULL, 10);
}

static struct mem mem_of(pid_t pid)
{
    char path[64], buf[4096];
    struct mem m = {-1, -1, -1};
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("cannot read %s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        fail("cannot read %s", path);
    buf[n] = 0;
    m.rss_kb = status_field(buf, "\nVmRSS:");
    m.threads = (int)status_field(buf, "\nThreads:");
    if (m.rss_kb < 0)
        fail("no VmRSS in %s", path);
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) { /* needs privilege: the runner is not dumpable */
        m.fds = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL && m.fds < 100000;)
            if (e->d_name[0] != '.')
                m.fds++;
        closedir(d);
    }
    return m;
}

/* utime + stime of pid (not its children), in seconds. */
static double cpu_of(pid_t pid)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("cannot read %s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        fail("cannot read %s", path);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        fail("cannot parse %s", path);
    p += 2; /* field 3, the state */
    for (int field = 3; field < 14; field++) {
        p = strchr(p, ' ');
        if (!p)
            fail("cannot parse %s", path);
        p++;
    }
    char *end;
    unsigned long long ut = strtoull(p, &end, 10);
    unsigned long long st = strtoull(end, NULL, 10);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- the data set --------------------------------------------------------- */

struct dataset {
    const uint8_t *p;
    size_t len;
    char cmd[400];
};

static const char b64std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* len bytes of base64-looking text (xorshift64), lines of 76 + CR LF. */
static void make_dataset(struct dataset *d, size_t len)
{
    int fd = open(g.data, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        fail("cannot create %s: %s", g.data, strerror(errno));
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf)
        fail("out of memory");
    uint64_t x = 0x9E3779B97F4A7C15ull;
    unsigned col = 0;
    for (size_t done = 0; done < len;) {
        size_t n = len - done < CHUNK ? len - done : CHUNK;
        for (size_t i = 0; i < n; i++) {
            if (col < LINE_COLS) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                buf[i] = (uint8_t)b64std[x >> 58];
                col++;
            } else if (col == LINE_COLS) {
                buf[i] = '\r';
                col++;
            } else {
                buf[i] = '\n';
                col = 0;
            }
        }
        if (bu_write_all(fd, buf, n) != 0)
            fail("cannot write %s: %s", g.data, strerror(errno));
        done += n;
    }
    free(buf);
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED)
        fail("mmap %s: %s", g.data, strerror(errno));
    close(fd);
    d->p = m;
    d->len = len;
    snprintf(d->cmd, sizeof d->cmd, "stty raw -echo; exec cat '%s'", g.data);
}

/* ---- a small blocking WebSocket client around a controller endpoint ------- */

struct track {
    uint32_t id;
    int opened, exited, closed;
    int32_t code;
    uint8_t signo;
};

struct wsc {
    int fd;
    struct ep *ep;
    uint8_t *rx, *tx, *msg;
    size_t rx_start, rx_end, tx_len, msg_len;
    int in_frag;
    uint32_t mask_state;
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
    char err[300]; /* the first failure seen in a callback */
};

static void wsc_error(struct wsc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void wsc_error(struct wsc *c, const char *fmt, ...)
{
    if (c->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

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
            wsc_error(c, "channel %u: data on stream %u", (unsigned)ev->channel, ev->stream);
            break;
        }
        if (ev->channel == c->sink_ch && c->sink_ch) {
            if (ev->offset != c->sink_got || c->sink_got + ev->len > c->expect_len)
                wsc_error(c, "stream: %zu bytes at offset %llu, expected offset %llu of %llu",
                          ev->len, (unsigned long long)ev->offset, (unsigned long long)c->sink_got,
                          (unsigned long long)c->expect_len);
            else if (memcmp(c->expect + c->sink_got, ev->data, ev->len) != 0)
                wsc_error(c, "stream: bytes differ from the file near offset %llu",
                          (unsigned long long)c->sink_got);
            c->sink_got += ev->len;
            c->sink_frames++;
            if (ev->len > c->sink_max)
                c->sink_max = ev->len;
        } else if (ev->channel == c->echo_ch && c->echo_ch && ev->len > 0) {
            c->echo_got += ev->len;
            c->echo_last = ev->data[ev->len - 1];
        }
        if (ep_consume(c->ep, ev->channel, ev->stream, ev->len) != AL_OK)
            wsc_error(c, "ep_consume failed on channel %u", (unsigned)ev->channel);
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
        wsc_error(c, "the runner does not know channel %u", (unsigned)ev->channel);
        break;
    case EP_EV_GAP:
        wsc_error(c, "channel %u: output lost (gap %llu..%llu)", (unsigned)ev->channel,
                  (unsigned long long)ev->offset, (unsigned long long)ev->to);
        break;
    case EP_EV_ERROR:
        wsc_error(c, "the runner sent ERROR %u on channel %u: %.*s", ev->code,
                  (unsigned)ev->channel, (int)ev->len, (const char *)ev->data);
        break;
    default:
        break;
    }
}

static uint32_t next_mask(struct wsc *c)
{
    uint32_t x = c->mask_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return c->mask_state = x;
}

static void ws_send_tx(struct wsc *c)
{
    size_t off = 0;
    uint64_t deadline = now_ns() + 10 * SEC;
    while (off < c->tx_len) {
        ssize_t w = write(c->fd, c->tx + off, c->tx_len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail("send to the runner: %s", strerror(errno));
        if (now_ns() > deadline)
            fail("the runner took nothing for 10 s");
        struct pollfd pfd = {c->fd, POLLOUT, 0};
        (void)poll(&pfd, 1, 100);
    }
    c->tx_len = 0;
}

/* Queue one masked client frame (opcode op). */
static void ws_put(struct wsc *c, unsigned op, const uint8_t *p, size_t n)
{
    if (c->tx_len + n + 14 > TX_CAP)
        ws_send_tx(c);
    uint8_t *h = c->tx + c->tx_len;
    size_t k = 0;
    h[k++] = (uint8_t)(0x80u | op);
    if (n < 126) {
        h[k++] = (uint8_t)(0x80u | n);
    } else if (n <= 0xffff) {
        h[k++] = 0x80u | 126u;
        h[k++] = (uint8_t)(n >> 8);
        h[k++] = (uint8_t)n;
    } else {
        h[k++] = 0x80u | 127u;
        for (int i = 7; i >= 0; i--)
            h[k++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    uint32_t m = next_mask(c);
    uint8_t mk[4] = {(uint8_t)(m >> 24), (uint8_t)(m >> 16), (uint8_t)(m >> 8), (uint8_t)m};
    memcpy(h + k, mk, 4);
    k += 4;
    for (size_t i = 0; i < n; i++)
        h[k + i] = p[i] ^ mk[i & 3];
    c->tx_len += k + n;
}

/* Send every frame the endpoint has, in as few writes as fit. */
static void ws_flush(struct wsc *c)
{
    static uint8_t fb[AL_MAX_FRAME];
    for (int i = 0; i < 4096; i++) {
        long n = ep_output(c->ep, fb, sizeof fb, now_us());
        if (n < 0)
            fail("the endpoint cannot encode a frame: %s", al_strerror((int)n));
        if (n == 0)
            break;
        ws_put(c, 0x2, fb, (size_t)n);
    }
    if (c->tx_len)
        ws_send_tx(c);
    int code;
    const char *why;
    if (ep_closing(c->ep, &code, &why))
        fail("the endpoint wants the link closed (%d): %s", code, why);
}

static void ws_deliver(struct wsc *c, const uint8_t *p, size_t n)
{
    int rc = ep_input(c->ep, p, n, now_us());
    if (rc < 0)
        wsc_error(c, "the endpoint refused a frame from the runner: %s", al_strerror(rc));
}

/* Take the complete WebSocket frames out of rx. */
static void ws_parse(struct wsc *c)
{
    while (c->rx_end - c->rx_start >= 2 && !c->err[0]) {
        const uint8_t *p = c->rx + c->rx_start;
        size_t avail = c->rx_end - c->rx_start;
        unsigned fin = p[0] & 0x80u, op = p[0] & 0x0fu;
        if ((p[0] & 0x70u) || (p[1] & 0x80u)) {
            wsc_error(c, "bad WebSocket frame header from the runner");
            return;
        }
        uint64_t len = p[1] & 0x7fu;
        size_t hl = 2;
        if (len == 126) {
            if (avail < 4)
                break;
            len = (uint64_t)p[2] << 8 | p[3];
            hl = 4;
        } else if (len == 127) {
            if (avail < 10)
                break;
            len = 0;
            for (int i = 2; i < 10; i++)
                len = len << 8 | p[i];
            hl = 10;
        }
        if (len > AL_MAX_FRAME) {
            wsc_error(c, "WebSocket frame of %llu bytes from the runner", (unsigned long long)len);
            return;
        }
        if (avail < hl + len)
            break;
        const uint8_t *pl = p + hl;
        size_t n = (size_t)len;
        c->rx_start += hl + n;
        switch (op) {
        case 0x2:
            if (c->in_frag) {
                wsc_error(c, "new message inside a fragmented one");
                return;
            }
            if (fin) {
                ws_deliver(c, pl, n);
            } else {
                memcpy(c->msg, pl, n);
                c->msg_len = n;
                c->in_frag = 1;
            }
            break;
        case 0x0:
            if (!c->in_frag || c->msg_len + n > AL_MAX_FRAME) {
                wsc_error(c, "bad continuation frame");
                return;
            }
            memcpy(c->msg + c->msg_len, pl, n);
            c->msg_len += n;
            if (fin) {
                c->in_frag = 0;
                ws_deliver(c, c->msg, c->msg_len);
            }
            break;
        case 0x8:
            wsc_error(c, "the runner closed the WebSocket (code %u, %.*s)",
                      n >= 2 ? (unsigned)(pl[0] << 8 | pl[1]) : 0u, n > 2 ? (int)(n - 2) : 0,
                      n > 2 ? (const char *)pl + 2 : "");
            return;
        case 0x9:
            ws_put(c, 0xA, pl, n);
            break;
        case 0xA:
            break;
        default:
            wsc_error(c, "WebSocket opcode %u from the runner", op);
            return;
        }
    }
    if (c->rx_start == c->rx_end)
        c->rx_start = c->rx_end = 0;
}

/* Send what is queued, then one read (waiting at most until deadline_ns), its
 * frames, and our answers. */
static void ws_pump(struct wsc *c, uint64_t deadline_ns)
{
    ws_flush(c); /* what the endpoint queued since: nothing comes back without it */
    if (RX_CAP - c->rx_end < (size_t)2 * (AL_MAX_FRAME + 14)) {
        memmove(c->rx, c->rx + c->rx_start, c->rx_end - c->rx_start);
        c->rx_end -= c->rx_start;
        c->rx_start = 0;
    }
    ssize_t r = read(c->fd, c->rx + c->rx_end, RX_CAP - c->rx_end);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        uint64_t now = now_ns();
        int ms = 0;
        if (deadline_ns > now)
            ms = (int)((deadline_ns - now) / 1000000u) + 1;
        if (ms > 1000)
            ms = 1000;
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno != EINTR)
            fail("poll: %s", strerror(errno));
        if (pr <= 0)
            return;
        r = read(c->fd, c->rx + c->rx_end, RX_CAP - c->rx_end);
    }
    if (r == 0)
        fail("the runner dropped the connection");
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return;
        fail("read from the runner: %s", strerror(errno));
    }
    c->rx_end += (size_t)r;
    ws_parse(c);
    if (c->err[0])
        fail("%s", c->err);
    ws_flush(c);
}

static void ws_settle(struct wsc *c, unsigned ms)
{
    uint64_t until = now_ns() + (uint64_t)ms * 1000000u;
    for (uint64_t now = now_ns(); now < until; now = now_ns())
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
    uint64_t deadline = now_ns() + secs * SEC;
    while (!pred(c, arg)) {
        if (now_ns() > deadline)
            fail("timed out after %u s waiting for %s", secs, what);
        ws_pump(c, deadline);
    }
}

static void b64_encode(const uint8_t *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = b64std[v >> 18 & 63];
        out[o++] = b64std[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64std[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64std[v & 63] : '=';
    }
    out[o] = 0;
}

/* The value of header name (with colon) in the response head, or NULL. */
static const char *header_value(const char *head, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl;
            while (*v == ' ' || *v == '\t')
                v++;
            const char *e = strstr(v, "\r\n");
            *len = e ? (size_t)(e - v) : strlen(v);
            while (*len > 0 && (v[*len - 1] == ' ' || v[*len - 1] == '\t'))
                (*len)--;
            return v;
        }
    }
    return NULL;
}

/* Connect, upgrade, exchange HELLOs. */
static void ws_open(struct wsc *c, int port)
{
    char token[AL_MAX_TOKEN + 2];
    mint_token(token, sizeof token);
    c->fd = tcp_connect(port);
    if (c->fd < 0)
        fail("cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        fail("getrandom failed");
    char key[32], want[40];
    b64_encode(rnd, sizeof rnd, key);
    memcpy(&c->mask_state, rnd, sizeof c->mask_state);
    c->mask_state |= 1;
    char kg[64 + sizeof WS_GUID];
    int kl = snprintf(kg, sizeof kg, "%s%s", key, WS_GUID);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (kl < 0 || EVP_Digest(kg, (size_t)kl, md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20)
        fail("SHA-1 failed");
    b64_encode(md, mdlen, want);
    char req[AL_MAX_TOKEN + 1024];
    int rl = snprintf(req, sizeof req,
                      "GET /?identifier=%s&api-version=%s HTTP/1.1\r\n"
                      "Host: 127.0.0.1:%d\r\n"
                      "Upgrade: websocket\r\n"
                      "Connection: Upgrade\r\n"
                      "Sec-WebSocket-Key: %s\r\n"
                      "Sec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Protocol: %s\r\n"
                      "Authorization: Bearer %s\r\n\r\n",
                      IDENT, API_VERSION, port, key, AL_SUBPROTOCOL, token);
    if (rl < 0 || (size_t)rl >= sizeof req)
        fail("upgrade request too long");
    if (bu_write_all(c->fd, req, (size_t)rl) != 0)
        fail("cannot send the upgrade request: %s", strerror(errno));
    /* the response head; whatever follows it is WebSocket data */
    char *head = (char *)c->rx;
    size_t got = 0;
    const char *end = NULL;
    uint64_t deadline = now_ns() + 5 * SEC;
    while (!end) {
        if (got >= 16384 || now_ns() > deadline)
            fail("no upgrade response from the runner within 5 s");
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(c->fd, head + got, 16384 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail("the runner closed the connection during the upgrade");
        got += (size_t)n;
        end = memmem(head, got, "\r\n\r\n", 4);
    }
    size_t hlen = (size_t)(end - head) + 4;
    char resp[16385];
    memcpy(resp, head, hlen);
    resp[hlen] = 0;
    if (strncmp(resp, "HTTP/1.1 101", 12) != 0) {
        const char *eol = strstr(resp, "\r\n");
        fail("upgrade refused: %.*s", (int)(eol - resp), resp);
    }
    size_t vl = 0;
    const char *v = header_value(resp, "Sec-WebSocket-Accept:", &vl);
    if (!v || vl != strlen(want) || memcmp(v, want, vl) != 0)
        fail("bad Sec-WebSocket-Accept from the runner");
    v = header_value(resp, "Sec-WebSocket-Protocol:", &vl);
    if (!v || vl != strlen(AL_SUBPROTOCOL) || memcmp(v, AL_SUBPROTOCOL, vl) != 0)
        fail("the runner did not agree on %s", AL_SUBPROTOCOL);
    memmove(c->rx, c->rx + hlen, got - hlen);
    c->rx_start = 0;
    c->rx_end = got - hlen;
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        fail("fcntl: %s", strerror(errno));

    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_CONTROLLER);
    ec.name = "bench_runner";
    ec.ping_interval_us = 0; /* we answer the runner's pings; we send none */
    ec.idle_timeout_us = 0;
    ec.on_event = on_event;
    ec.ud = c;
    int rc = ep_new(&ec, &c->ep);
    if (rc != AL_OK)
        fail("ep_new: %s", al_strerror(rc));
    c->ready = 0;
    c->nt = 0;
    c->in_frag = 0;
    c->tx_len = 0;
    c->err[0] = 0;
    c->sink_ch = c->echo_ch = 0;
    ep_link_up(c->ep, now_us());
    ws_flush(c);
    ws_parse(c);
    if (c->err[0])
        fail("%s", c->err);
    ws_wait(c, p_ready, 0, 5, "the runner's HELLO");
}

/* Close politely and wait (1 s at most) for the runner to drop the socket. */
static void ws_close(struct wsc *c)
{
    static const uint8_t normal[2] = {0x03, 0xe8};
    ws_put(c, 0x8, normal, sizeof normal);
    ws_send_tx(c);
    uint64_t deadline = now_ns() + SEC;
    while (now_ns() < deadline) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t n = read(c->fd, c->rx, RX_CAP);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
    }
    close(c->fd);
    c->fd = -1;
    ep_link_down(c->ep);
    ep_free(c->ep);
    c->ep = NULL;
    c->rx_start = c->rx_end = 0;
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
        fail("too many channels");
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
    long id = ep_open(c->ep, &o);
    if (id <= 0)
        fail("ep_open: %s", al_strerror((int)id));
    struct track *t = &c->t[c->nt++];
    memset(t, 0, sizeof *t);
    t->id = (uint32_t)id;
    return (uint32_t)id;
}

static void ws_close_term(struct wsc *c, uint32_t ch)
{
    int rc = ep_close(c->ep, ch);
    if (rc != AL_OK)
        fail("ep_close: %s", al_strerror(rc));
}

/* ---- the bare PTY ---------------------------------------------------------- */

static pid_t bare_spawn(const char *cmd, int *master)
{
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    pid_t pid = forkpty(master, NULL, NULL, &ws);
    if (pid < 0)
        fail("forkpty: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    g.child = pid;
    int fl = fcntl(*master, F_GETFL);
    if (fl < 0 || fcntl(*master, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(*master, F_SETFD, FD_CLOEXEC) != 0)
        fail("fcntl: %s", strerror(errno));
    return pid;
}

/* Bytes from the master (waiting until deadline_ns); 0 at its end. */
static size_t bare_read(int m, uint8_t *buf, size_t cap, uint64_t deadline_ns)
{
    for (;;) {
        ssize_t r = read(m, buf, cap);
        if (r > 0)
            return (size_t)r;
        if (r == 0 || (r < 0 && errno == EIO))
            return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            fail("read from the PTY: %s", strerror(errno));
        uint64_t now = now_ns();
        if (now > deadline_ns)
            fail("the bare PTY sent nothing in time");
        int ms = (int)((deadline_ns - now) / 1000000u) + 1;
        struct pollfd pfd = {m, POLLIN, 0};
        (void)poll(&pfd, 1, ms > 1000 ? 1000 : ms);
    }
}

static void bare_stop(pid_t pid, int m)
{
    close(m);
    int st;
    if (wait_bounded(pid, 2000, &st) != 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
    }
    g.child = 0;
}

/* ---- the measures ----------------------------------------------------------- */

/* The runner states whose memory is read. */
enum { M_IDLE, M_CONN, M_TERMS, M_PRE, M_EXITED, M_CLOSED, M_COUNT };

struct round_res {
    double tput_bare, tput_run, cpu_run;
    double bare_avg_read, bare_max_read, run_avg_data, run_max_data; /* bytes */
    double lat_bare[4], lat_run[4]; /* p50 p90 p99 max, microseconds */
    struct mem m[M_COUNT];
};

static unsigned stream_secs(size_t len)
{
    return 20u + (unsigned)(len / 5000000u); /* 5 MB/s at the least */
}

static void watchdog(unsigned secs)
{
    alarm(secs);
}

static double tput_bare(const struct dataset *d, struct round_res *rr)
{
    static uint8_t buf[READ_BUF];
    int m;
    uint64_t t0 = now_ns();
    pid_t pid = bare_spawn(d->cmd, &m);
    uint64_t deadline = t0 + stream_secs(d->len) * SEC;
    size_t got = 0, reads = 0, max = 0;
    while (got < d->len) {
        size_t n = bare_read(m, buf, sizeof buf, deadline);
        reads++;
        if (n > max)
            max = n;
        if (n == 0)
            fail("bare PTY: the stream ended after %zu of %zu bytes", got, d->len);
        if (got + n > d->len || memcmp(d->p + got, buf, n) != 0)
            fail("bare PTY: bytes differ from the file near offset %zu", got);
        got += n;
    }
    uint64_t t1 = now_ns();
    bare_stop(pid, m);
    rr->bare_avg_read = (double)d->len / (double)reads;
    rr->bare_max_read = (double)max;
    return (double)d->len / ((double)(t1 - t0) / 1e9) / 1e6;
}

static double tput_runner(struct wsc *c, int port, const struct dataset *d, struct round_res *rr)
{
    ws_open(c, port);
    ws_settle(c, 100);
    rr->m[M_PRE] = mem_of(g.runner);
    double cpu0 = cpu_of(g.runner);
    c->expect = d->p;
    c->expect_len = d->len;
    c->sink_got = c->sink_frames = c->sink_max = 0;
    uint64_t t0 = now_ns();
    uint32_t ch = ws_open_term(c, d->cmd);
    c->sink_ch = ch;
    ws_flush(c);
    uint64_t deadline = t0 + stream_secs(d->len) * SEC;
    while (c->sink_got < d->len) {
        if (now_ns() > deadline)
            fail("runner: %llu of %zu bytes after %u s", (unsigned long long)c->sink_got, d->len,
                 stream_secs(d->len));
        ws_pump(c, deadline);
    }
    uint64_t t1 = now_ns();
    ws_wait(c, p_exited, ch, 10, "EXIT after the stream");
    const struct track *t = track_of(c, ch);
    if (t->code != 0 || t->signo != 0)
        fail("runner: the stream's command ended with code %d, signal %u", (int)t->code,
             (unsigned)t->signo);
    struct ep_stream_info si;
    if (ep_stream_info(c->ep, ch, FR_STDOUT, &si) != AL_OK || si.end != d->len || !si.eof)
        fail("runner: the stream did not end at %zu bytes", d->len);
    rr->cpu_run = cpu_of(g.runner) - cpu0;
    rr->run_avg_data = (double)d->len / (double)c->sink_frames;
    rr->run_max_data = (double)c->sink_max;
    ws_settle(c, 200);
    rr->m[M_EXITED] = mem_of(g.runner);
    ws_close_term(c, ch);
    ws_wait(c, p_all_closed, 0, 10, "CLOSE of the stream's terminal");
    c->sink_ch = 0;
    ws_settle(c, 200);
    rr->m[M_CLOSED] = mem_of(g.runner);
    ws_close(c);
    return (double)d->len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* p50, p90, p99 (nearest rank) and max of n samples, sorted in place. */
static void percentiles(double *v, int n, double out[4])
{
    static const int pct[3] = {50, 90, 99};
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    for (int i = 0; i < 3; i++)
        out[i] = v[(pct[i] * n + 99) / 100 - 1];
    out[3] = v[n - 1];
}

static void lat_bare(double out[4])
{
    static double s[ECHO_N];
    uint8_t buf[256];
    int m;
    pid_t pid = bare_spawn(ECHO_CMD, &m);
    size_t n = bare_read(m, buf, sizeof buf, now_ns() + 10 * SEC);
    if (n != 1 || buf[0] != 'R')
        fail("bare PTY: the echo command did not start (%zu bytes)", n);
    for (int i = 0; i < ECHO_WARM + ECHO_N; i++) {
        uint8_t b = (uint8_t)('a' + i % 26);
        uint64_t t0 = now_ns();
        if (write(m, &b, 1) != 1)
            fail("write to the PTY: %s", strerror(errno));
        n = bare_read(m, buf, sizeof buf, t0 + 2 * SEC);
        uint64_t t1 = now_ns();
        if (n != 1 || buf[0] != b)
            fail("bare PTY: round trip %d brought back %zu bytes", i, n);
        if (i >= ECHO_WARM)
            s[i - ECHO_WARM] = (double)(t1 - t0) / 1e3;
    }
    bare_stop(pid, m);
    percentiles(s, ECHO_N, out);
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
        fail("runner: the echo command did not start cleanly");
    for (int i = 0; i < ECHO_WARM + ECHO_N; i++) {
        uint8_t b = (uint8_t)('a' + i % 26);
        uint64_t want = c->echo_got + 1;
        uint64_t t0 = now_ns();
        if (ep_write(c->ep, ch, FR_STDIN, &b, 1) != 1)
            fail("runner: no stdin credit at round trip %d", i);
        ws_flush(c);
        uint64_t deadline = t0 + 2 * SEC;
        while (c->echo_got < want) {
            if (now_ns() > deadline)
                fail("runner: no echo within 2 s at round trip %d", i);
            ws_pump(c, deadline);
        }
        uint64_t t1 = now_ns();
        if (c->echo_got != want || c->echo_last != b)
            fail("runner: round trip %d brought back the wrong bytes", i);
        if (i >= ECHO_WARM)
            s[i - ECHO_WARM] = (double)(t1 - t0) / 1e3;
    }
    c->echo_ch = 0;
    ws_close_term(c, ch);
    ws_wait(c, p_all_closed, 0, 10, "CLOSE of the echo terminal");
    ws_close(c);
    percentiles(s, ECHO_N, out);
}

static void mem_phase(struct wsc *c, int port, struct round_res *rr)
{
    sleep_ms(200);
    rr->m[M_IDLE] = mem_of(g.runner);
    ws_open(c, port);
    ws_settle(c, 200);
    rr->m[M_CONN] = mem_of(g.runner);
    uint32_t ids[IDLE_TERMS];
    for (int i = 0; i < IDLE_TERMS; i++)
        ids[i] = ws_open_term(c, NULL);
    ws_flush(c);
    ws_wait(c, p_all_opened, 0, 30, "the idle terminals to open");
    ws_settle(c, 500);
    rr->m[M_TERMS] = mem_of(g.runner);
    for (int i = 0; i < IDLE_TERMS; i++)
        ws_close_term(c, ids[i]);
    ws_flush(c);
    ws_wait(c, p_all_closed, 0, 30, "the idle terminals to close");
    ws_close(c);
}

/* ---- report -------------------------------------------------------------- */

struct stat3 {
    double min, med, max;
};

static struct stat3 stat3_of(const double *v, int n)
{
    double s[MAX_RUNS];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, bu_cmp_double);
    struct stat3 r = {s[0], n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2, s[n - 1]};
    return r;
}

/* "min/med/max" with prec decimals. */
static const char *fmt3(char *buf, size_t cap, const double *v, int n, int prec)
{
    struct stat3 s = stat3_of(v, n);
    snprintf(buf, cap, "%.*f/%.*f/%.*f", prec, s.min, prec, s.med, prec, s.max);
    return buf;
}

static void mem_row(const char *what, const struct round_res *rr, int n, int state)
{
    double rss[MAX_RUNS] = {0}, thr[MAX_RUNS] = {0}, fds[MAX_RUNS] = {0};
    for (int i = 0; i < n; i++) {
        const struct mem *m = &rr[i].m[state];
        rss[i] = (double)m->rss_kb;
        thr[i] = m->threads;
        fds[i] = m->fds;
    }
    char a[64], b[64], f[64];
    printf("| %s | %s | %s | %s |\n", what, fmt3(a, sizeof a, rss, n, 0),
           fmt3(b, sizeof b, thr, n, 0),
           rr[0].m[state].fds < 0 ? "n/a" : fmt3(f, sizeof f, fds, n, 0));
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
        v1[i] = rr[i].tput_bare;
        v2[i] = rr[i].tput_run;
        v3[i] = rr[i].tput_run / rr[i].tput_bare;
        v4[i] = rr[i].cpu_run;
    }
    struct stat3 sb = stat3_of(v1, n), sr = stat3_of(v2, n), sc = stat3_of(v4, n);
    printf("Output throughput: %zu bytes (%.0f MB) of base64 text, 76 columns + CRLF, through "
           "`stty raw -echo; exec cat FILE`, from spawn to the last byte, verified byte for "
           "byte. Cells: min/median/max over rounds.\n\n",
           len, (double)len / 1e6);
    printf("| path | MB/s | / bare PTY (medians) | / bare PTY, same round |\n|---|---|---|---|\n");
    printf("| bare PTY: forkpty, 64 KiB reads (limit) | %s | 1.00 | 1.00 |\n",
           fmt3(a, sizeof a, v1, n, 1));
    printf("| airlock-runner: airlock.v1 over WebSocket, C client | %s | %.2f | %s |\n\n",
           fmt3(b, sizeof b, v2, n, 1), sr.med / sb.med, fmt3(c3, sizeof c3, v3, n, 2));
    printf("Runner CPU (utime+stime, children excluded) per stream: %s s, i.e. %.1f "
           "core-s/GB at the median.\n\n",
           fmt3(d, sizeof d, v4, n, 2), sc.med / ((double)len / 1e9));

    for (int i = 0; i < n; i++) {
        v1[i] = rr[i].bare_avg_read;
        v2[i] = rr[i].bare_max_read;
        v3[i] = rr[i].run_avg_data;
        v4[i] = rr[i].run_max_data;
    }
    printf("Sizes: bare PTY reads average %s bytes (largest %s); the runner's DATA frames "
           "carry %s bytes on average (largest %s).\n\n",
           fmt3(a, sizeof a, v1, n, 0), fmt3(b, sizeof b, v2, n, 0), fmt3(c3, sizeof c3, v3, n, 0),
           fmt3(d, sizeof d, v4, n, 0));

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
            printf(" %s |", fmt3(a, sizeof a, v1, n, 0));
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
           fmt3(a, sizeof a, v1, n, 1), fmt3(b, sizeof b, v2, n, 2),
           rr[0].m[M_TERMS].fds < 0 ? "n/a" : fmt3(c3, sizeof c3, v3, n, 2));
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
           fmt3(a, sizeof a, v1, n, 0), fmt3(b, sizeof b, v2, n, 2), RING_KB,
           fmt3(c3, sizeof c3, v3, n, 0));

    /* every round */
    printf("Every round:\n\n| round | bare MB/s | runner MB/s | ratio | bare p50/p99 µs | runner "
           "p50/p99 µs | RSS idle KB | KB per idle terminal | RSS growth over the stream KB "
           "|\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        printf("| %d | %.1f | %.1f | %.2f | %.0f/%.0f | %.0f/%.0f | %ld | %.1f | %ld |\n", i + 1,
               rr[i].tput_bare, rr[i].tput_run, rr[i].tput_run / rr[i].tput_bare, rr[i].lat_bare[0],
               rr[i].lat_bare[2], rr[i].lat_run[0], rr[i].lat_run[2], rr[i].m[M_IDLE].rss_kb,
               (double)(rr[i].m[M_TERMS].rss_kb - rr[i].m[M_CONN].rss_kb) / IDLE_TERMS,
               rr[i].m[M_EXITED].rss_kb - rr[i].m[M_PRE].rss_kb);
}

/* ---- main ------------------------------------------------------------------- */

static void setup_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    int n = snprintf(g.dir, sizeof g.dir, "%s/bench_runner.XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof g.dir - 20 || strchr(g.dir, '\''))
        fail("TMPDIR is too long or holds a quote");
    if (!mkdtemp(g.dir)) {
        g.dir[0] = 0;
        fail("mkdtemp: %s", strerror(errno));
    }
    snprintf(g.log, sizeof g.log, "%s/runner.log", g.dir);
    snprintf(g.data, sizeof g.data, "%s/stream.txt", g.dir);
    snprintf(g.jwks, sizeof g.jwks, "%s/jwks.json", g.dir);
    snprintf(g.key, sizeof g.key, "%s/signing-key.pem", g.dir);
    char out[1024];
    char *argv[] = {g.airlockd, "keygen", "--data", g.dir, NULL};
    if (run_capture(argv, out, sizeof out) != 0)
        fail("airlockd keygen failed (see above)");
    if (access(g.jwks, R_OK) != 0)
        fail("airlockd keygen made no %s", g.jwks);
}

static long arg_long(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    return v;
}

int main(int argc, char **argv)
{
    long mb = argc > 1 ? arg_long(argv[1], 1, MAX_MB) : 200;
    long runs = argc > 2 ? arg_long(argv[2], 1, MAX_RUNS) : 5;
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
        fail("RUNNER path too long");
    if (access(g.runner_path, X_OK) != 0)
        fail("no runner at %s (build it, or give its path)", g.runner_path);
    if (access(g.airlockd, X_OK) != 0)
        fail("no airlockd beside the runner at %s", g.airlockd);

    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    watchdog(120);
    setup_dir();
    struct dataset d;
    make_dataset(&d, (size_t)mb * 1000000u);

    static struct wsc c;
    c.fd = -1;
    c.rx = malloc(RX_CAP);
    c.tx = malloc(TX_CAP);
    c.msg = malloc(AL_MAX_FRAME);
    if (!c.rx || !c.tx || !c.msg)
        fail("out of memory");

    static struct round_res rr[MAX_RUNS];
    unsigned phase_s = stream_secs(d.len) + 60u;
    for (int r = 0; r < runs; r++) {
        struct round_res *x = &rr[r];
        /* runner A: memory idle and with idle terminals, then echo latency */
        watchdog(120);
        int port = free_port();
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
        port = free_port();
        start_runner(port);
        if (r % 2 == 0)
            x->tput_run = tput_runner(&c, port, &d, x);
        watchdog(phase_s);
        x->tput_bare = tput_bare(&d, x);
        watchdog(phase_s);
        if (r % 2 != 0)
            x->tput_run = tput_runner(&c, port, &d, x);
        watchdog(60);
        stop_runner();
        fprintf(stderr,
                "round %d/%ld: MB/s bare %.1f runner %.1f (%.2f); echo p50/p99 µs bare "
                "%.0f/%.0f runner %.0f/%.0f; RSS idle %ld KB, %.1f KB per idle terminal, +%ld KB "
                "over the stream\n",
                r + 1, runs, x->tput_bare, x->tput_run, x->tput_run / x->tput_bare, x->lat_bare[0],
                x->lat_bare[2], x->lat_run[0], x->lat_run[2], x->m[M_IDLE].rss_kb,
                (double)(x->m[M_TERMS].rss_kb - x->m[M_CONN].rss_kb) / IDLE_TERMS,
                x->m[M_EXITED].rss_kb - x->m[M_PRE].rss_kb);
    }
    alarm(0);
    report(rr, (int)runs, d.len);
    munmap((void *)d.p, d.len);
    cleanup_all();
    free(c.rx);
    free(c.tx);
    free(c.msg);
    return 0;
}
