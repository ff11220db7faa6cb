/*
 * airlockd: the control plane. A table of subcommands (later issues add
 * serve, ...); each parses its own flags with one small option table.
 *
 * Data model: struct cmd names a subcommand, its synopsis and its handler
 * ("user" has a table of its own: user add, ls, rm); struct opt binds a
 * flag to where its value goes (a string pointer, or a bool for a flag
 * without value; a NULL name is the one positional argument). Exit codes:
 * 0 success, 1 runtime failure, 2 usage error; every failure is one line
 * on stderr.
 *
 *   airlockd keygen [--data DIR] [--rotate]
 *   airlockd token  [--data DIR] --aud AUD --scope SCOPE [--sub SUB]
 *                   [--iss ISS] [--ttl SECONDS]
 *   airlockd user add NAME --role admin|operator|viewer [--data DIR] [--db URL]
 *   airlockd user ls [--data DIR] [--db URL]
 *   airlockd user rm NAME [--data DIR] [--db URL]
 *   airlockd serve [--config FILE] [--data DIR] [--db URL] --listen HOST:PORT [...]
 *                  (api.h; a --config file holds "key = value" lines named
 *                  like the flags, which win over it)
 *   airlockd signer --fd N --data DIR [--log-level N]
 *                  (internal: the key-holding process serve starts, signer.h)
 *
 * The database is DIR/airlock.db (db.h), or the one --db names (a db.h URL:
 * postgres://... for PostgreSQL; DIR still holds the signing key and the
 * recordings); user add creates DIR (0700) and the SQLite database when
 * missing and prints the new API key, once, on stdout.
 *
 * --data defaults to $AIRLOCK_DATA, else ./airlock-data.
 */
#include "al_err.h"
#include "api.h"
#include "db.h"
#include "keys.h"
#include "lsbx.h"
#include "signer.h"
#include "tok_sign.h"
#include "token.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum {
    RC_FAIL = 1,
    RC_USAGE = 2,
    OPT_MAX = 48,                   /* flags per subcommand */
    CONF_MAX = 16384,               /* bytes of a --config file */
    SESSION_S_MAX = 30 * 24 * 3600, /* --session-ttl, --session-idle (DB_SESSION_TTL_MAX_MS) */
    DATA_DIR_MODE = 0700,           /* a data directory user add creates */
    TIME_TEXT_MAX = 32,             /* "2025-01-31T23:59:59Z" */
};

#define DATA_DEFAULT "./airlock-data"
#define SBX_MIN_MEMORY (32ull << 20) /* below this a runner cannot start */
#define DATA_ENV "AIRLOCK_DATA"
#define SUB_DEFAULT "operator"

struct opt {
    const char *name;   /* "--aud"; NULL: the positional argument */
    const char **value; /* receives the argument; NULL for a bool flag */
    bool *flag;         /* set for a bool flag */
};

struct cmd {
    const char *name;
    const char *synopsis;
    const char *summary;
    int (*run)(const struct cmd *self, int argc, char **argv);
};

static int cmd_keygen(const struct cmd *self, int argc, char **argv);
static int cmd_token(const struct cmd *self, int argc, char **argv);
static int cmd_user(const struct cmd *self, int argc, char **argv);
static int cmd_serve(const struct cmd *self, int argc, char **argv);
static int cmd_signer(const struct cmd *self, int argc, char **argv);
static int cmd_help(const struct cmd *self, int argc, char **argv);

static const struct cmd cmds[] = {
    {"keygen", "[--data DIR] [--rotate]",
     "create the signing key (DIR/" KEYS_PRIVATE_FILE ", 0600) and DIR/" KEYS_JWKS_FILE
     "; --rotate makes a new current key and keeps the old public keys",
     cmd_keygen},
    {"token", "[--data DIR] --aud AUD --scope SCOPE [--sub SUB] [--iss ISS] [--ttl SECONDS]",
     "mint a signed token and print it on stdout", cmd_token},
    {"user", "add NAME --role ROLE | ls | rm NAME  [--data DIR] [--db URL]",
     "manage the people who may use airlockd (roles: admin, operator, viewer); add prints the "
     "new API key once, DIR/" DB_FILE_NAME " keeps only its hash",
     cmd_user},
    {"serve",
     "[--config FILE] [--data DIR] [--db URL] --listen HOST:PORT [--tls-cert PEM --tls-key PEM] "
     "[--runner PATH] [--no-bwrap] [--web DIR] [--session-ttl SECONDS] [--session-idle SECONDS] "
     "[--log-level error|info|debug] [--verbose] "
     "[--sandbox-user USER] [--sandbox-network host|none] [--sandbox-memory SIZE] "
     "[--sandbox-pids N] [--sandbox-cpu PERCENT] "
     "[--max-conns N] [--max-conns-per-ip N] [--request-timeout SECONDS] [--audit-keep-days N] "
     "[--audit-keep-rows N]",
     "run the control plane: the JSON API behind API keys, runners (local under bubblewrap, "
     "static, reverse), terminals relayed to clients and recorded, the web page",
     cmd_serve},
    {"signer", "--fd N --data DIR [--log-level 0|1|2]",
     "internal: the process serve starts to hold the signing key and mint its tokens "
     "(docs/security.md)",
     cmd_signer},
    {"help", "[COMMAND]", "show this help, or a command's", cmd_help},
};
enum { NCMDS = sizeof cmds / sizeof cmds[0] };

