/*
 * api_local: what the files of `airlockd serve`'s network side share
 * (api.c lists them and what each holds), and nothing else includes: the
 * context, a connection, a request, what a route handler is given, and
 * each file's functions, under its name.
 *
 * Data model: struct api is the lws context's user data, one per server:
 * the configuration, the database, the signer, the relay, the loop and the
 * listening socket (api.c owns them). struct http_req is lws's
 * per-session data of an HTTP request (api_http.c). struct conn is a
 * WebSocket connection's lws "opaque user data" (api_ws.c); one a web
 * session opened is also in api->watch (api_wsess.c). struct call is
 * what one request's handler is given (api_route.c fills it).
 */
#ifndef AL_API_LOCAL_H
#define AL_API_LOCAL_H

#include <jansson.h>
#include <libwebsockets.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "al_limits.h"
#include "al_log.h"
#include "api.h"
#include "db.h"
#include "proxystore.h"
#include "websess.h"
#include "wsg.h"

#define API_MAX_URI 512
#define API_MAX_AUTH 512        /* an API key or token header is far shorter */
#define API_MAX_BODY (1u << 20) /* a JSON answer */
#define API_MAX_REQ (64u << 10) /* a JSON request body (APIREQ_MAX_BODY) */
#define API_LIST_MAX 1000       /* rows in one list answer */
#define API_MS_PER_S 1000
#define API_MAX_COOKIE 4096
#define API_MAX_HEADER 256 /* Origin, Host, Content-Type, Sec-Fetch-Site */
#define API_MAX_FILE_NAME 128

enum method { M_GET, M_POST, M_DELETE, M_OTHER, M_ANY, M_UPGRADE };
/* CONN_HOP_IN: a client relayed to its terminal's owner (api_hop.c);
 * CONN_HOP_OUT: our dial of the owner for it. */
enum conn_kind { CONN_CLIENT = 1, CONN_RUNNER, CONN_DIAL, CONN_HOP_IN, CONN_HOP_OUT };

/* Messages waiting to go out on a relayed client's hop (api_hop.c). */
struct hopmsg;
struct hopq {
    struct hopmsg *head, *tail;
    size_t bytes;
};

struct rl_sbx;
struct wsc;
struct wsctls;
struct wsc_events;
struct rl_dial;
struct rl_client;
struct sesswatch;
struct proxy;
struct proxysrv;
struct proxyup;
struct fwd;

struct api {
    struct api_config cfg;
    char data_dir[PATH_MAX];
    char runner_bin[PATH_MAX];
    char self_url[300];
    char web_dir[PATH_MAX];
    char rec_dir[PATH_MAX]; /* recordings: --recordings, else DATA/recordings */
    int tls;
    struct db_session_policy sess; /* web sessions' lifetimes, in ms */
    struct db *db;
    struct signer *signer; /* mints our tokens: the key is in its process only */
    struct relay *relay;
    struct lsbx *lsbx; /* local sandboxes' runners */
    struct lws_context *ctx;
    SSL_CTX *dial_tls; /* wss:// dials' TLS context (wsctls.h), made at the first */
    uv_loop_t *loop;
    uv_signal_t sigterm, sigint;
    uv_timer_t tick;
    /* this replica (api_replica.c): its id, its address, its heartbeat */
    char replica_id[DB_REPLICA_ID_LEN + 1];
    char advertise[DB_REPLICA_ADDR_MAX + 1];
    uv_timer_t beat;
    int beat_on, beat_failing;
    /* an accepted upgrade, handed from CONFIRM_UPGRADE to ESTABLISHED */
    struct lws *pending_wsi;
    struct conn *pending;
    struct wsl *wsl;  /* the listening socket, the connection limits */
    struct aagg *agg; /* refusals not yet written to the audit log */
    uint64_t next_flush_ms, next_prune_ms;
    struct auditq *auditq;   /* rows queued, written in one transaction per flush */
    uv_timer_t auditq_timer; /* ... when auditq_due_in says (api_audit_later) */
    int auditq_timer_on;     /* the timer may be started: between run's init and close */
    struct al_lograte log_refused;
    struct sesswatch *watch;    /* WebSockets opened by web sessions (api_wsess.c) */
    struct sesswatch *keywatch; /* ... and by API keys, by the key's handle */
    struct al_lograte log_wsess;
    struct proxy *proxy;       /* the credential proxy; NULL: no upstreams (api_proxy.c) */
    struct proxystore pstore;  /* its store: the database, and the relay for liveness */
    struct proxysrv *proxysrv; /* its direct path; NULL: not served */
    char proxy_base[128];      /* "http://ADDR:PORT/v1/proxy" (PROXYSRV_BASE_MAX) */
    /* WebSockets whose writable callback is due, asked for from wake_idle
     * (api_ws.c: api_ws_wake) */
    uv_idle_t wake_idle;
    int wake_idle_on; /* wake_idle: 0 not initialised, 1 initialised, -1 closed */
    struct conn *wake_list;
    struct conn *hops;      /* relayed clients (CONN_HOP_IN), checked at each beat */
    struct proxyup *fwd_up; /* actions forwarded to owners (api_fwd.c), made at the first */
};

