/*
 * airlock-runner: the sandbox side. This file is the thin libwebsockets
 * glue around runner.c: it listens (a platform ingress dials in) or dials
 * (the control plane listens), checks the upgrade (upgrade.c), and moves
 * whole binary messages between the socket and the runner. Everything
 * about the protocol happens in src/common/endpoint.c.
 *
 * The runner links src/common and src/runner only: it holds and can hold
 * no signing code (tests/integration/boundary.sh checks).
 *
 * Data model: struct app is the context's user data (no globals): options,
 * the key set, the runner, the dial state. struct conn is lws's
 * per-connection data: the message being reassembled.
 */
#include <errno.h>
#include <fcntl.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_log.h"
#include "b64url.h"
#include "backoff.h"
#include "jail.h"
#include "endpoint.h"
#include "runner.h"
#include "token.h"
#include "wsctx.h"
#include "wsg.h"
#include "wslisten.h"
#include "upgrade.h"

#define MAX_ENV_ALLOW 64
#define MAX_CGROUP_FDS 4
#define MAX_TOKEN_FILE 8192 /* bytes of a token file */
#define HANDSHAKE_TIMEOUT_S 10
#define MAX_HEADER_DATA 8192
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 30000
/* --listen: what one runner accepts at once. It serves one link (and the
 * ingress's health checks), usually all from one ingress address. */
#define LISTEN_MAX_CONNS 64
#define LISTEN_MAX_CONNS_PER_IP 32
#define LISTEN_REQUEST_TIMEOUT_MS (HANDSHAKE_TIMEOUT_S * 1000ull) /* headers, from accept */

static const char *const default_env_allow[] = {
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR", NULL,
};

struct app {
    /* options */
    const char *listen, *connect_url, *identifier, *jwks_path, *token_file;
    const char *token_header;
    char token_header_lc[128]; /* "x-name:" for custom headers */
    int header_is_auth;
    uint64_t max_age_ms;
    int64_t leeway;
    const char *env_allow[MAX_ENV_ALLOW + 1];
    char *env_allow_mem;
    struct runner_config rcfg;
    int jailed;                     /* --agent-sandbox bwrap */
    int cgroup_fds[MAX_CGROUP_FDS]; /* --cgroup-fd: cgroup.procs to join */
    int ncgroup_fds;
    uint64_t max_procs;      /* --max-procs: RLIMIT_NPROC (0: unchanged) */
    struct jail_config jcfg; /* its settings */
    struct jail *jail;
    char cwd[512]; /* the default workspace */
    /* state */
    uv_loop_t *loop;
    struct lws_context *ctx;
    struct tok_keyset *keys;
    struct runner *runner;
    struct lws *current; /* the connection the runner speaks on */
    int64_t pending_exp; /* token expiry learnt at the upgrade */
    struct lws *pending_wsi;
    struct wsl *wsl; /* --listen: the listening socket, the connection limits */
    /* dialing */
    char url[2048];
    char parsed[2048]; /* lws_parse_uri cuts this one up */
    const char *d_prot, *d_addr, *d_path;
    int d_port, d_tls;
    char d_path_full[2300];
    char token[MAX_TOKEN_FILE];
    int key_fd;                           /* --link-key-fd: our key arrives there (-1: make one) */
    char link_key[AL_RUNNER_KEY_LEN + 1]; /* presented on every dial, never logged */
    int64_t token_exp;
    struct backoff redial_delay; /* after a failed or lost dial */
    uv_timer_t redial, max_age;
    uv_signal_t sigterm, sigint;
    int stopping;
};

struct conn {
    struct wsg ws; /* the message being reassembled, the close */
    int replaced;  /* a newer connection took over */
    int max_aged;  /* --connect: time to reconnect */
};

/* ---- helpers ------------------------------------------------------------ */

