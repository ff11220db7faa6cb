/*
 * runner: see runner.h.
 *
 * Data flow of one terminal (struct term):
 *
 *   PTY/pipe --read (only while the endpoint has room)--> vt_feed + ep_write
 *   ep EP_EV_DATA(stdin) --> inbuf --write (as the fd takes it)--> PTY/pipe
 *                               ep_consume() only for bytes written: credit
 *                               is granted for delivered bytes alone.
 *
 * When the output ring is full (no credit from the controller), the fd is
 * not polled for reading, so the process blocks on write: memory stays
 * bounded by the ring. The exit status goes out (ep_exit) only after every
 * output stream reached EOF, so EXIT follows all output.
 *
 * Ownership: the runner owns its terminals; a terminal owns its process
 * fds, its screen model, its input buffer and its uv handles. A closed
 * terminal is freed when libuv has closed all its handles.
 *
 * Fair shares (docs/security.md):
 *   - screen memory: every PTY terminal has a screen model, whose heap
 *     (vt_mem_estimate, bytes) is counted in screen_used and kept within
 *     cfg.screen_budget. An OPEN that would pass it, or a size above
 *     VT_MAX_CELLS, is refused with OPEN_FAILED saying so (no terminal is
 *     ever left without a model); such a RESIZE gets ERROR LIMIT and
 *     changes nothing (neither the PTY nor the model).
 *   - snapshots: the controller's SNAPSHOT_REQs go through one rate limiter
 *     (RUNNER_SNAP_BURST, then one per RUNNER_SNAP_INTERVAL_US). A request
 *     over the rate marks its channel pending (repeats coalesce) and
 *     snap_timer makes the snapshot when the limiter allows, going round
 *     the channels, so every request is answered, late at worst. The
 *     answer is always a SNAPSHOT for a PTY channel: vt_snapshot degrades
 *     a screen too big for AL_MAX_SNAPSHOT (docs/snapshots.md).
 */
#include "runner.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_version.h"
#include "al_log.h"
#include "endpoint.h"
#include "frame.h"
#include "jail.h"
#include "proc.h"
#include "ratelim.h"
#include "runner_proxy.h"
#include "token.h"
#include "vt.h"
#include "vtwork.h"

#define READ_MAX 65536 /* bytes read from a PTY/pipe at once */
/* Output bytes the terminals may bring into the loop in one turn (one
 * iteration of the loop), all of them together: every byte goes through
 * the screen model before anything else runs, so this bounds how long
 * floods hold the loop (issue 16). Each terminal with output makes one
 * read per turn whatever the budget says (none starves); the budget
 * decides whether it reads on. So one flooding terminal reads about
 * TURN_MAX per turn (each turn also costs a WebSocket send and
 * libwebsockets' epoll_ctl calls for its writable request: a larger turn
 * costs less per byte), and eight of them about one read each. */
#define TURN_MAX 16384
/* What each read asks for at least: a PTY hands over at most its line
 * discipline's buffer (4095 bytes here) per read, and a smaller request
 * would only split one of those in two. */
#define READ_SLACK 4096
/* How long a flowing PTY's next read may be waited for, in user space,
 * before the loop goes back to epoll. A read or a poll of a PTY master
 * that finds nothing waits inside the kernel for the PTY's buffer worker
 * (n_tty_read and n_tty_poll call tty_buffer_flush_work), asleep, and the
 * wake-up after it cost about 26 us a cycle on a 2-vCPU VM: the worker
 * refills at most 4 KiB per cycle, so the text stream ran at 0.6 of a
 * bare reader. FIONREAD counts what is there without that wait. Only
 * between the reads of one turn of one flowing terminal (a full read
 * came before), never with one CPU (the wait would take the writer's
 * time), and never for more than this. See docs/performance.md. */
#define PTY_SPIN_US 20
#define PTY_DRAIN_MS 2000 /* after exit, wait this long for the PTY's EOF */
#define IN_MAX (1u << 20) /* stdin bytes held for a slow PTY (credit bounds it) */
#define MODEL_OPS 8       /* a terminal's snapshots and resizes waiting for the models' thread */
#define DEAD_MODELS 64    /* closed terminals' models the models' thread may still feed */
/* A terminal's bytes queued for the models' thread may cost it at most
 * this much by the model's recent cost, so that output dear to model (RIS
 * or DECALN at 300x100: microseconds a byte) does not fill the ring that
 * every other terminal's reads need; output that costs nanoseconds a byte
 * is never held by it. The cost is re-measured every MODEL_COST_WINDOW
 * bytes fed; until the first measure, MODEL_UNKNOWN_MAX bytes may wait. */
#define MODEL_QUEUE_NS 5000000u
#define MODEL_COST_WINDOW 4096u
#define MODEL_UNKNOWN_MAX 16384u
#define MODEL_READ_MIN 256u /* a read for a model under that bound, at least */

/* What the loop does with a terminal's model once the models' thread has
 * taken in every byte queued for it (see model_op). */
enum model_op_kind { OP_SNAPSHOT = 1, OP_RESIZE };
struct model_op {
    uint8_t kind; /* enum model_op_kind */
    uint16_t cols, rows;
};

struct term {
    struct runner *r;
    uint32_t ch;
    struct proc proc;
    struct vt *vt;
    size_t vt_bytes;  /* counted in runner.screen_used */
    int snap_pending; /* a SNAPSHOT_REQ waits for the rate limiter */
    /* snapshots and resizes, in order, waiting for the models' thread to
     * pass model_mark; the terminal is not read meanwhile, so the mark
     * stays */
    struct model_op ops[MODEL_OPS];
    unsigned nops;
    size_t model_mark; /* the models' ring right after this model's last record */
    /* the model's cost (model_allowance): bytes given to it (through the
     * ring or on the loop), its cost at the last measure, and that
     * measure in ns per KiB (0: none yet); held: not read until the
     * thread has passed model_mark, its queued bytes cost too much */
    uint64_t model_given, cost_ns0, cost_bytes0, cost_nspk;
    int model_held;
    uint16_t cols, rows;
    uv_poll_t poll_out, poll_err, poll_in; /* poll_in: pipes only */
    int ev_out, ev_err, ev_in;             /* the events each one polls now */
    uv_timer_t drain;
    int handles; /* handles still open (freed at 0 after closing) */
    int closing;
    int out_eof, err_eof;
    int reaped, exit_told;
    int exit_code, exit_sig, exit_core;
    uint8_t *inbuf;
    size_t inlen;
    int in_eof; /* stdin EOF arrived: close once inbuf is written */
    int in_closed;
};

