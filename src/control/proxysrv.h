/*
 * proxysrv: the credential proxy's direct path, an HTTP listener of its
 * own on airlockd's libuv loop (`--proxy-listen ADDR:PORT`): each accepted
 * TCP connection is one proxyconn of the proxy (proxy_conn), its bytes
 * read into proxyconn_input and the proxyconn's answer written out as it
 * comes. Control plane only (al_control).
 *
 * Why a listener of its own and not a route of the API's server: the API
 * runs on libwebsockets, which parses and buffers HTTP itself (whole
 * headers, bodies through its own callbacks, its own keep-alive and
 * timeouts); the proxy must see the agent's bytes as they are (its own
 * strict parser, proxyreq.c, refuses smuggling and absolute forms) and
 * stream both ways with flow control: a request body up to 32 MiB into
 * libcurl as the upstream takes it, an SSE answer out as the upstream
 * sends it, paused while the agent is slow to read, for as long as the
 * stream lasts.
 *
 * Limits (named below, docs/proxy.md): PROXYSRV_MAX_CONNS connections at
 * once (one more is answered 503 and closed); a connection with no
 * request in flight must send a whole request head within
 * PROXYSRV_HEAD_TIMEOUT_MS of its accept or of its last answer (an answer
 * in flight is never cut for silence); a closing connection is dropped
 * after PROXYSRV_CLOSE_TIMEOUT_MS if its agent does not read the end;
 * once its answer is out, what its agent still sends (the rest of an
 * upload refused with 413, say) is read and dropped, up to
 * PROXYSRV_DRAIN_MAX bytes and within that same deadline, until the agent
 * closes its side: closing a socket with unread bytes resets it, and an
 * agent still sending would see the reset instead of the answer;
 * bytes go to the agent's socket as they come, and as soon as its socket
 * does not take them all the upstream is paused until the rest is written
 * (so about one upstream chunk at most waits per connection);
 * reading stops while proxyconn holds the bytes already read.
 *
 * Data model: a proxysrv owns its listening handle, a periodic timer and
 * a list of connections; each connection owns its uv_tcp_t, its proxyconn
 * and its read buffer; each pending write owns a copy of its bytes.
 * proxysrv_free closes everything (the proxyconns at once, so that it may
 * be followed by proxy_free); the memory goes once the loop has run the
 * close callbacks.
 */
#ifndef AL_PROXYSRV_H
#define AL_PROXYSRV_H

#include "proxy.h"

#include <stddef.h>
#include <uv.h>

enum {
    PROXYSRV_MAX_CONNS = 256,
    PROXYSRV_HEAD_TIMEOUT_MS = 30000,
    PROXYSRV_CLOSE_TIMEOUT_MS = 5000,
    PROXYSRV_TICK_MS = 500,
    PROXYSRV_READ_MAX = 64 * 1024,
    PROXYSRV_DRAIN_MAX = 4 * 1024 * 1024, /* bytes read and dropped after a final answer */
    PROXYSRV_ADDR_MAX = 64,               /* "ADDR:PORT" as given */
    PROXYSRV_BASE_MAX = 128,              /* "http://ADDR:PORT/v1/proxy" */
};

struct proxysrv;

/* Listen on addr ("127.0.0.1:8090", "[::1]:8090"; port 0 picks a free
 * one) and serve p. AL_E_INVAL for a bad address, AL_E_IO when it cannot
 * bind (why says so). */
int proxysrv_new(uv_loop_t *loop, struct proxy *p, const char *addr, struct proxysrv **out,
                 char *why, size_t cap);
void proxysrv_free(struct proxysrv *s);

/* The port bound. */
int proxysrv_port(const struct proxysrv *s);
/* The proxy's root as agents on this host reach it: "http://ADDR:PORT/v1/proxy"
 * (a wildcard address becomes the loopback one). */
void proxysrv_base(const struct proxysrv *s, char *out, size_t cap);
/* Connections open now. */
unsigned proxysrv_conns(const struct proxysrv *s);

/* For tests: a shorter PROXYSRV_HEAD_TIMEOUT_MS. */
void proxysrv_set_head_timeout(struct proxysrv *s, unsigned ms);

/* For tests: "ADDR:PORT" into a socket address. AL_E_INVAL if it is not
 * an IPv4 address or a bracketed IPv6 one, a colon and a port 0..65535. */
int proxysrv_parse_addr(const char *addr, struct sockaddr_storage *ss);

#endif
