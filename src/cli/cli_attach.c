/*
 * cli_attach: see cli_attach.h.
 *
 * Data model: struct att is one session (no globals). It owns the
 * endpoint (channel 1 = the terminal, adopted at offset 0 so the first
 * ATTACH asks for everything; the endpoint then resumes exactly after a
 * drop), the current WebSocket (NULL between connections), the local
 * terminal's saved modes, and the two local directions:
 *
 *   stdin --read--> escape filter --> cli_input (held, then a copy until
 *         acknowledged) --ep_write--> ep
 *   ep --DATA/SNAPSHOT--> cli_outq of fd 1 or 2 --writev (non-blocking)-->
 *         the descriptor; ep_consume() only for bytes written
 *
 * Nothing here blocks the loop on the local side: a terminal or pipe that
 * takes no output leaves it queued (at most OUT_MAX bytes: the server
 * cannot send more than the credit, and a fresh snapshot supersedes what
 * was not begun), while pings, input and the other stream go on. A
 * terminal's descriptors are opened again for this process (their own
 * O_NONBLOCK); the flags of fds 0-2 are put back as they were at the end.
 *
 * Status lines go through the same queues (stdout's when stderr is the
 * same terminal, so they keep their place). Lines of the end wait until
 * the screen has taken what came before them, so that the local modes are
 * restored first (cli_tty_restore waits for the terminal to drain).
 *
 * Units: times in microseconds from uv_hrtime(); sizes in bytes.
 */
#include "cli_attach.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "backoff.h"
#include "cli_err.h"
#include "cli_escape.h"
#include "cli_input.h"
#include "cli_outq.h"
#include "cli_tty.h"
#include "endpoint.h"

#define CH 1
#define READ_CHUNK CLI_HELD_INPUT_MAX /* one read() of stdin */
/* stdin given to the endpoint but not acknowledged: as much as its ring */
#define INPUT_COPY_MAX EP_DEFAULT_TX_RING
/* one output queue: a window of data, a snapshot being written and a
 * fresh one behind it, and room for status lines */
#define OUT_MAX (2 * AL_MAX_SNAPSHOT + EP_DEFAULT_WINDOW + (64u << 10))
#define TAIL_MAX 2048 /* status lines waiting for the screen to drain */
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define CLOSE_WAIT_MS 1500 /* after a detach or exit, for the close to go out */
#define STATUS_MAX 512
#define NOTICE_DELAY_MS 300
#define PATH_MAX_LEN 512
#define TTY_PATH_MAX 256
#define NS_PER_US 1000
#define US_PER_MS 1000
#define MS_PER_S 1000
#define HTTP_UNAUTHORIZED 401
#define HTTP_FORBIDDEN 403
#define HTTP_NOT_FOUND 404

_Static_assert(FR_NSTREAMS <= CLI_OUTQ_TAGS, "a credit tag per stream");

struct att;

/* One local output descriptor (fd 1 or 2) and what waits for it. */
struct outfd {
    struct att *a;
    int fd;       /* where writes go: our own open of the terminal, or the fd */
    int reopened; /* fd is ours: close it at the end */
    int polled;   /* non-blocking with a uv_poll_t; otherwise blocking writes */
    int poll_on, failed;
    uv_poll_t poll;
    struct cli_outq q;
};

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
    int saved_fl[3], saved_ok[3]; /* fds 0-2's flags at the start */
    int interactive;              /* stdin is a terminal in raw mode */
    struct cli_tty tty;
    int size_known;
    uint16_t cols, rows;
    struct cli_escape esc;
    int in_fd, in_reopened;
    uv_poll_t in_poll;
    int in_poll_ok, in_poll_on, in_direct; /* direct: a file, read without polling */
    int in_eof, eof_sent;
    struct cli_input in;
    int in_full_reported;
    int writer, role_known; /* role_known: a ROLE came on this connection */
    int ever_role;
    uint8_t *txbuf;
    struct outfd out[2]; /* stdout, stderr */
    struct outfd *status_out;
    char tail[TAIL_MAX]; /* lines of the end, '\n'-separated */
    size_t tail_len;
    int restored; /* the local modes are back and the tail was shown */
    /* timers and signals */
    uv_timer_t tick, retry, close_wait, notice, drain;
    char notice_text[STATUS_MAX]; /* a role notice, shown after the screen redraw */
    uv_signal_t sig_winch, sig_term, sig_int, sig_hup;
    int signalled;
    /* reconnecting */
    struct backoff retry_delay; /* between reconnections */
    uint64_t down_since_us;
    int down_reported;
    /* the end */
    int done, stopping, ws_over, gave_up_output;
    int exit_status, detached;
    int exited;
};

