/*
 * wsctls: the client's side of TLS for a wss:// dial, OpenSSL over two
 * memory BIOs: ciphertext in (what the socket read), plaintext out to the
 * wsc link (wsc.h), and the link's plaintext in, ciphertext out to the
 * socket. No socket and no clock of its own, as wsc.c: the caller carries
 * the bytes (wscraw.c, on an lws RAW socket: libwebsockets 4.1.6 starts no
 * RAW client with TLS) and bounds the handshake in time (the dial's
 * upgrade deadline covers the handshake and the upgrade together).
 *
 * What it checks (docs/security.md): the peer's chain against the CA file
 * given, else OpenSSL's default store (the system's; SSL_CERT_FILE and
 * SSL_CERT_DIR where set); the dialed name against the certificate
 * (X509_VERIFY_PARAM host, or IP address for a literal address); TLS 1.2
 * at least; SNI sent for a name (never for an address, RFC 6066 §3). A
 * context made insecure (AIRLOCK_INSECURE_TLS, a local test setup) skips
 * the chain and name checks and nothing else.
 *
 * Data model: a struct wsctls (opaque) owns its SSL and, through it, the
 * two memory BIOs. The read BIO holds only what one wsctls_receive call
 * was given (it reads all of it out before returning); the write BIO what
 * the caller wrote with wsctls_write and has not yet taken with
 * wsctls_output (the caller writes only when the BIO is empty: one
 * message, bounded by the link's frame limit). The SSL_CTX is the
 * caller's (one per program, wsctls_ctx_new), shared by its dials.
 */
#ifndef AL_WSCTLS_H
#define AL_WSCTLS_H

#include <openssl/ssl.h>
#include <stddef.h>
#include <stdint.h>

#define WSCTLS_WHY_MAX 200    /* bytes of the reason a handshake failed */
#define WSCTLS_READ_MAX 16384 /* plaintext taken per SSL_read: one TLS record */

struct wsctls;

/* A client context: ca_file's PEM CAs, or NULL for the default store;
 * insecure: no chain or name check. NULL, with why, on failure. */
SSL_CTX *wsctls_ctx_new(const char *ca_file, int insecure, char *why, size_t cap);

/* One connection to host (a name or an address literal, the dialed one);
 * its ClientHello waits in wsctls_output(). NULL when out of memory or
 * host is unusable. */
struct wsctls *wsctls_new(SSL_CTX *ctx, const char *host);
void wsctls_free(struct wsctls *t);

/* The plaintext the TLS layer hands up, valid during the call; a non-zero
 * return stops reading and is returned by wsctls_receive. */
typedef int (*wsctls_deliver)(void *ud, const uint8_t *plain, size_t len);

/* Ciphertext the socket read. 0, or AL_E_PROTO (the handshake or a record
 * failed: wsctls_why says why; drop the connection), AL_E_CLOSED (the
 * peer's close_notify came), AL_E_NOMEM, or deliver's own non-zero. */
int wsctls_receive(struct wsctls *t, const uint8_t *in, size_t len, wsctls_deliver deliver,
                   void *ud);
/* Plaintext to encrypt (all of it); only once the handshake is done and
 * wsctls_pending() is 0. 0, AL_E_STATE or AL_E_PROTO. */
int wsctls_write(struct wsctls *t, const uint8_t *plain, size_t len);
/* Our close_notify, queued once (an alert only: no wait for the peer's). */
void wsctls_shutdown(struct wsctls *t);
/* Ciphertext to write to the socket, into buf (at most cap): its count. */
size_t wsctls_output(struct wsctls *t, uint8_t *buf, size_t cap);
/* Whether ciphertext waits for wsctls_output(). */
int wsctls_pending(const struct wsctls *t);
/* Whether the handshake is done (the peer's certificate accepted). */
int wsctls_established(const struct wsctls *t);
/* Whether our close_notify was queued. */
int wsctls_shutdown_sent(const struct wsctls *t);
/* Why the handshake or the connection failed ("" while it has not). */
const char *wsctls_why(const struct wsctls *t);

#endif
