/*
 * Tests of the airlock.v1 state machine (src/common/endpoint*.c).
 *
 * Two endpoints, a host and a controller, talk through a simulated link: a
 * byte pipe in each direction that can be cut after any number of bytes.
 * Bytes of a frame that were in flight at the cut are lost, exactly as a
 * dropped WebSocket loses a message it had not finished delivering. The
 * "applications" on each side are scripted: the host's process prints a
 * known pattern and echoes nothing; the controller types a known pattern,
 * then EOF; the process exits after stdin EOF and all its output.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "al_err.h"
#include "endpoint.h"
#include "frame.h"
#include "testutil.h"

#define MAXCH (AL_MAX_CHANNELS + 2)
#define LINK_CAP (4u << 20)

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const uint8_t *p, size_t n)
{
    if (n == 0)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void buf_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* One stdout event as the controller saw it, with its stream's next after. */
struct evrec {
    enum ep_ev_type type;
    uint64_t offset, to, next;
    size_t len;
};
#define MAXLOG 4096

/* What one side's application saw and does. */
struct app {
    struct ep *ep;
    int host;
    int consume; /* deliver received bytes at once (else the test does) */
    struct buf rx[MAXCH][FR_NSTREAMS];
    int eof[MAXCH][FR_NSTREAMS];
    int opened[MAXCH], attached[MAXCH], exited[MAXCH], closed[MAXCH], lost[MAXCH];
    int32_t exit_code[MAXCH];
    uint8_t exit_sig[MAXCH];
    int ready, errors, pongs, tokens, resizes, signals, snapreqs, lists;
    uint16_t last_error;
    uint64_t last_rtt;
    uint16_t cols, rows;
    uint8_t signo, scope;
    int gaps;
    uint64_t gap_from, gap_to;
    struct buf snapshot;
    uint64_t snap_off;
    int snaps;
    unsigned list_count;
    int open_fails; /* host: refuse this many OPENs */
    /* stdout DATA/GAP/SNAPSHOT in arrival order (controller) */
    struct evrec log[MAXLOG];
    unsigned nlog;
    uint64_t last_off[FR_NSTREAMS]; /* offset of the last DATA per stream */
    /* relay sessions */
    int relay;               /* host: adopt on EP_EV_ATTACH */
    uint64_t out_base;       /* ... with this stdout base */
    uint64_t in_next;        /* ... and this stdin offset */
    uint8_t relay_role;      /* ... then ep_set_role() to this, if non-zero */
    int relay_snap;          /* ... and queue a 3-byte snapshot at out_base */
    int attaches, takeovers; /* host */
    uint64_t attach_out, attach_err;
    uint16_t attach_cols, attach_rows;
    uint8_t attach_resume;
    int roles; /* controller */
    uint8_t role;
    uint64_t role_next, role_limit;
    int viewer_lists;
    unsigned viewer_count;
    char viewer_name[AL_MAX_VIEWERS][AL_MAX_VIEWER_NAME + 1];
    uint8_t viewer_role[AL_MAX_VIEWERS];
    struct buf moves; /* the endpoint's log: one line per state change */
    /* the credential proxy's channels */
    int proxy_ats, proxy_opens, proxy_refuse;
    struct buf proxy_at;
};

static void log_ev(struct app *a, const struct ep_event *ev)
{
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(a->ep, ev->channel, FR_STDOUT, &si), 0);
    assert_true(a->nlog < MAXLOG);
    struct evrec *r = &a->log[a->nlog++];
    r->type = ev->type;
    r->offset = ev->offset;
    r->to = ev->to;
    r->len = ev->len;
    r->next = si.end;
}

static void on_event(void *ud, const struct ep_event *ev)
{
    struct app *a = ud;
    /* a proxy channel's events are kept at the index of its id's low bits */
    uint32_t ch = ev->channel & ~FR_PROXY_CHANNEL_BIT;
    if (ch >= MAXCH && ev->type != EP_EV_READY && ev->type != EP_EV_PONG &&
        ev->type != EP_EV_TOKEN && ev->type != EP_EV_LIST && ev->type != EP_EV_ERROR)
        fail_msg("channel %u out of test range", (unsigned)ch);
    switch (ev->type) {
    case EP_EV_READY:
        a->ready++;
        break;
    case EP_EV_OPEN:
        if (a->open_fails > 0) {
            a->open_fails--;
            assert_int_equal(ep_open_failed(a->ep, ch, "no such program"), 0);
        } else {
            a->opened[ch]++;
            assert_int_equal(ep_opened(a->ep, ch, 1000 + ch), 0);
        }
        break;
    case EP_EV_OPENED:
        a->opened[ch]++;
        assert_int_equal(ev->pid, 1000 + ch);
        break;
    case EP_EV_ATTACHED:
        a->attached[ch]++;
        break;
    case EP_EV_LOST:
        a->lost[ch]++;
        break;
    case EP_EV_DATA:
        a->last_off[ev->stream] = ev->offset;
        if (!a->host && ev->stream == FR_STDOUT)
            log_ev(a, ev);
        buf_add(&a->rx[ch][ev->stream], ev->data, ev->len);
        if (a->consume)
            assert_int_equal(ep_consume(a->ep, ev->channel, ev->stream, ev->len), 0);
        break;
    case EP_EV_EOF:
        a->eof[ch][ev->stream]++;
        break;
    case EP_EV_GAP:
        if (ev->stream == FR_STDOUT)
            log_ev(a, ev);
        a->gaps++;
        a->gap_from = ev->offset;
        a->gap_to = ev->to;
        break;
    case EP_EV_RESIZE:
        a->resizes++;
        a->cols = ev->cols;
        a->rows = ev->rows;
        break;
    case EP_EV_SIGNAL:
        a->signals++;
        a->signo = ev->signo;
        a->scope = ev->scope;
        break;
    case EP_EV_EXIT:
        a->exited[ch]++;
        a->exit_code[ch] = ev->exit_code;
        a->exit_sig[ch] = ev->signo;
        break;
    case EP_EV_CLOSED:
        a->closed[ch]++;
        break;
    case EP_EV_SNAPSHOT_REQ:
        a->snapreqs++;
        break;
    case EP_EV_SNAPSHOT:
        log_ev(a, ev);
        a->snaps++;
        a->snapshot.len = 0;
        buf_add(&a->snapshot, ev->data, ev->len);
        a->snap_off = ev->offset;
        break;
    case EP_EV_LIST:
        a->lists++;
        a->list_count = ev->list->u.list.count;
        break;
    case EP_EV_TOKEN:
        a->tokens++;
        break;
    case EP_EV_PONG:
        a->pongs++;
        a->last_rtt = ev->rtt_us;
        break;
    case EP_EV_ERROR:
        a->errors++;
        a->last_error = ev->code;
        break;
    case EP_EV_WRITABLE:
        break;
    case EP_EV_ATTACH:
        a->attaches++;
        a->attach_out = ev->offset;
        a->attach_err = ev->to;
        a->attach_cols = ev->cols;
        a->attach_rows = ev->rows;
        a->attach_resume = ev->resume;
        if (a->relay) {
            assert_int_equal(ep_host_adopt(a->ep, ch, FR_MODE_PTY, a->out_base, ev->to, a->in_next),
                             0);
            if (a->relay_role)
                assert_int_equal(ep_set_role(a->ep, ch, a->relay_role, a->in_next), 0);
            if (a->relay_snap)
                assert_int_equal(
                    ep_snapshot(a->ep, ch, a->out_base, 80, 24, (const uint8_t *)"scr", 3), 0);
        }
        break;
    case EP_EV_TAKEOVER:
        a->takeovers++;
        break;
    case EP_EV_ROLE:
        a->roles++;
        a->role = ev->state;
        a->role_next = ev->offset;
        a->role_limit = ev->to;
        break;
    case EP_EV_PROXY_AT:
        a->proxy_ats++;
        a->proxy_at.len = 0;
        buf_add(&a->proxy_at, ev->data, ev->len);
        break;
    case EP_EV_PROXY_OPEN:
        a->proxy_opens++;
        if (a->proxy_refuse)
            assert_int_equal(ep_proxy_refuse(a->ep, ev->channel, FR_ERR_FORBIDDEN, "no proxy"), 0);
        break;
    case EP_EV_VIEWERS: {
        const struct fr_frame *f = ev->list;
        assert_int_equal(f->type, FR_VIEWERS);
        a->viewer_lists++;
        a->viewer_count = f->u.viewers.count;
        for (unsigned i = 0; i < f->u.viewers.count; i++) {
            memcpy(a->viewer_name[i], f->u.viewers.e[i].name.p, f->u.viewers.e[i].name.len);
            a->viewer_name[i][f->u.viewers.e[i].name.len] = 0;
            a->viewer_role[i] = f->u.viewers.e[i].role;
        }
        break;
    }
    }
}

/* The endpoint's log hook: every state change is kept; a refused one (a
 * move missing from the endpoint's tables, a bug) fails the test. */
static void on_log(void *ud, int level, const char *msg)
{
    struct app *a = ud;
    if (level == 0)
        fail_msg("endpoint: %s", msg);
    buf_add(&a->moves, (const uint8_t *)msg, strlen(msg));
    buf_add(&a->moves, (const uint8_t *)"\n", 1);
}

static void app_free(struct app *a)
{
    ep_free(a->ep);
    buf_free(&a->moves);
    for (int c = 0; c < MAXCH; c++)
        for (int s = 0; s < FR_NSTREAMS; s++)
            buf_free(&a->rx[c][s]);
    buf_free(&a->snapshot);
    buf_free(&a->proxy_at);
}

/* The link: dir 0 carries host -> controller, dir 1 controller -> host. */
struct sim {
    struct app host, ctl;
    struct buf wire[2];  /* sent, not yet carried */
    struct buf inbox[2]; /* carried, frame not yet complete */
    uint64_t budget;     /* bytes to carry before the cut */
    uint64_t carried;    /* bytes carried in all */
    int cuts;
    uint64_t now;
    uint8_t *frame;
};

static void sim_init(struct sim *s, uint32_t window, size_t ring)
{
    memset(s, 0, sizeof *s);
    s->frame = malloc(AL_MAX_FRAME);
    assert_non_null(s->frame);
    s->budget = UINT64_MAX;
    s->now = 1000000;
    struct app *apps[2] = {&s->host, &s->ctl};
    for (int i = 0; i < 2; i++) {
        struct ep_config c;
        ep_config_default(&c, i == 0 ? FR_ROLE_HOST : FR_ROLE_CONTROLLER);
        c.window = window;
        c.tx_ring = ring;
        c.ping_interval_us = 0;
        c.idle_timeout_us = 0;
        c.on_event = on_event;
        c.on_log = on_log;
        c.serves_proxy = i == 1;
        c.ud = apps[i];
        apps[i]->host = i == 0;
        apps[i]->consume = 1;
        assert_int_equal(ep_new(&c, &apps[i]->ep), 0);
        ep_link_up(apps[i]->ep, s->now);
    }
}

static void sim_free(struct sim *s)
{
    app_free(&s->host);
    app_free(&s->ctl);
    for (int i = 0; i < 2; i++) {
        buf_free(&s->wire[i]);
        buf_free(&s->inbox[i]);
    }
    free(s->frame);
}

static void sim_cut(struct sim *s)
{
    s->cuts++;
    ep_link_down(s->host.ep);
    ep_link_down(s->ctl.ep);
    for (int i = 0; i < 2; i++) {
        s->wire[i].len = 0;
        s->inbox[i].len = 0;
    }
    s->now += 1000;
    ep_link_up(s->host.ep, s->now);
    ep_link_up(s->ctl.ep, s->now);
}

/* Move everything each side wants to send through the link. */
static void sim_pump(struct sim *s)
{
    struct ep *eps[2] = {s->host.ep, s->ctl.ep};
    s->now += 1000;
    for (int i = 0; i < 2; i++) {
        long n;
        while ((n = ep_output(eps[i], s->frame, AL_MAX_FRAME, s->now)) > 0)
            buf_add(&s->wire[i], s->frame, (size_t)n);
        assert_true(n == 0);
    }
    for (int d = 0; d < 2; d++) {
        struct buf *w = &s->wire[d], *in = &s->inbox[d];
        size_t n = w->len;
        int cut = 0;
        if (n > s->budget) {
            n = (size_t)s->budget;
            cut = 1;
        }
        s->budget -= s->budget == UINT64_MAX ? 0 : n;
        s->carried += n;
        buf_add(in, w->p, n);
        w->len = 0;
        /* hand over every complete frame */
        size_t off = 0;
        for (;;) {
            long flen = fr_frame_len(in->p + off, in->len - off);
            if (flen < 0 || (size_t)flen > in->len - off)
                break;
            if (getenv("TRACE")) {
                struct fr_frame tf;
                int trc = fr_decode(in->p + off, (size_t)flen, &tf);
                fprintf(stderr, "%s %s ch=%u fl=%u rc=%d off=%llu\n", d ? "C->H" : "H->C",
                        fr_type_name(in->p[off]), (unsigned)tf.channel, tf.flags, trc,
                        tf.type == FR_DATA ? (unsigned long long)tf.u.data.offset : 0ull);
            }
            int rc = ep_input(eps[1 - d], in->p + off, (size_t)flen, s->now);
            if (rc != 0)
                fail_msg("ep_input: %s", al_strerror(rc));
            off += (size_t)flen;
        }
        if (off > 0) {
            memmove(in->p, in->p + off, in->len - off);
            in->len -= off;
        }
        if (cut) {
            s->budget = UINT64_MAX;
            sim_cut(s);
            return;
        }
    }
}

