/*
 * airlock-proxy-fwd: the first command of an agent's jail with no network
 * when the credential proxy serves it (docs/proxy.md, "Agents with no
 * network"):
 *
 *   airlock-proxy-fwd --port PORT --socket PATH -- CMD [ARG...]
 *
 * It binds 127.0.0.1:PORT in the jail's own network namespace, leaves a
 * forwarder behind (fwd.c) and becomes CMD: the agent keeps this process,
 * so its exit is the jail's (bubblewrap ends the jail when its first
 * command ends) and its status is the terminal's, exactly as without a
 * forwarder. The forwarder is a grandchild (its parent exits at once), so
 * the agent never has it as a child to wait for; it leads a session of its
 * own (no terminal, no terminal's signals), has /dev/null for stdio (it
 * holds neither the terminal nor its pipes open), ignores the signals that
 * a terminal's signal or a shell would send a whole tree, and ends when
 * the agent does: it watches the agent through a pidfd (and, in a jail,
 * the pid namespace's end kills it anyway). The agent may kill it: that
 * only cuts the agent's own proxy calls.
 *
 * Links libuv and the C library only (tests/integration/boundary.sh).
 * Exit status before CMD runs: 2 for a bad command line, 126 when it
 * cannot listen or fork, 127 when CMD cannot be run.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "fwd.h"

#define FWD_EXIT_USAGE 2
#define FWD_EXIT_SETUP 126
#define FWD_EXIT_NOEXEC 127

struct fwd_args {
    int port;
    const char *socket;
    char **cmd;
};

static void usage(void)
{
    fputs("usage: airlock-proxy-fwd --port PORT --socket PATH -- CMD [ARG...]\n", stderr);
}

static int parse(int argc, char **argv, struct fwd_args *a)
{
    memset(a, 0, sizeof *a);
    a->port = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--") && i + 1 < argc) {
            a->cmd = argv + i + 1;
            break;
        }
        if (i + 1 >= argc)
            return -1;
        if (!strcmp(argv[i], "--port")) {
            char *end = NULL;
            long p = strtol(argv[++i], &end, 10);
            if (!end || *end || p < 1 || p > 65535)
                return -1;
            a->port = (int)p;
        } else if (!strcmp(argv[i], "--socket")) {
            a->socket = argv[++i];
        } else {
            return -1;
        }
    }
    return a->port > 0 && a->socket && a->socket[0] == '/' && a->cmd ? 0 : -1;
}

/* The forwarder's process: nothing of the agent's terminal, only the
 * listening socket and the agent's pidfd. */
static void detach(int keep1, int keep2)
{
    static const int quiet[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE, SIGUSR1,
                                SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGALRM};
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++)
        (void)signal(quiet[i], SIG_IGN);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int fd = 0; fd < 3; fd++) {
        if (null >= 0)
            (void)dup2(null, fd);
        else
            (void)close(fd);
    }
    if (null > 2)
        (void)close(null);
    for (int fd = 3; fd < 1024; fd++)
        if (fd != keep1 && fd != keep2)
            (void)close(fd);
}

static void on_agent_gone(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    uv_stop(h->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void serve(const struct fwd_args *a, int lfd, int pidfd)
{
    detach(lfd, pidfd);
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0)
        _exit(1);
    struct fwd_config cfg = {.listen_fd = lfd, .socket = a->socket};
    struct fwd *f = NULL;
    char err[256];
    uv_poll_t agent;
    if (fwd_new(&loop, &cfg, &f, err, sizeof err) != AL_OK)
        _exit(1);
    if (pidfd >= 0 && uv_poll_init(&loop, &agent, pidfd) == 0)
        (void)uv_poll_start(&agent, UV_READABLE, on_agent_gone);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    fwd_free(f);
    uv_walk(&loop, close_walk, NULL);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
    _exit(0);
}

int main(int argc, char **argv)
{
    struct fwd_args a;
    if (parse(argc, argv, &a) != 0) {
        usage();
        return FWD_EXIT_USAGE;
    }
    char err[256];
    int lfd = -1;
    if (fwd_listen(a.port, &lfd, err, sizeof err) != AL_OK) {
        fprintf(stderr, "airlock-proxy-fwd: the credential proxy cannot be served: %s\n", err);
        return FWD_EXIT_SETUP;
    }
    /* this process becomes the agent: a pidfd of it, taken now (no pid
     * reuse can fool it), tells the forwarder when the agent is gone; the
     * agent's copy closes on exec (pidfds are close-on-exec) */
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    pid_t mid = fork();
    if (mid < 0) {
        fprintf(stderr, "airlock-proxy-fwd: fork: %s\n", strerror(errno));
        return FWD_EXIT_SETUP;
    }
    if (mid == 0) {
        (void)setsid(); /* a session of its own: no terminal signals */
        pid_t fwd = fork();
        if (fwd == 0)
            serve(&a, lfd, pidfd);
        _exit(fwd < 0 ? 1 : 0);
    }
    int st = 0;
    while (waitpid(mid, &st, 0) < 0 && errno == EINTR)
        ;
    (void)close(lfd);
    if (pidfd >= 0)
        (void)close(pidfd);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "airlock-proxy-fwd: cannot start the forwarder\n");
        return FWD_EXIT_SETUP;
    }
    execvp(a.cmd[0], a.cmd);
    fprintf(stderr, "airlock-proxy-fwd: %s: %s\n", a.cmd[0], strerror(errno));
    return FWD_EXIT_NOEXEC;
}
