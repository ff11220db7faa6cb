/*
 * Tests of the process module (src/runner/proc*.c) with real PTYs and real
 * processes. Every wait is bounded (WAIT_MS); the test process makes
 * itself a child subreaper, so orphans of the tree tests come back to it
 * and the teardown can check that no child (or grandchild) is left alive
 * and no descriptor leaked.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <grp.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "proc.h"
#include "testutil.h"

#define WAIT_MS 10000  /* the longest any single wait may take */
#define OUT_CAP 65536  /* bytes of output a test collects */
#define ERR_CAP 512    /* bytes of an error message */
#define TEST_UID 54321 /* an unused uid/gid for the --agent-user test */
#define MAX_PIDS 64    /* processes a tree test tracks */

struct out {
    char buf[OUT_CAP];
    size_t len;
    int eof;
};

static const char *const allow_path[] = {"PATH", NULL};

/* ---- helpers ------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    const struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Read what fd has into o; 1 if something came or EOF/EIO was seen. */
static int read_some(int fd, struct out *o)
{
    if (o->eof)
        return 0;
    assert_true(o->len < sizeof o->buf - 1);
    ssize_t n = read(fd, o->buf + o->len, sizeof o->buf - 1 - o->len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0) { /* 0: pipe closed; EIO: the PTY has no writer left */
        o->eof = 1;
        return 1;
    }
    o->len += (size_t)n;
    o->buf[o->len] = 0;
    return 1;
}

/* Read fd until needle shows up in o (or, needle NULL, until EOF). */
static void read_until(int fd, struct out *o, const char *needle)
{
    int64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        o->buf[o->len] = 0;
        if (needle ? strstr(o->buf, needle) != NULL : o->eof)
            return;
        if (o->eof)
            fail_msg("EOF before '%s'; got '%s'", needle, o->buf);
        int64_t left = deadline - now_ms();
        if (left <= 0)
            fail_msg("timed out waiting for '%s'; got '%s'", needle ? needle : "EOF", o->buf);
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, (int)left) > 0)
            (void)read_some(fd, o);
    }
}

/* Pipe mode: read stdout and stderr until both end. */
static void read_both(const struct proc *p, struct out *o, struct out *e)
{
    int64_t deadline = now_ms() + WAIT_MS;
    while (!o->eof || !e->eof) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            fail_msg("timed out reading; out '%s' err '%s'", o->buf, e->buf);
        struct pollfd pfd[2] = {{.fd = o->eof ? -1 : p->fd_out, .events = POLLIN},
                                {.fd = e->eof ? -1 : p->fd_err, .events = POLLIN}};
        if (poll(pfd, 2, (int)left) > 0) {
            if (pfd[0].revents)
                (void)read_some(p->fd_out, o);
            if (pfd[1].revents)
                (void)read_some(p->fd_err, e);
        }
    }
}

static void write_all(int fd, const char *s)
{
    size_t len = strlen(s), off = 0;
    int64_t deadline = now_ms() + WAIT_MS;
    while (off < len) {
        ssize_t n = write(fd, s + off, len - off);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        assert_true(n < 0 && (errno == EAGAIN || errno == EINTR));
        assert_true(now_ms() < deadline);
        sleep_ms(5);
    }
}

/* Wait (bounded) for the process to end; kill it if it does not. */
static void wait_exit(struct proc *p, int *code, int *sig)
{
    int64_t deadline = now_ms() + WAIT_MS;
    int core = 0;
    for (;;) {
        int rc = proc_reap(p, code, sig, &core);
        if (rc == AL_OK)
            break;
        assert_int_equal(rc, AL_E_AGAIN);
        if (now_ms() > deadline) {
            (void)proc_kill_tree(p);
            fail_msg("process %d did not exit in time", (int)p->pid);
        }
        sleep_ms(5);
    }
    assert_int_equal(core, 0);
}

static void spawn_ok(const struct proc_spec *s, struct proc *p)
{
    char err[ERR_CAP] = "";
    int rc = proc_spawn(s, p, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("proc_spawn: %s (%s)", err, al_strerror(rc));
    assert_true(p->pid > 1);
}

static struct proc_spec spec_of(enum proc_mode mode, const char *const *argv)
{
    struct proc_spec s;
    memset(&s, 0, sizeof s);
    s.mode = mode;
    s.argv = argv;
    s.env_allow = allow_path;
    s.cols = 80;
    s.rows = 24;
    return s;
}

/* Run argv to the end; collect stdout (and stderr in pipe mode). */
static void run(const struct proc_spec *s, struct out *o, struct out *e, int *code, int *sig)
{
    struct proc p;
    spawn_ok(s, &p);
    if (s->mode == PROC_PIPES) {
        assert_int_equal(proc_close_stdin(&p), AL_OK);
        read_both(&p, o, e);
    } else {
        read_until(p.fd_out, o, NULL);
    }
    wait_exit(&p, code, sig);
    proc_close(&p);
}

/* /proc/<pid>/stat fields: state, ppid, pgrp, session, tpgid. */
static int stat_of(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp, pid_t *sid, pid_t *tpgid)
{
    char path[64], buf[512];
    (void)snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    (void)fclose(f);
    buf[n] = 0;
    const char *s = strrchr(buf, ')');
    int tty;
    int p1, p2, p3, p4;
    if (!s || sscanf(s + 2, "%c %d %d %d %d %d", state, &p1, &p2, &p3, &tty, &p4) != 6)
        return -1;
    *ppid = p1;
    *pgrp = p2;
    *sid = p3;
    *tpgid = p4;
    return 0;
}

/* Alive: exists and is not a zombie. */
static int alive(pid_t pid)
{
    char st;
    pid_t a, b, c, d;
    return stat_of(pid, &st, &a, &b, &c, &d) == 0 && st != 'Z' && st != 'X';
}

/* Wait until pid is dead (reaping it if it became our child). */
static void wait_gone(pid_t pid)
{
    int64_t deadline = now_ms() + WAIT_MS;
    while (alive(pid)) {
        if (now_ms() > deadline)
            fail_msg("process %d still alive", (int)pid);
        sleep_ms(5);
    }
    (void)waitpid(pid, NULL, WNOHANG);
}

/* Descendants of root (by ppid, recursively) into out; returns count. */
static size_t descendants(pid_t root, pid_t *out, size_t cap)
{
    size_t n = 0;
    pid_t frontier[MAX_PIDS];
    size_t nf = 0;
    frontier[nf++] = root;
    while (nf > 0) {
        pid_t parent = frontier[--nf];
        DIR *d = opendir("/proc");
        assert_non_null(d);
        const struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            char *end;
            long pid = strtol(de->d_name, &end, 10);
            if (*end || pid <= 0)
                continue;
            char st;
            pid_t pp, pg, sid, tp;
            if (stat_of((pid_t)pid, &st, &pp, &pg, &sid, &tp) == 0 && pp == parent && n < cap &&
                nf < MAX_PIDS) {
                out[n++] = (pid_t)pid;
                frontier[nf++] = (pid_t)pid;
            }
        }
        closedir(d);
    }
    return n;
}