static uint64_t now_us(void)
{
    return uv_hrtime() / NS_PER_US;
}

static void out_flush(struct outfd *o);

/* A status line onto the status queue, framed for the terminal's mode. */
static void emit_line(struct att *a, const char *line)
{
    char buf[STATUS_MAX + 32];
    int n = a->tty.raw ? snprintf(buf, sizeof buf, "\r\n[airlock: %s]\r\n", line)
                       : snprintf(buf, sizeof buf, "airlock: %s\n", line);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1;
    struct outfd *o = a->status_out;
    if (o->failed || cli_outq_push(&o->q, (const uint8_t *)buf, (size_t)n, CLI_OUTQ_NOCREDIT))
        return; /* no room: a status line is not worth the session */
    out_flush(o);
}

/* One status line on stderr (or the screen), whatever mode the terminal
 * is in. Once the end is decided, lines wait for the screen to drain. */
static void status(struct att *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void status(struct att *a, const char *fmt, ...)
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

/* ---- local output ---------------------------------------------------------- */

static void want_write(struct att *a);
static void finish(struct att *a, int exit_status);
static void after_output(struct att *a);

/* Credit back for bytes written (or dropped on purpose). */
static void grant(struct att *a, const size_t credit[CLI_OUTQ_TAGS])
{
    int any = 0;
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (credit[s]) {
            (void)ep_consume(a->ep, CH, s, credit[s]);
            any = 1;
        }
    }
    if (any)
        want_write(a);
}

static void on_out_poll(uv_poll_t *h, int st, int events);

static void out_poll_set(struct outfd *o, int on)
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
static void out_flush(struct outfd *o)
{
    struct att *a = o->a;
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
    grant(a, credit);
    if (progress && a->done && a->interactive && !a->restored)
        (void)uv_timer_again(&a->drain);
    if (o->failed && o == &a->out[0] && !a->done && !a->o.pipe_mode) {
        a->detached = 1; /* the screen is gone: leave the terminal running */
        finish(a, CLI_EXIT_OK);
        return;
    }
    after_output(a);
}

static void on_out_poll(uv_poll_t *h, int st, int events)
{
    struct outfd *o = h->data;
    (void)events;
    if (st < 0) {
        size_t credit[CLI_OUTQ_TAGS] = {0};
        o->failed = 1;
        (void)cli_outq_clear(&o->q, credit);
        grant(o->a, credit);
    }
    out_flush(o);
}

/* Queue bytes for fd 1 or 2 and write what can go now. */
static void out_push(struct att *a, struct outfd *o, const uint8_t *p, size_t n, int tag)
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
        finish(a, CLI_EXIT_PROTO);
        status(a, "the server sent more output than this client's credit allows");
        return;
    }
    if (rc != AL_OK && !a->done) {
        finish(a, CLI_EXIT_OTHER);
        status(a, "out of memory for output");
        return;
    }
    out_flush(o);
}

/* Stop waiting for the local side: what it did not take is dropped. */
static void give_up_output(struct att *a, const char *why)
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
        status(a, "%zu bytes of output were not shown: %s", dropped, why);
}

/* After the end: restore the modes once the screen has what came before,
 * show the lines of the end, and stop when all is out. */
static void after_output(struct att *a)
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

