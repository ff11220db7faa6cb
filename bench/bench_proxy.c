/*
 * bench_proxy: what the credential proxy (docs/proxy.md) adds to an agent's
 * HTTP calls, beside the same calls made straight to the upstream.
 *
 * One run starts:
 *   - a stand-in upstream of our own (a forked process group on a free port
 *     of 127.0.0.1, one forked child per connection, keep-alive): GET
 *     /small answers 2 bytes, GET /big?n=N answers N bytes of a fixed
 *     pattern with Content-Length; both only to `Authorization: Bearer` +
 *     the real key (else 401), so every proxied answer proves the swap;
 *   - `airlockd serve --no-bwrap` with a fresh data directory, a config with
 *     one upstream `bench` (kind http, header bearer, the key in a 0600
 *     file, limits raised so that the bench is never refused) and
 *     `--proxy-listen` on a free port; a local sandbox, and a terminal
 *     opened with "proxy": ["bench"] that writes its base URL and its
 *     credential ($AIRLOCK_PROXY_URL, $AIRLOCK_PROXY_TOKEN) to a file of
 *     its workspace, where we read them. With airlockd's default
 *     `--proxy-path runner` that base URL is the local runner's own
 *     listener (http://127.0.0.1:PORT/v1/proxy), the path through the
 *     runner's channel; the same credential also opens the direct path.
 *
 * Per round, in alternating order, on one keep-alive connection each:
 *   latency     LAT_WARM then LAT_N GET /small, each sent once the last
 *               answer is in: p50/p99 in µs, straight to the stand-in
 *               ("direct"), through a plain TCP relay of our own
 *               ("relay"), through airlockd's direct path ("proxy") and
 *               through the runner's listener and its channel to
 *               airlockd ("channel"); the added latency is X − direct
 *   throughput  GET /big of MB (10^6 bytes), read with 64 KiB reads, every
 *               byte compared with the pattern; timed from the request to
 *               the last byte
 *   CPU         utime+stime (/proc/PID/stat) of airlockd over the proxied
 *               transfer, per GB; on the channel path the local runner's
 *               too
 *
 * Usage: bench_proxy [MB] [RUNS] [BUILD_DIR]. Every wait has a deadline and
 * the run a watchdog alarm; on any failure it says what and exits 1. It
 * stops only what it started, by pid: airlockd, the stand-in's process
 * group, and the local runner airlockd started (found by its pid file,
 * checked by its command line).
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include "benchutil.h"

enum {
    MAX_RUNS = BU_MAX_RUNS,
    MAX_MB = 2000,
    LAT_N = 2000,
    LAT_WARM = 200,
    READ_BUF = 65536,
    PAT_LEN = 65536,    /* the stand-in's pattern repeats every PAT_LEN bytes */
    HEAD_MAX = 16384,   /* bytes of a response head we read */
    HTTP_MAX = 65536,   /* bytes of an API answer we read */
    KEY_MAX = 256,      /* bytes of an API key or a credential */
    LINK_WAIT_S = 20,   /* for the local runner to dial back */
    CRED_WAIT_S = 20,   /* for the terminal to write its base URL and credential */
    RUNNER_ID_MAX = 16, /* digits in a pid file */
    REQ_MAX = 1024,     /* bytes of a request we send */
};

enum { P_DIRECT, P_RELAY, P_RELAY2, P_PROXY, P_CHANNEL, P_N };
static const char *const path_name[P_N] = {"direct to the stand-in", "a plain TCP relay",
                                           "two plain TCP relays", "airlockd, direct path",
                                           "runner's channel"};

/* Where each path's calls go. A path whose port is 0 is not measured and
 * shows "n/a". P_CHANNEL is the local runner's listener, as the terminal's
 * AIRLOCK_PROXY_URL gives it. */
struct target {
    int port;
    const char *prefix; /* "" straight to the stand-in */
    const char *auth;   /* the real key or the credential */
};

#define SANDBOX "bench"
#define REAL_KEY "sk-bench-real-key-0123456789abcdef"
#define PROXY_PREFIX "/v1/proxy/bench"
#define RUNNER_BASE_HEAD "http://127.0.0.1:"
#define RUNNER_BASE_TAIL "/v1/proxy"

/* What the signal handler and bu_fail() must clean up: only what we started. */
static struct {
    volatile pid_t airlockd, lrunner, upstream, relay, relay2, child;
    char dir[200], data[260], alog[260], conf[260], keyfile[260];
    char airlockd_bin[PATH_MAX], runner_bin[PATH_MAX];
    int port, pport, uport, rport, r2port, cport; /* cport: the runner's proxy listener */
    int relay_to; /* the port a relay being started copies to (read by its children) */
    char admin[KEY_MAX], op[KEY_MAX], cred[KEY_MAX];
} g;

