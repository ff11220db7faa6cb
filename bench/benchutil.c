/* benchutil: see benchutil.h. */
#include "benchutil.h"

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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "frame.h"

enum {
    LINE_COLS = 76,
    RX_CAP = 1 << 20,
    TX_CAP = 2 * (AL_MAX_FRAME + 14),
    HEAD_MAX = 16384, /* bytes of an upgrade response head */
};

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static const char b64std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* ---- time, I/O, statistics ------------------------------------------------ */

double bu_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t bu_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * BU_SEC + (uint64_t)ts.tv_nsec;
}

uint64_t bu_now_us(void)
{
    return bu_now_ns() / 1000u;
}

void bu_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000u), (long)(ms % 1000u) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int bu_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int bu_read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int bu_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bu_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct bu_stat3 bu_stat3_of(const double *v, int n)
{
    double s[BU_MAX_RUNS];
    if (n < 1 || n > BU_MAX_RUNS)
        bu_fail("bu_stat3_of: %d samples", n);
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, bu_cmp_double);
    struct bu_stat3 r = {s[0], n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2, s[n - 1]};
    return r;
}

const char *bu_fmt3(char *buf, size_t cap, const double *v, int n, int prec)
{
    struct bu_stat3 s = bu_stat3_of(v, n);
    snprintf(buf, cap, "%.*f/%.*f/%.*f", prec, s.min, prec, s.med, prec, s.max);
    return buf;
}

void bu_percentiles(double *v, int n, double out[4])
{
    static const int pct[3] = {50, 90, 99};
    qsort(v, (size_t)n, sizeof *v, bu_cmp_double);
    for (int i = 0; i < 3; i++)
        out[i] = v[(pct[i] * n + 99) / 100 - 1];
    out[3] = v[n - 1];
}

/* ---- failure --------------------------------------------------------------- */

static const char *bu_prog = "bench";
static void (*bu_cleanup)(void);

void bu_init(const char *prog, void (*cleanup)(void))
{
    bu_prog = prog;
    bu_cleanup = cleanup;
}

void bu_say(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

void bu_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: error: ", bu_prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    (void)fflush(stderr);
    if (bu_cleanup)
        bu_cleanup();
    exit(1);
}

long bu_arg_long(const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < lo || v > hi ? -1 : v;
}

void bu_make_tmpdir(char *dir, size_t cap, const char *name)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = "/tmp";
    int n = snprintf(dir, cap, "%s/%s.XXXXXX", tmp, name);
    if (n < 0 || (size_t)n + BU_TMPDIR_ROOM >= cap || strchr(dir, '\'')) {
        dir[0] = 0; /* not made: the cleanup must not remove what it names */
        bu_fail("TMPDIR is too long or holds a quote");
    }
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        bu_fail("mkdtemp: %s", strerror(errno));
    }
}

void bu_catch_signals(void (*on_signal)(int))
{
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* ---- processes ------------------------------------------------------------- */

void bu_stop_pid(pid_t pid, int first_sig)
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

int bu_wait_bounded(pid_t pid, unsigned ms, int *st)
{
    for (unsigned i = 0; i <= ms / 10u; i++) {
        pid_t w = waitpid(pid, st, WNOHANG);
        if (w == pid)
            return 0;
        if (w < 0 && errno != EINTR)
            return -1;
        bu_sleep_ms(10);
    }
    return -1;
}

int bu_run_capture(char *const argv[], char *out, size_t cap, volatile pid_t *slot)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        bu_fail("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        if (dup2(p[1], 1) < 0)
            _exit(127);
        execv(argv[0], argv);
        _exit(127);
    }
    *slot = pid;
    close(p[1]);
    size_t len = 0;
    uint64_t deadline = bu_now_ns() + 10 * BU_SEC;
    for (;;) {
        uint64_t now = bu_now_ns();
        if (now >= deadline)
            bu_fail("%s %s did not finish within 10 s", argv[0], argv[1]);
        struct pollfd pfd = {p[0], POLLIN, 0};
        int pr = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
        if (pr < 0 && errno != EINTR)
            bu_fail("poll: %s", strerror(errno));
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
    if (bu_wait_bounded(pid, 10000, &st) != 0)
        bu_fail("%s %s did not exit", argv[0], argv[1]);
    *slot = 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* ---- TCP on 127.0.0.1 ------------------------------------------------------ */

int bu_free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        bu_fail("socket: %s", strerror(errno));
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0)
        bu_fail("cannot find a free port: %s", strerror(errno));
    close(s);
    return ntohs(a.sin_port);
}