struct conn {
    enum conn_kind kind;
    struct rl_sbx *sb;
    struct rl_client *cl;
    char token[AL_MAX_TOKEN + 1];       /* dial: the bearer we present */
    char *platform_token;               /* dial of an aca sandbox: the front's (owned) */
    char platform[DB_PLATFORM_MAX + 1]; /* ... and its platform's name */
    struct wsg ws;                      /* the message being reassembled, the close */
    int watched; /* 0, or API_WATCH_SESSION (in api->watch), API_WATCH_KEY (api->keywatch) */
    struct lws *wake_wsi; /* in api->wake_list: its writable callback is due */
    int broken;           /* a frame written at a wake failed: the WRITEABLE drops it */
    struct conn *wake_prev, *wake_next;
    /* a dial (api_wsc.c): the link wsc.c frames on an lws RAW socket, and
     * for wss:// the TLS under it (wsctls.c) */
    struct wsc *wsc;
    struct wsctls *tls;
    struct api *api;
    struct lws *dial_wsi;
    uint64_t dialed_ms; /* when the socket connected (uv_now) */
    int dial_done;      /* the dial's outcome went to the relay */
    /* a relayed client (api_hop.c): the other side, the messages for this
     * side's wire, whether this side is not read, the close to send, the
     * sandbox and owner it was relayed to */
    int hop_paused;
    struct conn *hop;
    struct conn *hops_prev, *hops_next; /* in api->hops (the client's side) */
    struct lws *self_wsi;
    struct hopq q;
    int hop_code;
    char hop_why[124];
    char hop_sandbox[DB_NAME_MAX + 1], hop_owner[DB_REPLICA_ID_LEN + 1];
};

struct http_req {
    enum method method;
    char uri[API_MAX_URI];
    char *body;
    size_t len;
    int too_big;
    /* refused before its body was read (401, 404, 413): the body is
     * dropped as it comes, and this is the answer at its end */
    unsigned refused;
    struct fwd *fwd; /* forwarded to the sandbox's owner, not answered yet (api_fwd.c) */
};

/* How api_auth_who() found the user: by cookie, the session's secret and expiry. */
struct who_via {
    int cookie;
    char sid[WEBSESS_VALUE_MAX];
    int64_t expires_at; /* Unix ms */
    /* an upgrade with an API key: the key's handle (db_user_key_handle),
     * never the key; "" otherwise */
    char key_handle[DB_KEY_HANDLE_LEN + 1];
    /* the bearer was another replica's forwarding token (api_fwd.c): the
     * request is never forwarded again */
    int forwarded;
};

/* What a handler is given: the request, who asks, what its path held. */
struct call {
    struct http_req *q; /* NULL on an upgrade */
    const char *uri;
    struct db_user u; /* zero on an open route */
    struct who_via via;
    char id[DB_NAME_MAX + 1];         /* the path's {id} */
    char file[API_MAX_FILE_NAME + 1]; /* the path's {file} */
    struct db_terminal *term;         /* ROUTE_TERMINAL: the row of {id} */
    struct conn *conn;                /* an upgrade: the connection it makes */
};

