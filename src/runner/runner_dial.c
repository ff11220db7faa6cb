/*
 * runner_dial: see runner_dial.h. One dial at a time: a failed or lost one
 * schedules the next (a->redial, backoff.c's delays); a connection that
 * reaches --max-age is closed and redialed at once. The token is chosen
 * afresh before every attempt, so a token file renewed by the platform,
 * or a token handed over in band, is used as soon as it is there.
 */
#include "runner_dial.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "al_err.h"
#include "b64url.h"
#include "runner_conn.h"
#include "token.h"
#include "upgrade.h"
#include "wsctx.h"

#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000

/* The token file's token into a->token, checked; or a reason in why. */
static int read_token_file(struct runner_app *a, char *why, size_t cap)
{
    int fd = open(a->token_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        al_errf(why, cap, "cannot read token file %s: %s", a->token_file, strerror(errno));
        return -1;
    }
    ssize_t n = read(fd, a->token, sizeof a->token - 1);
    close(fd);
    if (n <= 0) {
        al_errf(why, cap, "token file %s is empty or unreadable", a->token_file);
        return -1;
    }
    while (n > 0 && (a->token[n - 1] == '\n' || a->token[n - 1] == '\r' || a->token[n - 1] == ' '))
        n--;
    a->token[n] = 0;
    struct tok_verify_params p;
    tok_verify_params_init(&p, a->identifier, UPGRADE_SCOPE, tok_now());
    struct tok_claims cl;
    char r[TOK_REASON_MAX];
    int rc = tok_verify(a->keys, a->token, (size_t)n, &p, &cl, r, sizeof r);
    if (rc != AL_OK) {
        al_errf(why, cap, "token in %s is not usable: %s (%s)", a->token_file, al_strerror(rc), r);
        return -1;
    }
    a->token_exp = cl.exp;
    return 0;
}

/*
 * The token to dial with: the file's, or the newest one the controller
 * handed over in band if that lives longer (an enrollment token is
 * short-lived; the in-band ones keep a linked runner able to redial).
 */
static int read_token(struct runner_app *a)
{
    char why[TOK_REASON_MAX + 256];
    int file_ok = read_token_file(a, why, sizeof why) == 0;
    int64_t exp = 0;
    const char *t = a->runner ? runner_latest_token(a->runner, &exp) : NULL;
    if (t && exp > tok_now() && (!file_ok || exp > a->token_exp) && strlen(t) < sizeof a->token) {
        (void)snprintf(a->token, sizeof a->token, "%s", t);
        a->token_exp = exp;
        runner_log(a->runner, 2, "dialing with the newest in-band token (expires at %lld)",
                   (long long)exp);
        return 0;
    }
    if (!file_ok)
        runner_log(a->runner, 0, "%s", why);
    return file_ok ? 0 : -1;
}

static void on_redial(uv_timer_t *h)
{
    runner_dial_start(h->data);
}

/* Exponential backoff with jitter; ms > 0 forces the delay. */
static void schedule_redial(struct runner_app *a, uint64_t ms)
{
    if (a->stopping || !a->connect_url)
        return;
    if (ms == 0)
        ms = backoff_next(&a->redial_delay);
    runner_log(a->runner, 2, "redial in %llu ms", (unsigned long long)ms);
    (void)uv_timer_start(&a->redial, on_redial, ms, 0);
}

void runner_dial_start(struct runner_app *a)
{
    if (a->stopping || a->current)
        return;
    if (read_token(a) != 0) {
        schedule_redial(a, 0);
        return;
    }
    int tls = a->d_tls ? LCCSCF_USE_SSL : 0;
    if (a->d_tls && getenv("AIRLOCK_INSECURE_TLS"))
        tls |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK;
    struct lws_client_connect_info ci;
    wsctx_dial_info(&ci, a->ctx, a->d_addr, a->d_port, a->d_path_full, tls);
    if (a->d_tls) { /* lws's WebSocket client: lws 4.1.6 refuses to start a
                     * RAW client with LCCSCF_USE_SSL (connect_via_info
                     * returns NULL; tried), so wss:// keeps lws's framing */
        ci.origin = a->d_addr;
        ci.protocol = AL_SUBPROTOCOL;
    } else { /* a socket only: wsc.c speaks WebSocket on it (runner_conn.c) */
        ci.method = "RAW";
        ci.local_protocol_name = AL_SUBPROTOCOL;
    }
    runner_log(a->runner, 1, "dialing %s (attempt %u)", a->url, a->redial_delay.attempt + 1);
    if (!lws_client_connect_via_info(&ci)) {
        runner_log(a->runner, 0, "cannot start a connection to %s", a->url);
        schedule_redial(a, 0);
    }
}

static void on_max_age(uv_timer_t *h)
{
    runner_conn_max_age(h->data);
}

void runner_dial_connected(struct runner_app *a)
{
    backoff_reset(&a->redial_delay);
    runner_log(a->runner, 1, "connected to %s", a->url);
    if (a->max_age_ms)
        (void)uv_timer_start(&a->max_age, on_max_age, a->max_age_ms, 0);
}

void runner_dial_failed(struct runner_app *a, struct lws *wsi, const void *in)
{
    unsigned status = lws_http_client_http_response(wsi);
    runner_log(a->runner, 0, "connection to %s failed: %s%s%u", a->url,
               in ? (const char *)in : "unknown error", status ? " (HTTP status " : "", status);
    schedule_redial(a, 0);
}

