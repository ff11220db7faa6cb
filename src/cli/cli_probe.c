/*
 * cli_probe: see cli_probe.h.
 *
 * Data model: the steps fill one JSON report (json_t, owned here), which
 * is then printed as it is (--json) or as text. Times are milliseconds
 * (doubles) measured around each request with uv_hrtime().
 */
#include "cli_probe.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "al_err.h"
#include "al_limits.h"
#include "al_version.h"
#include "cli_app.h"
#include "cli_err.h"
#include "cli_fmt.h"
#include "cli_wsprobe.h"

#define NS_PER_US 1000u
#define US_PER_MS 1000.0
#define HTTP_OK 200
#define HEALTH_MAX_BODY 4096
#define WHY_MAX 512

struct probe {
    struct cli_net *net;
    const struct cli_config *cfg;
    json_t *report;
    int exit;
    char why[WHY_MAX];
};

/* One GET; the answer in res, its time in *ms. AL_OK when any answer came. */
static int get(struct probe *p, const char *path, size_t max, struct cli_http_result *res,
               double *ms)
{
    uint64_t t0 = uv_hrtime();
    int rc = cli_http(p->net, "GET", path, NULL, max, res);
    /* to the microsecond: more digits would be noise */
    uint64_t us = (uv_hrtime() - t0) / NS_PER_US;
    *ms = (double)us / US_PER_MS;
    return rc;
}