/* ---- failure, cleanup ------------------------------------------------------ */

static void stop_group(pid_t pgid)
{
    if (pgid <= 1)
        return;
    (void)kill(-pgid, SIGTERM);
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < 100; i++) { /* 5 s */
            pid_t w = waitpid(pgid, NULL, WNOHANG);
            if (w == pgid || (w < 0 && kill(pgid, 0) != 0 && errno == ESRCH))
                return;
            struct timespec ts = {0, 50000000L};
            (void)nanosleep(&ts, NULL);
        }
        (void)kill(-pgid, SIGKILL);
    }
}

static void cleanup_all(void)
{
    pid_t c = g.child, a = g.airlockd, l = g.lrunner, u = g.upstream, rl = g.relay, r2 = g.relay2;
    g.child = g.airlockd = g.lrunner = g.upstream = g.relay = g.relay2 = 0;
    bu_stop_pid(c, SIGKILL);
    bu_stop_pid(a, SIGTERM);
    stop_group(l);
    stop_group(u);
    stop_group(rl);
    stop_group(r2);
    if (g.dir[0]) {
        char *argv[] = {"rm", "-rf", "--one-file-system", g.dir, NULL};
        char *envp[] = {NULL};
        pid_t p = fork();
        if (p == 0) {
            execve("/bin/rm", argv, envp);
            _exit(127);
        }
        if (p > 0)
            (void)bu_wait_bounded(p, 10000, &(int){0});
        g.dir[0] = 0;
    }
}

static void on_signal(int sig)
{
    bu_say(sig == SIGALRM ? "bench_proxy: error: watchdog: the run went past its time limit\n"
                          : "bench_proxy: interrupted\n");
    cleanup_all();
    _exit(1);
}

/* ---- the stand-in upstream --------------------------------------------------- */

static uint8_t pattern[PAT_LEN];

static void make_pattern(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < PAT_LEN; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        pattern[i] = (uint8_t)('A' + (x % 26));
    }
}

/* One connection of the stand-in: requests until the peer closes. */
static void upstream_conn(int fd)
{
    char head[HEAD_MAX + 1];
    size_t got = 0;
    for (;;) {
        char *end = NULL;
        while (!(end = got ? strstr(head, "\r\n\r\n") : NULL)) {
            if (got >= HEAD_MAX)
                _exit(1);
            ssize_t n = read(fd, head + got, HEAD_MAX - got);
            if (n <= 0)
                _exit(0);
            got += (size_t)n;
            head[got] = 0;
        }
        size_t used = (size_t)(end + 4 - head);
        char out[256];
        unsigned long long n = 0;
        int ok = strcasestr(head, "\r\nauthorization: bearer " REAL_KEY "\r\n") != NULL;
        if (!ok) {
            int k =
                snprintf(out, sizeof out, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n");
            (void)bu_write_all(fd, out, (size_t)k);
        } else {
            const char *q = strstr(head, "GET /big?n=");
            n = q && q == head ? strtoull(q + 11, NULL, 10) : 2;
            int k = snprintf(out, sizeof out,
                             "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             "Content-Length: %llu\r\n\r\n",
                             n);
            if (bu_write_all(fd, out, (size_t)k) != 0)
                _exit(0);
            for (unsigned long long off = 0; off < n;) {
                size_t c = n - off > PAT_LEN ? PAT_LEN : (size_t)(n - off);
                if (bu_write_all(fd, pattern, c) != 0)
                    _exit(0);
                off += c;
            }
        }
        memmove(head, head + used, got - used);
        got -= used;
        head[got] = 0;
    }
}

/* One connection of a plain relay (the reference for one more hop): to
 * g.relay_to as it was when the relay was started (the stand-in, or the
 * first relay for the second: two hops, as many as the runner's channel
 * adds), bytes copied both ways in 64 KiB reads until either side closes. */
static void relay_conn(int fd)
{
    int up = bu_tcp_connect(g.relay_to);
    static uint8_t buf[READ_BUF];
    if (up < 0)
        _exit(1);
    for (;;) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {up, POLLIN, 0}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            _exit(1);
        for (int i = 0; i < 2; i++) {
            if (!pf[i].revents)
                continue;
            ssize_t n = read(pf[i].fd, buf, sizeof buf);
            if (n <= 0 || bu_write_all(pf[1 - i].fd, buf, (size_t)n) != 0)
                _exit(0);
        }
    }
}

