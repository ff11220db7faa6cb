/*
 * wsctx: the libwebsockets context of each program speaking airlock.v1
 * (airlockd's api.c, the runner's runner_app.c, the CLI's cli_net.c),
 * created in one place: on the program's libuv loop (lws's "foreign loop"),
 * IPv4 only, no user or group change, with the program's protocols and
 * limits.
 *
 * What differs between the programs is in struct wsctx_config: whether the
 * context serves (a vhost without a listener: wslisten.c accepts, and
 * wslisten.h says why) or only dials, whether OpenSSL is initialised, the
 * timeouts and buffer sizes, the TLS files of a server. A zero leaves lws's
 * default. Not here: the log level (each program sets its own) and the
 * vhost's listening socket (wslisten.h). wsctx_dial_info() is the
 * connect info every dial starts from (the runner's, airlockd's, the
 * CLI's).
 */
#ifndef AL_WSCTX_H
#define AL_WSCTX_H

#include <libwebsockets.h>
#include <uv.h>

struct wsctx_config {
    uv_loop_t *loop;
    const struct lws_protocols *protocols;
    void *user;                 /* lws_context_user() */
    int server;                 /* 1: CONTEXT_PORT_NO_LISTEN_SERVER; 0: CONTEXT_PORT_NO_LISTEN */
    int ssl;                    /* LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT: TLS may be spoken */
    unsigned timeout_s;         /* lws's timeout_secs */
    unsigned connect_timeout_s; /* a dial's connect; 0: lws's default */
    unsigned short max_header_data; /* bytes of one request's headers */
    unsigned serv_buf_size;         /* pt_serv_buf_size; 0: lws's default */
    const char *tls_cert;           /* a TLS server's PEM files, or NULL */
    const char *tls_key;
    const char *ca_file; /* a client's PEM CAs instead of the system's store, or NULL */
};

/* The context, or NULL (lws says why in its log). */
struct lws_context *wsctx_new(const struct wsctx_config *cfg);

/* What every dial of ours fills in: ci zeroed, then the context, the
 * address and port (also the Host header), the path and the TLS flags
 * (0, or LCCSCF_*). The caller adds the rest (protocol, Origin, user
 * data) and calls lws_client_connect_via_info(). */
void wsctx_dial_info(struct lws_client_connect_info *ci, struct lws_context *ctx,
                     const char *address, int port, const char *path, int ssl_flags);

#endif