static void fail(struct probe *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct probe *p, int code, const char *fmt, ...)
{
    p->exit = code;
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

static json_t *parse(const struct cli_http_result *res)
{
    return res->body ? json_loadb(res->body, res->len, JSON_REJECT_DUPLICATES, NULL) : NULL;
}

/* The reason a failed exchange gives, with a hint for certificates. */
static void net_failure(struct probe *p, const struct cli_http_result *res)
{
    fail(p, CLI_EXIT_DOWN, "cannot reach the server: %s%s", res->why,
         cli_net_hint(p->net, res->why));
}

static int step_health(struct probe *p)
{
    struct cli_http_result res;
    double ms;
    int rc = get(p, "/healthz", HEALTH_MAX_BODY, &res, &ms);
    json_t *h = json_object();
    (void)json_object_set_new(p->report, "server", h);
    (void)json_object_set_new(h, "reachable", json_boolean(rc == AL_OK));
    if (rc != AL_OK) {
        free(res.body);
        if (rc == AL_E_IO) {
            (void)json_object_set_new(h, "error", json_string(res.why));
            net_failure(p, &res);
        } else {
            fail(p, CLI_EXIT_OTHER, "the health check failed: %s", al_strerror(rc));
        }
        return -1;
    }
    (void)json_object_set_new(h, "status", json_integer(res.status));
    (void)json_object_set_new(h, "ms", json_real(ms));
    (void)json_object_set_new(h, "peer", json_string(res.peer));
    (void)json_object_set_new(h, "version", res.server[0] ? json_string(res.server) : json_null());
    int ok = res.status == HTTP_OK && res.body && !strncmp(res.body, "ok", 2);
    (void)json_object_set_new(h, "healthy", json_boolean(ok));
    free(res.body);
    if (!ok) {
        fail(p, res.status == HTTP_OK ? CLI_EXIT_PROTO : cli_exit_of_status(res.status),
             "the server answered /healthz with HTTP %u (%s): is this airlockd, and is the "
             "URL's path right?",
             res.status, res.status == HTTP_OK ? "not \"ok\"" : cli_status_hint(res.status));
        return -1;
    }
    return 0;
}

static int step_key(struct probe *p)
{
    json_t *k = json_object();
    (void)json_object_set_new(p->report, "key", k);
    (void)json_object_set_new(k, "given", json_boolean(p->cfg->key[0] != 0));
    if (!p->cfg->key[0]) {
        (void)json_object_set_new(k, "accepted", json_false());
        fail(p, CLI_EXIT_AUTH,
             "no API key: give --key, set AIRLOCK_API_KEY or put key=... in "
             "~/.config/airlock/config");
        return -1;
    }
    struct cli_http_result res;
    double ms;
    int rc = get(p, "/v1/session", CLI_HTTP_MAX_BODY, &res, &ms);
    if (rc != AL_OK) {
        free(res.body);
        if (rc == AL_E_IO)
            net_failure(p, &res);
        else
            fail(p, CLI_EXIT_OTHER, "checking the key: %s", al_strerror(rc));
        return -1;
    }
    (void)json_object_set_new(k, "status", json_integer(res.status));
    (void)json_object_set_new(k, "ms", json_real(ms));
    json_t *j = parse(&res);
    free(res.body);
    int ok = res.status == HTTP_OK;
    (void)json_object_set_new(k, "accepted", json_boolean(ok));
    if (!ok) {
        fail(p, cli_exit_of_status(res.status), "the key was refused (HTTP %u): %s", res.status,
             cli_status_hint(res.status));
        json_decref(j);
        return -1;
    }
    const char *user = json_string_value(json_object_get(j, "name"));
    const char *role = json_string_value(json_object_get(j, "role"));
    if (!user || !role) {
        json_decref(j);
        fail(p, CLI_EXIT_PROTO, "the server's /v1/session answer has no name and role");
        return -1;
    }
    (void)json_object_set_new(k, "user", json_string(user));
    (void)json_object_set_new(k, "role", json_string(role));
    json_decref(j);
    return 0;
}

/* GET path into *arr (a JSON array). */
static int get_list(struct probe *p, const char *path, json_t **arr, double *ms)
{
    struct cli_http_result res;
    int rc = get(p, path, CLI_HTTP_MAX_BODY, &res, ms);
    if (rc != AL_OK) {
        free(res.body);
        if (rc == AL_E_IO)
            net_failure(p, &res);
        else
            fail(p, CLI_EXIT_OTHER, "GET %s: %s", path, al_strerror(rc));
        return -1;
    }
    json_t *j = parse(&res);
    free(res.body);
    if (res.status != HTTP_OK) {
        const char *msg = json_string_value(json_object_get(j, "error"));
        fail(p, cli_exit_of_status(res.status), "GET %s was refused: %s", path,
             msg ? msg : cli_status_hint(res.status));
        json_decref(j);
        return -1;
    }
    if (!json_is_array(j)) {
        json_decref(j);
        fail(p, CLI_EXIT_PROTO, "GET %s: the answer is not a JSON list", path);
        return -1;
    }
    *arr = j;
    return 0;
}

static int step_api(struct probe *p)
{
    json_t *sb = NULL, *tm = NULL, *api = json_object();
    (void)json_object_set_new(p->report, "api", api);
    double ms_sb, ms_tm;
    if (get_list(p, "/v1/sandboxes", &sb, &ms_sb) != 0)
        return -1;
    (void)json_object_set_new(api, "sandboxes_ms", json_real(ms_sb));
    json_t *list = json_array();
    size_t i;
    json_t *s;
    json_array_foreach(sb, i, s)
    {
        json_int_t rtt = json_integer_value(json_object_get(s, "rtt_us"));
        json_t *e = json_pack("{s:O?, s:O?, s:b, s:O?}", "id", json_object_get(s, "id"), "kind",
                              json_object_get(s, "kind"), "link_up",
                              json_is_true(json_object_get(s, "link_up")), "link_since",
                              json_object_get(s, "link_since"));
        if (e)
            (void)json_object_set_new(e, "rtt_ms",
                                      rtt > 0 ? json_real((double)rtt / US_PER_MS) : json_null());
        (void)json_array_append_new(list, e);
    }
    (void)json_object_set_new(p->report, "sandboxes", list);
    json_decref(sb);
    if (get_list(p, "/v1/terminals", &tm, &ms_tm) != 0)
        return -1;
    (void)json_object_set_new(api, "terminals_ms", json_real(ms_tm));
    json_int_t running = 0;
    json_t *t;
    json_array_foreach(tm, i, t)
    {
        if (!strcmp(str(t, "state"), "running"))
            running++;
    }
    (void)json_object_set_new(
        p->report, "terminals",
        json_pack("{s:I, s:I}", "total", (json_int_t)json_array_size(tm), "running", running));
    json_decref(tm);
    return 0;
}

/* ---- text ------------------------------------------------------------------- */

static double num(json_t *o, const char *k)
{
    return json_number_value(json_object_get(o, k));
}

static void print_text(const struct probe *p, FILE *out)
{
    json_t *r = p->report;
    const struct cli_config *c = p->cfg;
    fprintf(out, "client     airlock %s\n", al_version());
    fprintf(out, "server     %s (%s port %d, %s%s)\n", c->url, c->host, c->port,
            c->tls ? "https" : "http", c->tls && c->insecure ? ", certificate not checked" : "");
    json_t *h = json_object_get(r, "server");
    if (json_is_true(json_object_get(h, "healthy"))) {
        const char *v = str(h, "version"), *peer = str(h, "peer");
        fprintf(out, "health     ok in %.1f ms from %s (server: %s)\n", num(h, "ms"),
                *peer ? peer : "?", *v ? v : "not reported");
    }
    json_t *k = json_object_get(r, "key");
    if (json_is_true(json_object_get(k, "accepted")))
        fprintf(out, "key        accepted in %.1f ms: %s, role %s\n", num(k, "ms"), str(k, "user"),
                str(k, "role"));
    json_t *api = json_object_get(r, "api");
    json_t *sbs = json_object_get(r, "sandboxes");
    if (sbs) {
        size_t i, up = 0;
        json_t *s;
        json_array_foreach(sbs, i, s)
        {
            if (json_is_true(json_object_get(s, "link_up")))
                up++;
        }
        fprintf(out, "api        GET /v1/sandboxes in %.1f ms\n", num(api, "sandboxes_ms"));
        fprintf(out, "sandboxes  %zu (%zu with the link up)\n", json_array_size(sbs), up);
        json_array_foreach(sbs, i, s)
        {
            char age[32], rtt[32];
            cli_fmt_age(age, sizeof age, json_integer_value(json_object_get(s, "link_since")),
                        (int64_t)time(NULL));
            double ms = num(s, "rtt_ms");
            cli_fmt_rtt(rtt, sizeof rtt, (int64_t)(ms * US_PER_MS));
            int linked = json_is_true(json_object_get(s, "link_up"));
            fprintf(out, "  %-20s %-8s link %-5s since %-6s rtt %s\n", str(s, "id"), str(s, "kind"),
                    linked ? "up" : "down", linked ? age : "-", linked ? rtt : "-");
        }
    }
    json_t *tm = json_object_get(r, "terminals");
    if (tm)
        fprintf(out, "terminals  %lld (%lld running; GET /v1/terminals in %.1f ms)\n",
                (long long)json_integer_value(json_object_get(tm, "total")),
                (long long)json_integer_value(json_object_get(tm, "running")),
                num(api, "terminals_ms"));
    fprintf(out, "probe: %s\n", p->exit == CLI_EXIT_OK ? "ok" : "FAILED");
}

static void print_text_of(const void *p, FILE *out)
{
    print_text(p, out);
}

int cli_probe(struct cli_net *net, const struct cli_config *cfg, int json, FILE *out)
{
    struct probe p;
    memset(&p, 0, sizeof p);
    p.net = net;
    p.cfg = cfg;
    p.report = json_pack("{s:s, s:s, s:i, s:b, s:b}", "url", cfg->url, "host", cfg->host, "port",
                         cfg->port, "tls", cfg->tls, "insecure", cfg->insecure);
    if (!p.report) {
        fprintf(stderr, "airlock: probe: out of memory\n");
        return CLI_EXIT_OTHER;
    }
    (void)json_object_set_new(p.report, "client", json_pack("{s:s}", "version", al_version()));
    if (step_health(&p) == 0 && step_key(&p) == 0)
        (void)step_api(&p);
    cli_probe_finish(p.report, p.exit, p.why, json, out, print_text_of, &p);
    json_decref(p.report);
    return p.exit;
}

void cli_probe_finish(json_t *report, int exit, const char *why, int json, FILE *out,
                      void (*text)(const void *ctx, FILE *out), const void *ctx)
{
    (void)json_object_set_new(report, "exit", json_integer(exit));
    (void)json_object_set_new(report, "error", exit ? json_string(why) : json_null());
    if (json) {
        char *s = json_dumps(report, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        if (s)
            fprintf(out, "%s\n", s);
        free(s);
    } else {
        text(ctx, out);
    }
    if (exit)
        fprintf(stderr, "airlock: probe: %s\n", why);
}

/* ---- the probe command ------------------------------------------------------- */

/* A whole number from s in [lo, hi], or -1. */
static long long whole(const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    return v;
}

/* The first line of a token file (at most AL_MAX_TOKEN bytes). */
static int read_token(const char *path, char *out, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "airlock: probe: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!fgets(out, (int)cap, f))
        out[0] = 0;
    (void)fclose(f);
    out[strcspn(out, "\r\n")] = 0;
    if (!out[0]) {
        fprintf(stderr, "airlock: probe: %s holds no token\n", path);
        return -1;
    }
    return 0;
}

/* `airlock probe ws://...`: options after the URL's (cli_wsprobe.h). */
static int wsprobe_cmd(struct cli_app *a, const char *url, int argc, char **argv, int json)
{
    static struct cli_config cfg; /* large: its headers */
    memset(&cfg, 0, sizeof cfg);
    cfg.insecure = a->flag_insecure;
    static char token[AL_MAX_TOKEN + 2], wrong[AL_MAX_TOKEN + 2];
    struct wsprobe_opts o = {.url = url,
                             .pings = WSPROBE_DEFAULT_PINGS,
                             .bytes = WSPROBE_DEFAULT_BYTES,
                             .idle_max_s = WSPROBE_DEFAULT_IDLE_MAX_S,
                             .age_max_s = WSPROBE_DEFAULT_AGE_MAX_S,
                             .ping_interval_ms = WSPROBE_DEFAULT_PING_MS,
                             .json = json};
    for (int i = 0; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long long n;
        if (!strcmp(k, "--json") || !strcmp(k, "--insecure") || (k[0] == 'w' && strstr(k, "://")))
            continue; /* taken already */
        if (!v)
            return cli_err_usage("probe: %s needs a value", k);
        i++;
        if (!strcmp(k, "--token")) {
            (void)snprintf(token, sizeof token, "%s", v);
            o.token = token;
        } else if (!strcmp(k, "--token-file")) {
            if (read_token(v, token, sizeof token) != 0)
                return CLI_EXIT_USAGE;
            o.token = token;
        } else if (!strcmp(k, "--wrong-token")) {
            (void)snprintf(wrong, sizeof wrong, "%s", v);
            o.wrong_token = wrong;
        } else if (!strcmp(k, "--token-header")) {
            if (strlen(v) > CLI_HEADER_NAME_MAX || strcspn(v, ": \t\r\n") != strlen(v) || !*v)
                return cli_err_usage("probe: --token-header: a header name, not '%s'", v);
            (void)snprintf(cfg.token_header, sizeof cfg.token_header, "%s", v);
        } else if (!strcmp(k, "--header")) {
            const char *colon = strchr(v, ':');
            if (cfg.nheaders >= CLI_HEADERS_MAX)
                return cli_err_usage("probe: at most 16 --header, not more (%s)", v);
            if (!colon || colon == v || strlen(v) >= CLI_HEADER_MAX ||
                (size_t)(colon - v) > CLI_HEADER_NAME_MAX || strpbrk(v, "\r\n") ||
                strcspn(v, " \t") < (size_t)(colon - v))
                return cli_err_usage("probe: --header wants 'Name: value', not '%s'", v);
            (void)snprintf(cfg.headers[cfg.nheaders++], CLI_HEADER_MAX, "%s", v);
        } else if (!strcmp(k, "--cacert")) {
            if (strlen(v) >= sizeof cfg.cacert || access(v, R_OK) != 0)
                return cli_err_usage("probe: --cacert: cannot read %s", v);
            (void)snprintf(cfg.cacert, sizeof cfg.cacert, "%s", v);
        } else if (!strcmp(k, "--idle-max") || !strcmp(k, "--age-max")) {
            if ((n = whole(v, 0, WSPROBE_MAX_WAIT_S)) < 0)
                return cli_err_usage(
                    "probe: --idle-max and --age-max take 0 to 3600 seconds, not %s", v);
            *(k[2] == 'i' ? &o.idle_max_s : &o.age_max_s) = (unsigned)n;
        } else if (!strcmp(k, "--pings")) {
            if ((n = whole(v, 1, WSPROBE_MAX_PINGS)) < 0)
                return cli_err_usage("probe: --pings takes 1 to 10000, not %s", v);
            o.pings = (unsigned)n;
        } else if (!strcmp(k, "--bytes")) {
            if ((n = whole(v, 1, WSPROBE_MAX_BYTES)) < 0)
                return cli_err_usage("probe: --bytes takes 1 to 67108864, not %s", v);
            o.bytes = (uint64_t)n;
        } else if (!strcmp(k, "--ping-interval-ms")) {
            if ((n = whole(v, 10, 600000)) < 0)
                return cli_err_usage("probe: --ping-interval-ms takes 10 to 600000, not %s", v);
            o.ping_interval_ms = (unsigned)n;
        } else {
            return cli_err_usage("probe: unknown argument %s", k);
        }
    }
    if (!a->loop_ok) {
        if (uv_loop_init(&a->loop) != 0) {
            fprintf(stderr, "airlock: cannot start the event loop\n");
            return CLI_EXIT_OTHER;
        }
        a->loop_ok = 1;
    }
    return cli_wsprobe(&a->loop, &cfg, &o, stdout);
}

int cli_probe_cmd(struct cli_app *a, int argc, char **argv)
{
    int json = 0;
    const char *ws_url = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--insecure"))
            a->flag_insecure = 1;
        else if (!strncmp(argv[i], "ws://", 5) || !strncmp(argv[i], "wss://", 6))
            ws_url = argv[i];
        else if (!strncmp(argv[i], "http://", 7) || !strncmp(argv[i], "https://", 8))
            a->flag_url = argv[i];
        else if (!ws_url && argv[i][0] == '-' && i + 1 < argc)
            i++; /* a path probe's option: checked below */
        else if (!ws_url)
            return cli_err_usage("probe: unknown argument %s", argv[i]);
    }
    if (ws_url)
        return wsprobe_cmd(a, ws_url, argc, argv, json);
    for (int i = 0; i < argc; i++) /* airlockd's checks take no other option */
        if (argv[i][0] == '-' && strcmp(argv[i], "--json") != 0 &&
            strcmp(argv[i], "--insecure") != 0)
            return cli_err_usage("probe: %s is for a WebSocket URL (ws:// or wss://)", argv[i]);
    int rc = cli_app_net(a);
    if (rc != CLI_EXIT_OK)
        return rc;
    return cli_probe(a->net, &a->cfg, json, stdout);
}