/* A server on a free port of 127.0.0.1: a process group (into *slot) that
 * forks conn(fd) for each connection. Its port. */
static int serve_forked(void (*conn)(int fd), volatile pid_t *slot, const char *what)
{
    int port;
    int ls = bu_tcp_listen(64, &port, what);
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        (void)setpgid(0, 0);
        signal(SIGCHLD, SIG_IGN); /* connections are reaped by the kernel */
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        signal(SIGALRM, SIG_DFL);
        for (;;) {
            int c = accept(ls, NULL, NULL);
            if (c < 0) {
                if (errno == EINTR)
                    continue;
                _exit(1);
            }
            const int one = 1;
            (void)setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            pid_t k = fork();
            if (k == 0) {
                close(ls);
                conn(c);
                _exit(0);
            }
            close(c);
        }
    }
    (void)setpgid(pid, pid);
    *slot = pid;
    close(ls);
    return port;
}

/* ---- airlockd --------------------------------------------------------------- */

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' '))
        s[--n] = 0;
}

static void user_add(const char *name, const char *role, char *key, size_t cap)
{
    char *argv[] = {g.airlockd_bin, "user",   "add",  (char *)name, "--role",
                    (char *)role,   "--data", g.data, NULL};
    if (bu_run_capture(argv, key, cap, &g.child) != 0)
        bu_fail("airlockd user add %s failed (see above)", name);
    trim(key);
    if (!key[0] || strlen(key) >= cap - 1 || strchr(key, '\n') || strchr(key, ' '))
        bu_fail("airlockd user add printed no usable key");
}

/* One request to airlockd's API (Connection: close), 15 s at most: the
 * status (-1 if it is not answering), the body into out. */
static int api(const char *method, const char *target, const char *key, const char *body, char *out,
               size_t cap)
{
    int fd = bu_tcp_connect(g.port);
    if (fd < 0)
        return -1;
    char req[REQ_MAX + HTTP_MAX], auth[KEY_MAX + 32] = "";
    if (key)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", key);
    int rl = snprintf(req, sizeof req,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      method, target, auth, body ? strlen(body) : 0, body ? body : "");
    if (rl < 0 || (size_t)rl >= sizeof req || bu_write_all(fd, req, (size_t)rl) != 0) {
        close(fd);
        return -1;
    }
    static char resp[HTTP_MAX];
    size_t got = 0;
    uint64_t deadline = bu_now_ns() + 15 * BU_SEC;
    for (;;) {
        if (bu_now_ns() > deadline)
            bu_fail("%s %s: no complete answer within 15 s", method, target);
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, resp + got, sizeof resp - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0 || (got += (size_t)n) >= sizeof resp - 1)
            break;
    }
    close(fd);
    resp[got] = 0;
    int status = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(out, cap, "%s", b ? b + 4 : "");
    return status;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0 || bu_write_all(fd, text, strlen(text)) != 0 || close(fd) != 0)
        bu_fail("writing %s: %s", path, strerror(errno));
}

static void start_airlockd(void)
{
    char key[128], conf[1024], listen_on[64];
    snprintf(key, sizeof key, "%s\n", REAL_KEY);
    write_file(g.keyfile, key, 0600);
    g.pport = bu_free_port();
    /* limits raised so that the bench is never refused (2 * LAT_N a round) */
    snprintf(conf, sizeof conf,
             "proxy-listen = 127.0.0.1:%d\n"
             "upstream.bench.url = http://127.0.0.1:%d\n"
             "upstream.bench.header = bearer\n"
             "upstream.bench.secret-file = %s\n"
             "upstream.bench.requests-per-minute = 100000000\n"
             "upstream.bench.max-bytes = 1125899906842624\n",
             g.pport, g.uport, g.keyfile);
    write_file(g.conf, conf, 0600);
    g.port = bu_free_port();
    snprintf(listen_on, sizeof listen_on, "127.0.0.1:%d", g.port);
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        int lf = open(g.alog, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul < 0 || lf < 0 || dup2(nul, 0) < 0 || dup2(lf, 1) < 0 || dup2(lf, 2) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        execl(g.airlockd_bin, "airlockd", "serve", "--data", g.data, "--listen", listen_on,
              "--no-bwrap", "--runner", g.runner_bin, "--config", g.conf, (char *)NULL);
        _exit(127);
    }
    g.airlockd = pid;
    static char body[HTTP_MAX];
    for (int i = 0; i < 200; i++) { /* 10 s */
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            g.airlockd = 0;
            bu_fail("airlockd serve exited at start (see %s)", g.alog);
        }
        if (api("GET", "/healthz", NULL, NULL, body, sizeof body) == 200)
            return;
        bu_sleep_ms(50);
    }
    bu_fail("airlockd serve does not answer /healthz on %s after 10 s", listen_on);
}