int bu_tcp_listen(int backlog, int *port, const char *what)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    int one = 1;
    if (ls < 0 || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, backlog) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0)
        bu_fail("%s: cannot listen on 127.0.0.1: %s", what, strerror(errno));
    *port = ntohs(a.sin_port);
    return ls;
}

int bu_tcp_connect(int port)
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

/* ---- /proc ------------------------------------------------------------------- */

static long status_field(const char *buf, const char *name)
{
    const char *p = strstr(buf, name);
    if (!p)
        return -1;
    return strtol(p + strlen(name), NULL, 10);
}

struct bu_mem bu_mem_of(pid_t pid)
{
    char path[64], buf[4096];
    struct bu_mem m = {-1, -1, -1};
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bu_fail("cannot read %s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        bu_fail("cannot read %s", path);
    buf[n] = 0;
    m.rss_kb = status_field(buf, "\nVmRSS:");
    m.threads = (int)status_field(buf, "\nThreads:");
    if (m.rss_kb < 0)
        bu_fail("no VmRSS in %s", path);
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) { /* needs privilege for a process that is not dumpable */
        m.fds = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL && m.fds < 100000;)
            if (e->d_name[0] != '.')
                m.fds++;
        closedir(d);
    }
    return m;
}

double bu_self_cpu(double *sys)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        bu_fail("getrusage: %s", strerror(errno));
    double st = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    if (sys)
        *sys = st;
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + st;
}

struct bu_cpustat bu_cpustat_now(void)
{
    struct bu_cpustat c = {0, 0};
    char buf[512];
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bu_fail("/proc/stat: %s", strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unsigned long long v[8] = {0};
    if (n <= 0)
        bu_fail("/proc/stat: cannot read it");
    buf[n] = 0;
    /* cpu  user nice system idle iowait irq softirq steal */
    if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) != 8)
        bu_fail("/proc/stat: no cpu line");
    c.idle = v[3] + v[4];
    for (int i = 0; i < 8; i++)
        c.total += v[i];
    return c;
}

double bu_idle_pct(struct bu_cpustat a, struct bu_cpustat b)
{
    if (b.total <= a.total)
        return -1;
    return 100.0 * (double)(b.idle - a.idle) / (double)(b.total - a.total);
}

double bu_cpu_of(pid_t pid)
{
    double user;
    return bu_cpu_split(pid, &user);
}

double bu_cpu_split(pid_t pid, double *user)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bu_fail("cannot read %s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        bu_fail("cannot read %s", path);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        bu_fail("cannot parse %s", path);
    p += 2; /* field 3, the state */
    for (int field = 3; field < 14; field++) {
        p = strchr(p, ' ');
        if (!p)
            bu_fail("cannot parse %s", path);
        p++;
    }
    char *end;
    unsigned long long ut = strtoull(p, &end, 10);
    unsigned long long st = strtoull(end, NULL, 10);
    *user = (double)ut / (double)sysconf(_SC_CLK_TCK);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- the data set -------------------------------------------------------------- */

static void map_dataset(struct bu_dataset *d, const char *path, int fd, size_t len)
{
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED)
        bu_fail("mmap %s: %s", path, strerror(errno));
    close(fd);
    d->p = m;
    d->len = len;
}

void bu_make_dataset(struct bu_dataset *d, const char *path, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        bu_fail("cannot create %s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf)
        bu_fail("out of memory");
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
            bu_fail("cannot write %s: %s", path, strerror(errno));
        done += n;
    }
    free(buf);
    map_dataset(d, path, fd, len);
}

struct tui_gen {
    uint8_t *p;
    size_t len, cap;
};

static void tui_put(struct tui_gen *g, const char *s, size_t n)
{
    if (g->len + n > g->cap)
        n = g->cap - g->len;
    memcpy(g->p + g->len, s, n);
    g->len += n;
}

static void tui_puts(struct tui_gen *g, const char *s)
{
    tui_put(g, s, strlen(s));
}

