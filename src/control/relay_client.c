/*
 * relay_client: the clients attached to a terminal (struct rl_client,
 * relay_int.h), each with its host endpoint (docs/protocol.md, "Relay
 * sessions"), its cursors in the terminal's log and its role: the writer
 * (one at most, the first interactive attacher or the last to take over)
 * or a viewer. Every client learns who is attached (VIEWERS) and its own
 * role (ROLE). relay_client_pump copies what the client may have next
 * (a resync, output at its cursor, EXIT) into its endpoint.
 *
 * Fair shares (docs/security.md): attach_share() keeps one user name
 * to RL_MAX_CLIENTS_PER_USER of a terminal's clients and the last
 * RL_RESERVED_CLIENTS for admins and its creator; each client's
 * SNAPSHOT_REQs pass its own rate limiter (snap_lim), one over the rate
 * waits in snap_due_us (repeats coalesce) until relay_client_tick serves
 * it. Writer changes are always marked in the recording.
 *
 * Not here: the log and the snapshot cache the clients are fed from
 * (relay_output.c), the terminal's input towards the runner
 * (relay_terminal.c).
 */
#include "relay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "al_version.h"
#include "al_limits.h"
#include "cast.h"
#include "endpoint.h"

static void client_close_err(struct rl_client *c, uint16_t code, const char *msg)
{
    (void)ep_send_error(c->ep, c->ch, code, msg);
    c->gone = 1;
}

/*
 * Move what the client may have next into its endpoint. Returns whether
 * anything was queued: only then does its connection need a writable
 * callback. (Waking it unconditionally made every writable callback that
 * found nothing to send ask for the next one: a busy loop of epoll_ctl and
 * epoll_wait for as long as a client is attached.)
 */
static int client_fill(struct rl_client *c)
{
    struct rl_term *t = c->t;
    struct relay *r = t->sb->r;
    int queued = 0;
    if (!c->ch || c->gone)
        return 0;
    if (c->need_resync) {
        if (t->mode == FR_MODE_PIPES) {
            uint64_t to = t->log[FR_STDOUT].base;
            if (to < c->cur[FR_STDOUT])
                to = c->cur[FR_STDOUT];
            if (ep_resync(c->ep, c->ch, to, 0, 0, NULL, 0) == AL_OK) {
                c->cur[FR_STDOUT] = to;
                queued = 1;
            }
            c->need_resync = 0;
        } else if (relay_output_snapshot_usable(t, c->cur[FR_STDOUT])) {
            if (ep_resync(c->ep, c->ch, t->snap_off, t->snap_cols, t->snap_rows, t->snap,
                          t->snap_len) == AL_OK) {
                c->cur[FR_STDOUT] = t->snap_off;
                c->resynced = 1;
                c->resync_at = t->snap_off;
                r->resyncs++;
                queued = 1;
            }
            c->need_resync = 0;
        } else {
            relay_output_snapshot_want(t);
            return 0;
        }
    }
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (s == FR_STDERR && t->mode != FR_MODE_PIPES)
            break;
        const struct ring *l = &t->log[s];
        if (c->cur[s] < l->base) {
            if (s == FR_STDOUT) {
                struct ep_stream_info si;
                if (c->resynced && ep_stream_info(c->ep, c->ch, s, &si) == AL_OK &&
                    si.acked <= c->resync_at)
                    return queued;  /* still not reading since its last resync: wait for it */
                c->need_resync = 1; /* fell out of the window */
                relay_log(r, 2, "terminal %s: %s fell behind: resync", t->id, c->user);
                return client_fill(c) || queued;
            }
            client_close_err(c, FR_ERR_LIMIT, "fell too far behind on stderr");
            return 1;
        }
        while (c->cur[s] < l->end) {
            size_t room = ep_writable(c->ep, c->ch, s);
            if (room == 0)
                break;
            const uint8_t *p;
            size_t n = ring_peek(l, c->cur[s], room, &p);
            if (n == 0)
                break;
            long w = ep_write(c->ep, c->ch, s, p, n);
            if (w <= 0)
                break;
            c->cur[s] += (uint64_t)w;
            queued = 1;
        }
    }
    if (t->exited && !c->exit_sent && c->cur[FR_STDOUT] == t->log[FR_STDOUT].end &&
        (t->mode != FR_MODE_PIPES || c->cur[FR_STDERR] == t->log[FR_STDERR].end)) {
        uint8_t sig = (uint8_t)(t->exit_signal > 0 ? t->exit_signal : 0);
        if (ep_exit(c->ep, c->ch, sig ? -1 : t->exit_code, sig, 0) == AL_OK) {
            c->exit_sent = 1;
            queued = 1;
        }
    }
    return queued;
}