/* A list being answered: the rows so far (at most API_LIST_MAX). */
struct api_list {
    struct api *a;
    json_t *arr;
    size_t n;
};

/* The request's body, "" when it has none. */
static inline const char *api_body_of(const struct call *c)
{
    return c->q->body ? c->q->body : "";
}

/* api.c */
__attribute__((format(printf, 3, 4))) void api_log(const struct api *a, int level, const char *fmt,
                                                   ...);
int64_t api_now_ms(void); /* wall clock, Unix ms */

/* api_http.c: lws's HTTP callbacks of a request; a request header into buf,
 * NULL when absent or too long (api_http_hdr_custom: "name:" in lower case). */
int api_http_request(struct api *a, struct lws *wsi, struct http_req *q);
int api_http_body(struct http_req *q, const void *in, size_t len);
int api_http_done(struct api *a, struct lws *wsi, struct http_req *q);
const char *api_http_hdr(struct lws *wsi, enum lws_token_indexes t, char *buf, size_t cap);
const char *api_http_hdr_custom(struct lws *wsi, const char *name, char *buf, size_t cap);

/* api_route.c: the dispatches (0, or -1 to drop the connection) */
int api_route_http(struct api *a, struct lws *wsi, struct http_req *q);
int api_route_upgrade(struct api *a, struct lws *wsi);
unsigned api_route_body_verdict(struct api *a, struct lws *wsi, const struct http_req *q, long len);

/* api_auth.c */
void api_auth_peer(struct lws *wsi, char *peer, size_t cap);
const char *api_auth_bearer(struct lws *wsi, char *buf, size_t cap);
int api_auth_origin_ok(const struct api *a, struct lws *wsi, int *present);
/* upgrade: 1 for an upgrade; fwd_ok: whether the route takes another
 * replica's forwarding token (a ROUTE_OWNER route): API_FWD_TAKE, or
 * API_FWD_PEEK to check one without using it up (before the body) */
enum { API_FWD_NO = 0, API_FWD_TAKE = 1, API_FWD_PEEK = 2 };
int api_auth_who(struct api *a, struct lws *wsi, const char *uri, int upgrade, int fwd_ok,
                 struct db_user *u, const char **why, struct who_via *via);

/* api_reply.c: each answer's return is lws's (0, or -1 to drop) */
int api_reply(struct lws *wsi, unsigned status, const char *type, const char *body, size_t len);
int api_reply_json_cookie(struct lws *wsi, unsigned status, json_t *v, const char *cookie);
int api_reply_json(struct lws *wsi, unsigned status, json_t *v);
int api_reply_error(struct lws *wsi, unsigned status, const char *msg);
unsigned api_reply_status(int rc);
int api_reply_list(struct api *a, struct lws *wsi, const struct call *c, struct api_list *l,
                   int rc);

/* api_view.c */
json_t *api_view_sandbox(const struct api *a, const struct db_sandbox *s);
json_t *api_view_terminal(struct api *a, const struct db_terminal *t);
int api_view_add_sandbox(void *ctx, const struct db_sandbox *s);
int api_view_add_terminal(void *ctx, const struct db_terminal *t);
int api_view_add_audit(void *ctx, const struct db_audit *e);

/* api_audit.c */
void api_audit(struct api *a, const char *actor, const char *action, const char *target,
               const char *detail);
void api_audit_refused(struct api *a, const char *peer, const char *action, const char *why,
                       const char *target);
/* The same for a callback's void * (proxystore_refused_fn). */
void api_audit_refused_of(void *api, const char *peer, const char *action, const char *why,
                          const char *target);
/* A row written within AUDITQ_FLUSH_MS, in a batch (auditq.h): the
 * proxy's calls (proxystore_audit_fn). */
void api_audit_later(void *api, const char *actor, const char *action, const char *target,
                     const char *detail);
/* Write the queued rows now (one transaction); a failure is logged with
 * the count of rows lost. */
