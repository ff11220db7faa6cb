/*
 * bench_relay: what airlockd's relay costs, end to end, beside the direct
 * runner and the limits of this machine.
 *
 * Each round starts a fresh `airlockd serve --no-bwrap` on a free port of
 * 127.0.0.1 with a fresh data directory (users added with `airlockd user
 * add`: an admin for the sandbox, an operator who writes, a viewer), adds
 * a local sandbox (airlockd spawns its runner, which dials back), and
 * creates terminals with POST /v1/terminals. Clients attach at
 * /v1/terminals/ID/attach as relay-session controllers: a controller
 * endpoint (src/common/endpoint.c) ATTACHes channel 1, over benchutil's
 * small blocking WebSocket client. A fresh airlock-runner of our own,
 * driven directly as bench_runner does, gives the direct reference.
 *
 * Every stream runs `stty raw -echo; printf R; head -c1 >/dev/null; exec
 * cat FILE`: the R says raw mode is on, the writer's one keystroke starts
 * the cat, and the time runs from that keystroke to the last byte, so no
 * path pays for spawning or attaching. FILE is MB (10^6 bytes) of
 * deterministic base64 text, 76 columns and CRLF; every path checks every
 * byte at its offset. Per round, in alternating order:
 *
 *   relay, 1 client   through airlockd to the writer alone
 *   relay, 2 clients  the same with a viewer attached that reads everything
 *                     (fan-out of 2), until both have the last byte; a
 *                     viewer that falls behind is resynced, and counted
 *   across replicas   the writer alone, attached at a second `airlockd
 *                     serve` on the same database (SQLite shared: --db
 *                     sqlite:DATA/airlock.db, its own data directory and
 *                     key), which relays it to the first, the sandbox's
 *                     owner (docs/scale-out.md, "Clients on any replica");
 *                     the second's CPU is counted apart
 *   direct runner     the same command on our own airlock-runner
 *   bare PTY          the same command under forkpty, 64 KiB reads (limit)
 *   raw loopback      the file over TCP on 127.0.0.1, 64 KiB reads (limit)
 *   CPU               utime+stime (/proc/PID/stat) of airlockd, of the
 *                     runner and of this client over each stream
 *   memory            airlockd's VmRSS: linked and idle, before and after
 *                     each relayed stream, after every terminal is deleted
 *   echo              ECHO_N one-byte round trips (after ECHO_WARM) to
 *                     `stty raw -echo; cat`, through airlockd, across
 *                     replicas (attached at the second), on the direct
 *                     runner and on the bare PTY
 *
 * Tables give min/median/max over rounds and ratios. Usage: bench_relay
 * [MB] [RUNS] [BUILD_DIR] (airlockd and airlock-runner are taken from
 * BUILD_DIR). Every wait has a deadline and each phase a watchdog alarm; on
 * any failure it says what and exits 1. It stops only what it started, by
 * pid: airlockd, our runner, our shells, and the local runner airlockd
 * started (runners outlive airlockd by design), found by its pid file and
 * checked to be ours by its command line, stopped as a process group.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
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
    READ_BUF = 65536,
    HTTP_MAX = 65536,   /* bytes of an API answer we read */
    KEY_MAX = 256,      /* bytes of an API key */
    ID_MAX = 128,       /* bytes of a terminal id */
    LINK_WAIT_S = 20,   /* for the local runner to dial back */
    RM_DEPTH = 12,      /* directory levels rm_tree() descends */
    MARK = 1,           /* the R before each stream: stdout offset 0 */
    RUNNER_ID_MAX = 16, /* digits in a pid file */
    IDLE_MS = 2000      /* airlockd's CPU is sampled this long when idle */
};

#define SANDBOX "bench"
#define IDENT "bench-relay" /* our direct runner's identifier */
#define API_VERSION "2024-02-02-preview"
#define STREAM_FMT "stty raw -echo; printf R; head -c1 >/dev/null; exec cat '%s'"
#define ECHO_CMD "stty raw -echo; printf R; exec cat"

/* What the signal handler and bu_fail() must clean up: only what we started. */
static struct {
    volatile pid_t airlockd;     /* our airlockd serve of this round */
    volatile pid_t airlockd2;    /* a second replica on the same database */
    volatile pid_t lrunner;      /* the local runner it started: a group leader */
    volatile pid_t runner;       /* our direct airlock-runner of this round */
    volatile pid_t child;        /* a bare-PTY shell, a loopback writer, a subcommand */
    char dir[200];               /* everything of ours lives under it */
    char data[260];              /* airlockd's --data of this round, under dir */
    char data2[260], alog2[260]; /* the second replica's */
    char stream[260], alog[260], rlog[260];
    char airlockd_bin[PATH_MAX], runner_bin[PATH_MAX];
    int port;  /* airlockd's */
    int port2; /* the second replica's */
    char admin[KEY_MAX], op[KEY_MAX], viewer[KEY_MAX];
} g;

/* ---- failure, cleanup --------------------------------------------------------- */

/* Async-signal-safe: the last 1.5 KiB of a log, if any. */
static void show_tail(const char *path, const char *what)
{
    if (!path[0])
        return;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[1536];
    off_t end = lseek(fd, 0, SEEK_END);
    if (end > 0) {
        (void)lseek(fd, end > (off_t)sizeof buf ? end - (off_t)sizeof buf : 0, SEEK_SET);
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            bu_say("---- end of ");
            bu_say(what);
            bu_say(" ----\n");
            ssize_t r = write(2, buf, (size_t)n);
            (void)r;
            bu_say("----\n");
        }
    }
    close(fd);
}

/* Async-signal-safe: stop process group pgid (a runner airlockd started; we
 * are a child subreaper, so once airlockd is gone it is our child). */
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

/* Async-signal-safe: remove name under dirfd, directories recursively. */
static void rm_at(int dirfd, const char *name, int depth)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
        return;
    if (errno != EISDIR || depth > RM_DEPTH)
        return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[4096];
    for (int pass = 0; pass < 10000; pass++) {
        (void)lseek(fd, 0, SEEK_SET);
        ssize_t n = getdents64(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        int removed = 0;
        for (ssize_t off = 0; off < n;) {
            struct dirent64 *e = (struct dirent64 *)(void *)(buf + off);
            off += e->d_reclen;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            rm_at(fd, e->d_name, depth + 1);
            removed++;
        }
        if (!removed)
            break;
    }
    close(fd);
    (void)unlinkat(dirfd, name, AT_REMOVEDIR);
}

/* Async-signal-safe: stop this round's processes. */
static void stop_round_procs(void)
{
    pid_t c = g.child, r = g.runner, a = g.airlockd, l = g.lrunner, a2 = g.airlockd2;
    g.child = g.runner = g.airlockd = g.lrunner = g.airlockd2 = 0;
    bu_stop_pid(c, SIGKILL);
    bu_stop_pid(r, SIGTERM);
    bu_stop_pid(a2, SIGTERM);
    bu_stop_pid(a, SIGTERM);
    stop_group(l);
}