static void on_drain_stall(uv_timer_t *h)
{
    struct att *a = h->data;
    char why[64];
    (void)snprintf(why, sizeof why, "the local terminal took none of it for %d s",
                   CLI_DRAIN_STALL_S);
    give_up_output(a, why);
    after_output(a);
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
        give_up_output(a, NULL); /* leaving: not waiting for the screen */
        after_output(a);
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

/* Whether input may go to the endpoint now: linked, and this connection's
 * ROLE made us the writer (input the endpoint holds when a ROLE comes is
 * dropped by it, so nothing goes before). */
static int can_send(const struct att *a)
{
    return a->linked && a->role_known && a->writer && !a->done;
}

/* Keystrokes after the escape filter: held for the terminal, unless this
 * client is known to be a viewer (they never leave this side). */
static void keep_typed(struct att *a, const uint8_t *p, size_t n)
{
    if (n == 0 || a->o.read_only || (a->role_known && !a->writer))
        return;
    size_t k = cli_input_hold(&a->in, p, n);
    if (k < n && !a->in_full_reported) {
        a->in_full_reported = 1;
        status(a,
               "input buffer full (%d bytes typed while not connected): keystrokes are "
               "dropped until the connection is back",
               CLI_HELD_INPUT_MAX);
    }
}

/* Bytes read from stdin: through the escape filter (interactive) into the
 * held input. */
static void take_input(struct att *a, const uint8_t *p, size_t n)
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

static void read_stdin(struct att *a, size_t max)
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

/* How much stdin to read now (0: do not read). A terminal is read whenever
 * input cannot go to the server anyway (so that the escapes work while
 * disconnected; what does not fit is dropped and reported), or when the
 * held input has room; a pipe or file only as the credit allows. */
static size_t read_room(const struct att *a)
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
    struct att *a = h->data;
    (void)events;
    if (st < 0) {
        a->in_eof = 1;
        poll_set(a, 0);
    } else {
        read_stdin(a, read_room(a));
    }
    pump_input(a);
}

/* Move held input into the endpoint, end stdin after it, and decide
 * whether to read more. */
static void pump_input(struct att *a)
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
                    want_write(a);
                }
            }
            if (cli_input_held(&a->in) == 0)
                a->in_full_reported = 0;
            if (a->in_eof && cli_input_held(&a->in) == 0 && !a->eof_sent && !a->interactive) {
                if (ep_eof(a->ep, CH, FR_STDIN) == AL_OK)
                    a->eof_sent = 1;
                want_write(a);
            }
        }
        size_t room = read_room(a);
        if (a->in_direct) {
            if (room == 0)
                break; /* room is bounded by the credit and the ring: this loop ends */
            read_stdin(a, room);
            continue;
        }
        poll_set(a, room > 0);
        break;
    }
}

/* ---- endpoint events ------------------------------------------------------ */

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
        status(a,
               "%zu bytes of input sent just before the connection dropped were lost "
               "(its end had been sent already)",
               n);
    else if (!a->writer && n && !a->o.read_only)
        status(a, "%zu typed bytes were not sent: %s has another writer", n, a->o.term_id);
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
static void on_snapshot(struct att *a, const struct ep_event *ev)
{
    if (a->done && a->restored)
        return; /* the end was shown: no redraw after it */
    struct ep_stream_info si;
    if (ep_stream_info(a->ep, CH, FR_STDOUT, &si) == AL_OK && si.end == ev->offset) {
        size_t credit[CLI_OUTQ_TAGS] = {0};
        (void)cli_outq_drop_unstarted(&a->out[0].q, credit);
        grant(a, credit);
    }
    out_push(a, &a->out[0], ev->data, ev->len, CLI_OUTQ_NOCREDIT);
    show_notice(a);
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
        if (ev->stream == FR_STDOUT || ev->stream == FR_STDERR)
            out_push(a, &a->out[ev->stream == FR_STDOUT ? 0 : 1], ev->data, ev->len,
                     (int)ev->stream);
        break;
    case EP_EV_SNAPSHOT:
        on_snapshot(a, ev);
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
        backoff_reset(&a->retry_delay);
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
    a->role_known = 0;
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

static void ws_refused(void *ud, struct cli_ws *ws, uint16_t code, const char *why)
{
    struct att *a = ud;
    if (ws != a->ws)
        return;
    if (!a->linked || ep_fail(a->ep, code, why) != AL_OK)
        cli_ws_close(ws, ep_close_code_of(code), why);
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
    (void)uv_timer_start(&a->retry, on_retry, backoff_next(&a->retry_delay), 0);
}

static void ws_closed(void *ud, struct cli_ws *ws, int opened, unsigned st, const char *why)
{
    struct att *a = ud;
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
        after_output(a);
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
            status(a, "cannot reach the server: %s%s", why, cli_net_hint(a->net, why));
        return;
    }
    if (!a->down_reported) {
        a->down_reported = 1;
        status(a, "connection lost (%s); reconnecting", why);
    }
    (void)opened;
    schedule_retry(a);
    pump_input(a); /* keep reading the terminal: escapes, keystrokes to hold */
}

