/*
 * airlockd_serve: see airlockd_serve.h. The settings arrive as text
 * (struct airlockd_conf, flags first, then --config); each group is
 * checked by one function here, in a fixed order, so that the first bad
 * setting is the one reported: the log level, the sandboxes' bounds, the
 * server's limits (a table), the web sessions' lifetimes.
 */
#include "airlockd_serve.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "airlockd_conf.h"
#include "al_err.h"
#include "al_log.h"
#include "api.h"
#include "db.h"
#include "endpoint.h"
#include "lsbx.h"

enum { SESSION_S_MAX = 30 * 24 * 3600 }; /* --session-ttl, --session-idle (DB_SESSION_TTL_MAX_MS) */
#define SBX_MIN_MEMORY (32ull << 20)     /* below this a runner cannot start */
#define SERVE_LIMIT_MAX 100000000u       /* the largest value of a limit */

/* "123", "64K", "512M", "4G" -> bytes; -1 when not a size. */
static int parse_size(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -1;
    static const struct {
        char suffix;
        unsigned shift;
    } units[] = {{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}};
    for (size_t i = 0; *end && i < sizeof units / sizeof units[0]; i++)
        if ((*end == units[i].suffix || *end == units[i].suffix + 32) && !end[1]) {
            if (v > (max >> units[i].shift))
                return -1;
            v <<= units[i].shift;
            end++;
        }
    if (*end || v > max)
        return -1;
    *out = v;
    return 0;
}

