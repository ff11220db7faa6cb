/*
 * Tests of the agents' jail (src/runner/jail.c) through proc_spawn, with
 * real bubblewrap, real namespaces and the real seccomp filter: the
 * escape tool (tests/tools/escape.c) tries what an agent would and every
 * attempt must fail; the command, its environment, its directory and its
 * exit status pass through; a missing command is an error at spawn; with
 * no network the agent sees loopback only.
 *
 * As root the agent is started as nobody (the runner refuses to jail
 * agents as root: its uid would own root's files inside the namespace).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "jail.h"
#include "proc.h"

#define WAIT_MS 30000
#define OUT_CAP 65536
#define NOBODY 65534
#define EARLY_SIGNAL_ROUNDS 20 /* signals sent during the jail's set-up: a race, so many tries */

struct run_out {
    char out[OUT_CAP], err[OUT_CAP];
    size_t nout, nerr;
    int code, sig;
};

static char ws[] = "/tmp/airlock-jail-XXXXXX";

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void as_agent(struct proc_spec *s)
{
    if (geteuid() == 0) {
        s->set_user = 1;
        s->uid = NOBODY;
        s->gid = NOBODY;
    }
}

/* What an agent's spawn asks for: PATH only, in the workspace, as nobody
 * when we are root (never as root outside a sandbox: it could mount,
 * mknod ...). */
static struct proc_spec agent_spec(enum proc_mode mode, const char *const *argv)
{
    static const char *const allow[] = {"PATH", NULL};
    struct proc_spec s;
    memset(&s, 0, sizeof s);
    s.mode = mode;
    s.argv = argv;
    s.env_allow = allow;
    s.cwd = ws;
    s.cols = 80;
    s.rows = 24;
    as_agent(&s);
    return s;
}

static const struct jail_proxy *the_proxy; /* jail_cmd's px for spawn_in (NULL: none) */

static int spawn_in(const struct jail *j, const char *const *argv, const char *const *env,
                    struct proc *p, char *err, size_t cap)
{
    struct proc_spec s = agent_spec(PROC_PIPES, argv);
    s.env = env;
    struct jail_cmd jc;
    int rc = jail_cmd(j, NULL, 0, the_proxy, &jc, err, cap);
    if (rc != AL_OK)
        return rc;
    s.wrap = jc.argv;
    s.wrap_fd = jc.fd;
    rc = proc_spawn(&s, p, err, cap);
    jail_cmd_done(&jc);
    return rc;
}

