/*
 * cli_session: what the endpoint tells the attach session (cli_session.h)
 * and how the session ends. The events: output and snapshots to the local
 * descriptors, gaps, the role (writer or viewer, and the notice that says
 * so, shown after the screen's redraw), the terminal's exit, its loss or
 * closing. The end: cli_session_finish() decides it once; signals resize,
 * are forwarded to the terminal once (run), or leave it running.
 *
 * Not here: the descriptors (cli_stdin.c, cli_output.c), the socket
 * (cli_link.c), the set-up (cli_attach.c).
 */
#include "cli_session.h"

#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "al_err.h"
#include "cli_err.h"
#include "cli_link.h"
#include "cli_output.h"
#include "cli_stdin.h"

#define CLOSE_WAIT_MS 1500 /* after a detach or exit, for the close to go out */
#define NOTICE_DELAY_MS 300
#define MS_PER_S 1000

/* ---- endpoint events ------------------------------------------------------ */

void cli_session_local_size(struct cli_session *a)
{
    uint16_t c, r;
    if (cli_tty_size(STDOUT_FILENO, &c, &r) != AL_OK && cli_tty_size(STDIN_FILENO, &c, &r) != AL_OK)
        return;
    a->cols = c;
    a->rows = r;
    a->size_known = 1;
}

static void show_notice(struct cli_session *a)
{
    if (!a->notice_text[0])
        return;
    cli_output_status(a, "%s", a->notice_text);
    a->notice_text[0] = 0;
    (void)uv_timer_stop(&a->notice);
}

static void on_notice(uv_timer_t *h)
{
    show_notice(h->data);
}

