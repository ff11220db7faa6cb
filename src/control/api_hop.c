/*
 * api_hop: a client attached at a replica that does not own its
 * terminal's sandbox, relayed to the owner (docs/scale-out.md, "Clients on
 * any replica"). This replica authenticated the client as for any attach;
 * it dials the owner's /v1/terminals/ID/attach (its address from the
 * replicas table) presenting a hop token of its own (minted by its signer:
 * aud the owner's replica id, sub the user's name; never the client's
 * credential), and carries whole airlock.v1 messages both ways unchanged:
 * the session (HELLO, ATTACH and RESUME, ROLE, TAKEOVER, VIEWERS, the
 * offsets) is between the client and the owner, which enforces the user's
 * role from the database. When either hop ends, the other is closed; the
 * client reconnects and resumes from its offsets.
 *
 * Flow control: each side's messages wait in a queue on the other side's
 * struct conn (struct hopq) until that side can write; above
 * API_HOP_QUEUE_HIGH bytes the side they come from is not read
 * (lws_rx_flow_control) until its queue is below API_HOP_QUEUE_LOW. So a
 * slow client slows the owner's link to it, never the replica's memory.
 *
 * Data model: the client's struct conn (kind CONN_HOP_IN, made by the
 * upgrade) and the dial's (CONN_HOP_OUT, made here) point at each other
 * (hop) until one goes; each owns the queue of messages going out on its
 * own wire (q); self_wsi is the client's wsi (the dial's is dial_wsi).
 */
#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al_close.h"
#include "al_err.h"
#include "al_limits.h"
#include "api_local.h"
#include "db.h"
#include "endpoint.h"
#include "signer.h"
#include "wsc.h"
#include "wscraw.h"
#include "wsctls.h"
#include "wsctx.h"
#include "wsg.h"

enum {
    API_HOP_TOKEN_TTL_S = 60,              /* the hop token: used once, at the dial */
    API_HOP_QUEUE_HIGH = 4 * AL_MAX_FRAME, /* stop reading the other side above this */
    API_HOP_QUEUE_LOW = AL_MAX_FRAME,      /* ... and read it again below this */
    API_HOP_UPGRADE_S = 10,                /* the owner's answer to the upgrade */
};
_Static_assert((int)API_HOP_TOKEN_TTL_S <= (int)SIGNER_HOP_TTL_MAX, "the signer's table allows it");

struct hopmsg {
    struct hopmsg *next;
    size_t len;
    uint8_t data[];
};

static int q_push(struct hopq *q, const uint8_t *msg, size_t len)
{
    struct hopmsg *m = malloc(sizeof *m + len);
    if (!m)
        return AL_E_NOMEM;
    m->next = NULL;
    m->len = len;
    memcpy(m->data, msg, len);
    if (q->tail)
        q->tail->next = m;
    else
        q->head = m;
    q->tail = m;
    q->bytes += len;
    return AL_OK;
}

/* The oldest message into buf (cap): its length, 0 when none waits. */
static size_t q_pop(struct hopq *q, uint8_t *buf, size_t cap)
{
    struct hopmsg *m = q->head;
    if (!m || m->len > cap)
        return 0;
    size_t n = m->len;
    memcpy(buf, m->data, n);
    q->head = m->next;
    if (!q->head)
        q->tail = NULL;
    q->bytes -= n;
    free(m);
    return n;
}

void api_hop_queue_free(struct hopq *q)
{
    while (q->head) {
        struct hopmsg *m = q->head;
        q->head = m->next;
        free(m);
    }
    q->tail = NULL;
    q->bytes = 0;
}

/* The wsi each side writes on. */
static struct lws *wsi_of(const struct conn *c)
{
    return c->kind == CONN_HOP_OUT ? c->dial_wsi : c->self_wsi;
}

/* A message for `to`'s wire, from its peer: queued, `to` woken, its peer
 * no longer read while the queue is full. */
static int forward(struct conn *to, const uint8_t *msg, size_t len)
{
    int rc = q_push(&to->q, msg, len);
    if (rc != AL_OK)
        return rc;
    struct conn *from = to->hop;
    if (from && !from->hop_paused && to->q.bytes > API_HOP_QUEUE_HIGH && wsi_of(from)) {
        from->hop_paused = 1;
        (void)lws_rx_flow_control(wsi_of(from), 0);
    }
    if (wsi_of(to))
        lws_callback_on_writable(wsi_of(to));
    return AL_OK;
}

