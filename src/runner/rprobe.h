/*
 * rprobe: one probe session of the runner (docs/protocol.md §13), as a
 * pure state machine: whole messages in, frames out, no I/O. The glue
 * (runner_conn.c) feeds it a connection opened with a runner:probe token
 * and writes what it pulls out.
 *
 * It answers HELLO with its own (sent first), PING with PONG, and PROBE:
 * HEADERS with the headers of the upgrade (taken redacted at the upgrade,
 * rprobe_redact), ECHO with the same bytes, SINK with nothing, SOURCE with
 * that many bytes of zeros in PROBE_REPLY SOURCE frames, after its other
 * replies. Anything else is a protocol error: ERROR PROTOCOL, then close
 * 4000. Past the token's deadline: ERROR TOKEN_EXPIRED, close 4002.
 *
 * Data model: a struct rprobe owns a copy of the headers and a queue of
 * the replies not yet pulled (each an encoded frame), bounded by
 * RPROBE_QUEUE_MAX bytes: past it the glue stops reading
 * (rprobe_wants_input) until the queue drains.
 */
#ifndef AL_RPROBE_H
#define AL_RPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "al_limits.h"

enum {
    RPROBE_QUEUE_MAX = 1 << 20, /* bytes of replies waiting to be sent */
};

struct rprobe_header {
    char name[AL_PROBE_MAX_HEADER_NAME + 1];   /* lower case */
    char value[AL_PROBE_MAX_HEADER_VALUE + 1]; /* redacted (rprobe_redact) */
};

struct rprobe;

/* A session for a connection whose token lasts until deadline_us
 * (monotonic µs; 0: no deadline). n ≤ AL_PROBE_MAX_HEADERS. */
int rprobe_new(const struct rprobe_header *h, size_t n, const char *name, uint64_t deadline_us,
               struct rprobe **out);
void rprobe_free(struct rprobe *p);

/* One whole message from the client. AL_OK, or the error that ends the
 * session (its ERROR is queued; rprobe_closing says the close). */
int rprobe_input(struct rprobe *p, const uint8_t *msg, size_t len);

/* The next frame to send, at most cap (≥ AL_MAX_FRAME) bytes: its length,
 * 0 when nothing is due now. */
long rprobe_output(struct rprobe *p, uint8_t *buf, size_t cap, uint64_t now_us);

/* Whether the reader may take more: false while replies wait past
 * RPROBE_QUEUE_MAX or once the session is closing. */
int rprobe_wants_input(const struct rprobe *p);

/* The connection refused a message (a text one, one over AL_MAX_FRAME):
 * ERROR `code` then its close, as rprobe_input does for a bad frame. */
void rprobe_fail(struct rprobe *p, uint16_t code, const char *why);

/* Whether the session is to close once what was pulled is sent. */
int rprobe_closing(const struct rprobe *p, int *code, const char **reason);

/* A header as a probe reports it: the name in lower case (0 when it
 * cannot be reported: empty, too long, or not [A-Za-z0-9-]), the value as
 * it came cut to AL_PROBE_MAX_HEADER_VALUE bytes, or, for a credential,
 * its scheme and the length of the rest ("Bearer (812)", "(40)"). A
 * credential is a header named authorization, proxy-authorization,
 * cookie, token_header (the runner's own, may be NULL), or whose name
 * holds token, key, secret, auth, cookie or signature. */
int rprobe_redact(const char *name, const char *value, size_t value_len, const char *token_header,
                  struct rprobe_header *out);

#endif
