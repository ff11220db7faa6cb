/*
 * api_metrics: what monitoring reads: GET /healthz (open: "ok") and
 * GET /metrics (behind a credential), the relay's counters and each
 * sandbox's link in the Prometheus text format.
 *
 * Not here: the counting itself (relay.c).
 */
#include <stdio.h>
#include <stdlib.h>

#include "api_local.h"
#include "relay.h"

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
                    "airlock_recording_errors_total %llu\n",
                    m.sandboxes, m.links_up, m.terminals, m.clients,
                    (unsigned long long)m.bytes_out, (unsigned long long)m.bytes_in,
                    (unsigned long long)m.resyncs, (unsigned long long)m.rec_errors);
    /* per sandbox: labels are sandbox ids ([a-z0-9._-]), nothing to escape */
    (void)fputs("# TYPE airlock_link_up gauge\n", f);
    relay_each_link(a->relay, metrics_link_up, f);
    (void)fputs("# TYPE airlock_link_rtt_seconds gauge\n", f);
    relay_each_link(a->relay, metrics_link_rtt, f);
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
    return api_reply(wsi, 200, "text/plain", "ok\n", 3);
}