static uint8_t pattern(uint64_t off, unsigned salt)
{
    uint64_t x = off * 0x9E3779B97F4A7C15ull + salt;
    return (uint8_t)(x >> 56);
}

/* The scripted exchange: one PTY channel, or a PTY and a pipe channel. */
struct script {
    size_t out_len, in_len, err_len;
    size_t out_chunk, in_chunk;
    int nch;
    uint32_t ch[2];
    size_t out_done[2], err_done[2], in_done[2];
    int in_eof[2], exit_done[2], close_asked[2];
};

static void host_act(struct sim *s, struct script *sc)
{
    for (int k = 0; k < sc->nch; k++) {
        uint32_t ch = sc->ch[k];
        if (!s->host.opened[ch] || sc->exit_done[k] || s->host.closed[ch])
            continue;
        uint8_t tmp[4096];
        size_t want = sc->out_len - sc->out_done[k];
        if (want > sc->out_chunk)
            want = sc->out_chunk;
        for (size_t i = 0; i < want; i++)
            tmp[i] = pattern(sc->out_done[k] + i, ch);
        long n = ep_write(s->host.ep, ch, FR_STDOUT, tmp, want);
        assert_true(n >= 0);
        sc->out_done[k] += (size_t)n;
        if (k == 1) { /* the pipe channel also writes stderr */
            want = sc->err_len - sc->err_done[k];
            if (want > sc->out_chunk / 3)
                want = sc->out_chunk / 3;
            for (size_t i = 0; i < want; i++)
                tmp[i] = pattern(sc->err_done[k] + i, 77);
            n = ep_write(s->host.ep, ch, FR_STDERR, tmp, want);
            assert_true(n >= 0);
            sc->err_done[k] += (size_t)n;
        }
        int err_ok = k == 0 || sc->err_done[k] == sc->err_len;
        if (sc->out_done[k] == sc->out_len && err_ok && s->host.eof[ch][FR_STDIN]) {
            assert_int_equal(ep_exit(s->host.ep, ch, k == 0 ? 3 : 0, 0, 0), 0);
            sc->exit_done[k] = 1;
        }
    }
}

static void ctl_act(struct sim *s, struct script *sc)
{
    for (int k = 0; k < sc->nch; k++) {
        uint32_t ch = sc->ch[k];
        if (s->ctl.closed[ch])
            continue;
        if (sc->in_done[k] < sc->in_len) {
            uint8_t tmp[4096];
            size_t want = sc->in_len - sc->in_done[k];
            if (want > sc->in_chunk)
                want = sc->in_chunk;
            for (size_t i = 0; i < want; i++)
                tmp[i] = pattern(sc->in_done[k] + i, 100 + ch);
            long n = ep_write(s->ctl.ep, ch, FR_STDIN, tmp, want);
            assert_true(n >= 0);
            sc->in_done[k] += (size_t)n;
        } else if (!sc->in_eof[k]) {
            assert_int_equal(ep_eof(s->ctl.ep, ch, FR_STDIN), 0);
            sc->in_eof[k] = 1;
        }
        if (s->ctl.exited[ch] && !sc->close_asked[k]) {
            assert_int_equal(ep_close(s->ctl.ep, ch), 0);
            sc->close_asked[k] = 1;
        }
    }
}

/* Run the exchange; cut the link after `cut_at` bytes (UINT64_MAX: never).
 * Returns the number of bytes the link carried. */
static uint64_t run_exchange(struct script *sc_in, uint64_t cut_at, uint64_t seed, int random_cuts,
                             uint32_t window, size_t ring)
{
    static struct sim s;
    struct script sc = *sc_in;
    sim_init(&s, window, ring);
    s.budget = cut_at;
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.term = (struct fr_str){"xterm", 5};
    o.argc = 1;
    o.argv[0] = (struct fr_str){"cat", 3};
    for (int k = 0; k < sc.nch; k++) {
        o.mode = k == 0 ? FR_MODE_PTY : FR_MODE_PIPES;
        long id = ep_open(s.ctl.ep, &o);
        assert_true(id > 0);
        sc.ch[k] = (uint32_t)id;
    }
    int steps = 0;
    for (;;) {
        host_act(&s, &sc);
        ctl_act(&s, &sc);
        if (random_cuts && s.budget == UINT64_MAX && s.cuts < random_cuts)
            s.budget = tu_rand(&seed) % 20000;
        sim_pump(&s);
        int done = ep_channel_count(s.host.ep) == 0 && ep_channel_count(s.ctl.ep) == 0;
        if (done)
            break;
        if (++steps > 100000)
            fail_msg("exchange did not finish (cut at %llu)", (unsigned long long)cut_at);
    }
    /* every byte arrived once, in order, both ways */
    for (int k = 0; k < sc.nch; k++) {
        uint32_t ch = sc.ch[k];
        struct buf *out = &s.ctl.rx[ch][FR_STDOUT], *in = &s.host.rx[ch][FR_STDIN];
        if (out->len != sc.out_len)
            fail_msg("cut at %llu: stdout %zu bytes, want %zu", (unsigned long long)cut_at,
                     out->len, sc.out_len);
        for (size_t i = 0; i < out->len; i++)
            if (out->p[i] != pattern(i, ch))
                fail_msg("cut at %llu: stdout byte %zu wrong", (unsigned long long)cut_at, i);
        if (in->len != sc.in_len)
            fail_msg("cut at %llu: stdin %zu bytes, want %zu", (unsigned long long)cut_at, in->len,
                     sc.in_len);
        for (size_t i = 0; i < in->len; i++)
            if (in->p[i] != pattern(i, 100 + ch))
                fail_msg("cut at %llu: stdin byte %zu wrong", (unsigned long long)cut_at, i);
        if (k == 1) {
            struct buf *err = &s.ctl.rx[ch][FR_STDERR];
            assert_int_equal(err->len, sc.err_len);
            for (size_t i = 0; i < err->len; i++)
                assert_int_equal(err->p[i], pattern(i, 77));
        }
        assert_int_equal(s.ctl.exited[ch], 1);
        assert_int_equal(s.ctl.exit_code[ch], k == 0 ? 3 : 0);
        assert_int_equal(s.ctl.eof[ch][FR_STDOUT], 1);
        assert_int_equal(s.host.eof[ch][FR_STDIN], 1);
        assert_int_equal(s.ctl.closed[ch], 1);
        assert_int_equal(s.host.closed[ch], 1);
        assert_int_equal(s.ctl.lost[ch], 0);
        assert_int_equal(s.host.opened[ch], 1); /* the process started once */
    }
    assert_int_equal(s.ctl.gaps, 0);
    assert_int_equal(s.ctl.errors, 0);
    assert_int_equal(s.host.errors, 0);
    if (cut_at != UINT64_MAX && !random_cuts && cut_at < s.carried)
        assert_int_equal(s.cuts, 1);
    if (random_cuts)
        assert_int_equal(s.cuts, random_cuts);
    uint64_t carried = s.carried;
    sim_free(&s);
    return carried;
}

/* The acceptance test: a cut at every byte boundary of the exchange. */
static void test_resume_at_every_byte(void **state)
{
    (void)state;
    struct script sc = {.out_len = 3000, .in_len = 400, .out_chunk = 700, .in_chunk = 90, .nch = 1};
    uint64_t total = run_exchange(&sc, UINT64_MAX, 0, 0, 1024, 2048);
    assert_true(total > sc.out_len + sc.in_len);
    const char *only = getenv("ONLY_CUT"); /* to debug one case */
    for (uint64_t k = 0; k <= total; k++)
        if (!only || strtoull(only, NULL, 10) == k)
            run_exchange(&sc, k, 0, 0, 1024, 2048);
    print_message("cut at each of %llu byte boundaries: all streams complete, no duplicate\n",
                  (unsigned long long)total + 1);
}

/* Two channels (PTY and pipes with stderr), several random cuts per run. */
static void test_resume_random_cuts(void **state)
{
    (void)state;
    struct script sc = {.out_len = 60000,
                        .in_len = 9000,
                        .err_len = 7000,
                        .out_chunk = 3000,
                        .in_chunk = 500,
                        .nch = 2};
    for (uint64_t seed = 1; seed <= 60; seed++)
        run_exchange(&sc, UINT64_MAX, seed * 7919, 5, 4096, 16384);
}

/* ---- focused behaviours --------------------------------------------------- */

static struct sim *new_sim(uint32_t window, size_t ring)
{
    struct sim *s = malloc(sizeof *s);
    assert_non_null(s);
    sim_init(s, window, ring);
    sim_pump(s); /* HELLOs */
    assert_true(ep_ready(s->host.ep) && ep_ready(s->ctl.ep));
    return s;
}

static void del_sim(struct sim *s)
{
    sim_free(s);
    free(s);
}

static uint32_t open_pty(struct sim *s)
{
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"sh", 2};
    long id = ep_open(s->ctl.ep, &o);
    assert_true(id > 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.opened[id], 1);
    return (uint32_t)id;
}

static void test_flow_control_bounds_memory(void **state)
{
    (void)state;
    struct sim *s = new_sim(4096, 16384);
    s->ctl.consume = 0; /* the controller stops delivering */
    uint32_t ch = open_pty(s);
    uint8_t junk[1000];
    memset(junk, 'y', sizeof junk);
    size_t written = 0;
    for (int i = 0; i < 200; i++) {
        long n = ep_write(s->host.ep, ch, FR_STDOUT, junk, sizeof junk);
        assert_true(n >= 0);
        written += (size_t)n;
        sim_pump(s);
    }
    /* the host took no more than its ring, the controller no more than the window */
    assert_int_equal(written, 16384);
    assert_int_equal(ep_writable(s->host.ep, ch, FR_STDOUT), 0);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 4096);
    /* delivering what arrived grants credit: the rest flows */
    assert_int_equal(ep_consume(s->ctl.ep, ch, FR_STDOUT, 4096), 0);
    s->ctl.consume = 1;
    for (int i = 0; i < 20; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 16384);
    assert_true(ep_writable(s->host.ep, ch, FR_STDOUT) > 0);
    /* consuming more than arrived is refused */
    assert_int_equal(ep_consume(s->ctl.ep, ch, FR_STDOUT, 1), AL_E_INVAL);
    del_sim(s);
}

static void test_gap_when_ring_moved_on(void **state)
{
    (void)state;
    struct sim *s = new_sim(4096, 8192);
    uint32_t ch = open_pty(s);
    uint8_t b[1000];
    size_t total = 0;
    for (int i = 0; i < 40; i++) {
        for (size_t j = 0; j < sizeof b; j++)
            b[j] = pattern(total + j, 9);
        long n = ep_write(s->host.ep, ch, FR_STDOUT, b, sizeof b);
        assert_true(n >= 0);
        total += (size_t)n;
        sim_pump(s);
    }
    assert_int_equal(total, 40000);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 40000);
    /* a new controller that knows the channel but only up to offset 1000
     * (it restarted with old state): the host has only its last 8192 bytes */
    ep_free(s->ctl.ep);
    for (int cc = 0; cc < MAXCH; cc++)
        for (int st = 0; st < FR_NSTREAMS; st++)
            buf_free(&s->ctl.rx[cc][st]);
    buf_free(&s->ctl.snapshot);
    buf_free(&s->ctl.moves);
    memset(&s->ctl, 0, sizeof s->ctl);
    s->ctl.consume = 1;
    struct ep_config c;
    ep_config_default(&c, FR_ROLE_CONTROLLER);
    c.window = 4096;
    c.tx_ring = 8192;
    c.ping_interval_us = c.idle_timeout_us = 0;
    c.on_event = on_event;
    c.on_log = on_log;
    c.ud = &s->ctl;
    assert_int_equal(ep_new(&c, &s->ctl.ep), 0);
    assert_int_equal(ep_adopt(s->ctl.ep, ch, FR_MODE_PTY, 1000, 0), 0);
    assert_int_equal(ep_adopt(s->ctl.ep, ch, FR_MODE_PTY, 1000, 0), AL_E_EXISTS);
    sim_cut(s);
    for (int i = 0; i < 20; i++)
        sim_pump(s);
    /* the ring keeps the last 8192 bytes: [31808, 40000); 1000..31808 is a gap */
    assert_int_equal(s->ctl.gaps, 1);
    assert_int_equal(s->ctl.gap_from, 1000);
    assert_int_equal(s->ctl.gap_to, 40000 - 8192);
    assert_int_equal(s->ctl.attached[ch], 1);
    struct buf *got = &s->ctl.rx[ch][FR_STDOUT];
    assert_int_equal(got->len, 8192);
    for (size_t i = 0; i < got->len; i++)
        assert_int_equal(got->p[i], pattern(40000 - 8192 + i, 9));
    del_sim(s);
}

