/*
 * api_fwd: a terminal action (open, signal, close: the routes flagged
 * ROUTE_OWNER in api_route.c) asked at a replica that does not own the
 * sandbox, forwarded to the owner over HTTP (docs/scale-out.md, "Actions
 * at any replica"). Only the owner holds the runner's link, so only it can
 * open or signal a terminal; behind a round-robin front a client lands on
 * any replica, and is answered as if it had reached the owner.
 *
 * This replica authenticated the caller and checked its role as for any
 * request. It sends the same method, path and body to the owner's address
 * (the replicas table: http:// for a ws:// address, https:// for wss://,
 * its certificate checked against the system's store, or SSL_CERT_FILE
 * where set, as for the dials of runners and of relayed attaches)
 * with a token of its own as bearer (minted by its signer: shape fwd,
 * scope replica:api, aud the owner's replica id, sub the user's name;
 * never the caller's credential), and answers the caller with the owner's
 * status and JSON body. The owner takes the user's role from the database
 * (api_auth.c), carries the action out, audits it, and never forwards a
 * forwarded request again: a request that finds no owner there is
 * answered there (409), so two replicas that disagree cannot bounce it.
 *
 * The call is made with libcurl's multi interface on the loop (proxyup.c:
 * one instance of its own, made at the first forward), bounded as a whole
 * by API_FWD_TIMEOUT_MS; the answer is written at the request's next
 * HTTP_WRITEABLE, since lws writes an HTTP answer only from its callbacks.
 *
 * Data model: struct fwd is owned by the request's struct http_req
 * (q->fwd) from api_fwd_start until it is answered (api_fwd_writeable) or
 * the connection closes (api_fwd_cancel); it owns the proxyup call, the
 * timer (closed asynchronously: the struct is freed in its close
 * callback), a copy of the request's body and the answer received so far.
 */
#include <jansson.h>
#include <libwebsockets.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "al_err.h"
#include "api_local.h"
#include "db.h"
#include "proxyup.h"
#include "relay.h"
#include "signer.h"
#include "wslisten.h"

enum {
    API_FWD_TOKEN_TTL_S = 30,       /* used once, at the call */
    API_FWD_CONNECT_MS = 2000,      /* the owner is on the replicas' own network */
    API_FWD_HEAD_S = 10,            /* its answer's head */
    API_FWD_TIMEOUT_MS = 15000,     /* the whole call, answer included */
    API_FWD_ANSWER_MAX = 64u << 10, /* an action's answer is a small JSON object */
    API_FWD_HDR_MAX = AL_MAX_TOKEN + 64,
};
_Static_assert((int)API_FWD_TOKEN_TTL_S <= (int)SIGNER_HOP_TTL_MAX, "the signer's table allows it");
_Static_assert(API_FWD_HEAD_S * 1000 < API_FWD_TIMEOUT_MS, "the head's bound is the inner one");

struct fwd {
    struct api *a;
    struct lws *wsi;
    struct proxyup_call *call; /* NULL once ended */
    uv_timer_t timer;
    char *body; /* the request's, sent as is */
    size_t len, sent;
    char url[DB_REPLICA_ADDR_MAX + API_MAX_URI + 8];
    char auth[API_FWD_HDR_MAX];
    char owner[DB_REPLICA_ID_LEN + 1];
    int status; /* the owner's, or ours for a failure */
    char *answer;
    size_t alen;
    int done;      /* the answer is ready: written at the next HTTP_WRITEABLE */
    int abandoned; /* the caller is gone: freed when the timer is closed */
};

static void timer_closed(uv_handle_t *h)
{
    struct fwd *f = h->data;
    OPENSSL_cleanse(f->auth, sizeof f->auth);
    free(f->body);
    free(f->answer);
    free(f);
}

/* The answer is ready (the owner's, or a failure of ours): written at the
 * request's next HTTP_WRITEABLE. */
static void finish(struct fwd *f, int status, const char *err)
{
    if (f->done)
        return;
    f->done = 1;
    f->call = NULL;
    uv_timer_stop(&f->timer);
    if (err) {
        json_t *o = json_pack("{s:s}", "error", err);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        free(f->answer);
        f->answer = s;
        f->alen = s ? strlen(s) : 0;
        f->status = status;
    }
    if (f->abandoned)
        return;
    lws_callback_on_writable(f->wsi);
}

static void on_status(void *ud, int status)
{
    struct fwd *f = ud;
    f->status = status;
}

static void on_header(void *ud, const char *name, size_t nlen, const char *value, size_t vlen)
{
    (void)ud;
    (void)name;
    (void)nlen;
    (void)value;
    (void)vlen;
}