static void on_role(struct cli_session *a, const struct ep_event *ev)
{
    int was = a->writer, first = !a->ever_role;
    a->role_known = 1;
    a->ever_role = 1;
    a->writer = ev->state == FR_WRITER;
    /* stdin goes on at ev->offset: what the host lacks of ours and the
     * endpoint dropped is sent again, in front of what was typed since
     * (the endpoint resends what it kept); a viewer sends nothing */
    struct ep_stream_info si;
    uint64_t ep_end = ep_stream_info(a->ep, CH, FR_STDIN, &si) == AL_OK ? si.end : ev->offset;
    size_t n = cli_input_role(&a->in, ev->offset, ep_end, a->writer);
    if (a->writer && n && a->eof_sent)
        cli_output_status(a,
                          "%zu bytes of input sent just before the connection dropped were lost "
                          "(its end had been sent already)",
                          n);
    else if (!a->writer && n && !a->o.read_only)
        cli_output_status(a, "%zu typed bytes were not sent: %s has another writer", n,
                          a->o.term_id);
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

/* Bytes that redraw the whole screen as of stdout offset ev->offset. When
 * that is where our stdout stands (the normal case), what the screen has
 * not begun to take is superseded: dropped, its credit granted. */
static void on_snapshot(struct cli_session *a, const struct ep_event *ev)
{
    if (a->done && a->restored)
        return; /* the end was shown: no redraw after it */
    struct ep_stream_info si;
    if (ep_stream_info(a->ep, CH, FR_STDOUT, &si) == AL_OK && si.end == ev->offset) {
        size_t credit[CLI_OUTQ_TAGS] = {0};
        (void)cli_outq_drop_unstarted(&a->out[0].q, credit);
        cli_output_grant(a, credit);
    }
    cli_output_push(a, &a->out[0], ev->data, ev->len, CLI_OUTQ_NOCREDIT);
    show_notice(a);
}

static void on_exit_event(struct cli_session *a, const struct ep_event *ev)
{
    a->exited = 1;
    int st = ev->signo ? CLI_EXIT_SIGNAL_BASE + ev->signo : ev->exit_code;
    cli_session_finish(a, st);
    if (a->o.quiet)
        return;
    if (ev->signo)
        cli_output_status(a, "%s was killed by signal %d%s", a->o.term_id, ev->signo,
                          ev->core ? " (core dumped)" : "");
    else
        cli_output_status(a, "%s exited with status %d", a->o.term_id, ev->exit_code);
}

void cli_session_on_event(void *ud, const struct ep_event *ev)
{
    struct cli_session *a = ud;
    switch (ev->type) {
    case EP_EV_DATA:
        if (ev->stream == FR_STDOUT || ev->stream == FR_STDERR)
            cli_output_push(a, &a->out[ev->stream == FR_STDOUT ? 0 : 1], ev->data, ev->len,
                            (int)ev->stream);
        break;
    case EP_EV_SNAPSHOT:
        on_snapshot(a, ev);
        break;
    case EP_EV_GAP:
        if (ev->offset > 0)
            cli_output_status(a, "%llu bytes of %s were skipped (this client fell behind)",
                              (unsigned long long)(ev->to - ev->offset),
                              ev->stream == FR_STDERR ? "stderr" : "output");
        break;
    case EP_EV_EXIT:
        on_exit_event(a, ev);
        break;
    case EP_EV_ROLE:
        on_role(a, ev);
        cli_stdin_pump(a);
        break;
    case EP_EV_WRITABLE:
        if (ev->stream == FR_STDIN)
            cli_stdin_pump(a);
        break;
    case EP_EV_ATTACHED:
        if (a->down_reported && !a->o.quiet)
            cli_output_status(a, "reconnected to %s", a->o.term_id);
        a->down_reported = 0;
        backoff_reset(&a->retry_delay);
        break;
    case EP_EV_LOST:
        if (!a->done) {
            cli_session_finish(a, CLI_EXIT_NOTFOUND);
            cli_output_status(a, "the server no longer has terminal %s", a->o.term_id);
        }
        break;
    case EP_EV_CLOSED:
        if (!a->done) {
            cli_session_finish(a, CLI_EXIT_OTHER);
            cli_output_status(a, "terminal %s was closed", a->o.term_id);
        }
        break;
    case EP_EV_ERROR:
        if (ev->code == FR_ERR_FORBIDDEN)
            cli_output_status(a, "refused: %.*s", (int)ev->len, (const char *)ev->data);
        else if (!a->done)
            cli_output_status(a, "server error %u: %.*s", ev->code, (int)ev->len,
                              (const char *)ev->data);
        break;
    default:
        break;
    }
}

/* ---- ending ------------------------------------------------------------------ */

static void on_close_wait(uv_timer_t *h)
{
    struct cli_session *a = h->data;
    if (a->ws)
        cli_ws_drop(a->ws);
    a->ws_over = 1;
    cli_output_after_end(a);
}

/* Decide the end. The loop stops once the close went out and the local
 * side has what was for it; the terminal's modes go back as soon as the
 * screen has taken what came before, so what is printed next reads right. */
void cli_session_finish(struct cli_session *a, int exit_status)
{
    if (a->done)
        return;
    a->done = 1;
    a->exit_status = exit_status;
    cli_stdin_poll(a, 0);
    (void)uv_timer_stop(&a->retry);
    if (a->ws && a->linked) {
        cli_link_want_write(a); /* flush, then close 1000 */
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else if (a->ws) {
        cli_ws_drop(a->ws);
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else {
        a->ws_over = 1;
    }
    if (a->interactive) {
        uint64_t ms = (uint64_t)CLI_DRAIN_STALL_S * MS_PER_S;
        (void)uv_timer_start(&a->drain, cli_output_on_drain_stall, ms, ms);
    }
    cli_output_after_end(a);
}

void cli_session_on_signal(uv_signal_t *h, int signo)
{
    struct cli_session *a = h->data;
    if (signo == SIGWINCH) {
        uint16_t c = a->cols, r = a->rows;
        cli_session_local_size(a);
        if (a->size_known && (c != a->cols || r != a->rows) && !a->o.pipe_mode) {
            (void)ep_resize(a->ep, CH, a->cols, a->rows);
            cli_link_want_write(a);
        }
        return;
    }
    if (a->o.forward_signals && !a->signalled && a->linked && a->writer && !a->done) {
        a->signalled = 1;
        (void)ep_signal(a->ep, CH, (uint8_t)signo, FR_SIG_GROUP);
        cli_link_want_write(a);
        return;
    }
    if (a->done) { /* still writing out: leave now */
        cli_output_give_up(a, NULL);
        cli_output_after_end(a);
        return;
    }
    a->detached = !a->exited;
    cli_session_finish(a, CLI_EXIT_SIGNAL_BASE + signo);
    cli_output_give_up(a, NULL); /* asked to leave: not waiting for the screen */
    cli_output_after_end(a);
    if (!a->o.quiet || !a->o.forward_signals)
        cli_output_status(a, "signal %d: leaving %s (it keeps running)", signo, a->o.term_id);
}