/* Feed raw frames to a fresh host endpoint and see how it reacts. */
struct probe {
    struct ep *ep;
    struct app app;
    uint8_t out[AL_MAX_FRAME];
};

static void probe_init(struct probe *p, enum fr_role role)
{
    memset(p, 0, sizeof *p);
    struct ep_config c;
    ep_config_default(&c, role);
    c.on_event = on_event;
    c.on_log = on_log;
    c.ud = &p->app;
    c.ping_interval_us = 1000000;
    c.idle_timeout_us = 5000000;
    p->app.consume = 1;
    assert_int_equal(ep_new(&c, &p->ep), 0);
    p->app.ep = p->ep;
    ep_link_up(p->ep, 0);
}

static void probe_free(struct probe *p)
{
    app_free(&p->app); /* frees p->ep too: app.ep is the same endpoint */
}

static int probe_send(struct probe *p, const struct fr_frame *f, uint64_t now)
{
    uint8_t buf[AL_MAX_FRAME];
    long n = fr_encode(f, buf, sizeof buf);
    assert_true(n > 0);
    return ep_input(p->ep, buf, (size_t)n, now);
}

static void probe_hello(struct probe *p, enum fr_role role, uint16_t lo, uint16_t hi)
{
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_HELLO;
    f.u.hello.version_min = lo;
    f.u.hello.version_max = hi;
    f.u.hello.role = (uint8_t)role;
    f.u.hello.max_frame = AL_MAX_FRAME;
    (void)probe_send(p, &f, 0);
}

/* Drain output; return the code of the last ERROR frame seen (0: none). */
static uint16_t probe_drain(struct probe *p, uint64_t now)
{
    uint16_t code = 0;
    long n;
    struct fr_frame f;
    while ((n = ep_output(p->ep, p->out, sizeof p->out, now)) > 0) {
        assert_int_equal(fr_decode(p->out, (size_t)n, &f), 0);
        if (f.type == FR_ERROR)
            code = f.u.error.code;
    }
    return code;
}

static void test_version_and_roles(void **state)
{
    (void)state;
    struct probe p;
    int code;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 2, 3);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_VERSION);
    assert_true(ep_closing(p.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_VERSION);
    probe_free(&p);

    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    assert_true(ep_closing(p.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_PROTOCOL);
    probe_free(&p);

    /* a newer peer that also speaks 1 is fine */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 9);
    assert_int_equal(probe_drain(&p, 0), 0);
    assert_true(ep_ready(p.ep));
    assert_int_equal(p.app.ready, 1);
    /* a second HELLO is an error */
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    probe_free(&p);
}

static void test_bad_input(void **state)
{
    (void)state;
    struct probe p;
    struct fr_frame f;
    int code;
    const char *why;

    /* anything before HELLO */
    probe_init(&p, FR_ROLE_HOST);
    memset(&f, 0, sizeof f);
    f.type = FR_PING;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    /* after a fatal error, input is refused */
    assert_int_equal(probe_send(&p, &f, 0), AL_E_CLOSED);
    probe_free(&p);

    /* unknown frame type: a clear error naming it */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    uint8_t raw[AL_FRAME_HEADER] = {0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(ep_input(p.ep, raw, sizeof raw, 0), AL_E_TYPE);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_UNKNOWN_TYPE);
    assert_true(ep_closing(p.ep, &code, &why));
    assert_non_null(strstr(why, "0x42"));
    probe_free(&p);

    /* a frame only a host may send, sent to a host */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_OPENED;
    f.channel = 1;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    probe_free(&p);

    /* a probe session's frames (protocol.md §13) in a controller's
     * session, either way: a protocol error naming them */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE;
    f.u.probe.op = FR_PROBE_HEADERS;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    assert_true(ep_closing(p.ep, &code, &why));
    assert_non_null(strstr(why, "probe"));
    probe_free(&p);
    probe_init(&p, FR_ROLE_CONTROLLER);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_PROBE_REPLY;
    f.u.probe.op = FR_PROBE_ECHO;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    probe_free(&p);

    /* data beyond the credit, data leaving a hole */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.channel = 5;
    f.u.open.cols = 80;
    f.u.open.rows = 24;
    f.u.open.argc = 1;
    f.u.open.argv[0] = (struct fr_str){"sh", 2};
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(p.app.opened[5], 1);
    probe_drain(&p, 0); /* OPENED and the stdin ACK */
    static uint8_t big[AL_MAX_DATA];
    memset(&f, 0, sizeof f);
    f.type = FR_DATA;
    f.channel = 5;
    f.flags = FR_STDIN;
    f.u.data.offset = 10;
    f.u.data.bytes = (struct fr_bytes){big, 5};
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO); /* hole */
    probe_free(&p);

    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.channel = 5;
    f.u.open.cols = 80;
    f.u.open.rows = 24;
    f.u.open.argc = 1;
    f.u.open.argv[0] = (struct fr_str){"sh", 2};
    assert_int_equal(probe_send(&p, &f, 0), 0);
    probe_drain(&p, 0);
    memset(&f, 0, sizeof f);
    f.type = FR_DATA;
    f.channel = 5;
    f.flags = FR_STDIN;
    size_t sent = 0;
    int rc = 0;
    while (rc == 0 && sent <= EP_DEFAULT_WINDOW) {
        f.u.data.offset = sent;
        f.u.data.bytes = (struct fr_bytes){big, sizeof big};
        rc = probe_send(&p, &f, 0);
        sent += sizeof big;
    }
    assert_int_equal(rc, AL_E_PROTO); /* the window was 512 KiB and nothing was consumed? */
    assert_true(sent > EP_DEFAULT_WINDOW);
    probe_free(&p);

    /* a stream the channel's mode does not have */
    probe_init(&p, FR_ROLE_CONTROLLER);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"sh", 2};
    long id = ep_open(p.ep, &o);
    probe_drain(&p, 0);
    memset(&f, 0, sizeof f);
    f.type = FR_OPENED;
    f.channel = (uint32_t)id;
    f.u.opened.pid = 1000 + (uint32_t)id;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    memset(&f, 0, sizeof f);
    f.type = FR_DATA;
    f.channel = (uint32_t)id;
    f.flags = FR_STDERR;
    f.u.data.bytes = (struct fr_bytes){big, 1};
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    probe_free(&p);

    /* frames for channels nobody opened: a non-fatal NO_CHANNEL */
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_RESIZE;
    f.channel = 9;
    f.u.resize.cols = 10;
    f.u.resize.rows = 10;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_NO_CHANNEL);
    assert_false(ep_closing(p.ep, NULL, NULL));
    probe_free(&p);
}

static void test_ping_idle_token(void **state)
{
    (void)state;
    struct sim *s = new_sim(4096, 8192);
    /* pings go out on time and pongs measure the round trip */
    struct probe p;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    probe_drain(&p, 0);
    assert_int_equal(ep_next_deadline(p.ep), 1000000);
    ep_tick(p.ep, 1000000);
    long n = ep_output(p.ep, p.out, sizeof p.out, 1000000);
    struct fr_frame f;
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_PING);
    f.type = FR_PONG;
    assert_int_equal(probe_send(&p, &f, 1000250), 0);
    assert_int_equal(p.app.pongs, 1);
    assert_int_equal(p.app.last_rtt, 250);
    /* ep_ping: one goes with the next output, whatever the interval */
    assert_int_equal(ep_ping(p.ep), AL_OK);
    n = ep_output(p.ep, p.out, sizeof p.out, 1000260);
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_PING);
    assert_int_equal(f.u.ping.ts_us, 1000260);
    f.type = FR_PONG;
    assert_int_equal(probe_send(&p, &f, 1000290), 0);
    assert_int_equal(p.app.pongs, 2);
    assert_int_equal(p.app.last_rtt, 30);
    assert_int_equal(ep_output(p.ep, p.out, sizeof p.out, 1000290), 0);
    /* a PING is answered with its own timestamp */
    f.type = FR_PING;
    f.u.ping.ts_us = 777;
    assert_int_equal(probe_send(&p, &f, 1000300), 0);
    n = ep_output(p.ep, p.out, sizeof p.out, 1000300);
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_PONG);
    assert_int_equal(f.u.ping.ts_us, 777);
    /* silence for the idle timeout closes the link */
    ep_tick(p.ep, 1000300 + 4999999);
    assert_false(ep_closing(p.ep, NULL, NULL));
    ep_tick(p.ep, 1000300 + 5000000);
    int code;
    assert_true(ep_closing(p.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_IDLE);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_TIMEOUT);
    probe_free(&p);
    /* no ping before the handshake */
    probe_init(&p, FR_ROLE_HOST);
    assert_int_equal(ep_ping(p.ep), AL_E_STATE);
    probe_free(&p);

    /* the token deadline: a fresh token in band, then expiry */
    ep_set_token_deadline(s->host.ep, s->now + 50000);
    assert_int_equal(ep_send_token(s->ctl.ep, "a.b.c", 5), 0);
    sim_pump(s);
    assert_int_equal(s->host.tokens, 1);
    ep_set_token_deadline(s->host.ep, s->now + 100000); /* the app verified it */
    ep_tick(s->host.ep, s->now + 99999);
    assert_false(ep_closing(s->host.ep, NULL, NULL));
    ep_tick(s->host.ep, s->now + 100000);
    assert_true(ep_closing(s->host.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_TOKEN_EXPIRED);
    /* the controller is told why */
    sim_pump(s);
    assert_int_equal(s->ctl.last_error, FR_ERR_TOKEN_EXPIRED);
    /* a token bigger than the limit is refused by the API */
    static char huge[AL_MAX_TOKEN + 1];
    assert_int_equal(ep_send_token(s->ctl.ep, huge, sizeof huge), AL_E_INVAL);
    del_sim(s);
}

static void test_control_frames(void **state)
{
    (void)state;
    struct sim *s = new_sim(65536, 1 << 20);
    uint32_t ch = open_pty(s);
    /* resize and signals reach the host */
    assert_int_equal(ep_resize(s->ctl.ep, ch, 132, 43), 0);
    assert_int_equal(ep_signal(s->ctl.ep, ch, 2, FR_SIG_GROUP), 0);
    assert_int_equal(ep_signal(s->ctl.ep, ch, 9, FR_SIG_TREE), 0);
    assert_int_equal(ep_signal(s->ctl.ep, ch, 11, FR_SIG_TREE), AL_E_INVAL);
    sim_pump(s);
    assert_int_equal(s->host.resizes, 1);
    assert_int_equal(s->host.cols, 132);
    assert_int_equal(s->host.rows, 43);
    assert_int_equal(s->host.signals, 2);
    assert_int_equal(s->host.signo, 9);
    assert_int_equal(s->host.scope, FR_SIG_TREE);
    /* the signal queue is bounded */
    for (int i = 0; i < AL_MAX_PENDING_SIGNALS; i++)
        assert_int_equal(ep_signal(s->ctl.ep, ch, 2, 0), 0);
    assert_int_equal(ep_signal(s->ctl.ep, ch, 2, 0), AL_E_LIMIT);
    sim_pump(s);

    /* a snapshot larger than one frame arrives whole, with its offset */
    size_t sn = 200000;
    uint8_t *snap = malloc(sn);
    assert_non_null(snap);
    for (size_t i = 0; i < sn; i++)
        snap[i] = pattern(i, 5);
    assert_int_equal(ep_request_snapshot(s->ctl.ep, ch), 0);
    sim_pump(s);
    assert_int_equal(s->host.snapreqs, 1);
    /* a screen of output never written is refused */
    assert_int_equal(ep_snapshot(s->host.ep, ch, 1234, 80, 24, snap, sn), AL_E_INVAL);
    assert_int_equal(ep_write(s->host.ep, ch, FR_STDOUT, snap, 1234), 1234);
    assert_int_equal(ep_snapshot(s->host.ep, ch, 1234, 80, 24, snap, sn), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.snaps, 1);
    assert_int_equal(s->ctl.snap_off, 1234);
    assert_int_equal(s->ctl.snapshot.len, sn);
    assert_memory_equal(s->ctl.snapshot.p, snap, sn);
    /* an empty screen is a snapshot too */
    assert_int_equal(ep_snapshot(s->host.ep, ch, 0, 80, 24, NULL, 0), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.snaps, 2);
    assert_int_equal(s->ctl.snapshot.len, 0);
    assert_int_equal(ep_snapshot(s->host.ep, ch, 0, 80, 24, snap, AL_MAX_SNAPSHOT + 1),
                     AL_E_TOOBIG);
    free(snap);

    /* list */
    assert_int_equal(ep_list(s->ctl.ep), 0);
    sim_pump(s);
    sim_pump(s);
    assert_int_equal(s->ctl.lists, 1);
    assert_int_equal(s->ctl.list_count, 1);

    /* exit by signal is reported as such */
    assert_int_equal(ep_exit(s->host.ep, ch, -1, 9, 0), 0);
    assert_int_equal(ep_exit(s->host.ep, ch, -1, 9, 0), AL_E_STATE);
    sim_pump(s);
    assert_int_equal(s->ctl.exited[ch], 1);
    assert_int_equal(s->ctl.exit_code[ch], -1);
    assert_int_equal(s->ctl.exit_sig[ch], 9);

    /* host-side close reaches the controller */
    assert_int_equal(ep_close(s->host.ep, ch), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.closed[ch], 1);
    assert_int_equal(ep_channel_count(s->ctl.ep), 0);
    assert_int_equal(ep_channel_count(s->host.ep), 0);
    del_sim(s);
}