struct runner {
    uv_loop_t *loop;
    struct runner_config cfg;
    char identifier[256];
    struct ep *ep;
    struct term *terms[AL_MAX_CHANNELS];
    unsigned nterms;
    void *link;
    runner_want_write_fn *want_write;
    uv_timer_t tick, grace, snap_timer;
    uv_idle_t write_due;     /* a writable callback to ask of the link, see want_write */
    uv_prepare_t turn_start; /* starts the count of each turn, before each poll */
    size_t turn_used;        /* output bytes read in this turn, see TURN_MAX */
    unsigned turn_readers;   /* terminals that read in this turn */
    unsigned last_readers;   /* the same, in the turn before */
    size_t screen_used;      /* vt_mem_estimate of every live terminal's model */
    struct ratelim snap_lim;
    unsigned snap_rr; /* where the pending-snapshot round starts next */
    uv_signal_t sigchld;
    uint8_t readbuf[READ_MAX];
    int spin; /* more than one CPU: a flowing PTY's next read is waited for (PTY_SPIN_US) */
    /* more than one CPU: the thread that feeds the models (vtwork.h); NULL:
     * the loop feeds them itself */
    struct vtw *vtw;
    /* closed terminals' models, freed once the thread has passed each mark
     * (no longer counted in screen_used: a closed terminal's budget is free
     * at once, its memory a ring's feed later at most) */
    struct {
        struct vt *vt;
        size_t mark;
    } dead[DEAD_MODELS];
    unsigned ndead;
    int freeing;
    /* the newest verified in-band token, for the next dial (empty: none) */
    char token[AL_MAX_TOKEN + 1];
    int64_t token_exp;
    struct runner_proxy *proxy; /* the credential proxy's listener; NULL: none */
};

void runner_log(const struct runner *r, int level, const char *fmt, ...)
{
    if (level > r->cfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog(r->cfg.log_format, "airlock-runner", r->identifier, level, fmt, ap);
    va_end(ap);
}

static uint64_t now_us(const struct runner *r)
{
    (void)r; /* one clock for the whole process */
    return uv_hrtime() / 1000u;
}

/* The link is asked for a writable callback once per loop turn, from an
 * idle handle (which runs before the next poll), never from inside the
 * poll phase: libwebsockets answers each request with uv_poll_start on its
 * socket, and libuv then drops that socket's event already pending in the
 * same batch. A PTY read asking once per read, with eight terminals
 * flooding, so dropped the socket's every turn and the link sent nothing
 * (not even a PONG or an OPENED) until the floods filled their rings
 * (issue 16). */
static void schedule_tick(struct runner *r);

/* The endpoint's next deadline may have come closer (a stream went
 * quiet: its ring's trim, its last ACK): the timer is moved up. */
static void tick_sooner(struct runner *r)
{
    uint64_t next = ep_next_deadline(r->ep);
    if (next == UINT64_MAX)
        return;
    uint64_t due_ms =
        uv_is_active((uv_handle_t *)&r->tick) ? uv_timer_get_due_in(&r->tick) : UINT64_MAX;
    uint64_t now = now_us(r);
    uint64_t want_ms = next > now ? (next - now + 999) / 1000 : 0;
    if (want_ms < due_ms)
        schedule_tick(r);
}

static void on_write_due(uv_idle_t *h)
{
    struct runner *r = h->data;
    (void)uv_idle_stop(&r->write_due);
    if (r->link && r->want_write)
        r->want_write(r->link);
    tick_sooner(r);
}

static void on_turn_start(uv_prepare_t *h)
{
    struct runner *r = h->data;
    r->turn_used = 0;
    r->last_readers = r->turn_readers;
    r->turn_readers = 0;
}

static void want_write(struct runner *r)
{
    if (r->link && r->want_write && !uv_is_active((uv_handle_t *)&r->write_due))
        (void)uv_idle_start(&r->write_due, on_write_due);
}

static struct term *term_find(const struct runner *r, uint32_t ch)
{
    for (unsigned i = 0; i < r->nterms; i++)
        if (r->terms[i]->ch == ch)
            return r->terms[i];
    return NULL;
}

/* ---- terminal lifecycle -------------------------------------------------- */

static void term_update_polls(struct term *t);
static void poll_set(uv_poll_t *h, int *cur, int events);

static void term_handle_closed(uv_handle_t *h)
{
    struct term *t = h->data;
    if (--t->handles > 0)
        return;
    proc_close(&t->proc);
    vt_free(t->vt);
    free(t->inbuf);
    free(t);
}

/* Stop and release a terminal (the process must already be told to end). */
static void term_destroy(struct term *t)
{
    struct runner *r = t->r;
    if (t->closing)
        return;
    t->closing = 1;
    /* the thread may still have bytes to feed the model: it goes once the
     * thread has passed them (on_model_mark), or here when too many wait */
    if (t->vt && r->vtw && !vtw_notify(r->vtw, t->model_mark)) {
        if (r->ndead < DEAD_MODELS) {
            r->dead[r->ndead].vt = t->vt;
            r->dead[r->ndead].mark = t->model_mark;
            r->ndead++;
            t->vt = NULL;
        } else {
            vtw_sync(r->vtw);
        }
    }
    r->screen_used -= t->vt_bytes; /* the model goes with the handles */
    t->vt_bytes = 0;
    for (unsigned i = 0; i < r->nterms; i++) {
        if (r->terms[i] == t) {
            r->terms[i] = r->terms[--r->nterms];
            break;
        }
    }
    uv_handle_t *hs[] = {(uv_handle_t *)&t->poll_out, (uv_handle_t *)&t->poll_err,
                         (uv_handle_t *)&t->poll_in, (uv_handle_t *)&t->drain};
    int open = 0;
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (hs[i]->data)
            open++;
    t->handles = open;
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++)
        if (hs[i]->data)
            uv_close(hs[i], term_handle_closed);
    if (open == 0) {
        proc_close(&t->proc);
        vt_free(t->vt);
        free(t->inbuf);
        free(t);
    }
}

/* Tell the endpoint how the process ended, once all its output is in. */
static void term_maybe_exit(struct term *t)
{
    if (t->exit_told || !t->reaped || !t->out_eof || (t->proc.mode == PROC_PIPES && !t->err_eof))
        return;
    int rc = ep_exit(t->r->ep, t->ch, t->exit_sig ? -1 : t->exit_code, (uint8_t)t->exit_sig,
                     (uint8_t)t->exit_core);
    if (rc != AL_OK)
        runner_log(t->r, 0, "channel %u: cannot report exit: %s", (unsigned)t->ch, al_strerror(rc));
    t->exit_told = 1;
    runner_log(t->r, 1, "channel %u: exited (code %d, signal %d)", (unsigned)t->ch, t->exit_code,
               t->exit_sig);
    want_write(t->r);
}

static void term_eof(struct term *t, unsigned stream)
{
    if (stream == FR_STDOUT)
        t->out_eof = 1;
    else
        t->err_eof = 1;
    term_update_polls(t);
    term_maybe_exit(t);
}

/* Whether a flowing PTY has more to read within PTY_SPIN_US, found out
 * without the kernel's sleep in an empty read (see PTY_SPIN_US). */