void runner_dial_refused(struct runner_app *a, unsigned status, const char *why)
{
    if (status)
        runner_log(a->runner, 0, "connection to %s failed: %s (HTTP status %u)", a->url, why,
                   status);
    else
        runner_log(a->runner, 0, "connection to %s failed: %s", a->url, why);
    schedule_redial(a, 0);
}

struct wsc *runner_dial_link(struct runner_app *a, const struct wsc_events *ev, void *ud)
{
    /* our key, and the token as Authorization or the configured header */
    char extra[RUNNER_APP_TOKEN_MAX + RUNNER_APP_TOKEN_HEADER_MAX + AL_RUNNER_KEY_LEN + 128];
    int n = snprintf(extra, sizeof extra, "%s: %s\r\nOrigin: http://%s\r\n%s Bearer %s\r\n",
                     AL_RUNNER_KEY_HEADER, a->link_key, a->d_addr,
                     a->header_is_auth ? "Authorization:" : a->token_header_lc, a->token);
    struct wsc *c = NULL;
    if (n > 0 && (size_t)n < sizeof extra) {
        struct wscu_request r = {a->d_addr, a->d_port, a->d_path_full, AL_SUBPROTOCOL, extra, NULL};
        c = wsc_new(&r, ev, ud);
    }
    OPENSSL_cleanse(extra, sizeof extra);
    return c;
}

void runner_dial_closed(struct runner_app *a, int was_current, int aged)
{
    (void)uv_timer_stop(&a->max_age);
    if (was_current || aged)
        schedule_redial(a, aged ? 1 : 0);
}

int runner_dial_headers(struct runner_app *a, struct lws *wsi, void *in, size_t len)
{
    unsigned char **p = (unsigned char **)in, *end = (*p) + len;
    char hv[RUNNER_APP_TOKEN_MAX + 16];
    int n = snprintf(hv, sizeof hv, "Bearer %s", a->token);
    if (n < 0 || (size_t)n >= sizeof hv)
        return -1;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)AL_RUNNER_KEY_HEADER ":",
                                    (unsigned char *)a->link_key, AL_RUNNER_KEY_LEN, p, end))
        return -1;
    if (a->header_is_auth)
        return lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION, (unsigned char *)hv,
                                            n, p, end)
                   ? -1
                   : 0;
    return lws_add_http_header_by_name(wsi, (const unsigned char *)a->token_header_lc,
                                       (unsigned char *)hv, n, p, end)
               ? -1
               : 0;
}

int runner_dial_setup(struct runner_app *a)
{
    backoff_init(&a->redial_delay, BACKOFF_MIN_MS, BACKOFF_MAX_MS);
    (void)snprintf(a->url, sizeof a->url, "%s", a->connect_url);
    (void)snprintf(a->parsed, sizeof a->parsed, "%s", a->connect_url);
    const char *prot, *addr, *path;
    int port;
    if (lws_parse_uri(a->parsed, &prot, &addr, &port, &path) ||
        (strcmp(prot, "ws") != 0 && strcmp(prot, "wss") != 0)) {
        fprintf(stderr, "airlock-runner: --connect: not a ws:// or wss:// URL: %s\n", a->url);
        return -1;
    }
    a->d_addr = addr;
    a->d_port = port;
    a->d_tls = !strcmp(prot, "wss");
    if (strstr(path, "identifier="))
        (void)snprintf(a->d_path_full, sizeof a->d_path_full, "/%s", path);
    else
        (void)snprintf(a->d_path_full, sizeof a->d_path_full, "/%s%sidentifier=%s", path,
                       strchr(path, '?') ? "&" : "?", a->identifier);
    return 0;
}

/* Only base64url characters. */
static int is_b64url(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return 0;
    }
    return 1;
}

int runner_dial_load_key(struct runner_app *a)
{
    if (a->key_fd < 0) {
        uint8_t raw[AL_RUNNER_KEY_RAW];
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw ||
            b64u_encode(raw, sizeof raw, a->link_key, sizeof a->link_key, NULL) != AL_OK) {
            fprintf(stderr, "airlock-runner: cannot make a link key\n");
            return -1;
        }
        OPENSSL_cleanse(raw, sizeof raw);
        return 0;
    }
    char buf[AL_RUNNER_KEY_LEN + 2];
    ssize_t n = read(a->key_fd, buf, sizeof buf);
    (void)close(a->key_fd);
    if (a->key_fd == 0) { /* stdin: /dev/null from now on */
        int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null >= 0 && null != 0) {
            (void)dup2(null, 0);
            (void)close(null);
        }
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n != AL_RUNNER_KEY_LEN) {
        fprintf(stderr, "airlock-runner: --link-key-fd: want %d base64url characters\n",
                AL_RUNNER_KEY_LEN);
        return -1;
    }
    if (!is_b64url(buf, (size_t)n)) {
        fprintf(stderr, "airlock-runner: --link-key-fd: not base64url\n");
        return -1;
    }
    memcpy(a->link_key, buf, (size_t)n);
    a->link_key[n] = 0;
    OPENSSL_cleanse(buf, sizeof buf);
    return 0;
}