static void test_open_failed_and_limits(void **state)
{
    (void)state;
    struct sim *s = new_sim(4096, 8192);
    s->host.open_fails = 1;
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"nope", 4};
    long id = ep_open(s->ctl.ep, &o);
    assert_true(id > 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.errors, 1);
    assert_int_equal(s->ctl.last_error, FR_ERR_OPEN_FAILED);
    assert_int_equal(s->ctl.closed[id], 1);
    assert_int_equal(ep_channel_count(s->ctl.ep), 0);
    assert_int_equal(ep_channel_count(s->host.ep), 0);

    /* the controller cannot hold more than AL_MAX_CHANNELS */
    for (int i = 0; i < AL_MAX_CHANNELS; i++)
        assert_true(ep_open(s->ctl.ep, &o) > 0);
    assert_int_equal(ep_open(s->ctl.ep, &o), AL_E_LIMIT);
    del_sim(s);

    /* a host refuses the 257th channel without dropping the link */
    struct probe p;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.u.open.cols = 80;
    f.u.open.rows = 24;
    f.u.open.argc = 1;
    f.u.open.argv[0] = (struct fr_str){"sh", 2};
    for (uint32_t i = 1; i <= AL_MAX_CHANNELS + 1; i++) {
        f.channel = i;
        assert_int_equal(probe_send(&p, &f, 0), 0);
    }
    assert_int_equal(probe_drain(&p, 0), FR_ERR_LIMIT);
    assert_int_equal(ep_channel_count(p.ep), AL_MAX_CHANNELS);
    f.channel = 1;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_CHANNEL_EXISTS);
    assert_false(ep_closing(p.ep, NULL, NULL));
    probe_free(&p);
}

/* EXIT waits for all output, even when credit holds the output back. */
static void test_exit_after_all_output(void **state)
{
    (void)state;
    struct sim *s = new_sim(1024, 8192);
    s->ctl.consume = 0;
    uint32_t ch = open_pty(s);
    uint8_t b[3000];
    memset(b, 'x', sizeof b);
    assert_int_equal(ep_write(s->host.ep, ch, FR_STDOUT, b, sizeof b), 3000);
    assert_int_equal(ep_exit(s->host.ep, ch, 0, 0, 0), 0);
    assert_int_equal(ep_write(s->host.ep, ch, FR_STDOUT, b, 1), AL_E_STATE);
    for (int i = 0; i < 10; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 1024);
    assert_int_equal(s->ctl.exited[ch], 0);
    s->ctl.consume = 1;
    assert_int_equal(ep_consume(s->ctl.ep, ch, FR_STDOUT, 1024), 0);
    for (int i = 0; i < 10; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 3000);
    assert_int_equal(s->ctl.eof[ch][FR_STDOUT], 1);
    assert_int_equal(s->ctl.exited[ch], 1);
    del_sim(s);
}

/* ---- relay sessions -------------------------------------------------------- */

/* Send everything side `from` (0 host, 1 controller) has straight to the other. */
static void sim_step(struct sim *s, int from)
{
    struct ep *src = from ? s->ctl.ep : s->host.ep, *dst = from ? s->host.ep : s->ctl.ep;
    long n;
    s->now += 1000;
    while ((n = ep_output(src, s->frame, AL_MAX_FRAME, s->now)) > 0) {
        int rc = ep_input(dst, s->frame, (size_t)n, s->now);
        if (rc != 0)
            fail_msg("ep_input: %s", al_strerror(rc));
    }
    assert_true(n == 0);
}

/* Frames side `from` sends now, held back (in flight) instead of delivered. */
static void sim_hold(struct sim *s, int from, struct buf *held, int max_frames)
{
    struct ep *src = from ? s->ctl.ep : s->host.ep;
    long n;
    while (max_frames-- > 0 && (n = ep_output(src, s->frame, AL_MAX_FRAME, s->now)) > 0)
        buf_add(held, s->frame, (size_t)n);
}

/* Deliver held frames to side `to`. */
static void sim_deliver(struct sim *s, int to, struct buf *held)
{
    struct ep *dst = to ? s->ctl.ep : s->host.ep;
    size_t off = 0;
    while (off < held->len) {
        long flen = fr_frame_len(held->p + off, held->len - off);
        assert_true(flen > 0);
        int rc = ep_input(dst, held->p + off, (size_t)flen, s->now);
        if (rc != 0)
            fail_msg("ep_input: %s", al_strerror(rc));
        off += (size_t)flen;
    }
    held->len = 0;
}

/* A relay: the host adopts channel 1 when a fresh controller ATTACHes it. */
static struct sim *new_relay(uint32_t window, size_t ring, uint64_t out_base, uint64_t in_next,
                             uint8_t role)
{
    struct sim *s = new_sim(window, ring);
    s->host.relay = 1;
    s->host.out_base = out_base;
    s->host.in_next = in_next;
    s->host.relay_role = role;
    assert_int_equal(ep_adopt(s->ctl.ep, 1, FR_MODE_PTY, 0, 0), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.attaches, 1);
    assert_int_equal(s->ctl.attached[1], 1);
    assert_int_equal(s->ctl.lost[1], 0);
    return s;
}

static void write_pattern(struct sim *s, uint32_t ch, uint64_t from, size_t n)
{
    uint8_t b[4096];
    while (n > 0) {
        size_t k = n < sizeof b ? n : sizeof b;
        for (size_t i = 0; i < k; i++)
            b[i] = pattern(from + i, 9);
        assert_int_equal(ep_write(s->host.ep, ch, FR_STDOUT, b, k), (long)k);
        from += k;
        n -= k;
    }
}

/*
 * The controller's stdout log is one stream: every DATA and GAP starts at the
 * previous end, every SNAPSHOT comes when next equals its offset. Returns the
 * number of snapshots.
 */
static int check_log(const struct app *a, uint64_t start)
{
    uint64_t next = start;
    int snaps = 0;
    for (unsigned i = 0; i < a->nlog; i++) {
        const struct evrec *r = &a->log[i];
        switch (r->type) {
        case EP_EV_DATA:
            if (r->offset != next)
                fail_msg("event %u: DATA at %llu, next was %llu", i, (unsigned long long)r->offset,
                         (unsigned long long)next);
            next += r->len;
            break;
        case EP_EV_GAP:
            if (r->offset != next)
                fail_msg("event %u: GAP from %llu, next was %llu", i, (unsigned long long)r->offset,
                         (unsigned long long)next);
            next = r->to;
            break;
        case EP_EV_SNAPSHOT:
            if (r->offset != next)
                fail_msg("event %u: SNAPSHOT at %llu, next was %llu", i,
                         (unsigned long long)r->offset, (unsigned long long)next);
            snaps++;
            break;
        default:
            fail_msg("unexpected event %d in the log", (int)r->type);
        }
        assert_int_equal(r->next, next);
    }
    return snaps;
}

/* The bytes the controller got on stdout are the pattern at [from, from + n). */
static void check_bytes(const struct buf *b, size_t at, uint64_t from, size_t n)
{
    assert_true(b->len >= at + n);
    for (size_t i = 0; i < n; i++)
        if (b->p[at + i] != pattern(from + i, 9))
            fail_msg("stdout byte %zu: want pattern at %llu", at + i,
                     (unsigned long long)(from + i));
}

static void test_relay_adopt_on_attach(void **state)
{
    (void)state;
    /* a fresh client (out_next 0); the host serves from 1000 on */
    struct sim *s = new_relay(4096, 16384, 1000, 0, 0);
    assert_int_equal(s->host.attach_out, 0);
    assert_int_equal(s->host.attach_err, 0);
    assert_int_equal(s->host.attach_cols, 0);
    assert_int_equal(s->host.resizes, 0);
    write_pattern(s, 1, 1000, 3000);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.gaps, 1);
    assert_int_equal(s->ctl.gap_from, 0);
    assert_int_equal(s->ctl.gap_to, 1000);
    assert_int_equal(s->ctl.log[0].type, EP_EV_GAP);
    assert_int_equal(check_log(&s->ctl, 0), 0);
    assert_int_equal(s->ctl.rx[1][FR_STDOUT].len, 3000);
    check_bytes(&s->ctl.rx[1][FR_STDOUT], 0, 1000, 3000);
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(s->host.ep, 1, FR_STDOUT, &si), 0);
    assert_int_equal(si.base, 1000);
    assert_int_equal(si.end, 4000);

    /* the API */
    assert_int_equal(ep_host_adopt(s->host.ep, 1, FR_MODE_PTY, 0, 0, 0), AL_E_EXISTS);
    assert_int_equal(ep_host_adopt(s->ctl.ep, 5, FR_MODE_PTY, 0, 0, 0), AL_E_INVAL);
    assert_int_equal(ep_host_adopt(s->host.ep, 0, FR_MODE_PTY, 0, 0, 0), AL_E_INVAL);
    assert_int_equal(ep_host_adopt(s->host.ep, 5, 2, 0, 0, 0), AL_E_INVAL);

    /* adopted outside a callback: it just exists, and an ATTACH finds it */
    assert_int_equal(ep_host_adopt(s->host.ep, 5, FR_MODE_PIPES, 50, 7, 0), 0);
    assert_int_equal(ep_adopt(s->ctl.ep, 5, FR_MODE_PIPES, 50, 7), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.attaches, 1);
    assert_int_equal(s->ctl.attached[5], 1);
    assert_int_equal(s->ctl.gaps, 1);

    /* not adopted: NO_CHANNEL, as before */
    s->host.relay = 0;
    assert_int_equal(ep_adopt(s->ctl.ep, 6, FR_MODE_PTY, 0, 0), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.attaches, 2);
    assert_int_equal(s->ctl.lost[6], 1);
    assert_int_equal(ep_channel_count(s->host.ep), 2);
    del_sim(s);

    /* the whole answer to a fresh client from the callback: GAP, SNAPSHOT,
     * then live output */
    s = new_sim(4096, 16384);
    s->host.relay = 1;
    s->host.out_base = 5000;
    s->host.relay_snap = 1;
    assert_int_equal(ep_adopt(s->ctl.ep, 1, FR_MODE_PTY, 0, 0), 0);
    sim_pump(s); /* ATTACH out, ATTACHED, GAP and SNAPSHOT back */
    write_pattern(s, 1, 5000, 100);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.nlog, 3);
    assert_int_equal(s->ctl.log[0].type, EP_EV_GAP);
    assert_int_equal(s->ctl.log[1].type, EP_EV_SNAPSHOT);
    assert_int_equal(s->ctl.log[2].type, EP_EV_DATA);
    assert_int_equal(check_log(&s->ctl, 0), 1);
    assert_int_equal(s->ctl.snap_off, 5000);
    assert_memory_equal(s->ctl.snapshot.p, "scr", 3);
    check_bytes(&s->ctl.rx[1][FR_STDOUT], 0, 5000, 100);
    del_sim(s);

    /* a size in the ATTACH: the event has it; the adopted channel then
     * learns it as a resize */
    s = new_sim(4096, 16384);
    s->host.relay = 1;
    assert_int_equal(ep_adopt(s->ctl.ep, 1, FR_MODE_PTY, 0, 0), 0);
    assert_int_equal(ep_resize(s->ctl.ep, 1, 100, 30), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.attach_cols, 100);
    assert_int_equal(s->host.attach_rows, 30);
    assert_int_equal(s->host.resizes, 1);
    del_sim(s);

    /* a client ahead of what the host adopted is broken */
    struct probe p;
    probe_init(&p, FR_ROLE_HOST);
    p.app.relay = 1;
    p.app.out_base = 1000;
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACH;
    f.channel = 1;
    f.u.attach.out_next = 2000;
    f.u.attach.out_limit = 4000;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    assert_int_equal(p.app.attaches, 1);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    probe_free(&p);
}