/* After `c` wrote from its queue: its peer is read again once it drained. */
static void drained(struct conn *c)
{
    struct conn *from = c->hop;
    if (from && from->hop_paused && c->q.bytes < API_HOP_QUEUE_LOW && wsi_of(from)) {
        from->hop_paused = 0;
        (void)lws_rx_flow_control(wsi_of(from), 1);
    }
}

/* One side is gone or failed: the other closes once its queue is out. */
static void unlink_hop(struct conn *c, int code, const char *why)
{
    struct conn *o = c->hop;
    c->hop = NULL;
    if (!o)
        return;
    o->hop = NULL;
    o->hop_code = code;
    (void)snprintf(o->hop_why, sizeof o->hop_why, "%s", why);
    if (o->hop_paused && wsi_of(o)) {
        o->hop_paused = 0;
        (void)lws_rx_flow_control(wsi_of(o), 1);
    }
    if (wsi_of(o))
        lws_callback_on_writable(wsi_of(o));
}

/* ---- the owner's side: a ws:// dial framed by wsc ----------------------------- */

static void ev_upgraded(void *ud)
{
    struct conn *d = ud;
    lws_set_timeout(d->dial_wsi, NO_PENDING_TIMEOUT, 0);
    d->dial_done = 1;
    wsg_nodelay(d->dial_wsi);
    api_log(d->api, 1, "attach relayed to the owner: linked");
    lws_callback_on_writable(d->dial_wsi);
}

static void ev_failed(void *ud, unsigned status, const char *why, int marked)
{
    (void)marked;
    struct conn *d = ud;
    d->dial_done = 1;
    char msg[160];
    (void)snprintf(msg, sizeof msg, "the owner refused the relayed attach: HTTP %u (%s)", status,
                   why);
    api_log(d->api, 1, "%s", msg);
    unlink_hop(d, AL_CLOSE_INTERNAL, "the terminal's owner refused the relayed attach");
}

static void ev_message(void *ud, const uint8_t *msg, size_t len)
{
    struct conn *d = ud;
    if (d->hop && forward(d->hop, msg, len) != AL_OK)
        unlink_hop(d, AL_CLOSE_INTERNAL, "out of memory");
}

static void ev_refused(void *ud, uint16_t error, const char *why)
{
    struct conn *d = ud;
    api_log(d->api, 1, "the owner's message refused: %s", why);
    (void)wsc_close(d->wsc, ep_close_code_of(error), why);
    unlink_hop(d, ep_close_code_of(error), why);
    lws_callback_on_writable(d->dial_wsi);
}

static void ev_closed(void *ud, int code, const char *reason)
{
    struct conn *d = ud;
    unlink_hop(d, code > 0 && code != 1005 ? code : AL_CLOSE_NORMAL, reason);
}

static const struct wsc_events events = {ev_upgraded, ev_failed, ev_message, ev_refused, ev_closed};

int api_hop_out_writeable(struct api *a, struct lws *wsi, struct conn *d)
{
    (void)a;
    if (!d->wsc || wsc_close_sent(d->wsc))
        return -1;
    int rc = wscraw_flush(d->wsc, d->tls, wsi);
    if (rc <= 0 || !wsc_is_open(d->wsc))
        return rc < 0 ? -1 : 0;
    static uint8_t msg[AL_MAX_FRAME];
    for (int i = 0; i < WSG_WRITES_PER_CALLBACK; i++) {
        size_t n = q_pop(&d->q, msg, sizeof msg);
        if (!n)
            break;
        if (wsc_send(d->wsc, msg, n) != AL_OK)
            return -1;
        rc = wscraw_flush(d->wsc, d->tls, wsi);
        if (rc < 0)
            return -1;
        if (rc == 0 || i == WSG_WRITES_PER_CALLBACK - 1) {
            drained(d);
            lws_callback_on_writable(wsi);
            return 0;
        }
    }
    drained(d);
    if (!d->hop && !d->q.head) { /* the client is gone: close the owner's hop */
        (void)wsc_close(d->wsc, AL_CLOSE_NORMAL, "the client detached");
        if (wscraw_flush(d->wsc, d->tls, wsi) < 0)
            return -1;
    }
    if (wsc_close_sent(d->wsc)) {
        lws_set_timeout(wsi, PENDING_TIMEOUT_CLOSE_SEND, WSG_CLOSE_SEND_S);
        lws_callback_on_writable(wsi);
    }
    return 0;
}