/* The one error line of a failure: "airlockd[ CMD]: message" on stderr. */
__attribute__((format(printf, 2, 3))) static void errline(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)fprintf(stderr, "airlockd%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    // NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): see tok_reason in token.c
    (void)vfprintf(stderr, fmt, ap);
    (void)fputc('\n', stderr);
    va_end(ap);
}

static void usage_all(FILE *to)
{
    (void)fputs("usage: airlockd COMMAND [OPTIONS]\n\ncommands:\n", to);
    for (size_t i = 0; i < NCMDS; i++)
        (void)fprintf(to, "  %-8s %s\n           %s\n", cmds[i].name, cmds[i].synopsis,
                      cmds[i].summary);
    (void)fputs("\n--data defaults to $" DATA_ENV ", else " DATA_DEFAULT ".\n"
                "--db URL: that database (postgres://... or sqlite:PATH) instead of "
                "DIR/" DB_FILE_NAME ".\n"
                "Exit status: 0 ok, 1 failure, 2 usage error.\n",
                to);
}

static void usage_cmd(const struct cmd *c, FILE *to)
{
    (void)fprintf(to, "usage: airlockd %s %s\n  %s\n", c->name, c->synopsis, c->summary);
}

static bool is_help(const char *a)
{
    return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0;
}

/* Parse argv[1..argc) against opts. Accepts "--name value" and
 * "--name=value". Returns 0, 1 for --help (printed), or RC_USAGE. */
static int parse_opts(const struct cmd *c, int argc, char **argv, const struct opt *opts,
                      size_t nopts)
{
    bool seen[OPT_MAX] = {false};
    if (nopts > OPT_MAX) {
        errline(c->name, "internal: %zu options, at most %d", nopts, (int)OPT_MAX);
        return RC_USAGE;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            usage_cmd(c, stdout);
            return 1;
        }
        const struct opt *o = NULL;
        size_t oi = 0;
        if (a[0] != '-') { /* the positional argument, if the command has one */
            for (; oi < nopts; oi++) {
                if (!opts[oi].name && !seen[oi]) {
                    o = &opts[oi];
                    break;
                }
            }
            if (o) {
                seen[oi] = true;
                *o->value = a;
                continue;
            }
        }
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        for (oi = 0; a[0] == '-' && oi < nopts; oi++) {
            if (opts[oi].name && strlen(opts[oi].name) == nlen &&
                strncmp(opts[oi].name, a, nlen) == 0) {
                o = &opts[oi];
                break;
            }
        }
        if (!o) {
            errline(c->name, "unknown %s '%s' (see airlockd %s --help)",
                    a[0] == '-' ? "option" : "argument", a, c->name);
            return RC_USAGE;
        }
        if (seen[oi]) {
            errline(c->name, "%s given twice", o->name);
            return RC_USAGE;
        }
        seen[oi] = true;
        if (!o->value) {
            if (eq) {
                errline(c->name, "%s takes no value", o->name);
                return RC_USAGE;
            }
            *o->flag = true;
            continue;
        }
        const char *v;
        if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            errline(c->name, "%s needs a value", o->name);
            return RC_USAGE;
        }
        if (v[0] == '\0') {
            errline(c->name, "%s needs a non-empty value", o->name);
            return RC_USAGE;
        }
        *o->value = v;
    }
    return 0;
}

static const char *default_data_dir(void)
{
    const char *env = getenv(DATA_ENV);
    return env && env[0] != '\0' ? env : DATA_DEFAULT;
}