/*
 * The peer's HELLO before ours went out (the host answers at once, the
 * controller's loop is slow): a channel opened or adopted in between goes
 * out right after our HELLO, not at the next link.
 */
static void test_open_between_hellos(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, FR_ROLE_CONTROLLER);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    assert_true(ep_ready(p.ep));
    static struct fr_open o; /* large: not on the stack */
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"sh", 2};
    assert_int_equal(ep_open(p.ep, &o), 1);
    assert_int_equal(ep_adopt(p.ep, 7, FR_MODE_PTY, 10, 0), 0);
    long n;
    struct fr_frame f;
    uint8_t types[8];
    unsigned nt = 0;
    while ((n = ep_output(p.ep, p.out, sizeof p.out, 0)) > 0 && nt < sizeof types) {
        assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
        types[nt++] = f.type;
    }
    assert_int_equal(nt, 3);
    assert_int_equal(types[0], FR_HELLO);
    assert_int_equal(types[1], FR_OPEN);
    assert_int_equal(types[2], FR_ATTACH);
    probe_free(&p);
}

/* The flags of the ATTACHes a controller sends now, by channel (-1: none). */
static void attach_flags(struct probe *p, int flags[3])
{
    long n;
    struct fr_frame f;
    for (int i = 0; i < 3; i++)
        flags[i] = -1;
    while ((n = ep_output(p->ep, p->out, sizeof p->out, 0)) > 0) {
        assert_int_equal(fr_decode(p->out, (size_t)n, &f), 0);
        if (f.type == FR_ATTACH && f.channel < 3)
            flags[f.channel] = f.flags;
    }
}

/*
 * RESUME: a controller's ATTACH says it once the channel was held (OPENED,
 * ATTACHED, or adopted from before a restart), even at offset 0; a relay
 * client's first attach does not. The host's event carries the flag.
 */
static void test_attach_resume(void **state)
{
    (void)state;
    struct probe p;
    int fl[3];
    probe_init(&p, FR_ROLE_CONTROLLER);
    assert_int_equal(ep_attach_new(p.ep, 1, FR_MODE_PTY), 0);
    assert_int_equal(ep_adopt(p.ep, 2, FR_MODE_PTY, 0, 0), 0);
    assert_int_equal(ep_attach_new(p.ep, 2, FR_MODE_PTY), AL_E_EXISTS);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    attach_flags(&p, fl);
    assert_int_equal(fl[1], 0);                /* fresh */
    assert_int_equal(fl[2], FR_ATTACH_RESUME); /* adopted: held before a restart */
    /* the link drops before ATTACHED: channel 1 still holds nothing */
    ep_link_down(p.ep);
    ep_link_up(p.ep, 0);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    attach_flags(&p, fl);
    assert_int_equal(fl[1], 0);
    /* ATTACHED (nothing came yet): the next link's ATTACH resumes at 0 */
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACHED;
    f.channel = 1;
    f.u.attached.state = 1;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    ep_link_down(p.ep);
    ep_link_up(p.ep, 0);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    attach_flags(&p, fl);
    assert_int_equal(fl[1], FR_ATTACH_RESUME);
    probe_free(&p);

    /* the host's EP_EV_ATTACH has the flag */
    for (int resume = 0; resume <= 1; resume++) {
        struct probe h;
        probe_init(&h, FR_ROLE_HOST);
        h.app.relay = 1;
        probe_hello(&h, FR_ROLE_CONTROLLER, 1, 1);
        memset(&f, 0, sizeof f);
        f.type = FR_ATTACH;
        f.flags = resume ? FR_ATTACH_RESUME : 0;
        f.channel = 1;
        f.u.attach.out_limit = 4096;
        assert_int_equal(probe_send(&h, &f, 0), 0);
        assert_int_equal(h.app.attaches, 1);
        assert_int_equal(h.app.attach_resume, resume);
        probe_free(&h);
    }
    /* RESUME claims nothing beyond what the host has: a client that says
     * it holds bytes never sent is broken, as without the flag */
    struct probe h;
    probe_init(&h, FR_ROLE_HOST);
    h.app.relay = 1;
    h.app.out_base = 1000;
    probe_hello(&h, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACH;
    f.flags = FR_ATTACH_RESUME;
    f.channel = 1;
    f.u.attach.out_next = 2000;
    f.u.attach.out_limit = 4000;
    assert_int_equal(probe_send(&h, &f, 0), AL_E_PROTO);
    assert_int_equal(probe_drain(&h, 0), FR_ERR_PROTOCOL);
    probe_free(&h);
}

/* A resync: unsent output is dropped, GAP, SNAPSHOT at the new offset, DATA. */
static void test_relay_resync(void **state)
{
    (void)state;
    static uint8_t snap[200000];
    for (size_t i = 0; i < sizeof snap; i++)
        snap[i] = pattern(i, 5);
    struct sim *s = new_relay(4096, 16384, 0, 0, 0);
    write_pattern(s, 1, 0, 10000);
    sim_pump(s); /* the credit lets 4096 bytes out */
    assert_int_equal(s->ctl.rx[1][FR_STDOUT].len, 4096);

    assert_int_equal(ep_resync(s->host.ep, 1, 9999, 80, 24, snap, 300), AL_E_INVAL);
    assert_int_equal(ep_resync(s->host.ep, 1, 20000, 0, 24, snap, 300), AL_E_INVAL);
    assert_int_equal(ep_resync(s->host.ep, 1, 20000, 80, 24, snap, AL_MAX_SNAPSHOT + 1),
                     AL_E_TOOBIG);
    assert_int_equal(ep_resync(s->host.ep, 9, 20000, 80, 24, snap, 300), AL_E_NOCHAN);
    assert_int_equal(ep_resync(s->ctl.ep, 1, 20000, 80, 24, snap, 300), AL_E_INVAL);
    assert_int_equal(ep_resync(s->host.ep, 1, 20000, 80, 24, snap, 300), 0);
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(s->host.ep, 1, FR_STDOUT, &si), 0);
    assert_int_equal(si.base, 20000);
    assert_int_equal(si.end, 20000);
    assert_int_equal(ep_writable(s->host.ep, 1, FR_STDOUT), 16384);
    write_pattern(s, 1, 20000, 3000);
    for (int i = 0; i < 6; i++)
        sim_pump(s);
    assert_int_equal(check_log(&s->ctl, 0), 1);
    assert_int_equal(s->ctl.gaps, 1);
    assert_int_equal(s->ctl.gap_from, 4096);
    assert_int_equal(s->ctl.gap_to, 20000);
    assert_int_equal(s->ctl.snap_off, 20000);
    assert_int_equal(s->ctl.snapshot.len, 300);
    assert_memory_equal(s->ctl.snapshot.p, snap, 300);
    struct buf *out = &s->ctl.rx[1][FR_STDOUT];
    assert_int_equal(out->len, 4096 + 3000);
    check_bytes(out, 0, 0, 4096);
    check_bytes(out, 4096, 20000, 3000);
    /* order: ..., GAP, SNAPSHOT, DATA from 20000 */
    unsigned g = 0;
    while (s->ctl.log[g].type != EP_EV_GAP)
        g++;
    assert_int_equal(s->ctl.log[g + 1].type, EP_EV_SNAPSHOT);
    assert_int_equal(s->ctl.log[g + 2].type, EP_EV_DATA);
    assert_int_equal(s->ctl.log[g + 2].offset, 20000);

    /* pipe mode: no screen, just the GAP */
    unsigned before = s->ctl.nlog;
    assert_int_equal(ep_resync(s->host.ep, 1, 30000, 0, 0, NULL, 0), 0);
    write_pattern(s, 1, 30000, 10);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.nlog, before + 2);
    assert_int_equal(s->ctl.log[before].type, EP_EV_GAP);
    assert_int_equal(s->ctl.log[before].offset, 23000);
    assert_int_equal(s->ctl.log[before].to, 30000);
    assert_int_equal(s->ctl.snaps, 1);
    assert_int_equal(check_log(&s->ctl, 0), 1);

    /* a resync while a big snapshot is half sent: that one ends whole,
     * then the GAP, then the new one */
    write_pattern(s, 1, 30010, 90);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(ep_snapshot(s->host.ep, 1, 30100, 80, 24, snap, sizeof snap), 0);
    struct buf held = {0};
    sim_hold(s, 0, &held, 1); /* its first chunk */
    struct fr_frame f;
    assert_int_equal(fr_decode(held.p, held.len, &f), 0);
    assert_int_equal(f.type, FR_SNAPSHOT);
    assert_true(f.flags & FR_SNAPSHOT_MORE);
    sim_deliver(s, 1, &held);
    assert_int_equal(ep_resync(s->host.ep, 1, 40000, 80, 24, snap + 1, 1000), 0);
    write_pattern(s, 1, 40000, 500);
    for (int i = 0; i < 6; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.snaps, 3);
    assert_int_equal(check_log(&s->ctl, 0), 3);
    assert_int_equal(s->ctl.snap_off, 40000);
    assert_int_equal(s->ctl.snapshot.len, 1000);
    assert_memory_equal(s->ctl.snapshot.p, snap + 1, 1000);
    assert_int_equal(out->len, 4096 + 3000 + 10 + 90 + 500);
    check_bytes(out, out->len - 500, 40000, 500);
    buf_free(&held);

    /* the jump happens on an unlinked channel too: the next ATTACH gets a GAP */
    sim_cut(s);
    assert_int_equal(ep_resync(s->host.ep, 1, 50000, 80, 24, snap, 10), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.gap_from, 40500);
    assert_int_equal(s->ctl.gap_to, 50000);
    assert_int_equal(s->ctl.snaps, 3); /* a snapshot needs a link */
    assert_int_equal(check_log(&s->ctl, 0), 3);

    /* after the end of the output, no jump */
    assert_int_equal(ep_exit(s->host.ep, 1, 0, 0, 0), 0);
    assert_int_equal(ep_resync(s->host.ep, 1, 60000, 80, 24, snap, 10), AL_E_STATE);
    del_sim(s);
}

/* Every host snapshot: after stdout up to its offset, before anything beyond. */
static void test_snapshot_order(void **state)
{
    (void)state;
    static uint8_t snap[150000];
    memset(snap, 's', sizeof snap);
    struct sim *s = new_sim(4096, 65536);
    uint32_t ch = open_pty(s);
    write_pattern(s, ch, 0, 10000);
    sim_pump(s); /* 4096 out, the rest waits for credit */
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 4096);
    assert_int_equal(ep_snapshot(s->host.ep, ch, 10001, 80, 24, snap, 10), AL_E_INVAL);
    assert_int_equal(ep_snapshot(s->host.ep, ch, 10000, 80, 24, snap, 10), 0);
    write_pattern(s, ch, 10000, 5000); /* beyond the snapshot: after it */
    for (int i = 0; i < 20; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.snaps, 1);
    assert_int_equal(s->ctl.snap_off, 10000);
    assert_int_equal(check_log(&s->ctl, 0), 1);
    assert_int_equal(s->ctl.rx[ch][FR_STDOUT].len, 15000);
    check_bytes(&s->ctl.rx[ch][FR_STDOUT], 0, 0, 15000);

    /* a second snapshot asked for while the first is half sent waits for it */
    assert_int_equal(ep_snapshot(s->host.ep, ch, 15000, 80, 24, snap, sizeof snap), 0);
    struct buf held = {0};
    sim_hold(s, 0, &held, 1);
    sim_deliver(s, 1, &held);
    write_pattern(s, ch, 15000, 100);
    assert_int_equal(ep_snapshot(s->host.ep, ch, 15100, 80, 24, snap, 7), 0);
    write_pattern(s, ch, 15100, 100);
    for (int i = 0; i < 10; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.snaps, 3);
    assert_int_equal(check_log(&s->ctl, 0), 3);
    assert_int_equal(s->ctl.snap_off, 15100);
    assert_int_equal(s->ctl.snapshot.len, 7);
    check_bytes(&s->ctl.rx[ch][FR_STDOUT], 0, 0, 15200);

    /* EOF and EXIT wait for a pending snapshot too */
    assert_int_equal(ep_snapshot(s->host.ep, ch, 15200, 80, 24, snap, 3), 0);
    assert_int_equal(ep_exit(s->host.ep, ch, 0, 0, 0), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.snaps, 4);
    assert_int_equal(s->ctl.exited[ch], 1);
    buf_free(&held);
    del_sim(s);
}