/* ---- fixtures --------------------------------------------------------------- */

static int fds_before;

static int group_setup(void **state)
{
    (void)state;
    /* orphans of our children come back to us, so we can reap and count */
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

static int setup(void **state)
{
    (void)state;
    fds_before = count_fds();
    return 0;
}

/* Reap every child, waiting (bounded) for those still running: a keeper
 * exits a moment after its command. 0, or -1 if one is still running. */
static int reap_all(void)
{
    int64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r > 0)
            continue;
        if (r < 0 && errno == ECHILD)
            return 0;
        if (now_ms() > deadline)
            return -1;
        sleep_ms(5);
    }
}

/* No living child left, zombies reaped, no fd leaked. */
static int teardown(void **state)
{
    (void)state;
    if (reap_all() != 0) {
        print_error("a child is still running after the test\n");
        return -1;
    }
    int fds = count_fds();
    if (fds != fds_before) {
        print_error("fd count %d before the test, %d after\n", fds_before, fds);
        return -1;
    }
    return 0;
}

/* ---- PTY mode ------------------------------------------------------------------ */

static void test_pty_size_and_resize(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "stty size; read x; stty size", NULL};
    struct proc_spec s = spec_of(PROC_PTY, argv);
    struct proc p;
    spawn_ok(&s, &p);
    assert_int_equal(p.fd_in, p.fd_out);
    assert_int_equal(p.fd_err, -1);
    struct out o = {.len = 0};
    read_until(p.fd_out, &o, "24 80\r\n");
    assert_int_equal(proc_resize(&p, 100, 30), AL_OK);
    write_all(p.fd_in, "go\n");
    read_until(p.fd_out, &o, "30 100\r\n");
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    assert_int_equal(sig, 0);
    proc_close(&p);
    assert_int_equal(p.fd_out, -1);
}

static void test_pty_tty_and_session(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "tty; read x", NULL};
    struct proc_spec s = spec_of(PROC_PTY, argv);
    struct proc p;
    spawn_ok(&s, &p);
    struct out o = {.len = 0};
    read_until(p.fd_out, &o, "/dev/pts/");
    read_until(p.fd_out, &o, "\n");
    /* its own session and group, the PTY its controlling tty, foreground */
    char st;
    pid_t ppid = 0, pgrp = 0, sid = 0, tpgid = 0;
    assert_int_equal(stat_of(p.pid, &st, &ppid, &pgrp, &sid, &tpgid), 0);
    assert_int_equal(ppid, p.keeper);
    assert_int_equal(pgrp, p.pid);
    assert_int_equal(sid, p.pid);
    assert_int_equal(tpgid, p.pid);
    /* the keeper: our child, a session of its own, no terminal */
    assert_int_equal(stat_of(p.keeper, &st, &ppid, &pgrp, &sid, &tpgid), 0);
    assert_int_equal(ppid, getpid());
    assert_int_equal(sid, p.keeper);
    assert_int_equal(tpgid, -1);
    write_all(p.fd_in, "\n");
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    proc_close(&p);
}

static void test_pty_stdin_eof(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    struct proc_spec s = spec_of(PROC_PTY, argv);
    struct proc p;
    spawn_ok(&s, &p);
    struct out o = {.len = 0};
    write_all(p.fd_in, "hello\n");
    read_until(p.fd_out, &o, "hello\r\nhello\r\n"); /* the echo, then cat */
    /* after a partial line the first ^D only delivers the line */
    write_all(p.fd_in, "abc");
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    read_until(p.fd_out, &o, "abcabc");
    int code = -2, sig = -2;
    assert_int_equal(proc_reap(&p, &code, &sig, NULL), AL_E_AGAIN);
    /* at the start of a line, ^D is end of file: cat exits */
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    assert_int_equal(sig, 0);
    read_until(p.fd_out, &o, NULL);
    proc_close(&p);
}

static void test_pty_kill_tree(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "echo ready; sleep 300", NULL};
    struct proc_spec s = spec_of(PROC_PTY, argv);
    struct proc p;
    spawn_ok(&s, &p);
    struct out o = {.len = 0};
    read_until(p.fd_out, &o, "ready");
    assert_int_equal(proc_kill_tree(&p), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, -1);
    assert_int_equal(sig, SIGKILL);
    read_until(p.fd_out, &o, NULL); /* EIO: every holder of the slave is gone */
    proc_close(&p);
}

/* ---- pipe mode -------------------------------------------------------------------- */

static void test_pipes_streams_and_exit_code(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_string_equal(o.buf, "out\n");
    assert_string_equal(e.buf, "err\n");
    assert_int_equal(code, 3);
    assert_int_equal(sig, 0);
}

static void test_pipes_stdin_eof(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    spawn_ok(&s, &p);
    write_all(p.fd_in, "hello\n");
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    assert_int_equal(p.fd_in, -1);
    assert_int_equal(proc_close_stdin(&p), AL_OK); /* twice is harmless */
    struct out o = {.len = 0}, e = {.len = 0};
    read_both(&p, &o, &e);
    assert_string_equal(o.buf, "hello\n");
    assert_string_equal(e.buf, "");
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    proc_close(&p);
}

static void test_parent_fds_nonblocking_cloexec(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    for (int mode = PROC_PTY; mode <= PROC_PIPES; mode++) {
        struct proc_spec s = spec_of((enum proc_mode)mode, argv);
        struct proc p;
        spawn_ok(&s, &p);
        int fds[3] = {p.fd_in, p.fd_out, p.fd_err};
        for (int i = 0; i < 3; i++) {
            if (fds[i] < 0) {
                assert_int_equal(mode, PROC_PTY);
                continue;
            }
            assert_true(fcntl(fds[i], F_GETFL) & O_NONBLOCK);
            assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
        }
        /* nothing to read yet: the read end does not block */
        char c;
        assert_int_equal(read(p.fd_out, &c, 1), -1);
        assert_int_equal(errno, EAGAIN);
        assert_int_equal(proc_close_stdin(&p), AL_OK);
        int code = -2, sig = -2;
        wait_exit(&p, &code, &sig);
        assert_int_equal(code, 0);
        proc_close(&p);
        proc_close(&p); /* twice is harmless */
    }
}

