/*
 * cli_attach: see cli_attach.h. This file sets a session up (the endpoint,
 * the local descriptors, raw mode, timers and signals), runs the loop and
 * tears the session down; struct cli_session and the files that run it
 * are in cli_session.h. Then the attach command: its options (some shared
 * with run, cli_run.c), the terminal looked up (GET /v1/terminals/ID: its
 * sandbox, mode and state) and the session started.
 *
 * A terminal's descriptors are opened again for this process (their own
 * O_NONBLOCK); the flags of fds 0-2 are put back as they were at the end.
 */
#include "cli_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "cli_app.h"
#include "cli_err.h"
#include "cli_link.h"
#include "cli_output.h"
#include "cli_session.h"
#include "cli_stdin.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define MS_PER_S 1000
#define MAX_RETRY_FOR_S (7ull * 86400)
#define MAX_PING_S 3600ull /* --ping-interval (its message says so) */

/* ---- set-up and the loop ---------------------------------------------------- */

static void setup_stdin(struct cli_session *a)
{
    a->in_fd = STDIN_FILENO;
    int fd = cli_tty_reopen(STDIN_FILENO, O_RDONLY);
    if (fd >= 0) {
        a->in_fd = fd;
        a->in_reopened = 1;
    }
    if (uv_poll_init(a->loop, &a->in_poll, a->in_fd) == 0) {
        a->in_poll_ok = 1;
        a->in_poll.data = a;
        return;
    }
    /* a regular file (or /dev/null): always readable, read as credit allows */
    a->in_direct = 1;
}

static void setup_out(struct cli_session *a, struct cli_outfd *o, int fd)
{
    o->a = a;
    o->fd = fd;
    cli_outq_init(&o->q, OUT_MAX);
    int again = cli_tty_reopen(fd, O_WRONLY);
    if (again >= 0) {
        o->fd = again;
        o->reopened = 1;
    }
    /* pipes, sockets and terminals are polled (libuv makes them
     * non-blocking); regular files cannot be, and never stall for long */
    if (uv_poll_init(a->loop, &o->poll, o->fd) == 0) {
        o->polled = 1;
        o->poll.data = o;
    }
}

/* Status lines share the screen's queue when stderr is the same terminal
 * as stdout, so that they appear where they happen. */
static struct cli_outfd *status_target(struct cli_session *a)
{
    struct stat so, se;
    if (a->interactive && isatty(STDOUT_FILENO) && fstat(STDOUT_FILENO, &so) == 0 &&
        fstat(STDERR_FILENO, &se) == 0 && S_ISCHR(so.st_mode) && S_ISCHR(se.st_mode) &&
        so.st_rdev == se.st_rdev)
        return &a->out[0];
    return &a->out[1];
}

static void close_cb_noop(uv_handle_t *h)
{
    (void)h;
}

