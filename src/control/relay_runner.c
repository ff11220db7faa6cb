/*
 * relay_runner: a sandbox's link to its runner (relay.h, "runners"). The
 * controller endpoint outlives its links: a link that comes up (dialed or
 * accepted) is linked to it, a newer one replaces an older one (closed
 * with AL_CLOSE_REPLACED), one that goes down leaves the terminals to be
 * adopted again on the next. Its events are dispatched here to the
 * terminals they concern; the link's state (up since, RTT) goes to the
 * database; a static sandbox is redialed with backoff after a failure;
 * the runner gets a fresh token in band every RL_TOKEN_REFRESH_US. A
 * terminal is confirmed to run (rl_term.confirmed, what relay_proxy_live
 * needs for its proxy credential) once the runner's OPENED, or ATTACHED
 * with state running, for it arrives on the current link, and no longer
 * once that link goes down or is replaced.
 *
 * Not here: what the terminals do with the events (relay_terminal.c,
 * relay_output.c), the tokens themselves (relay_cred.c), the sockets
 * (api.c).
 */
#include "relay_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_err.h"
#include "al_limits.h"
#include "endpoint.h"

/* The link's state into the database, fenced: only while sb is ours. */
static void store_link(struct rl_sbx *sb, int level)
{
    struct relay *r = sb->r;
    if (!relay_lease_owned(sb))
        return;
    int rc =
        db_sandbox_set_link_fenced(r->cfg.db, sb->id, sb->up, sb->since_ms, sb->rtt_us, sb->fence);
    if (relay_lease_checked(sb, rc) != AL_OK && rc != AL_E_PERM)
        relay_log(r, level, "sandbox %s: %s", sb->id, db_errmsg(r->cfg.db));
}

static void set_link(struct rl_sbx *sb, int up)
{
    struct relay *r = sb->r;
    sb->up = up;
    sb->since_ms = relay_wall_ms();
    store_link(sb, 0);
    relay_audit_sbx(sb, "system", up ? "link_up" : "link_down", sb->id, NULL);
    relay_log(r, 1, "sandbox %s: link %s", sb->id, up ? "up" : "down");
}

/* Our tokens' audience: the identifier the runner knows itself by (an
 * aca sandbox's is its session identifier, taken from the request). */
static const char *token_aud(const struct rl_sbx *sb)
{
    return sb->kind == DB_SANDBOX_ACA ? sb->ident : sb->id;
}

/* No terminal of sb is confirmed to run until the runner says so on the
 * link that comes up next. */
static void unconfirm(struct rl_sbx *sb)
{
    for (struct rl_term *t = sb->terms; t; t = t->next)
        t->confirmed = 0;
}

