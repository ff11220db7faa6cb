/*
 * fwd: the credential proxy's forwarder inside an agent's jail with no
 * network (docs/proxy.md, "Agents with no network"). Agent side only: it
 * runs in the agent's own network namespace, where the runner's loopback
 * listener is not, and carries each TCP connection an agent makes to
 * 127.0.0.1:PORT to the runner's proxy socket (a unix socket bound into
 * the jail), bytes both ways, one unix connection per TCP connection. It
 * parses nothing: what it copies is the runner's business, and the
 * runner's the proxy channel's (docs/protocol.md §5a).
 *
 * A half close is passed on as a half close (the agent's EOF shuts the
 * unix connection's sending side, and the runner's the agent's), so an
 * answer's end is never lost to a reset. A connection whose answer side
 * has ended is closed for good FWD_CLOSE_MS later if the agent has not
 * closed it by then (the runner closes its side within 5 s of an answer's
 * end); one whose unix side cannot be connected is closed at once.
 *
 * Data model: a struct fwd owns its listening handle, a periodic timer and
 * its connections (a doubly linked list); each connection owns its two
 * stream handles and one buffer of FWD_BUF bytes per direction. A
 * direction reads into its buffer only while the buffer is not being
 * written to the other side (one write in flight per direction): memory is
 * bounded by FWD_MAX_CONNS * 2 * FWD_BUF, and a slow reader slows its
 * writer. Times are loop milliseconds.
 */
#ifndef AL_FWD_H
#define AL_FWD_H

#include <stddef.h>
#include <uv.h>

#define FWD_MAX_CONNS 512    /* at once (the runner's own bound); one more is closed at once */
#define FWD_BUF 32768        /* bytes in flight per direction of a connection */
#define FWD_CLOSE_MS 10000   /* after the answer side's EOF, the agent's side at most */
#define FWD_TICK_MS 1000     /* the timer checking FWD_CLOSE_MS */
#define FWD_BACKLOG 128      /* the listening socket's */
#define FWD_PATH_MAX 108     /* sun_path */
#define FWD_HOST "127.0.0.1" /* what it listens on: the jail's loopback */

struct fwd;

struct fwd_config {
    int listen_fd;      /* a listening TCP socket (fwd_listen); fwd_new takes it */
    const char *socket; /* the runner's proxy socket, as the jail sees it */
};

/* A TCP socket listening on FWD_HOST:port (SO_REUSEADDR, close-on-exec).
 * 0 with *fd, or AL_E_* with err. */
int fwd_listen(int port, int *fd, char *err, size_t cap);

/* Start accepting on cfg->listen_fd (owned from here on, even on failure).
 * 0 with *out, or AL_E_* with err. */
int fwd_new(uv_loop_t *loop, const struct fwd_config *cfg, struct fwd **out, char *err, size_t cap);
/* Close every handle; the memory goes once the loop has run the close
 * callbacks. */
void fwd_free(struct fwd *f);
/* Connections open now. */
unsigned fwd_conns(const struct fwd *f);

#endif
