/*
 * proc: start an agent's process and act on it (see proc.h for the API and
 * the process model). This file: proc_spawn, the parent's side of a start
 * (the descriptors, the PTY, the fork of the keeper, waiting for exec or
 * its failure, the error message), and the calls on the parent's fds:
 * proc_resize, proc_close_stdin, proc_close.
 *
 * Not here: the spec's checks and the plan built before fork
 * (proc_plan.c), what runs after fork (proc_keeper.c), the command's exit
 * (proc_exit.c), the /proc walk (proc_tree.c), signals (proc_signal.c).
 * The data model of a start (struct plan, struct child_report) is in
 * proc_internal.h.
 */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "proc_internal.h"

#define PROC_EOF_CHAR 4 /* ^D, when VEOF is disabled */

/* ---- the parent ------------------------------------------------------------ */

void proc_close_fd(int *fd)
{
    if (*fd >= 0)
        (void)close(*fd); /* nothing useful to do on error: the fd is gone */
    *fd = -1;
}

/* Keep an fd away from 0..2 (the runner may have closed its own stdio):
 * a child-bound fd there could be clobbered by the dup2 of another, and a
 * parent-side one would receive whatever the runner writes to "stderr".
 * The copy is close-on-exec too (file status flags are shared). */
static int above_stdio(int *fd)
{
    if (*fd > 2)
        return AL_OK;
    int nfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
    if (nfd < 0)
        return al_err_from_errno(errno);
    proc_close_fd(fd);
    *fd = nfd;
    return AL_OK;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
        return al_err_from_errno(errno);
    return AL_OK;
}

/* A PTY pair: master non-blocking, both close-on-exec, sized, IUTF8. */
static int pty_open(uint16_t cols, uint16_t rows, int *master, int *slave, char *err, size_t errcap)
{
    int e = 0, s = -1;
    int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0)
        return al_errf_errno(err, errcap, errno, "cannot open a PTY");
    if (grantpt(m) < 0 || unlockpt(m) < 0)
        goto fail;
#ifdef TIOCGPTPEER
    s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
#endif
    if (s < 0) {
        char name[64];
        if (ptsname_r(m, name, sizeof name) != 0)
            goto fail;
        s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
            goto fail;
    }
    struct termios t;
    if (tcgetattr(s, &t) < 0)
        goto fail;
    t.c_iflag |= IUTF8;
    if (tcsetattr(s, TCSANOW, &t) < 0)
        goto fail;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(m, TIOCSWINSZ, &ws) < 0 || set_nonblock(m) != AL_OK)
        goto fail;
    *master = m;
    *slave = s;
    return AL_OK;
fail:
    e = errno;
    proc_close_fd(&s);
    proc_close_fd(&m);
    return al_errf_errno(err, errcap, e, "cannot set up a PTY");
}

static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for the child to exec (0), report a failure (1, *rep filled),
 * or neither in time (AL_E_TIMEOUT). */
static int wait_exec(int fd, struct child_report *rep)
{
    int64_t deadline = now_ms() + PROC_EXEC_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return AL_E_TIMEOUT;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return al_err_from_errno(errno);
        if (n == 0)
            return AL_E_TIMEOUT;
        ssize_t r = read(fd, rep, sizeof *rep);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return 0;
        if (r == (ssize_t)sizeof *rep)
            return 1;
        rep->step = STEP_EXEC;
        rep->err = r < 0 ? errno : EIO;
        return 1;
    }
}

/* The command's pid, which the keeper writes first; -1 when the keeper
 * failed before it (end of file) or did not write it in time. */
static pid_t read_cmd_pid(int fd)
{
    int64_t deadline = now_ms() + PROC_EXEC_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        pid_t pid = -1;
        ssize_t r = read(fd, &pid, sizeof pid);
        if (r < 0 && errno == EINTR)
            continue;
        return r == (ssize_t)sizeof pid && pid > 1 ? pid : -1;
    }
}

/* End a command that will never run the program (cmd: -1 if unknown) and
 * reap its keeper, which reaps the command first. */