static void teardown(struct cli_session *a)
{
    cli_tty_restore(&a->tty);
    uv_handle_t *hs[] = {
        (uv_handle_t *)&a->notice,     (uv_handle_t *)&a->tick,    (uv_handle_t *)&a->retry,
        (uv_handle_t *)&a->close_wait, (uv_handle_t *)&a->drain,   (uv_handle_t *)&a->sig_winch,
        (uv_handle_t *)&a->sig_term,   (uv_handle_t *)&a->sig_int, (uv_handle_t *)&a->sig_hup};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (!uv_is_closing(hs[i]))
            uv_close(hs[i], close_cb_noop);
    if (a->in_poll_ok)
        uv_close((uv_handle_t *)&a->in_poll, close_cb_noop);
    for (int i = 0; i < 2; i++)
        if (a->out[i].polled)
            uv_close((uv_handle_t *)&a->out[i].poll, close_cb_noop);
    if (a->ws) {
        cli_ws_abandon(a->ws);
        a->ws = NULL;
    }
    for (int i = 0; i < 10 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    for (int i = 0; i < 2; i++) {
        /* one last try for what is left (the lines of an end given up on) */
        struct cli_outfd *o = &a->out[i];
        while (!o->failed && cli_outq_len(&o->q) > 0) {
            struct iovec iov[CLI_OUTQ_IOV_MAX];
            ssize_t w = writev(o->fd, iov, cli_outq_iov(&o->q, iov, CLI_OUTQ_IOV_MAX));
            if (w <= 0)
                break;
            cli_outq_advance(&o->q, (size_t)w, NULL);
        }
        cli_outq_free(&a->out[i].q);
        if (a->out[i].reopened)
            (void)close(a->out[i].fd);
    }
    if (a->in_reopened)
        (void)close(a->in_fd);
    /* fds 0-2 as they were (libuv made the polled ones non-blocking) */
    for (int fd = 0; fd < 3; fd++) {
        int fl = a->saved_ok[fd] ? fcntl(fd, F_GETFL) : -1;
        if (fl >= 0 && fl != a->saved_fl[fd])
            (void)fcntl(fd, F_SETFL, a->saved_fl[fd]);
    }
}

int cli_attach(uv_loop_t *loop, struct cli_net *net, const struct cli_attach_opts *o,
               int *exit_status, int *detached)
{
    struct cli_session *a = calloc(1, sizeof *a);
    if (a)
        backoff_init(&a->retry_delay, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    if (!a)
        return AL_E_NOMEM;
    a->loop = loop;
    a->net = net;
    a->o = *o;
    a->txbuf = malloc(cli_ws_pre() + AL_MAX_FRAME);
    if (!a->txbuf || cli_input_init(&a->in, CLI_HELD_INPUT_MAX, INPUT_COPY_MAX) != AL_OK ||
        ep_new_with(FR_ROLE_CONTROLLER, "airlock-cli", INPUT_COPY_MAX, 0, cli_session_on_event, a,
                    &a->ep) != AL_OK) {
        cli_input_free(&a->in);
        free(a->txbuf);
        free(a);
        return AL_E_NOMEM;
    }
    /* pings as often as asked; the idle timeout stays well above them */
    if (o->ping_ms)
        ep_set_timers(a->ep, o->ping_ms * 1000u,
                      o->ping_ms * 3000u > EP_DEFAULT_IDLE_US ? o->ping_ms * 3000u
                                                              : EP_DEFAULT_IDLE_US);
    for (int fd = 0; fd < 3; fd++) {
        a->saved_fl[fd] = fcntl(fd, F_GETFL);
        a->saved_ok[fd] = a->saved_fl[fd] >= 0;
    }
    (void)snprintf(a->path, sizeof a->path, "/v1/terminals/%s/attach%s", o->term_id,
                   o->read_only ? "?mode=read" : "");
    (void)ep_attach_new(a->ep, CH, o->pipe_mode ? FR_MODE_PIPES : FR_MODE_PTY);
    if (!o->pipe_mode) {
        cli_session_local_size(a);
        if (a->size_known)
            (void)ep_resize(a->ep, CH, a->cols, a->rows);
        if (cli_tty_raw(&a->tty, STDIN_FILENO) == AL_OK)
            a->interactive = 1;
    }
    cli_escape_init(&a->esc, a->interactive ? o->escape : -1);
    uv_timer_t *ts[] = {&a->tick, &a->retry, &a->close_wait, &a->notice, &a->drain};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        (void)uv_timer_init(loop, ts[i]);
        ts[i]->data = a;
    }
    struct {
        uv_signal_t *h;
        int signo;
    } sigs[] = {{&a->sig_winch, SIGWINCH},
                {&a->sig_term, SIGTERM},
                {&a->sig_int, SIGINT},
                {&a->sig_hup, SIGHUP}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        (void)uv_signal_init(loop, sigs[i].h);
        sigs[i].h->data = a;
        (void)uv_signal_start(sigs[i].h, cli_session_on_signal, sigs[i].signo);
    }
    setup_out(a, &a->out[0], STDOUT_FILENO);
    setup_out(a, &a->out[1], STDERR_FILENO);
    a->status_out = status_target(a);
    setup_stdin(a);
    cli_link_connect(a);
    cli_stdin_pump(a); /* type-ahead is held until the server says we write */
    if (!a->stopping)
        (void)uv_run(loop, UV_RUN_DEFAULT);
    teardown(a);
    *exit_status = a->exit_status;
    *detached = a->detached;
    ep_free(a->ep);
    cli_input_free(&a->in);
    free(a->txbuf);
    free(a);
    return AL_OK;
}

/* ---- the attach command ------------------------------------------------------ */

/* Options shared by attach and run; 1 when argv[*i] was one of them. */
int cli_attach_opt(struct cli_attach_args *o, int argc, char **argv, int *i, int *err)
{
    const char *s = argv[*i];
    if (!strcmp(s, "--escape") && *i + 1 < argc) {
        const char *v = argv[++*i];
        if (!strcmp(v, "none"))
            o->escape = -1;
        else if (strlen(v) == 1 && (unsigned char)v[0] > ' ' && (unsigned char)v[0] < 0x7f)
            o->escape = (unsigned char)v[0];
        else
            *err = cli_err_usage("--escape wants one printable character or 'none', not '%s'", v);
        return 1;
    }
    if (!strcmp(s, "--retry-for") && *i + 1 < argc) {
        char *end;
        errno = 0;
        const char *v = argv[++*i];
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n > MAX_RETRY_FOR_S)
            *err = cli_err_usage("--retry-for wants seconds, not '%s'", v);
        o->retry_for_ms = n * MS_PER_S;
        return 1;
    }
    if (!strcmp(s, "--ping-interval") && *i + 1 < argc) {
        char *end;
        errno = 0;
        const char *v = argv[++*i];
        unsigned long long n = strtoull(v, &end, 10);
        if (errno || end == v || *end || v[0] == '-' || n < 1 || n > MAX_PING_S)
            *err = cli_err_usage("--ping-interval wants seconds from 1 to 3600, not '%s'", v);
        o->ping_ms = n * MS_PER_S;
        return 1;
    }
    return 0;
}