static void test_relay_viewer_has_no_credit(void **state)
{
    (void)state;
    struct sim *s = new_relay(4096, 16384, 0, 7, 0);
    /* the viewer types: the bytes stay on its side */
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"hello", 5), 5);
    for (int i = 0; i < 6; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 0);
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(s->ctl.ep, 1, FR_STDIN, &si), 0);
    assert_int_equal(si.end, 7 + 5); /* ATTACHED said stdin goes on at 7 */
    assert_int_equal(si.acked, 7);
    assert_int_equal(ep_stream_info(s->host.ep, 1, FR_STDIN, &si), 0);
    assert_int_equal(si.end, 7);
    /* ... even across a new link */
    sim_cut(s);
    for (int i = 0; i < 6; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 0);
    assert_int_equal(s->host.errors, 0);
    del_sim(s);

    /* a viewer that sends stdin anyway breaks the protocol ... */
    struct probe p;
    probe_init(&p, FR_ROLE_HOST);
    p.app.relay = 1;
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACH;
    f.channel = 1;
    f.u.attach.out_limit = 4096;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    long n = ep_output(p.ep, p.out, sizeof p.out, 0); /* HELLO */
    n = ep_output(p.ep, p.out, sizeof p.out, 0);
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_ATTACHED);
    assert_int_equal(f.u.attached.in_limit, f.u.attached.in_next); /* no credit */
    assert_int_equal(probe_drain(&p, 0), 0);                       /* and no ACK on stdin */
    /* ... its EOF is refused, not fatal ... */
    memset(&f, 0, sizeof f);
    f.type = FR_EOF;
    f.channel = 1;
    f.flags = FR_STDIN;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_FORBIDDEN);
    assert_int_equal(p.app.eof[1][FR_STDIN], 0);
    /* ... and a DATA frame is beyond the credit */
    memset(&f, 0, sizeof f);
    f.type = FR_DATA;
    f.channel = 1;
    f.flags = FR_STDIN;
    f.u.data.bytes = (struct fr_bytes){(const uint8_t *)"x", 1};
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    assert_int_equal(p.app.rx[1][FR_STDIN].len, 0);
    probe_free(&p);
}

static void test_relay_roles(void **state)
{
    (void)state;
    struct sim *s = new_relay(4096, 16384, 0, 7, 0);
    /* queued as a viewer: dropped when it becomes the writer */
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"hello", 5), 5);
    sim_pump(s);
    assert_int_equal(ep_set_role(s->host.ep, 1, 3, 7), AL_E_INVAL);
    assert_int_equal(ep_set_role(s->host.ep, 9, FR_WRITER, 7), AL_E_NOCHAN);
    assert_int_equal(ep_set_role(s->ctl.ep, 1, FR_WRITER, 7), AL_E_INVAL);
    assert_int_equal(ep_set_role(s->host.ep, 1, FR_WRITER, 9), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.roles, 1);
    assert_int_equal(s->ctl.role, FR_WRITER);
    assert_int_equal(s->ctl.role_next, 9);
    assert_int_equal(s->ctl.role_limit, 9 + 4096);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"abc", 3), 3);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 3);
    assert_memory_equal(s->host.rx[1][FR_STDIN].p, "abc", 3);
    assert_int_equal(s->host.last_off[FR_STDIN], 9);
    /* credit flows as usual */
    static uint8_t big[10000];
    memset(big, 'b', sizeof big);
    size_t put = 0;
    for (int i = 0; i < 20 && put < sizeof big; i++) {
        long k = ep_write(s->ctl.ep, 1, FR_STDIN, big + put, sizeof big - put);
        assert_true(k >= 0);
        put += (size_t)k;
        sim_pump(s);
    }
    for (int i = 0; i < 20; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 3 + sizeof big);

    /* back to viewer: nothing more leaves */
    uint64_t at = 12 + sizeof big;
    assert_int_equal(ep_set_role(s->host.ep, 1, FR_VIEWER, at), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.roles, 2);
    assert_int_equal(s->ctl.role, FR_VIEWER);
    assert_int_equal(s->ctl.role_next, at);
    assert_int_equal(s->ctl.role_limit, at);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"zz", 2), 2);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 3 + sizeof big);

    /* writer again at a point another writer moved the stream to */
    assert_int_equal(ep_set_role(s->host.ep, 1, FR_WRITER, at + 100), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.role, FR_WRITER);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"q", 1), 1);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.last_off[FR_STDIN], at + 100);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 4 + sizeof big);
    assert_int_equal(s->host.rx[1][FR_STDIN].p[3 + sizeof big], 'q');

    /* a ROLE is for this link only: the next link's ATTACHED carries the
     * credit, and no ROLE unless the host says it again */
    sim_cut(s);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.roles, 3);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, (const uint8_t *)"r", 1), 1);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 5 + sizeof big);
    assert_int_equal(s->host.errors + s->ctl.errors, 0);
    del_sim(s);
}

/* Stdin in flight when the host changes the role is not a protocol error. */
static void test_relay_role_races(void **state)
{
    (void)state;
    static uint8_t b[2000];
    memset(b, 'i', sizeof b);
    struct buf held = {0};

    /* demoted while typing: what was in flight is dropped */
    struct sim *s = new_relay(4096, 16384, 0, 0, FR_WRITER);
    assert_int_equal(s->ctl.role, FR_WRITER);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, b, 100), 100);
    sim_hold(s, 1, &held, 100);
    assert_true(held.len > 0);
    assert_int_equal(ep_set_role(s->host.ep, 1, FR_VIEWER, 0), 0);
    sim_step(s, 0);           /* ROLE reaches the controller */
    sim_deliver(s, 0, &held); /* then its DATA reaches the host */
    assert_int_equal(ep_eof(s->ctl.ep, 1, FR_STDIN), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, 0);
    assert_int_equal(s->host.eof[1][FR_STDIN], 0);
    del_sim(s);

    /* the writer told again where it is, with input in flight: the host
     * takes it, acknowledges it, and the controller does not send it twice */
    s = new_relay(4096, 16384, 0, 0, FR_WRITER);
    assert_int_equal(ep_write(s->ctl.ep, 1, FR_STDIN, b, sizeof b), (long)sizeof b);
    sim_hold(s, 1, &held, 100);
    assert_int_equal(ep_set_role(s->host.ep, 1, FR_WRITER, 0), 0);
    sim_step(s, 0);           /* ROLE: the controller rewinds to 0 */
    sim_deliver(s, 0, &held); /* the host gets [0, 2000) ... */
    sim_step(s, 0);           /* ... and acknowledges it first */
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.rx[1][FR_STDIN].len, sizeof b);
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(s->ctl.ep, 1, FR_STDIN, &si), 0);
    assert_int_equal(si.acked, sizeof b);
    assert_int_equal(s->host.errors + s->ctl.errors, 0);
    buf_free(&held);
    del_sim(s);
}

static void test_relay_takeover_and_viewers(void **state)
{
    (void)state;
    struct sim *s = new_relay(4096, 16384, 0, 0, 0);
    /* no link: nothing to ask on */
    ep_link_down(s->ctl.ep);
    assert_int_equal(ep_takeover(s->ctl.ep, 1), AL_E_STATE);
    sim_cut(s);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->host.takeovers, 0);
    assert_int_equal(ep_takeover(s->ctl.ep, 1), 0);
    assert_int_equal(ep_takeover(s->ctl.ep, 9), AL_E_NOCHAN);
    assert_int_equal(ep_takeover(s->host.ep, 1), AL_E_INVAL);
    sim_pump(s);
    assert_int_equal(s->host.takeovers, 1);
    /* refused */
    assert_int_equal(ep_send_error(s->host.ep, 1, FR_ERR_FORBIDDEN, "read-only"), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.last_error, FR_ERR_FORBIDDEN);
    assert_int_equal(ep_channel_count(s->ctl.ep), 1);

    /* who is attached */
    const char *names[] = {"alice", "bob"};
    const uint8_t roles[] = {FR_WRITER, FR_VIEWER};
    const char *old[] = {"carol"};
    assert_int_equal(ep_viewers(s->host.ep, 1, 1, old, roles), 0);
    assert_int_equal(ep_viewers(s->host.ep, 1, 2, names, roles), 0); /* replaces it */
    sim_pump(s);
    assert_int_equal(s->ctl.viewer_lists, 1);
    assert_int_equal(s->ctl.viewer_count, 2);
    assert_string_equal(s->ctl.viewer_name[0], "alice");
    assert_int_equal(s->ctl.viewer_role[0], FR_WRITER);
    assert_string_equal(s->ctl.viewer_name[1], "bob");
    assert_int_equal(s->ctl.viewer_role[1], FR_VIEWER);
    assert_int_equal(ep_viewers(s->host.ep, 1, 0, NULL, NULL), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.viewer_lists, 2);
    assert_int_equal(s->ctl.viewer_count, 0);

    /* limits */
    static char name65[AL_MAX_VIEWER_NAME + 2];
    memset(name65, 'n', AL_MAX_VIEWER_NAME + 1);
    static const char *many[AL_MAX_VIEWERS + 1];
    static uint8_t many_roles[AL_MAX_VIEWERS + 1];
    for (int i = 0; i <= AL_MAX_VIEWERS; i++) {
        many[i] = "v";
        many_roles[i] = FR_VIEWER;
    }
    assert_int_equal(ep_viewers(s->host.ep, 1, AL_MAX_VIEWERS + 1, many, many_roles), AL_E_TOOBIG);
    const char *toolong[] = {name65};
    assert_int_equal(ep_viewers(s->host.ep, 1, 1, toolong, roles), AL_E_TOOBIG);
    const char *empty[] = {""};
    assert_int_equal(ep_viewers(s->host.ep, 1, 1, empty, roles), AL_E_INVAL);
    const uint8_t badrole[] = {0};
    assert_int_equal(ep_viewers(s->host.ep, 1, 1, names, badrole), AL_E_INVAL);
    assert_int_equal(ep_viewers(s->ctl.ep, 1, 2, names, roles), AL_E_INVAL);
    assert_int_equal(ep_viewers(s->host.ep, 9, 2, names, roles), AL_E_NOCHAN);
    name65[AL_MAX_VIEWER_NAME] = 0; /* 64 bytes: fine */
    many[0] = name65;
    assert_int_equal(ep_viewers(s->host.ep, 1, AL_MAX_VIEWERS, many, many_roles), 0);
    sim_pump(s);
    assert_int_equal(s->ctl.viewer_count, AL_MAX_VIEWERS);
    assert_int_equal(strlen(s->ctl.viewer_name[0]), AL_MAX_VIEWER_NAME);
    assert_int_equal(s->host.errors + s->ctl.errors, 1);
    del_sim(s);

    /* directions: a controller does not take TAKEOVER, a host not ROLE or
     * VIEWERS */
    static const uint8_t types[] = {FR_ROLE, FR_VIEWERS, FR_TAKEOVER};
    for (unsigned i = 0; i < sizeof types; i++) {
        struct probe p;
        int host = types[i] != FR_TAKEOVER;
        probe_init(&p, host ? FR_ROLE_HOST : FR_ROLE_CONTROLLER);
        probe_hello(&p, host ? FR_ROLE_CONTROLLER : FR_ROLE_HOST, 1, 1);
        struct fr_frame f;
        memset(&f, 0, sizeof f);
        f.type = types[i];
        f.channel = 1;
        if (types[i] == FR_ROLE)
            f.u.role.role = FR_WRITER;
        assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
        assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
        probe_free(&p);
    }
    /* a TAKEOVER for a channel the host does not hold: NO_CHANNEL */
    struct probe p;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_TAKEOVER;
    f.channel = 3;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_NO_CHANNEL);
    probe_free(&p);
}

/* A relay host merges writers: ATTACHED may say stdin goes on beyond what
 * this controller wrote. */
