/*
 * api_metrics: what monitoring reads: GET /healthz (open: "ok airlockd
 * <version>") and
 * GET /metrics (behind a credential), the relay's counters, each
 * sandbox's link and the credential proxy's calls per upstream in the
 * Prometheus text format, and airlock_build_info{version} 1.
 *
 * Not here: the counting itself (relay.c, proxy.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "al_version.h"
#include "api_local.h"
#include "proxy.h"
#include "relay.h"

/* Per upstream (labels are upstream names, [a-z0-9_-]: nothing to
 * escape): calls by status class ("cut": the answer was cut), bytes each
 * way, and the latency histogram (docs/proxy.md). */
static void metrics_proxy(const struct proxy *p, FILE *f)
{
    static const char *const classes[6] = {"cut", "1xx", "2xx", "3xx", "4xx", "5xx"};
    const struct proxycfg *pc = proxy_config(p);
    (void)fputs("# TYPE airlock_proxy_requests_total counter\n", f);
    for (unsigned i = 0; i < pc->n; i++) {
        const struct proxy_metrics *m = proxy_metrics_of(p, pc->up[i].name);
        for (unsigned k = 0; m && k < 6; k++)
            (void)fprintf(f, "airlock_proxy_requests_total{upstream=\"%s\",class=\"%s\"} %llu\n",
                          pc->up[i].name, classes[k], (unsigned long long)m->by_class[k]);
    }
    (void)fputs("# TYPE airlock_proxy_bytes_total counter\n", f);
    for (unsigned i = 0; i < pc->n; i++) {
        const struct proxy_metrics *m = proxy_metrics_of(p, pc->up[i].name);
        if (m)
            (void)fprintf(f,
                          "airlock_proxy_bytes_total{upstream=\"%s\",direction=\"up\"} %llu\n"
                          "airlock_proxy_bytes_total{upstream=\"%s\",direction=\"down\"} %llu\n",
                          pc->up[i].name, (unsigned long long)m->bytes_up, pc->up[i].name,
                          (unsigned long long)m->bytes_down);
    }
    (void)fputs("# TYPE airlock_proxy_latency_seconds histogram\n", f);
    for (unsigned i = 0; i < pc->n; i++) {
        const struct proxy_metrics *m = proxy_metrics_of(p, pc->up[i].name);
        for (unsigned k = 0; m && k < PROXY_LATENCY_BUCKETS; k++) {
            char le[32];
            if (proxy_latency_bounds_ms[k] == UINT64_MAX)
                (void)snprintf(le, sizeof le, "+Inf");
            else
                (void)snprintf(le, sizeof le, "%.3f", (double)proxy_latency_bounds_ms[k] / 1e3);
            (void)fprintf(f,
                          "airlock_proxy_latency_seconds_bucket{upstream=\"%s\",le=\"%s\"} %llu\n",
                          pc->up[i].name, le, (unsigned long long)m->latency_le[k]);
        }
        if (m)
            (void)fprintf(f,
                          "airlock_proxy_latency_seconds_sum{upstream=\"%s\"} %.3f\n"
                          "airlock_proxy_latency_seconds_count{upstream=\"%s\"} %llu\n",
                          pc->up[i].name, (double)m->latency_sum_ms / 1e3, pc->up[i].name,
                          (unsigned long long)m->requests);
    }
}

static void metrics_link_up(void *ud, const char *sandbox, int up, int64_t rtt_us)
{
    (void)rtt_us;
    (void)fprintf(ud, "airlock_link_up{sandbox=\"%s\"} %d\n", sandbox, up ? 1 : 0);
}

static void metrics_link_rtt(void *ud, const char *sandbox, int up, int64_t rtt_us)
{
    (void)up;
    if (rtt_us >= 0)
        (void)fprintf(ud, "airlock_link_rtt_seconds{sandbox=\"%s\"} %.6f\n", sandbox,
                      (double)rtt_us / 1e6);
}

int api_metrics_get(struct api *a, struct lws *wsi, struct call *c)
{
    (void)c;
    struct rl_metrics m;
    relay_metrics(a->relay, &m);
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f)
        return api_reply_error(wsi, 500, "out of memory");
    int n = fprintf(f,
                    "# TYPE airlock_sandboxes gauge\nairlock_sandboxes %u\n"
                    "# TYPE airlock_links_up gauge\nairlock_links_up %u\n"
                    "# TYPE airlock_terminals gauge\nairlock_terminals %u\n"
                    "# TYPE airlock_viewers gauge\nairlock_viewers %u\n"
                    "# TYPE airlock_output_bytes_total counter\nairlock_output_bytes_total %llu\n"
                    "# TYPE airlock_input_bytes_total counter\nairlock_input_bytes_total %llu\n"
                    "# TYPE airlock_resyncs_total counter\nairlock_resyncs_total %llu\n"
                    "# TYPE airlock_recording_errors_total counter\n"
                    "airlock_recording_errors_total %llu\n"
                    "# TYPE airlock_build_info gauge\n"
                    "airlock_build_info{version=\"%s\"} 1\n",
                    m.sandboxes, m.links_up, m.terminals, m.clients,
                    (unsigned long long)m.bytes_out, (unsigned long long)m.bytes_in,
                    (unsigned long long)m.resyncs, (unsigned long long)m.rec_errors, al_version());
    /* per sandbox: labels are sandbox ids ([a-z0-9._-]), nothing to escape */
    (void)fputs("# TYPE airlock_link_up gauge\n", f);
    relay_each_link(a->relay, metrics_link_up, f);
    (void)fputs("# TYPE airlock_link_rtt_seconds gauge\n", f);
    relay_each_link(a->relay, metrics_link_rtt, f);
    if (a->proxy)
        metrics_proxy(a->proxy, f);
    int bad = n < 0 || ferror(f);
    if (fclose(f) != 0 || bad) {
        free(body);
        return api_reply_error(wsi, 500, "out of memory");
    }
    int rc = api_reply(wsi, 200, "text/plain; version=0.0.4", body, blen);
    free(body);
    return rc;
}

int api_metrics_healthz(struct api *a, struct lws *wsi, struct call *c)
{
    (void)a;
    (void)c;
    /* "ok" first: a probe reads that; the version for a person's curl */
    char body[AL_VERSION_NAME_MAX + 16];
    int n = snprintf(body, sizeof body, "ok airlockd %s\n", al_version());
    size_t len = n < 0 ? 0 : (size_t)n < sizeof body ? (size_t)n : sizeof body - 1;
    return api_reply(wsi, 200, "text/plain", body, len);
}