static int pty_more_soon(int fd)
{
    uint64_t until = uv_hrtime() + (uint64_t)PTY_SPIN_US * 1000u;
    for (;;) {
        int avail = 0;
        if (ioctl(fd, FIONREAD, &avail) != 0)
            return 1; /* let the read say what is wrong */
        if (avail > 0)
            return 1;
        if (uv_hrtime() >= until)
            return 0;
    }
}

/* The bytes t's model may be given now: what its
 * queued bytes may still cost the models' thread, by the model's recent
 * cost, within MODEL_QUEUE_NS (see there). */
static size_t model_allowance(struct term *t)
{
    uint64_t ns, fed;
    vt_cost(t->vt, &ns, &fed);
    if (fed - t->cost_bytes0 >= MODEL_COST_WINDOW) {
        t->cost_nspk = (ns - t->cost_ns0) * 1024u / (fed - t->cost_bytes0);
        if (t->cost_nspk == 0)
            t->cost_nspk = 1;
        t->cost_ns0 = ns;
        t->cost_bytes0 = fed;
    }
    uint64_t queued = t->model_given > fed ? t->model_given - fed : 0;
    if (t->cost_nspk == 0)
        return queued >= MODEL_UNKNOWN_MAX ? 0 : (size_t)(MODEL_UNKNOWN_MAX - queued);
    uint64_t queued_ns = queued * t->cost_nspk / 1024u;
    if (queued_ns >= MODEL_QUEUE_NS)
        return 0;
    return (size_t)((MODEL_QUEUE_NS - queued_ns) * 1024u / t->cost_nspk);
}

/* Read what the fd has, as far as the endpoint has room. */
static void term_read(struct term *t, unsigned stream)
{
    struct runner *r = t->r;
    int fd = stream == FR_STDOUT ? t->proc.fd_out : t->proc.fd_err;
    if (stream == FR_STDOUT && t->nops)
        return; /* the model's snapshot or resize is due at this offset */
    struct vt *model = stream == FR_STDOUT ? t->vt : NULL; /* what the bytes also feed */
    for (int first = 1;; first = 0) {
        size_t room = ep_writable(r->ep, t->ch, stream);
        size_t left = TURN_MAX > r->turn_used ? TURN_MAX - r->turn_used : 0;
        if (room == 0 || (!first && (left == 0 || r->last_readers > 1)))
            break;
        r->turn_readers += first;
        if (left < READ_SLACK)
            left = READ_SLACK;
        if (room > left)
            room = left;
        if (model && r->vtw) {
            size_t mroom = vtw_room(r->vtw, READ_SLACK);
            if (mroom < READ_SLACK)
                break; /* on_model_room polls again */
            size_t allow = model_allowance(t);
            if (allow == 0 && !vtw_notify(r->vtw, t->model_mark)) {
                t->model_held = 1; /* on_model_mark reads it again */
                term_update_polls(t);
                break;
            }
            if (allow < mroom)
                mroom = allow < MODEL_READ_MIN ? MODEL_READ_MIN : allow;
            if (room > mroom)
                room = mroom;
        }
        if (!first && r->spin && t->proc.mode == PROC_PTY && !pty_more_soon(fd))
            break;
        ssize_t n = read(fd, r->readbuf, room);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) { /* 0: pipe closed; EIO: the PTY's last writer left */
            term_eof(t, stream);
            return;
        }
        if (model)
            t->model_given += (uint64_t)n;
        /* A small read (a keystroke's echo) with nothing queued is fed
         * here: the feed costs less than a push, and a push would leave
         * the model up to VTW_WAKE_MS behind or wake the thread. */
        if (model && r->vtw && ((size_t)n >= READ_SLACK / 2 || vtw_busy(r->vtw))) {
            int vrc = vtw_push(r->vtw, model, t->ch, r->readbuf, (size_t)n);
            if (vrc == AL_OK)
                t->model_mark = vtw_mark(r->vtw);
            else /* cannot happen: the read was sized to the room */
                runner_log(r, 0, "channel %u: screen model: %s", (unsigned)t->ch, al_strerror(vrc));
        } else if (model) {
            int vrc = vt_feed(model, r->readbuf, (size_t)n);
            if (vrc != AL_OK)
                runner_log(r, 0, "channel %u: screen model: %s", (unsigned)t->ch, al_strerror(vrc));
        }
        long w = ep_write(r->ep, t->ch, stream, r->readbuf, (size_t)n);
        if (w != n)
            runner_log(r, 0, "channel %u: output lost: %s", (unsigned)t->ch,
                       w < 0 ? al_strerror((int)w) : "short write");
        want_write(r);
        r->turn_used += (size_t)n;
        if ((size_t)n < READ_SLACK / 2)
            break; /* a small read: the writer is slow (a keystroke's echo), nothing more is there
                    */
        /* A short read is no sign that the fd is drained: the PTY hands
         * over at most 4 KiB per read while the writer refills it on the
         * other core. Reading on until EAGAIN or the turn's budget makes
         * one send and one writable request per turn carry up to TURN_MAX,
         * not 4 KiB (issue 16). */
    }
    term_update_polls(t);
}

/* Write held stdin bytes to the process as far as it takes them. */
static void term_write_in(struct term *t)
{
    struct runner *r = t->r;
    while (t->inlen > 0 && !t->in_closed) {
        ssize_t n = write(t->proc.fd_in, t->inbuf, t->inlen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n < 0) { /* the process closed its input: drop what is left */
            runner_log(r, 2, "channel %u: stdin write: %s", (unsigned)t->ch, strerror(errno));
            (void)ep_consume(r->ep, t->ch, FR_STDIN, t->inlen);
            t->inlen = 0;
            break;
        }
        memmove(t->inbuf, t->inbuf + n, t->inlen - (size_t)n);
        t->inlen -= (size_t)n;
        (void)ep_consume(r->ep, t->ch, FR_STDIN, (size_t)n);
        want_write(r);
    }
    if (t->inlen == 0 && t->in_eof && !t->in_closed) {
        t->in_closed = 1;
        if (t->proc.mode == PROC_PIPES && t->poll_in.data)
            poll_set(&t->poll_in, &t->ev_in, 0); /* before the fd closes */
        int rc = proc_close_stdin(&t->proc);
        if (rc != AL_OK)
            runner_log(r, 2, "channel %u: close stdin: %s", (unsigned)t->ch, al_strerror(rc));
    }
    term_update_polls(t);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
    struct term *t = h->data;
    if (t->closing)
        return;
    if (status < 0 && status != UV_EBADF) {
        /* an error on the fd: read to learn about it (EOF or EIO) */
        events = UV_READABLE;
    }
    if (h == &t->poll_err) {
        if (events & UV_READABLE)
            term_read(t, FR_STDERR);
        return;
    }
    if (h == &t->poll_in) {
        if (events & UV_WRITABLE)
            term_write_in(t);
        return;
    }
    if (events & UV_WRITABLE)
        term_write_in(t);
    if ((events & UV_READABLE) && !t->closing)
        term_read(t, FR_STDOUT);
}