static void on_head_done(void *ud)
{
    (void)ud;
}

static size_t on_body(void *ud, const char *p, size_t n)
{
    struct fwd *f = ud;
    if (f->alen + n > API_FWD_ANSWER_MAX)
        return 0; /* too long for an action's answer: the call is stopped */
    char *b = realloc(f->answer, f->alen + n + 1);
    if (!b)
        return 0;
    memcpy(b + f->alen, p, n);
    f->alen += n;
    b[f->alen] = 0;
    f->answer = b;
    return n;
}

static size_t read_body(void *ud, char *buf, size_t cap)
{
    struct fwd *f = ud;
    size_t n = f->len - f->sent < cap ? f->len - f->sent : cap;
    memcpy(buf, f->body + f->sent, n);
    f->sent += n;
    return n;
}

static void on_done(void *ud, enum proxyup_result r, const char *why)
{
    struct fwd *f = ud;
    char msg[256];
    if (r == PROXYUP_OK && f->status >= 200 && f->status < 600) {
        api_log(f->a, 2, "forwarded to %s: %d", f->owner, f->status);
        finish(f, f->status, NULL);
        return;
    }
    (void)snprintf(msg, sizeof msg, "the sandbox's owner (replica %s) %s: %s", f->owner,
                   r == PROXYUP_TIMEOUT ? "did not answer in time" : "could not be reached",
                   why && why[0] ? why : "no answer");
    api_log(f->a, 1, "an action forwarded: %s", msg);
    finish(f, r == PROXYUP_TIMEOUT ? 504 : 502, msg);
}

static const struct proxyup_cb callbacks = {on_status, on_header, on_head_done,
                                            on_body,   read_body, on_done};

static void on_timeout(uv_timer_t *t)
{
    struct fwd *f = t->data;
    if (f->call)
        proxyup_cancel(f->call);
    f->call = NULL;
    char msg[160];
    (void)snprintf(msg, sizeof msg, "the sandbox's owner (replica %s) did not answer in %d s",
                   f->owner, API_FWD_TIMEOUT_MS / 1000);
    api_log(f->a, 1, "an action forwarded: %s", msg);
    finish(f, 504, msg);
}

/* ---- which replica, and where -------------------------------------------------- */

/* The sandbox of the action: the terminal's, or the body's "sandbox"
 * (POST /v1/terminals). 0 when it names none (the handler says why). */
static int sandbox_of(const struct call *c, char *out, size_t cap)
{
    if (c->term) {
        (void)snprintf(out, cap, "%s", c->term->sandbox_id);
        return 1;
    }
    json_t *j = c->q && c->q->body ? json_loadb(c->q->body, c->q->len, 0, NULL) : NULL;
    const char *s = json_string_value(json_object_get(j, "sandbox"));
    int ok = s && db_name_valid(s);
    if (ok)
        (void)snprintf(out, cap, "%s", s);
    json_decref(j);
    return ok;
}

/* The owner's base URL (http[s]://HOST:PORT) when another live replica owns
 * the action's sandbox; 0 otherwise (the handler answers here). */
static int owner_url(struct api *a, const struct call *c, char *owner, size_t ocap, char *url,
                     size_t ucap)
{
    char sb[DB_NAME_MAX + 1], id[DB_REPLICA_ID_LEN + 8];
    if (!sandbox_of(c, sb, sizeof sb) || !relay_sandbox_owner(a->relay, sb, id, sizeof id) ||
        !strcmp(id, "none") || !strcmp(id, a->replica_id) || strlen(id) >= ocap)
        return 0;
    char address[DB_REPLICA_ADDR_MAX + 1];
    if (api_replica_address(a, id, API_HOP_OWNER_LATE_MS, address, sizeof address) != AL_OK)
        return 0;
    const char *rest = !strncmp(address, "ws://", 5)    ? address + 5
                       : !strncmp(address, "wss://", 6) ? address + 6
                                                        : NULL;
    if (!rest)
        return 0;
    size_t n = strcspn(rest, "/?#"); /* the address's host and port only */
    int m = snprintf(url, ucap, "%s://%.*s", address[2] == 's' ? "https" : "http", (int)n, rest);
    memcpy(owner, id, strlen(id) + 1);
    return m > 0 && (size_t)m < ucap;
}

/* ---- the routes' side ---------------------------------------------------------- */

