/*
 * cli_link: the attach session's connection to airlockd (cli_session.h):
 * one WebSocket at a time (cli_net), the endpoint's frames written when it
 * is writable and its deadlines ticked, and after a drop, reconnecting
 * with backoff until the session's retry_for_ms is over (the endpoint then
 * resumes exactly where it was). A refused upgrade (401, 403, 404), or a
 * failure before the first link, ends the session.
 *
 * Not here: what the endpoint's events do (cli_session.c).
 */
#include "cli_link.h"

#include <stdint.h>

#include "al_err.h"
#include "cli_err.h"
#include "cli_output.h"
#include "cli_session.h"
#include "cli_stdin.h"

#define NS_PER_US 1000
#define US_PER_MS 1000
#define MS_PER_S 1000
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_NOT_FOUND 404

static uint64_t now_us(void)
{
    return uv_hrtime() / NS_PER_US;
}

void cli_link_want_write(struct cli_session *a)
{
    if (a->ws && a->linked)
        cli_ws_want_write(a->ws);
}

static void schedule_tick(struct cli_session *a);

static void on_tick(uv_timer_t *h)
{
    struct cli_session *a = h->data;
    if (a->linked)
        ep_tick(a->ep, now_us());
    cli_link_want_write(a);
    schedule_tick(a);
}

static void schedule_tick(struct cli_session *a)
{
    uint64_t next = ep_next_deadline(a->ep), now = now_us();
    if (!a->linked || next == UINT64_MAX) {
        (void)uv_timer_stop(&a->tick);
        return;
    }
    uint64_t ms = next > now ? (next - now + US_PER_MS - 1) / US_PER_MS : 0;
    (void)uv_timer_start(&a->tick, on_tick, ms, 0);
}

static void flush_output(struct cli_session *a)
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
        if (code == AL_CLOSE_PROTOCOL || code == AL_CLOSE_VERSION || code == AL_CLOSE_LIMIT) {
            if (!a->done) {
                cli_session_finish(a, CLI_EXIT_PROTO);
                cli_output_status(a, "protocol error with the server: %s", reason ? reason : "?");
            }
        }
    } else if (a->done) {
        cli_ws_close(a->ws, AL_CLOSE_NORMAL, a->detached ? "detached" : "done");
    }
}

static void ws_open(void *ud, struct cli_ws *ws)
{
    struct cli_session *a = ud;
    if (ws != a->ws)
        return;
    a->linked = 1;
    a->ever_linked = 1;
    a->role_known = 0;
    a->down_since_us = 0;
    ep_link_up(a->ep, now_us());
    schedule_tick(a);
    cli_link_want_write(a);
}

static void ws_message(void *ud, struct cli_ws *ws, const uint8_t *msg, size_t len)
{
    struct cli_session *a = ud;
    if (ws != a->ws || !a->linked)
        return;
    (void)ep_input(a->ep, msg, len, now_us());
    schedule_tick(a);
    cli_link_want_write(a);
}

static void ws_refused(void *ud, struct cli_ws *ws, uint16_t code, const char *why)
{
    struct cli_session *a = ud;
    if (ws != a->ws)
        return;
    if (!a->linked || ep_fail(a->ep, code, why) != AL_OK)
        cli_ws_close(ws, ep_close_code_of(code), why);
    cli_link_want_write(a);
}

static void ws_writable(void *ud, struct cli_ws *ws)
{
    struct cli_session *a = ud;
    if (ws != a->ws)
        return;
    flush_output(a);
}

static void on_retry(uv_timer_t *h)
{
    cli_link_connect(h->data);
}

static void schedule_retry(struct cli_session *a)
{
    uint64_t now = now_us();
    if (!a->down_since_us)
        a->down_since_us = now;
    if (now - a->down_since_us >= a->o.retry_for_ms * US_PER_MS) {
        cli_session_finish(a, CLI_EXIT_DOWN);
        cli_output_status(
            a, "the server has been out of reach for %llu s: giving up (%s keeps running)",
            (unsigned long long)(a->o.retry_for_ms / MS_PER_S), a->o.term_id);
        return;
    }
    (void)uv_timer_start(&a->retry, on_retry, backoff_next(&a->retry_delay), 0);
}

static void ws_closed(void *ud, struct cli_ws *ws, int opened, unsigned st, const char *why)
{
    struct cli_session *a = ud;
    if (ws != a->ws)
        return;
    a->ws = NULL;
    a->role_known = 0; /* input is held until the next connection's ROLE */
    if (a->linked) {
        ep_link_down(a->ep);
        a->linked = 0;
        (void)uv_timer_stop(&a->tick);
    }
    if (a->done) {
        a->ws_over = 1;
        cli_output_after_end(a);
        return;
    }
    if (!opened && (st == HTTP_UNAUTHORIZED || st == HTTP_FORBIDDEN || st == HTTP_NOT_FOUND)) {
        cli_session_finish(a, cli_exit_of_status(st));
        if (st == HTTP_NOT_FOUND)
            cli_output_status(a, "no such live terminal: %s", a->o.term_id);
        else
            cli_output_status(a, "attach refused (%u): %s", st, cli_status_hint(st));
        return;
    }
    if (!a->ever_linked) {
        cli_session_finish(a, st ? cli_exit_of_status(st) : CLI_EXIT_DOWN);
        if (st)
            cli_output_status(a, "attach refused (%u): %s", st, cli_status_hint(st));
        else
            cli_output_status(a, "cannot reach the server: %s%s", why, cli_net_hint(a->net, why));
        return;
    }
    if (!a->down_reported) {
        a->down_reported = 1;
        cli_output_status(a, "connection lost (%s); reconnecting", why);
    }
    (void)opened;
    schedule_retry(a);
    cli_stdin_pump(a); /* keep reading the terminal: escapes, keystrokes to hold */
}

void cli_link_connect(struct cli_session *a)
{
    if (a->done || a->ws)
        return;
    static const struct cli_ws_handler h0 = {
        .on_open = ws_open,
        .on_message = ws_message,
        .on_writable = ws_writable,
        .on_closed = ws_closed,
        .on_refused = ws_refused,
    };
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
        cli_session_finish(a, CLI_EXIT_DOWN);
        cli_output_status(a, "cannot start a connection to the server");
        return;
    }
    schedule_retry(a);
}