/* Change what h polls, only when it changes: each change costs an epoll_ctl
 * at the next loop turn, and this runs for every read on the PTY path. */
static void poll_set(uv_poll_t *h, int *cur, int events)
{
    if (!h->data || *cur == events)
        return;
    *cur = events;
    if (events)
        (void)uv_poll_start(h, events, on_poll);
    else
        (void)uv_poll_stop(h);
}

/* Poll exactly for what can make progress now. */
static void term_update_polls(struct term *t)
{
    if (t->closing)
        return;
    struct runner *r = t->r;
    int want_in = t->inlen > 0 && !t->in_closed;
    int out = 0, err = 0;
    if (!t->out_eof && !t->nops && !t->model_held && ep_writable(r->ep, t->ch, FR_STDOUT) > 0 &&
        (!t->vt || !r->vtw || vtw_room(r->vtw, READ_SLACK) >= READ_SLACK))
        out |= UV_READABLE;
    if (t->proc.mode == PROC_PTY) {
        if (want_in)
            out |= UV_WRITABLE;
    } else {
        if (!t->err_eof && ep_writable(r->ep, t->ch, FR_STDERR) > 0)
            err |= UV_READABLE;
        poll_set(&t->poll_in, &t->ev_in, want_in ? UV_WRITABLE : 0);
    }
    poll_set(&t->poll_out, &t->ev_out, out);
    poll_set(&t->poll_err, &t->ev_err, err);
}

static void on_drain_timeout(uv_timer_t *h)
{
    struct term *t = h->data;
    if (t->closing)
        return;
    /* The process exited but something still holds its PTY open and
     * nothing came for a while: end the output here. */
    if (!t->out_eof) {
        runner_log(t->r, 1, "channel %u: output still open %d ms after exit; ending it",
                   (unsigned)t->ch, PTY_DRAIN_MS);
        term_eof(t, FR_STDOUT);
    }
    if (t->proc.mode == PROC_PIPES && !t->err_eof)
        term_eof(t, FR_STDERR);
}

/* ---- child processes ------------------------------------------------------ */

/* The channel's process exited (its status is in t): read what is left
 * of its output now, then give the PTY a moment. */
static void term_exited(struct term *t)
{
    struct runner *r = t->r;
    t->reaped = 1;
    if (!t->out_eof || (t->proc.mode == PROC_PIPES && !t->err_eof)) {
        term_read(t, FR_STDOUT);
        if (t->proc.mode == PROC_PIPES && !t->closing)
            term_read(t, FR_STDERR);
        if (!t->closing && uv_timer_init(r->loop, &t->drain) == 0) {
            t->drain.data = t;
            (void)uv_timer_start(&t->drain, on_drain_timeout, PTY_DRAIN_MS, 0);
        }
    }
    term_maybe_exit(t);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
    (void)signum;
    struct runner *r = h->data;
    /* our children are the keepers (and what re-parents to us once one is
     * gone); a keeper reports its command's exit on its status pipe and
     * signals us */
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid <= 0)
            break;
        for (unsigned i = 0; i < r->nterms; i++)
            proc_child_reaped(&r->terms[i]->proc, pid);
    }
    for (unsigned i = 0; i < r->nterms; i++) {
        struct term *t = r->terms[i];
        if (t->reaped)
            continue;
        int rc = proc_reap(&t->proc, &t->exit_code, &t->exit_sig, &t->exit_core);
        if (rc == AL_E_NOENT) { /* its keeper was killed: so was the command */
            t->exit_code = -1;
            t->exit_sig = SIGKILL;
            t->exit_core = 0;
        }
        if (rc == AL_OK || rc == AL_E_NOENT)
            term_exited(t);
    }
}

/* ---- endpoint events ------------------------------------------------------ */

/* NUL-terminated copies of the OPEN frame's strings, in one allocation. */
struct open_args {
    char **argv, **env;
    char *cwd, *term;
    char *mem;
};

static char *dup_str(char **cursor, struct fr_str s)
{
    char *p = *cursor;
    memcpy(p, s.p, s.len);
    p[s.len] = 0;
    *cursor = p + s.len + 1;
    return p;
}

static int open_args_build(const struct fr_open *o, struct open_args *a)
{
    size_t need = (size_t)(o->argc + 1 + o->envc + 1) * sizeof(char *);
    need += o->cwd.len + 1u + o->term.len + 1u;
    for (unsigned i = 0; i < o->argc; i++)
        need += o->argv[i].len + 1u;
    for (unsigned i = 0; i < o->envc; i++)
        need += o->env[i].len + 1u;
    a->mem = malloc(need);
    if (!a->mem)
        return AL_E_NOMEM;
    a->argv = (char **)(void *)a->mem;
    a->env = a->argv + o->argc + 1;
    char *cur = (char *)(a->env + o->envc + 1);
    for (unsigned i = 0; i < o->argc; i++)
        a->argv[i] = dup_str(&cur, o->argv[i]);
    a->argv[o->argc] = NULL;
    for (unsigned i = 0; i < o->envc; i++)
        a->env[i] = dup_str(&cur, o->env[i]);
    a->env[o->envc] = NULL;
    a->cwd = dup_str(&cur, o->cwd);
    a->term = dup_str(&cur, o->term);
    return AL_OK;
}

static int poll_init(struct runner *r, struct term *t, uv_poll_t *h, int fd)
{
    if (fd < 0)
        return AL_OK;
    if (uv_poll_init(r->loop, h, fd) != 0)
        return AL_E_IO;
    h->data = t;
    return AL_OK;
}

/*
 * May a screen model of cols x rows replace one of `old` bytes? (The
 * reasons fit an ERROR frame as the endpoint queues it: under 128 bytes.) 0, or
 * AL_E_TOOBIG (above VT_MAX_CELLS) / AL_E_LIMIT (over the budget) with the
 * reason in why.
 */
static int screen_admit(const struct runner *r, uint16_t cols, uint16_t rows, size_t old, char *why,
                        size_t cap)
{
    int rc = vt_size_check(cols, rows);
    if (rc != AL_OK) {
        al_errf(why, cap, "%ux%u is %lu cells, above the screen model's limit of %u", cols, rows,
                (unsigned long)cols * rows, VT_MAX_CELLS);
        return rc == AL_E_TOOBIG ? AL_E_TOOBIG : AL_E_INVAL;
    }
    size_t need = vt_mem_estimate(cols, rows);
    size_t others = r->screen_used - old;
    if (need > r->cfg.screen_budget || others > r->cfg.screen_budget - need) {
        al_errf(why, cap,
                "screen budget: %ux%u needs %zu KiB, %zu of %zu KiB used (--screen-budget)", cols,
                rows, need >> 10, others >> 10, r->cfg.screen_budget >> 10);
        return AL_E_LIMIT;
    }
    return AL_OK;
}