static void kill_and_reap(pid_t keeper, pid_t cmd)
{
    if (cmd > 1)
        (void)kill(cmd, SIGKILL); /* the keeper's child, unreaped: its pid is ours */
    else
        (void)kill(keeper, SIGKILL); /* never forked, or stuck before telling */
    for (;;) {
        pid_t r = waitpid(keeper, NULL, 0);
        if (r >= 0 || errno != EINTR)
            break;
    }
}

static int report_error(const struct plan *pl, const struct child_report *rep, char *err,
                        size_t errcap)
{
    char what[PROC_SHOWN_MAX];
    const char *msg = strerror(rep->err);
    switch (rep->step) {
    case STEP_EXEC:
        proc_shown(what, sizeof what, pl->argv[0]);
        al_errf(err, errcap, "cannot run '%s': %s", what, msg);
        break;
    case STEP_CHDIR:
        proc_shown(what, sizeof what, pl->cwd ? pl->cwd : "");
        al_errf(err, errcap, "cannot change directory to '%s': %s", what, msg);
        break;
    case STEP_USER:
        al_errf(err, errcap, "cannot switch to uid %lu gid %lu: %s", (unsigned long)pl->uid,
                (unsigned long)pl->gid, msg);
        break;
    case STEP_LIMITS:
        al_errf(err, errcap, "cannot set the agent's memory limit (RLIMIT_DATA): %s", msg);
        break;
    case STEP_SETSID:
        al_errf(err, errcap, "cannot start a session: %s", msg);
        break;
    case STEP_CTTY:
        al_errf(err, errcap, "cannot make the PTY the controlling terminal: %s", msg);
        break;
    case STEP_STDIO:
        al_errf(err, errcap, "cannot set up stdin/stdout/stderr: %s", msg);
        break;
    case STEP_KEEPER:
        al_errf(err, errcap, "cannot start the process's keeper: %s", msg);
        break;
    default:
        al_errf(err, errcap, "cannot set up the child's signals: %s", msg);
        break;
    }
    return al_err_from_errno(rep->err);
}

static void proc_init(struct proc *p, enum proc_mode mode)
{
    memset(p, 0, sizeof *p);
    p->pid = p->keeper = -1;
    p->fd_in = p->fd_out = p->fd_err = p->fd_status = -1;
    p->mode = mode;
}

/* The descriptors of one start: the parent's ends (in, out, err; in and
 * out are the PTY's master, the same fd, in PTY mode), the child's ends
 * (cio), the pipe the child reports an exec failure on (ep) and the one
 * the keeper reports on (sp). -1 where there is none; on success the
 * parent's ends and sp[0] move to the struct proc. */
struct spawn_fds {
    int pin, pout, perr;
    int cio[3];
    int ep[2];
    int sp[2];
};

static void fds_init(struct spawn_fds *d)
{
    d->pin = d->pout = d->perr = -1;
    d->cio[0] = d->cio[1] = d->cio[2] = -1;
    d->ep[0] = d->ep[1] = d->sp[0] = d->sp[1] = -1;
}

static void fds_close(struct spawn_fds *d)
{
    if (d->pout != d->pin)
        proc_close_fd(&d->pout);
    proc_close_fd(&d->pin);
    proc_close_fd(&d->perr);
    for (int i = 0; i < 3; i++)
        proc_close_fd(&d->cio[i]);
    proc_close_fd(&d->ep[0]);
    proc_close_fd(&d->ep[1]);
    proc_close_fd(&d->sp[0]);
    proc_close_fd(&d->sp[1]);
}

