/*
 * wsctx: the lws context on a libuv loop (see wsctx.h): the creation info
 * every program used to fill in on its own, and the connect info of a
 * dial.
 */
#include "wsctx.h"

#include <string.h>

struct lws_context *wsctx_new(const struct wsctx_config *cfg)
{
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    void *loops[] = {cfg->loop};
    info.port = cfg->server ? CONTEXT_PORT_NO_LISTEN_SERVER : CONTEXT_PORT_NO_LISTEN;
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_DISABLE_IPV6 |
                   (cfg->ssl ? LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT : 0);
    info.foreign_loops = loops;
    info.protocols = cfg->protocols;
    info.user = cfg->user;
    info.timeout_secs = cfg->timeout_s;
    info.connect_timeout_secs = cfg->connect_timeout_s;
    info.max_http_header_data = cfg->max_header_data;
    info.pt_serv_buf_size = cfg->serv_buf_size;
    info.gid = -1;
    info.uid = -1;
    info.ssl_cert_filepath = cfg->tls_cert;
    info.ssl_private_key_filepath = cfg->tls_key;
    info.client_ssl_ca_filepath = cfg->ca_file;
    return lws_create_context(&info);
}

void wsctx_dial_info(struct lws_client_connect_info *ci, struct lws_context *ctx,
                     const char *address, int port, const char *path, int ssl_flags)
{
    memset(ci, 0, sizeof *ci);
    ci->context = ctx;
    ci->address = address;
    ci->port = port;
    ci->path = path;
    ci->host = address;
    ci->ssl_connection = ssl_flags;
}