/* The local runner's pid from its pid file, checked to be ours. */
static pid_t local_runner_pid(void)
{
    char path[400], buf[RUNNER_ID_MAX + 2], cpath[64], cmd[4096];
    snprintf(path, sizeof path, "%s/sandboxes/%s/run/runner.pid", g.data, SANDBOX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        bu_fail("no pid in %s", path);
    buf[n] = 0;
    long pid = strtol(buf, NULL, 10);
    snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", pid);
    fd = pid > 1 && pid <= INT_MAX ? open(cpath, O_RDONLY | O_CLOEXEC) : -1;
    n = fd >= 0 ? read(fd, cmd, sizeof cmd - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        bu_fail("the local runner (pid %ld) is not running", pid);
    cmd[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        cmd[i] = cmd[i] ? cmd[i] : ' ';
    if (!strstr(cmd, g.runner_bin) || !strstr(cmd, g.data) || getpgid((pid_t)pid) != (pid_t)pid)
        bu_fail("pid %ld from %s is not our runner", pid, path);
    return (pid_t)pid;
}

static void add_sandbox(void)
{
    static char body[HTTP_MAX];
    int st = api("POST", "/v1/sandboxes", g.admin, "{\"id\":\"" SANDBOX "\",\"kind\":\"local\"}",
                 body, sizeof body);
    if (st != 201)
        bu_fail("POST /v1/sandboxes: %d %.300s", st, body);
    for (uint64_t end = bu_now_ns() + LINK_WAIT_S * BU_SEC;; bu_sleep_ms(50)) {
        if (api("GET", "/v1/sandboxes", g.admin, NULL, body, sizeof body) != 200)
            bu_fail("GET /v1/sandboxes: %.300s", body);
        json_t *arr = json_loads(body, 0, NULL);
        int up = 0;
        size_t i;
        json_t *s;
        json_array_foreach(arr, i, s)
        {
            const char *id = json_string_value(json_object_get(s, "id"));
            if (id && !strcmp(id, SANDBOX))
                up = json_is_true(json_object_get(s, "link_up"));
        }
        json_decref(arr);
        if (up)
            break;
        if (bu_now_ns() > end)
            bu_fail("the local runner did not link up within %d s", LINK_WAIT_S);
    }
    g.lrunner = local_runner_pid();
    /* for a profiler to attach to (perf record -p, strace -p) */
    fprintf(stderr, "pids: airlockd %d, local runner %d\n", (int)g.airlockd, (int)g.lrunner);
}

/* A terminal with "proxy": ["bench"] writes "BASE CRED" (its
 * AIRLOCK_PROXY_URL and AIRLOCK_PROXY_TOKEN) into its workspace (the
 * sandbox's DATA/sandboxes/ID/work); read them from there. BASE must be
 * the runner's listener on 127.0.0.1 (the default --proxy-path runner):
 * its port into g.cport. */
static void get_credential(void)
{
    static char body[HTTP_MAX];
    const char *req = "{\"sandbox\":\"" SANDBOX "\",\"mode\":\"pipes\",\"proxy\":[\"bench\"],"
                      "\"argv\":[\"/bin/sh\",\"-c\",\"printf '%s %s' \\\"$AIRLOCK_PROXY_URL\\\" "
                      "\\\"$AIRLOCK_PROXY_TOKEN\\\" "
                      "> cred.tmp && mv cred.tmp cred && exec sleep 3600\"]}";
    int st = api("POST", "/v1/terminals", g.op, req, body, sizeof body);
    if (st != 201)
        bu_fail("POST /v1/terminals: %d %.300s", st, body);
    char path[400];
    snprintf(path, sizeof path, "%s/sandboxes/%s/work/cred", g.data, SANDBOX);
    for (uint64_t end = bu_now_ns() + CRED_WAIT_S * BU_SEC;; bu_sleep_ms(50)) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char line[2 * KEY_MAX];
            ssize_t n = read(fd, line, sizeof line - 1);
            close(fd);
            line[n > 0 ? n : 0] = 0;
            char *sp = strchr(line, ' ');
            if (!sp || strlen(sp + 1) >= sizeof g.cred || strncmp(sp + 1, "alp_", 4) != 0)
                bu_fail("the terminal wrote no credential to %s", path);
            snprintf(g.cred, sizeof g.cred, "%s", sp + 1);
            *sp = 0;
            char *rest = NULL;
            long port = strncmp(line, RUNNER_BASE_HEAD, strlen(RUNNER_BASE_HEAD)) == 0
                            ? strtol(line + strlen(RUNNER_BASE_HEAD), &rest, 10)
                            : 0;
            if (!rest || strcmp(rest, RUNNER_BASE_TAIL) != 0 || port <= 0 || port > 65535 ||
                port == g.pport)
                bu_fail("the terminal's AIRLOCK_PROXY_URL is not a runner's listener: %.200s",
                        line);
            g.cport = (int)port;
            return;
        }
        if (bu_now_ns() > end)
            bu_fail("the terminal wrote no %s within %d s", path, CRED_WAIT_S);
    }
}

/* ---- the client ------------------------------------------------------------------ */

struct conn {
    int fd, port;
    const char *prefix; /* "" straight to the stand-in, PROXY_PREFIX through airlockd */
    const char *auth;   /* the real key or the credential */
    uint8_t buf[READ_BUF];
    size_t have; /* bytes of buf after the last answer's end */
};

static void conn_open(struct conn *c, int port, const char *prefix, const char *auth)
{
    c->port = port;
    c->prefix = prefix;
    c->auth = auth;
    c->have = 0;
    c->fd = bu_tcp_connect(port);
    if (c->fd < 0)
        bu_fail("connecting to 127.0.0.1:%d: %s", port, strerror(errno));
}

static size_t conn_read(struct conn *c, uint8_t *p, size_t cap, uint64_t deadline)
{
    for (;;) {
        if (bu_now_ns() > deadline)
            bu_fail("port %d: no answer in time", c->port);
        struct pollfd pfd = {c->fd, POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0)
            continue;
        ssize_t n = read(c->fd, p, cap);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            bu_fail("port %d closed the connection mid-answer", c->port);
        return (size_t)n;
    }
}

/*
 * GET PREFIX/target on c's keep-alive connection; the body's bytes are
 * compared with the pattern (check) or just counted. The body's length.
 */
static uint64_t conn_get(struct conn *c, const char *target, int check, unsigned secs)
{
    char req[REQ_MAX];
    int k = snprintf(req, sizeof req,
                     "GET %s%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n\r\n",
                     c->prefix, target, c->port, c->auth);
    if (k < 0 || (size_t)k >= sizeof req || bu_write_all(c->fd, req, (size_t)k) != 0)
        bu_fail("sending to port %d: %s", c->port, strerror(errno));
    uint64_t deadline = bu_now_ns() + secs * BU_SEC;
    /* the head: into buf until its end */
    char *end;
    for (;;) {
        c->buf[c->have < sizeof c->buf ? c->have : sizeof c->buf - 1] = 0;
        if ((end = strstr((char *)c->buf, "\r\n\r\n")) != NULL)
            break;
        if (c->have >= sizeof c->buf - 1)
            bu_fail("port %d: a response head over %zu bytes", c->port, sizeof c->buf);
        c->have += conn_read(c, c->buf + c->have, sizeof c->buf - 1 - c->have, deadline);
    }
    *end = 0;
    int status = 0;
    const char *cl = strcasestr((char *)c->buf, "\r\ncontent-length:");
    if (sscanf((char *)c->buf, "HTTP/1.1 %d", &status) != 1 || status != 200 || !cl)
        bu_fail("port %d: GET %s%s: %.300s", c->port, c->prefix, target, (char *)c->buf);
    uint64_t len = strtoull(cl + 17, NULL, 10), off = 0;
    size_t hl = (size_t)((uint8_t *)end + 4 - c->buf);
    size_t inbuf = c->have - hl;
    uint8_t *p = c->buf + hl;
    for (;;) {
        size_t take = (uint64_t)inbuf > len - off ? (size_t)(len - off) : inbuf;
        if (check)
            for (size_t i = 0; i < take; i++)
                if (p[i] != pattern[(off + i) % PAT_LEN])
                    bu_fail("port %d: byte %llu differs", c->port, (unsigned long long)off + i);
        off += take;
        if (off == len) {
            memmove(c->buf, p + take, inbuf - take);
            c->have = inbuf - take;
            return len;
        }
        p = c->buf;
        inbuf = conn_read(c, c->buf, sizeof c->buf - 1, deadline);
    }
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* ---- one round ------------------------------------------------------------------- */

struct round_res {
    double lat[P_N][4]; /* p50, p90, p99, max in µs */
    double mbps[P_N];
    double cpu_gb[P_N];  /* airlockd core-s per GB (proxied paths) */
    double hop_gb[P_N];  /* the runner's core-s per GB (the channel path) */
    double mach_gb[P_N]; /* the whole machine's busy core-s per GB (every process) */
    double busy[P_N];    /* the machine's busy CPUs during the transfer */
};

static void one_path(const struct target *t, int path, size_t len, struct round_res *x)
{
    static double samples[LAT_N];
    static struct conn c;
    conn_open(&c, t->port, t->prefix, t->auth);
    for (int i = 0; i < LAT_WARM; i++)
        (void)conn_get(&c, "/small", 0, 10);
    for (int i = 0; i < LAT_N; i++) {
        uint64_t t0 = bu_now_ns();
        if (conn_get(&c, "/small", 0, 10) != 2)
            bu_fail("GET /small: not 2 bytes");
        samples[i] = (double)(bu_now_ns() - t0) / 1000.0;
    }
    bu_percentiles(samples, LAT_N, x->lat[path]);
    char target[64];
    snprintf(target, sizeof target, "/big?n=%zu", len);
    int in_airlockd = path == P_PROXY || path == P_CHANNEL;
    /* (the plain relay's CPU is its per-connection child's: not counted) */
    pid_t hop = path == P_CHANNEL ? g.lrunner : 0;
    double cpu0 = in_airlockd ? bu_cpu_of(g.airlockd) : 0;
    double hop0 = hop ? bu_cpu_of(hop) : 0;
    struct bu_cpustat m0 = bu_cpustat_now();
    uint64_t t0 = bu_now_ns();
    if (conn_get(&c, target, 1, 300) != len)
        bu_fail("GET /big: not %zu bytes", len);
    double secs = (double)(bu_now_ns() - t0) / 1e9;
    struct bu_cpustat m1 = bu_cpustat_now();
    x->mbps[path] = (double)len / 1e6 / secs;
    /* every CPU's ticks: the stand-in, the relays, airlockd, the runner and
     * this reader alike (and whatever else runs: keep the machine quiet) */
    double idle = bu_idle_pct(m0, m1), ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
    x->busy[path] = idle < 0 ? 0 : ncpu * (100.0 - idle) / 100.0;
    x->mach_gb[path] = x->busy[path] * secs / ((double)len / 1e9);
    if (in_airlockd)
        x->cpu_gb[path] = (bu_cpu_of(g.airlockd) - cpu0) / ((double)len / 1e9);
    if (hop)
        x->hop_gb[path] = (bu_cpu_of(hop) - hop0) / ((double)len / 1e9);
    conn_close(&c);
}

/* ---- the report ---------------------------------------------------------------- */

static void report(const struct target *t, const struct round_res *rr, int n, size_t len)
{
    static double v[MAX_RUNS];
    char cpu_model[128] = "?";
    struct utsname u;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(cpu_model, sizeof cpu_model, "%s", strchr(line, ':') + 2);
            trim(cpu_model);
            break;
        }
    if (f)
        (void)fclose(f);
    if (uname(&u) != 0)
        memset(&u, 0, sizeof u);
    printf("\n## bench_proxy: %d rounds, %zu MB response, %d small requests a round\n\n", n,
           len / 1000000, LAT_N);
    printf("machine: %s, %ld CPUs, %s %s\n\n", cpu_model, sysconf(_SC_NPROCESSORS_ONLN), u.sysname,
           u.release);
    printf("min/**median**/max over rounds; the limit is the same call straight to the "
           "stand-in upstream in the same round; the plain relay (one more hop, no HTTP) is "
           "the reference for airlockd's direct path, two relays chained (two more hops, as "
           "the runner and airlockd are) the reference for the runner's channel.\n\n");
    printf("| measure | %s (limit) | %s | %s | %s | %s | relay vs limit | two relays vs limit "
           "| direct path vs limit | channel vs limit | goal |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n",
           path_name[P_DIRECT], path_name[P_RELAY], path_name[P_RELAY2], path_name[P_PROXY],
           path_name[P_CHANNEL]);
    static const struct {
        const char *name, *goal;
        int kind; /* 0: latency (q: index into lat[][]), 1: MB/s, 2: airlockd's CPU per GB,
                   * 3: the runner's, 4: the machine's, 5: busy CPUs; also decimals */
        int q;
    } rows[] = {
        {"small GET p50, µs", "added ≤ 1000 µs", 0, 0},
        {"small GET p99, µs", "", 0, 2},
        {"the big response, MB/s", "≥ ×0.8", 1, 0},
        {"airlockd CPU per GB proxied, core-s", "", 2, 0},
        {"the runner's CPU per GB, core-s", "", 3, 0},
        {"the machine's CPU per GB (every process), core-s", "", 4, 0},
        {"the machine's busy CPUs during the big response", "", 5, 0},
    };
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        char cell[P_N][96], vs[P_N][96];
        for (int path = 0; path < P_N; path++) {
            snprintf(cell[path], sizeof cell[path], "%s", "n/a");
            snprintf(vs[path], sizeof vs[path], "%s", path == P_DIRECT ? "" : "n/a");
            int none =
                (rows[k].kind == 2 && (path == P_DIRECT || path == P_RELAY || path == P_RELAY2)) ||
                (rows[k].kind == 3 && path != P_CHANNEL);
            if (!t[path].port || none) {
                if (t[path].port)
                    snprintf(cell[path], sizeof cell[path], "—");
                continue;
            }
            for (int i = 0; i < n; i++)
                v[i] = rows[k].kind == 0   ? rr[i].lat[path][rows[k].q]
                       : rows[k].kind == 1 ? rr[i].mbps[path]
                       : rows[k].kind == 2 ? rr[i].cpu_gb[path]
                       : rows[k].kind == 3 ? rr[i].hop_gb[path]
                       : rows[k].kind == 4 ? rr[i].mach_gb[path]
                                           : rr[i].busy[path];
            bu_fmt3(cell[path], sizeof cell[path], v, n, rows[k].kind > 2 ? 2 : rows[k].kind);
            if (path == P_DIRECT || rows[k].kind >= 2)
                continue;
            for (int i = 0; i < n; i++)
                v[i] = rows[k].kind == 0
                           ? rr[i].lat[path][rows[k].q] - rr[i].lat[P_DIRECT][rows[k].q]
                           : rr[i].mbps[path] / rr[i].mbps[P_DIRECT];
            char fv[80];
            bu_fmt3(fv, sizeof fv, v, n, rows[k].kind == 0 ? 0 : 2);
            snprintf(vs[path], sizeof vs[path], "%s%s%s", rows[k].kind == 0 ? "+" : "×", fv,
                     rows[k].kind == 0 ? " µs" : "");
        }
        if (rows[k].kind >= 2)
            vs[P_RELAY][0] = vs[P_RELAY2][0] = vs[P_PROXY][0] = vs[P_CHANNEL][0] = '\0';
        printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", rows[k].name,
               cell[P_DIRECT], cell[P_RELAY], cell[P_RELAY2], cell[P_PROXY], cell[P_CHANNEL],
               vs[P_RELAY], vs[P_RELAY2], vs[P_PROXY], vs[P_CHANNEL], rows[k].goal);
    }
    printf("\n");
    /* What the CPUs allow: a path that needs C core-s per GB cannot pass more
     * than NCPU / C GB/s on this machine, however it is written. */
    double ncpu = (double)sysconf(_SC_NPROCESSORS_ONLN);
    for (int path = P_RELAY; path < P_N; path++) {
        double cap[MAX_RUNS];
        int m = 0;
        for (int i = 0; i < n; i++)
            if (rr[i].mach_gb[path] > 0 && rr[i].mbps[P_DIRECT] > 0)
                cap[m++] = ncpu / rr[i].mach_gb[path] * 1000.0 / rr[i].mbps[P_DIRECT];
        if (m)
            printf("the CPUs' ceiling, %s: %.0f CPUs ÷ its machine CPU per GB = ×%.2f of direct "
                   "(median of the rounds)\n",
                   path_name[path], ncpu, bu_median(cap, m));
    }
    printf("\n");
    for (int path = P_PROXY; path <= P_CHANNEL; path++) {
        /* the same number of plain hops: one relay for airlockd, two for the channel */
        int ref = path == P_PROXY ? P_RELAY : P_RELAY2;
        double p50[MAX_RUNS], tp[MAX_RUNS], tr[MAX_RUNS];
        for (int i = 0; i < n; i++) {
            p50[i] = rr[i].lat[path][0] - rr[i].lat[P_DIRECT][0];
            tp[i] = rr[i].mbps[path] / rr[i].mbps[P_DIRECT];
            tr[i] = rr[i].mbps[path] / rr[i].mbps[ref];
        }
        double mp = bu_median(p50, n), mt = bu_median(tp, n), mr = bu_median(tr, n);
        printf("goals, %s: added p50 %.0f µs (≤ 1000: %s); throughput ×%.2f of direct (≥ 0.8: "
               "%s), ×%.2f of %s (the same hops without HTTP or WebSocket)\n",
               path_name[path], mp, mp <= 1000 ? "met" : "MISSED", mt, mt >= 0.8 ? "met" : "MISSED",
               mr, path_name[ref]);
    }
}