static void connect_ws(struct att *a)
{
    if (a->done || a->ws)
        return;
    static const struct cli_ws_handler h0 = {NULL,        ws_open,   ws_message,
                                             ws_writable, ws_closed, ws_refused};
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
    if (a->ws)
        cli_ws_drop(a->ws);
    a->ws_over = 1;
    after_output(a);
}

/* Decide the end. The loop stops once the close went out and the local
 * side has what was for it; the terminal's modes go back as soon as the
 * screen has taken what came before, so what is printed next reads right. */
static void finish(struct att *a, int exit_status)
{
    if (a->done)
        return;
    a->done = 1;
    a->exit_status = exit_status;
    poll_set(a, 0);
    (void)uv_timer_stop(&a->retry);
    if (a->ws && a->linked) {
        want_write(a); /* flush, then close 1000 */
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else if (a->ws) {
        cli_ws_drop(a->ws);
        (void)uv_timer_start(&a->close_wait, on_close_wait, CLOSE_WAIT_MS, 0);
    } else {
        a->ws_over = 1;
    }
    if (a->interactive) {
        uint64_t ms = (uint64_t)CLI_DRAIN_STALL_S * MS_PER_S;
        (void)uv_timer_start(&a->drain, on_drain_stall, ms, ms);
    }
    after_output(a);
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
    if (a->done) { /* still writing out: leave now */
        give_up_output(a, NULL);
        after_output(a);
        return;
    }
    a->detached = !a->exited;
    finish(a, CLI_EXIT_SIGNAL_BASE + signo);
    give_up_output(a, NULL); /* asked to leave: not waiting for the screen */
    after_output(a);
    if (!a->o.quiet || !a->o.forward_signals)
        status(a, "signal %d: leaving %s (it keeps running)", signo, a->o.term_id);
}

/* ---- set-up and the loop ---------------------------------------------------- */

/* A terminal opened again for this process: its own file description, so
 * that O_NONBLOCK (which libuv sets on what it polls) does not reach the
 * shell that shares fd 0-2. -1 when fd is not a terminal or cannot be. */
static int tty_again(int fd, int mode)
{
    char name[TTY_PATH_MAX];
    if (!isatty(fd) || ttyname_r(fd, name, sizeof name) != 0)
        return -1;
    return open(name, mode | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
}

static void setup_stdin(struct att *a)
{
    a->in_fd = STDIN_FILENO;
    int fd = tty_again(STDIN_FILENO, O_RDONLY);
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

static void setup_out(struct att *a, struct outfd *o, int fd)
{
    o->a = a;
    o->fd = fd;
    cli_outq_init(&o->q, OUT_MAX);
    int again = tty_again(fd, O_WRONLY);
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
static struct outfd *status_target(struct att *a)
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

static void teardown(struct att *a)
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
        struct outfd *o = &a->out[i];
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
    struct att *a = calloc(1, sizeof *a);
    if (a)
        backoff_init(&a->retry_delay, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    if (!a)
        return AL_E_NOMEM;
    a->loop = loop;
    a->net = net;
    a->o = *o;
    a->txbuf = malloc(cli_ws_pre() + AL_MAX_FRAME);
    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_CONTROLLER);
    ec.name = "airlock-cli";
    ec.on_event = on_event;
    ec.ud = a;
    ec.tx_ring = INPUT_COPY_MAX;
    if (!a->txbuf || cli_input_init(&a->in, CLI_HELD_INPUT_MAX, INPUT_COPY_MAX) != AL_OK ||
        ep_new(&ec, &a->ep) != AL_OK) {
        cli_input_free(&a->in);
        free(a->txbuf);
        free(a);
        return AL_E_NOMEM;
    }
    for (int fd = 0; fd < 3; fd++) {
        a->saved_fl[fd] = fcntl(fd, F_GETFL);
        a->saved_ok[fd] = a->saved_fl[fd] >= 0;
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
        (void)uv_signal_start(sigs[i].h, on_signal, sigs[i].signo);
    }
    setup_out(a, &a->out[0], STDOUT_FILENO);
    setup_out(a, &a->out[1], STDERR_FILENO);
    a->status_out = status_target(a);
    setup_stdin(a);
    connect_ws(a);
    pump_input(a); /* type-ahead is held until the server says we write */
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