void api_audit_flush_queue(struct api *a);
/* force: the refusals counted and the rows queued are written now (at
 * start and at stop), with retention; else each when due (the tick). */
void api_audit_housekeeping(struct api *a, int force);

/* api_ws.c */
void api_ws_wake(void *conn);
/* Close the handle api_ws_wake may have started (once the loop has ended). */
void api_ws_wake_close(struct api *a);
struct conn *api_ws_conn(struct lws *wsi);
void api_ws_free(struct lws *wsi, struct conn *c);
int api_ws_receive(struct api *a, struct lws *wsi, struct conn *c, const void *in, size_t len);
int api_ws_writeable(struct api *a, struct lws *wsi, struct conn *c);
void api_ws_closed(struct api *a, struct lws *wsi, struct conn *c);

/* api_wsess.c: the WebSockets of web sessions end with their session, and
 * those of API keys with their key */
enum { API_WATCH_SESSION = 1, API_WATCH_KEY = 2 };
int api_wsess_start(struct api *a);
void api_wsess_stop(struct api *a);
int api_wsess_watch(struct api *a, struct lws *wsi, struct conn *c, const struct who_via *via);
void api_wsess_forget(struct api *a, struct lws *wsi, struct conn *c);
void api_wsess_signed_out(struct api *a, const char *sid);
void api_wsess_expired(struct api *a, const char *sid);
void api_wsess_tick(struct api *a);

/* api_replica.c's heartbeat (docs/scale-out.md) */
enum {
    API_REPLICA_BEAT_MS = 2000,           /* a heartbeat this often */
    API_REPLICA_STALE_BEATS = 3,          /* gone after this many intervals without one */
    API_REPLICA_KEEP_MS = 60 * 60 * 1000, /* a gone replica's row is deleted after this */
    API_REPLICA_STALE_MS = API_REPLICA_BEAT_MS * API_REPLICA_STALE_BEATS,
    /* an owner whose beat is this late is taken for gone by the replicas
     * that relay to it (api_hop.c, api_fwd.c): sooner than a lease's
     * expiry, so that a client is back before the new owner's log has
     * moved on far */
    API_HOP_OWNER_LATE_MS = API_REPLICA_BEAT_MS * 3 / 2,
};

/* api_replica.c: this replica registered (after listening: its address
 * may name the kernel's port) with its heartbeat started, and stopped
 * (marked so in the database) when the loop ends; GET /v1/replicas */
int api_replica_start(struct api *a, char *err, size_t cap);
void api_replica_stop(struct api *a);
int api_replica_list(struct api *a, struct lws *wsi, struct call *c);
/* Replica id's address into addr (cap) when it is alive, its beat at most
 * late_ms old: AL_OK; AL_E_NOENT when it is not (or not listed); a
 * database error otherwise. */
int api_replica_address(struct api *a, const char *id, int64_t late_ms, char *addr, size_t cap);

/* api_proxy.c: the credential proxy started (after the database, before
 * the relay) and stopped; a terminal's view of its upstreams */
int api_proxy_start(struct api *a, char *err, size_t cap);
void api_proxy_stop(struct api *a);
void api_proxy_view(struct api *a, json_t *o, const char *term_id);
/* api_runner.c */
void api_runner_up(struct api *a, struct conn *c, struct lws *wsi);
int api_runner_dial(void *ud, struct rl_sbx *sb, const struct rl_dial *d, char *why, size_t cap);
/* Wipe and free what a conn holds of tokens (before it is freed, and once
 * a dial's headers are written). */
void api_conn_wipe(struct conn *c);
void api_runner_dial_failed(struct lws *wsi, const void *in);
/* A dial refused (status 0: no HTTP status came; marked: the answer
 * carried AL_RUNNER_REPLY_HEADER, so the refusal is the runner's): the
 * relay told why, in words for the operator. */
void api_runner_refused(struct conn *c, unsigned status, int marked, const char *lws_why);

/* api_wsc.c: a dial's link (wsc.c) on an lws RAW socket; its
 * events, for the wsc_new of api_runner_dial */