/* Pipes mode: three pipes, the parent's ends non-blocking. */
static int fds_pipes(struct spawn_fds *d)
{
    int a[2] = {-1, -1}, b[2] = {-1, -1}, c[2] = {-1, -1};
    int rc = AL_OK;
    if (pipe2(a, O_CLOEXEC) < 0 || pipe2(b, O_CLOEXEC) < 0 || pipe2(c, O_CLOEXEC) < 0)
        rc = al_err_from_errno(errno);
    d->cio[0] = a[0], d->pin = a[1];
    d->pout = b[0], d->cio[1] = b[1];
    d->perr = c[0], d->cio[2] = c[1];
    int *parent[3] = {&d->pin, &d->pout, &d->perr};
    for (int i = 0; i < 3 && rc == AL_OK; i++)
        rc = above_stdio(parent[i]);
    for (int i = 0; i < 3 && rc == AL_OK; i++)
        rc = set_nonblock(*parent[i]);
    return rc;
}

/* Every descriptor of a start, away from 0..2; the reason in err. */
static int fds_open(const struct proc_spec *spec, struct spawn_fds *d, char *err, size_t errcap)
{
    int rc;
    if (spec->mode == PROC_PTY) {
        rc = pty_open(spec->cols, spec->rows, &d->pin, &d->cio[0], err, errcap);
        if (rc != AL_OK)
            return rc;
        rc = above_stdio(&d->pin);
        d->pout = d->pin;
        for (int i = 1; i < 3 && rc == AL_OK; i++) {
            d->cio[i] = fcntl(d->cio[0], F_DUPFD_CLOEXEC, 3);
            if (d->cio[i] < 0)
                rc = al_err_from_errno(errno);
        }
    } else {
        rc = fds_pipes(d);
    }
    if (rc == AL_OK && (pipe2(d->ep, O_CLOEXEC) < 0 || pipe2(d->sp, O_CLOEXEC) < 0))
        rc = al_err_from_errno(errno);
    int *moved[] = {&d->cio[0], &d->cio[1], &d->cio[2], &d->ep[1], &d->sp[1], &d->sp[0]};
    for (size_t i = 0; i < sizeof moved / sizeof moved[0] && rc == AL_OK; i++)
        rc = above_stdio(moved[i]);
    if (rc == AL_OK)
        rc = set_nonblock(d->sp[0]);
    if (rc != AL_OK && (!err || !err[0]))
        al_errf(err, errcap, "cannot create the process's descriptors: %s", strerror(errno));
    return rc;
}

/* Fork the keeper with every signal blocked (no handler of ours may run
 * in the child before it resets them), then close the child's ends.
 * *mask_rc: whether our own signal mask came back (0) or not. */
static int fork_keeper(struct plan *pl, struct spawn_fds *d, int pty, pid_t *keeper, int *mask_rc,
                       char *err, size_t errcap)
{
    sigset_t all, old;
    if (sigfillset(&all) < 0 || pthread_sigmask(SIG_SETMASK, &all, &old) != 0) {
        al_errf(err, errcap, "cannot block signals: %s", strerror(errno));
        return AL_E_IO;
    }
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid == 0)
        proc_keeper_run(pl, d->cio, pty, d->ep[1], d->sp[1], self);
    int fork_errno = errno;
    *mask_rc = pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pid < 0)
        return al_errf_errno(err, errcap, fork_errno, "cannot fork");
    for (int i = 0; i < 3; i++)
        proc_close_fd(&d->cio[i]);
    proc_close_fd(&d->ep[1]);
    proc_close_fd(&d->sp[1]);
    *keeper = pid;
    return AL_OK;
}

/* Wait until the command has exec'd and the keeper named it (*cmd); on
 * any failure, kill and reap what was started, the reason in err. */
static int await_exec(const struct plan *pl, const struct spawn_fds *d, pid_t keeper, int mask_rc,
                      pid_t *cmd_out, char *err, size_t errcap)
{
    struct child_report rep = {0, 0};
    int w = wait_exec(d->ep[0], &rep);
    pid_t cmd = w == 1 && rep.step == STEP_KEEPER ? -1 : read_cmd_pid(d->sp[0]);
    if (w == 0 && cmd < 0) {
        al_errf(err, errcap, "cannot start the process's keeper: it did not report");
        kill_and_reap(keeper, cmd);
        return AL_E_IO;
    }
    if (w == 1) {
        kill_and_reap(keeper, cmd);
        return report_error(pl, &rep, err, errcap);
    }
    if (w != 0) {
        kill_and_reap(keeper, cmd);
        char what[PROC_SHOWN_MAX];
        proc_shown(what, sizeof what, pl->argv[0]);
        al_errf(err, errcap, "cannot run '%s': %s", what,
                w == AL_E_TIMEOUT ? "the child did not start in time" : al_strerror(w));
        return w;
    }
    if (mask_rc != 0) { /* the child runs, but our own signal mask is wrong */
        kill_and_reap(keeper, cmd);
        al_errf(err, errcap, "cannot restore the signal mask: %s", strerror(mask_rc));
        return AL_E_IO;
    }
    *cmd_out = cmd;
    return AL_OK;
}