/* Fill the client's endpoint, and wake its connection if that queued anything. */
void relay_client_pump(struct rl_client *c)
{
    if (client_fill(c))
        relay_wake(c->t->sb->r, c->conn);
}

/* ---- the writer and the viewers ----------------------------------------------------- */

static void term_viewers_changed(struct rl_term *t)
{
    const char *names[RL_MAX_CLIENTS];
    uint8_t roles[RL_MAX_CLIENTS];
    unsigned n = 0;
    for (struct rl_client *c = t->clients; c && n < RL_MAX_CLIENTS; c = c->next) {
        if (!c->ch || c->gone)
            continue;
        names[n] = c->user;
        roles[n++] = c == t->writer ? FR_WRITER : FR_VIEWER;
    }
    for (struct rl_client *c = t->clients; c; c = c->next) {
        if (!c->ch || c->gone)
            continue;
        (void)ep_viewers(c->ep, c->ch, n, names, roles);
        relay_wake(t->sb->r, c->conn);
    }
}

static void set_writer(struct rl_term *t, struct rl_client *w)
{
    struct relay *r = t->sb->r;
    struct rl_client *old = t->writer;
    if (old == w)
        return;
    t->writer = w;
    t->in_owned = 0; /* what is queued is no longer anyone's credit */
    uint64_t in_next = relay_terminal_in_next(t);
    if (old && old->ch && !old->gone) {
        (void)ep_set_role(old->ep, old->ch, FR_VIEWER, in_next);
        relay_wake(r, old->conn);
    }
    if (w && w->ch) {
        (void)ep_set_role(w->ep, w->ch, FR_WRITER, in_next);
        relay_wake(r, w->conn);
    }
    relay_log(r, 1, "terminal %s: writer is %s", t->id, w ? w->user : "nobody");
    if (w && t->cast && !t->rec_failed) { /* who typed is kept, input or not */
        char label[DB_NAME_MAX + 16];
        (void)snprintf(label, sizeof label, "writer: %s", w->user);
        int e = cast_marker(t->cast, (int64_t)relay_now_us(), label);
        if (e != AL_OK && e != AL_E_STATE)
            relay_output_rec_fail(t, e);
    }
    term_viewers_changed(t);
}

/* ---- events and attachments ---------------------------------------------------- */

static void client_event(void *ud, const struct ep_event *ev)
{
    struct rl_client *c = ud;
    struct rl_term *t = c->t;
    if (!t)
        return;
    struct relay *r = t->sb->r;
    switch (ev->type) {
    case EP_EV_ATTACH: {
        if (c->ch)
            return; /* one terminal per connection: NO_CHANNEL */
        uint64_t out_next = ev->offset, err_next = ev->to;
        const struct ring *l = &t->log[FR_STDOUT], *le = &t->log[FR_STDERR];
        int resync = 0;
        if (t->mode == FR_MODE_PIPES) { /* no screen: what the log holds, after a GAP */
            out_next = out_next < l->base ? l->base : out_next;
            err_next = err_next < le->base ? le->base : err_next;
        } else {
            /* a fresh client (offset 0, no RESUME), or one the log no
             * longer serves, starts from a snapshot */
            resync = (!ev->resume && out_next == 0 && l->end > 0) || out_next < l->base;
        }
        int rc = ep_host_adopt(c->ep, ev->channel, t->mode, out_next, err_next,
                               relay_terminal_in_next(t));
        if (rc != AL_OK)
            return;
        c->ch = ev->channel;
        c->cur[FR_STDOUT] = out_next;
        c->cur[FR_STDERR] = err_next;
        c->need_resync = resync;
        c->role_due = 1;
        return;
    }
    case EP_EV_DATA:
        if (ev->stream != FR_STDIN || c != t->writer) {
            (void)ep_consume(c->ep, ev->channel, ev->stream, ev->len);
            return;
        }
        int room = relay_terminal_in_room(t, ev->len);
        if (room == AL_E_LIMIT) { /* cannot happen within credit */
            client_close_err(c, FR_ERR_LIMIT, "input beyond the credit");
            return;
        }
        if (room != AL_OK) {
            client_close_err(c, FR_ERR_INTERNAL, "out of memory for the input");
            return;
        }
        memcpy(t->in + t->in_len, ev->data, ev->len);
        t->in_len += ev->len;
        t->in_owned += ev->len;
        relay_terminal_flush_input(t);
        return;
    case EP_EV_EOF:
        if (ev->stream == FR_STDIN && c == t->writer) {
            t->in_eof = 1;
            relay_terminal_flush_input(t);
        }
        return;
    case EP_EV_RESIZE:
        if (c == t->writer && (ev->cols != t->cols || ev->rows != t->rows))
            (void)relay_terminal_resize(r, t->id, ev->cols, ev->rows);
        return;
    case EP_EV_SIGNAL:
        if (c == t->writer && ep_signal(t->sb->ep, t->ch, ev->signo, ev->scope) == AL_OK)
            relay_wake(r, t->sb->conn);
        else if (c != t->writer)
            (void)ep_send_error(c->ep, ev->channel, FR_ERR_FORBIDDEN, "only the writer may signal");
        return;
    case EP_EV_TAKEOVER:
        if (!c->may_write) {
            (void)ep_send_error(c->ep, ev->channel, FR_ERR_FORBIDDEN,
                                "read-only: your role or your attach cannot write");
            return;
        }
        {
            char detail[128];
            (void)snprintf(detail, sizeof detail, "{\"from\":\"%s\"}",
                           t->writer ? t->writer->user : "");
            relay_audit_sbx(t->sb, c->user, "takeover", t->id, detail);
        }
        set_writer(t, c);
        return;
    case EP_EV_SNAPSHOT_REQ: {
        if (c->need_resync || c->snap_due_us)
            return; /* coalesced with the one waiting */
        uint64_t now = relay_now_us();
        if (ratelim_take(&c->snap_lim, now)) {
            c->need_resync = 1;
        } else {
            c->snap_due_us = ratelim_next(&c->snap_lim, now);
            relay_log(r, 2, "terminal %s: %s asks for snapshots too often: deferred", t->id,
                      c->user);
        }
        return;
    }
    case EP_EV_WRITABLE:
        return; /* pumped after the input */
    case EP_EV_CLOSED:
        c->gone = 1; /* a detach: the terminal goes on */
        return;
    default:
        return;
    }
}