/* A whole decimal number in [lo, hi]; false otherwise. */
static bool parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!s || s[0] < '0' || s[0] > '9')
        return false; /* no sign, no space */
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || !end || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int cmd_keygen(const struct cmd *self, int argc, char **argv)
{
    const char *data = NULL;
    bool rotate = false;
    const struct opt opts[] = {
        {"--data", &data, NULL},
        {"--rotate", NULL, &rotate},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!data)
        data = default_data_dir();

    struct keys_init_result res;
    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    int rc = keys_init_dir(data, rotate, &res, reason, sizeof reason);
    if (rc != AL_OK) {
        errline("keygen", "%s", reason[0] ? reason : al_strerror(rc));
        return RC_FAIL;
    }
    if (printf("%s signing key %s in %s/" KEYS_PRIVATE_FILE "; %s/" KEYS_JWKS_FILE
               " publishes %zu key%s\n",
               rotate ? "rotated: new" : "created", res.kid, data, data, res.jwks_keys,
               res.jwks_keys == 1 ? "" : "s") < 0 ||
        fflush(stdout) != 0)
        return RC_FAIL;
    return 0;
}

/* What `serve` takes from flags, then from --config for what flags left unset. */
struct serve_conf {
    const char *data, *db, *listen, *runner, *log_level, *tls_cert, *tls_key, *web, *no_bwrap;
    /* limits (api.h): whole numbers, unset = the default */
    const char *max_conns, *max_conns_per_ip, *request_timeout, *audit_keep_days, *audit_keep_rows;
    const char *sbx_user, *sbx_network, *sbx_memory, *sbx_pids, *sbx_cpu;
    const char *session_ttl, *session_idle;
};

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

/* The limits serve takes: key, where it goes, largest value. */
#define SERVE_LIMIT_MAX 100000000u

/*
 * A config file: "key = value" lines, '#' comments, keys as the flags
 * without "--" (data, db, listen, runner, log-level, tls-cert, tls-key, web,
 * no-bwrap = true|false, session-ttl, session-idle, max-conns, max-conns-per-ip,
 * request-timeout, audit-keep-days, audit-keep-rows, sandbox-user,
 * sandbox-network, sandbox-memory, sandbox-pids, sandbox-cpu). Fills what is
 * still NULL; values live in store.
 */
static int read_config(const char *path, struct serve_conf *c, char *store, size_t cap)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        errline("serve", "cannot read --config %s: %s", path, strerror(errno));
        return RC_FAIL;
    }
    size_t n = fread(store, 1, cap - 1, f);
    int big = n == cap - 1 && fgetc(f) != EOF;
    (void)fclose(f);
    if (big) {
        errline("serve", "--config %s: over %d bytes", path, CONF_MAX);
        return RC_USAGE;
    }
    store[n] = 0;
    struct {
        const char *key;
        const char **dst;
    } keys[] = {{"data", &c->data},
                {"db", &c->db},
                {"listen", &c->listen},
                {"runner", &c->runner},
                {"log-level", &c->log_level},
                {"tls-cert", &c->tls_cert},
                {"tls-key", &c->tls_key},
                {"web", &c->web},
                {"no-bwrap", &c->no_bwrap},
                {"max-conns", &c->max_conns},
                {"max-conns-per-ip", &c->max_conns_per_ip},
                {"request-timeout", &c->request_timeout},
                {"audit-keep-days", &c->audit_keep_days},
                {"audit-keep-rows", &c->audit_keep_rows},
                {"sandbox-user", &c->sbx_user},
                {"sandbox-network", &c->sbx_network},
                {"sandbox-memory", &c->sbx_memory},
                {"sandbox-pids", &c->sbx_pids},
                {"sandbox-cpu", &c->sbx_cpu},
                {"session-ttl", &c->session_ttl},
                {"session-idle", &c->session_idle}};
    unsigned lineno = 0;
    for (char *line = store, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        lineno++;
        line += strspn(line, " \t");
        if (!*line || *line == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            errline("serve", "%s:%u: expected key = value", path, lineno);
            return RC_USAGE;
        }
        char *k_end = eq;
        while (k_end > line && (k_end[-1] == ' ' || k_end[-1] == '\t'))
            k_end--;
        *k_end = 0;
        char *v = eq + 1 + strspn(eq + 1, " \t");
        size_t vl = strlen(v);
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t' || v[vl - 1] == '\r'))
            v[--vl] = 0;
        size_t i = 0;
        while (i < sizeof keys / sizeof keys[0] && strcmp(keys[i].key, line) != 0)
            i++;
        if (i == sizeof keys / sizeof keys[0]) {
            errline("serve", "%s:%u: unknown key '%s'", path, lineno, line);
            return RC_USAGE;
        }
        if (!*keys[i].dst)
            *keys[i].dst = v;
    }
    return 0;
}

