/*
 * cli_output: the attach session's local output (cli_session.h): what the
 * endpoint delivers for stdout and stderr, queued per descriptor
 * (cli_outq) and written as the descriptor takes it, credit granted back
 * for bytes written only; the session's status lines; and how the end is
 * shown.
 *
 * Nothing here blocks the loop on the local side: a terminal or pipe that
 * takes no output leaves it queued (at most OUT_MAX bytes: the server
 * cannot send more than the credit, and a fresh snapshot supersedes what
 * was not begun), while pings, input and the other stream go on.
 *
 * Status lines go through the same queues (stdout's when stderr is the
 * same terminal, so they keep their place). Lines of the end wait until
 * the screen has taken what came before them, so that the local modes are
 * restored first (cli_tty_restore waits for the terminal to drain).
 *
 * Not here: opening the descriptors and the last writes at the teardown
 * (cli_attach.c), reading stdin (cli_stdin.c).
 */
#include "cli_output.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "al_err.h"
#include "cli_err.h"
#include "cli_link.h"
#include "cli_session.h"

static void out_flush(struct cli_outfd *o);

/* A status line onto the status queue, framed for the terminal's mode. */
static void emit_line(struct cli_session *a, const char *line)
{
    char buf[STATUS_MAX + 32];
    int n = a->tty.raw ? snprintf(buf, sizeof buf, "\r\n[airlock: %s]\r\n", line)
                       : snprintf(buf, sizeof buf, "airlock: %s\n", line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1;
    struct cli_outfd *o = a->status_out;
    if (o->failed || cli_outq_push(&o->q, (const uint8_t *)buf, (size_t)n, CLI_OUTQ_NOCREDIT))
        return; /* no room: a status line is not worth the session */
    out_flush(o);
}

/* One status line on stderr (or the screen), whatever mode the terminal
 * is in. Once the end is decided, lines wait for the screen to drain. */
void cli_output_status(struct cli_session *a, const char *fmt, ...)
{
    char line[STATUS_MAX];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (a->done && !a->restored) {
        size_t n = strlen(line);
        if (n + 1 <= sizeof a->tail - a->tail_len) {
            memcpy(a->tail + a->tail_len, line, n);
            a->tail[a->tail_len + n] = '\n';
            a->tail_len += n + 1;
        }
        return;
    }
    emit_line(a, line);
}

/* Credit back for bytes written (or dropped on purpose). */
void cli_output_grant(struct cli_session *a, const size_t credit[CLI_OUTQ_TAGS])
{
    int any = 0;
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (credit[s]) {
            (void)ep_consume(a->ep, CH, s, credit[s]);
            any = 1;
        }
    }
    if (any)
        cli_link_want_write(a);
}

static void on_out_poll(uv_poll_t *h, int st, int events);

static void out_poll_set(struct cli_outfd *o, int on)
{
    if (!o->polled || o->poll_on == on)
        return;
    o->poll_on = on;
    if (on)
        (void)uv_poll_start(&o->poll, UV_WRITABLE, on_out_poll);
    else
        (void)uv_poll_stop(&o->poll);
}

/* Write what the descriptor takes now; the rest waits for it to be
 * writable. Credit goes back for what was written. */
static void out_flush(struct cli_outfd *o)
{
    struct cli_session *a = o->a;
    size_t credit[CLI_OUTQ_TAGS] = {0};
    int progress = 0;
    while (cli_outq_len(&o->q) > 0 && !o->failed) {
        struct iovec iov[CLI_OUTQ_IOV_MAX];
        int n = cli_outq_iov(&o->q, iov, CLI_OUTQ_IOV_MAX);
        ssize_t w = writev(o->fd, iov, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w <= 0) {
            o->failed = 1; /* the reader is gone: what it would have had is dropped */
            (void)cli_outq_clear(&o->q, credit);
            break;
        }
        cli_outq_advance(&o->q, (size_t)w, credit);
        progress = 1;
    }
    out_poll_set(o, cli_outq_len(&o->q) > 0 && !o->failed);
    cli_output_grant(a, credit);
    if (progress && a->done && a->interactive && !a->restored)
        (void)uv_timer_again(&a->drain);
    if (o->failed && o == &a->out[0] && !a->done && !a->o.pipe_mode) {
        a->detached = 1; /* the screen is gone: leave the terminal running */
        cli_session_finish(a, CLI_EXIT_OK);
        return;
    }
    cli_output_after_end(a);
}