/* ---- signals ---------------------------------------------------------------------- */

static void test_killed_by_signal(void **state)
{
    (void)state;
    const char *argv[] = {"sleep", "30", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    spawn_ok(&s, &p);
    int code = -2, sig = -2;
    assert_int_equal(proc_reap(&p, &code, &sig, NULL), AL_E_AGAIN);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_OK);
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, -1);
    assert_int_equal(sig, SIGTERM);
    /* the status stays; the group is gone */
    code = sig = -2;
    assert_int_equal(proc_reap(&p, &code, &sig, NULL), AL_OK);
    assert_int_equal(sig, SIGTERM);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_E_NOENT);
    proc_close(&p);
}

static void test_group_signal_trap(void **state)
{
    (void)state;
    /* SIGINT ignored here must not be inherited: sh could not trap it */
    struct sigaction ign, old;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGINT, &ign, &old), 0);
    const char *argv[] = {"sh", "-c",
                          "trap 'echo got; exit 5' INT; echo ready; "
                          "while :; do sleep 0.05; done",
                          NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    spawn_ok(&s, &p);
    assert_int_equal(sigaction(SIGINT, &old, NULL), 0);
    struct out o = {.len = 0}, e = {.len = 0};
    read_until(p.fd_out, &o, "ready\n");
    assert_int_equal(proc_signal(&p, SIGINT, 0), AL_OK);
    read_both(&p, &o, &e);
    assert_string_equal(o.buf, "ready\ngot\n");
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 5);
    assert_int_equal(sig, 0);
    proc_close(&p);
}

/* "SigBlk:\t0000000000000000" and the like from /proc/<pid>/status. */
static void status_field(pid_t pid, const char *name, char *val, size_t cap)
{
    char path[64], line[256];
    (void)snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    val[0] = 0;
    size_t nlen = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, name, nlen) == 0 && line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (*v == '\t' || *v == ' ')
                v++;
            (void)snprintf(val, cap, "%s", v);
            val[strcspn(val, "\n")] = 0;
        }
    }
    (void)fclose(f);
}

static void test_signal_state_reset(void **state)
{
    (void)state;
    struct sigaction ign, old_int, old_quit;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    assert_int_equal(sigaction(SIGINT, &ign, &old_int), 0);
    assert_int_equal(sigaction(SIGQUIT, &ign, &old_quit), 0);
    sigset_t blk, old_mask;
    sigemptyset(&blk);
    sigaddset(&blk, SIGUSR1);
    sigaddset(&blk, SIGTERM);
    assert_int_equal(sigprocmask(SIG_BLOCK, &blk, &old_mask), 0);

    const char *argv[] = {"sleep", "30", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    spawn_ok(&s, &p);
    assert_int_equal(sigprocmask(SIG_SETMASK, &old_mask, NULL), 0);
    assert_int_equal(sigaction(SIGINT, &old_int, NULL), 0);
    assert_int_equal(sigaction(SIGQUIT, &old_quit, NULL), 0);

    /* proc_spawn returns after the exec: this is sleep's own state. (Under
     * GNU make the test itself starts with signals 32 and 33 ignored.) */
    char v[64];
    status_field(p.pid, "SigBlk", v, sizeof v);
    assert_string_equal(v, "0000000000000000");
    status_field(p.pid, "SigIgn", v, sizeof v);
    assert_string_equal(v, "0000000000000000");
    assert_int_equal(proc_kill_tree(&p), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGKILL);
    proc_close(&p);
}

/* sh prints the pid of a grandchild that left the session, then sleeps. */
static const char *const escape_argv[] = {
    "sh", "-c", "setsid sh -c 'echo $$; exec sleep 300' & sleep 300", NULL};

/* sh prints the pid of a grandchild that left the session, then exits at
 * the end of its input, leaving the grandchild behind. */
static const char *const leave_argv[] = {
    "sh", "-c", "setsid sh -c 'echo $$; exec sleep 300' & read x; exit 0", NULL};

/* Spawn argv; return the escaped grandchild's pid once it sleeps. */
static pid_t spawn_escaper_argv(struct proc *p, struct out *o, const char *const *argv)
{
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    spawn_ok(&s, p);
    read_until(p->fd_out, o, "\n");
    char *end;
    long g = strtol(o->buf, &end, 10);
    assert_true(g > 1 && *end == '\n');
    int64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        char path[64], comm[32] = "";
        (void)snprintf(path, sizeof path, "/proc/%ld/comm", g);
        FILE *f = fopen(path, "re");
        if (f) {
            if (!fgets(comm, sizeof comm, f))
                comm[0] = 0;
            (void)fclose(f);
        }
        if (strcmp(comm, "sleep\n") == 0)
            break;
        assert_true(now_ms() < deadline);
        sleep_ms(5);
    }
    /* it really escaped: its own session and group */
    char st;
    pid_t ppid = 0, pgrp = 0, sid = 0, tpgid = 0;
    assert_int_equal(stat_of((pid_t)g, &st, &ppid, &pgrp, &sid, &tpgid), 0);
    assert_int_equal(sid, (pid_t)g);
    assert_int_equal(pgrp, (pid_t)g);
    assert_int_not_equal(sid, p->pid);
    return (pid_t)g;
}

static pid_t spawn_escaper(struct proc *p, struct out *o)
{
    return spawn_escaper_argv(p, o, escape_argv);
}

/* Spawn leave_argv and end sh: the escaped grandchild is left behind,
 * its parent gone, in a session of its own. */
static pid_t spawn_left_behind(struct proc *p, struct out *o)
{
    pid_t g = spawn_escaper_argv(p, o, leave_argv);
    assert_int_equal(proc_close_stdin(p), AL_OK);
    int code = -2, sig = -2;
    wait_exit(p, &code, &sig);
    assert_int_equal(code, 0);
    sleep_ms(50);
    assert_true(alive(g));
    return g;
}

/* The tree outlives the channel's process: a scope-1 signal and a tree
 * kill still reach what it left behind, and report when nothing is left. */