void bu_gen_tui(uint8_t *p, size_t cap)
{
    struct tui_gen g = {p, 0, cap};
    char buf[256];
    uint32_t s = 7;
    tui_puts(&g, "\033[?1049h\033[?25l");
    for (int frame = 0; g.len < g.cap; frame++) {
        tui_puts(&g, "\033[H\033[48;2;20;20;30m\033[38;5;214m\xe2\x94\x8c");
        for (int i = 0; i < 78; i++)
            tui_puts(&g, "\xe2\x94\x80");
        tui_puts(&g, "\xe2\x94\x90");
        for (int row = 2; row < 23; row++) {
            s = s * 1103515245u + 12345u;
            int n = snprintf(buf, sizeof buf,
                             "\033[%d;1H\xe2\x94\x82\033[1;38;5;%um %3d \033[22;38;2;%u;%u;200m"
                             "agent line %d of frame %d: tool call \033[7m ok \033[27m done"
                             "\033[K\033[%d;80H\xe2\x94\x82",
                             row, 16 + (s >> 16) % 216, row, (s >> 8) & 255, (s >> 20) & 255, row,
                             frame, row);
            tui_put(&g, buf, (size_t)n);
        }
        int n = snprintf(buf, sizeof buf,
                         "\033[24;1H\033[7m frame %d  tokens %u  \033[0m\033[K"
                         "\033[3;22r\033[22;1H\n\n\033[r",
                         frame, s >> 12);
        tui_put(&g, buf, (size_t)n);
    }
}

void bu_make_tui_dataset(struct bu_dataset *d, const char *path, size_t len)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        bu_fail("cannot create %s: %s", path, strerror(errno));
    uint8_t *buf = malloc(len);
    if (!buf)
        bu_fail("out of memory");
    bu_gen_tui(buf, len);
    if (bu_write_all(fd, buf, len) != 0)
        bu_fail("cannot write %s: %s", path, strerror(errno));
    free(buf);
    map_dataset(d, path, fd, len);
}

void bu_free_dataset(struct bu_dataset *d)
{
    if (d->p)
        munmap((void *)d->p, d->len);
    d->p = NULL;
    d->len = 0;
}

/* ---- the bare PTY ---------------------------------------------------------------- */

