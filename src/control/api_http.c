/*
 * api_http: an HTTP request as lws hands it over: its method and path
 * (GET, POST, DELETE; 405 for the others), its body kept up to
 * API_MAX_REQ bytes (a bigger one is 413), and a POST refused before a
 * byte of its body is read when it cannot be taken (api_route_body_verdict:
 * 401, 404, 413; the body is then dropped as it comes and the refusal
 * answers it at its end). Also the request headers, read bounded.
 *
 * Data model: struct http_req (api_local.h) is lws's per-session data of
 * the "http" protocol: zeroed at each request, its body on the heap until
 * the request is answered (or the connection closes).
 *
 * Not here: which route answers (api_route.c) and the answers themselves
 * (api_reply.c).
 */
#include <libwebsockets.h>
#include <stdlib.h>
#include <string.h>

#include "api_local.h"

/* A request header lws knows into buf: its value, or NULL if absent or too long. */
const char *api_http_hdr(struct lws *wsi, enum lws_token_indexes t, char *buf, size_t cap)
{
    int n = lws_hdr_total_length(wsi, t);
    if (n <= 0 || (size_t)n >= cap || lws_hdr_copy(wsi, buf, (int)cap, t) < 0)
        return NULL;
    return buf;
}

/* A header lws does not know ("name:" in lower case), as api_http_hdr(). */
const char *api_http_hdr_custom(struct lws *wsi, const char *name, char *buf, size_t cap)
{
    int nl = (int)strlen(name);
    int n = lws_hdr_custom_length(wsi, name, nl);
    if (n <= 0 || (size_t)n >= cap || lws_hdr_custom_copy(wsi, buf, (int)cap, name, nl) < 0)
        return NULL;
    return buf;
}

/* The answer of a request refused before its body was read. */
static int answer_refused(struct lws *wsi, unsigned status)
{
    return api_reply_error(wsi, status,
                           status == 401
                               ? "a valid API key is required (Authorization: Bearer <key>)"
                           : status == 413 ? "request body over 64 KiB"
                                           : "not found");
}

/* LWS_CALLBACK_HTTP, the headers are in: answered now, or once the body
 * is (a POST with one). */
int api_http_request(struct api *a, struct lws *wsi, struct http_req *q)
{
    memset(q, 0, sizeof *q);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0) {
        q->method = M_GET;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_GET_URI);
    } else if (lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0) {
        q->method = M_POST;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_POST_URI);
    } else if (lws_hdr_total_length(wsi, WSI_TOKEN_DELETE_URI) > 0) {
        q->method = M_DELETE;
        (void)lws_hdr_copy(wsi, q->uri, sizeof q->uri, WSI_TOKEN_DELETE_URI);
    } else {
        return api_reply_error(wsi, 405, "method not allowed");
    }
    if (q->method == M_POST) {
        char cl[32] = "";
        long n = 0;
        if (lws_hdr_copy(wsi, cl, sizeof cl, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0)
            n = strtol(cl, NULL, 10);
        if (n != 0) {
            q->refused = api_route_body_verdict(a, wsi, q, n);
            return 0; /* answered once the body is in (or dropped) */
        }
    }
    return api_route_http(a, wsi, q);
}

/* LWS_CALLBACK_HTTP_BODY: a piece of the body, kept or dropped. */
int api_http_body(struct http_req *q, const void *in, size_t len)
{
    if (q->refused)
        return 0;
    if (q->too_big || len > API_MAX_REQ - q->len) {
        q->too_big = 1;
        return 0;
    }
    char *p = realloc(q->body, q->len + len + 1);
    if (!p)
        return -1;
    q->body = p;
    memcpy(q->body + q->len, in, len);
    q->len += len;
    q->body[q->len] = 0;
    return 0;
}

/* LWS_CALLBACK_HTTP_BODY_COMPLETION: the body is in (or was dropped). */
int api_http_done(struct api *a, struct lws *wsi, struct http_req *q)
{
    /* answering may end the transaction and reset q: own the body first */
    struct http_req req = *q;
    q->body = NULL;
    int rc = req.refused ? answer_refused(wsi, req.refused) : api_route_http(a, wsi, &req);
    /* forwarded: not answered, so q lives on, and its answer is written at
     * a later HTTP_WRITEABLE (api_fwd.c); answered, q may be gone already */
    if (req.fwd)
        q->fwd = req.fwd;
    free(req.body);
    return rc;
}