static void test_tree_after_root_exit(void **state)
{
    (void)state;
    struct proc p;
    struct out o = {.len = 0};
    pid_t g = spawn_left_behind(&p, &o);
    assert_int_equal(proc_signal(&p, SIGTERM, 1), AL_OK);
    wait_gone(g);
    int64_t deadline = now_ms() + WAIT_MS; /* the keeper goes once the tree is empty */
    int rc;
    while ((rc = proc_signal(&p, SIGTERM, 1)) == AL_OK && now_ms() < deadline)
        sleep_ms(5);
    assert_int_equal(rc, AL_E_NOENT);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_E_NOENT);
    assert_int_equal(proc_kill_tree(&p), AL_E_NOENT);
    proc_close(&p);

    struct out o2 = {.len = 0};
    g = spawn_left_behind(&p, &o2);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_E_NOENT); /* its group is gone */
    assert_true(alive(g));
    assert_int_equal(proc_kill_tree(&p), AL_OK);
    wait_gone(g);
    proc_close(&p);
}

/* A double fork while the root lives: the grandchild's parent is gone
 * before any walk, yet the tree still holds it. */
static void test_tree_reaches_daemon(void **state)
{
    (void)state;
    static const char *const argv[] = {
        "sh", "-c", "(setsid sh -c 'echo $$; exec sleep 300' &); exec sleep 300", NULL};
    struct proc p;
    struct out o = {.len = 0};
    pid_t g = spawn_escaper_argv(&p, &o, argv);
    char st;
    pid_t ppid = 0, pgrp = 0, sid = 0, tpgid = 0;
    assert_int_equal(stat_of(g, &st, &ppid, &pgrp, &sid, &tpgid), 0);
    assert_int_not_equal(ppid, p.pid); /* its parent, the subshell, is gone */
    assert_int_equal(proc_signal(&p, SIGTERM, 1), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGTERM);
    wait_gone(g);
    proc_close(&p);
}

static void test_kill_tree_reaches_escaped(void **state)
{
    (void)state;
    struct proc p;
    struct out o = {.len = 0};
    pid_t g = spawn_escaper(&p, &o);
    pid_t all[MAX_PIDS];
    size_t n = descendants(p.pid, all, MAX_PIDS);
    int found = 0;
    for (size_t i = 0; i < n; i++)
        found |= all[i] == g;
    assert_true(found);
    assert_true(n >= 2); /* the group's sleep (or sh, if it exec'd) and g */

    assert_int_equal(proc_kill_tree(&p), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGKILL);
    for (size_t i = 0; i < n; i++)
        wait_gone(all[i]);
    assert_false(alive(g));
    proc_close(&p);
}

static void test_signal_tree_vs_group(void **state)
{
    (void)state;
    /* to the group only: the escaped grandchild survives */
    struct proc p;
    struct out o = {.len = 0};
    pid_t g = spawn_escaper(&p, &o);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGTERM);
    sleep_ms(50);
    assert_true(alive(g));
    assert_int_equal(kill(g, SIGKILL), 0);
    wait_gone(g);
    proc_close(&p);

    /* to the whole tree: it gets the signal too */
    struct out o2 = {.len = 0};
    g = spawn_escaper(&p, &o2);
    assert_int_equal(proc_signal(&p, SIGTERM, 1), AL_OK);
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGTERM);
    wait_gone(g);
    proc_close(&p);
}

/* ---- what the child inherits -------------------------------------------------------- */

/* Does the NUL-terminated text hold this exact line? */
static int has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *s = text; (s = strstr(s, line)) != NULL; s++)
        if ((s == text || s[-1] == '\n') && (s[n] == '\n' || s[n] == '\r'))
            return 1;
    return 0;
}