pid_t bu_pty_spawn(const char *cmd, int *master, volatile pid_t *slot)
{
    struct winsize ws = {.ws_row = 24, .ws_col = 80};
    pid_t pid = forkpty(master, NULL, NULL, &ws);
    if (pid < 0)
        bu_fail("forkpty: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    *slot = pid;
    int fl = fcntl(*master, F_GETFL);
    if (fl < 0 || fcntl(*master, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(*master, F_SETFD, FD_CLOEXEC) != 0)
        bu_fail("fcntl: %s", strerror(errno));
    return pid;
}

size_t bu_pty_read(int m, uint8_t *buf, size_t cap, uint64_t deadline_ns)
{
    for (;;) {
        ssize_t r = read(m, buf, cap);
        if (r > 0)
            return (size_t)r;
        if (r == 0 || (r < 0 && errno == EIO))
            return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            bu_fail("read from the PTY: %s", strerror(errno));
        uint64_t now = bu_now_ns();
        if (now > deadline_ns)
            bu_fail("the bare PTY sent nothing in time");
        int ms = (int)((deadline_ns - now) / 1000000u) + 1;
        struct pollfd pfd = {m, POLLIN, 0};
        (void)poll(&pfd, 1, ms > 1000 ? 1000 : ms);
    }
}

void bu_start_runner(const char *bin, int port, const char *ident, const char *jwks,
                     const char *log, volatile pid_t *slot)
{
    char listen_on[64];
    snprintf(listen_on, sizeof listen_on, "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        int lf = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul < 0 || lf < 0 || dup2(nul, 0) < 0 || dup2(lf, 1) < 0 || dup2(lf, 2) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        execl(bin, "airlock-runner", "--listen", listen_on, "--identifier", ident, "--jwks", jwks,
              (char *)NULL);
        _exit(127);
    }
    *slot = pid;
    for (int i = 0; i < 200; i++) { /* 5 s */
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *slot = 0;
            bu_fail("%s exited at start (%s %d)", bin, WIFEXITED(st) ? "exit code" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        int fd = bu_tcp_connect(port);
        if (fd >= 0) {
            close(fd);
            return;
        }
        bu_sleep_ms(25);
    }
    bu_fail("%s is not listening on %s after 5 s", bin, listen_on);
}

void bu_pty_stop(pid_t pid, int m, volatile pid_t *slot)
{
    close(m);
    int st;
    if (bu_wait_bounded(pid, 2000, &st) != 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
    }
    *slot = 0;
}

void bu_lat_bare(const char *cmd, int warm, int n, double *samples, volatile pid_t *slot,
                 double out[4])
{
    uint8_t buf[256];
    int m;
    pid_t pid = bu_pty_spawn(cmd, &m, slot);
    size_t got = bu_pty_read(m, buf, sizeof buf, bu_now_ns() + 10 * BU_SEC);
    if (got != 1 || buf[0] != 'R')
        bu_fail("bare PTY: the echo command did not start (%zu bytes)", got);
    for (int i = 0; i < warm + n; i++) {
        uint8_t c = (uint8_t)('a' + i % 26);
        uint64_t t0 = bu_now_ns();
        if (write(m, &c, 1) != 1)
            bu_fail("write to the PTY: %s", strerror(errno));
        got = bu_pty_read(m, buf, sizeof buf, t0 + 2 * BU_SEC);
        uint64_t t1 = bu_now_ns();
        if (got != 1 || buf[0] != c)
            bu_fail("bare PTY: round trip %d brought back %zu bytes", i, got);
        if (i >= warm)
            samples[i - warm] = (double)(t1 - t0) / 1e3;
    }
    bu_pty_stop(pid, m, slot);
    bu_percentiles(samples, n, out);
}

/* ---- a small blocking WebSocket client ------------------------------------------- */

void bu_ws_init(struct bu_ws *c, const char *peer)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->peer = peer;
    c->rx = malloc(RX_CAP);
    c->tx = malloc(TX_CAP);
    c->msg = malloc(AL_MAX_FRAME);
    if (!c->rx || !c->tx || !c->msg)
        bu_fail("out of memory");
}

void bu_ws_free(struct bu_ws *c)
{
    if (c->fd >= 0)
        close(c->fd);
    free(c->rx);
    free(c->tx);
    free(c->msg);
    c->rx = c->tx = c->msg = NULL;
    c->fd = -1;
}

void bu_ws_error(struct bu_ws *c, const char *fmt, ...)
{
    if (c->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
}

static uint32_t next_mask(struct bu_ws *c)
{
    uint32_t x = c->mask_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return c->mask_state = x;
}

void bu_ws_send(struct bu_ws *c)
{
    size_t off = 0;
    uint64_t deadline = bu_now_ns() + 10 * BU_SEC;
    while (off < c->tx_len) {
        ssize_t w = write(c->fd, c->tx + off, c->tx_len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            bu_fail("send to %s: %s", c->peer, strerror(errno));
        if (bu_now_ns() > deadline)
            bu_fail("%s took nothing for 10 s", c->peer);
        struct pollfd pfd = {c->fd, POLLOUT, 0};
        (void)poll(&pfd, 1, 100);
    }
    c->tx_len = 0;
}

void bu_ws_put(struct bu_ws *c, unsigned op, const uint8_t *p, size_t n)
{
    if (n > AL_MAX_FRAME)
        bu_fail("a WebSocket frame of %zu bytes", n);
    if (c->tx_len + n + 14 > TX_CAP)
        bu_ws_send(c);
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

static void ws_deliver(struct bu_ws *c, const uint8_t *p, size_t n)
{
    if (c->on_msg)
        c->on_msg(c->ud, p, n);
}

/* Take the complete WebSocket frames out of rx. */
static void ws_parse(struct bu_ws *c)
{
    while (c->rx_end - c->rx_start >= 2 && !c->err[0]) {
        const uint8_t *p = c->rx + c->rx_start;
        size_t avail = c->rx_end - c->rx_start;
        unsigned fin = p[0] & 0x80u, op = p[0] & 0x0fu;
        if ((p[0] & 0x70u) || (p[1] & 0x80u)) {
            bu_ws_error(c, "bad WebSocket frame header from %s", c->peer);
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
            bu_ws_error(c, "WebSocket frame of %llu bytes from %s", (unsigned long long)len,
                        c->peer);
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
                bu_ws_error(c, "new message inside a fragmented one");
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
                bu_ws_error(c, "bad continuation frame");
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
            bu_ws_error(c, "%s closed the WebSocket (code %u, %.*s)", c->peer,
                        n >= 2 ? (unsigned)(pl[0] << 8 | pl[1]) : 0u, n > 2 ? (int)(n - 2) : 0,
                        n > 2 ? (const char *)pl + 2 : "");
            return;
        case 0x9:
            bu_ws_put(c, 0xA, pl, n);
            break;
        case 0xA:
            break;
        default:
            bu_ws_error(c, "WebSocket opcode %u from %s", op, c->peer);
            return;
        }
    }
    if (c->rx_start == c->rx_end)
        c->rx_start = c->rx_end = 0;
}

int bu_ws_read(struct bu_ws *c)
{
    if (RX_CAP - c->rx_end < (size_t)2 * (AL_MAX_FRAME + 14)) {
        memmove(c->rx, c->rx + c->rx_start, c->rx_end - c->rx_start);
        c->rx_end -= c->rx_start;
        c->rx_start = 0;
    }
    ssize_t r = read(c->fd, c->rx + c->rx_end, RX_CAP - c->rx_end);
    if (r == 0)
        bu_fail("%s dropped the connection", c->peer);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return 0;
        bu_fail("read from %s: %s", c->peer, strerror(errno));
    }
    c->rx_end += (size_t)r;
    ws_parse(c);
    return 1;
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

void bu_ws_connect(struct bu_ws *c, int port, const char *target, const char *headers)
{
    c->fd = bu_tcp_connect(port);
    if (c->fd < 0)
        bu_fail("cannot connect to 127.0.0.1:%d: %s", port, strerror(errno));
    uint8_t rnd[16];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        bu_fail("getrandom failed");
    char key[32], want[40];
    b64_encode(rnd, sizeof rnd, key);
    memcpy(&c->mask_state, rnd, sizeof c->mask_state);
    c->mask_state |= 1;
    char kg[64 + sizeof WS_GUID];
    int kl = snprintf(kg, sizeof kg, "%s%s", key, WS_GUID);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (kl < 0 || EVP_Digest(kg, (size_t)kl, md, &mdlen, EVP_sha1(), NULL) != 1 || mdlen != 20)
        bu_fail("SHA-1 failed");
    b64_encode(md, mdlen, want);
    char req[AL_MAX_TOKEN + 2048];
    int rl = snprintf(req, sizeof req,
                      "GET %s HTTP/1.1\r\n"
                      "Host: 127.0.0.1:%d\r\n"
                      "Upgrade: websocket\r\n"
                      "Connection: Upgrade\r\n"
                      "Sec-WebSocket-Key: %s\r\n"
                      "Sec-WebSocket-Version: 13\r\n"
                      "Sec-WebSocket-Protocol: %s\r\n"
                      "%s\r\n",
                      target, port, key, AL_SUBPROTOCOL, headers);
    if (rl < 0 || (size_t)rl >= sizeof req)
        bu_fail("upgrade request too long");
    if (bu_write_all(c->fd, req, (size_t)rl) != 0)
        bu_fail("cannot send the upgrade request: %s", strerror(errno));
    /* the response head; whatever follows it is WebSocket data */
    char *head = (char *)c->rx;
    size_t got = 0;
    const char *end = NULL;
    uint64_t deadline = bu_now_ns() + 5 * BU_SEC;
    while (!end) {
        if (got >= HEAD_MAX || bu_now_ns() > deadline)
            bu_fail("no upgrade response from %s within 5 s", c->peer);
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(c->fd, head + got, HEAD_MAX - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bu_fail("%s closed the connection during the upgrade", c->peer);
        got += (size_t)n;
        end = memmem(head, got, "\r\n\r\n", 4);
    }
    size_t hlen = (size_t)(end - head) + 4;
    char resp[HEAD_MAX + 1];
    memcpy(resp, head, hlen);
    resp[hlen] = 0;
    if (strncmp(resp, "HTTP/1.1 101", 12) != 0) {
        const char *eol = strstr(resp, "\r\n");
        bu_fail("upgrade refused: %.*s", (int)(eol - resp), resp);
    }
    size_t vl = 0;
    const char *v = header_value(resp, "Sec-WebSocket-Accept:", &vl);
    if (!v || vl != strlen(want) || memcmp(v, want, vl) != 0)
        bu_fail("bad Sec-WebSocket-Accept from %s", c->peer);
    v = header_value(resp, "Sec-WebSocket-Protocol:", &vl);
    if (!v || vl != strlen(AL_SUBPROTOCOL) || memcmp(v, AL_SUBPROTOCOL, vl) != 0)
        bu_fail("%s did not agree on %s", c->peer, AL_SUBPROTOCOL);
    memmove(c->rx, c->rx + hlen, got - hlen);
    c->rx_start = 0;
    c->rx_end = got - hlen;
    c->in_frag = 0;
    c->tx_len = 0;
    c->err[0] = 0;
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) != 0)
        bu_fail("fcntl: %s", strerror(errno));
}

void bu_ws_close(struct bu_ws *c)
{
    static const uint8_t normal[2] = {0x03, 0xe8};
    bu_ws_put(c, 0x8, normal, sizeof normal);
    bu_ws_send(c);
    uint64_t deadline = bu_now_ns() + BU_SEC;
    while (bu_now_ns() < deadline) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        ssize_t n = read(c->fd, c->rx, RX_CAP);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
    }
    close(c->fd);
    c->fd = -1;
    c->rx_start = c->rx_end = 0;
}

/* ---- a controller endpoint over it ------------------------------------------------- */

static void ctl_msg(void *ud, const uint8_t *p, size_t n)
{
    struct bu_ctl *c = ud;
    int rc = ep_input(c->ep, p, n, bu_now_us());
    if (rc < 0)
        bu_ws_error(&c->ws, "the endpoint refused a frame from %s: %s", c->ws.peer,
                    al_strerror(rc));
}

void bu_ctl_new(struct bu_ctl *c, const char *name, ep_event_fn *on_event, void *ud)
{
    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_CONTROLLER);
    ec.name = name;
    ec.ping_interval_us = 0; /* we answer the peer's pings; we send none */
    ec.idle_timeout_us = 0;
    ec.on_event = on_event;
    ec.ud = ud;
    int rc = ep_new(&ec, &c->ep);
    if (rc != AL_OK)
        bu_fail("ep_new: %s", al_strerror(rc));
    c->ws.on_msg = ctl_msg;
    c->ws.ud = c;
}

void bu_ctl_link(struct bu_ctl *c)
{
    ep_link_up(c->ep, bu_now_us());
    bu_ctl_flush(c);
    ws_parse(&c->ws); /* what came with the upgrade response */
    if (c->ws.err[0])
        bu_fail("%s", c->ws.err);
}

void bu_ctl_flush(struct bu_ctl *c)
{
    static uint8_t fb[AL_MAX_FRAME];
    for (int i = 0; i < 4096; i++) {
        long n = ep_output(c->ep, fb, sizeof fb, bu_now_us());
        if (n < 0)
            bu_fail("the endpoint cannot encode a frame: %s", al_strerror((int)n));
        if (n == 0)
            break;
        bu_ws_put(&c->ws, 0x2, fb, (size_t)n);
    }
    if (c->ws.tx_len)
        bu_ws_send(&c->ws);
    int code;
    const char *why;
    if (ep_closing(c->ep, &code, &why))
        bu_fail("the endpoint wants the link to %s closed (%d): %s", c->ws.peer, code, why);
}

enum { PUMP_MAX = 8 };

void bu_ctl_pump(struct bu_ctl *const *cs, int n, uint64_t deadline_ns)
{
    if (n < 1 || n > PUMP_MAX)
        bu_fail("bu_ctl_pump: %d clients", n);
    /* what the endpoints queued since: nothing comes back without it */
    for (int i = 0; i < n; i++)
        bu_ctl_flush(cs[i]);
    int got = 0;
    for (int i = 0; i < n; i++)
        got |= bu_ws_read(&cs[i]->ws);
    if (!got) {
        uint64_t now = bu_now_ns();
        int ms = 0;
        if (deadline_ns > now)
            ms = (int)((deadline_ns - now) / 1000000u) + 1;
        if (ms > 1000)
            ms = 1000;
        struct pollfd pfd[PUMP_MAX];
        for (int i = 0; i < n; i++)
            pfd[i] = (struct pollfd){cs[i]->ws.fd, POLLIN, 0};
        int pr = poll(pfd, (nfds_t)n, ms);
        if (pr < 0 && errno != EINTR)
            bu_fail("poll: %s", strerror(errno));
        if (pr <= 0)
            return;
        for (int i = 0; i < n; i++)
            if (pfd[i].revents)
                (void)bu_ws_read(&cs[i]->ws);
    }
    for (int i = 0; i < n; i++)
        if (cs[i]->ws.err[0])
            bu_fail("%s", cs[i]->ws.err);
    for (int i = 0; i < n; i++)
        bu_ctl_flush(cs[i]);
}

void bu_ctl_end(struct bu_ctl *c)
{
    bu_ws_close(&c->ws);
    ep_link_down(c->ep);
    ep_free(c->ep);
    c->ep = NULL;
}