/* A session lifetime: 1..SESSION_S_MAX seconds. 0, or -1. */
static int parse_seconds(const char *s, unsigned *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v < 1 || v > SESSION_S_MAX)
        return -1;
    *out = (unsigned)v;
    return 0;
}

static int cmd_serve(const struct cmd *self, int argc, char **argv)
{
    struct serve_conf c;
    memset(&c, 0, sizeof c);
    struct api_config cfg;
    memset(&cfg, 0, sizeof cfg);
    const char *config = NULL;
    bool verbose = false, no_bwrap = false;
    const struct opt opts[] = {
        {"--data", &c.data, NULL},
        {"--db", &c.db, NULL},
        {"--listen", &c.listen, NULL},
        {"--runner", &c.runner, NULL},
        {"--no-bwrap", NULL, &no_bwrap},
        {"--verbose", NULL, &verbose},
        {"--log-level", &c.log_level, NULL},
        {"--tls-cert", &c.tls_cert, NULL},
        {"--tls-key", &c.tls_key, NULL},
        {"--web", &c.web, NULL},
        {"--config", &config, NULL},
        {"--max-conns", &c.max_conns, NULL},
        {"--max-conns-per-ip", &c.max_conns_per_ip, NULL},
        {"--request-timeout", &c.request_timeout, NULL},
        {"--audit-keep-days", &c.audit_keep_days, NULL},
        {"--audit-keep-rows", &c.audit_keep_rows, NULL},
        {"--sandbox-user", &c.sbx_user, NULL},
        {"--sandbox-network", &c.sbx_network, NULL},
        {"--sandbox-memory", &c.sbx_memory, NULL},
        {"--sandbox-pids", &c.sbx_pids, NULL},
        {"--sandbox-cpu", &c.sbx_cpu, NULL},
        {"--session-ttl", &c.session_ttl, NULL},
        {"--session-idle", &c.session_idle, NULL},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (no_bwrap)
        c.no_bwrap = "true";
    if (verbose && !c.log_level)
        c.log_level = "debug";
    static char store[CONF_MAX];
    if (config && (prc = read_config(config, &c, store, sizeof store)) != 0)
        return prc;
    if (!c.listen) {
        errline("serve", "--listen HOST:PORT is required (or listen = in --config)");
        return RC_USAGE;
    }
    int level = 1;
    if (c.log_level) {
        static const char *const levels[] = {"error", "info", "debug"};
        level = -1;
        for (int i = 0; i < 3; i++)
            if (!strcmp(c.log_level, levels[i]))
                level = i;
        if (level < 0) {
            errline("serve", "log level '%s': error, info or debug", c.log_level);
            return RC_USAGE;
        }
    }
    if (c.no_bwrap && strcmp(c.no_bwrap, "true") != 0 && strcmp(c.no_bwrap, "false") != 0) {
        errline("serve", "no-bwrap = true or false");
        return RC_USAGE;
    }
    struct cg_limits lim = {LSBX_DEFAULT_MEMORY, LSBX_DEFAULT_PIDS, LSBX_DEFAULT_CPU};
    uint64_t cpu = 0;
    if (c.sbx_memory && (parse_size(c.sbx_memory, 1ull << 50, &lim.memory_bytes) != 0 ||
                         (lim.memory_bytes && lim.memory_bytes < SBX_MIN_MEMORY))) {
        errline("serve", "sandbox-memory: a size such as 512M or 4G (0: no limit; at least 32M)");
        return RC_USAGE;
    }
    if (c.sbx_pids && parse_size(c.sbx_pids, 1u << 22, &lim.pids) != 0) {
        errline("serve", "sandbox-pids: a number of processes (0: no limit)");
        return RC_USAGE;
    }
    if (c.sbx_cpu && (parse_size(c.sbx_cpu, 100000, &cpu) != 0)) {
        errline("serve", "sandbox-cpu: percent of one core (0: no limit)");
        return RC_USAGE;
    }
    if (c.sbx_cpu)
        lim.cpu_percent = (unsigned)cpu;
    if (c.sbx_network && strcmp(c.sbx_network, "host") != 0 && strcmp(c.sbx_network, "none") != 0) {
        errline("serve", "sandbox-network = host or none");
        return RC_USAGE;
    }
    if (c.sbx_network && !strcmp(c.sbx_network, "none") && c.no_bwrap &&
        !strcmp(c.no_bwrap, "true")) {
        errline("serve", "sandbox-network none needs bubblewrap (no-bwrap leaves agents unjailed)");
        return RC_USAGE;
    }
    const struct {
        const char *key, *val;
        unsigned *dst;
    } limits[] = {{"max-conns", c.max_conns, &cfg.max_conns},
                  {"max-conns-per-ip", c.max_conns_per_ip, &cfg.max_conns_per_ip},
                  {"request-timeout", c.request_timeout, &cfg.request_timeout_s},
                  {"audit-keep-days", c.audit_keep_days, &cfg.audit_keep_days},
                  {"audit-keep-rows", c.audit_keep_rows, &cfg.audit_keep_rows}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        if (!limits[i].val)
            continue;
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(limits[i].val, &end, 10);
        if (errno || end == limits[i].val || *end || limits[i].val[0] == '-' || v == 0 ||
            v > SERVE_LIMIT_MAX) {
            errline("serve", "%s wants a whole number from 1 to %u", limits[i].key,
                    SERVE_LIMIT_MAX);
            return RC_USAGE;
        }
        *limits[i].dst = (unsigned)v;
    }
    unsigned ttl_s = 0, idle_s = 0;
    if ((c.session_ttl && parse_seconds(c.session_ttl, &ttl_s) != 0) ||
        (c.session_idle && parse_seconds(c.session_idle, &idle_s) != 0)) {
        errline("serve", "session-ttl and session-idle take 1..%u seconds", SESSION_S_MAX);
        return RC_USAGE;
    }
    if (!c.data)
        c.data = default_data_dir();
    if (mkdir(c.data, DATA_DIR_MODE) != 0 && errno != EEXIST) {
        errline("serve", "cannot create data directory %s: %s", c.data, strerror(errno));
        return RC_FAIL;
    }
    cfg = (struct api_config){
        .max_conns = cfg.max_conns,
        .max_conns_per_ip = cfg.max_conns_per_ip,
        .request_timeout_s = cfg.request_timeout_s,
        .audit_keep_days = cfg.audit_keep_days,
        .audit_keep_rows = cfg.audit_keep_rows,
        .data_dir = c.data,
        .db_url = c.db,
        .listen = c.listen,
        .runner_bin = c.runner,
        .no_bwrap = c.no_bwrap && !strcmp(c.no_bwrap, "true"),
        .sandbox_user = c.sbx_user,
        .sandbox_no_network = c.sbx_network && !strcmp(c.sbx_network, "none"),
        .sandbox_limits = lim,
        .log_level = level,
        .tls_cert = c.tls_cert,
        .tls_key = c.tls_key,
        .web_dir = c.web,
        .session_ttl_s = ttl_s,
        .session_idle_s = idle_s,
    };
    char err[512] = "";
    int rc = api_serve(&cfg, err, sizeof err);
    if (rc != AL_OK) {
        errline("serve", "%s", err[0] ? err : al_strerror(rc));
        return rc == AL_E_INVAL ? RC_USAGE : RC_FAIL;
    }
    return 0;
}

/* The key-holding process: serve execs it with a socket on --fd. */
static int cmd_signer(const struct cmd *self, int argc, char **argv)
{
    const char *fd_s = NULL, *data = NULL, *level_s = NULL;
    const struct opt opts[] = {
        {"--fd", &fd_s, NULL}, {"--data", &data, NULL}, {"--log-level", &level_s, NULL}};
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    long long fd = -1, level = 1;
    if (!fd_s || !parse_int(fd_s, 0, INT_MAX, &fd) || !data ||
        (level_s && !parse_int(level_s, 0, 2, &level))) {
        errline(self->name, "--fd N and --data DIR are required (--log-level 0 to 2); airlockd "
                            "serve starts this itself");
        return RC_USAGE;
    }
    return signer_main((int)fd, data, (int)level);
}

static int cmd_token(const struct cmd *self, int argc, char **argv)
{
    const char *data = NULL, *aud = NULL, *scope = NULL, *sub = NULL, *iss = NULL;
    const char *ttl_s = NULL;
    const struct opt opts[] = {
        {"--data", &data, NULL}, {"--aud", &aud, NULL}, {"--scope", &scope, NULL},
        {"--sub", &sub, NULL},   {"--iss", &iss, NULL}, {"--ttl", &ttl_s, NULL},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!aud || !scope) {
        errline("token", "--aud and --scope are required (see airlockd token "
                         "--help)");
        return RC_USAGE;
    }
    long long ttl = TOK_SIGN_TTL_DEFAULT;
    if (ttl_s && !parse_int(ttl_s, 1, TOK_SIGN_TTL_MAX, &ttl)) {
        errline("token", "--ttl must be a whole number of seconds from 1 to %d", TOK_SIGN_TTL_MAX);
        return RC_USAGE;
    }
    if (!tok_scope_list_valid(scope)) {
        errline("token", "--scope must be space-separated scopes such as "
                         "'runner:connect' (printable ASCII, no quote or backslash)");
        return RC_USAGE;
    }
    if (!data)
        data = default_data_dir();

    char key_path[KEYS_PATH_MAX], jwks_path[KEYS_PATH_MAX];
    if (keys_path(data, KEYS_PRIVATE_FILE, key_path, sizeof key_path) != AL_OK ||
        keys_path(data, KEYS_JWKS_FILE, jwks_path, sizeof jwks_path) != AL_OK) {
        errline("token", "--data path too long");
        return RC_USAGE;
    }
    time_t now = time(NULL);
    if (now == (time_t)-1) {
        errline("token", "cannot read the clock");
        return RC_FAIL;
    }

    char reason[TOK_REASON_MAX + KEYS_PATH_MAX];
    struct keys_signing *k = NULL;
    int rc = keys_load_private(key_path, &k, reason, sizeof reason);
    if (rc != AL_OK) {
        errline("token", "%s%s%s%s", reason[0] ? reason : al_strerror(rc),
                rc == AL_E_NOENT ? " (run: airlockd keygen --data " : "",
                rc == AL_E_NOENT ? data : "", rc == AL_E_NOENT ? ")" : "");
        return RC_FAIL;
    }
    struct tok_sign_req req = {
        .iss = iss,
        .aud = aud,
        .sub = sub ? sub : SUB_DEFAULT,
        .scope = scope,
        .jti = NULL,
        .now = (int64_t)now,
        .ttl = ttl,
    };
    char token[TOK_MAX_TOKEN + 1];
    size_t len = 0;
    rc = tok_sign_mint(k, &req, token, sizeof token, &len, reason, sizeof reason);
    keys_free(k);
    if (rc != AL_OK) {
        errline("token", "%s", reason[0] ? reason : al_strerror(rc));
        return rc == AL_E_INVAL ? RC_USAGE : RC_FAIL;
    }

    /* Never hand out a token the published key set would refuse (for
     * example a jwks.json that lost the current key). */
    struct tok_keyset *ks = NULL;
    rc = tok_keyset_from_file(jwks_path, &ks, reason, sizeof reason);
    if (rc == AL_OK) {
        /* Ask for a scope the token has: this checks key, signature and time. */
        const char *sp = strchr(scope, ' ');
        char first[TOK_MAX_SCOPE + 1];
        size_t fl = sp ? (size_t)(sp - scope) : strlen(scope);
        memcpy(first, scope, fl);
        first[fl] = '\0';
        struct tok_verify_params p;
        tok_verify_params_init(&p, aud, first, (int64_t)now);
        char why[TOK_REASON_MAX];
        rc = tok_verify(ks, token, len, &p, NULL, why, sizeof why);
        tok_keyset_free(ks);
        if (rc != AL_OK) {
            errline("token",
                    "the minted token does not verify against %s (%s); "
                    "run airlockd keygen --rotate to republish the keys",
                    jwks_path, why);
            return RC_FAIL;
        }
    } else {
        errline("token", "%s; verifiers need it (run airlockd keygen --rotate)",
                reason[0] ? reason : al_strerror(rc));
        return RC_FAIL;
    }

    if (printf("%s\n", token) < 0 || fflush(stdout) != 0) {
        errline("token", "cannot write to stdout");
        return RC_FAIL;
    }
    return 0;
}

/* ---- user add / ls / rm ------------------------------------------------- */

static int user_add(const struct cmd *self, int argc, char **argv);
static int user_ls(const struct cmd *self, int argc, char **argv);
static int user_rm(const struct cmd *self, int argc, char **argv);

static const struct cmd user_cmds[] = {
    {"user add", "NAME --role admin|operator|viewer [--data DIR] [--db URL]",
     "add a user and print their API key on stdout (shown once; only its hash is kept)", user_add},
    {"user ls", "[--data DIR] [--db URL]", "list the users: name, role, creation time (UTC)",
     user_ls},
    {"user rm", "NAME [--data DIR] [--db URL]", "remove a user; their API key stops working",
     user_rm},
};
enum { NUSER_CMDS = sizeof user_cmds / sizeof user_cmds[0] };

/* Open the database --db names, else DIR/airlock.db. With create, DIR
 * (0700) and the database are made when missing; without, a missing
 * database file is an error (a read or a removal never leaves an empty
 * database behind). */
static int user_open_db(const char *cmd, const char *data, const char *db_url, bool create,
                        struct db **out)
{
    char path[DB_PATH_MAX + 1], url[DB_URL_MAX + 1], err[DB_MSG_MAX];
    if (db_url) {
        int rc = db_open(db_url, out, err, sizeof err); /* never echoes the URL */
        if (rc != AL_OK) {
            errline(cmd, "%s", err[0] ? err : al_strerror(rc));
            return RC_FAIL;
        }
        return 0;
    }
    int n = snprintf(path, sizeof path, "%s/%s", data, DB_FILE_NAME);
    if (n < 0 || (size_t)n >= sizeof path) {
        errline(cmd, "--data path too long");
        return RC_USAGE;
    }
    if (create && mkdir(data, DATA_DIR_MODE) != 0 && errno != EEXIST) {
        errline(cmd, "cannot create data directory %s: %s", data, strerror(errno));
        return RC_FAIL;
    }
    struct stat st;
    if (!create && stat(path, &st) != 0) {
        int e = errno;
        errline(cmd, "%s: %s%s", path, strerror(e),
                e == ENOENT ? " (airlockd user add creates it)" : "");
        return RC_FAIL;
    }
    (void)snprintf(url, sizeof url, "%s%s", DB_SQLITE_PREFIX, path); /* fits: see DB_URL_MAX */
    int rc = db_open(url, out, err, sizeof err);
    if (rc != AL_OK) {
        errline(cmd, "%s", err[0] ? err : al_strerror(rc));
        return RC_FAIL;
    }
    return 0;
}

/* Close db; a failure is one error line and RC_FAIL. */
static int user_close_db(const char *cmd, struct db *db)
{
    int rc = db_close(db);
    if (rc != AL_OK) {
        errline(cmd, "closing the database: %s", al_strerror(rc));
        return RC_FAIL;
    }
    return 0;
}

/* NAME checks shared by add and rm: present and well-formed. */
static int user_check_name(const struct cmd *c, const char *name)
{
    if (!name) {
        errline(c->name, "NAME is required (see airlockd %s --help)", c->name);
        return RC_USAGE;
    }
    if (!db_name_valid(name)) {
        errline(c->name,
                "NAME must be 1 to %d of a-z 0-9 . _ - starting with a letter or digit, not '%s'",
                DB_NAME_MAX, name);
        return RC_USAGE;
    }
    return 0;
}

static int user_add(const struct cmd *self, int argc, char **argv)
{
    const char *name = NULL, *role_s = NULL, *data = NULL, *db_url = NULL;
    const struct opt opts[] = {
        {NULL, &name, NULL},
        {"--role", &role_s, NULL},
        {"--data", &data, NULL},
        {"--db", &db_url, NULL},
    };
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if ((prc = user_check_name(self, name)) != 0)
        return prc;
    enum db_role role;
    if (!role_s || db_role_parse(role_s, &role) != AL_OK) {
        errline(self->name, "--role %s: admin, operator or viewer",
                role_s ? "must be one of" : "is required");
        return RC_USAGE;
    }
    if (!data)
        data = default_data_dir();

    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, true, &db)) != 0)
        return prc;
    char key[DB_KEY_LEN + 1];
    int rc = db_user_add(db, name, role, key, sizeof key);
    if (rc != AL_OK) {
        errline(self->name, "%s", db_errmsg(db));
        (void)db_close(db); /* the add's error is the one to report */
        return rc == AL_E_INVAL ? RC_USAGE : RC_FAIL;
    }
    /* The user exists now: hand out the key even if closing fails. */
    int crc = user_close_db(self->name, db);
    int wrc = printf("%s\n", key);
    OPENSSL_cleanse(key, sizeof key);
    if (wrc < 0 || fflush(stdout) != 0) {
        errline(self->name,
                "cannot write the API key to stdout (remove the user and add it again)");
        return RC_FAIL;
    }
    return crc;
}

