/*
 * airlockd_conf: see airlockd_conf.h. keys[] is the table of settings:
 * the flag, whose name without "--" is the config key, and the field of
 * struct airlockd_conf it fills.
 */
#include "airlockd_conf.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *flag; /* "--data"; the config key is "data" */
    size_t off;       /* its field in struct airlockd_conf */
} keys[] = {
#define KEY(flag, field)                                                                           \
    {                                                                                              \
        flag, offsetof(struct airlockd_conf, field)                                                \
    }
    KEY("--data", data),
    KEY("--db", db),
    KEY("--listen", listen),
    KEY("--runner", runner),
    KEY("--log-level", log_level),
    KEY("--log-format", log_format),
    KEY("--tls-cert", tls_cert),
    KEY("--tls-key", tls_key),
    KEY("--web", web),
    KEY("--no-bwrap", no_bwrap),
    KEY("--max-conns", max_conns),
    KEY("--max-conns-per-ip", max_conns_per_ip),
    KEY("--request-timeout", request_timeout),
    KEY("--audit-keep-days", audit_keep_days),
    KEY("--audit-keep-rows", audit_keep_rows),
    KEY("--sandbox-user", sbx_user),
    KEY("--sandbox-network", sbx_network),
    KEY("--sandbox-memory", sbx_memory),
    KEY("--sandbox-pids", sbx_pids),
    KEY("--sandbox-cpu", sbx_cpu),
    KEY("--session-ttl", session_ttl),
    KEY("--session-idle", session_idle),
    KEY("--ping-interval", ping_interval),
    KEY("--idle-timeout", idle_timeout),
    KEY("--proxy-listen", proxy_listen),
    KEY("--proxy-path", proxy_path),
    KEY("--advertise", advertise),
    KEY("--recordings", recordings),
#undef KEY
};
enum { NKEYS = sizeof keys / sizeof keys[0] };
_Static_assert(NKEYS == AIRLOCKD_CONF_KEYS, "airlockd_conf.h counts the settings");

static const char **field(struct airlockd_conf *c, size_t i)
{
    return (const char **)(void *)((char *)c + keys[i].off);
}

size_t airlockd_conf_opts(struct airlockd_conf *c, struct airlockd_opt *opts)
{
    size_t n = 0;
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(keys[i].flag, "--no-bwrap") != 0)
            opts[n++] = (struct airlockd_opt){keys[i].flag, field(c, i), NULL};
    return n;
}

/* Cut "  key = value  " in place: the key at *line, the value returned;
 * NULL without '='. */
static char *split_line(char *line)
{
    char *eq = strchr(line, '=');
    if (!eq)
        return NULL;
    char *k_end = eq;
    while (k_end > line && (k_end[-1] == ' ' || k_end[-1] == '\t'))
        k_end--;
    *k_end = 0;
    char *v = eq + 1 + strspn(eq + 1, " \t");
    size_t vl = strlen(v);
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t' || v[vl - 1] == '\r'))
        v[--vl] = 0;
    return v;
}

int airlockd_conf_read(const char *path, struct airlockd_conf *c, char *store, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        airlockd_cmd_err("serve", "cannot read --config %s: %s", path, strerror(errno));
        return AIRLOCKD_RC_FAIL;
    }
    size_t n = fread(store, 1, cap - 1, f);
    int big = n == cap - 1 && fgetc(f) != EOF;
    (void)fclose(f);
    if (big) {
        airlockd_cmd_err("serve", "--config %s: over %d bytes", path, AIRLOCKD_CONF_MAX);
        return AIRLOCKD_RC_USAGE;
    }
    store[n] = 0;
    unsigned lineno = 0;
    for (char *line = store, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        line += strspn(line, " \t");
        if (!*line || *line == '#')
            continue;
        char *v = split_line(line);
        if (!v) {
            airlockd_cmd_err("serve", "%s:%u: expected key = value", path, lineno);
            return AIRLOCKD_RC_USAGE;
        }
        if (proxycfg_is_key(line)) {
            char why[PROXY_URL_MAX + 128] = "";
            if (!c->proxy || proxycfg_set(c->proxy, line, v, why, sizeof why) != 0) {
                airlockd_cmd_err("serve", "%s:%u: %s", path, lineno, why[0] ? why : line);
                return AIRLOCKD_RC_USAGE;
            }
            continue;
        }
        if (platform_is_key(line)) {
            char why[512] = "";
            if (!c->platforms || platform_set(c->platforms, line, v, why, sizeof why) != 0) {
                airlockd_cmd_err("serve", "%s:%u: %s", path, lineno, why[0] ? why : line);
                return AIRLOCKD_RC_USAGE;
            }
            continue;
        }
        size_t i = 0;
        while (i < NKEYS && strcmp(keys[i].flag + 2, line) != 0)
            i++;
        if (i == NKEYS) {
            airlockd_cmd_err("serve", "%s:%u: unknown key '%s'", path, lineno, line);
            return AIRLOCKD_RC_USAGE;
        }
        if (!*field(c, i))
            *field(c, i) = v;
    }
    return 0;
}