static void test_attached_beyond_stdin(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, FR_ROLE_CONTROLLER);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"sh", 2};
    long id = ep_open(p.ep, &o);
    assert_true(id > 0);
    probe_drain(&p, 0);
    struct fr_frame f;
    memset(&f, 0, sizeof f);
    f.type = FR_OPENED;
    f.channel = (uint32_t)id;
    f.u.opened.pid = 1000 + (uint32_t)id;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(ep_write(p.ep, (uint32_t)id, FR_STDIN, (const uint8_t *)"abcde", 5), 5);
    ep_link_down(p.ep);
    ep_link_up(p.ep, 0);
    probe_hello(&p, FR_ROLE_HOST, 1, 1);
    probe_drain(&p, 0); /* HELLO, ATTACH */
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACHED;
    f.channel = (uint32_t)id;
    f.u.attached.state = FR_CH_RUNNING;
    f.u.attached.in_next = 500;
    f.u.attached.in_limit = 600;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(p.app.attached[id], 1);
    struct ep_stream_info si;
    assert_int_equal(ep_stream_info(p.ep, (uint32_t)id, FR_STDIN, &si), 0);
    assert_int_equal(si.end, 500);
    assert_int_equal(si.acked, 500);
    assert_int_equal(ep_write(p.ep, (uint32_t)id, FR_STDIN, (const uint8_t *)"x", 1), 1);
    long n = ep_output(p.ep, p.out, sizeof p.out, 0);
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_DATA);
    assert_int_equal(f.u.data.offset, 500);
    assert_int_equal(f.u.data.bytes.len, 1);
    /* a ROLE before ATTACHED is a protocol error */
    long id2 = ep_open(p.ep, &o);
    probe_drain(&p, 0);
    memset(&f, 0, sizeof f);
    f.type = FR_ROLE;
    f.channel = (uint32_t)id2;
    f.u.role.role = FR_WRITER;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    probe_free(&p);
}

/* A PTY channel's stderr carries no byte, but a controller may grant credit
 * on it (ATTACH always does): an ACK of 0 there is ignored, an ACK of a
 * byte is a protocol error. */
static void test_pty_stderr_ack(void **state)
{
    (void)state;
    struct probe p;
    struct fr_frame f;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.channel = 5;
    f.u.open.mode = FR_MODE_PTY;
    f.u.open.cols = 80;
    f.u.open.rows = 24;
    f.u.open.argc = 1;
    f.u.open.argv[0] = (struct fr_str){"sh", 2};
    assert_int_equal(probe_send(&p, &f, 0), 0);
    probe_drain(&p, 0);
    memset(&f, 0, sizeof f);
    f.type = FR_ACK;
    f.channel = 5;
    f.flags = FR_STDERR;
    f.u.ack.ack = 0;
    f.u.ack.limit = EP_DEFAULT_WINDOW;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), 0);
    assert_false(ep_closing(p.ep, NULL, NULL));
    /* the same after a resume (ATTACH grants stderr credit too) */
    ep_link_down(p.ep);
    ep_link_up(p.ep, 0);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    memset(&f, 0, sizeof f);
    f.type = FR_ATTACH;
    f.channel = 5;
    f.u.attach.out_limit = EP_DEFAULT_WINDOW;
    f.u.attach.err_limit = EP_DEFAULT_WINDOW;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    memset(&f, 0, sizeof f);
    f.type = FR_ACK;
    f.channel = 5;
    f.flags = FR_STDERR;
    f.u.ack.limit = 2 * EP_DEFAULT_WINDOW;
    assert_int_equal(probe_send(&p, &f, 0), 0);
    assert_int_equal(probe_drain(&p, 0), 0);
    assert_false(ep_closing(p.ep, NULL, NULL));
    /* acknowledging a stderr byte that never existed is not */
    f.u.ack.ack = 1;
    assert_int_equal(probe_send(&p, &f, 0), AL_E_PROTO);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    probe_free(&p);
}

/* Every fatal ERROR code and its close (protocol.md §10), and a refusal
 * from the WebSocket layer (ep_fail) sends its ERROR before the close. */
static void test_fatal_close_codes(void **state)
{
    (void)state;
    static const struct {
        uint16_t error;
        int close;
    } want[] = {
        {FR_ERR_PROTOCOL, 4000},     {FR_ERR_VERSION, 4001},
        {FR_ERR_UNKNOWN_TYPE, 4000}, {FR_ERR_TOO_BIG, 4004},
        {FR_ERR_NO_CHANNEL, 0},      {FR_ERR_CHANNEL_EXISTS, 0},
        {FR_ERR_LIMIT, 0},           {FR_ERR_OPEN_FAILED, 0},
        {FR_ERR_TOKEN_INVALID, 0},   {FR_ERR_TOKEN_EXPIRED, 4002},
        {FR_ERR_FORBIDDEN, 0},       {FR_ERR_STATE, 0},
        {FR_ERR_INTERNAL, 1011},     {FR_ERR_TIMEOUT, 4003},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        assert_int_equal(ep_close_code_of(want[i].error), want[i].close);
    assert_int_equal(ep_close_code_of(0), 0);
    assert_int_equal(ep_close_code_of(15), 0);

    struct probe p;
    int code;
    const char *why;
    probe_init(&p, FR_ROLE_HOST);
    probe_hello(&p, FR_ROLE_CONTROLLER, 1, 1);
    assert_int_equal(ep_fail(p.ep, FR_ERR_NO_CHANNEL, "not fatal"), AL_E_INVAL);
    assert_false(ep_closing(p.ep, NULL, NULL));
    assert_int_equal(ep_fail(p.ep, FR_ERR_TOO_BIG, "message larger than the frame limit"), 0);
    assert_true(ep_closing(p.ep, &code, &why));
    assert_int_equal(code, AL_CLOSE_LIMIT);
    assert_string_equal(why, "message larger than the frame limit");
    assert_int_equal(probe_drain(&p, 0), FR_ERR_TOO_BIG);
    /* a second refusal does not change the close */
    assert_int_equal(ep_fail(p.ep, FR_ERR_PROTOCOL, "text messages are not allowed"), 0);
    assert_true(ep_closing(p.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_LIMIT);
    probe_free(&p);

    /* before the peer's HELLO too: HELLO, then the ERROR */
    probe_init(&p, FR_ROLE_HOST);
    assert_int_equal(ep_fail(p.ep, FR_ERR_PROTOCOL, "text messages are not allowed"), 0);
    struct fr_frame f;
    long n = ep_output(p.ep, p.out, sizeof p.out, 0);
    assert_true(n > 0);
    assert_int_equal(fr_decode(p.out, (size_t)n, &f), 0);
    assert_int_equal(f.type, FR_HELLO);
    assert_int_equal(probe_drain(&p, 0), FR_ERR_PROTOCOL);
    assert_true(ep_closing(p.ep, &code, NULL));
    assert_int_equal(code, AL_CLOSE_PROTOCOL);
    probe_free(&p);
    /* no link: nothing to say it on */
    probe_init(&p, FR_ROLE_HOST);
    ep_link_down(p.ep);
    assert_int_equal(ep_fail(p.ep, FR_ERR_PROTOCOL, "x"), AL_E_CLOSED);
    probe_free(&p);
}

/* al_close.h's list of close codes is protocol.md §10's table: the same
 * rows, in the same order, with the same words. */
static void test_close_code_table(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *meaning;
    } list[] = {
#define ROW(name, code, meaning) {AL_CLOSE_##name, meaning},
        AL_CLOSE_MAP(ROW)
#undef ROW
    };
    const char *src = getenv("AL_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/protocol.md", src ? src : ".");
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    char line[1024];
    int in10 = 0;
    size_t rows = 0;
    while (fgets(line, sizeof line, fp)) {
        if (!strncmp(line, "## ", 3))
            in10 = !strncmp(line, "## 10.", 6);
        int code;
        char meaning[512];
        if (!in10 || sscanf(line, "| %d | %511[^|]|", &code, meaning) != 2 || code < 1000)
            continue;
        size_t n = strlen(meaning);
        while (n && meaning[n - 1] == ' ')
            meaning[--n] = 0;
        assert_true(rows < sizeof list / sizeof list[0]);
        assert_int_equal(code, list[rows].code);
        assert_string_equal(meaning, list[rows].meaning);
        rows++;
    }
    fclose(fp);
    assert_int_equal(rows, sizeof list / sizeof list[0]);
}

/* Whether the endpoint's log holds these lines, in this order (others may
 * come between them). */
static int moves_in_order(struct buf *moves, const char *const *want, size_t n)
{
    buf_add(moves, (const uint8_t *)"", 1); /* NUL-terminate */
    moves->len--;
    const char *at = moves->len ? (const char *)moves->p : "";
    for (size_t i = 0; i < n; i++) {
        const char *hit = strstr(at, want[i]);
        if (!hit) {
            fprintf(stderr, "missing \"%s\" in:\n%s", want[i], moves->p ? (char *)moves->p : "");
            return 0;
        }
        at = hit + strlen(want[i]);
    }
    return 1;
}

/* A channel's life through its states, as both endpoints log it: opened,
 * exited, the link cut and resumed, closed by the controller. */
static void test_channel_states_logged(void **state)
{
    (void)state;
    struct sim *s = new_sim(4096, 8192);
    uint32_t ch = open_pty(s);
    assert_int_equal(ch, 1);
    assert_int_equal(ep_exit(s->host.ep, ch, 3, 0, 0), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.exited[ch], 1);
    sim_cut(s);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.attached[ch], 1);
    assert_int_equal(ep_close(s->ctl.ep, ch), 0);
    for (int i = 0; i < 4; i++)
        sim_pump(s);
    assert_int_equal(s->ctl.closed[ch], 1);
    assert_int_equal(ep_channel_count(s->ctl.ep), 0);
    assert_int_equal(ep_channel_count(s->host.ep), 0);
    static const char *const ctl[] = {
        "controller channel 1: state NONE -> NEW (opened by the application)\n",
        "controller channel 1: state NEW -> OPENING (OPEN sent)\n",
        "controller channel 1: state OPENING -> LINKED (OPENED received)\n",
        "controller channel 1: exit RUNNING -> EXITED (EXIT received)\n",
        "controller channel 1: state LINKED -> DETACHED (link down)\n",
        "controller channel 1: state DETACHED -> LINKED (ATTACHED received)\n",
        "controller channel 1: state LINKED -> CLOSING (closed by the application)\n",
        "controller channel 1: state CLOSING -> DEAD (CLOSE received)\n",
    };
    static const char *const host[] = {
        "host channel 1: state NONE -> OPENING (OPEN received)\n",
        "host channel 1: state OPENING -> LINKED (opened by the application)\n",
        "host channel 1: exit RUNNING -> EXITED (exit from the application)\n",
        "host channel 1: exit EXITED -> REPORTED (EXIT sent)\n",
        "host channel 1: state LINKED -> DETACHED (link down)\n",
        "host channel 1: exit REPORTED -> EXITED (link down)\n",
        "host channel 1: state DETACHED -> LINKED (ATTACH received)\n",
        "host channel 1: exit EXITED -> REPORTED (EXIT sent)\n",
        "host channel 1: state LINKED -> CLOSING (CLOSE received)\n",
        "host channel 1: state CLOSING -> DEAD (CLOSE sent)\n",
    };
    assert_true(moves_in_order(&s->ctl.moves, ctl, sizeof ctl / sizeof ctl[0]));
    assert_true(moves_in_order(&s->host.moves, host, sizeof host / sizeof host[0]));
    del_sim(s);
}

/* ---- the credential proxy's channels (docs/protocol.md §5a) ------------------ */

static void pump_n(struct sim *s, int n)
{
    for (int i = 0; i < n; i++)
        sim_pump(s);
}

/* Write `len` pattern bytes on a stream as the ring takes them, pumping. */
static void proxy_send(struct sim *s, struct ep *ep, uint32_t ch, unsigned stream, size_t len,
                       unsigned salt)
{
    size_t done = 0;
    for (int steps = 0; done < len; steps++) {
        uint8_t tmp[4096];
        size_t want = len - done < sizeof tmp ? len - done : sizeof tmp;
        for (size_t i = 0; i < want; i++)
            tmp[i] = pattern(done + i, salt);
        long n = ep_write(ep, ch, stream, tmp, want);
        assert_true(n >= 0);
        done += (size_t)n;
        sim_pump(s);
        if (steps > 10000)
            fail_msg("proxy stream stuck at %zu of %zu", done, len);
    }
    pump_n(s, 64); /* what the ring holds, a window at a time */
}

static void assert_pattern(const struct buf *b, size_t len, unsigned salt)
{
    assert_int_equal(b->len, len);
    for (size_t i = 0; i < len; i++)
        if (b->p[i] != pattern(i, salt))
            fail_msg("byte %zu wrong", i);
}