static void on_open(struct runner *r, uint32_t ch, const struct fr_open *o)
{
    char why[512];
    struct vt *vt = NULL;
    if (o->mode != FR_MODE_PIPES) {
        int rc = screen_admit(r, o->cols, o->rows, 0, why, sizeof why);
        if (rc == AL_OK && vt_new(o->cols, o->rows, &vt) != AL_OK) {
            al_errf(why, sizeof why, "screen model: out of memory");
            rc = AL_E_NOMEM;
        }
        if (rc != AL_OK) {
            runner_log(r, 1, "channel %u: open refused: %s", (unsigned)ch, why);
            (void)ep_open_failed(r->ep, ch, why);
            return;
        }
    }
    struct open_args a;
    if (open_args_build(o, &a) != AL_OK) {
        vt_free(vt);
        (void)ep_open_failed(r->ep, ch, "out of memory");
        return;
    }
    struct term *t = calloc(1, sizeof *t);
    if (!t) {
        free(a.mem);
        vt_free(vt);
        (void)ep_open_failed(r->ep, ch, "out of memory");
        return;
    }
    t->r = r;
    t->vt = vt;
    t->ch = ch;
    t->cols = o->cols;
    t->rows = o->rows;
    struct proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.mode = o->mode == FR_MODE_PIPES ? PROC_PIPES : PROC_PTY;
    spec.argv = (const char *const *)a.argv;
    spec.env = (const char *const *)a.env;
    spec.env_allow = r->cfg.env_allow;
    spec.cwd = a.cwd[0] ? a.cwd : NULL;
    spec.term = a.term[0] ? a.term : NULL;
    spec.cols = o->cols;
    spec.rows = o->rows;
    spec.set_user = r->cfg.set_user;
    spec.max_data = r->cfg.max_data;
    spec.uid = r->cfg.uid;
    spec.gid = r->cfg.gid;
    why[0] = 0;
    struct jail_cmd jc;
    int rc = AL_OK;
    if (r->cfg.jail) {
        /* an agent with no network reaches our proxy through the forwarder
         * in its jail: our socket, our listener's port (jail.h) */
        struct jail_proxy jp = {.socket = r->cfg.proxy_socket,
                                .port = r->proxy ? runner_proxy_port(r->proxy) : 0};
        rc = jail_cmd(r->cfg.jail, spec.cwd, spec.mode == PROC_PTY, r->proxy ? &jp : NULL, &jc, why,
                      sizeof why);
        spec.wrap = jc.argv;
        spec.wrap_fd = jc.fd;
    }
    if (rc == AL_OK)
        rc = proc_spawn(&spec, &t->proc, why, sizeof why);
    if (r->cfg.jail)
        jail_cmd_done(&jc);
    free(a.mem);
    if (rc != AL_OK) {
        runner_log(r, 1, "channel %u: open failed: %s", (unsigned)ch, why);
        (void)ep_open_failed(r->ep, ch, why[0] ? why : al_strerror(rc));
        vt_free(t->vt);
        free(t);
        return;
    }
    if (t->vt) {
        t->vt_bytes = vt_mem_estimate(o->cols, o->rows);
        r->screen_used += t->vt_bytes;
    }
    r->terms[r->nterms++] = t;
    if (poll_init(r, t, &t->poll_out, t->proc.fd_out) != AL_OK ||
        (spec.mode == PROC_PIPES && (poll_init(r, t, &t->poll_err, t->proc.fd_err) != AL_OK ||
                                     poll_init(r, t, &t->poll_in, t->proc.fd_in) != AL_OK))) {
        (void)proc_kill_tree(&t->proc);
        (void)ep_open_failed(r->ep, ch, "cannot watch the process's descriptors");
        term_destroy(t);
        return;
    }
    (void)ep_opened(r->ep, ch, (uint32_t)t->proc.pid);
    runner_log(r, 1, "channel %u: started pid %d (%s, %ux%u)", (unsigned)ch, (int)t->proc.pid,
               spec.mode == PROC_PTY ? "pty" : "pipes", o->cols, o->rows);
    term_update_polls(t);
}

static void on_stdin(struct runner *r, struct term *t, const uint8_t *p, size_t n)
{
    if (t->in_closed || t->inlen + n > IN_MAX) {
        /* input after the process closed stdin is delivered to nowhere */
        (void)ep_consume(r->ep, t->ch, FR_STDIN, n);
        return;
    }
    if (!t->inbuf) {
        t->inbuf = malloc(IN_MAX);
        if (!t->inbuf) {
            (void)ep_consume(r->ep, t->ch, FR_STDIN, n);
            runner_log(r, 0, "channel %u: out of memory, input dropped", (unsigned)t->ch);
            return;
        }
    }
    memcpy(t->inbuf + t->inlen, p, n);
    t->inlen += n;
    term_write_in(t);
}

/* Sends the snapshot of t's model, which has taken in every byte of the
 * stream so far. */
static void snapshot_send(struct runner *r, struct term *t)
{
    struct ep_stream_info si;
    char msg[128];
    if (ep_stream_info(r->ep, t->ch, FR_STDOUT, &si) != AL_OK)
        return;
    uint8_t *snap = NULL;
    size_t len = 0;
    int rc = vt_snapshot(t->vt, &snap, &len); /* the ladder: never too big */
    if (rc != AL_OK) {
        (void)snprintf(msg, sizeof msg, "snapshot failed: %s", al_strerror(rc));
        (void)ep_send_error(r->ep, t->ch, FR_ERR_STATE, msg);
        runner_log(r, 0, "channel %u: %s", (unsigned)t->ch, msg);
        return;
    }
    enum vt_snap_level level = vt_snapshot_level(t->vt);
    if (level != VT_SNAP_EXACT)
        runner_log(r, 1,
                   "channel %u: the exact snapshot is over %u bytes: sent the %s step (%zu bytes)",
                   (unsigned)t->ch, (unsigned)AL_MAX_SNAPSHOT, vt_snap_level_name(level), len);
    rc = ep_snapshot(r->ep, t->ch, si.end, t->cols, t->rows, snap, len);
    free(snap);
    if (rc != AL_OK) {
        (void)snprintf(msg, sizeof msg, "snapshot not sent: %s", al_strerror(rc));
        (void)ep_send_error(r->ep, t->ch, FR_ERR_STATE, msg);
    }
}

static void resize_apply(struct runner *r, struct term *t, uint16_t cols, uint16_t rows);

static void op_run(struct runner *r, struct term *t, const struct model_op *op)
{
    if (op->kind == OP_SNAPSHOT)
        snapshot_send(r, t);
    else
        resize_apply(r, t, op->cols, op->rows);
}