static void log_line(struct app *a, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void log_line(struct app *a, int level, const char *fmt, ...)
{
    if (level > a->rcfg.log_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    al_vlog("airlock-runner", a->identifier, level, fmt, ap);
    va_end(ap);
}

static void want_write(void *link)
{
    lws_callback_on_writable((struct lws *)link);
}

static int http_reply(struct lws *wsi, unsigned status, const char *body)
{
    uint8_t buf[LWS_PRE + 1024];
    uint8_t *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
    size_t len = strlen(body);
    if (len > 255)
        len = 255; /* bodies are one word; never more than body_buf holds */
    if (lws_add_http_common_headers(wsi, status, "text/plain", len, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, (const unsigned char *)"close", 5,
                                     &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    uint8_t body_buf[LWS_PRE + 256];
    memcpy(body_buf + LWS_PRE, body, len); // NOLINT(bugprone-not-null-terminated-result)
    if (lws_write(wsi, body_buf + LWS_PRE, len, LWS_WRITE_HTTP_FINAL) != (int)len)
        return -1;
    const struct app *a = lws_context_user(lws_get_context(wsi));
    wsl_deadline(a->wsl, wsi, 1);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* ---- the upgrade decision ---------------------------------------------- */

static int confirm_upgrade(struct app *a, struct lws *wsi)
{
    char path[512] = "", idb[300], apib[128];
    char auth[UPGRADE_MAX_HEADER + 1];
    if (lws_hdr_copy(wsi, path, sizeof path, WSI_TOKEN_GET_URI) < 0)
        path[0] = 0;
    struct upgrade_request req;
    memset(&req, 0, sizeof req);
    req.path = path;
    req.is_upgrade = 1;
    req.identifier = wsg_urlarg(wsi, "identifier", idb, sizeof idb);
    req.api_version = wsg_urlarg(wsi, "api-version", apib, sizeof apib);
    char protob[UPGRADE_MAX_HEADER + 1];
    int n = lws_hdr_total_length(wsi, WSI_TOKEN_PROTOCOL);
    if (n > UPGRADE_MAX_HEADER)
        req.subprotocols = "?"; /* too long to read: refused as an offer without ours */
    else if (n > 0 && lws_hdr_copy(wsi, protob, sizeof protob, WSI_TOKEN_PROTOCOL) > 0)
        req.subprotocols = protob;
    if (a->header_is_auth) {
        n = lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
        if (n > 0 && n <= UPGRADE_MAX_HEADER &&
            lws_hdr_copy(wsi, auth, sizeof auth, WSI_TOKEN_HTTP_AUTHORIZATION) > 0)
            req.auth = auth;
    } else {
        int nl = (int)strlen(a->token_header_lc);
        n = lws_hdr_custom_length(wsi, a->token_header_lc, nl);
        if (n > 0 && n <= UPGRADE_MAX_HEADER &&
            lws_hdr_custom_copy(wsi, auth, sizeof auth, a->token_header_lc, nl) > 0)
            req.auth = auth;
    }
    struct upgrade_config cfg = {a->identifier, a->keys, (int64_t)time(NULL), a->leeway};
    struct upgrade_result res;
    upgrade_decide(&cfg, &req, &res);
    char peer[64] = "?";
    lws_get_peer_simple(wsi, peer, sizeof peer);
    if (res.status != 101) {
        log_line(a, 1, "upgrade from %s refused %d: %s", peer, res.status, res.log);
        (void)http_reply(wsi, (unsigned)res.status, res.body);
        return -1;
    }
    log_line(a, 1, "upgrade from %s accepted: %s", peer, res.log);
    a->pending_exp = res.claims.exp;
    a->pending_wsi = wsi;
    return 0;
}

/* ---- one connection, either direction ------------------------------------ */

static void link_established(struct app *a, struct lws *wsi, int64_t exp)
{
    wsg_nodelay(wsi);
    if (a->current) {
        struct conn *old = lws_wsi_user(a->current);
        if (old)
            old->replaced = 1;
        runner_link_down(a->runner, a->current);
        lws_callback_on_writable(a->current);
        log_line(a, 1, "a newer connection replaces the current one");
    }
    a->current = wsi;
    runner_link_up(a->runner, wsi, want_write, exp);
}

static void link_closed(struct app *a, struct lws *wsi, struct conn *c)
{
    if (c)
        wsg_release(&c->ws);
    if (a->current == wsi) {
        a->current = NULL;
        runner_link_down(a->runner, wsi);
        log_line(a, 1, "connection closed");
    }
}

static int link_receive(struct app *a, struct lws *wsi, struct conn *c, const void *in, size_t len)
{
    if (!c || a->current != wsi || c->replaced)
        return 0; /* an old connection: ignore */
    size_t n = 0;
    enum wsg_rx rx = wsg_receive(&c->ws, wsi, in, len, &n);
    if (rx == WSG_NOMEM)
        return -1;
    if (rx == WSG_REFUSED) {
        /* the endpoint says why in an ERROR, then asks for the close */
        log_line(a, 1, "peer's message refused: %s: closing", c->ws.refused_why);
        if (runner_refuse(a->runner, c->ws.refused, c->ws.refused_why) != AL_OK)
            wsg_close_later(&c->ws, wsi, ep_close_code_of(c->ws.refused), c->ws.refused_why);
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (rx != WSG_MESSAGE)
        return 0;
    int rc = runner_input(a->runner, c->ws.msg, n);
    if (rc != AL_OK)
        log_line(a, 1, "peer broke the protocol: %s", al_strerror(rc));
    lws_callback_on_writable(wsi);
    return 0;
}

/* What wsg_drain() writes: the runner's frames. */
static long pull_output(void *runner, struct lws *wsi, uint8_t *buf, size_t cap)
{
    (void)wsi;
    return runner_output(runner, buf, cap);
}

static int link_writeable(struct app *a, struct lws *wsi, struct conn *c)
{
    if (c && c->replaced)
        wsg_close_later(&c->ws, wsi, AL_CLOSE_REPLACED, "replaced by a newer connection");
    if (c && c->max_aged)
        wsg_close_later(&c->ws, wsi, AL_CLOSE_NORMAL, "max age");
    if (c && c->ws.close_code)
        return wsg_close_now(&c->ws, wsi);
    if (a->current != wsi)
        return 0;
    int wrote;
    long err = 0;
    enum wsg_tx tx = wsg_drain(wsi, pull_output, a->runner, &wrote, &err);
    if (tx == WSG_TX_PULL) {
        log_line(a, 0, "cannot encode a frame: %s", al_strerror((int)err));
        return -1;
    }
    if (tx != WSG_TX_IDLE)
        return tx == WSG_TX_CHOKED ? 0 : -1;
    int code;
    const char *reason;
    if (runner_closing(a->runner, &code, &reason)) {
        if (wrote) { /* the close frame goes in a callback of its own */
            lws_callback_on_writable(wsi);
            return 0;
        }
        log_line(a, 1, "closing the connection (%d): %s", code, reason);
        if (c)
            wsg_close_later(&c->ws, wsi, code, reason);
        return 0;
    }
    return 0;
}

/* ---- dialing --------------------------------------------------------------- */

static void schedule_redial(struct app *a, uint64_t ms);

/* The token file's token into a->token, checked; or a reason in why. */
static int read_token_file(struct app *a, char *why, size_t cap)
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
    tok_verify_params_init(&p, a->identifier, UPGRADE_SCOPE, (int64_t)time(NULL));
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
static int read_token(struct app *a)
{
    char why[TOK_REASON_MAX + 256];
    int file_ok = read_token_file(a, why, sizeof why) == 0;
    int64_t exp = 0;
    const char *t = a->runner ? runner_latest_token(a->runner, &exp) : NULL;
    if (t && exp > (int64_t)time(NULL) && (!file_ok || exp > a->token_exp) &&
        strlen(t) < sizeof a->token) {
        (void)snprintf(a->token, sizeof a->token, "%s", t);
        a->token_exp = exp;
        log_line(a, 2, "dialing with the newest in-band token (expires at %lld)", (long long)exp);
        return 0;
    }
    if (!file_ok)
        log_line(a, 0, "%s", why);
    return file_ok ? 0 : -1;
}

static void dial(struct app *a)
{
    if (a->stopping || a->current)
        return;
    if (read_token(a) != 0) {
        schedule_redial(a, 0);
        return;
    }
    struct lws_client_connect_info ci;
    memset(&ci, 0, sizeof ci);
    ci.context = a->ctx;
    ci.address = a->d_addr;
    ci.port = a->d_port;
    ci.path = a->d_path_full;
    ci.host = a->d_addr;
    ci.origin = a->d_addr;
    ci.protocol = AL_SUBPROTOCOL;
    ci.ssl_connection = a->d_tls ? LCCSCF_USE_SSL : 0;
    if (a->d_tls && getenv("AIRLOCK_INSECURE_TLS"))
        ci.ssl_connection |= LCCSCF_ALLOW_SELFSIGNED | LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK;
    ci.userdata = NULL;
    log_line(a, 1, "dialing %s (attempt %u)", a->url, a->redial_delay.attempt + 1);
    if (!lws_client_connect_via_info(&ci)) {
        log_line(a, 0, "cannot start a connection to %s", a->url);
        schedule_redial(a, 0);
    }
}

static void on_redial(uv_timer_t *h)
{
    dial(h->data);
}

/* Exponential backoff with jitter; ms > 0 forces the delay. */
static void schedule_redial(struct app *a, uint64_t ms)
{
    if (a->stopping || !a->connect_url)
        return;
    if (ms == 0)
        ms = backoff_next(&a->redial_delay);
    log_line(a, 2, "redial in %llu ms", (unsigned long long)ms);
    (void)uv_timer_start(&a->redial, on_redial, ms, 0);
}

static void on_max_age(uv_timer_t *h)
{
    struct app *a = h->data;
    if (!a->current)
        return;
    struct conn *c = lws_wsi_user(a->current);
    log_line(a, 1, "connection reached its maximum age: reconnecting");
    if (c)
        c->max_aged = 1;
    lws_callback_on_writable(a->current);
}

/* ---- the lws callback ------------------------------------------------------ */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct app *a = ctx ? lws_context_user(ctx) : NULL;
    struct conn *c = user;
    if (!a)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        if (!in || strcmp((const char *)in, "websocket") != 0) {
            (void)http_reply(wsi, 400, "Bad Request\n");
            return -1;
        }
        return confirm_upgrade(a, wsi);
    case LWS_CALLBACK_HTTP: {
        char path[256] = "";
        if (lws_hdr_copy(wsi, path, sizeof path, WSI_TOKEN_GET_URI) < 0)
            path[0] = 0;
        struct upgrade_request req = {path, 0, NULL, NULL, NULL, NULL};
        struct upgrade_config cfg = {a->identifier, a->keys, (int64_t)time(NULL), a->leeway};
        struct upgrade_result res;
        upgrade_decide(&cfg, &req, &res);
        return http_reply(wsi, (unsigned)res.status, res.body);
    }
    case LWS_CALLBACK_ESTABLISHED: {
        int64_t exp = a->pending_wsi == wsi ? a->pending_exp : 0;
        a->pending_wsi = NULL;
        if (c)
            memset(c, 0, sizeof *c);
        wsl_deadline(a->wsl, wsi, 0);
        link_established(a, wsi, exp);
        return 0;
    }
    case LWS_CALLBACK_CLIENT_ESTABLISHED:
        if (c)
            memset(c, 0, sizeof *c);
        backoff_reset(&a->redial_delay);
        log_line(a, 1, "connected to %s", a->url);
        link_established(a, wsi, a->token_exp);
        if (a->max_age_ms)
            (void)uv_timer_start(&a->max_age, on_max_age, a->max_age_ms, 0);
        return 0;
    case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER: {
        unsigned char **p = (unsigned char **)in, *end = (*p) + len;
        char hv[MAX_TOKEN_FILE + 16];
        int n = snprintf(hv, sizeof hv, "Bearer %s", a->token);
        if (n < 0 || (size_t)n >= sizeof hv)
            return -1;
        if (lws_add_http_header_by_name(wsi, (const unsigned char *)AL_RUNNER_KEY_HEADER ":",
                                        (unsigned char *)a->link_key, AL_RUNNER_KEY_LEN, p, end))
            return -1;
        if (a->header_is_auth)
            return lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_AUTHORIZATION,
                                                (unsigned char *)hv, n, p, end)
                       ? -1
                       : 0;
        return lws_add_http_header_by_name(wsi, (const unsigned char *)a->token_header_lc,
                                           (unsigned char *)hv, n, p, end)
                   ? -1
                   : 0;
    }
    case LWS_CALLBACK_CLIENT_CONNECTION_ERROR: {
        unsigned status = lws_http_client_http_response(wsi);
        log_line(a, 0, "connection to %s failed: %s%s%u", a->url,
                 in ? (const char *)in : "unknown error", status ? " (HTTP status " : "", status);
        schedule_redial(a, 0);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
    case LWS_CALLBACK_CLIENT_RECEIVE:
        return link_receive(a, wsi, c, in, len);
    case LWS_CALLBACK_SERVER_WRITEABLE:
    case LWS_CALLBACK_CLIENT_WRITEABLE:
        return link_writeable(a, wsi, c);
    case LWS_CALLBACK_CLOSED:
        link_closed(a, wsi, c);
        return 0;
    case LWS_CALLBACK_WSI_DESTROY:
        wsl_gone(a->wsl, wsi);
        break;
    case LWS_CALLBACK_CLIENT_CLOSED: {
        int aged = c && c->max_aged;
        int was_current = a->current == wsi;
        link_closed(a, wsi, c);
        (void)uv_timer_stop(&a->max_age);
        if (was_current || aged)
            schedule_redial(a, aged ? 1 : 0);
        return 0;
    }
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {AL_SUBPROTOCOL, callback, sizeof(struct conn), AL_MAX_FRAME, 0, NULL, AL_MAX_FRAME},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- options ----------------------------------------------------------------- */

static void usage(FILE *to)
{
    fputs("usage: airlock-runner --listen HOST:PORT --identifier ID --jwks FILE [options]\n"
          "       airlock-runner --connect URL --identifier ID --jwks FILE --token-file FILE "
          "[options]\n"
          "\n"
          "Serves agents' terminals over one airlock.v1 WebSocket. Holds no secret: tokens\n"
          "are checked with the public keys of FILE (a JWKS).\n"
          "\n"
          "options:\n"
          "  --token-header NAME    header carrying 'Bearer <token>' (default Authorization)\n"
          "  --grace SECONDS        terminals outlive a lost controller this long (3600)\n"
          "  --ring BYTES           output kept per terminal for resume (4194304)\n"
          "  --window BYTES         input credit per terminal (524288)\n"
          "  --screen-budget BYTES  heap all terminals' screen models may hold (268435456);\n"
          "                         an OPEN or RESIZE beyond it is refused\n"
          "  --ping-interval MS     in-band ping interval (15000; 0: off)\n"
          "  --idle-timeout MS      drop a silent peer after this (45000; 0: off)\n"
          "  --max-age SECONDS      --connect: reconnect proactively at this age (0: off)\n"
          "  --leeway SECONDS       clock skew tolerated on token times (30)\n"
          "  --env-allow A,B,...    our environment variables agents may see\n"
          "                         (PATH,HOME,LANG,LC_ALL,LC_CTYPE,USER,LOGNAME,SHELL,TZ,TMPDIR)\n"
          "  --agent-user USER      run agents as USER\n"
          "  --agent-sandbox KIND   none (agents run as we do) or bwrap (each agent in\n"
          "                         its own user, pid and IPC namespaces, no capability,\n"
          "                         a seccomp filter; sees the system read-only, a private\n"
          "                         /tmp and the workspace only) (none)\n"
          "  --agent-network KIND   with bwrap: host (shared) or none (loopback only) (host)\n"
          "  --cgroup-fd N          join the control group whose cgroup.procs is open on\n"
          "                         descriptor N, first thing (repeatable)\n"
          "  --max-procs N          RLIMIT_NPROC for us and our agents\n"
          "  --link-key-fd N        --connect: read our key from descriptor N (else a random\n"
          "                         one); it goes with every dial, so that a copy of our token\n"
          "                         alone cannot take our place\n"
          "  --workspace DIR        with bwrap: the directory agents may write (the current\n"
          "                         directory)\n"
          "  -v, --verbose          debug log\n",
          to);
}

static int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_args(struct app *a, int argc, char **argv)
{
    a->token_header = "Authorization";
    a->key_fd = -1;
    a->leeway = -1;
    a->rcfg.ring = RUNNER_DEFAULT_RING;
    a->rcfg.window = 0;
    a->rcfg.ping_interval_ms = 15000;
    a->rcfg.idle_timeout_ms = 45000;
    a->rcfg.grace_ms = RUNNER_DEFAULT_GRACE_MS;
    a->rcfg.log_level = 1;
    for (int i = 0; default_env_allow[i]; i++)
        a->env_allow[i] = default_env_allow[i];
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) {
            a->rcfg.log_level = 2;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "airlock-runner: %s needs a value (see --help)\n", o);
            return -1;
        }
        const char *v = argv[++i];
        uint64_t n;
        if (!strcmp(o, "--listen")) {
            a->listen = v;
        } else if (!strcmp(o, "--connect")) {
            a->connect_url = v;
        } else if (!strcmp(o, "--identifier")) {
            a->identifier = v;
        } else if (!strcmp(o, "--jwks")) {
            a->jwks_path = v;
        } else if (!strcmp(o, "--token-file")) {
            a->token_file = v;
        } else if (!strcmp(o, "--token-header")) {
            a->token_header = v;
        } else if (!strcmp(o, "--grace") && !parse_u64(v, 30ull * 86400u, &n)) {
            a->rcfg.grace_ms = n * 1000ull;
        } else if (!strcmp(o, "--ring") && !parse_u64(v, 1u << 30, &n) && n >= 65536) {
            a->rcfg.ring = (size_t)n;
        } else if (!strcmp(o, "--screen-budget") && !parse_u64(v, 1ull << 40, &n) &&
                   n >= RUNNER_MIN_SCREEN_BUDGET) {
            a->rcfg.screen_budget = (size_t)n;
        } else if (!strcmp(o, "--window") && !parse_u64(v, 1u << 30, &n) && n >= 1024) {
            a->rcfg.window = (uint32_t)n;
        } else if (!strcmp(o, "--ping-interval") && !parse_u64(v, 3600000, &n)) {
            a->rcfg.ping_interval_ms = n;
        } else if (!strcmp(o, "--idle-timeout") && !parse_u64(v, 3600000, &n)) {
            a->rcfg.idle_timeout_ms = n;
        } else if (!strcmp(o, "--max-age") && !parse_u64(v, 30ull * 86400u, &n)) {
            a->max_age_ms = n * 1000ull;
        } else if (!strcmp(o, "--leeway") && !parse_u64(v, TOK_LEEWAY_MAX, &n)) {
            a->leeway = (int64_t)n;
        } else if (!strcmp(o, "--env-allow")) {
            free(a->env_allow_mem);
            a->env_allow_mem = strdup(v);
            if (!a->env_allow_mem)
                return -1;
            int k = 0;
            char *save = NULL;
            for (char *tok = strtok_r(a->env_allow_mem, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save)) {
                if (k >= MAX_ENV_ALLOW) {
                    fprintf(stderr, "airlock-runner: --env-allow: at most %d names\n",
                            MAX_ENV_ALLOW);
                    return -1;
                }
                a->env_allow[k++] = tok;
            }
            a->env_allow[k] = NULL;
        } else if (!strcmp(o, "--agent-sandbox") && (!strcmp(v, "none") || !strcmp(v, "bwrap"))) {
            a->jailed = !strcmp(v, "bwrap");
        } else if (!strcmp(o, "--agent-network") && (!strcmp(v, "host") || !strcmp(v, "none"))) {
            a->jcfg.no_network = !strcmp(v, "none");
        } else if (!strcmp(o, "--cgroup-fd") && !parse_u64(v, 1023, &n) && n >= 3 &&
                   a->ncgroup_fds < MAX_CGROUP_FDS) {
            a->cgroup_fds[a->ncgroup_fds++] = (int)n;
        } else if (!strcmp(o, "--link-key-fd") && !parse_u64(v, 1023, &n)) {
            a->key_fd = (int)n;
        } else if (!strcmp(o, "--max-procs") && !parse_u64(v, 1u << 22, &n) && n > 0) {
            a->max_procs = n;
        } else if (!strcmp(o, "--workspace") && v[0] == '/') {
            a->jcfg.workspace = v;
        } else if (!strcmp(o, "--agent-user")) {
            struct passwd *pw = getpwnam(v);
            if (!pw) {
                fprintf(stderr, "airlock-runner: --agent-user: no user named '%s'\n", v);
                return -1;
            }
            a->rcfg.set_user = 1;
            a->rcfg.uid = pw->pw_uid;
            a->rcfg.gid = pw->pw_gid;
        } else {
            fprintf(stderr, "airlock-runner: bad option or value: %s %s (see --help)\n", o, v);
            return -1;
        }
    }
    if (!!a->listen == !!a->connect_url) {
        fprintf(stderr, "airlock-runner: give exactly one of --listen or --connect\n");
        return -1;
    }
    if (!a->identifier || !*a->identifier || !a->jwks_path) {
        fprintf(stderr, "airlock-runner: --identifier and --jwks are required\n");
        return -1;
    }
    if (strlen(a->identifier) > 255) {
        fprintf(stderr, "airlock-runner: --identifier is longer than 255 bytes\n");
        return -1;
    }
    if (a->connect_url && !a->token_file) {
        fprintf(stderr, "airlock-runner: --connect needs --token-file\n");
        return -1;
    }
    a->header_is_auth = !strcasecmp(a->token_header, "Authorization");
    if (!a->header_is_auth) {
        size_t n = strlen(a->token_header);
        if (n == 0 || n + 2 > sizeof a->token_header_lc) {
            fprintf(stderr, "airlock-runner: --token-header: bad header name\n");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            char ch = a->token_header[i];
            if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-')) {
                fprintf(stderr, "airlock-runner: --token-header: bad header name\n");
                return -1;
            }
            a->token_header_lc[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
        }
        a->token_header_lc[n] = ':';
        a->token_header_lc[n + 1] = 0;
    }
    a->rcfg.identifier = a->identifier;
    a->rcfg.env_allow = a->env_allow;
    a->rcfg.leeway = a->leeway >= 0 ? a->leeway : TOK_LEEWAY_DEFAULT;
    return 0;
}

static int setup_dial(struct app *a)
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
    a->d_prot = prot;
    a->d_addr = addr;
    a->d_port = port;
    a->d_tls = !strcmp(prot, "wss");
    const char *sep = strchr(path, '?') ? "&" : "?";
    snprintf(a->d_path_full, sizeof a->d_path_full, "/%s%sidentifier=%s", path,
             strstr(path, "identifier=") ? "" : sep,
             strstr(path, "identifier=") ? "" : a->identifier);
    if (strstr(path, "identifier="))
        (void)snprintf(a->d_path_full, sizeof a->d_path_full, "/%s", path);
    return 0;
}

/* ---- main -------------------------------------------------------------------- */

static void on_stop(uv_signal_t *h, int signum)
{
    struct app *a = h->data;
    log_line(a, 1, "signal %d: stopping (terminals end with the runner)", signum);
    a->stopping = 1;
    uv_stop(a->loop);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* Join the control groups we were given, bound our process count, and
 * close every other inherited descriptor: nothing of whoever started us
 * stays open (an agent could otherwise reach it through us). */
/* Our key: from --link-key-fd (read once, closed), or random. */
static int load_link_key(struct app *a)
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
    for (ssize_t i = 0; i < n; i++) {
        char ch = buf[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_')) {
            fprintf(stderr, "airlock-runner: --link-key-fd: not base64url\n");
            return -1;
        }
    }
    memcpy(a->link_key, buf, (size_t)n);
    a->link_key[n] = 0;
    OPENSSL_cleanse(buf, sizeof buf);
    return 0;
}

static int confine(struct app *a)
{
    for (int i = 0; i < a->ncgroup_fds; i++) {
        int fd = a->cgroup_fds[i];
        if (write(fd, "0", 1) != 1) {
            fprintf(stderr, "airlock-runner: cannot join the control group on fd %d: %s\n", fd,
                    strerror(errno));
            return -1;
        }
        (void)close(fd);
    }
    if (a->max_procs) {
        struct rlimit rl = {(rlim_t)a->max_procs, (rlim_t)a->max_procs};
        if (setrlimit(RLIMIT_NPROC, &rl) != 0) {
            fprintf(stderr, "airlock-runner: --max-procs: %s\n", strerror(errno));
            return -1;
        }
    }
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < max && fd < 65536; fd++)
            (void)close((int)fd);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct app app;
    struct app *a = &app;
    if (parse_args(a, argc, argv) != 0)
        return 2;
    if (a->connect_url && load_link_key(a) != 0)
        return 1;
    if (confine(a) != 0)
        return 1;
    /* Nothing of ours is readable through /proc by a same-user agent. */
    (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* Orphans of agents come back to us to be reaped, not to init. */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);

    char why[TOK_REASON_MAX];
    int rc = tok_keyset_from_file(a->jwks_path, &a->keys, why, sizeof why);
    if (rc != AL_OK) {
        fprintf(stderr, "airlock-runner: cannot load --jwks %s: %s\n", a->jwks_path, why);
        return 1;
    }
    a->rcfg.keys = a->keys;
    if (a->jailed && geteuid() == 0 && !a->rcfg.set_user) {
        /* uid 0 mapped into the agent's namespace owns root's files there */
        fprintf(stderr, "airlock-runner: --agent-sandbox bwrap as root needs --agent-user USER\n");
        return 2;
    }
    if (a->jailed) {
        if (!a->jcfg.workspace && getcwd(a->cwd, sizeof a->cwd))
            a->jcfg.workspace = a->cwd;
        rc = jail_new(&a->jcfg, &a->jail, why, sizeof why);
        if (rc != AL_OK) {
            fprintf(stderr, "airlock-runner: --agent-sandbox bwrap: %s\n", why);
            return 1;
        }
        a->rcfg.jail = a->jail;
    }
    if (a->connect_url && setup_dial(a) != 0)
        return 2;

    a->loop = uv_default_loop();
    if (runner_new(a->loop, &a->rcfg, &a->runner) != AL_OK) {
        fprintf(stderr, "airlock-runner: out of memory\n");
        return 1;
    }
    lws_set_log_level(getenv("AIRLOCK_LWS_DEBUG") ? 0xfff
                      : a->rcfg.log_level >= 2    ? LLL_ERR | LLL_WARN | LLL_NOTICE
                                                  : LLL_ERR,
                      NULL);

    struct wsctx_config wc = {
        .loop = a->loop,
        .protocols = protocols,
        .user = a,
        .server = a->listen != NULL, /* wslisten.c accepts */
        .ssl = 1,
        .timeout_s = HANDSHAKE_TIMEOUT_S,
        .max_header_data = MAX_HEADER_DATA,
        .serv_buf_size = AL_MAX_FRAME + LWS_PRE + 1024,
    };
    char host[256] = "";
    int listen_port = 0;
    if (a->listen) {
        const char *colon = strrchr(a->listen, ':');
        uint64_t port;
        if (!colon || parse_u64(colon + 1, 65535, &port) != 0 ||
            (size_t)(colon - a->listen) >= sizeof host) {
            fprintf(stderr, "airlock-runner: --listen wants HOST:PORT, got %s\n", a->listen);
            return 2;
        }
        memcpy(host, a->listen, (size_t)(colon - a->listen));
        host[colon - a->listen] = 0;
        listen_port = (int)port;
    }
    a->ctx = wsctx_new(&wc);
    if (!a->ctx) {
        fprintf(stderr, "airlock-runner: cannot %s\n", a->listen ? "listen" : "start the client");
        return 1;
    }
    if (a->listen) {
        struct wsl_config lc = {
            .loop = a->loop,
            .vhost = lws_get_vhost_by_name(a->ctx, "default"),
            .host = host[0] && strcmp(host, "0.0.0.0") != 0 ? host : NULL,
            .port = listen_port,
            .lim = {LISTEN_MAX_CONNS, LISTEN_MAX_CONNS_PER_IP, LISTEN_REQUEST_TIMEOUT_MS},
            .prog = "airlock-runner",
            .instance = a->identifier,
            .log_level = a->rcfg.log_level,
        };
        char lerr[256] = "";
        if (!lc.vhost || wsl_start(&lc, &a->wsl, lerr, sizeof lerr) != AL_OK) {
            fprintf(stderr, "airlock-runner: %s (is the port free?)\n", lerr);
            lws_context_destroy(a->ctx);
            return 1;
        }
    }
    (void)uv_timer_init(a->loop, &a->redial);
    (void)uv_timer_init(a->loop, &a->max_age);
    a->redial.data = a->max_age.data = a;
    (void)uv_signal_init(a->loop, &a->sigterm);
    (void)uv_signal_init(a->loop, &a->sigint);
    a->sigterm.data = a->sigint.data = a;
    (void)uv_signal_start(&a->sigterm, on_stop, SIGTERM);
    (void)uv_signal_start(&a->sigint, on_stop, SIGINT);
    if (a->listen) {
        char bound[sizeof host + 8]; /* port 0: the one the kernel chose */
        (void)snprintf(bound, sizeof bound, "%s:%d", host, wsl_port(a->wsl));
        log_line(a, 1, "listening on %s for identifier %s", listen_port ? a->listen : bound,
                 a->identifier);
    } else
        dial(a);

    uv_run(a->loop, UV_RUN_DEFAULT);

    runner_free(a->runner);
    uv_close((uv_handle_t *)&a->redial, NULL);
    uv_close((uv_handle_t *)&a->max_age, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    lws_context_destroy(a->ctx);
    wsl_close(a->wsl); /* after the context: its wsis left their slots */
    a->wsl = NULL;
    /* let lws and libuv finish closing (bounded), then sweep what is left */
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(a->loop, close_walk, NULL);
    for (int i = 0; i < 100 && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(a->loop);
    tok_keyset_free(a->keys);
    jail_free(a->jail);
    free(a->env_allow_mem);
    return 0;
}
