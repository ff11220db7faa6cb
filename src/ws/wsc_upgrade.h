/*
 * wsc_upgrade: the client's side of a WebSocket upgrade (RFC 6455 §4.1),
 * as bytes: the request we send, and the server's answer checked as it
 * arrives. Pure: no socket, no clock (the caller bounds the time); only
 * getrandom for the key. wsc.c uses it; the fuzz target fuzz_wscu.c feeds
 * it any answer.
 *
 * The answer must be "HTTP/1.1 101" with Upgrade: websocket, Connection
 * naming upgrade, the Sec-WebSocket-Accept our key calls for (SHA-1,
 * base64) and Sec-WebSocket-Protocol equal to the one we asked for, each
 * of the last two exactly once, and no Sec-WebSocket-Extensions (we ask
 * for none). Any other status fails the upgrade with
 * that status. The status line and headers may take WSCU_HEADER_MAX bytes
 * at most; a value we check WSCU_VALUE_MAX. http-parser (Debian
 * libhttp-parser-dev) reads the HTTP; it is a parser, not a client.
 *
 * Data model: struct wscu (opaque, wscu_new/wscu_free; http_parser.h and
 * libwebsockets.h cannot share a file) holds the parser, the Accept our
 * key calls for, which headers were seen and the values we check, the
 * bytes of the answer so far, and the outcome (status, a reason).
 */
#ifndef AL_WSC_UPGRADE_H
#define AL_WSC_UPGRADE_H

#include <stddef.h>
#include <stdint.h>

#define WSCU_KEY_LEN 24      /* base64 of 16 random bytes */
#define WSCU_ACCEPT_LEN 28   /* base64 of a SHA-1 */
#define WSCU_HEADER_MAX 8192 /* bytes of the answer's status line and headers */
#define WSCU_VALUE_MAX 256   /* bytes of one header value we check */
#define WSCU_FIELD_MAX 32    /* bytes of a header name we look at */
#define WSCU_WHY_MAX 160     /* bytes of a failure's reason */
#define WSCU_SUBPROTO_MAX 64 /* bytes of the subprotocol asked for */

struct wscu_request {
    const char *host; /* the Host header: an address or name, and the port */
    int port;
    const char *path;        /* "/..." with its query */
    const char *subprotocol; /* Sec-WebSocket-Protocol asked for */
    const char *extra;       /* more header lines, each "Name: value\r\n", or NULL */
    const char *mark;        /* a header (lower case) whose presence in the answer
                              * is reported (wscu_marked), or NULL */
};

enum wscu_state {
    WSCU_MORE = 0,     /* the answer is not complete yet */
    WSCU_UPGRADED = 1, /* 101 and every check passed: WebSocket from *used on */
    WSCU_FAILED = -1,  /* see status (0: no HTTP status came) and why */
};

struct wscu; /* opaque: wscu_new, wscu_free */

/* The upgrade request into buf (at most cap bytes, not NUL-terminated):
 * its length in *len; key gets the Sec-WebSocket-Key sent (16 bytes from
 * getrandom, base64). 0, or AL_E_TOOBIG (buf too small), AL_E_INVAL (a
 * field with CR or LF), AL_E_IO (getrandom failed). */
int wscu_request(const struct wscu_request *r, char *buf, size_t cap, size_t *len,
                 char key[WSCU_KEY_LEN + 1]);
/* Ready to read the answer to a request sent with key and subprotocol;
 * NULL when out of memory or a key or subprotocol that does not fit. */
struct wscu *wscu_new(const char *key, const char *subprotocol, const char *mark);
void wscu_free(struct wscu *u);
/* The answer's next bytes. *used: how many were the answer's (with
 * WSCU_UPGRADED the rest are WebSocket frames). Once UPGRADED or FAILED,
 * the state stays. */
enum wscu_state wscu_feed(struct wscu *u, const uint8_t *in, size_t len, size_t *used);
/* The answer's HTTP status (0 before its status line) and, once
 * WSCU_FAILED, why (a static-lifetime string inside u). */
unsigned wscu_status(const struct wscu *u);
const char *wscu_why(const struct wscu *u);
/* Whether the answer so far carried the header named mark at wscu_new. */
int wscu_marked(const struct wscu *u);
/* The Accept a key calls for, into out (WSCU_ACCEPT_LEN + 1 bytes). 0 or
 * AL_E_CRYPTO. */
int wscu_accept_of(const char *key, char out[WSCU_ACCEPT_LEN + 1]);

#endif