static void run_in(const struct jail *j, const char *const *argv, const char *const *env,
                   struct run_out *o)
{
    struct proc p;
    char err[512] = "";
    memset(o, 0, sizeof *o);
    int rc = spawn_in(j, argv, env, &p, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("spawn %s: %s", argv[0], err);
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    int64_t deadline = now_ms() + WAIT_MS;
    int eo = 0, ee = 0;
    while (!eo || !ee) {
        int left = (int)(deadline - now_ms());
        if (left <= 0) {
            (void)proc_kill_tree(&p);
            fail_msg("timed out; out '%s' err '%s'", o->out, o->err);
        }
        struct pollfd pfd[2] = {{.fd = eo ? -1 : p.fd_out, .events = POLLIN},
                                {.fd = ee ? -1 : p.fd_err, .events = POLLIN}};
        if (poll(pfd, 2, left) <= 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (!pfd[k].revents)
                continue;
            char *b = k ? o->err : o->out;
            size_t *n = k ? &o->nerr : &o->nout;
            ssize_t m = read(pfd[k].fd, b + *n, OUT_CAP - 1 - *n);
            if (m > 0)
                *n += (size_t)m;
            else if (m == 0 || (errno != EAGAIN && errno != EINTR))
                *(k ? &ee : &eo) = 1;
            b[*n] = 0;
        }
    }
    for (;;) {
        rc = proc_reap(&p, &o->code, &o->sig, NULL);
        if (rc == AL_OK)
            break;
        assert_true(now_ms() < deadline);
        usleep(5000);
    }
    proc_close(&p);
}

static struct jail *new_jail(int no_network)
{
    struct jail_config c = {.workspace = ws, .no_network = no_network};
    struct jail *j = NULL;
    char err[512] = "";
    int rc = jail_new(&c, &j, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("jail_new: %s", err);
    return j;
}

static int setup(void **state)
{
    (void)state;
    if (!mkdtemp(ws))
        return -1;
    /* the agent's workspace, with the escape tool in it */
    const char *bin = getenv("AL_BIN");
    char src[4096], dst[4096], cmd[8400];
    (void)snprintf(src, sizeof src, "%s/escape", bin ? bin : ".");
    (void)snprintf(dst, sizeof dst, "%s/escape", ws);
    (void)snprintf(cmd, sizeof cmd, "cp '%s' '%s'", src, dst);
    if (system(cmd) != 0)
        return -1;
    if (geteuid() == 0 && (chown(ws, NOBODY, NOBODY) != 0 || chown(dst, NOBODY, NOBODY) != 0))
        return -1;
    return chmod(ws, 0755);
}

static int teardown(void **state)
{
    (void)state;
    char cmd[256];
    (void)snprintf(cmd, sizeof cmd, "rm -rf '%s'", ws);
    return system(cmd) == 0 ? 0 : -1;
}

/* Every attempt of the escape tool fails inside the jail. */
static void test_escape_fails(void **state)
{
    (void)state;
    struct jail *j = new_jail(0);
    char tool[4200];
    (void)snprintf(tool, sizeof tool, "%s/escape", ws);
    const char *const argv[] = {
        tool, "--path", "/run/airlock/token", "--path", "/proc/1/root/etc/shadow", NULL};
    struct run_out o;
    run_in(j, argv, NULL, &o);
    if (o.code != 0 || !strstr(o.out, " 0 failed")) {
        fprintf(stderr, "%s\n%s\n", o.out, o.err);
        fail_msg("escape got through (exit %d)", o.code);
    }
    assert_non_null(strstr(o.out, "ok open_by_handle_at"));
    assert_non_null(strstr(o.out, "ok socket(AF_PACKET)"));
    jail_free(j);
}

/* Without the jail the same tool gets through somewhere (the test can fail). */
static void test_escape_without_jail_is_seen(void **state)
{
    (void)state;
    char tool[4200];
    (void)snprintf(tool, sizeof tool, "%s/escape", ws);
    const char *const argv[] = {tool, NULL};
    struct proc_spec s = agent_spec(PROC_PIPES, argv);
    struct proc p;
    char err[512];
    assert_int_equal(proc_spawn(&s, &p, err, sizeof err), AL_OK);
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    char buf[OUT_CAP];
    size_t n = 0;
    int64_t deadline = now_ms() + WAIT_MS;
    while (now_ms() < deadline) {
        struct pollfd pfd = {.fd = p.fd_out, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t m = read(p.fd_out, buf + n, sizeof buf - 1 - n);
        if (m <= 0 && !(m < 0 && errno == EAGAIN))
            break;
        if (m > 0)
            n += (size_t)m;
    }
    buf[n] = 0;
    int code = 0, sig = 0;
    while (proc_reap(&p, &code, &sig, NULL) == AL_E_AGAIN && now_ms() < deadline)
        usleep(5000);
    proc_close(&p);
    assert_non_null(strstr(buf, "FAIL Seccomp"));
    assert_int_equal(code, 1);
}

/* argv, environment, directory and exit status pass through the jail. */
static void test_command_passes_through(void **state)
{
    (void)state;
    struct jail *j = new_jail(0);
    const char *const argv[] = {"sh", "-c", "echo \"$FOO\"; pwd; id -u; exit 7", NULL};
    const char *const env[] = {"FOO=bar baz", NULL};
    struct run_out o;
    run_in(j, argv, env, &o);
    char want[4300];
    (void)snprintf(want, sizeof want, "bar baz\n%s\n%d\n", ws, JAIL_AGENT_UID);
    if (strcmp(o.out, want) != 0)
        fail_msg("got '%s' (stderr '%s', exit %d), want '%s'", o.out, o.err, o.code, want);
    assert_int_equal(o.code, 7);
    jail_free(j);
}

/* A command that does not exist is an error at spawn, not an exit code. */
static void test_missing_command(void **state)
{
    (void)state;
    struct jail *j = new_jail(0);
    const char *const argv[] = {"no-such-command-here", NULL};
    struct proc p;
    char err[512] = "";
    assert_int_equal(spawn_in(j, argv, NULL, &p, err, sizeof err), AL_E_NOENT);
    assert_non_null(strstr(err, "no-such-command-here"));
    jail_free(j);
}

/* Lines of /proc/net/dev naming an interface ("  lo: ..."). */
static int count_ifaces(const char *text)
{
    int n = 0;
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        const char *colon = memchr(l, ':', len);
        if (colon)
            n++;
        l += len + (end ? 1 : 0);
    }
    return n;
}

/* With no network the agent has loopback only. */
static void test_no_network(void **state)
{
    (void)state;
    struct jail *j = new_jail(1);
    const char *const argv[] = {"cat", "/proc/net/dev", NULL};
    struct run_out o;
    run_in(j, argv, NULL, &o);
    assert_int_equal(o.code, 0);
    assert_non_null(strstr(o.out, "lo:"));
    assert_int_equal(count_ifaces(o.out), 1);
    jail_free(j);
    /* the host's interfaces, when it has more than loopback, show without */
    FILE *f = fopen("/proc/net/dev", "r");
    char host[OUT_CAP];
    size_t hn = f ? fread(host, 1, sizeof host - 1, f) : 0;
    if (f)
        fclose(f);
    host[hn] = 0;
    j = new_jail(0);
    run_in(j, argv, NULL, &o);
    assert_int_equal(count_ifaces(o.out), count_ifaces(host));
    jail_free(j);
}

/* The runner's proxy "socket": answers one connection's line with
 * "pong LINE" and closes. */
struct pong {
    int srv;
    pthread_t th;
};

static void *pong_main(void *arg)
{
    struct pong *pg = arg;
    struct pollfd pfd = {.fd = pg->srv, .events = POLLIN};
    if (poll(&pfd, 1, WAIT_MS) != 1)
        return NULL;
    int c = accept(pg->srv, NULL, NULL);
    if (c < 0)
        return NULL;
    char line[128];
    size_t n = 0;
    while (n < sizeof line - 1) {
        pfd.fd = c;
        if (poll(&pfd, 1, WAIT_MS) != 1 || read(c, line + n, 1) != 1)
            break;
        if (line[n++] == '\n')
            break;
    }
    char out[160];
    int m = snprintf(out, sizeof out, "pong %.*s", (int)n, line);
    if (m > 0 && write(c, out, (size_t)m) != m)
        m = -1;
    (void)close(c);
    return NULL;
}

/* With no network and the runner's proxy, the jail starts with the
 * forwarder: the agent's 127.0.0.1:PORT is carried to the socket, the
 * agent's exit status is the terminal's, and the forwarder is not the
 * agent's child. Without no_network, or without a forwarder, px is
 * ignored. */
/* A copy of the built forwarder in a directory anyone may enter (as
 * airlockd copies it into DATA/runner/): the build directory may sit under
 * a 0700 one (a clone in mktemp -d), which the jail's user cannot cross. */
static void forwarder_copy(char *out, size_t cap, char *dir)
{
    const char *bin = getenv("AL_BIN");
    char src[512];
    (void)snprintf(src, sizeof src, "%s/airlock-proxy-fwd", bin ? bin : ".");
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0);
    (void)snprintf(out, cap, "%s/airlock-proxy-fwd", dir);
    int in = open(src, O_RDONLY | O_CLOEXEC);
    int to = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    assert_true(in >= 0 && to >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        assert_int_equal(write(to, buf, (size_t)n), n);
    assert_int_equal(n, 0);
    (void)close(in);
    assert_int_equal(close(to), 0);
}

static void test_forwarder_for_no_network(void **state)
{
    (void)state;
    char fwd[512], sock[600], fwd_dir[] = "/tmp/airlock-fwd-XXXXXX";
    forwarder_copy(fwd, sizeof fwd, fwd_dir);
    (void)snprintf(sock, sizeof sock, "%s/../proxy-test.sock", ws);
    (void)unlink(sock);
    struct pong pg;
    pg.srv = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un u = {.sun_family = AF_UNIX};
    assert_true(strlen(sock) < sizeof u.sun_path);
    memcpy(u.sun_path, sock, strlen(sock) + 1);
    assert_int_equal(bind(pg.srv, (struct sockaddr *)&u, sizeof u), 0);
    assert_int_equal(listen(pg.srv, 4), 0);
    assert_int_equal(chmod(sock, 0666), 0);
    assert_int_equal(pthread_create(&pg.th, NULL, pong_main, &pg), 0);

    struct jail_config c = {.workspace = ws, .no_network = 1, .proxy_fwd = fwd};
    struct jail *j = NULL;
    char err[512] = "";
    if (jail_new(&c, &j, err, sizeof err) != AL_OK)
        fail_msg("jail_new: %s", err);
    assert_false(jail_forwards(j, NULL));
    struct jail_proxy px = {.socket = sock, .port = 4321};
    assert_true(jail_forwards(j, &px));
    the_proxy = &px;
    const char *const argv[] = {
        "bash", "-c",
        "exec 3<>/dev/tcp/127.0.0.1/4321 && echo ping >&3 && read -r l <&3 && echo \"got $l\"; "
        "read -r kids < /proc/$$/task/$$/children; echo \"children ${kids}.\"; "
        "exit 7",
        NULL};
    struct run_out o;
    run_in(j, argv, NULL, &o);
    the_proxy = NULL;
    assert_int_equal(pthread_join(pg.th, NULL), 0);
    (void)close(pg.srv);
    (void)unlink(sock);
    assert_non_null(strstr(o.out, "got pong ping"));
    assert_non_null(strstr(o.out, "children .\n")); /* the forwarder is no child of the agent */
    assert_int_equal(o.code, 7);
    jail_free(j);

    /* a jail with the network, or no forwarder: nothing in front */
    c.no_network = 0;
    assert_int_equal(jail_new(&c, &j, err, sizeof err), AL_OK);
    assert_false(jail_forwards(j, &px));
    jail_free(j);
    c.no_network = 1;
    c.proxy_fwd = NULL;
    assert_int_equal(jail_new(&c, &j, err, sizeof err), AL_OK);
    assert_false(jail_forwards(j, &px));
    jail_free(j);
    c.proxy_fwd = "/nonexistent/airlock-proxy-fwd";
    assert_int_equal(jail_new(&c, &j, err, sizeof err), AL_E_NOENT);
    assert_non_null(strstr(err, "forwarder"));
    (void)unlink(fwd);
    (void)rmdir(fwd_dir);
}

/* On a PTY the command leads its own session in the namespace: a group
 * signal reaches it (not the wrapper, whose death would end the sandbox),
 * and the shell's job control works. */
static void test_pty_signal_reaches_the_command(void **state)
{
    (void)state;
    struct jail *j = new_jail(0);
    const char *const argv[] = {"sh", "-c",
                                "trap 'echo got-int; exit 3' INT; echo ready $(ps -o sid= -p $$); "
                                "while :; do sleep 0.05; done",
                                NULL};
    struct proc_spec s = agent_spec(PROC_PTY, argv);
    struct jail_cmd jc;
    char err[512] = "";
    assert_int_equal(jail_cmd(j, NULL, 1, NULL, &jc, err, sizeof err), AL_OK);
    s.wrap = jc.argv;
    s.wrap_fd = jc.fd;
    struct proc p;
    int rc = proc_spawn(&s, &p, err, sizeof err);
    jail_cmd_done(&jc);
    if (rc != AL_OK)
        fail_msg("spawn: %s", err);
    char buf[OUT_CAP];
    size_t n = 0;
    int sent = 0;
    int64_t deadline = now_ms() + WAIT_MS;
    while (now_ms() < deadline && !strstr(buf, "got-int")) {
        struct pollfd pfd = {.fd = p.fd_out, .events = POLLIN};
        if (poll(&pfd, 1, 50) > 0) {
            ssize_t m = read(p.fd_out, buf + n, sizeof buf - 1 - n);
            if (m <= 0)
                break;
            n += (size_t)m;
        }
        buf[n] = 0;
        if (!sent && strstr(buf, "ready")) {
            assert_int_equal(proc_signal(&p, SIGINT, 0), AL_OK);
            sent = 1;
        }
    }
    int code = -1, sig = -1;
    while (proc_reap(&p, &code, &sig, NULL) == AL_E_AGAIN && now_ms() < deadline)
        usleep(5000);
    proc_close(&p);
    if (!strstr(buf, "got-int") || code != 3)
        fail_msg("the command did not get SIGINT (exit %d, signal %d): %s", code, sig, buf);
    /* the shell leads its own session inside (sid 2: bwrap's init is 1) */
    assert_non_null(strstr(buf, "ready 2"));
    jail_free(j);
}

/* A signal sent the moment the spawn returns, while the jail may still be
 * setting up, is not lost: the terminal ends, and nothing of the jail is
 * left behind (a wrapper killed during its set-up once left its half-made
 * namespace's first process blocked forever, waiting for the wrapper; it
 * stayed in the wrapper's group, which must be empty once the command's
 * end is reported). */
static void test_early_signal_ends_the_jail(void **state)
{
    (void)state;
    struct jail *j = new_jail(0);
    const char *const argv[] = {"sleep", "30", NULL};
    for (int round = 0; round < EARLY_SIGNAL_ROUNDS; round++) {
        struct proc p;
        char err[512] = "";
        assert_int_equal(spawn_in(j, argv, NULL, &p, err, sizeof err), AL_OK);
        assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_OK);
        int code = 0, sig = 0;
        int64_t deadline = now_ms() + 5000;
        while (proc_reap(&p, &code, &sig, NULL) == AL_E_AGAIN && now_ms() < deadline)
            usleep(5000);
        if (now_ms() >= deadline)
            (void)proc_kill_tree(&p);
        pid_t group = p.pid;
        deadline = now_ms() + 2000;
        while (kill(-group, 0) == 0 && now_ms() < deadline)
            usleep(5000);
        int left = kill(-group, 0) == 0;
        if (left)
            (void)kill(-group, SIGKILL); /* leave nothing behind, then fail */
        proc_close(&p);
        if (sig != SIGTERM)
            fail_msg("round %d: exit %d signal %d, want SIGTERM", round, code, sig);
        if (left)
            fail_msg("round %d: the jail's group %d still has a process 2 s after the end", round,
                     (int)group);
    }
    jail_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_fails),
        cmocka_unit_test(test_escape_without_jail_is_seen),
        cmocka_unit_test(test_command_passes_through),
        cmocka_unit_test(test_missing_command),
        cmocka_unit_test(test_no_network),
        cmocka_unit_test(test_forwarder_for_no_network),
        cmocka_unit_test(test_pty_signal_reaches_the_command),
        cmocka_unit_test(test_early_signal_ends_the_jail),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
