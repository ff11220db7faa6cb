/*
 * cli_net: the CLI's side of the network, over libwebsockets 4.1 on a libuv
 * loop the caller owns. Two things: one HTTP request run to completion
 * (cli_http), and WebSocket connections handing whole binary messages to a
 * handler (cli_ws_*). No HTTP parsing of our own: lws does it.
 *
 * Data model: struct cli_net owns the lws context and the server's address
 * (copied from struct cli_config). struct cli_ws is one WebSocket attempt,
 * owned by cli_net from cli_ws_open() until its on_closed callback, after
 * which it is freed; the handler must drop its pointer then.
 */
#ifndef CLI_NET_H
#define CLI_NET_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "cli_config.h"

enum {
    CLI_HTTP_MAX_BODY = 16 << 20,       /* a JSON answer */
    CLI_HTTP_MAX_RECORDING = 256 << 20, /* a downloaded recording */
    CLI_HTTP_TIMEOUT_S = 30,            /* a whole HTTP exchange */
    CLI_NET_WHY_MAX = 256,
    CLI_NET_PEER_MAX = 64,
    CLI_NET_SERVER_MAX = 128,
};

struct cli_net;

/* 0 or AL_E_*; why says what failed. */
int cli_net_new(uv_loop_t *loop, const struct cli_config *cfg, struct cli_net **out, char *why,
                size_t cap);
/* Destroys the lws context; the caller then runs its loop to let handles close. */
void cli_net_free(struct cli_net *n);

struct cli_http_result {
    unsigned status; /* HTTP status; 0 when no answer came (see neterr) */
    int neterr;      /* 1: the server could not be reached or the exchange broke */
    char *body;      /* NUL-terminated (malloc), may be NULL when empty */
    size_t len;
    char why[CLI_NET_WHY_MAX];       /* for neterr */
    char peer[CLI_NET_PEER_MAX];     /* the address that answered, or "" */
    char server[CLI_NET_SERVER_MAX]; /* its Server header, or "" */
};

/*
 * One request (method "GET", "POST", "DELETE"; body JSON or NULL), run on
 * the loop until the answer is in (one connection each: its time includes
 * connecting, and TLS for https). Returns AL_OK when an answer of any
 * status came (res->status), AL_E_IO when the network failed (res->neterr,
 * res->why), AL_E_TOOBIG when the body exceeded max_body, AL_E_NOMEM.
 * Free res->body with free().
 */
int cli_http(struct cli_net *n, const char *method, const char *path, const char *body,
             size_t max_body, struct cli_http_result *res);

/* A hint to add to a failure's reason: for an https server whose
 * certificate could not be verified (lws says "SSL" or "cert"), that
 * --insecure accepts a self-signed one; "" otherwise. */
const char *cli_net_hint(const struct cli_net *n, const char *why);

/* ---- WebSocket ----------------------------------------------------------- */

struct cli_ws;

struct cli_ws_handler {
    void *ud;
    void (*on_open)(void *ud, struct cli_ws *ws);
    /* One whole binary message (one airlock.v1 frame). */
    void (*on_message)(void *ud, struct cli_ws *ws, const uint8_t *msg, size_t len);
    /* The socket may take a message: call cli_ws_send until it says stop. */
    void (*on_writable)(void *ud, struct cli_ws *ws);
    /* The attempt failed or the connection ended; ws is freed after this.
     * status: the HTTP status of a refused upgrade, 0 otherwise; opened: it
     * had been established. */
    void (*on_closed)(void *ud, struct cli_ws *ws, int opened, unsigned status, const char *why);
    /* A message was refused (text, over AL_MAX_FRAME): fail the endpoint
     * with ERROR code (ep_fail) so that the ERROR precedes the close. NULL:
     * the connection closes at once with that code's close. */
    void (*on_refused)(void *ud, struct cli_ws *ws, uint16_t code, const char *why);
    /* The upgrade request is about to be sent (TCP, and TLS, are done):
     * for a probe's timings. May be NULL. */
    void (*on_request)(void *ud, struct cli_ws *ws);
};

/* Start a connection to path (with query). 0 or AL_E_*. */
int cli_ws_open(struct cli_net *n, const char *path, const struct cli_ws_handler *h,
                struct cli_ws **out);
/* The key the next cli_ws_open presents (NULL or "": none); each
 * connection keeps the one it was opened with. */
void cli_net_set_key(struct cli_net *n, const char *key);
/* The subprotocol the server chose, once open: "" when it named none. */
int cli_ws_subprotocol(const struct cli_ws *ws, char *buf, size_t cap);
/* Ask for an on_writable callback. */
void cli_ws_want_write(struct cli_ws *ws);
/*
 * Send one binary message from inside on_writable; buf has LWS_PRE bytes
 * of room before msg (use cli_ws_pre()). 1: more may be sent now, 0: wait
 * for the next on_writable, AL_E_IO: the connection failed.
 */
int cli_ws_send(struct cli_ws *ws, uint8_t *msg, size_t len);
size_t cli_ws_pre(void);
/* Close with a code and reason (sent at the next writable moment). */
void cli_ws_close(struct cli_ws *ws, int code, const char *reason);
/* Drop the connection at once (no close frame); on_closed follows. */
void cli_ws_drop(struct cli_ws *ws);
/* Drop it and never call the handler again (its owner is going away). */
void cli_ws_abandon(struct cli_ws *ws);

#endif