int api_fwd_start(struct api *a, struct lws *wsi, struct call *c)
{
    char owner[DB_REPLICA_ID_LEN + 1], base[DB_REPLICA_ADDR_MAX + 8];
    if (c->via.forwarded || !owner_url(a, c, owner, sizeof owner, base, sizeof base))
        return AL_E_NOENT;
    if (!a->fwd_up && proxyup_new(a->loop, &a->fwd_up) != AL_OK)
        return AL_E_NOMEM;
    struct fwd *f = calloc(1, sizeof *f);
    struct signer_resp *t = malloc(sizeof *t);
    int rc = f && t ? AL_OK : AL_E_NOMEM;
    char why[SIGNER_REASON_MAX + 128] = "";
    if (rc == AL_OK) {
        struct signer_mint m = {SIGNER_SHAPE_FWD, owner, c->u.name, API_FWD_TOKEN_TTL_S};
        rc = signer_mint(a->signer, &m, t, why, sizeof why);
    }
    if (rc == AL_OK) {
        int n = snprintf(f->auth, sizeof f->auth, "Authorization: Bearer %s", t->token);
        int u = snprintf(f->url, sizeof f->url, "%s%s", base, c->uri);
        rc = n > 0 && (size_t)n < sizeof f->auth && u > 0 && (size_t)u < sizeof f->url
                 ? AL_OK
                 : AL_E_TOOBIG;
    }
    if (t) {
        OPENSSL_cleanse(t, sizeof *t);
        free(t);
    }
    if (rc == AL_OK && c->q->len) {
        f->body = malloc(c->q->len);
        if (f->body) {
            memcpy(f->body, c->q->body, c->q->len);
            f->len = c->q->len;
        } else {
            rc = AL_E_NOMEM;
        }
    }
    if (rc != AL_OK) {
        if (f)
            OPENSSL_cleanse(f->auth, sizeof f->auth);
        free(f ? f->body : NULL);
        free(f);
        api_log(a, 0, "forwarding %s to %s: %s %s", c->uri, owner, al_strerror(rc), why);
        return rc;
    }
    f->a = a;
    f->wsi = wsi;
    (void)snprintf(f->owner, sizeof f->owner, "%s", owner);
    const char *method = c->q->method == M_POST     ? "POST"
                         : c->q->method == M_DELETE ? "DELETE"
                                                    : "GET";
    const char *hdrs[] = {f->auth, "Content-Type: application/json", "Expect:", NULL};
    struct proxyup_spec s = {method,
                             f->url,
                             hdrs,
                             c->q->method == M_POST,
                             (int64_t)f->len,
                             getenv("SSL_CERT_FILE"), /* as the dials' store (wsctls.c) */
                             API_FWD_CONNECT_MS,
                             API_FWD_HEAD_S};
    rc = proxyup_start(a->fwd_up, &s, &callbacks, f, &f->call, why, sizeof why);
    OPENSSL_cleanse(f->auth, sizeof f->auth); /* in curl's header list now */
    if (rc != AL_OK) {
        api_log(a, 0, "forwarding %s to %s: %s", c->uri, owner, why);
        free(f->body);
        free(f);
        return rc;
    }
    uv_timer_init(a->loop, &f->timer);
    f->timer.data = f;
    uv_timer_start(&f->timer, on_timeout, API_FWD_TIMEOUT_MS, 0);
    c->q->fwd = f;
    wsl_deadline(a->wsl, wsi, 0); /* ours bounds it now */
    api_log(a, 1, "%s %s by %s forwarded to the sandbox's owner %s", method, c->uri, c->u.name,
            owner);
    return AL_OK;
}

/* Frees f once its timer is closed; the call, if any, is cancelled now. */
static void release(struct fwd *f)
{
    if (f->call)
        proxyup_cancel(f->call);
    f->call = NULL;
    uv_timer_stop(&f->timer);
    uv_close((uv_handle_t *)&f->timer, timer_closed);
}

int api_fwd_writeable(struct lws *wsi, struct http_req *q)
{
    struct fwd *f = q->fwd;
    if (!f || !f->done)
        return 0;
    q->fwd = NULL;
    int status = f->status;
    char *body = f->answer;
    size_t len = f->alen;
    f->answer = NULL;
    release(f);
    int rc = body ? api_reply(wsi, (unsigned)status, "application/json", body, len)
                  : api_reply_error(wsi, 502, "the sandbox's owner sent no answer");
    free(body);
    return rc;
}

void api_fwd_cancel(struct http_req *q)
{
    struct fwd *f = q->fwd;
    if (!f)
        return;
    q->fwd = NULL;
    f->abandoned = 1;
    release(f);
}
