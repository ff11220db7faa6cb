/*
 * cli_attach: see cli_attach.h.
 *
 * Data model: struct att is one session (no globals). It owns the
 * endpoint (channel 1 = the terminal, adopted at offset 0 so the first
 * ATTACH asks for everything; the endpoint then resumes exactly after a
 * drop), the current WebSocket (NULL between connections), the local
 * terminal's saved modes, and the input waiting for credit:
 *   stdin --read--> escape filter --> inbuf (IN_BUF bytes) --ep_write--> ep
 * Output is written to fd 1 (stdout, the screen) and fd 2 (stderr, pipe
 * mode) before ep_consume() grants the credit back, so the server never
 * sends more than the local side has taken.
 *
 * Units: times in microseconds from uv_hrtime(); sizes in bytes.
 */
#include "cli_attach.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "cli_err.h"
#include "cli_escape.h"
#include "cli_tty.h"
#include "endpoint.h"

#define CH 1
#define IN_BUF (64u << 10)
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define CLOSE_WAIT_MS 1500 /* after a detach or exit, for the close to go out */
#define STATUS_MAX 512
#define NOTICE_DELAY_MS 300
#define PATH_MAX_LEN 512
#define NS_PER_US 1000
#define US_PER_MS 1000
#define MS_PER_S 1000
#define WRITE_WAIT_MS 1000
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_NOT_FOUND 404

struct att {
    uv_loop_t *loop;
    struct cli_net *net;
    struct cli_attach_opts o;
    char path[PATH_MAX_LEN];
    struct ep *ep;
    struct cli_ws *ws;
    int linked;      /* ep_link_up() for the current ws */
    int ever_linked; /* a connection was established at least once */
    /* local side */
    int interactive; /* stdin is a terminal in raw mode */
    struct cli_tty tty;
    int size_known;
    uint16_t cols, rows;
    struct cli_escape esc;
    uv_poll_t in_poll;
    int in_poll_ok, in_poll_on, in_direct; /* direct: a file, read without polling */
    int in_eof, eof_sent;
    uint8_t *inbuf;
    size_t in_len;
    int writer, role_known;
    uint8_t *txbuf;
    /* timers and signals */
    uv_timer_t tick, retry, close_wait, notice;
    char notice_text[STATUS_MAX]; /* a role notice, shown after the screen redraw */
    uv_signal_t sig_winch, sig_term, sig_int, sig_hup;
    int signalled;
    /* reconnecting */
    unsigned attempt;
    uint64_t down_since_us;
    int down_reported;
    /* the end */
    int done, stopping;
    int exit_status, detached;
    int exited;
};

static uint64_t now_us(void)
{
    return uv_hrtime() / NS_PER_US;
}