void api_hop_out_closed(struct conn *d)
{
    unlink_hop(d, AL_CLOSE_INTERNAL,
               d->dial_done ? "the terminal's owner closed the link"
                            : "the terminal's owner could not be reached");
    api_hop_queue_free(&d->q);
}

/* ---- the client's side: the accepted WebSocket --------------------------------- */

int api_hop_in_message(struct conn *c, const uint8_t *msg, size_t len)
{
    if (!c->hop)
        return AL_OK; /* the owner's side is gone: closing */
    int rc = forward(c->hop, msg, len);
    if (rc != AL_OK)
        unlink_hop(c, AL_CLOSE_INTERNAL, "out of memory");
    return rc;
}

long api_hop_in_pull(struct conn *c, uint8_t *buf, size_t cap)
{
    size_t n = q_pop(&c->q, buf, cap);
    drained(c);
    return (long)n;
}

int api_hop_in_closing(struct conn *c, int *code, const char **why)
{
    if (c->hop || c->q.head)
        return 0;
    *code = c->hop_code ? c->hop_code : AL_CLOSE_NORMAL;
    *why = c->hop_why[0] ? c->hop_why : "closing";
    return 1;
}

static void hops_unlink(struct api *a, struct conn *c)
{
    if (c->hops_prev)
        c->hops_prev->hops_next = c->hops_next;
    else if (a->hops == c)
        a->hops = c->hops_next;
    if (c->hops_next)
        c->hops_next->hops_prev = c->hops_prev;
    c->hops_prev = c->hops_next = NULL;
}

void api_hop_in_closed(struct conn *c)
{
    hops_unlink(c->api, c);
    struct conn *d = c->hop;
    unlink_hop(c, AL_CLOSE_NORMAL, "the client detached");
    if (d && d->wsc && !d->dial_done) /* not linked yet: nothing to say to the owner */
        lws_set_timeout(d->dial_wsi, PENDING_TIMEOUT_CLOSE_SEND, 1);
    api_hop_queue_free(&c->q);
}

/* ---- the dial ------------------------------------------------------------------ */

struct owner_of {
    char sandbox[DB_NAME_MAX + 1];
    char address[DB_REPLICA_ADDR_MAX + 1];
};

/* The terminal's sandbox's owner, when it is another live replica (reached
 * over ws:// or wss://): its id and address; AL_E_NOENT otherwise (the
 * caller answers as for a terminal it does not hold). */
static int owner_of_terminal(struct api *a, const char *term_id, char *owner, size_t cap,
                             struct owner_of *o)
{
    struct db_terminal *t = malloc(sizeof *t);
    struct db_sandbox *sb = malloc(sizeof *sb);
    int rc = t && sb ? db_terminal_get(a->db, term_id, t) : AL_E_NOMEM;
    if (rc == AL_OK && t->state != DB_TERM_OPENING && t->state != DB_TERM_RUNNING &&
        t->state != DB_TERM_EXITED)
        rc = AL_E_NOENT;
    if (rc == AL_OK)
        rc = db_sandbox_get(a->db, t->sandbox_id, sb);
    if (rc == AL_OK && (!sb->owner[0] || !strcmp(sb->owner, a->replica_id)))
        rc = AL_E_NOENT;
    if (rc == AL_OK) {
        (void)snprintf(owner, cap, "%s", sb->owner);
        (void)snprintf(o->sandbox, sizeof o->sandbox, "%s", sb->id);
    }
    free(t);
    free(sb);
    if (rc != AL_OK)
        return rc;
    rc = api_replica_address(a, owner, API_HOP_OWNER_LATE_MS, o->address, sizeof o->address);
    const int ws = !strncmp(o->address, "ws://", 5) || !strncmp(o->address, "wss://", 6);
    return rc == AL_OK && ws ? AL_OK : AL_E_NOENT;
}