/* "2025-01-31T23:59:59Z" from Unix milliseconds. */
static void user_time_text(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        (void)snprintf(buf, cap, "%lld", (long long)ms);
}

static int user_print(void *ctx, const struct db_user *u)
{
    (void)ctx;
    char when[TIME_TEXT_MAX];
    user_time_text(u->created_at, when, sizeof when);
    return printf("%-16s %-8s %s\n", u->name, db_role_name(u->role), when) < 0 ? AL_E_IO : 0;
}

static int user_ls(const struct cmd *self, int argc, char **argv)
{
    const char *data = NULL, *db_url = NULL;
    const struct opt opts[] = {{"--data", &data, NULL}, {"--db", &db_url, NULL}};
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!data)
        data = default_data_dir();
    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, false, &db)) != 0)
        return prc;
    int rc = db_user_list(db, user_print, NULL);
    if (rc == AL_E_IO && db_errmsg(db)[0] == '\0') {
        errline(self->name, "cannot write to stdout");
    } else if (rc != AL_OK) {
        errline(self->name, "%s", db_errmsg(db));
    }
    int crc = user_close_db(self->name, db);
    if (rc == AL_OK && fflush(stdout) != 0) {
        errline(self->name, "cannot write to stdout");
        rc = AL_E_IO;
    }
    return rc != AL_OK ? RC_FAIL : crc;
}