/* Runs the operations that waited, in order, and reads t again. */
static void ops_run(struct runner *r, struct term *t)
{
    for (unsigned i = 0; i < t->nops; i++)
        op_run(r, t, &t->ops[i]);
    t->nops = 0;
    term_update_polls(t);
    want_write(r);
}

/* A snapshot or a resize of t's model: now if the models' thread has taken
 * in every byte of t read so far, else once it has. Meanwhile t is not
 * read (so the model is exact at the offset its bytes end at) and the
 * loop goes on; on_model_mark runs what waited. Repeats coalesce (two
 * snapshots in a row are one, a resize replaces the resize just before
 * it); a queue full of alternations waits for the thread here. */
static void model_op(struct runner *r, struct term *t, struct model_op op)
{
    if (!r->vtw) {
        op_run(r, t, &op);
        return;
    }
    /* the mark of t's last record, not the ring's end: the records of
     * other terminals queued after it are not t's to wait for */
    if (t->nops == 0 && vtw_notify(r->vtw, t->model_mark)) {
        op_run(r, t, &op);
        return;
    }
    struct model_op *last = t->nops ? &t->ops[t->nops - 1] : NULL;
    if (last && last->kind == op.kind) {
        *last = op;
        return;
    }
    if (t->nops == MODEL_OPS) {
        vtw_sync(r->vtw);
        ops_run(r, t);
        op_run(r, t, &op);
        return;
    }
    t->ops[t->nops++] = op;
    if (t->nops == 1)
        term_update_polls(t);
}

static void snapshot_make(struct runner *r, struct term *t)
{
    struct ep_stream_info si;
    t->snap_pending = 0;
    if (ep_stream_info(r->ep, t->ch, FR_STDOUT, &si) != AL_OK)
        return;
    if (!t->vt) { /* only pipe-mode channels run without one (docs/protocol.md §5) */
        (void)ep_send_error(r->ep, t->ch, FR_ERR_STATE,
                            "no snapshot: the channel runs in pipe mode and has no screen");
        return;
    }
    model_op(r, t, (struct model_op){.kind = OP_SNAPSHOT});
}

static void on_snap_timer(uv_timer_t *h);

/* Arm snap_timer for when the limiter next allows one, if anything waits. */
static void snap_schedule(struct runner *r)
{
    for (unsigned i = 0; i < r->nterms; i++) {
        if (r->terms[i]->snap_pending) {
            uint64_t now = now_us(r), at = ratelim_next(&r->snap_lim, now);
            (void)uv_timer_start(&r->snap_timer, on_snap_timer, (at - now + 999) / 1000, 0);
            return;
        }
    }
    (void)uv_timer_stop(&r->snap_timer);
}

/* Make the waiting snapshots the limiter allows now, round the channels. */
static void on_snap_timer(uv_timer_t *h)
{
    struct runner *r = h->data;
    unsigned n = r->nterms;
    for (unsigned k = 0; k < n && k < r->nterms; k++) {
        struct term *t = r->terms[(r->snap_rr + k) % r->nterms];
        if (!t->snap_pending)
            continue;
        if (!ratelim_take(&r->snap_lim, now_us(r))) {
            r->snap_rr = (r->snap_rr + k) % r->nterms; /* start here next time */
            break;
        }
        snapshot_make(r, t);
    }
    want_write(r);
    snap_schedule(r);
}

/* A SNAPSHOT_REQ: made now if the rate allows, else once it does. */
static void on_snapshot_req(struct runner *r, struct term *t)
{
    if (t->snap_pending)
        return; /* coalesced with the one waiting */
    if (ratelim_take(&r->snap_lim, now_us(r))) {
        snapshot_make(r, t);
        return;
    }
    t->snap_pending = 1;
    runner_log(r, 2, "channel %u: snapshot request over the rate: deferred", (unsigned)t->ch);
    snap_schedule(r);
}

/* A RESIZE: the PTY and the model change together, or neither does; the
 * bytes read before it go into the model at the old size (model_op). */
static void on_resize(struct runner *r, struct term *t, uint16_t cols, uint16_t rows)
{
    if (t->vt)
        model_op(r, t, (struct model_op){.kind = OP_RESIZE, .cols = cols, .rows = rows});
    else
        resize_apply(r, t, cols, rows);
}

static void resize_apply(struct runner *r, struct term *t, uint16_t cols, uint16_t rows)
{
    if (t->vt) {
        char why[512];
        int rc = screen_admit(r, cols, rows, t->vt_bytes, why, sizeof why);
        if (rc == AL_OK && vt_resize(t->vt, cols, rows) != AL_OK) {
            al_errf(why, sizeof why, "screen model: out of memory");
            rc = AL_E_NOMEM;
        }
        if (rc != AL_OK) {
            runner_log(r, 1, "channel %u: resize to %ux%u refused: %s", (unsigned)t->ch, cols, rows,
                       why);
            char msg[AL_MAX_ERRMSG];
            al_errf(msg, sizeof msg, "resize to %ux%u refused: %s", cols, rows, why);
            (void)ep_send_error(r->ep, t->ch, FR_ERR_LIMIT, msg);
            want_write(r);
            return;
        }
        size_t now_bytes = vt_mem_estimate(cols, rows);
        r->screen_used = r->screen_used - t->vt_bytes + now_bytes;
        t->vt_bytes = now_bytes;
    }
    t->cols = cols;
    t->rows = rows;
    (void)proc_resize(&t->proc, cols, rows);
}

/* The endpoint's (monotonic) time at which a token expiring at Unix time
 * exp stops verifying: exp + leeway, the instant the upgrade's and a TOKEN
 * frame's check would refuse it. */
static uint64_t deadline_of(const struct runner *r, int64_t exp)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t wall_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    int64_t left_us = (exp + r->cfg.leeway) * 1000000 - wall_us;
    return now_us(r) + (uint64_t)(left_us > 0 ? left_us : 0) + 1;
}

static void on_token(struct runner *r, const uint8_t *p, size_t n)
{
    struct tok_verify_params vp;
    tok_verify_params_init(&vp, r->identifier, "runner:connect", tok_now());
    vp.leeway = r->cfg.leeway;
    struct tok_claims cl;
    char why[TOK_REASON_MAX];
    int rc = tok_verify(r->cfg.keys, (const char *)p, n, &vp, &cl, why, sizeof why);
    if (rc != AL_OK) {
        runner_log(r, 1, "in-band token refused: %s (%s)", al_strerror(rc), why);
        (void)ep_send_error(r->ep, 0, FR_ERR_TOKEN_INVALID, "token refused");
        return;
    }
    ep_set_token_deadline(r->ep, deadline_of(r, cl.exp));
    if (n < sizeof r->token && cl.exp >= r->token_exp) {
        memcpy(r->token, p, n);
        r->token[n] = '\0';
        r->token_exp = cl.exp;
    }
    runner_log(r, 2, "in-band token accepted: sub=%s, expires at %lld", cl.sub, (long long)cl.exp);
}