const struct wsc_events *api_wsc_events(void);

/* api_hop.c: a client attached at a replica that does not own its
 * terminal, relayed to the owner. api_hop_attach: AL_OK when the dial is
 * under way (the client's conn is CONN_HOP_IN), AL_E_NOENT when the
 * terminal has no other live owner reached over ws://. */
int api_hop_attach(struct api *a, struct lws *wsi, struct call *c, int read_only);
int api_hop_in_message(struct conn *c, const uint8_t *msg, size_t len);
long api_hop_in_pull(struct conn *c, uint8_t *buf, size_t cap);
int api_hop_in_closing(struct conn *c, int *code, const char **why);
void api_hop_in_closed(struct conn *c);
int api_hop_out_writeable(struct api *a, struct lws *wsi, struct conn *d);
void api_hop_out_closed(struct conn *d);
void api_hop_queue_free(struct hopq *q);
/* At each heartbeat: a relayed client whose terminal's owner changed, or
 * is no longer alive, is cut (1000): it attaches again, wherever the
 * terminal is served now. */
void api_hop_check(struct api *a);

/* api_fwd.c: a ROUTE_OWNER action at a replica that does not own its
 * sandbox, forwarded to the owner. api_fwd_start: AL_OK when the call is
 * under way (answered at a later HTTP_WRITEABLE: api_fwd_writeable),
 * AL_E_NOENT when this replica answers itself (it owns the sandbox, no
 * live owner is known, or the request was forwarded to it), another
 * error when the forward could not start. api_fwd_cancel: the
 * connection is gone. */
int api_fwd_start(struct api *a, struct lws *wsi, struct call *c);
int api_fwd_writeable(struct lws *wsi, struct http_req *q);
void api_fwd_cancel(struct http_req *q);
void api_wsc_connected(struct api *a, struct lws *wsi, struct conn *c);
int api_wsc_receive(struct conn *c, const void *in, size_t len);
int api_wsc_writeable(struct api *a, struct lws *wsi, struct conn *c);
/* What a dial's link sends (wsg_pull_fn): the relay's frames for its runner. */
long api_wsc_pull(void *conn, struct lws *wsi, uint8_t *buf, size_t cap);
/* Close the link with code and why (a newer link replaced it). */
void api_wsc_close(struct conn *c, int code, const char *why);
/* RAW_CLOSE: a dial that never came up is reported failed; the conn freed. */
void api_wsc_closed(struct api *a, struct lws *wsi, struct conn *c);

/* The routes' handlers (api_route.c's table), by resource: answer the
 * request and return lws's 0 or -1. An upgrade's (api_terminal_attach,
 * api_runner_connect) returns 0 with c->conn set up, or -1 answered. */
int api_metrics_healthz(struct api *a, struct lws *wsi, struct call *c);
int api_metrics_get(struct api *a, struct lws *wsi, struct call *c);
int api_static_index(struct api *a, struct lws *wsi, struct call *c);
int api_static_app(struct api *a, struct lws *wsi, struct call *c);
int api_static_vendor(struct api *a, struct lws *wsi, struct call *c);
int api_session_login(struct api *a, struct lws *wsi, struct call *c);
int api_session_get(struct api *a, struct lws *wsi, struct call *c);
int api_session_logout(struct api *a, struct lws *wsi, struct call *c);
int api_sandbox_list(struct api *a, struct lws *wsi, struct call *c);
int api_sandbox_add(struct api *a, struct lws *wsi, struct call *c);
int api_sandbox_remove(struct api *a, struct lws *wsi, struct call *c);
int api_sandbox_enroll(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_list(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_create(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_get(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_kill(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_close(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_recording(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_attach(struct api *a, struct lws *wsi, struct call *c);
int api_terminal_proxy_revoke(struct api *a, struct lws *wsi, struct call *c);
int api_proxy_upstreams(struct api *a, struct lws *wsi, struct call *c);
int api_audit_list(struct api *a, struct lws *wsi, struct call *c);
int api_runner_connect(struct api *a, struct lws *wsi, struct call *c);

#endif