/* The dial's link: the upgrade request with our hop token as Bearer. */
static int dial_link(struct conn *d, const char *addr, int port, const char *path,
                     const char *token)
{
    static char extra[AL_MAX_TOKEN + 64];
    int n = snprintf(extra, sizeof extra, "Authorization: Bearer %s\r\n", token);
    if (n > 0 && (size_t)n < sizeof extra) {
        struct wscu_request r = {addr, port, path, AL_SUBPROTOCOL, extra, NULL};
        d->wsc = wsc_new(&r, &events, d);
    }
    OPENSSL_cleanse(extra, sizeof extra);
    return d->wsc ? AL_OK : AL_E_NOMEM;
}

int api_hop_attach(struct api *a, struct lws *wsi, struct call *c, int read_only)
{
    char owner[DB_REPLICA_ID_LEN + 1];
    struct owner_of o = {0};
    if (owner_of_terminal(a, c->id, owner, sizeof owner, &o) != AL_OK)
        return AL_E_NOENT;
    char parsed[DB_REPLICA_ADDR_MAX + 1], path[DB_REPLICA_ADDR_MAX + 2 * DB_NAME_MAX];
    (void)snprintf(parsed, sizeof parsed, "%s", o.address);
    const char *prot, *addr, *p;
    int port;
    if (lws_parse_uri(parsed, &prot, &addr, &port, &p))
        return AL_E_NOENT;
    (void)snprintf(path, sizeof path, "/v1/terminals/%s/attach%s", c->id,
                   read_only ? "?mode=read" : "");
    struct signer_mint m = {SIGNER_SHAPE_HOP, owner, c->u.name, API_HOP_TOKEN_TTL_S};
    struct signer_resp *t = malloc(sizeof *t);
    char why[SIGNER_REASON_MAX + 128];
    int rc = t ? signer_mint(a->signer, &m, t, why, sizeof why) : AL_E_NOMEM;
    struct conn *d = rc == AL_OK ? calloc(1, sizeof *d) : NULL;
    if (rc == AL_OK && !d)
        rc = AL_E_NOMEM;
    if (rc == AL_OK && !strcmp(prot, "wss")) { /* the system's store (SSL_CERT_FILE where set) */
        char terr[WSCTLS_WHY_MAX];
        if (!a->dial_tls)
            a->dial_tls = wsctls_ctx_new(NULL, 0, terr, sizeof terr);
        rc = !a->dial_tls                                ? AL_E_CRYPTO
             : !(d->tls = wsctls_new(a->dial_tls, addr)) ? AL_E_NOMEM
                                                         : AL_OK;
    }
    if (rc == AL_OK)
        rc = dial_link(d, addr, port, path, t->token);
    if (t) {
        OPENSSL_cleanse(t, sizeof *t);
        free(t);
    }
    if (rc != AL_OK) {
        if (d) {
            wsc_free(d->wsc);
            wsctls_free(d->tls);
        }
        free(d);
        api_log(a, 0, "attach of %s relayed to %s: %s", c->id, owner, al_strerror(rc));
        return rc;
    }
    d->kind = CONN_HOP_OUT;
    d->api = a;
    c->conn->kind = CONN_HOP_IN;
    c->conn->api = a;
    c->conn->self_wsi = wsi;
    c->conn->hop = d;
    d->hop = c->conn;
    struct lws_client_connect_info ci;
    wsctx_dial_info(&ci, a->ctx, addr, port, path, 0);
    ci.method = "RAW";
    ci.local_protocol_name = AL_SUBPROTOCOL;
    ci.opaque_user_data = d;
    if (!lws_client_connect_via_info(&ci)) { /* lws freed nothing of ours */
        c->conn->hop = NULL;
        c->conn->kind = CONN_CLIENT;
        wsc_free(d->wsc);
        wsctls_free(d->tls);
        free(d);
        return AL_E_IO;
    }
    (void)snprintf(c->conn->hop_sandbox, sizeof c->conn->hop_sandbox, "%s", o.sandbox);
    (void)snprintf(c->conn->hop_owner, sizeof c->conn->hop_owner, "%s", owner);
    c->conn->hops_next = a->hops;
    if (a->hops)
        a->hops->hops_prev = c->conn;
    a->hops = c->conn;
    api_log(a, 1, "attach of %s by %s relayed to its owner %s at %s", c->id, c->u.name, owner,
            o.address);
    return AL_OK;
}