void relay_runner_event(void *ud, const struct ep_event *ev)
{
    struct rl_sbx *sb = ud;
    struct relay *r = sb->r;
    if (fr_is_proxy_channel(ev->channel)) {
        relay_proxychan_event(sb, ev);
        return;
    }
    struct rl_term *t = ev->channel ? relay_terminal_by_ch(sb, ev->channel) : NULL;
    switch (ev->type) {
    case EP_EV_PROXY_AT:
        if (ev->len < sizeof sb->proxy_at) {
            memcpy(sb->proxy_at, ev->data, ev->len);
            sb->proxy_at[ev->len] = '\0';
            relay_log(r, 1, "sandbox %s: its runner serves the credential proxy at %s", sb->id,
                      sb->proxy_at);
        }
        return;
    case EP_EV_READY: {
        char tok[AL_MAX_TOKEN];
        if (relay_cred_mint(sb, token_aud(sb), "link", tok, sizeof tok) == AL_OK)
            (void)ep_send_token(sb->ep, tok, strlen(tok));
        (void)ep_ping(sb->ep); /* the link's RTT, shown at once */
        sb->token_due_us = relay_now_us() + RL_TOKEN_REFRESH_US;
        set_link(sb, 1);
        return;
    }
    case EP_EV_OPENED:
    case EP_EV_ATTACHED:
        if (!t)
            return;
        /* confirmed to run on this link: its proxy credential works again
         * (an exited one's EXIT follows; until then it stays unconfirmed) */
        t->confirmed = ev->type == EP_EV_OPENED || ev->state == FR_CH_RUNNING;
        if (ev->type == EP_EV_OPENED || t->state == DB_TERM_OPENING)
            relay_terminal_state(t, DB_TERM_RUNNING);
        for (struct rl_client *c = t->clients; c; c = c->next)
            if (c->need_resync)
                relay_output_snapshot_want(t);
        relay_terminal_flush_input(t);
        return;
    case EP_EV_LOST:
        if (t) {
            relay_log(r, 0, "terminal %s: the runner no longer knows it", t->id);
            relay_terminal_drop(t, DB_TERM_LOST);
        }
        return;
    case EP_EV_DATA:
        if (t)
            relay_output_data(t, ev->stream, ev->offset, ev->data, ev->len);
        return;
    case EP_EV_GAP:
        if (t)
            relay_output_gap(t, ev->stream, ev->offset, ev->to);
        return;
    case EP_EV_EXIT:
        if (t)
            relay_terminal_exit(t, ev->signo ? -1 : ev->exit_code, ev->signo);
        return;
    case EP_EV_CLOSED:
        if (t)
            relay_terminal_drop(t, DB_TERM_CLOSED);
        return;
    case EP_EV_SNAPSHOT:
        if (t)
            relay_output_snapshot(t, ev);
        return;
    case EP_EV_PONG:
        sb->rtt_us = (int64_t)ev->rtt_us;
        store_link(sb, 2);
        return;
    case EP_EV_ERROR:
        relay_log(r, 1, "sandbox %s: runner says (%u) %.*s", sb->id, ev->code, (int)ev->len,
                  (const char *)ev->data);
        if (t && (ev->code == FR_ERR_OPEN_FAILED ||
                  (ev->code == FR_ERR_LIMIT && t->state == DB_TERM_OPENING))) {
            char detail[AL_MAX_ERRMSG + 32];
            json_t *d = json_pack("{s:s%}", "error", (const char *)ev->data, (size_t)ev->len);
            char *dj = d ? json_dumps(d, JSON_COMPACT) : NULL;
            (void)snprintf(detail, sizeof detail, "%s", dj ? dj : "{}");
            free(dj);
            json_decref(d);
            relay_audit_sbx(sb, "system", "open_failed", t->id, detail);
            relay_terminal_exit(t, 127, 0);
            relay_terminal_drop(t, DB_TERM_LOST);
        } else if (t && ev->code == FR_ERR_LIMIT) {
            relay_terminal_resize_refused(t, ev->data, ev->len);
        } else if (t && t->snap_asked && (ev->code == FR_ERR_STATE || ev->code == FR_ERR_TOO_BIG)) {
            /* a runner's answer to SNAPSHOT_REQ when it cannot make one
             * (older runners said TOO_BIG above AL_MAX_SNAPSHOT) */
            char why[AL_MAX_ERRMSG + 16];
            (void)snprintf(why, sizeof why, "the runner says: %.*s", (int)ev->len,
                           (const char *)ev->data);
            relay_output_snapshot_failed(t, why);
        }
        return;
    case EP_EV_WRITABLE:
        if (t && ev->stream == FR_STDIN)
            relay_terminal_flush_input(t);
        return;
    default:
        return;
    }
}

int relay_runner_up(struct rl_sbx *sb, void *conn, void **replaced)
{
    if (replaced)
        *replaced = NULL;
    if (sb->conn && sb->conn != conn) {
        if (replaced)
            *replaced = sb->conn;
        sb->old_conn = sb->conn;
        sb->old_lost = 0;
        relay_wake(sb->r, sb->old_conn);
    }
    sb->conn = conn;
    unconfirm(sb);
    backoff_reset(&sb->redial);
    sb->dialing = 0;
    sb->link_error[0] = '\0';
    ep_link_up(sb->ep, relay_now_us());
    relay_wake(sb->r, conn);
    return AL_OK;
}

static void schedule_redial(struct rl_sbx *sb)
{
    if ((sb->kind != DB_SANDBOX_STATIC && sb->kind != DB_SANDBOX_ACA) || sb->removed ||
        !relay_lease_owned(sb))
        return;
    sb->redial_us = relay_now_us() + backoff_next(&sb->redial) * 1000;
}

void relay_runner_down(struct rl_sbx *sb, void *conn)
{
    if (sb->old_conn == conn) {
        sb->old_conn = NULL;
        sb->old_lost = 0;
        return;
    }
    if (sb->conn != conn)
        return;
    sb->conn = NULL;
    ep_link_down(sb->ep);
    for (struct rl_term *t = sb->terms; t; t = t->next)
        t->snap_asked = 0;
    unconfirm(sb);
    if (sb->up)
        set_link(sb, 0);
    sb->dialing = 0;
    schedule_redial(sb);
}

void relay_runner_dial_failed(struct rl_sbx *sb, const char *why)
{
    relay_log(sb->r, 1, "sandbox %s: dial failed: %s", sb->id, why);
    (void)snprintf(sb->link_error, sizeof sb->link_error, "%s", why);
    sb->dialing = 0;
    schedule_redial(sb);
}