/* Whether a may take one more of t's slots: 0, or AL_E_LIMIT with why. */
static int attach_share(const struct rl_term *t, const struct rl_attach *a, char *why, size_t cap)
{
    unsigned mine = 0;
    for (const struct rl_client *c = t->clients; c; c = c->next)
        if (!strcmp(c->user, a->user))
            mine++;
    int kept_for = a->role == DB_ROLE_ADMIN || (t->creator[0] && !strcmp(t->creator, a->user));
    if (t->nclients >= RL_MAX_CLIENTS) {
        al_errf(why, cap, "terminal %s has %u attachments, the most it takes", t->id,
                RL_MAX_CLIENTS);
        return AL_E_LIMIT;
    }
    if (mine >= RL_MAX_CLIENTS_PER_USER) {
        al_errf(why, cap, "%s already has %u attachments to terminal %s, the most for one user",
                a->user, RL_MAX_CLIENTS_PER_USER, t->id);
        return AL_E_LIMIT;
    }
    if (!kept_for && t->nclients >= RL_MAX_CLIENTS - RL_RESERVED_CLIENTS) {
        al_errf(why, cap,
                "terminal %s has %u attachments; the last %u of %u are kept for admins and its "
                "creator",
                t->id, t->nclients, RL_RESERVED_CLIENTS, RL_MAX_CLIENTS);
        return AL_E_LIMIT;
    }
    return AL_OK;
}

int relay_client_attach(struct relay *r, const struct rl_attach *a, struct rl_client **out,
                        char *why, size_t cap)
{
    al_errf(why, cap, "%s", "");
    struct rl_term *t = relay_terminal_by_id(r, a->term_id);
    if (!t || t->closing) {
        al_errf(why, cap, "no such live terminal");
        return AL_E_NOENT;
    }
    int src = attach_share(t, a, why, cap);
    if (src != AL_OK)
        return src;
    struct rl_client *c = calloc(1, sizeof *c);
    if (!c)
        return AL_E_NOMEM;
    char name[AL_VERSION_NAME_MAX];
    int rc = ep_new_with(FR_ROLE_HOST, al_version_name("airlockd", name, sizeof name),
                         RL_CLIENT_RING, RL_CLIENT_WINDOW, client_event, c, &c->ep);
    if (rc != AL_OK) {
        free(c);
        return rc;
    }
    relay_link_timers(t->sb->r, c->ep);
    c->t = t;
    c->conn = a->conn;
    ratelim_init(&c->snap_lim, RL_CLIENT_SNAP_INTERVAL_US, RL_CLIENT_SNAP_BURST);
    (void)snprintf(c->user, sizeof c->user, "%s", a->user);
    c->may_write = a->role >= DB_ROLE_OPERATOR && !a->read_only;
    c->wants_write = c->may_write;
    c->next = t->clients;
    t->clients = c;
    t->nclients++;
    ep_link_up(c->ep, relay_now_us());
    char detail[96];
    (void)snprintf(detail, sizeof detail, "{\"mode\":\"%s\"}", c->may_write ? "write" : "read");
    relay_audit_sbx(t->sb, c->user, "attach", t->id, detail);
    relay_log(r, 1, "terminal %s: %s attached (%s)", t->id, c->user,
              c->may_write ? "write" : "read");
    *out = c;
    relay_wake(r, c->conn);
    return AL_OK;
}

