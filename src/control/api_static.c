/*
 * api_static: the web page's files (docs/web.md), open to all: GET / is
 * web_dir/index.html, /app/NAME and /vendor/NAME the files of web_dir and
 * web_dir/vendor. A name is one path segment of [A-Za-z0-9._-], not
 * starting with a dot, of a known type (its MIME type from a table); the
 * file is streamed by lws, its request's deadline off until it is sent.
 *
 * Not here: where web_dir is (api.c, --web-dir), what the page does
 * (web/).
 */
#include <libwebsockets.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "api_local.h"
#include "wslisten.h"

/* Sent with every file of the page: no other site may frame it (a page of
 * another port of this host is the same site, and could otherwise lay the
 * terminal under its own clicks and keystrokes). lws adds them as they
 * are, after its own headers. */
static const char frame_headers[] = "x-frame-options: DENY\x0d\x0a"
                                    "content-security-policy: frame-ancestors 'none'\x0d\x0a";

/* A file of the web page: web_dir/SUB/NAME, NAME checked here. */
static int serve_file(struct api *a, struct lws *wsi, const char *sub, const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > API_MAX_FILE_NAME || name[0] == '.' ||
        strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != n)
        return api_reply_error(wsi, 404, "not found");
    static const struct {
        const char *ext, *mime;
    } types[] = {{".html", "text/html; charset=utf-8"},
                 {".js", "text/javascript"},
                 {".mjs", "text/javascript"},
                 {".css", "text/css"},
                 {".svg", "image/svg+xml"},
                 {".png", "image/png"},
                 {".json", "application/json"},
                 {".map", "application/json"}};
    const char *mime = NULL;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        size_t el = strlen(types[i].ext);
        if (n > el && !strcmp(name + n - el, types[i].ext))
            mime = types[i].mime;
    }
    char path[PATH_MAX + API_MAX_FILE_NAME + 16];
    (void)snprintf(path, sizeof path, "%s/%s%s", a->web_dir, sub, name);
    struct stat st;
    if (!mime || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return api_reply_error(wsi, 404, "not found");
    wsl_deadline(a->wsl, wsi, 0); /* streamed: re-armed at HTTP_FILE_COMPLETION */
    return lws_serve_http_file(wsi, path, mime, frame_headers, (int)sizeof frame_headers - 1) < 0
               ? -1
               : 0;
}

/* GET /, /app/NAME, /vendor/NAME: the web page's files from web_dir. */
int api_static_index(struct api *a, struct lws *wsi, struct call *c)
{
    (void)c;
    return serve_file(a, wsi, "", "index.html");
}

int api_static_app(struct api *a, struct lws *wsi, struct call *c)
{
    return serve_file(a, wsi, "", c->file);
}

int api_static_vendor(struct api *a, struct lws *wsi, struct call *c)
{
    return serve_file(a, wsi, "vendor/", c->file);
}