int cli_attach_start(struct cli_app *a, const char *id, int pipe, const struct cli_attach_args *aa,
                     int quiet, int *detached)
{
    struct cli_attach_opts o;
    memset(&o, 0, sizeof o);
    o.term_id = id;
    o.pipe_mode = pipe;
    o.read_only = aa->read_only;
    o.escape = aa->escape;
    o.retry_for_ms = aa->retry_for_ms;
    o.ping_ms = aa->ping_ms;
    o.quiet = quiet;
    o.forward_signals = pipe;
    int st = CLI_EXIT_OTHER;
    if (cli_attach(&a->loop, a->net, &o, &st, detached) != AL_OK) {
        fprintf(stderr, "airlock: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    return st;
}

int cli_attach_cmd(struct cli_app *a, int argc, char **argv)
{
    struct cli_attach_args aa = {0, CLI_ESCAPE_DEFAULT, 0,
                                 (uint64_t)CLI_RETRY_FOR_DEFAULT_S * MS_PER_S, 0};
    const char *target = NULL;
    for (int i = 0; i < argc; i++) {
        int err = 0;
        if (!strcmp(argv[i], "--read-only"))
            aa.read_only = 1;
        else if (cli_attach_opt(&aa, argc, argv, &i, &err)) {
            if (err)
                return err;
        } else if (argv[i][0] != '-' && !target)
            target = argv[i];
        else
            return cli_err_usage("attach: unexpected argument %s", argv[i]);
    }
    if (!target)
        return cli_err_usage("attach: which terminal?%s", "");
    const char *slash = strchr(target, '/');
    const char *id = slash ? slash + 1 : target;
    if (!cli_app_id_ok(id))
        return cli_err_usage("attach: '%s' is not a terminal id", target);
    char path[256];
    (void)snprintf(path, sizeof path, "/v1/terminals/%s", id);
    json_t *t = NULL;
    int rc = cli_app_json(a, "looking up the terminal", "GET", path, NULL, &t);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (slash && strncmp(cli_app_str(t, "sandbox"), target, (size_t)(slash - target)) != 0) {
        fprintf(stderr, "airlock: terminal %s is in sandbox %s, not %.*s\n", id,
                cli_app_str(t, "sandbox"), (int)(slash - target), target);
        json_decref(t);
        return CLI_EXIT_NOTFOUND;
    }
    int pipe = !strcmp(cli_app_str(t, "mode"), "pipes");
    const char *state = cli_app_str(t, "state");
    if (!strcmp(state, "closed") || !strcmp(state, "lost")) {
        fprintf(stderr, "airlock: terminal %s is %s; its recording stays: airlock replay %s\n", id,
                state, id);
        json_decref(t);
        return CLI_EXIT_NOTFOUND;
    }
    json_decref(t);
    int detached = 0;
    return cli_attach_start(a, id, pipe, &aa, 0, &detached);
}