/* The cut of a relayed client whose owner changed: both sides closed. */
static void cut(struct conn *c, const char *why)
{
    struct conn *d = c->hop;
    if (d && d->wsc && wsc_close(d->wsc, AL_CLOSE_NORMAL, why) == AL_OK && d->dial_wsi)
        lws_callback_on_writable(d->dial_wsi);
    unlink_hop(c, AL_CLOSE_NORMAL, why);
    c->hop_code = AL_CLOSE_NORMAL;
    (void)snprintf(c->hop_why, sizeof c->hop_why, "%s", why);
    if (c->self_wsi)
        lws_callback_on_writable(c->self_wsi);
}

/* The replicas whose beat is recent, read in one listing per check. */
struct alive_set {
    unsigned n;
    int listed; /* 1: read; -1: the listing failed (no owner counts as late) */
    char id[DB_REPLICAS_LIST_MAX][DB_REPLICA_ID_LEN + 1];
};

static int alive_row(void *ctx, const struct db_replica *r)
{
    struct alive_set *s = ctx;
    if (!r->alive)
        return 0;
    if (s->n == DB_REPLICAS_LIST_MAX)
        return 1; /* the listing returns no more than this anyway */
    (void)snprintf(s->id[s->n++], sizeof s->id[0], "%s", r->id);
    return 0;
}

/* Whether the owner is known to be late; a listing that failed says no. */
static int owner_late(struct api *a, struct alive_set *s, const char *owner)
{
    if (!s->listed) {
        int rc = db_replica_list(a->db, API_HOP_OWNER_LATE_MS, alive_row, s);
        s->listed = rc == AL_OK || rc == 1 ? 1 : -1;
    }
    if (s->listed < 0)
        return 0;
    for (unsigned i = 0; i < s->n; i++)
        if (!strcmp(s->id[i], owner))
            return 0;
    return 1;
}

static int by_sandbox(const void *x, const void *y)
{
    const struct conn *const *cx = x, *const *cy = y;
    return strcmp((*cx)->hop_sandbox, (*cy)->hop_sandbox);
}

/* At each beat: a relayed client whose terminal's sandbox has another
 * owner now, or none, or whose owner's beat is API_HOP_OWNER_LATE_MS late
 * (frozen, dead, cut off), is cut; it attaches again and is served
 * wherever the terminal is now, resuming from its offsets. The database is
 * asked once per sandbox and once for the replicas, however many clients
 * are relayed (this runs on the loop, and a PostgreSQL query is a round
 * trip); a query that fails cuts nothing. */
void api_hop_check(struct api *a)
{
    size_t n = 0;
    for (struct conn *c = a->hops; c; c = c->hops_next)
        n += c->hop != NULL; /* without one: closing already */
    if (n == 0)
        return;
    struct conn **v = calloc(n, sizeof(struct conn *));
    struct db_sandbox *sb = malloc(sizeof *sb);
    struct alive_set *alive = calloc(1, sizeof *alive);
    if (!v || !sb || !alive) {
        api_log(a, 0, "relayed clients: out of memory for the owners' check");
        goto out;
    }
    size_t k = 0;
    for (struct conn *c = a->hops; c && k < n; c = c->hops_next)
        if (c->hop)
            v[k++] = c;
    qsort(v, k, sizeof(struct conn *), by_sandbox); /* a sandbox's clients side by side */
    for (size_t i = 0, j; i < k; i = j) {
        int rc = db_sandbox_get(a->db, v[i]->hop_sandbox, sb);
        for (j = i; j < k && !strcmp(v[j]->hop_sandbox, v[i]->hop_sandbox); j++) {
            struct conn *c = v[j];
            int gone;
            if (rc == AL_OK && !strcmp(sb->owner, c->hop_owner))
                gone = owner_late(a, alive, c->hop_owner);
            else /* another owner, or none, or the sandbox gone */
                gone = rc == AL_OK || rc == AL_E_NOENT;
            if (gone) {
                api_log(a, 1,
                        "a relayed client of sandbox %s: its owner %s changed or is gone: cut",
                        c->hop_sandbox, c->hop_owner);
                cut(c, "the terminal's owner changed: attach again");
            }
        }
    }
out:
    free(alive);
    free(sb);
    free(v);
}