/* ---- main ------------------------------------------------------------------------ */

static void setup_dir(void)
{
    bu_make_tmpdir(g.dir, sizeof g.dir, "bench_proxy");
    snprintf(g.data, sizeof g.data, "%s/data", g.dir);
    snprintf(g.alog, sizeof g.alog, "%s/airlockd.log", g.dir);
    snprintf(g.conf, sizeof g.conf, "%s/airlockd.conf", g.dir);
    snprintf(g.keyfile, sizeof g.keyfile, "%s/bench.key", g.dir);
}

int main(int argc, char **argv)
{
    bu_init("bench_proxy", cleanup_all);
    long mb = argc > 1 ? bu_arg_long(argv[1], 1, MAX_MB) : 100;
    long runs = argc > 2 ? bu_arg_long(argv[2], 1, MAX_RUNS) : 5;
    const char *bdir = argc > 3 ? argv[3] : "./build";
    if (mb < 0 || runs < 0 || argc > 4) {
        fprintf(stderr,
                "usage: bench_proxy [MB 1..%d] [RUNS 1..%d] [BUILD_DIR]\n"
                "  defaults: 100 5 ./build; BUILD_DIR holds airlockd and airlock-runner\n",
                MAX_MB, MAX_RUNS);
        return 2;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/airlockd", bdir);
    if (!realpath(path, g.airlockd_bin) || access(g.airlockd_bin, X_OK) != 0)
        bu_fail("no airlockd in %s (build it, or give the build directory)", bdir);
    snprintf(path, sizeof path, "%s/airlock-runner", bdir);
    if (!realpath(path, g.runner_bin) || access(g.runner_bin, X_OK) != 0)
        bu_fail("no airlock-runner in %s", bdir);
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        bu_fail("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));
    bu_catch_signals(on_signal);
    alarm((unsigned)(120 + runs * (60 + mb / 10)));

    make_pattern();
    setup_dir();
    g.uport = serve_forked(upstream_conn, &g.upstream, "the stand-in");
    g.relay_to = g.uport;
    g.rport = serve_forked(relay_conn, &g.relay, "the relay");
    g.relay_to = g.rport;
    g.r2port = serve_forked(relay_conn, &g.relay2, "the second relay");
    user_add("ada", "admin", g.admin, sizeof g.admin);
    user_add("oli", "operator", g.op, sizeof g.op);
    start_airlockd();
    add_sandbox();
    get_credential();

    struct target t[P_N] = {
        [P_DIRECT] = {g.uport, "", REAL_KEY},          [P_RELAY] = {g.rport, "", REAL_KEY},
        [P_RELAY2] = {g.r2port, "", REAL_KEY},         [P_PROXY] = {g.pport, PROXY_PREFIX, g.cred},
        [P_CHANNEL] = {g.cport, PROXY_PREFIX, g.cred},
    };
    static struct round_res rr[MAX_RUNS];
    size_t len = (size_t)mb * 1000000u;
    for (int r = 0; r < runs; r++) {
        struct round_res *x = &rr[r];
        for (int k = 0; k < P_N; k++) { /* each round starts with the next path */
            int pi = (r + k) % P_N;
            if (t[pi].port)
                one_path(&t[pi], pi, len, x);
        }
        fprintf(stderr,
                "round %d/%ld: p50 µs direct %.0f relay %.0f relay2 %.0f proxy %.0f (+%.0f) "
                "channel %.0f (+%.0f); p99 direct %.0f proxy %.0f channel %.0f; MB/s direct "
                "%.1f relay %.1f relay2 %.1f proxy %.1f (×%.2f) channel %.1f (×%.2f); airlockd "
                "core-s/GB proxy %.2f channel %.2f; runner core-s/GB %.2f\n",
                r + 1, runs, x->lat[P_DIRECT][0], x->lat[P_RELAY][0], x->lat[P_RELAY2][0],
                x->lat[P_PROXY][0], x->lat[P_PROXY][0] - x->lat[P_DIRECT][0], x->lat[P_CHANNEL][0],
                x->lat[P_CHANNEL][0] - x->lat[P_DIRECT][0], x->lat[P_DIRECT][2], x->lat[P_PROXY][2],
                x->lat[P_CHANNEL][2], x->mbps[P_DIRECT], x->mbps[P_RELAY], x->mbps[P_RELAY2],
                x->mbps[P_PROXY], x->mbps[P_PROXY] / x->mbps[P_DIRECT], x->mbps[P_CHANNEL],
                x->mbps[P_CHANNEL] / x->mbps[P_DIRECT], x->cpu_gb[P_PROXY], x->cpu_gb[P_CHANNEL],
                x->hop_gb[P_CHANNEL]);
    }
    alarm(0);
    report(t, rr, (int)runs, len);
    cleanup_all();
    return 0;
}