/* The client's ROLE, due since its ATTACH: the first interactive attacher
 * writes (and tells all), every other client is a viewer. */
static void client_role(struct rl_client *c)
{
    struct rl_term *t = c->t;
    c->role_due = 0;
    c->role_wait_us = 0;
    if (t->writer == c) /* it took over meanwhile: its ROLE went then */
        return;
    if (c->wants_write && !t->writer) {
        set_writer(t, c);
    } else {
        (void)ep_set_role(c->ep, c->ch, FR_VIEWER, relay_terminal_in_next(t));
        term_viewers_changed(t);
    }
}

void relay_client_gone(struct rl_client *c)
{
    if (!c)
        return;
    struct rl_term *t = c->t;
    if (!t) { /* its terminal went first */
        ep_free(c->ep);
        free(c);
        return;
    }
    for (struct rl_client **pp = &t->clients; *pp; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    t->nclients--;
    relay_log(t->sb->r, 1, "terminal %s: %s detached", t->id, c->user);
    if (t->writer == c) {
        t->writer = NULL;
        t->in_owned = 0;
    }
    ep_free(c->ep);
    free(c);
    /* the writer's own user waiting to write again takes the role now */
    for (struct rl_client *w = t->clients; w && !t->writer; w = w->next)
        if (w->role_wait_us)
            client_role(w);
    term_viewers_changed(t);
}

int relay_client_input(struct rl_client *c, const uint8_t *msg, size_t len)
{
    struct rl_term *t = c->t;
    if (!t)
        return AL_OK;
    int rc = ep_input(c->ep, msg, len, relay_now_us());
    if (c->role_due && c->ch && !c->role_wait_us) {
        if (c->wants_write && t->writer && !strcmp(t->writer->user, c->user))
            c->role_wait_us = relay_now_us() + RL_WRITER_RETURN_US; /* the writer coming back? */
        else
            client_role(c);
    }
    relay_client_pump(c);
    relay_wake(t->sb->r, c->conn);
    return rc;
}

int relay_client_refuse(struct rl_client *c, uint16_t code, const char *why)
{
    int rc = ep_fail(c->ep, code, why);
    if (c->t)
        relay_wake(c->t->sb->r, c->conn);
    return rc;
}

long relay_client_output(struct rl_client *c, uint8_t *buf, size_t cap)
{
    long n = ep_output(c->ep, buf, cap, relay_now_us());
    /* room may have freed: refill and go on in this same writable callback
     * (the caller loops while we return frames), without asking for another */
    if (n == 0 && c->ch && c->t && client_fill(c))
        n = ep_output(c->ep, buf, cap, relay_now_us());
    return n;
}

int relay_client_closing(struct rl_client *c, int *code, const char **reason)
{
    if (ep_closing(c->ep, code, reason))
        return 1;
    if (c->gone) {
        *code = AL_CLOSE_NORMAL;
        *reason = "detached";
        return 1;
    }
    return 0;
}

void relay_client_tick(struct rl_client *c, uint64_t now)
{
    struct relay *r = c->t->sb->r;
    int ping = ep_next_deadline(c->ep) <= now; /* a PING may be queued */
    ep_tick(c->ep, now);
    if (c->snap_due_us && now >= c->snap_due_us && ratelim_take(&c->snap_lim, now)) {
        c->snap_due_us = 0; /* the deferred SNAPSHOT_REQ's turn */
        c->need_resync = 1;
        relay_client_pump(c);
    }
    if (c->role_wait_us && now >= c->role_wait_us && c->ch) { /* the writer stayed */
        client_role(c);
        ping = 1;
    }
    if (ping || ep_closing(c->ep, NULL, NULL))
        relay_wake(r, c->conn);
}