/* A whole number in 1..max; 0, or -1. */
static int parse_count(const char *s, unsigned long max, unsigned *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < 1 || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* log-format: text (when unset) or json (al_log.h). */
static int serve_format(const struct airlockd_conf *c, int *format)
{
    *format = c->log_format ? al_log_format_of(c->log_format) : AL_LOG_TEXT;
    if (*format < 0) {
        airlockd_cmd_err("serve", "log format '%s': text or json", c->log_format);
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

/* log-level: error, info or debug (0, 1, 2); info when unset. */
static int serve_level(const struct airlockd_conf *c, int *level)
{
    static const char *const levels[] = {"error", "info", "debug"};
    *level = 1;
    if (!c->log_level)
        return 0;
    *level = -1;
    for (int i = 0; i < 3; i++)
        if (!strcmp(c->log_level, levels[i]))
            *level = i;
    if (*level < 0) {
        airlockd_cmd_err("serve", "log level '%s': error, info or debug", c->log_level);
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

/* no-bwrap and the local sandboxes' bounds. */
static int serve_sandbox(const struct airlockd_conf *c, struct cg_limits *lim)
{
    if (c->no_bwrap && strcmp(c->no_bwrap, "true") != 0 && strcmp(c->no_bwrap, "false") != 0) {
        airlockd_cmd_err("serve", "no-bwrap = true or false");
        return AIRLOCKD_RC_USAGE;
    }
    *lim = (struct cg_limits){LSBX_DEFAULT_MEMORY, LSBX_DEFAULT_PIDS, LSBX_DEFAULT_CPU};
    uint64_t cpu = 0;
    if (c->sbx_memory && (parse_size(c->sbx_memory, 1ull << 50, &lim->memory_bytes) != 0 ||
                          (lim->memory_bytes && lim->memory_bytes < SBX_MIN_MEMORY))) {
        airlockd_cmd_err("serve",
                         "sandbox-memory: a size such as 512M or 4G (0: no limit; at least 32M)");
        return AIRLOCKD_RC_USAGE;
    }
    if (c->sbx_pids && parse_size(c->sbx_pids, 1u << 22, &lim->pids) != 0) {
        airlockd_cmd_err("serve", "sandbox-pids: a number of processes (0: no limit)");
        return AIRLOCKD_RC_USAGE;
    }
    if (c->sbx_cpu && (parse_size(c->sbx_cpu, 100000, &cpu) != 0)) {
        airlockd_cmd_err("serve", "sandbox-cpu: percent of one core (0: no limit)");
        return AIRLOCKD_RC_USAGE;
    }
    if (c->sbx_cpu)
        lim->cpu_percent = (unsigned)cpu;
    if (c->proxy_path && strcmp(c->proxy_path, "runner") != 0 &&
        strcmp(c->proxy_path, "direct") != 0) {
        airlockd_cmd_err("serve", "proxy-path = runner or direct");
        return AIRLOCKD_RC_USAGE;
    }
    if (c->sbx_network && strcmp(c->sbx_network, "host") != 0 &&
        strcmp(c->sbx_network, "none") != 0) {
        airlockd_cmd_err("serve", "sandbox-network = host or none");
        return AIRLOCKD_RC_USAGE;
    }
    if (c->sbx_network && !strcmp(c->sbx_network, "none") && c->no_bwrap &&
        !strcmp(c->no_bwrap, "true")) {
        airlockd_cmd_err("serve",
                         "sandbox-network none needs bubblewrap (no-bwrap leaves agents unjailed)");
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

/* The server's limits and the web sessions' lifetimes into cfg (unset:
 * 0, the default). */
static int serve_limits(const struct airlockd_conf *c, struct api_config *cfg)
{
    const struct {
        const char *key, *val;
        unsigned *dst;
    } limits[] = {{"max-conns", c->max_conns, &cfg->max_conns},
                  {"max-conns-per-ip", c->max_conns_per_ip, &cfg->max_conns_per_ip},
                  {"request-timeout", c->request_timeout, &cfg->request_timeout_s},
                  {"audit-keep-days", c->audit_keep_days, &cfg->audit_keep_days},
                  {"audit-keep-rows", c->audit_keep_rows, &cfg->audit_keep_rows},
                  {"ping-interval", c->ping_interval, &cfg->ping_interval_s},
                  {"idle-timeout", c->idle_timeout, &cfg->idle_timeout_s}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        if (limits[i].val && parse_count(limits[i].val, SERVE_LIMIT_MAX, limits[i].dst) != 0) {
            airlockd_cmd_err("serve", "%s wants a whole number from 1 to %u", limits[i].key,
                             SERVE_LIMIT_MAX);
            return AIRLOCKD_RC_USAGE;
        }
    }
    /* a peer that pings as we do must never look idle */
    uint64_t ping = cfg->ping_interval_s ? cfg->ping_interval_s * 1000000ull : EP_DEFAULT_PING_US;
    uint64_t idle = cfg->idle_timeout_s ? cfg->idle_timeout_s * 1000000ull : EP_DEFAULT_IDLE_US;
    if (idle <= 2 * ping) {
        airlockd_cmd_err(
            "serve", "idle-timeout (%llu s) must be more than twice ping-interval (%llu s)",
            (unsigned long long)(idle / 1000000u), (unsigned long long)(ping / 1000000u));
        return AIRLOCKD_RC_USAGE;
    }
    if ((c->session_ttl && parse_count(c->session_ttl, SESSION_S_MAX, &cfg->session_ttl_s) != 0) ||
        (c->session_idle &&
         parse_count(c->session_idle, SESSION_S_MAX, &cfg->session_idle_s) != 0)) {
        airlockd_cmd_err("serve", "session-ttl and session-idle take 1..%u seconds", SESSION_S_MAX);
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

/* The flags, then --config for what they left unset; 0, 1 for --help
 * (printed), or an exit code. */
static int serve_settings(const struct airlockd_cmd *self, int argc, char **argv,
                          struct airlockd_conf *c)
{
    const char *config = NULL;
    bool verbose = false, no_bwrap = false;
    struct airlockd_opt opts[AIRLOCKD_CONF_KEYS + 3];
    size_t n = airlockd_conf_opts(c, opts);
    opts[n++] = (struct airlockd_opt){"--no-bwrap", NULL, &no_bwrap};
    opts[n++] = (struct airlockd_opt){"--verbose", NULL, &verbose};
    opts[n++] = (struct airlockd_opt){"--config", &config, NULL};
    int prc = airlockd_cmd_opts(self, argc, argv, opts, n);
    if (prc != 0)
        return prc;
    if (no_bwrap)
        c->no_bwrap = "true";
    if (verbose && !c->log_level)
        c->log_level = "debug";
    static char store[AIRLOCKD_CONF_MAX];
    if (config && (prc = airlockd_conf_read(config, c, store, sizeof store)) != 0)
        return prc;
    char why[PROXY_URL_MAX + 128] = "";
    if (c->proxy && proxycfg_finish(c->proxy, why, sizeof why) != 0) {
        airlockd_cmd_err("serve", "--config %s: %s", config, why);
        return AIRLOCKD_RC_USAGE;
    }
    if (c->platforms && platform_finish(c->platforms, why, sizeof why) != 0) {
        airlockd_cmd_err("serve", "--config %s: %s", config, why);
        return AIRLOCKD_RC_USAGE;
    }
    if (c->advertise && !db_replica_address_valid(c->advertise)) {
        airlockd_cmd_err("serve", "advertise: a ws:// or wss:// URL of at most %d characters",
                         DB_REPLICA_ADDR_MAX);
        return AIRLOCKD_RC_USAGE;
    }
    if (!c->listen) {
        airlockd_cmd_err("serve", "--listen HOST:PORT is required (or listen = in --config)");
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

int airlockd_serve(const struct airlockd_cmd *self, int argc, char **argv)
{
    struct airlockd_conf c;
    memset(&c, 0, sizeof c);
    static struct proxycfg upstreams; /* large: not on the stack */
    proxycfg_init(&upstreams);
    c.proxy = &upstreams;
    static struct platforms platforms; /* large: its tokens' cache */
    platforms_init(&platforms);
    c.platforms = &platforms;
    int prc = serve_settings(self, argc, argv, &c);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    struct api_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if ((prc = serve_level(&c, &cfg.log_level)) != 0 ||
        (prc = serve_format(&c, &cfg.log_format)) != 0 ||
        (prc = serve_sandbox(&c, &cfg.sandbox_limits)) != 0 || (prc = serve_limits(&c, &cfg)) != 0)
        return prc;
    if (!c.data)
        c.data = airlockd_cmd_data_dir();
    if (mkdir(c.data, AIRLOCKD_DATA_MODE) != 0 && errno != EEXIST) {
        airlockd_cmd_err("serve", "cannot create data directory %s: %s", c.data, strerror(errno));
        return AIRLOCKD_RC_FAIL;
    }
    cfg.data_dir = c.data;
    cfg.db_url = c.db;
    cfg.listen = c.listen;
    cfg.runner_bin = c.runner;
    cfg.no_bwrap = c.no_bwrap && !strcmp(c.no_bwrap, "true");
    cfg.sandbox_user = c.sbx_user;
    cfg.sandbox_no_network = c.sbx_network && !strcmp(c.sbx_network, "none");
    cfg.tls_cert = c.tls_cert;
    cfg.tls_key = c.tls_key;
    cfg.web_dir = c.web;
    cfg.proxy = &upstreams;
    cfg.platforms = &platforms;
    cfg.proxy_listen = c.proxy_listen;
    cfg.proxy_direct = c.proxy_path && !strcmp(c.proxy_path, "direct");
    cfg.advertise = c.advertise;
    cfg.recordings_dir = c.recordings;
    char err[512] = "";
    int rc = api_serve(&cfg, err, sizeof err);
    platforms_clear(&platforms);
    if (rc != AL_OK) {
        airlockd_cmd_err("serve", "%s", err[0] ? err : al_strerror(rc));
        return rc == AL_E_INVAL ? AIRLOCKD_RC_USAGE : AIRLOCKD_RC_FAIL;
    }
    return 0;
}