/* Async-signal-safe: stop our processes, remove our files. */
static void cleanup_all(void)
{
    stop_round_procs();
    if (!g.dir[0])
        return;
    rm_at(AT_FDCWD, g.dir, 0);
    if (access(g.dir, F_OK) == 0) {
        bu_say("bench_relay: could not remove ");
        bu_say(g.dir);
        bu_say("\n");
    }
    g.dir[0] = 0;
}

static void fail_cleanup(void)
{
    show_tail(g.rlog, "our runner's log");
    show_tail(g.alog, "airlockd's log (with its runner's)");
    cleanup_all();
}

static void on_signal(int sig)
{
    if (sig == SIGALRM)
        bu_say("bench_relay: error: watchdog: a phase ran past its time limit\n");
    else
        bu_say("bench_relay: interrupted\n");
    fail_cleanup();
    _exit(1);
}

static void watchdog(unsigned secs)
{
    alarm(secs);
}

/* utime + stime of this process, seconds. */
/* ---- airlockd: subcommands, serve, the HTTP API --------------------------------------- */

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
        bu_fail("airlockd user add %s --role %s failed (see above)", name, role);
    trim(key);
    if (!key[0] || strlen(key) >= cap - 1 || strchr(key, '\n') || strchr(key, ' '))
        bu_fail("airlockd user add printed no usable key");
}

static void mint_token(char *tok, size_t cap)
{
    char *argv[] = {g.airlockd_bin, "token",          "--data", g.data, "--aud", IDENT,
                    "--scope",      "runner:connect", "--ttl",  "600",  NULL};
    if (bu_run_capture(argv, tok, cap, &g.child) != 0)
        bu_fail("airlockd token failed (see above)");
    trim(tok);
    if (!tok[0] || strlen(tok) >= cap - 1)
        bu_fail("airlockd token printed no usable token");
}

/*
 * One HTTP/1.1 request to airlockd (Connection: close), 15 s at most. The
 * status, or -1 if airlockd is not answering; the body (NUL-terminated,
 * truncated to cap) in out.
 */