/* One status line on stderr, whatever mode the terminal is in. */
static void status(struct att *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void status(struct att *a, const char *fmt, ...)
{
    char line[STATUS_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (a->tty.raw)
        fprintf(stderr, "\r\n[airlock: %s]\r\n", line);
    else
        fprintf(stderr, "airlock: %s\n", line);
    (void)fflush(stderr);
}

/* Write all of p to fd (blocking; waits out EAGAIN if someone made it
 * non-blocking). 0, or -1 when the descriptor is gone. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = {fd, POLLOUT, 0};
            (void)poll(&pf, 1, WRITE_WAIT_MS);
            continue;
        }
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void finish(struct att *a, int exit_status);
static void pump_input(struct att *a);
static void connect_ws(struct att *a);

/* ---- writing to the server ------------------------------------------------ */

static void want_write(struct att *a)
{
    if (a->ws && a->linked)
        cli_ws_want_write(a->ws);
}

static void schedule_tick(struct att *a);

static void on_tick(uv_timer_t *h)
{
    struct att *a = h->data;
    if (a->linked)
        ep_tick(a->ep, now_us());
    want_write(a);
    schedule_tick(a);
}

static void schedule_tick(struct att *a)
{
    uint64_t next = ep_next_deadline(a->ep), now = now_us();
    if (!a->linked || next == UINT64_MAX) {
        (void)uv_timer_stop(&a->tick);
        return;
    }
    uint64_t ms = next > now ? (next - now + US_PER_MS - 1) / US_PER_MS : 0;
    (void)uv_timer_start(&a->tick, on_tick, ms, 0);
}

/* ---- local input ------------------------------------------------------------ */

static void on_in_poll(uv_poll_t *h, int st, int events);

static void poll_set(struct att *a, int on)
{
    if (!a->in_poll_ok || a->in_poll_on == on)
        return;
    a->in_poll_on = on;
    if (on)
        (void)uv_poll_start(&a->in_poll, UV_READABLE, on_in_poll);
    else
        (void)uv_poll_stop(&a->in_poll);
}

static void handle_escape_action(struct att *a, enum cli_esc_action act)
{
    switch (act) {
    case CLI_ESC_DETACH:
        a->detached = 1;
        finish(a, CLI_EXIT_OK);
        status(a, "detached from %s (it keeps running; airlock attach %s to come back)",
               a->o.term_id, a->o.term_id);
        break;
    case CLI_ESC_TAKEOVER:
        if (a->o.read_only)
            status(a, "read-only attach: cannot take over");
        else if (!a->linked || ep_takeover(a->ep, CH) != AL_OK)
            status(a, "not connected: cannot take over now");
        want_write(a);
        break;
    case CLI_ESC_HELP: {
        char e = (char)a->o.escape;
        status(a, "escapes (after Enter): %c. detach  %ct take over  %c? help  %c%c send %c", e, e,
               e, e, e, e);
        break;
    }
    default:
        break;
    }
}

/* Bytes typed: through the escape filter into inbuf. */
static void take_input(struct att *a, const uint8_t *p, size_t n)
{
    if (!a->interactive) {
        memcpy(a->inbuf + a->in_len, p, n);
        a->in_len += n;
        return;
    }
    while (n > 0 && !a->done) {
        size_t used;
        enum cli_esc_action act;
        uint8_t tmp[IN_BUF / 4 + 2];
        size_t chunk = n < IN_BUF / 4 ? n : IN_BUF / 4;
        size_t o = cli_escape_feed(&a->esc, p, chunk, tmp, sizeof tmp, &used, &act);
        if (a->writer && o <= IN_BUF - a->in_len) {
            memcpy(a->inbuf + a->in_len, tmp, o);
            a->in_len += o;
        } /* a viewer's keystrokes never leave this side */
        p += used;
        n -= used;
        handle_escape_action(a, act);
    }
}

static void read_stdin(struct att *a, size_t max)
{
    uint8_t buf[IN_BUF / 4];
    if (max > sizeof buf)
        max = sizeof buf;
    ssize_t r = read(STDIN_FILENO, buf, max);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        a->in_eof = 1;
        poll_set(a, 0);
        if (a->interactive && !a->done) {
            status(a, "the local terminal is gone: detaching");
            a->detached = 1;
            finish(a, CLI_EXIT_OK);
        }
        return;
    }
    take_input(a, buf, (size_t)r);
}

static void on_in_poll(uv_poll_t *h, int st, int events)
{
    struct att *a = h->data;
    (void)events;
    if (st < 0) {
        a->in_eof = 1;
        poll_set(a, 0);
    } else {
        read_stdin(a, IN_BUF - a->in_len);
    }
    pump_input(a);
}

/* Move inbuf into the endpoint, end stdin after it, and decide whether to
 * read more. */
static void pump_input(struct att *a)
{
    if (a->done)
        return;
    for (;;) {
        if (a->in_len > 0 && a->writer) {
            long w = ep_write(a->ep, CH, FR_STDIN, a->inbuf, a->in_len);
            if (w > 0) {
                memmove(a->inbuf, a->inbuf + w, a->in_len - (size_t)w);
                a->in_len -= (size_t)w;
                want_write(a);
            }
        }
        if (a->in_eof && a->in_len == 0 && !a->eof_sent && a->writer && !a->interactive) {
            if (ep_eof(a->ep, CH, FR_STDIN) == AL_OK)
                a->eof_sent = 1;
            want_write(a);
        }
        size_t room = a->writer ? ep_writable(a->ep, CH, FR_STDIN) : 0;
        int want = !a->in_eof && a->in_len == 0 && (a->interactive || room > 0);
        if (a->in_direct) {
            if (!want)
                break; /* room is bounded by the ring: this loop ends */
            read_stdin(a, room);
            continue;
        }
        poll_set(a, want);
        break;
    }
}

/* ---- endpoint events ------------------------------------------------------ */

static void deliver(struct att *a, int fd, unsigned stream, const uint8_t *p, size_t n)
{
    if (write_all(fd, p, n) != 0 && !a->done && !a->o.pipe_mode) {
        a->detached = 1;
        finish(a, CLI_EXIT_OK);
        return;
    }
    (void)ep_consume(a->ep, CH, stream, n);
}

static void local_size(struct att *a)
{
    uint16_t c, r;
    if (cli_tty_size(STDOUT_FILENO, &c, &r) != AL_OK && cli_tty_size(STDIN_FILENO, &c, &r) != AL_OK)
        return;
    a->cols = c;
    a->rows = r;
    a->size_known = 1;
}

static void show_notice(struct att *a)
{
    if (!a->notice_text[0])
        return;
    status(a, "%s", a->notice_text);
    a->notice_text[0] = 0;
    (void)uv_timer_stop(&a->notice);
}

static void on_notice(uv_timer_t *h)
{
    show_notice(h->data);
}

static void on_role(struct att *a, const struct ep_event *ev)
{
    int was = a->writer, first = !a->role_known;
    a->role_known = 1;
    a->writer = ev->state == FR_WRITER;
    if (a->writer && a->size_known && !a->o.pipe_mode)
        (void)ep_resize(a->ep, CH, a->cols, a->rows); /* the writer's size wins */
    if (a->o.quiet)
        return;
    char e = (char)(a->o.escape >= 0 ? a->o.escape : '~');
    if (a->writer && !was && !first)
        (void)snprintf(a->notice_text, sizeof a->notice_text, "you are the writer now");
    else if (!a->writer && (was || first) && a->o.read_only)
        (void)snprintf(a->notice_text, sizeof a->notice_text,
                       "observing %s (read-only; Enter %c . to leave)", a->o.term_id, e);
    else if (!a->writer && (was || first))
        (void)snprintf(a->notice_text, sizeof a->notice_text,
                       "%s has another writer: you are a viewer (Enter %c t to take over)",
                       a->o.term_id, e);
    /* a snapshot may be on its way and would draw over it: shown after it,
     * or after NOTICE_DELAY_MS */
    if (a->notice_text[0])
        (void)uv_timer_start(&a->notice, on_notice, NOTICE_DELAY_MS, 0);
}

static void on_exit_event(struct att *a, const struct ep_event *ev)
{
    a->exited = 1;
    int st = ev->signo ? CLI_EXIT_SIGNAL_BASE + ev->signo : ev->exit_code;
    finish(a, st);
    if (a->o.quiet)
        return;
    if (ev->signo)
        status(a, "%s was killed by signal %d%s", a->o.term_id, ev->signo,
               ev->core ? " (core dumped)" : "");
    else
        status(a, "%s exited with status %d", a->o.term_id, ev->exit_code);
}

static void on_event(void *ud, const struct ep_event *ev)
{
    struct att *a = ud;
    switch (ev->type) {
    case EP_EV_DATA:
        if (ev->stream == FR_STDOUT)
            deliver(a, STDOUT_FILENO, FR_STDOUT, ev->data, ev->len);
        else if (ev->stream == FR_STDERR)
            deliver(a, STDERR_FILENO, FR_STDERR, ev->data, ev->len);
        break;
    case EP_EV_SNAPSHOT:
        /* bytes that redraw the whole screen as of our stdout offset */
        (void)write_all(STDOUT_FILENO, ev->data, ev->len);
        show_notice(a);
        break;
    case EP_EV_GAP:
        if (ev->offset > 0)
            status(a, "%llu bytes of %s were skipped (this client fell behind)",
                   (unsigned long long)(ev->to - ev->offset),
                   ev->stream == FR_STDERR ? "stderr" : "output");
        break;
    case EP_EV_EXIT:
        on_exit_event(a, ev);
        break;
    case EP_EV_ROLE:
        on_role(a, ev);
        pump_input(a);
        break;
    case EP_EV_WRITABLE:
        if (ev->stream == FR_STDIN)
            pump_input(a);
        break;
    case EP_EV_ATTACHED:
        if (a->down_reported && !a->o.quiet)
            status(a, "reconnected to %s", a->o.term_id);
        a->down_reported = 0;
        a->attempt = 0;
        break;
    case EP_EV_LOST:
        if (!a->done) {
            finish(a, CLI_EXIT_NOTFOUND);
            status(a, "the server no longer has terminal %s", a->o.term_id);
        }
        break;
    case EP_EV_CLOSED:
        if (!a->done) {
            finish(a, CLI_EXIT_OTHER);
            status(a, "terminal %s was closed", a->o.term_id);
        }
        break;
    case EP_EV_ERROR:
        if (ev->code == FR_ERR_FORBIDDEN)
            status(a, "refused: %.*s", (int)ev->len, (const char *)ev->data);
        else if (!a->done)
            status(a, "server error %u: %.*s", ev->code, (int)ev->len, (const char *)ev->data);
        break;
    default:
        break;
    }
}

/* ---- the connection ---------------------------------------------------------- */

static void flush_output(struct att *a)
{
    if (!a->ws || !a->linked)
        return;
    size_t pre = cli_ws_pre();
    for (;;) {
        long n = ep_output(a->ep, a->txbuf + pre, AL_MAX_FRAME, now_us());
        if (n <= 0)
            break;
        int rc = cli_ws_send(a->ws, a->txbuf + pre, (size_t)n);
        if (rc < 0) {
            cli_ws_drop(a->ws);
            return;
        }
        if (rc == 0)
            return; /* choked: more at the next writable */
    }
    int code;
    const char *reason;
    if (ep_closing(a->ep, &code, &reason)) {
        cli_ws_close(a->ws, code, reason ? reason : "closing");
        if (code == EP_CLOSE_PROTOCOL || code == EP_CLOSE_VERSION || code == EP_CLOSE_LIMIT) {
            if (!a->done) {
                finish(a, CLI_EXIT_PROTO);
                status(a, "protocol error with the server: %s", reason ? reason : "?");
            }
        }
    } else if (a->done) {
        cli_ws_close(a->ws, EP_CLOSE_NORMAL, a->detached ? "detached" : "done");
    }
}

static void ws_open(void *ud, struct cli_ws *ws)
{
    struct att *a = ud;
    if (ws != a->ws)
        return;
    a->linked = 1;
    a->ever_linked = 1;
    a->down_since_us = 0;
    ep_link_up(a->ep, now_us());
    schedule_tick(a);
    want_write(a);
}

static void ws_message(void *ud, struct cli_ws *ws, const uint8_t *msg, size_t len)
{
    struct att *a = ud;
    if (ws != a->ws || !a->linked)
        return;
    (void)ep_input(a->ep, msg, len, now_us());
    schedule_tick(a);
    want_write(a);
}

static void ws_writable(void *ud, struct cli_ws *ws)
{
    struct att *a = ud;
    if (ws != a->ws)
        return;
    flush_output(a);
}

static void on_retry(uv_timer_t *h)
{
    connect_ws(h->data);
}

static void schedule_retry(struct att *a)
{
    uint64_t now = now_us();
    if (!a->down_since_us)
        a->down_since_us = now;
    if (now - a->down_since_us >= a->o.retry_for_ms * US_PER_MS) {
        finish(a, CLI_EXIT_DOWN);
        status(a, "the server has been out of reach for %llu s: giving up (%s keeps running)",
               (unsigned long long)(a->o.retry_for_ms / MS_PER_S), a->o.term_id);
        return;
    }
    uint64_t max = BACKOFF_MIN_MS;
    for (unsigned i = 0; i < a->attempt && max < BACKOFF_MAX_MS; i++)
        max *= 2;
    if (max > BACKOFF_MAX_MS)
        max = BACKOFF_MAX_MS;
    uint64_t ms = max / 2 + (uint64_t)rand() % (max / 2 + 1);
    a->attempt++;
    (void)uv_timer_start(&a->retry, on_retry, ms, 0);
}

static void ws_closed(void *ud, struct cli_ws *ws, int opened, unsigned st, const char *why)
{
    struct att *a = ud;
    if (ws != a->ws)
        return;
    a->ws = NULL;
    if (a->linked) {
        ep_link_down(a->ep);
        a->linked = 0;
        (void)uv_timer_stop(&a->tick);
    }
    if (a->done) {
        if (!a->stopping) {
            a->stopping = 1;
            uv_stop(a->loop);
        }
        return;
    }
    if (!opened && (st == HTTP_UNAUTHORIZED || st == HTTP_FORBIDDEN || st == HTTP_NOT_FOUND)) {
        finish(a, cli_exit_of_status(st));
        if (st == HTTP_NOT_FOUND)
            status(a, "no such live terminal: %s", a->o.term_id);
        else
            status(a, "attach refused (%u): %s", st, cli_status_hint(st));
        return;
    }
    if (!a->ever_linked) {
        finish(a, st ? cli_exit_of_status(st) : CLI_EXIT_DOWN);
        if (st)
            status(a, "attach refused (%u): %s", st, cli_status_hint(st));
        else
            status(a, "cannot reach the server: %s", why);
        return;
    }
    if (!a->down_reported) {
        a->down_reported = 1;
        status(a, "connection lost (%s); reconnecting", why);
    }
    (void)opened;
    schedule_retry(a);
}

static void connect_ws(struct att *a)
{
    if (a->done || a->ws)
        return;
    static const struct cli_ws_handler h0 = {NULL, ws_open, ws_message, ws_writable, ws_closed};
    struct cli_ws_handler h = h0;
    h.ud = a;
    struct cli_ws *ws = NULL;
    a->ws = NULL;
    int rc = cli_ws_open(a->net, a->path, &h, &ws);
    if (rc == AL_OK) {
        a->ws = ws;
        return;
    }
    /* the attempt could not even start (its on_closed may have run) */
    if (!a->ever_linked) {
        finish(a, CLI_EXIT_DOWN);
        status(a, "cannot start a connection to the server");
        return;
    }
    schedule_retry(a);
}

/* ---- ending ------------------------------------------------------------------ */

static void on_close_wait(uv_timer_t *h)
{
    struct att *a = h->data;
    if (a->ws) {
        cli_ws_drop(a->ws);
    }
    if (!a->stopping) {
        a->stopping = 1;
        uv_stop(a->loop);
    }
}

/* Decide the end: the terminal's modes go back first, so what is printed
 * next reads right. */
static void finish(struct att *a, int exit_status)
{
    if (a->done)
        return;
    a->done = 1;
    a->exit_status = exit_status;
    cli_tty_restore(&a->tty);
    poll_set(a, 0);
    (void)uv_timer_stop(&a->retry);
    if (a->ws && a->linked) {
        want_write(a); /* flush, then close 1000 */
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else if (a->ws) {
        cli_ws_drop(a->ws);
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else {
        a->stopping = 1;
        uv_stop(a->loop);
    }
}

static void on_signal(uv_signal_t *h, int signo)
{
    struct att *a = h->data;
    if (signo == SIGWINCH) {
        uint16_t c = a->cols, r = a->rows;
        local_size(a);
        if (a->size_known && (c != a->cols || r != a->rows) && !a->o.pipe_mode) {
            (void)ep_resize(a->ep, CH, a->cols, a->rows);
            want_write(a);
        }
        return;
    }
    if (a->o.forward_signals && !a->signalled && a->linked && a->writer && !a->done) {
        a->signalled = 1;
        (void)ep_signal(a->ep, CH, (uint8_t)signo, FR_SIG_GROUP);
        want_write(a);
        return;
    }
    if (a->done)
        return;
    a->detached = !a->exited;
    finish(a, CLI_EXIT_SIGNAL_BASE + signo);
    if (!a->o.quiet || !a->o.forward_signals)
        status(a, "signal %d: leaving %s (it keeps running)", signo, a->o.term_id);
}

/* ---- set-up and the loop ---------------------------------------------------- */

static int setup_stdin(struct att *a)
{
    if (uv_poll_init(a->loop, &a->in_poll, STDIN_FILENO) == 0) {
        a->in_poll_ok = 1;
        a->in_poll.data = a;
        return AL_OK;
    }
    /* a regular file (or /dev/null): always readable, read as credit allows */
    a->in_direct = 1;
    return AL_OK;
}

static void close_cb_noop(uv_handle_t *h)
{
    (void)h;
}

static void teardown(struct att *a)
{
    cli_tty_restore(&a->tty);
    uv_handle_t *hs[] = {(uv_handle_t *)&a->notice,    (uv_handle_t *)&a->tick,
                         (uv_handle_t *)&a->retry,     (uv_handle_t *)&a->close_wait,
                         (uv_handle_t *)&a->sig_winch, (uv_handle_t *)&a->sig_term,
                         (uv_handle_t *)&a->sig_int,   (uv_handle_t *)&a->sig_hup};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (!uv_is_closing(hs[i]))
            uv_close(hs[i], close_cb_noop);
    if (a->in_poll_ok)
        uv_close((uv_handle_t *)&a->in_poll, close_cb_noop);
    if (a->ws) {
        cli_ws_abandon(a->ws);
        a->ws = NULL;
    }
    for (int i = 0; i < 10 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
}

int cli_attach(uv_loop_t *loop, struct cli_net *net, const struct cli_attach_opts *o,
               int *exit_status, int *detached)
{
    struct att *a = calloc(1, sizeof *a);
    if (!a)
        return AL_E_NOMEM;
    a->loop = loop;
    a->net = net;
    a->o = *o;
    a->inbuf = malloc(IN_BUF);
    a->txbuf = malloc(cli_ws_pre() + AL_MAX_FRAME);
    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_CONTROLLER);
    ec.name = "airlock-cli";
    ec.on_event = on_event;
    ec.ud = a;
    if (!a->inbuf || !a->txbuf || ep_new(&ec, &a->ep) != AL_OK) {
        free(a->inbuf);
        free(a->txbuf);
        free(a);
        return AL_E_NOMEM;
    }
    (void)snprintf(a->path, sizeof a->path, "/v1/terminals/%s/attach%s", o->term_id,
                   o->read_only ? "?mode=read" : "");
    (void)ep_adopt(a->ep, CH, o->pipe_mode ? FR_MODE_PIPES : FR_MODE_PTY, 0, 0);
    if (!o->pipe_mode) {
        local_size(a);
        if (a->size_known)
            (void)ep_resize(a->ep, CH, a->cols, a->rows);
        if (cli_tty_raw(&a->tty, STDIN_FILENO) == AL_OK)
            a->interactive = 1;
    }
    cli_escape_init(&a->esc, a->interactive ? o->escape : -1);
    uv_timer_t *ts[] = {&a->tick, &a->retry, &a->close_wait, &a->notice};
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
        (void)uv_signal_start(sigs[i].h, on_signal, sigs[i].signo);
    }
    (void)setup_stdin(a);
    connect_ws(a);
    if (!a->done || !a->stopping)
        (void)uv_run(loop, UV_RUN_DEFAULT);
    teardown(a);
    *exit_status = a->exit_status;
    *detached = a->detached;
    ep_free(a->ep);
    free(a->inbuf);
    free(a->txbuf);
    free(a);
    return AL_OK;
}