const char *runner_latest_token(const struct runner *r, int64_t *exp)
{
    if (!r->token[0])
        return NULL;
    if (exp)
        *exp = r->token_exp;
    return r->token;
}

static void on_event(void *ud, const struct ep_event *ev)
{
    struct runner *r = ud;
    if (fr_is_proxy_channel(ev->channel)) {
        if (r->proxy)
            runner_proxy_event(r->proxy, ev);
        else if (ev->type != EP_EV_CLOSED) /* cannot happen: we open none */
            (void)ep_close(r->ep, ev->channel);
        return;
    }
    struct term *t = ev->channel ? term_find(r, ev->channel) : NULL;
    switch (ev->type) {
    case EP_EV_OPEN:
        on_open(r, ev->channel, ev->open);
        break;
    case EP_EV_DATA:
        if (t && ev->stream == FR_STDIN)
            on_stdin(r, t, ev->data, ev->len);
        else
            (void)ep_consume(r->ep, ev->channel, ev->stream, ev->len);
        break;
    case EP_EV_EOF:
        if (t && ev->stream == FR_STDIN) {
            t->in_eof = 1;
            term_write_in(t);
        }
        break;
    case EP_EV_GAP:
        break; /* stdin the controller lost: nothing to deliver */
    case EP_EV_RESIZE:
        if (t)
            on_resize(r, t, ev->cols, ev->rows);
        break;
    case EP_EV_SIGNAL:
        /* also after the channel's process exited: its tree may live on */
        if (t)
            (void)proc_signal(&t->proc, ev->signo, ev->scope == FR_SIG_TREE);
        break;
    case EP_EV_CLOSED:
        if (t) {
            (void)proc_kill_tree(&t->proc);
            runner_log(r, 1, "channel %u: closed", (unsigned)t->ch);
            term_destroy(t);
        }
        break;
    case EP_EV_SNAPSHOT_REQ:
        if (t)
            on_snapshot_req(r, t);
        break;
    case EP_EV_TOKEN:
        on_token(r, ev->data, ev->len);
        break;
    case EP_EV_WRITABLE:
        if (t)
            term_update_polls(t);
        break;
    case EP_EV_PONG:
        runner_log(r, 2, "rtt %llu us", (unsigned long long)ev->rtt_us);
        break;
    case EP_EV_ERROR:
        runner_log(r, 1, "peer error %u on channel %u: %.*s", ev->code, (unsigned)ev->channel,
                   (int)ev->len, (const char *)ev->data);
        break;
    case EP_EV_READY:
        runner_log(r, 2, "session ready (airlock.v%u)", ev->version);
        break;
    default:
        break;
    }
}

/* ---- timers --------------------------------------------------------------- */

static void on_tick(uv_timer_t *h)
{
    struct runner *r = h->data;
    ep_tick(r->ep, now_us(r));
    want_write(r);
    schedule_tick(r);
}

static void schedule_tick(struct runner *r)
{
    uint64_t next = ep_next_deadline(r->ep), now = now_us(r);
    if (next == UINT64_MAX) {
        (void)uv_timer_stop(&r->tick);
        return;
    }
    uint64_t ms = next > now ? (next - now + 999) / 1000 : 0;
    (void)uv_timer_start(&r->tick, on_tick, ms, 0);
}

static void on_grace(uv_timer_t *h)
{
    struct runner *r = h->data;
    runner_log(r, 1, "no controller for %llu s: ending %u terminal(s)",
               (unsigned long long)(r->cfg.grace_ms / 1000), r->nterms);
    while (r->nterms > 0) {
        struct term *t = r->terms[0];
        (void)proc_kill_tree(&t->proc);
        (void)ep_close(r->ep, t->ch);
        term_destroy(t);
    }
}

/* ---- the credential proxy's listener -------------------------------------- */

static void proxy_wake(void *ud)
{
    want_write(ud);
}

static void proxy_log(void *ud, int level, const char *msg)
{
    runner_log(ud, level, "%s", msg);
}

static int proxy_start(struct runner *r)
{
    if (!r->cfg.proxy_listen && !r->cfg.proxy_socket)
        return AL_OK;
    struct runner_proxy_config pc = {.listen = r->cfg.proxy_listen,
                                     .socket = r->cfg.proxy_socket,
                                     .ep = r->ep,
                                     .wake = proxy_wake,
                                     .log = proxy_log,
                                     .ud = r};
    char why[256] = "";
    int rc = runner_proxy_new(r->loop, &pc, &r->proxy, why, sizeof why);
    if (rc != AL_OK)
        runner_log(r, 0, "%s", why[0] ? why : al_strerror(rc));
    return rc;
}

/* ---- public --------------------------------------------------------------- */

void runner_set_identifier(struct runner *r, const char *id)
{
    snprintf(r->identifier, sizeof r->identifier, "%s", id);
}

/* vtwork's callbacks (vtwork.h) */
static int model_feed(void *target, const uint8_t *p, size_t n)
{
    return vt_feed(target, p, n);
}

static void on_model_room(void *ud)
{
    struct runner *r = ud;
    for (unsigned i = 0; i < r->nterms; i++)
        term_update_polls(r->terms[i]);
}

/* The models' thread passed a mark: the closed terminals' models it no
 * longer feeds go, and the snapshots and resizes that waited run. Then the
 * earliest mark still waited for is asked for (vtw_notify calls back for
 * one mark at a time); one passed meanwhile makes another round. */
static void on_model_mark(void *ud)
{
    struct runner *r = ud;
    for (;;) {
        size_t next = 0; /* the earliest mark still waited for; 0: none */
        unsigned k = 0;
        for (unsigned i = 0; i < r->ndead; i++) {
            if (vtw_passed(r->vtw, r->dead[i].mark)) {
                vt_free(r->dead[i].vt);
                continue;
            }
            if (!next || r->dead[i].mark < next)
                next = r->dead[i].mark;
            r->dead[k++] = r->dead[i];
        }
        r->ndead = k;
        for (unsigned i = 0; i < r->nterms; i++) {
            struct term *t = r->terms[i];
            if (!t->nops && !t->model_held)
                continue;
            if (vtw_passed(r->vtw, t->model_mark)) {
                t->model_held = 0;
                if (t->nops)
                    ops_run(r, t); /* reads t again */
                else
                    term_update_polls(t);
            } else if (!next || t->model_mark < next) {
                next = t->model_mark;
            }
        }
        if (!next || !vtw_notify(r->vtw, next))
            return;
    }
}

static void on_model_error(void *ud, uint32_t ch, int rc, unsigned count)
{
    runner_log(ud, 0, "channel %u: screen model: %s (%u failures)", (unsigned)ch, al_strerror(rc),
               count);
}

/* The CPUs this process may run on (1 when it cannot tell). */
static int usable_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    return CPU_COUNT(&set);
}