static void test_proxy_channel_life(void **state)
{
    (void)state;
    static struct sim s;
    sim_init(&s, 4096, 16384);
    assert_int_equal(ep_proxy_open(s.host.ep), AL_E_STATE); /* no ready link yet */
    assert_int_equal(ep_proxy_at(s.host.ep, "ftp://x"), AL_E_INVAL);
    assert_int_equal(ep_proxy_at(s.ctl.ep, "http://127.0.0.1:1"), AL_E_INVAL);
    assert_int_equal(ep_proxy_at(s.host.ep, "http://127.0.0.1:4242"), 0);
    pump_n(&s, 2);
    assert_int_equal(s.ctl.proxy_ats, 1);
    assert_int_equal(s.ctl.proxy_at.len, strlen("http://127.0.0.1:4242"));
    assert_memory_equal(s.ctl.proxy_at.p, "http://127.0.0.1:4242", s.ctl.proxy_at.len);

    long id = ep_proxy_open(s.host.ep);
    assert_true(id > 0);
    uint32_t ch = (uint32_t)id, ix = ch & ~FR_PROXY_CHANNEL_BIT;
    assert_true(fr_is_proxy_channel(ch));
    pump_n(&s, 2);
    assert_int_equal(s.ctl.proxy_opens, 1);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 1);
    assert_int_equal(ep_channel_count(s.ctl.ep), 0); /* counted apart */
    /* not listed: nothing resumes a proxy channel */
    assert_int_equal(ep_list(s.ctl.ep), 0);
    pump_n(&s, 2);
    assert_int_equal(s.ctl.lists, 1);
    assert_int_equal(s.ctl.list_count, 0);

    /* both streams, many windows each, with credit (a DATA beyond it fails
     * the pump) */
    proxy_send(&s, s.host.ep, ch, FR_STDOUT, 50000, 7);
    proxy_send(&s, s.ctl.ep, ch, FR_STDIN, 70000, 9);
    assert_pattern(&s.ctl.rx[ix][FR_STDOUT], 50000, 7);
    assert_pattern(&s.host.rx[ix][FR_STDIN], 70000, 9);
    /* half closes */
    assert_int_equal(ep_eof(s.host.ep, ch, FR_STDOUT), 0);
    pump_n(&s, 2);
    assert_int_equal(s.ctl.eof[ix][FR_STDOUT], 1);
    assert_int_equal(ep_write(s.ctl.ep, ch, FR_STDIN, (const uint8_t *)"x", 1), 1);
    assert_int_equal(ep_eof(s.ctl.ep, ch, FR_STDIN), 0);
    pump_n(&s, 2);
    assert_int_equal(s.host.eof[ix][FR_STDIN], 1);
    assert_int_equal(s.host.rx[ix][FR_STDIN].len, 70001);
    /* the host closes; the controller is told and answers */
    assert_int_equal(ep_close(s.host.ep, ch), 0);
    pump_n(&s, 3);
    assert_int_equal(s.ctl.closed[ix], 1);
    assert_int_equal(s.host.closed[ix], 0); /* its own close: no event */
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 0);

    /* the controller closes one; both close another at once */
    long a = ep_proxy_open(s.host.ep), b = ep_proxy_open(s.host.ep);
    assert_true(a > 0 && b > 0 && a != b && a != (long)ch);
    pump_n(&s, 2);
    assert_int_equal(ep_close(s.ctl.ep, (uint32_t)a), 0);
    assert_int_equal(ep_close(s.ctl.ep, (uint32_t)b), 0);
    assert_int_equal(ep_close(s.host.ep, (uint32_t)b), 0);
    pump_n(&s, 3);
    assert_int_equal(s.host.closed[(uint32_t)a & ~FR_PROXY_CHANNEL_BIT], 1);
    assert_int_equal(s.host.closed[(uint32_t)b & ~FR_PROXY_CHANNEL_BIT], 0);
    assert_int_equal(s.ctl.closed[(uint32_t)b & ~FR_PROXY_CHANNEL_BIT], 0);
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 0);
    /* closed before its PROXY_OPEN went out: the controller never hears of it */
    long c = ep_proxy_open(s.host.ep);
    assert_int_equal(ep_close(s.host.ep, (uint32_t)c), 0);
    pump_n(&s, 2);
    assert_int_equal(s.ctl.proxy_opens, 3);
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    sim_free(&s);
}

/* With the default windows (a terminal's 512 KiB, above a proxy channel's
 * 256 KiB ring), a proxy stream many rings long still flows: its receiver
 * acknowledges within the ring (EP_PROXY_WINDOW). */
static void test_proxy_channel_default_windows(void **state)
{
    (void)state;
    static struct sim s;
    sim_init(&s, EP_DEFAULT_WINDOW, EP_DEFAULT_TX_RING);
    pump_n(&s, 2);
    long id = ep_proxy_open(s.host.ep);
    assert_true(id > 0);
    pump_n(&s, 2);
    uint32_t ix = (uint32_t)id & ~FR_PROXY_CHANNEL_BIT;
    proxy_send(&s, s.host.ep, (uint32_t)id, FR_STDOUT, 3u << 20, 5);
    proxy_send(&s, s.ctl.ep, (uint32_t)id, FR_STDIN, 3u << 20, 6);
    assert_pattern(&s.ctl.rx[ix][FR_STDOUT], 3u << 20, 5);
    assert_pattern(&s.host.rx[ix][FR_STDIN], 3u << 20, 6);
    sim_free(&s);
}

static void test_proxy_channel_link_drop(void **state)
{
    (void)state;
    static struct sim s;
    sim_init(&s, 4096, 16384);
    assert_int_equal(ep_proxy_at(s.host.ep, "http://127.0.0.1:4242"), 0);
    pump_n(&s, 2);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.term = (struct fr_str){"xterm", 5};
    o.argc = 1;
    o.argv[0] = (struct fr_str){"cat", 3};
    long term = ep_open(s.ctl.ep, &o);
    assert_true(term > 0 && !fr_is_proxy_channel((uint32_t)term));
    long px = ep_proxy_open(s.host.ep);
    assert_true(px > 0);
    uint32_t ix = (uint32_t)px & ~FR_PROXY_CHANNEL_BIT;
    pump_n(&s, 2);
    /* an answer half sent when the link drops */
    uint8_t big[8192];
    memset(big, 'a', sizeof big);
    assert_true(ep_write(s.ctl.ep, (uint32_t)px, FR_STDIN, big, sizeof big) > 0);
    sim_cut(&s);
    /* both sides end it at once, each telling its application */
    assert_int_equal(s.host.closed[ix], 1);
    assert_int_equal(s.ctl.closed[ix], 1);
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 0);
    assert_int_equal(ep_write(s.ctl.ep, (uint32_t)px, FR_STDIN, big, 1), AL_E_NOCHAN);
    pump_n(&s, 3);
    /* the terminal is resumed, the listener announced again */
    assert_int_equal(ep_channel_count(s.ctl.ep), 1);
    assert_int_equal(s.ctl.attached[(uint32_t)term], 1);
    assert_int_equal(s.ctl.proxy_ats, 2);
    assert_int_equal(s.host.closed[ix], 1); /* once */
    sim_free(&s);
}

static void test_proxy_channel_refused_and_limits(void **state)
{
    (void)state;
    static struct sim s;
    sim_init(&s, 4096, 16384);
    pump_n(&s, 2);
    assert_int_equal(s.ctl.proxy_ats, 0); /* no listener: no PROXY_AT */
    /* a controller that serves no proxy (the CLI on a runner) refuses */
    s.ctl.proxy_refuse = 1;
    long id = ep_proxy_open(s.host.ep);
    assert_true(id > 0);
    uint32_t ix = (uint32_t)id & ~FR_PROXY_CHANNEL_BIT;
    assert_true(ep_write(s.host.ep, (uint32_t)id, FR_STDOUT, (const uint8_t *)"GET /", 5) == 5);
    assert_int_equal(ep_eof(s.host.ep, (uint32_t)id, FR_STDOUT), 0);
    pump_n(&s, 3);
    assert_int_equal(s.host.errors, 1);
    assert_int_equal(s.host.last_error, FR_ERR_FORBIDDEN);
    assert_int_equal(s.host.closed[ix], 1);
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 0);
    s.ctl.proxy_refuse = 0;
    sim_free(&s);

    /* a controller that never said it serves the proxy: refused for it */
    sim_init(&s, 4096, 16384);
    ep_free(s.ctl.ep);
    struct ep_config cc;
    ep_config_default(&cc, FR_ROLE_CONTROLLER);
    cc.window = 4096;
    cc.tx_ring = 16384;
    cc.ping_interval_us = cc.idle_timeout_us = 0;
    cc.on_event = on_event;
    cc.on_log = on_log;
    cc.ud = &s.ctl;
    assert_int_equal(ep_new(&cc, &s.ctl.ep), 0);
    ep_link_up(s.ctl.ep, s.now);
    pump_n(&s, 2);
    id = ep_proxy_open(s.host.ep);
    assert_true(id > 0);
    pump_n(&s, 3);
    assert_int_equal(s.ctl.proxy_opens, 0); /* never offered to the application */
    assert_int_equal(s.host.last_error, FR_ERR_FORBIDDEN);
    assert_int_equal(s.host.closed[(uint32_t)id & ~FR_PROXY_CHANNEL_BIT], 1);
    assert_int_equal(ep_proxy_count(s.host.ep), 0);
    assert_int_equal(ep_proxy_count(s.ctl.ep), 0);
    sim_free(&s);
    sim_init(&s, 4096, 16384);
    pump_n(&s, 2);

    /* AL_MAX_PROXY_CHANNELS at once, apart from the terminals' channels */
    for (int i = 0; i < AL_MAX_PROXY_CHANNELS; i++)
        assert_true(ep_proxy_open(s.host.ep) > 0);
    assert_int_equal(ep_proxy_open(s.host.ep), AL_E_LIMIT);
    pump_n(&s, 2);
    assert_int_equal(ep_proxy_count(s.ctl.ep), AL_MAX_PROXY_CHANNELS);
    struct fr_open o;
    memset(&o, 0, sizeof o);
    o.cols = 80;
    o.rows = 24;
    o.argc = 1;
    o.argv[0] = (struct fr_str){"cat", 3};
    assert_true(ep_open(s.ctl.ep, &o) > 0);
    pump_n(&s, 2);
    assert_int_equal(ep_channel_count(s.host.ep), 1);
    sim_free(&s);
}

/* Frames a proxy channel may not carry, and PROXY_OPEN's own rules. */
static void test_proxy_channel_bad_frames(void **state)
{
    (void)state;
    uint8_t buf[256];
    struct fr_frame f;
    for (int k = 0; k < 4; k++) {
        static struct sim s;
        sim_init(&s, 4096, 16384);
        pump_n(&s, 2);
        long id = ep_proxy_open(s.host.ep);
        pump_n(&s, 2);
        memset(&f, 0, sizeof f);
        f.channel = (uint32_t)id;
        struct ep *to = s.host.ep;
        if (k == 0) { /* RESIZE on a proxy channel */
            f.type = FR_RESIZE;
            f.u.resize.cols = 80;
            f.u.resize.rows = 24;
        } else if (k == 1) { /* SIGNAL */
            f.type = FR_SIGNAL;
            f.u.signal.signo = 15;
        } else if (k == 2) { /* PROXY_OPEN of an id in use */
            f.type = FR_PROXY_OPEN;
            to = s.ctl.ep;
        } else { /* a controller may not open a proxy channel */
            f.type = FR_PROXY_OPEN;
            f.channel = FR_PROXY_CHANNEL_BIT | 77;
        }
        long n = fr_encode(&f, buf, sizeof buf);
        assert_true(n > 0);
        assert_int_equal(ep_input(to, buf, (size_t)n, s.now), AL_E_PROTO);
        int code = 0;
        assert_true(ep_closing(to, &code, NULL));
        assert_int_equal(code, AL_CLOSE_PROTOCOL);
        sim_free(&s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_at_every_byte),
        cmocka_unit_test(test_resume_random_cuts),
        cmocka_unit_test(test_flow_control_bounds_memory),
        cmocka_unit_test(test_gap_when_ring_moved_on),
        cmocka_unit_test(test_version_and_roles),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_ping_idle_token),
        cmocka_unit_test(test_control_frames),
        cmocka_unit_test(test_open_failed_and_limits),
        cmocka_unit_test(test_exit_after_all_output),
        cmocka_unit_test(test_relay_adopt_on_attach),
        cmocka_unit_test(test_attach_resume),
        cmocka_unit_test(test_open_between_hellos),
        cmocka_unit_test(test_relay_resync),
        cmocka_unit_test(test_snapshot_order),
        cmocka_unit_test(test_relay_viewer_has_no_credit),
        cmocka_unit_test(test_relay_roles),
        cmocka_unit_test(test_relay_role_races),
        cmocka_unit_test(test_relay_takeover_and_viewers),
        cmocka_unit_test(test_attached_beyond_stdin),
        cmocka_unit_test(test_pty_stderr_ack),
        cmocka_unit_test(test_fatal_close_codes),
        cmocka_unit_test(test_close_code_table),
        cmocka_unit_test(test_channel_states_logged),
        cmocka_unit_test(test_proxy_channel_life),
        cmocka_unit_test(test_proxy_channel_link_drop),
        cmocka_unit_test(test_proxy_channel_default_windows),
        cmocka_unit_test(test_proxy_channel_refused_and_limits),
        cmocka_unit_test(test_proxy_channel_bad_frames),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