static int user_rm(const struct cmd *self, int argc, char **argv)
{
    const char *name = NULL, *data = NULL, *db_url = NULL;
    const struct opt opts[] = {
        {NULL, &name, NULL}, {"--data", &data, NULL}, {"--db", &db_url, NULL}};
    int prc = parse_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if ((prc = user_check_name(self, name)) != 0)
        return prc;
    if (!data)
        data = default_data_dir();
    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, false, &db)) != 0)
        return prc;
    int rc = db_user_remove(db, name);
    if (rc != AL_OK)
        errline(self->name, "%s", db_errmsg(db));
    int crc = user_close_db(self->name, db);
    if (rc != AL_OK)
        return RC_FAIL;
    if (printf("removed user %s\n", name) < 0 || fflush(stdout) != 0)
        return RC_FAIL;
    return crc;
}

static int cmd_user(const struct cmd *self, int argc, char **argv)
{
    if (argc < 2) {
        errline(self->name, "missing action: add, ls or rm (see airlockd user --help)");
        return RC_USAGE;
    }
    if (is_help(argv[1])) {
        (void)fputs("usage:\n", stdout);
        for (size_t i = 0; i < NUSER_CMDS; i++)
            (void)fprintf(stdout, "  airlockd %s %s\n      %s\n", user_cmds[i].name,
                          user_cmds[i].synopsis, user_cmds[i].summary);
        return 0;
    }
    for (size_t i = 0; i < NUSER_CMDS; i++)
        if (strcmp(user_cmds[i].name + sizeof "user", argv[1]) == 0)
            return user_cmds[i].run(&user_cmds[i], argc - 1, argv + 1);
    errline(self->name, "unknown action '%s': add, ls or rm", argv[1]);
    return RC_USAGE;
}

static int cmd_help(const struct cmd *self, int argc, char **argv)
{
    (void)self;
    if (argc > 2) {
        errline("help", "one command at most");
        return RC_USAGE;
    }
    if (argc == 2) {
        for (size_t i = 0; i < NCMDS; i++) {
            if (strcmp(cmds[i].name, argv[1]) == 0) {
                usage_cmd(&cmds[i], stdout);
                return 0;
            }
        }
        errline("help", "unknown command '%s'", argv[1]);
        return RC_USAGE;
    }
    usage_all(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        errline(NULL, "missing command (see airlockd --help)");
        return RC_USAGE;
    }
    if (is_help(argv[1])) {
        usage_all(stdout);
        return 0;
    }
    for (size_t i = 0; i < NCMDS; i++)
        if (strcmp(cmds[i].name, argv[1]) == 0)
            return cmds[i].run(&cmds[i], argc - 1, argv + 1);
    errline(NULL, "unknown command '%s' (see airlockd --help)", argv[1]);
    return RC_USAGE;
}