int proc_spawn(const struct proc_spec *spec, struct proc *out, char *err, size_t errcap)
{
    al_errf(err, errcap, "%s", "");
    if (out)
        proc_init(out, spec ? spec->mode : PROC_PTY);
    if (!out || !spec) {
        al_errf(err, errcap, "no process spec or result given");
        return AL_E_INVAL;
    }
    struct plan pl;
    int rc = proc_plan_build(spec, &pl, err, errcap);
    if (rc != AL_OK)
        return rc;
    struct spawn_fds d;
    fds_init(&d);
    pid_t keeper = -1, cmd = -1;
    int mask_rc = 0;
    rc = fds_open(spec, &d, err, errcap);
    if (rc == AL_OK)
        rc = fork_keeper(&pl, &d, spec->mode == PROC_PTY, &keeper, &mask_rc, err, errcap);
    if (rc == AL_OK)
        rc = await_exec(&pl, &d, keeper, mask_rc, &cmd, err, errcap);
    if (rc == AL_OK) {
        out->pid = cmd;
        out->keeper = keeper;
        out->fd_status = d.sp[0];
        d.sp[0] = -1;
        out->wrapped = pl.nwrap > 0;
        out->fd_in = d.pin;
        out->fd_out = d.pout;
        out->fd_err = d.perr;
        d.pin = d.pout = d.perr = -1;
    }
    fds_close(&d);
    proc_plan_free(&pl);
    return rc;
}

/* ---- the parent's fds ------------------------------------------------------ */

int proc_resize(struct proc *p, uint16_t cols, uint16_t rows)
{
    if (!proc_ok(p) || cols < 1 || cols > AL_MAX_COLS || rows < 1 || rows > AL_MAX_ROWS)
        return AL_E_INVAL;
    if (p->mode != PROC_PTY || p->fd_out < 0)
        return AL_E_STATE;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    if (ioctl(p->fd_out, TIOCSWINSZ, &ws) < 0)
        return al_err_from_errno(errno);
    return AL_OK;
}

int proc_close_stdin(struct proc *p)
{
    if (!proc_ok(p))
        return AL_E_INVAL;
    if (p->mode == PROC_PIPES) {
        if (p->fd_in < 0)
            return AL_OK;
        int rc = close(p->fd_in) < 0 && errno != EINTR ? al_err_from_errno(errno) : AL_OK;
        p->fd_in = -1; /* closed even when close() reports an error */
        return rc;
    }
    if (p->fd_in < 0)
        return AL_E_STATE;
    struct termios t;
    if (tcgetattr(p->fd_in, &t) < 0)
        return al_err_from_errno(errno);
    unsigned char c = t.c_cc[VEOF];
    if (c == _POSIX_VDISABLE)
        c = PROC_EOF_CHAR;
    for (;;) {
        ssize_t n = write(p->fd_in, &c, 1);
        if (n == 1)
            return AL_OK;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return AL_E_AGAIN;
        return n < 0 ? al_err_from_errno(errno) : AL_E_IO;
    }
}

void proc_close(struct proc *p)
{
    if (!p)
        return;
    if (p->fd_in == p->fd_out)
        p->fd_in = -1;
    proc_close_fd(&p->fd_in);
    proc_close_fd(&p->fd_out);
    proc_close_fd(&p->fd_err);
    proc_close_fd(&p->fd_status);
}