static int http_at(int port, const char *method, const char *target, const char *key,
                   const char *body, char *out, size_t cap)
{
    int fd = bu_tcp_connect(port);
    if (fd < 0)
        return -1;
    char req[1024 + HTTP_MAX];
    size_t bl = body ? strlen(body) : 0;
    char auth[KEY_MAX + 32] = "";
    if (key)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", key);
    int rl = snprintf(req, sizeof req,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                      method, target, port, auth, bl, body ? body : "");
    if (rl < 0 || (size_t)rl >= sizeof req)
        bu_fail("HTTP request too long");
    if (bu_write_all(fd, req, (size_t)rl) != 0) {
        close(fd);
        return -1;
    }
    static char resp[HTTP_MAX + 4096];
    size_t got = 0, want = SIZE_MAX;
    const char *head_end = NULL;
    uint64_t deadline = bu_now_ns() + 15 * BU_SEC;
    while (got < want && got < sizeof resp - 1) {
        uint64_t now = bu_now_ns();
        if (now > deadline)
            bu_fail("%s %s: no complete answer within 15 s", method, target);
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, resp + got, sizeof resp - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        resp[got] = 0;
        if (!head_end && (head_end = strstr(resp, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(resp, "\r\ncontent-length:");
            if (cl && cl < head_end)
                want = (size_t)(head_end + 4 - resp) + strtoul(cl + 17, NULL, 10);
        }
    }
    close(fd);
    resp[got] = 0;
    int status = -1;
    if (got < 12 || sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    const char *b = head_end ? head_end + 4 : resp + got;
    snprintf(out, cap, "%s", b);
    return status;
}

static int http(const char *method, const char *target, const char *key, const char *body,
                char *out, size_t cap)
{
    return http_at(g.port, method, target, key, body, out, cap);
}

/* An airlockd serve on data (its log alog), on the first one's database
 * when second: the pid into *pidp, its port returned once it answers. */
static int start_serve(const char *data, const char *alog, int second, volatile pid_t *pidp)
{
    char listen_on[64], db[300];
    int port = bu_free_port();
    snprintf(listen_on, sizeof listen_on, "127.0.0.1:%d", port);
    snprintf(db, sizeof db, "sqlite:%s/airlock.db", g.data);
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        int lf = open(alog, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (nul < 0 || lf < 0 || dup2(nul, 0) < 0 || dup2(lf, 1) < 0 || dup2(lf, 2) < 0)
            _exit(127);
        signal(SIGPIPE, SIG_DFL);
        if (second)
            execl(g.airlockd_bin, "airlockd", "serve", "--data", data, "--db", db, "--listen",
                  listen_on, "--no-bwrap", "--runner", g.runner_bin, (char *)NULL);
        else
            execl(g.airlockd_bin, "airlockd", "serve", "--data", data, "--listen", listen_on,
                  "--no-bwrap", "--runner", g.runner_bin, (char *)NULL);
        _exit(127);
    }
    *pidp = pid;
    static char body[HTTP_MAX];
    for (int i = 0; i < 200; i++) { /* 10 s */
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            *pidp = 0;
            bu_fail("airlockd serve exited at start (%s %d)",
                    WIFEXITED(st) ? "exit code" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        }
        if (http_at(port, "GET", "/healthz", NULL, NULL, body, sizeof body) == 200)
            return port;
        bu_sleep_ms(50);
    }
    bu_fail("airlockd serve does not answer /healthz on %s after 10 s", listen_on);
    return -1;
}

static void start_airlockd(void)
{
    g.port = start_serve(g.data, g.alog, 0, &g.airlockd);
}

/* The local runner's pid from its pid file, checked to be the one our
 * airlockd started for our data directory. */
static pid_t local_runner_pid(void)
{
    char path[400], buf[RUNNER_ID_MAX + 2];
    snprintf(path, sizeof path, "%s/sandboxes/%s/run/runner.pid", g.data, SANDBOX);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bu_fail("no pid file %s: %s", path, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        bu_fail("empty pid file %s", path);
    buf[n] = 0;
    char *end;
    long pid = strtol(buf, &end, 10);
    if (pid <= 1 || pid > INT_MAX || (*end && *end != '\n'))
        bu_fail("bad pid file %s", path);
    char cpath[64], cmd[4096];
    snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", pid);
    fd = open(cpath, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        bu_fail("the local runner (pid %ld) is not running", pid);
    n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    if (n <= 0)
        bu_fail("cannot read %s", cpath);
    cmd[n] = 0;
    for (ssize_t i = 0; i < n; i++)
        if (!cmd[i])
            cmd[i] = ' ';
    if (!strstr(cmd, g.runner_bin) || !strstr(cmd, g.data))
        bu_fail("pid %ld from %s is not our runner: %.200s", pid, path, cmd);
    if (getpgid((pid_t)pid) != (pid_t)pid)
        bu_fail("the local runner (pid %ld) does not lead its process group", pid);
    return (pid_t)pid;
}

/* Add the local sandbox and wait for its runner to link up. */
static void add_sandbox(void)
{
    static char body[HTTP_MAX];
    int st = http("POST", "/v1/sandboxes", g.admin, "{\"id\":\"" SANDBOX "\",\"kind\":\"local\"}",
                  body, sizeof body);
    if (st != 201)
        bu_fail("POST /v1/sandboxes: %d %.300s", st, body);
    uint64_t deadline = bu_now_ns() + LINK_WAIT_S * BU_SEC;
    for (;;) {
        st = http("GET", "/v1/sandboxes", g.admin, NULL, body, sizeof body);
        if (st != 200)
            bu_fail("GET /v1/sandboxes: %d %.300s", st, body);
        json_error_t je;
        json_t *arr = json_loads(body, 0, &je);
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
        if (bu_now_ns() > deadline)
            bu_fail("the local runner did not link up within %d s", LINK_WAIT_S);
        bu_sleep_ms(50);
    }
    g.lrunner = local_runner_pid();
}

/* POST /v1/terminals running sh -c cmd; its id into id. */
static void create_terminal(const char *cmd, char *id, size_t cap)
{
    json_t *req = json_pack("{s:s, s:[s,s,s], s:i, s:i}", "sandbox", SANDBOX, "argv", "/bin/sh",
                            "-c", cmd, "cols", 80, "rows", 24);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!text)
        bu_fail("out of memory");
    static char body[HTTP_MAX];
    int st = http("POST", "/v1/terminals", g.op, text, body, sizeof body);
    free(text);
    if (st != 201)
        bu_fail("POST /v1/terminals: %d %.300s", st, body);
    json_error_t je;
    json_t *o = json_loads(body, 0, &je);
    const char *v = json_string_value(json_object_get(o, "id"));
    if (!v || strlen(v) >= cap || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(v))
        bu_fail("POST /v1/terminals answered no usable id: %.300s", body);
    snprintf(id, cap, "%s", v);
    json_decref(o);
}

static void delete_terminal(const char *id)
{
    char target[ID_MAX + 32];
    static char body[HTTP_MAX];
    snprintf(target, sizeof target, "/v1/terminals/%s", id);
    int st = http("DELETE", target, g.op, NULL, body, sizeof body);
    if (st != 200 && st != 202) /* 202: the channel closes on the runner */
        bu_fail("DELETE %s: %d %.300s", target, st, body);
}

/* ---- our own runner ----------------------------------------------------------------- */

static void start_runner(int port)
{
    char jwks[300];
    snprintf(jwks, sizeof jwks, "%s/jwks.json", g.data);
    bu_start_runner(g.runner_bin, port, IDENT, jwks, g.rlog, &g.runner);
}

/* ---- a client: a controller endpoint, its one channel, the stream checked --------- */

struct cli {
    struct bu_ctl ctl;
    const char *who; /* "the writer", "the viewer", "the runner's client" */
    uint32_t ch;
    int ready, linked, closed, exited, role; /* role: enum fr_relay_role, 0 before ROLE */
    int32_t code;
    uint8_t signo;
    uint64_t pos; /* the next stdout offset: after the last DATA or GAP */
    uint8_t last; /* the last stdout byte */
    /* the stream: the byte at offset MARK + i must be expect[i] */
    const uint8_t *expect;
    uint64_t expect_len;
    int armed;                 /* the stream was started: gaps now count */
    uint64_t gaps, gap_bytes;  /* while armed */
    uint64_t frames, max_data; /* DATA events while armed, the largest */
    uint64_t t_done;           /* ns: when pos reached the stream's end */
};

static void cli_event(void *ud, const struct ep_event *ev)
{
    struct cli *c = ud;
    struct bu_ws *ws = &c->ctl.ws;
    if (ev->channel && ev->channel != c->ch) {
        bu_ws_error(ws, "%s: an event on channel %u", c->who, (unsigned)ev->channel);
        return;
    }
    switch (ev->type) {
    case EP_EV_READY:
        c->ready = 1;
        break;
    case EP_EV_OPENED:
    case EP_EV_ATTACHED:
        c->linked = 1;
        break;
    case EP_EV_ROLE:
        c->role = ev->state;
        break;
    case EP_EV_DATA: {
        if (ev->stream != FR_STDOUT) {
            bu_ws_error(ws, "%s: data on stream %u", c->who, ev->stream);
            break;
        }
        if (ev->offset != c->pos) {
            bu_ws_error(ws, "%s: data at offset %llu, expected %llu", c->who,
                        (unsigned long long)ev->offset, (unsigned long long)c->pos);
            break;
        }
        const uint8_t *p = ev->data;
        size_t n = ev->len;
        uint64_t off = ev->offset;
        if (off < MARK && n > 0) {
            if (p[0] != 'R')
                bu_ws_error(ws, "%s: the terminal began with 0x%02x, not R", c->who, p[0]);
            p++;
            n--;
            off++;
        }
        if (c->expect && n > 0) {
            uint64_t i = off - MARK;
            if (i + n > c->expect_len)
                bu_ws_error(ws, "%s: %zu bytes at offset %llu, past the stream's %llu", c->who, n,
                            (unsigned long long)off, (unsigned long long)c->expect_len);
            else if (memcmp(c->expect + i, p, n) != 0)
                bu_ws_error(ws, "%s: bytes differ from the file near offset %llu", c->who,
                            (unsigned long long)off);
        }
        c->pos += ev->len;
        if (ev->len)
            c->last = ev->data[ev->len - 1];
        if (c->armed) {
            c->frames++;
            if (ev->len > c->max_data)
                c->max_data = ev->len;
        }
        if (c->expect && !c->t_done && c->pos == MARK + c->expect_len)
            c->t_done = bu_now_ns();
        if (ep_consume(c->ctl.ep, ev->channel, ev->stream, ev->len) != AL_OK)
            bu_ws_error(ws, "%s: ep_consume failed", c->who);
        break;
    }
    case EP_EV_GAP:
        if (ev->stream != FR_STDOUT || ev->offset != c->pos) {
            bu_ws_error(ws, "%s: a gap %llu..%llu on stream %u at %llu", c->who,
                        (unsigned long long)ev->offset, (unsigned long long)ev->to, ev->stream,
                        (unsigned long long)c->pos);
            break;
        }
        c->pos = ev->to;
        if (c->armed) {
            c->gaps++;
            c->gap_bytes += ev->to - ev->offset;
        }
        if (c->expect && !c->t_done && c->pos == MARK + c->expect_len)
            c->t_done = bu_now_ns();
        break;
    case EP_EV_EXIT:
        c->exited = 1;
        c->code = ev->exit_code;
        c->signo = ev->signo;
        break;
    case EP_EV_CLOSED:
        c->closed = 1;
        break;
    case EP_EV_LOST:
        bu_ws_error(ws, "%s: the host does not know channel %u", c->who, (unsigned)ev->channel);
        break;
    case EP_EV_ERROR:
        bu_ws_error(ws, "%s: ERROR %u on channel %u: %.*s", c->who, ev->code, (unsigned)ev->channel,
                    (int)ev->len, (const char *)ev->data);
        break;
    default: /* SNAPSHOT (a late joiner's screen), VIEWERS, EOF, PONG, WRITABLE */
        break;
    }
}

static void cli_reset(struct cli *c, const char *who)
{
    struct bu_ws ws = c->ctl.ws; /* keeps its buffers */
    memset(c, 0, sizeof *c);
    c->ctl.ws = ws;
    c->who = who;
}

/* Attach to terminal id through the airlockd at port with key: channel 1,
 * from offset 0. */
static void cli_attach_at(struct cli *c, int port, const char *who, const char *id, const char *key)
{
    char target[ID_MAX + 64], hdr[KEY_MAX + 32];
    cli_reset(c, who);
    snprintf(target, sizeof target, "/v1/terminals/%s/attach", id);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", key);
    bu_ws_connect(&c->ctl.ws, port, target, hdr);
    bu_ctl_new(&c->ctl, "bench_relay", cli_event, c);
    c->ch = 1;
    int rc = ep_attach_new(c->ctl.ep, c->ch, FR_MODE_PTY);
    if (rc != AL_OK)
        bu_fail("ep_adopt: %s", al_strerror(rc));
    bu_ctl_link(&c->ctl);
}

static void cli_attach(struct cli *c, const char *who, const char *id, const char *key)
{
    cli_attach_at(c, g.port, who, id, key);
}

static struct fr_str fs(const char *s)
{
    struct fr_str r = {s, (uint16_t)strlen(s)};
    return r;
}

/* Connect to our runner and OPEN a terminal running sh -c cmd. */
static void cli_open_direct(struct cli *c, int port, const char *cmd)
{
    char token[AL_MAX_TOKEN + 2], hdr[AL_MAX_TOKEN + 64], target[128];
    mint_token(token, sizeof token);
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s\r\n", token);
    snprintf(target, sizeof target, "/?identifier=%s&api-version=%s", IDENT, API_VERSION);
    cli_reset(c, "the runner's client");
    bu_ws_connect(&c->ctl.ws, port, target, hdr);
    bu_ctl_new(&c->ctl, "bench_relay", cli_event, c);
    bu_ctl_link(&c->ctl);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.mode = FR_MODE_PTY;
    o.cols = 80;
    o.rows = 24;
    o.term = fs("xterm-256color");
    o.argc = 3;
    o.argv[0] = fs("/bin/sh");
    o.argv[1] = fs("-c");
    o.argv[2] = fs(cmd);
    long id = ep_open(c->ctl.ep, &o);
    if (id <= 0)
        bu_fail("ep_open: %s", al_strerror((int)id));
    c->ch = (uint32_t)id;
    c->role = FR_WRITER; /* a direct controller always writes */
}

typedef int pred_fn(const struct cli *c);

static int p_started(const struct cli *c)
{
    return c->ready && c->linked && c->role && c->pos >= MARK;
}

static int p_exited(const struct cli *c)
{
    return c->exited;
}

static int p_closed(const struct cli *c)
{
    return c->closed;
}

static int p_done(const struct cli *c)
{
    return c->pos >= MARK + c->expect_len;
}

static void pump(struct cli *const *cs, int n, uint64_t deadline)
{
    struct bu_ctl *ctl[2];
    for (int i = 0; i < n; i++)
        ctl[i] = &cs[i]->ctl;
    bu_ctl_pump(ctl, n, deadline);
}

/* Pump until pred holds for each of n clients (secs at most). */
static void wait_all(struct cli *const *cs, int n, pred_fn *pred, unsigned secs, const char *what)
{
    uint64_t deadline = bu_now_ns() + secs * BU_SEC;
    for (;;) {
        int ok = 1;
        for (int i = 0; i < n; i++)
            ok &= pred(cs[i]) != 0;
        if (ok)
            return;
        if (bu_now_ns() > deadline)
            bu_fail("timed out after %u s waiting for %s", secs, what);
        pump(cs, n, deadline);
    }
}

static void settle(struct cli *const *cs, int n, unsigned ms)
{
    uint64_t until = bu_now_ns() + (uint64_t)ms * 1000000u;
    for (uint64_t now = bu_now_ns(); now < until; now = bu_now_ns())
        pump(cs, n, until);
}

/* The one keystroke that starts the stream, or a byte of the echo. */
static void type_byte(struct cli *c, uint8_t b)
{
    if (ep_write(c->ctl.ep, c->ch, FR_STDIN, &b, 1) != 1)
        bu_fail("%s: no stdin credit", c->who);
    bu_ctl_flush(&c->ctl);
}

/* ---- the measures --------------------------------------------------------------------- */

enum { P_RELAY1, P_RELAY2, P_DIRECT, P_BARE, P_LOOP, P_HOP, P_COUNT }; /* throughput paths */
enum { E_RELAY, E_DIRECT, E_BARE, E_HOP, E_COUNT };                    /* echo paths */

struct round_res {
    double mbps[P_COUNT];
    double cpu_d[P_COUNT], cpu_r[P_COUNT], cpu_c[P_COUNT]; /* s: airlockd, runner, us */
    double cpu_h;                                          /* s: the second replica, P_HOP */
    double wall[P_COUNT];                                  /* s */
    double avg_data[P_COUNT], max_data[P_COUNT];           /* bytes per DATA, writer */
    double view_gaps, view_gap_bytes;                      /* the fan-out's viewer */
    long rss_idle, rss_before[2], rss_after[2], rss_end;   /* airlockd, KB */
    double idle_cpu[2];     /* airlockd, share of a core: no client; one on an idle terminal */
    double lat[E_COUNT][4]; /* p50 p90 p99 max, µs */
};

struct bench {
    struct bu_dataset d;
    char cmd[400]; /* the stream's command */
    struct cli w, v;
    int rport; /* our runner's */
};

static unsigned stream_secs(size_t len)
{
    return 20u + (unsigned)(len / 2000000u); /* 2 MB/s at the least */
}

/* A stream through airlockd to the writer, and a viewer when fan == 2;
 * fan 0: the writer alone, attached at the second replica (P_HOP). */
static void tput_relay(struct bench *b, int fan, struct round_res *x)
{
    int p = fan == 1 ? P_RELAY1 : fan == 2 ? P_RELAY2 : P_HOP;
    int hop = fan == 0;
    if (hop)
        fan = 1;
    char id[ID_MAX];
    create_terminal(b->cmd, id, sizeof id);
    struct cli *cs[2] = {&b->w, &b->v};
    cli_attach_at(&b->w, hop ? g.port2 : g.port, "the writer", id, g.op);
    if (fan == 2)
        cli_attach(&b->v, "the viewer", id, g.viewer);
    wait_all(cs, fan, p_started, 15, "the clients to attach and see the terminal start");
    if (b->w.role != FR_WRITER || (fan == 2 && b->v.role != FR_VIEWER))
        bu_fail("relay: roles writer %d, viewer %d", b->w.role, fan == 2 ? b->v.role : 0);
    if (b->w.pos != MARK || (fan == 2 && b->v.pos != MARK))
        bu_fail("relay: the terminal printed more than its mark before the keystroke");
    for (int i = 0; i < fan; i++) {
        cs[i]->expect = b->d.p;
        cs[i]->expect_len = b->d.len;
        cs[i]->armed = 1;
    }
    if (!hop)
        x->rss_before[fan - 1] = bu_mem_of(g.airlockd).rss_kb;
    double d0 = bu_cpu_of(g.airlockd), r0 = bu_cpu_of(g.lrunner), c0 = bu_self_cpu(NULL);
    double h0 = hop ? bu_cpu_of(g.airlockd2) : 0;
    uint64_t t0 = bu_now_ns();
    type_byte(&b->w, 'g');
    wait_all(cs, fan, p_done, stream_secs(b->d.len), "the relayed stream");
    uint64_t t1 = 0;
    for (int i = 0; i < fan; i++)
        if (cs[i]->t_done > t1)
            t1 = cs[i]->t_done;
    wait_all(cs, fan, p_exited, 10, "EXIT after the relayed stream");
    x->cpu_d[p] = bu_cpu_of(g.airlockd) - d0;
    x->cpu_r[p] = bu_cpu_of(g.lrunner) - r0;
    x->cpu_c[p] = bu_self_cpu(NULL) - c0;
    if (hop)
        x->cpu_h = bu_cpu_of(g.airlockd2) - h0;
    x->wall[p] = (double)(bu_now_ns() - t0) / 1e9;
    for (int i = 0; i < fan; i++)
        if (cs[i]->code != 0 || cs[i]->signo != 0)
            bu_fail("relay: the stream's command ended with code %d, signal %u", (int)cs[i]->code,
                    (unsigned)cs[i]->signo);
    if (b->w.gaps)
        bu_fail("relay: the writer was resynced (%llu gaps): its stream is not whole",
                (unsigned long long)b->w.gaps);
    settle(cs, fan, 200);
    if (!hop)
        x->rss_after[fan - 1] = bu_mem_of(g.airlockd).rss_kb;
    x->mbps[p] = (double)b->d.len / ((double)(t1 - t0) / 1e9) / 1e6;
    x->avg_data[p] = (double)b->d.len / (double)(b->w.frames ? b->w.frames : 1);
    x->max_data[p] = (double)b->w.max_data;
    if (fan == 2) {
        x->view_gaps = (double)b->v.gaps;
        x->view_gap_bytes = (double)b->v.gap_bytes;
    }
    for (int i = 0; i < fan; i++)
        bu_ctl_end(&cs[i]->ctl);
    delete_terminal(id);
}

static void tput_direct(struct bench *b, struct round_res *x)
{
    struct cli *c = &b->w;
    cli_open_direct(c, b->rport, b->cmd);
    wait_all(&c, 1, p_started, 15, "the runner's terminal to start");
    c->expect = b->d.p;
    c->expect_len = b->d.len;
    c->armed = 1;
    double r0 = bu_cpu_of(g.runner), c0 = bu_self_cpu(NULL);
    uint64_t t0 = bu_now_ns();
    type_byte(c, 'g');
    wait_all(&c, 1, p_done, stream_secs(b->d.len), "the runner's stream");
    uint64_t t1 = c->t_done;
    wait_all(&c, 1, p_exited, 10, "EXIT after the runner's stream");
    x->cpu_r[P_DIRECT] = bu_cpu_of(g.runner) - r0;
    x->cpu_c[P_DIRECT] = bu_self_cpu(NULL) - c0;
    x->wall[P_DIRECT] = (double)(bu_now_ns() - t0) / 1e9;
    if (c->code != 0 || c->signo != 0 || c->gaps)
        bu_fail("runner: the stream's command ended with code %d, signal %u, %llu gaps",
                (int)c->code, (unsigned)c->signo, (unsigned long long)c->gaps);
    x->mbps[P_DIRECT] = (double)b->d.len / ((double)(t1 - t0) / 1e9) / 1e6;
    x->avg_data[P_DIRECT] = (double)b->d.len / (double)(c->frames ? c->frames : 1);
    x->max_data[P_DIRECT] = (double)c->max_data;
    if (ep_close(c->ctl.ep, c->ch) != AL_OK)
        bu_fail("ep_close failed");
    wait_all(&c, 1, p_closed, 10, "CLOSE of the runner's stream");
    bu_ctl_end(&c->ctl);
}

static void tput_bare(struct bench *b, struct round_res *x)
{
    static uint8_t buf[READ_BUF];
    int m;
    pid_t pid = bu_pty_spawn(b->cmd, &m, &g.child);
    size_t n = bu_pty_read(m, buf, sizeof buf, bu_now_ns() + 10 * BU_SEC);
    if (n != MARK || buf[0] != 'R')
        bu_fail("bare PTY: the stream's command did not start cleanly (%zu bytes)", n);
    uint64_t t0 = bu_now_ns();
    if (write(m, "g", 1) != 1)
        bu_fail("write to the PTY: %s", strerror(errno));
    uint64_t deadline = t0 + stream_secs(b->d.len) * BU_SEC;
    size_t got = 0;
    while (got < b->d.len) {
        n = bu_pty_read(m, buf, sizeof buf, deadline);
        if (n == 0)
            bu_fail("bare PTY: the stream ended after %zu of %zu bytes", got, b->d.len);
        if (got + n > b->d.len || memcmp(b->d.p + got, buf, n) != 0)
            bu_fail("bare PTY: bytes differ from the file near offset %zu", got);
        got += n;
    }
    uint64_t t1 = bu_now_ns();
    bu_pty_stop(pid, m, &g.child);
    x->mbps[P_BARE] = (double)b->d.len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* The file through TCP on 127.0.0.1: a child writes, we read 64 KiB at a time. */
static void tput_loopback(struct bench *b, struct round_res *x)
{
    int port;
    int ls = bu_tcp_listen(1, &port, "loopback");
    uint64_t t0 = bu_now_ns();
    pid_t pid = fork();
    if (pid < 0)
        bu_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        int s = bu_tcp_connect(port);
        _exit(s >= 0 && bu_write_all(s, b->d.p, b->d.len) == 0 ? 0 : 1);
    }
    g.child = pid;
    uint64_t deadline = t0 + stream_secs(b->d.len) * BU_SEC;
    struct pollfd pfd = {ls, POLLIN, 0};
    if (poll(&pfd, 1, 10000) != 1)
        bu_fail("loopback: the writer did not connect within 10 s");
    int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    close(ls);
    if (s < 0)
        bu_fail("accept: %s", strerror(errno));
    static uint8_t buf[READ_BUF];
    size_t got = 0;
    while (got < b->d.len) {
        if (bu_now_ns() > deadline)
            bu_fail("loopback: %zu of %zu bytes in time", got, b->d.len);
        pfd = (struct pollfd){s, POLLIN, 0};
        (void)poll(&pfd, 1, 1000);
        ssize_t n = read(s, buf, sizeof buf);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            bu_fail("loopback: the stream ended after %zu of %zu bytes", got, b->d.len);
        if (got + (size_t)n > b->d.len || memcmp(b->d.p + got, buf, (size_t)n) != 0)
            bu_fail("loopback: bytes differ near offset %zu", got);
        got += (size_t)n;
    }
    uint64_t t1 = bu_now_ns();
    close(s);
    int st = 0;
    if (bu_wait_bounded(pid, 5000, &st) != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        bu_fail("loopback: the writer failed");
    g.child = 0;
    x->mbps[P_LOOP] = (double)b->d.len / ((double)(t1 - t0) / 1e9) / 1e6;
}

/* ECHO_N timed one-byte round trips on client c (already started). */
static void echo_trips(struct cli *c, double out[4])
{
    static double s[ECHO_N];
    for (int i = 0; i < ECHO_WARM + ECHO_N; i++) {
        uint8_t b = (uint8_t)('a' + i % 26);
        uint64_t want = c->pos + 1;
        uint64_t t0 = bu_now_ns();
        type_byte(c, b);
        uint64_t deadline = t0 + 2 * BU_SEC;
        while (c->pos < want) {
            if (bu_now_ns() > deadline)
                bu_fail("%s: no echo within 2 s at round trip %d", c->who, i);
            pump(&c, 1, deadline);
        }
        uint64_t t1 = bu_now_ns();
        if (c->pos != want || c->last != b)
            bu_fail("%s: round trip %d brought back the wrong bytes", c->who, i);
        if (i >= ECHO_WARM)
            s[i - ECHO_WARM] = (double)(t1 - t0) / 1e3;
    }
    bu_percentiles(s, ECHO_N, out);
}

static void lat_relay(struct bench *b, double out[4], double *idle)
{
    char id[ID_MAX];
    create_terminal(ECHO_CMD, id, sizeof id);
    struct cli *c = &b->w;
    cli_attach(c, "the writer", id, g.op);
    wait_all(&c, 1, p_started, 15, "the echo terminal to start through airlockd");
    if (c->role != FR_WRITER)
        bu_fail("relay: the operator is not the writer (role %d)", c->role);
    /* the terminal is idle (cat waits): what does one attached client cost? */
    settle(&c, 1, 200);
    double d0 = bu_cpu_of(g.airlockd);
    uint64_t t0 = bu_now_ns();
    settle(&c, 1, IDLE_MS);
    *idle = (bu_cpu_of(g.airlockd) - d0) / ((double)(bu_now_ns() - t0) / 1e9);
    echo_trips(c, out);
    bu_ctl_end(&c->ctl);
    delete_terminal(id);
}

/* The echo with the writer attached at the second replica, relayed to the
 * owner (E_HOP). */
static void lat_hop(struct bench *b, double out[4])
{
    char id[ID_MAX];
    create_terminal(ECHO_CMD, id, sizeof id);
    struct cli *c = &b->w;
    cli_attach_at(c, g.port2, "the writer", id, g.op);
    wait_all(&c, 1, p_started, 15, "the echo terminal to start across replicas");
    if (c->role != FR_WRITER)
        bu_fail("across replicas: the operator is not the writer (role %d)", c->role);
    echo_trips(c, out);
    bu_ctl_end(&c->ctl);
    delete_terminal(id);
}

static void lat_direct(struct bench *b, double out[4])
{
    struct cli *c = &b->w;
    cli_open_direct(c, b->rport, ECHO_CMD);
    wait_all(&c, 1, p_started, 15, "the echo terminal to start on the runner");
    echo_trips(c, out);
    if (ep_close(c->ctl.ep, c->ch) != AL_OK)
        bu_fail("ep_close failed");
    wait_all(&c, 1, p_closed, 10, "CLOSE of the echo terminal");
    bu_ctl_end(&c->ctl);
}

static void lat_bare(double out[4])
{
    static double s[ECHO_N];
    bu_lat_bare(ECHO_CMD, ECHO_WARM, ECHO_N, s, &g.child, out);
}

/* ---- a round ------------------------------------------------------------------------------ */

static void setup_round(struct bench *b, struct round_res *x)
{
    if (mkdir(g.data, 0700) != 0)
        bu_fail("mkdir %s: %s", g.data, strerror(errno));
    user_add("ada", "admin", g.admin, sizeof g.admin);
    user_add("otto", "operator", g.op, sizeof g.op);
    user_add("vic", "viewer", g.viewer, sizeof g.viewer);
    start_airlockd();
    add_sandbox();
    bu_sleep_ms(300);
    x->rss_idle = bu_mem_of(g.airlockd).rss_kb;
    double d0 = bu_cpu_of(g.airlockd);
    uint64_t t0 = bu_now_ns();
    bu_sleep_ms(IDLE_MS);
    x->idle_cpu[0] = (bu_cpu_of(g.airlockd) - d0) / ((double)(bu_now_ns() - t0) / 1e9);
    b->rport = bu_free_port();
    start_runner(b->rport);
    g.port2 = start_serve(g.data2, g.alog2, 1, &g.airlockd2); /* a second replica */
}

static void end_round(struct round_res *x)
{
    bu_sleep_ms(300);
    x->rss_end = bu_mem_of(g.airlockd).rss_kb;
    stop_round_procs();
    while (waitpid(-1, NULL, WNOHANG) > 0) /* orphans of the runners, reparented to us */
        ;
    rm_at(AT_FDCWD, g.data, 0);
    rm_at(AT_FDCWD, g.data2, 0);
    if (access(g.data, F_OK) == 0 || access(g.data2, F_OK) == 0)
        bu_fail("could not remove %s or %s", g.data, g.data2);
    (void)unlink(g.alog2);
    (void)unlink(g.alog);
    (void)unlink(g.rlog);
}

static void run_round(struct bench *b, int r, struct round_res *x)
{
    unsigned phase_s = stream_secs(b->d.len) + 60u;
    watchdog(120);
    setup_round(b, x);
    /* alternate the order: even rounds relay first, odd rounds limits first */
    static const int order[P_COUNT] = {P_RELAY1, P_RELAY2, P_HOP, P_DIRECT, P_BARE, P_LOOP};
    for (int i = 0; i < P_COUNT; i++) {
        int p = order[r % 2 == 0 ? i : P_COUNT - 1 - i];
        watchdog(phase_s);
        switch (p) {
        case P_RELAY1:
            tput_relay(b, 1, x);
            break;
        case P_RELAY2:
            tput_relay(b, 2, x);
            break;
        case P_HOP:
            tput_relay(b, 0, x);
            break;
        case P_DIRECT:
            tput_direct(b, x);
            break;
        case P_BARE:
            tput_bare(b, x);
            break;
        default:
            tput_loopback(b, x);
            break;
        }
    }
    for (int i = 0; i < E_COUNT; i++) {
        int e = r % 2 == 0 ? i : E_COUNT - 1 - i;
        watchdog(120);
        if (e == E_RELAY)
            lat_relay(b, x->lat[E_RELAY], &x->idle_cpu[1]);
        else if (e == E_DIRECT)
            lat_direct(b, x->lat[E_DIRECT]);
        else if (e == E_HOP)
            lat_hop(b, x->lat[E_HOP]);
        else
            lat_bare(x->lat[E_BARE]);
    }
    watchdog(60);
    end_round(x);
}

/* ---- report --------------------------------------------------------------------------------- */

/* GB (10^9 bytes) of the stream: core-s/GB = ms/MB. */
static double gb(size_t len)
{
    return (double)len / 1e9;
}

static void tput_row(const char *name, const struct round_res *rr, int n, int p)
{
    double v[MAX_RUNS], rd[MAX_RUNS], rb[MAX_RUNS], rl[MAX_RUNS], md[MAX_RUNS];
    for (int i = 0; i < n; i++) {
        v[i] = rr[i].mbps[p];
        rd[i] = rr[i].mbps[p] / rr[i].mbps[P_DIRECT];
        rb[i] = rr[i].mbps[p] / rr[i].mbps[P_BARE];
        rl[i] = rr[i].mbps[p] / rr[i].mbps[P_LOOP];
        md[i] = rr[i].mbps[P_DIRECT];
    }
    char a[96], c[96], d[96], e[96];
    struct bu_stat3 s = bu_stat3_of(v, n), sd = bu_stat3_of(md, n);
    printf("| %s | %s | %.2f | %s | %s | %s |\n", name, bu_fmt3(a, sizeof a, v, n, 1),
           s.med / sd.med, bu_fmt3(c, sizeof c, rd, n, 2), bu_fmt3(d, sizeof d, rb, n, 2),
           bu_fmt3(e, sizeof e, rl, n, 3));
}

static void report(const struct round_res *rr, int n, size_t len)
{
    char a[96], b[96], c3[96];
    double v1[MAX_RUNS], v2[MAX_RUNS], v3[MAX_RUNS];
    time_t now = time(NULL);
    struct tm tm;
    char date[64] = "?";
    if (gmtime_r(&now, &tm))
        strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", &tm);
    struct utsname un;
    if (uname(&un) != 0)
        memset(&un, 0, sizeof un);
    printf("bench_relay: %s, %s %s %s, %ld CPUs; %d interleaved rounds, each with a fresh "
           "`airlockd serve --no-bwrap`, its local runner, and a fresh airlock-runner of our "
           "own\n\n",
           date, un.sysname, un.release, un.machine, sysconf(_SC_NPROCESSORS_ONLN), n);

    printf("Output throughput: %zu bytes (%.0f MB) of base64 text, 76 columns + CRLF, through "
           "`stty raw -echo; printf R; head -c1 >/dev/null; exec cat FILE`, from the keystroke "
           "that starts the cat to the last byte, verified byte for byte. Cells: "
           "min/median/max over rounds.\n\n",
           len, (double)len / 1e6);
    printf("| path | MB/s | ÷ direct runner (medians) | ÷ direct runner, same round | ÷ bare "
           "PTY, same round | ÷ raw loopback, same round |\n|---|---|---|---|---|---|\n");
    tput_row("raw loopback TCP, 64 KiB reads (limit)", rr, n, P_LOOP);
    tput_row("bare PTY: forkpty, 64 KiB reads (limit)", rr, n, P_BARE);
    tput_row("airlock-runner direct, C client (bench_runner's path)", rr, n, P_DIRECT);
    tput_row("airlockd relay, 1 client (the writer)", rr, n, P_RELAY1);
    tput_row("airlockd relay, 2 clients (writer + viewer, until both have all)", rr, n, P_RELAY2);
    tput_row("across replicas: the writer at a second airlockd, relayed to the owner", rr, n,
             P_HOP);
    for (int i = 0; i < n; i++) {
        v1[i] = rr[i].mbps[P_HOP] / rr[i].mbps[P_RELAY1];
        v2[i] = rr[i].cpu_h / gb(len);
        v3[i] = rr[i].cpu_d[P_HOP] / gb(len);
    }
    printf("\nAcross replicas ÷ relay with 1 client, same round: %s; the second replica (the "
           "hop) %s core-s/GB, the owner %s core-s/GB.\n",
           bu_fmt3(a, sizeof a, v1, n, 2), bu_fmt3(b, sizeof b, v2, n, 1),
           bu_fmt3(c3, sizeof c3, v3, n, 1));
    for (int i = 0; i < n; i++) {
        v1[i] = rr[i].mbps[P_RELAY2] / rr[i].mbps[P_RELAY1];
        v2[i] = rr[i].view_gaps;
        v3[i] = rr[i].view_gap_bytes / 1e6;
    }
    printf("\nFan-out: 2 clients ÷ 1 client, same round: %s. The viewer was resynced %s times "
           "per stream (%s MB skipped); the writer never (checked).\n\n",
           bu_fmt3(a, sizeof a, v1, n, 2), bu_fmt3(b, sizeof b, v2, n, 0),
           bu_fmt3(c3, sizeof c3, v3, n, 1));

    printf("CPU over each stream (utime+stime from /proc, children excluded), from the keystroke "
           "to EXIT. core-s/GB equals ms per MB.\n\n");
    printf("| process | relay, 1 client | relay, 2 clients | direct runner |\n|---|---|---|---|\n");
    const int ps[3] = {P_RELAY1, P_RELAY2, P_DIRECT};
    printf("| airlockd, core-s/GB |");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = rr[i].cpu_d[ps[k]] / gb(len);
        printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 1));
    }
    printf(" — |\n| airlockd, share of one core during the stream |");
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = 100.0 * rr[i].cpu_d[ps[k]] / rr[i].wall[ps[k]];
        printf(" %s %% |", bu_fmt3(a, sizeof a, v1, n, 0));
    }
    printf(" — |\n| the runner, core-s/GB |");
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = rr[i].cpu_r[ps[k]] / gb(len);
        printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 1));
    }
    printf("\n| this client (checks every byte), core-s/GB |");
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = rr[i].cpu_c[ps[k]] / gb(len);
        printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 1));
    }
    printf("\n| the writer's DATA frames, average bytes |");
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = rr[i].avg_data[ps[k]];
        printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 0));
    }
    printf("\n\n");

    printf("airlockd CPU with no output at all (%d ms samples of utime+stime), share of one "
           "core:\n\n| airlockd state | share of one core |\n|---|---|\n",
           IDLE_MS);
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++)
            v1[i] = 100.0 * rr[i].idle_cpu[k];
        printf("| %s | %s %% |\n",
               k ? "one client attached to an idle terminal (`cat` waiting)"
                 : "its runner linked, no terminal, no client",
               bu_fmt3(a, sizeof a, v1, n, 0));
    }
    printf("\n");

    printf("airlockd memory: VmRSS KB (min/median/max over rounds).\n\n");
    printf("| airlockd state | VmRSS KB |\n|---|---|\n");
    for (int i = 0; i < n; i++)
        v1[i] = (double)rr[i].rss_idle;
    printf("| fresh, its runner linked, no terminal | %s |\n", bu_fmt3(a, sizeof a, v1, n, 0));
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < n; i++) {
            v1[i] = (double)rr[i].rss_before[k];
            v2[i] = (double)rr[i].rss_after[k];
            v3[i] = (double)(rr[i].rss_after[k] - rr[i].rss_before[k]);
        }
        printf("| before the %d-client stream (clients attached) | %s |\n", k + 1,
               bu_fmt3(a, sizeof a, v1, n, 0));
        printf("| after it (terminal exited, clients attached) | %s |\n",
               bu_fmt3(b, sizeof b, v2, n, 0));
        printf("| growth over the %d-client stream | %s |\n", k + 1,
               bu_fmt3(c3, sizeof c3, v3, n, 0));
    }
    for (int i = 0; i < n; i++)
        v1[i] = (double)rr[i].rss_end;
    printf("| every terminal deleted, no client | %s |\n\n", bu_fmt3(a, sizeof a, v1, n, 0));

    printf("Keystroke echo, `stty raw -echo; cat`: %d one-byte round trips after %d warm-up, "
           "per round. Microseconds; cells: min/median/max over rounds of each per-round "
           "statistic.\n\n",
           ECHO_N, ECHO_WARM);
    printf("| path | p50 µs | p90 µs | p99 µs | max µs |\n|---|---|---|---|---|\n");
    const char *names[7] = {"bare PTY: write + read on the master (limit)",
                            "airlock-runner direct: DATA on stdin, back on stdout",
                            "airlockd relay: writer → airlockd → runner and back",
                            "across replicas: writer → second airlockd → owner → runner and back",
                            "relay − direct runner, same round",
                            "relay − bare PTY, same round",
                            "across replicas − relay, same round"};
    for (int row = 0; row < 7; row++) {
        printf("| %s |", names[row]);
        for (int k = 0; k < 4; k++) {
            if (row >= 4 && k == 3) {
                printf(" — |"); /* a difference of two maxima says little */
                continue;
            }
            for (int i = 0; i < n; i++)
                v1[i] = row == 0   ? rr[i].lat[E_BARE][k]
                        : row == 1 ? rr[i].lat[E_DIRECT][k]
                        : row == 2 ? rr[i].lat[E_RELAY][k]
                        : row == 3 ? rr[i].lat[E_HOP][k]
                        : row == 4 ? rr[i].lat[E_RELAY][k] - rr[i].lat[E_DIRECT][k]
                        : row == 5 ? rr[i].lat[E_RELAY][k] - rr[i].lat[E_BARE][k]
                                   : rr[i].lat[E_HOP][k] - rr[i].lat[E_RELAY][k];
            printf(" %s |", bu_fmt3(a, sizeof a, v1, n, 0));
        }
        printf("\n");
    }
    printf("\n");

    printf("Every round:\n\n| round | loopback MB/s | bare MB/s | direct MB/s | relay 1 MB/s | "
           "relay 2 MB/s | relay 1 ÷ direct | airlockd core-s/GB (1 / 2) | viewer resyncs | "
           "echo p50 bare/direct/relay µs | airlockd RSS idle → after 2 KB |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const struct round_res *x = &rr[i];
        printf(
            "| %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f / %.1f | %.0f | %.0f/%.0f/%.0f "
            "| %ld → %ld |\n",
            i + 1, x->mbps[P_LOOP], x->mbps[P_BARE], x->mbps[P_DIRECT], x->mbps[P_RELAY1],
            x->mbps[P_RELAY2], x->mbps[P_RELAY1] / x->mbps[P_DIRECT], x->cpu_d[P_RELAY1] / gb(len),
            x->cpu_d[P_RELAY2] / gb(len), x->view_gaps, x->lat[E_BARE][0], x->lat[E_DIRECT][0],
            x->lat[E_RELAY][0], x->rss_idle, x->rss_after[1]);
    }
}