int runner_new(uv_loop_t *loop, const struct runner_config *cfg, struct runner **out)
{
    struct runner *r = calloc(1, sizeof *r);
    if (!r)
        return AL_E_NOMEM;
    r->loop = loop;
    r->cfg = *cfg;
    snprintf(r->identifier, sizeof r->identifier, "%s", cfg->identifier);
    r->cfg.identifier = r->identifier;
    if (!r->cfg.screen_budget)
        r->cfg.screen_budget = RUNNER_DEFAULT_SCREEN_BUDGET;
    if (r->cfg.leeway < 0 || r->cfg.leeway > TOK_LEEWAY_MAX)
        r->cfg.leeway = r->cfg.leeway < 0 ? 0 : TOK_LEEWAY_MAX;
    ratelim_init(&r->snap_lim, RUNNER_SNAP_INTERVAL_US, RUNNER_SNAP_BURST);
    int cpus = usable_cpus();
    r->spin = cpus > 1;
    struct ep_config ec;
    ep_config_default(&ec, FR_ROLE_HOST);
    char name[AL_VERSION_NAME_MAX];
    ec.name = al_version_name("airlock-runner", name, sizeof name);
    if (cfg->ring)
        ec.tx_ring = cfg->ring;
    if (cfg->window)
        ec.window = cfg->window;
    if (ec.tx_ring < ec.window)
        ec.window = (uint32_t)ec.tx_ring;
    ec.ping_interval_us = cfg->ping_interval_ms * 1000u;
    ec.idle_timeout_us = cfg->idle_timeout_ms * 1000u;
    ec.on_event = on_event;
    ec.ud = r;
    int rc = ep_new(&ec, &r->ep);
    if (rc != AL_OK) {
        free(r);
        return rc;
    }
    (void)uv_timer_init(loop, &r->tick);
    (void)uv_timer_init(loop, &r->grace);
    (void)uv_timer_init(loop, &r->snap_timer);
    (void)uv_signal_init(loop, &r->sigchld);
    (void)uv_idle_init(loop, &r->write_due);
    (void)uv_prepare_init(loop, &r->turn_start);
    r->tick.data = r->grace.data = r->snap_timer.data = r->sigchld.data = r->write_due.data = r;
    r->turn_start.data = r;
    (void)uv_prepare_start(&r->turn_start, on_turn_start);
    uv_unref((uv_handle_t *)&r->turn_start); /* it never keeps the loop alive */
    (void)uv_signal_start(&r->sigchld, on_sigchld, SIGCHLD);
    *out = r;
    if (cpus > 1) {
        struct vtw_config wc = {.feed = model_feed,
                                .on_room = on_model_room,
                                .on_error = on_model_error,
                                .on_mark = on_model_mark,
                                .ud = r};
        rc = vtw_new(loop, &wc, &r->vtw);
        if (rc != AL_OK)
            runner_log(r, 0, "no thread for the screen models (%s): the loop feeds them",
                       al_strerror(rc));
    }
    runner_log(r, 1, "screen models: %s (%d usable CPUs)",
               r->vtw ? "fed by a thread of their own" : "fed by the loop", cpus);
    rc = proxy_start(r);
    if (rc != AL_OK) {
        *out = NULL;
        runner_free(r); /* the memory goes once the loop closes the handles */
        return rc;
    }
    return AL_OK;
}

static void free_when_closed(uv_handle_t *h)
{
    struct runner *r = h->data;
    if (++r->freeing == 6) {
        ep_free(r->ep);
        free(r);
    }
}

void runner_free(struct runner *r)
{
    if (!r)
        return;
    while (r->nterms > 0) {
        struct term *t = r->terms[0];
        (void)proc_kill_tree(&t->proc);
        term_destroy(t);
    }
    runner_proxy_free(r->proxy);
    r->proxy = NULL;
    vtw_close(r->vtw); /* after the terminals: it feeds what is queued, then ends */
    r->vtw = NULL;
    for (unsigned i = 0; i < r->ndead; i++)
        vt_free(r->dead[i].vt);
    r->ndead = 0;
    uv_close((uv_handle_t *)&r->tick, free_when_closed);
    uv_close((uv_handle_t *)&r->grace, free_when_closed);
    uv_close((uv_handle_t *)&r->snap_timer, free_when_closed);
    uv_close((uv_handle_t *)&r->sigchld, free_when_closed);
    uv_close((uv_handle_t *)&r->write_due, free_when_closed);
    uv_close((uv_handle_t *)&r->turn_start, free_when_closed);
}

void runner_link_up(struct runner *r, void *link, runner_want_write_fn *ww, int64_t token_exp)
{
    uint64_t now = now_us(r);
    r->link = link;
    r->want_write = ww;
    ep_link_up(r->ep, now);
    ep_set_token_deadline(r->ep, deadline_of(r, token_exp));
    (void)uv_timer_stop(&r->grace);
    schedule_tick(r);
    for (unsigned i = 0; i < r->nterms; i++)
        term_update_polls(r->terms[i]);
    want_write(r);
}

void runner_link_down(struct runner *r, void *link)
{
    if (r->link != link)
        return;
    r->link = NULL;
    r->want_write = NULL;
    ep_link_down(r->ep);
    (void)uv_timer_stop(&r->tick);
    /* a snapshot cut by the link is asked for again on the next one (§8) */
    for (unsigned i = 0; i < r->nterms; i++) {
        struct term *t = r->terms[i];
        t->snap_pending = 0;
        /* the waiting snapshots go too; the resizes still wait */
        unsigned k = 0, had = t->nops;
        for (unsigned j = 0; j < had; j++)
            if (t->ops[j].kind != OP_SNAPSHOT)
                t->ops[k++] = t->ops[j];
        t->nops = k;
        if (had && !k)
            term_update_polls(t);
    }
    (void)uv_timer_stop(&r->snap_timer);
    if (r->cfg.grace_ms)
        (void)uv_timer_start(&r->grace, on_grace, r->cfg.grace_ms, 0);
}

int runner_link_is(const struct runner *r, const void *link)
{
    return r->link == link;
}

int runner_input(struct runner *r, const uint8_t *msg, size_t len)
{
    int rc = ep_input(r->ep, msg, len, now_us(r));
    schedule_tick(r);
    want_write(r);
    return rc;
}

int runner_refuse(struct runner *r, uint16_t code, const char *why)
{
    int rc = ep_fail(r->ep, code, why);
    want_write(r);
    return rc;
}

long runner_output(struct runner *r, uint8_t *buf, size_t cap)
{
    long n = ep_output(r->ep, buf, cap, now_us(r));
    if (n == 0) {
        /* the endpoint drained: rings may have room again */
        for (unsigned i = 0; i < r->nterms; i++)
            term_update_polls(r->terms[i]);
    }
    return n;
}

int runner_closing(const struct runner *r, int *code, const char **reason)
{
    return ep_closing(r->ep, code, reason);
}