static void on_out_poll(uv_poll_t *h, int st, int events)
{
    struct cli_outfd *o = h->data;
    (void)events;
    if (st < 0) {
        size_t credit[CLI_OUTQ_TAGS] = {0};
        o->failed = 1;
        (void)cli_outq_clear(&o->q, credit);
        cli_output_grant(o->a, credit);
    }
    out_flush(o);
}

/* Queue bytes for fd 1 or 2 and write what can go now. */
void cli_output_push(struct cli_session *a, struct cli_outfd *o, const uint8_t *p, size_t n,
                     int tag)
{
    /* output after the end (a detach, a signal) is not shown: the local
     * terminal is someone else's again */
    if (o->failed || (a->done && a->restored && tag != CLI_OUTQ_NOCREDIT)) {
        if (tag != CLI_OUTQ_NOCREDIT)
            (void)ep_consume(a->ep, CH, (unsigned)tag, n);
        return;
    }
    int rc = cli_outq_push(&o->q, p, n, tag);
    if (rc == AL_E_TOOBIG && !a->done) {
        cli_session_finish(a, CLI_EXIT_PROTO);
        cli_output_status(a, "the server sent more output than this client's credit allows");
        return;
    }
    if (rc != AL_OK && !a->done) {
        cli_session_finish(a, CLI_EXIT_OTHER);
        cli_output_status(a, "out of memory for output");
        return;
    }
    out_flush(o);
}

/* Stop waiting for the local side: what it did not take is dropped. */
void cli_output_give_up(struct cli_session *a, const char *why)
{
    if (a->gave_up_output)
        return;
    a->gave_up_output = 1;
    size_t dropped = 0, credit[CLI_OUTQ_TAGS] = {0};
    for (int i = 0; i < 2; i++) {
        dropped += cli_outq_clear(&a->out[i].q, credit);
        out_poll_set(&a->out[i], 0);
    }
    (void)uv_timer_stop(&a->drain);
    if (dropped && why)
        cli_output_status(a, "%zu bytes of output were not shown: %s", dropped, why);
}

/* After the end: restore the modes once the screen has what came before,
 * show the lines of the end, and stop when all is out. */
void cli_output_after_end(struct cli_session *a)
{
    if (!a->done)
        return;
    if (!a->restored && (cli_outq_len(&a->out[0].q) == 0 || a->out[0].failed)) {
        a->restored = 1;
        (void)uv_timer_stop(&a->drain);
        cli_tty_restore(&a->tty);
        size_t k = 0;
        while (k < a->tail_len) {
            char *nl = memchr(a->tail + k, '\n', a->tail_len - k);
            *nl = 0;
            emit_line(a, a->tail + k); /* re-enters after_output: restored is set */
            k = (size_t)(nl - a->tail) + 1;
        }
        a->tail_len = 0;
    }
    int drained = a->gave_up_output || ((cli_outq_len(&a->out[0].q) == 0 || a->out[0].failed) &&
                                        (cli_outq_len(&a->out[1].q) == 0 || a->out[1].failed));
    if (a->restored && drained && a->ws_over && !a->stopping) {
        a->stopping = 1;
        uv_stop(a->loop);
    }
}

void cli_output_on_drain_stall(uv_timer_t *h)
{
    struct cli_session *a = h->data;
    char why[64];
    (void)snprintf(why, sizeof why, "the local terminal took none of it for %d s",
                   CLI_DRAIN_STALL_S);
    cli_output_give_up(a, why);
    cli_output_after_end(a);
}