static void test_env_scrubbed(void **state)
{
    (void)state;
    assert_int_equal(setenv("AIRLOCK_SECRET_TEST", "x", 1), 0);
    assert_int_equal(setenv("LC_AIRLOCK_TEST", "lc", 1), 0);
    assert_int_equal(setenv("FOO", "parent", 1), 0);
    const char *argv[] = {"env", NULL};
    const char *allow[] = {"PATH", "FOO", "LC_*", NULL};
    const char *env[] = {"FOO=bar", "BAZ=1", "BAZ=2", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    s.env_allow = allow;
    s.env = env;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    assert_null(strstr(o.buf, "AIRLOCK_SECRET_TEST"));
    assert_null(strstr(o.buf, "=parent"));
    char path[AL_MAX_STR + 8];
    (void)snprintf(path, sizeof path, "PATH=%s", getenv("PATH"));
    assert_true(has_line(o.buf, path));
    assert_true(has_line(o.buf, "FOO=bar"));
    assert_true(has_line(o.buf, "BAZ=2"));
    assert_false(has_line(o.buf, "BAZ=1"));
    assert_true(has_line(o.buf, "LC_AIRLOCK_TEST=lc"));
    /* every line is one of those names; no TERM in pipe mode by default */
    for (char *line = o.buf; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = 0;
        assert_true(strncmp(line, "PATH=", 5) == 0 || strncmp(line, "FOO=", 4) == 0 ||
                    strncmp(line, "BAZ=", 4) == 0 || strncmp(line, "LC_", 3) == 0);
        line = nl + 1;
    }
    assert_int_equal(unsetenv("AIRLOCK_SECRET_TEST"), 0);
    assert_int_equal(unsetenv("LC_AIRLOCK_TEST"), 0);
    assert_int_equal(unsetenv("FOO"), 0);
}

static void test_env_term(void **state)
{
    (void)state;
    const char *argv[] = {"env", NULL};
    const char *penv[] = {"PATH=/usr/bin:/bin", "HOME=/h",      "SECRET=s",
                          "TERM=linux",         "HOME=/second", NULL};
    const char *allow[] = {"PATH", "HOME", "TERM", NULL};
    struct proc_spec s = spec_of(PROC_PTY, argv);
    s.parent_env = penv;
    s.env_allow = allow;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    /* PTY mode: the default TERM replaces the runner's own */
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    assert_true(has_line(o.buf, "TERM=" PROC_DEFAULT_TERM));
    assert_true(has_line(o.buf, "PATH=/usr/bin:/bin"));
    assert_true(has_line(o.buf, "HOME=/h")); /* the first, as getenv */
    assert_null(strstr(o.buf, "HOME=/second"));
    assert_null(strstr(o.buf, "SECRET"));
    assert_null(strstr(o.buf, "TERM=linux"));

    /* spec->term wins over a TERM= in env */
    const char *env[] = {"TERM=dumb", NULL};
    s.env = env;
    s.term = "vt100";
    memset(&o, 0, sizeof o);
    run(&s, &o, &e, &code, &sig);
    assert_true(has_line(o.buf, "TERM=vt100"));
    assert_null(strstr(o.buf, "TERM=dumb"));
    assert_null(strstr(o.buf, "TERM=" PROC_DEFAULT_TERM));

    /* a TERM= in env wins over the default */
    s.term = NULL;
    memset(&o, 0, sizeof o);
    run(&s, &o, &e, &code, &sig);
    assert_true(has_line(o.buf, "TERM=dumb"));
    assert_null(strstr(o.buf, "TERM=" PROC_DEFAULT_TERM));

    /* pipe mode: an allowlisted TERM passes, none is invented */
    s.mode = PROC_PIPES;
    s.env = NULL;
    memset(&o, 0, sizeof o);
    memset(&e, 0, sizeof e);
    run(&s, &o, &e, &code, &sig);
    assert_true(has_line(o.buf, "TERM=linux"));
    const char *allow2[] = {"PATH", NULL};
    s.env_allow = allow2;
    memset(&o, 0, sizeof o);
    memset(&e, 0, sizeof e);
    run(&s, &o, &e, &code, &sig);
    assert_null(strstr(o.buf, "TERM="));
    assert_string_equal(o.buf, "PATH=/usr/bin:/bin\n");

    /* argv[0] is looked up in the child's PATH, not ours */
    const char *penv2[] = {"PATH=/nonexistent-airlock", NULL};
    s.parent_env = penv2;
    struct proc p;
    char err[ERR_CAP];
    assert_int_equal(proc_spawn(&s, &p, err, sizeof err), AL_E_NOENT);
    assert_non_null(strstr(err, "cannot run 'env'"));
}

/* The fds the child's `ls /proc/self/fd` lists: 0 1 2 and ls's own 3. */
static void check_fds_listed(const char *text)
{
    int seen[4] = {0, 0, 0, 0};
    for (const char *c = text; *c;) {
        char *end;
        long fd = strtol(c, &end, 10);
        assert_true(end != c);
        if (fd < 0 || fd > 3)
            fail_msg("child has fd %ld open: '%s'", fd, text);
        seen[fd]++;
        c = end + strspn(end, "\r\n ");
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(seen[i], 1);
}

static void test_no_fd_leak(void **state)
{
    (void)state;
    int leak = open("/dev/null", O_RDONLY); /* deliberately not O_CLOEXEC */
    int lp[2];
    assert_true(leak >= 0);
    assert_int_equal(pipe(lp), 0);
    const char *argv[] = {"ls", "-1", "/proc/self/fd", NULL};
    for (int mode = PROC_PTY; mode <= PROC_PIPES; mode++) {
        struct proc_spec s = spec_of((enum proc_mode)mode, argv);
        struct out o = {.len = 0}, e = {.len = 0};
        int code = -2, sig = -2;
        run(&s, &o, &e, &code, &sig);
        assert_int_equal(code, 0);
        check_fds_listed(o.buf);
    }
    close(leak);
    close(lp[0]);
    close(lp[1]);
}

/* In a forked helper (seccomp cannot be undone): make the listed system
 * calls fail with ENOSYS, leak fds 10 and 11 (no O_CLOEXEC), spawn a
 * child and check from inside it that neither survived. Exit status 0: ok. */
static void fallback_helper(const int *nrs, size_t nnrs)
{
    if (dup2(STDIN_FILENO, 10) != 10 || dup2(STDIN_FILENO, 11) != 11)
        _exit(2);
    struct sock_filter f[2 + 2 * 4 + 1];
    size_t k = 0;
    f[k++] =
        (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (size_t i = 0; i < nnrs && i < 4; i++) {
        f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nrs[i], 0, 1);
        f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    }
    f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    struct sock_fprog prog = {.len = (unsigned short)k, .filter = f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        _exit(3);
    /* stat, not a directory listing: getdents64 may be the one refused */
    const char *argv[] = {"sh", "-c",
                          "for fd in 10 11; do [ -e /proc/$$/fd/$fd ] && echo leak $fd; done; "
                          "echo done",
                          NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    char err[ERR_CAP];
    if (proc_spawn(&s, &p, err, sizeof err) != AL_OK)
        _exit(4);
    if (proc_close_stdin(&p) != AL_OK)
        _exit(5);
    struct out o = {.len = 0}, e = {.len = 0};
    read_both(&p, &o, &e);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    proc_close(&p);
    _exit(strcmp(o.buf, "done\n") == 0 && code == 0 ? 0 : 6);
}

static void run_fallback_helper(const int *nrs, size_t nnrs)
{
    pid_t helper = fork();
    assert_true(helper >= 0);
    if (helper == 0)
        fallback_helper(nrs, nnrs);
    int64_t deadline = now_ms() + WAIT_MS;
    int st = 0;
    pid_t r;
    while ((r = waitpid(helper, &st, WNOHANG)) == 0 && now_ms() < deadline)
        sleep_ms(5);
    if (r == 0) {
        (void)kill(helper, SIGKILL);
        (void)waitpid(helper, &st, 0);
        fail_msg("the helper did not finish in time");
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* The child's fd closing works without close_range (Linux < 5.9: it lists
 * /proc/self/fd) and without either (it closes fds one by one). */
static void test_fd_close_fallbacks(void **state)
{
    (void)state;
#ifdef SYS_close_range
    const int no_close_range[] = {SYS_close_range};
    run_fallback_helper(no_close_range, 1);
    const int no_listing[] = {SYS_close_range, SYS_getdents64};
    run_fallback_helper(no_listing, 2);
#else
    skip();
#endif
}

/* With our own fds 0..2 closed, the pipes land on 0..2 in the parent:
 * the child must still get them in the right places. */
static void test_runner_without_stdio(void **state)
{
    (void)state;
    int saved[3];
    for (int i = 0; i < 3; i++) {
        saved[i] = fcntl(i, F_DUPFD_CLOEXEC, 10);
        assert_true(saved[i] >= 0);
    }
    for (int i = 0; i < 3; i++)
        close(i);
    const char *argv[] = {"sh", "-c", "read x; echo \"out $x\"; echo err >&2", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    char err[ERR_CAP];
    int rc = proc_spawn(&s, &p, err, sizeof err);
    for (int i = 0; i < 3; i++) {
        int fd = dup2(saved[i], i);
        close(saved[i]);
        assert_int_equal(fd, i);
    }
    assert_int_equal(rc, AL_OK);
    /* nor do the parent's ends sit on 0..2, where a stray write to
     * "stderr" would go into the child's stdin */
    assert_true(p.fd_in > 2 && p.fd_out > 2 && p.fd_err > 2);
    write_all(p.fd_in, "in\n");
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    struct out o = {.len = 0}, e = {.len = 0};
    read_both(&p, &o, &e);
    assert_string_equal(o.buf, "out in\n");
    assert_string_equal(e.buf, "err\n");
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    proc_close(&p);
}

/* ---- failures ---------------------------------------------------------------------------- */

static void expect_spawn_error(const struct proc_spec *s, int want, const char *msg1,
                               const char *msg2)
{
    struct proc p;
    char err[ERR_CAP] = "";
    assert_int_equal(reap_all(), 0); /* the keepers of earlier spawns */
    int rc = proc_spawn(s, &p, err, sizeof err);
    if (rc != want)
        fail_msg("want %s, got %s (%s)", al_strerror(want), al_strerror(rc), err);
    if (msg1 && !strstr(err, msg1))
        fail_msg("message '%s' lacks '%s'", err, msg1);
    if (msg2 && !strstr(err, msg2))
        fail_msg("message '%s' lacks '%s'", err, msg2);
    assert_int_equal(p.pid, -1);
    assert_int_equal(p.fd_in, -1);
    assert_int_equal(p.fd_out, -1);
    assert_int_equal(p.fd_err, -1);
    /* no zombie, no child at all */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

static void test_exec_failure(void **state)
{
    (void)state;
    for (int mode = PROC_PTY; mode <= PROC_PIPES; mode++) {
        const char *argv[] = {"/nonexistent/prog", "arg", NULL};
        struct proc_spec s = spec_of((enum proc_mode)mode, argv);
        expect_spawn_error(&s, AL_E_NOENT, "cannot run '/nonexistent/prog'",
                           "No such file or directory");
        const char *argv2[] = {"airlock-no-such-program", NULL};
        s.argv = argv2;
        expect_spawn_error(&s, AL_E_NOENT, "cannot run 'airlock-no-such-program'",
                           "No such file or directory");
        const char *argv3[] = {"/etc/passwd", NULL}; /* not executable */
        s.argv = argv3;
        expect_spawn_error(&s, AL_E_PERM, "cannot run '/etc/passwd'", "Permission denied");
        const char *argv4[] = {"/", NULL};
        s.argv = argv4;
        expect_spawn_error(&s, AL_E_PERM, "cannot run '/'", "Permission denied");
        const char *argv5[] = {"bad\033name", NULL}; /* shown without the ESC */
        s.argv = argv5;
        expect_spawn_error(&s, AL_E_NOENT, "cannot run 'bad?name'", NULL);
    }
}

static void test_script_without_shebang(void **state)
{
    (void)state;
    char dir[] = "/tmp/airlock-proc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    (void)snprintf(path, sizeof path, "%s/script", dir);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    (void)fputs("echo script ran with $1\n", f);
    (void)fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
    /* found through the child's PATH, run by sh as execvp does */
    char pathvar[160];
    (void)snprintf(pathvar, sizeof pathvar, "PATH=/nonexistent:%s:/usr/bin:/bin", dir);
    const char *penv[] = {pathvar, NULL};
    const char *argv[] = {"script", "one", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    s.parent_env = penv;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_string_equal(o.buf, "script ran with one\n");
    assert_int_equal(code, 0);
    /* an empty PATH entry is the working directory */
    const char *penv2[] = {"PATH=/nonexistent::/usr/bin", NULL};
    s.parent_env = penv2;
    s.cwd = dir;
    memset(&o, 0, sizeof o);
    memset(&e, 0, sizeof e);
    run(&s, &o, &e, &code, &sig);
    assert_string_equal(o.buf, "script ran with one\n");
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

static void test_cwd(void **state)
{
    (void)state;
    const char *argv[] = {"pwd", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    s.cwd = "/";
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_string_equal(o.buf, "/\n");
    s.cwd = "/nonexistent-airlock-dir";
    expect_spawn_error(&s, AL_E_NOENT, "cannot change directory to '/nonexistent-airlock-dir'",
                       "No such file or directory");
    s.cwd = "/etc/passwd";
    expect_spawn_error(&s, AL_E_NOENT, "cannot change directory to '/etc/passwd'",
                       "Not a directory");
    s.mode = PROC_PTY;
    s.cwd = "/nonexistent-airlock-dir";
    expect_spawn_error(&s, AL_E_NOENT, "cannot change directory", NULL);
}

/* max_data bounds the command (and what it starts), never the caller:
 * the child sets it just before exec. */
static void test_max_data(void **state)
{
    (void)state;
    const char *argv[] = {"sh", "-c", "ulimit -d", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    s.max_data = 64ull << 20;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_string_equal(o.buf, "65536\n"); /* KiB */
    struct rlimit mine;
    assert_int_equal(getrlimit(RLIMIT_DATA, &mine), 0);
    assert_true(mine.rlim_cur == RLIM_INFINITY || mine.rlim_cur > s.max_data);
    /* an allocation beyond it fails in the command */
    const char *hog[] = {"perl", "-e", "$x = 'x' x (256 * 1024 * 1024); print 'got it'", NULL};
    s.argv = hog;
    o.len = e.len = 0;
    o.buf[0] = e.buf[0] = 0;
    run(&s, &o, &e, &code, &sig);
    assert_true(code != 0 && strstr(o.buf, "got it") == NULL);
}

static void test_bad_input(void **state)
{
    (void)state;
    const char *ok_argv[] = {"true", NULL};
    struct proc_spec s = spec_of(PROC_PTY, ok_argv);
    struct proc p;
    char err[ERR_CAP];

    memset(&p, 0x55, sizeof p);
    assert_int_equal(proc_spawn(NULL, &p, err, sizeof err), AL_E_INVAL);
    assert_int_equal(p.pid, -1);
    assert_int_equal(p.fd_in, -1);
    assert_non_null(strstr(err, "no process spec"));
    assert_int_equal(proc_spawn(&s, NULL, err, sizeof err), AL_E_INVAL);
    assert_int_equal(proc_spawn(&s, NULL, NULL, 0), AL_E_INVAL);

    s.argv = NULL;
    expect_spawn_error(&s, AL_E_INVAL, "argv is empty", NULL);
    const char *empty[] = {NULL};
    s.argv = empty;
    expect_spawn_error(&s, AL_E_INVAL, "argv is empty", NULL);
    const char *empty0[] = {"", NULL};
    s.argv = empty0;
    expect_spawn_error(&s, AL_E_INVAL, "argv[0] is empty", NULL);

    /* AL_MAX_ARGV entries work, one more does not */
    const char *many[AL_MAX_ARGV + 2];
    many[0] = "true";
    for (int i = 1; i < AL_MAX_ARGV + 1; i++)
        many[i] = "x";
    many[AL_MAX_ARGV + 1] = NULL;
    s.argv = many;
    expect_spawn_error(&s, AL_E_INVAL, "argv has more than", NULL);
    many[AL_MAX_ARGV] = NULL;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);

    static char longstr[AL_MAX_STR + 2];
    memset(longstr, 'a', AL_MAX_STR + 1);
    longstr[AL_MAX_STR + 1] = 0;
    const char *longarg[] = {"true", longstr, NULL};
    s.argv = longarg;
    expect_spawn_error(&s, AL_E_INVAL, "argv[1] is longer than", NULL);
    s.argv = ok_argv;

    const char *noeq[] = {"FOO=1", "BAR", NULL};
    s.env = noeq;
    expect_spawn_error(&s, AL_E_INVAL, "env[1] 'BAR' is not of the form NAME=value", NULL);
    const char *noname[] = {"=x", NULL};
    s.env = noname;
    expect_spawn_error(&s, AL_E_INVAL, "not of the form NAME=value", NULL);
    longstr[0] = 'A';
    longstr[1] = '=';
    const char *longenv[] = {longstr, NULL};
    s.env = longenv;
    expect_spawn_error(&s, AL_E_INVAL, "env[0] is longer than", NULL);
    const char *manyenv[AL_MAX_ENV + 2];
    for (int i = 0; i < AL_MAX_ENV + 1; i++)
        manyenv[i] = "X=1";
    manyenv[AL_MAX_ENV + 1] = NULL;
    s.env = manyenv;
    expect_spawn_error(&s, AL_E_INVAL, "env has more than", NULL);
    manyenv[AL_MAX_ENV] = NULL; /* exactly the limit works */
    memset(&o, 0, sizeof o);
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    s.env = NULL;

    const char *bad_allow[][2] = {{"", NULL},   {"A=B", NULL}, {"A*B", NULL},
                                  {"*x", NULL}, {"*", NULL},   {"A**", NULL}};
    for (size_t i = 0; i < sizeof bad_allow / sizeof bad_allow[0]; i++) {
        s.env_allow = bad_allow[i];
        expect_spawn_error(&s, AL_E_INVAL, "env_allow[0]", NULL);
    }
    s.env_allow = allow_path;

    const uint16_t sizes[][2] = {
        {0, 24}, {80, 0}, {AL_MAX_COLS + 1, 24}, {80, AL_MAX_ROWS + 1}, {65535, 65535}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        s.cols = sizes[i][0];
        s.rows = sizes[i][1];
        expect_spawn_error(&s, AL_E_INVAL, "out of bounds", NULL);
    }
    s.cols = AL_MAX_COLS;
    s.rows = AL_MAX_ROWS;
    memset(&o, 0, sizeof o);
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    s.cols = 80;
    s.rows = 24;

    char longterm[AL_MAX_TERM + 2];
    memset(longterm, 'x', sizeof longterm - 1);
    longterm[sizeof longterm - 1] = 0;
    s.term = longterm;
    expect_spawn_error(&s, AL_E_INVAL, "TERM is longer than", NULL);
    s.term = "xterm\nevil";
    expect_spawn_error(&s, AL_E_INVAL, "TERM holds", NULL);
    s.term = NULL;

    s.cwd = longstr;
    expect_spawn_error(&s, AL_E_INVAL, "cwd is longer than", NULL);
    s.cwd = NULL;

    s.mode = (enum proc_mode)7;
    expect_spawn_error(&s, AL_E_INVAL, "unknown process mode", NULL);
    s.mode = PROC_PTY;

    /* a tiny or absent error buffer is fine */
    char tiny[4];
    s.argv = empty;
    assert_int_equal(proc_spawn(&s, &p, tiny, sizeof tiny), AL_E_INVAL);
    assert_int_equal(strlen(tiny), 3);
    assert_int_equal(proc_spawn(&s, &p, NULL, 0), AL_E_INVAL);

    /* calls on a proc that failed to spawn are refused, never kill(0) */
    assert_int_equal(p.pid, -1);
    assert_int_equal(proc_signal(&p, SIGTERM, 0), AL_E_INVAL);
    assert_int_equal(proc_signal(&p, SIGTERM, 1), AL_E_INVAL);
    assert_int_equal(proc_kill_tree(&p), AL_E_INVAL);
    assert_int_equal(proc_reap(&p, NULL, NULL, NULL), AL_E_INVAL);
    assert_int_equal(proc_resize(&p, 80, 24), AL_E_INVAL);
    assert_int_equal(proc_close_stdin(&p), AL_E_INVAL);
    assert_int_equal(proc_signal(NULL, SIGTERM, 0), AL_E_INVAL);
    assert_int_equal(proc_kill_tree(NULL), AL_E_INVAL);
    proc_close(&p);
    proc_close(NULL);
}

static void test_limits(void **state)
{
    (void)state;
    const char *argv[] = {"env", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    /* PROC_MAX_INHERIT allowlisted variables pass, one more is refused */
    static char vars[PROC_MAX_INHERIT + 1][32];
    const char *penv[PROC_MAX_INHERIT + 3];
    for (int i = 0; i < PROC_MAX_INHERIT + 1; i++) {
        (void)snprintf(vars[i], sizeof vars[i], "V%d=%d", i, i);
        penv[i] = vars[i];
    }
    penv[PROC_MAX_INHERIT + 1] = "PATH=/usr/bin:/bin";
    penv[PROC_MAX_INHERIT + 2] = NULL;
    const char *allow[] = {"V*", "PATH", NULL};
    s.parent_env = penv;
    s.env_allow = allow;
    expect_spawn_error(&s, AL_E_LIMIT, "more than", "env_allow");
    /* PATH would make it one more: with it not allowed, exactly the limit */
    const char *allow_v[] = {"V*", NULL};
    const char *spec_path[] = {"PATH=/usr/bin:/bin", NULL};
    penv[PROC_MAX_INHERIT] = NULL;
    s.env_allow = allow_v;
    s.env = spec_path;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    assert_true(has_line(o.buf, "V0=0"));
    assert_true(has_line(o.buf, "V255=255"));

    /* PATH with more than PROC_MAX_PATH_DIRS entries is refused */
    static char longpath[16 + 3 * (PROC_MAX_PATH_DIRS + 1)];
    size_t n = (size_t)snprintf(longpath, sizeof longpath, "PATH=/bin");
    for (int i = 0; i < PROC_MAX_PATH_DIRS; i++)
        n += (size_t)snprintf(longpath + n, sizeof longpath - n, ":/x");
    const char *env[] = {longpath, NULL};
    s.env = env;
    s.env_allow = NULL;
    expect_spawn_error(&s, AL_E_LIMIT, "PATH has more than", NULL);
}

static void test_bad_calls_on_live_process(void **state)
{
    (void)state;
    const char *argv[] = {"cat", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    struct proc p;
    spawn_ok(&s, &p);
    assert_int_equal(proc_resize(&p, 80, 24), AL_E_STATE); /* no PTY */
    assert_int_equal(proc_signal(&p, 0, 0), AL_E_INVAL);
    assert_int_equal(proc_signal(&p, -1, 1), AL_E_INVAL);
    assert_int_equal(proc_signal(&p, NSIG, 0), AL_E_INVAL);
    assert_int_equal(proc_close_stdin(&p), AL_OK);
    int code = -2, sig = -2;
    wait_exit(&p, &code, &sig);
    assert_int_equal(code, 0);
    proc_close(&p);

    s.mode = PROC_PTY;
    spawn_ok(&s, &p);
    assert_int_equal(proc_resize(&p, 0, 24), AL_E_INVAL);
    assert_int_equal(proc_resize(&p, 80, AL_MAX_ROWS + 1), AL_E_INVAL);
    assert_int_equal(proc_resize(&p, AL_MAX_COLS, AL_MAX_ROWS), AL_OK);
    assert_int_equal(proc_kill_tree(&p), AL_OK);
    wait_exit(&p, &code, &sig);
    assert_int_equal(sig, SIGKILL);
    proc_close(&p);
}

static void test_many_spawns(void **state)
{
    (void)state;
    const char *argv[] = {"true", NULL};
    for (int i = 0; i < 40; i++) {
        struct proc_spec s = spec_of(i % 2 ? PROC_PIPES : PROC_PTY, argv);
        struct out o = {.len = 0}, e = {.len = 0};
        int code = -2, sig = -2;
        run(&s, &o, &e, &code, &sig);
        assert_int_equal(code, 0);
    }
}

/* --agent-user: needs root to switch; any unused uid works for the test,
 * so no user account has to be created. */
static void test_agent_user(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip();
        return;
    }
    const char *argv[] = {"sh", "-c", "id -u; id -g; id -G; cat /proc/self/status", NULL};
    struct proc_spec s = spec_of(PROC_PIPES, argv);
    s.set_user = 1;
    s.uid = TEST_UID;
    s.gid = TEST_UID;
    struct out o = {.len = 0}, e = {.len = 0};
    int code = -2, sig = -2;
    run(&s, &o, &e, &code, &sig);
    assert_int_equal(code, 0);
    char want[64];
    (void)snprintf(want, sizeof want, "%d\n%d\n%d\n", TEST_UID, TEST_UID, TEST_UID);
    assert_memory_equal(o.buf, want, strlen(want));
    /* real, effective, saved and filesystem ids all switched */
    (void)snprintf(want, sizeof want, "Uid:\t%d\t%d\t%d\t%d\n", TEST_UID, TEST_UID, TEST_UID,
                   TEST_UID);
    assert_non_null(strstr(o.buf, want));
    (void)snprintf(want, sizeof want, "Gid:\t%d\t%d\t%d\t%d\n", TEST_UID, TEST_UID, TEST_UID,
                   TEST_UID);
    assert_non_null(strstr(o.buf, want));
    assert_non_null(strstr(o.buf, "CapEff:\t0000000000000000"));

    /* chdir happens as the user: a root-only directory is refused */
    char dir[] = "/tmp/airlock-proc-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0700), 0);
    s.cwd = dir;
    expect_spawn_error(&s, AL_E_PERM, "cannot change directory", "Permission denied");
    assert_int_equal(rmdir(dir), 0);

    /* without the privilege to switch, the spawn fails cleanly (checked in
     * a forked helper that first drops its own root) */
    pid_t helper = fork();
    assert_true(helper >= 0);
    if (helper == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(TEST_UID, TEST_UID, TEST_UID) < 0 ||
            setresuid(TEST_UID, TEST_UID, TEST_UID) < 0)
            _exit(2);
        const char *argv2[] = {"true", NULL};
        struct proc_spec s2 = spec_of(PROC_PIPES, argv2);
        s2.set_user = 1;
        s2.uid = 0;
        s2.gid = 0;
        struct proc p;
        char err[ERR_CAP] = "";
        int rc = proc_spawn(&s2, &p, err, sizeof err);
        int ok = rc == AL_E_PERM && strstr(err, "cannot switch to uid 0 gid 0") &&
                 waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
        _exit(ok ? 0 : 1);
    }
    int64_t deadline = now_ms() + WAIT_MS;
    int st = 0;
    pid_t r;
    while ((r = waitpid(helper, &st, WNOHANG)) == 0 && now_ms() < deadline)
        sleep_ms(5);
    if (r == 0) {
        (void)kill(helper, SIGKILL);
        (void)waitpid(helper, &st, 0);
        fail_msg("the helper did not finish in time");
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_pty_size_and_resize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_tty_and_session, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_stdin_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pty_kill_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipes_streams_and_exit_code, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipes_stdin_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parent_fds_nonblocking_cloexec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_killed_by_signal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_signal_trap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_state_reset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_tree_reaches_escaped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_signal_tree_vs_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree_after_root_exit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree_reaches_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_scrubbed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_term, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_fd_leak, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fd_close_fallbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_runner_without_stdio, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exec_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_script_without_shebang, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cwd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_max_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_calls_on_live_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_spawns, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_user, setup, teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