int relay_runner_input(struct rl_sbx *sb, void *conn, const uint8_t *msg, size_t len)
{
    if (conn != sb->conn)
        return AL_OK;
    int rc = ep_input(sb->ep, msg, len, relay_now_us());
    if (rc != AL_OK)
        relay_log(sb->r, 1, "sandbox %s: runner broke the protocol: %s", sb->id, al_strerror(rc));
    relay_wake(sb->r, conn);
    return rc;
}

int relay_runner_refuse(struct rl_sbx *sb, void *conn, uint16_t code, const char *why)
{
    if (conn != sb->conn)
        return AL_OK;
    relay_log(sb->r, 1, "sandbox %s: runner's message refused: %s", sb->id, why);
    int rc = ep_fail(sb->ep, code, why);
    relay_wake(sb->r, conn);
    return rc;
}

long relay_runner_output(struct rl_sbx *sb, void *conn, uint8_t *buf, size_t cap)
{
    if (conn != sb->conn)
        return 0;
    return ep_output(sb->ep, buf, cap, relay_now_us());
}

int relay_runner_closing(struct rl_sbx *sb, void *conn, int *code, const char **reason)
{
    /* adopt_due: a link of an earlier ownership (a dial that completed
     * late): it goes before the sandbox is adopted anew */
    if (conn == sb->old_conn ||
        ((sb->removed || !relay_lease_owned(sb) || sb->adopt_due) && conn == sb->conn)) {
        *code = AL_CLOSE_REPLACED;
        *reason = conn == sb->old_conn && !sb->old_lost ? "replaced by a newer connection"
                  : sb->removed                         ? "sandbox removed"
                                                        : "another replica owns the sandbox now";
        return 1;
    }
    if (conn != sb->conn)
        return 0;
    return ep_closing(sb->ep, code, reason);
}

/* Where an aca sandbox's runner is: the pool's endpoint as a WebSocket
 * URL, with the session's identifier (docs/aca.md). */
static int aca_url(const struct rl_sbx *sb, char *out, size_t cap)
{
    const char *rest = sb->url;
    const char *scheme = "wss://";
    if (!strncmp(rest, "https://", 8)) {
        rest += 8;
    } else if (!strncmp(rest, "http://", 7)) {
        rest += 7;
        scheme = "ws://";
    } else {
        return AL_E_INVAL;
    }
    size_t n = strlen(rest);
    const char *slash = n && rest[n - 1] == '/' ? "" : "/";
    int w = snprintf(out, cap, "%s%s%s?identifier=%s&api-version=%s", scheme, rest, slash,
                     sb->ident, RL_ACA_API_VERSION);
    return w > 0 && (size_t)w < cap ? AL_OK : AL_E_TOOBIG;
}

/* Start a dial of a static or aca sandbox's runner. */
static void dial(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    char tok[AL_MAX_TOKEN], url[DB_SANDBOX_URL_MAX + DB_IDENT_MAX + 64], why[RL_LINK_ERROR_MAX];
    struct rl_dial d = {.url = sb->url, .token = tok, .platform = NULL};
    if (sb->kind == DB_SANDBOX_ACA) {
        d.url = url;
        d.platform = sb->platform;
        if (aca_url(sb, url, sizeof url) != AL_OK) {
            relay_runner_dial_failed(sb, "its pool endpoint is not a usable URL");
            return;
        }
    }
    if (!r->cfg.dial || relay_cred_mint(sb, token_aud(sb), "dial", tok, sizeof tok) != AL_OK) {
        schedule_redial(sb);
        return;
    }
    sb->dialing = 1;
    why[0] = '\0';
    if (r->cfg.dial(r->cfg.dial_ud, sb, &d, why, sizeof why) != AL_OK)
        relay_runner_dial_failed(sb, why[0] ? why : "cannot start the connection");
}

void relay_runner_tick(struct rl_sbx *sb, uint64_t now)
{
    struct relay *r = sb->r;
    int due = ep_next_deadline(sb->ep) <= now; /* a PING or a timeout may be queued */
    ep_tick(sb->ep, now);
    if (sb->conn && ep_ready(sb->ep) && now >= sb->token_due_us) {
        char tok[AL_MAX_TOKEN];
        if (relay_cred_mint(sb, token_aud(sb), "refresh", tok, sizeof tok) == AL_OK &&
            ep_send_token(sb->ep, tok, strlen(tok)) == AL_OK)
            due = 1;
        sb->token_due_us = now + RL_TOKEN_REFRESH_US;
    }
    if (sb->conn && (due || ep_closing(sb->ep, NULL, NULL)))
        relay_wake(r, sb->conn);
    if ((sb->kind == DB_SANDBOX_STATIC || sb->kind == DB_SANDBOX_ACA) && !sb->removed &&
        relay_lease_owned(sb) && !sb->conn && !sb->dialing && sb->redial_us &&
        now >= sb->redial_us) {
        sb->redial_us = 0;
        dial(sb);
    }
}