/* ---- main -------------------------------------------------------------------------------------
 */

static void setup_dir(void)
{
    bu_make_tmpdir(g.dir, sizeof g.dir, "bench_relay");
    snprintf(g.data, sizeof g.data, "%s/data", g.dir);
    snprintf(g.stream, sizeof g.stream, "%s/stream.txt", g.dir);
    snprintf(g.alog, sizeof g.alog, "%s/airlockd.log", g.dir);
    snprintf(g.data2, sizeof g.data2, "%s/data2", g.dir);
    snprintf(g.alog2, sizeof g.alog2, "%s/airlockd2.log", g.dir);
    snprintf(g.rlog, sizeof g.rlog, "%s/runner.log", g.dir);
}

int main(int argc, char **argv)
{
    bu_init("bench_relay", fail_cleanup);
    long mb = argc > 1 ? bu_arg_long(argv[1], 1, MAX_MB) : 100;
    long runs = argc > 2 ? bu_arg_long(argv[2], 1, MAX_RUNS) : 5;
    const char *bdir = argc > 3 ? argv[3] : "./build";
    if (mb < 0 || runs < 0 || argc > 4) {
        fprintf(stderr,
                "usage: bench_relay [MB 1..%d] [RUNS 1..%d] [BUILD_DIR]\n"
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
    /* the local runner outlives airlockd: once airlockd is gone it is ours to reap */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
        bu_fail("prctl(PR_SET_CHILD_SUBREAPER): %s", strerror(errno));

    bu_catch_signals(on_signal);

    watchdog(120);
    setup_dir();
    static struct bench b;
    bu_make_dataset(&b.d, g.stream, (size_t)mb * 1000000u);
    snprintf(b.cmd, sizeof b.cmd, STREAM_FMT, g.stream);
    bu_ws_init(&b.w.ctl.ws, "airlockd");
    bu_ws_init(&b.v.ctl.ws, "airlockd");

    static struct round_res rr[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        struct round_res *x = &rr[r];
        run_round(&b, r, x);
        fprintf(stderr,
                "round %d/%ld: MB/s loopback %.0f bare %.1f direct %.1f relay1 %.1f relay2 %.1f "
                "(relay1/direct %.2f); airlockd core-s/GB %.1f/%.1f; viewer resyncs %.0f; echo "
                "p50 µs bare %.0f direct %.0f relay %.0f; airlockd RSS %ld→%ld KB\n",
                r + 1, runs, x->mbps[P_LOOP], x->mbps[P_BARE], x->mbps[P_DIRECT], x->mbps[P_RELAY1],
                x->mbps[P_RELAY2], x->mbps[P_RELAY1] / x->mbps[P_DIRECT],
                x->cpu_d[P_RELAY1] / gb(b.d.len), x->cpu_d[P_RELAY2] / gb(b.d.len), x->view_gaps,
                x->lat[E_BARE][0], x->lat[E_DIRECT][0], x->lat[E_RELAY][0], x->rss_idle,
                x->rss_after[1]);
    }
    alarm(0);
    report(rr, (int)runs, b.d.len);
    bu_free_dataset(&b.d);
    cleanup_all();
    bu_ws_free(&b.w.ctl.ws);
    bu_ws_free(&b.v.ctl.ws);
    return 0;
}
