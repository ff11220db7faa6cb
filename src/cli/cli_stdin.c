/*
 * cli_stdin: the attach session's local input (cli_session.h): stdin read
 * as the endpoint's credit allows (a terminal also while disconnected, so
 * that the escapes still work), through the escape filter (cli_escape)
 * and its actions (detach, take over, help) when interactive, held in
 * cli_input until this connection's ROLE makes this client the writer,
 * then written to the endpoint; stdin's end goes after it (pipes only).
 *
 * Not here: opening stdin (cli_attach.c), raw mode (cli_tty).
 */
#include "cli_stdin.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "al_err.h"
#include "cli_err.h"
#include "cli_link.h"
#include "cli_output.h"
#include "cli_session.h"

static void on_in_poll(uv_poll_t *h, int st, int events);

void cli_stdin_poll(struct cli_session *a, int on)
{
    if (!a->in_poll_ok || a->in_poll_on == on)
        return;
    a->in_poll_on = on;
    if (on)
        (void)uv_poll_start(&a->in_poll, UV_READABLE, on_in_poll);
    else
        (void)uv_poll_stop(&a->in_poll);
}

static void handle_escape_action(struct cli_session *a, enum cli_esc_action act)
{
    switch (act) {
    case CLI_ESC_DETACH:
        a->detached = 1;
        cli_session_finish(a, CLI_EXIT_OK);
        cli_output_give_up(a, NULL); /* leaving: not waiting for the screen */
        cli_output_after_end(a);
        cli_output_status(a, "detached from %s (it keeps running; airlock attach %s to come back)",
                          a->o.term_id, a->o.term_id);
        break;
    case CLI_ESC_TAKEOVER:
        if (a->o.read_only)
            cli_output_status(a, "read-only attach: cannot take over");
        else if (!a->linked || ep_takeover(a->ep, CH) != AL_OK)
            cli_output_status(a, "not connected: cannot take over now");
        cli_link_want_write(a);
        break;
    case CLI_ESC_HELP: {
        char e = (char)a->o.escape;
        cli_output_status(
            a, "escapes (after Enter): %c. detach  %ct take over  %c? help  %c%c send %c", e, e, e,
            e, e, e);
        break;
    }
    default:
        break;
    }
}

/* Whether input may go to the endpoint now: linked, and this connection's
 * ROLE made us the writer (input the endpoint holds when a ROLE comes is
 * dropped by it, so nothing goes before). */
static int can_send(const struct cli_session *a)
{
    return a->linked && a->role_known && a->writer && !a->done;
}

/* Keystrokes after the escape filter: held for the terminal, unless this
 * client is known to be a viewer (they never leave this side). */
static void keep_typed(struct cli_session *a, const uint8_t *p, size_t n)
{
    if (n == 0 || a->o.read_only || (a->role_known && !a->writer))
        return;
    size_t k = cli_input_hold(&a->in, p, n);
    if (k < n && !a->in_full_reported) {
        a->in_full_reported = 1;
        cli_output_status(a,
                          "input buffer full (%d bytes typed while not connected): keystrokes are "
                          "dropped until the connection is back",
                          CLI_HELD_INPUT_MAX);
    }
}

/* Bytes read from stdin: through the escape filter (interactive) into the
 * held input. */
static void take_input(struct cli_session *a, const uint8_t *p, size_t n)
{
    if (!a->interactive) {
        (void)cli_input_hold(&a->in, p, n); /* reads are sized to fit */
        return;
    }
    while (n > 0 && !a->done) {
        size_t used;
        enum cli_esc_action act;
        uint8_t tmp[READ_CHUNK + 2];
        size_t chunk = n < READ_CHUNK ? n : READ_CHUNK;
        size_t o = cli_escape_feed(&a->esc, p, chunk, tmp, sizeof tmp, &used, &act);
        keep_typed(a, tmp, o);
        p += used;
        n -= used;
        handle_escape_action(a, act);
    }
}

static void read_stdin(struct cli_session *a, size_t max)
{
    uint8_t buf[READ_CHUNK];
    if (max > sizeof buf)
        max = sizeof buf;
    if (max == 0)
        return;
    ssize_t r = read(a->in_fd, buf, max);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (r <= 0) {
        a->in_eof = 1;
        cli_stdin_poll(a, 0);
        if (a->interactive && !a->done) {
            cli_output_status(a, "the local terminal is gone: detaching");
            a->detached = 1;
            cli_session_finish(a, CLI_EXIT_OK);
        }
        return;
    }
    take_input(a, buf, (size_t)r);
}

/* How much stdin to read now (0: do not read). A terminal is read whenever
 * input cannot go to the server anyway (so that the escapes work while
 * disconnected; what does not fit is dropped and reported), or when the
 * held input has room; a pipe or file only as the credit allows. */
static size_t read_room(const struct cli_session *a)
{
    if (a->in_eof || a->done)
        return 0;
    size_t held = cli_input_held(&a->in);
    if (a->interactive) {
        if (!can_send(a))
            return READ_CHUNK;
        return held < CLI_HELD_INPUT_MAX ? CLI_HELD_INPUT_MAX - held : 0;
    }
    if (!can_send(a) || held > 0)
        return 0;
    size_t room = ep_writable(a->ep, CH, FR_STDIN);
    size_t copy_room = INPUT_COPY_MAX - cli_input_unacked(&a->in);
    if (room > copy_room)
        room = copy_room;
    return room < READ_CHUNK ? room : READ_CHUNK;
}

static void on_in_poll(uv_poll_t *h, int st, int events)
{
    struct cli_session *a = h->data;
    (void)events;
    if (st < 0) {
        a->in_eof = 1;
        cli_stdin_poll(a, 0);
    } else {
        read_stdin(a, read_room(a));
    }
    cli_stdin_pump(a);
}

/* Move held input into the endpoint, end stdin after it, and decide
 * whether to read more. */
void cli_stdin_pump(struct cli_session *a)
{
    if (a->done)
        return;
    for (;;) {
        if (can_send(a)) {
            struct ep_stream_info si;
            if (ep_stream_info(a->ep, CH, FR_STDIN, &si) == AL_OK) {
                cli_input_acked(&a->in, si.acked);
                const uint8_t *p;
                size_t n = cli_input_peek(&a->in, &p);
                long w = n ? ep_write(a->ep, CH, FR_STDIN, p, n) : 0;
                if (w > 0) {
                    cli_input_sent(&a->in, si.end, (size_t)w);
                    cli_link_want_write(a);
                }
            }
            if (cli_input_held(&a->in) == 0)
                a->in_full_reported = 0;
            if (a->in_eof && cli_input_held(&a->in) == 0 && !a->eof_sent && !a->interactive) {
                if (ep_eof(a->ep, CH, FR_STDIN) == AL_OK)
                    a->eof_sent = 1;
                cli_link_want_write(a);
            }
        }
        size_t room = read_room(a);
        if (a->in_direct) {
            if (room == 0)
                break; /* room is bounded by the credit and the ring: this loop ends */
            read_stdin(a, room);
            continue;
        }
        cli_stdin_poll(a, room > 0);
        break;
    }
}
