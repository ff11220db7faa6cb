/*
 * runner_opts: see runner_opts.h. One table of the options that take a
 * value: the name, what the value is (a string, a number in a range
 * stored scaled, or checked by a function of its own) and where it goes in
 * struct runner_app; then the checks across options. -h/--help and
 * -v/--verbose take no value. A bad value is "bad option or value" unless
 * its function says more.
 */
#include "runner_opts.h"

#include "runner_proxy.h"
#include "al_log.h"
#include "al_version.h"

#include <errno.h>
#include <pwd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DAY_S (86400ull)
#define MS_PER_S 1000u
#define FD_MAX 1023 /* --cgroup-fd, --link-key-fd */

static const char *const default_env_allow[] = {
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "USER", "LOGNAME", "SHELL", "TZ", "TMPDIR", NULL,
};

enum opt_kind {
    OPT_STR,  /* const char *: the argument itself */
    OPT_U64,  /* uint64_t, min..max, times scale */
    OPT_SIZE, /* size_t, min..max */
    OPT_U32,  /* uint32_t, min..max */
    OPT_INT,  /* int, min..max */
    OPT_I64,  /* int64_t, min..max */
    OPT_FN,   /* fn decides */
};

/* What an OPT_FN function returns. */
enum { SET_OK = 0, SET_BAD = 1 /* "bad option or value" */, SET_FAIL = -1 /* said why */ };

struct opt {
    const char *name;
    enum opt_kind kind;
    size_t off;        /* where in struct runner_app */
    uint64_t min, max; /* numbers: the accepted range */
    uint64_t scale;    /* OPT_U64: what is stored is value * scale */
    int (*fn)(struct runner_app *a, const char *v);
};

static int set_env_allow(struct runner_app *a, const char *v)
{
    free(a->env_allow_mem);
    a->env_allow_mem = strdup(v);
    if (!a->env_allow_mem)
        return SET_FAIL;
    int k = 0;
    char *save = NULL;
    for (char *tok = strtok_r(a->env_allow_mem, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (k >= RUNNER_APP_ENV_ALLOW_MAX) {
            fprintf(stderr, "airlock-runner: --env-allow: at most %d names\n",
                    RUNNER_APP_ENV_ALLOW_MAX);
            return SET_FAIL;
        }
        a->env_allow[k++] = tok;
    }
    a->env_allow[k] = NULL;
    return SET_OK;
}

static int set_sandbox(struct runner_app *a, const char *v)
{
    if (strcmp(v, "none") != 0 && strcmp(v, "bwrap") != 0)
        return SET_BAD;
    a->jailed = !strcmp(v, "bwrap");
    return SET_OK;
}

static int set_network(struct runner_app *a, const char *v)
{
    if (strcmp(v, "host") != 0 && strcmp(v, "none") != 0)
        return SET_BAD;
    a->jcfg.no_network = !strcmp(v, "none");
    return SET_OK;
}

static int set_cgroup_fd(struct runner_app *a, const char *v)
{
    uint64_t n;
    if (runner_opts_u64(v, FD_MAX, &n) != 0 || n < 3 || a->ncgroup_fds >= RUNNER_APP_CGROUP_FDS_MAX)
        return SET_BAD;
    a->cgroup_fds[a->ncgroup_fds++] = (int)n;
    return SET_OK;
}

static int set_workspace(struct runner_app *a, const char *v)
{
    if (v[0] != '/')
        return SET_BAD;
    a->jcfg.workspace = v;
    return SET_OK;
}

static int set_agent_user(struct runner_app *a, const char *v)
{
    struct passwd *pw = getpwnam(v);
    if (!pw) {
        fprintf(stderr, "airlock-runner: --agent-user: no user named '%s'\n", v);
        return SET_FAIL;
    }
    a->rcfg.set_user = 1;
    a->rcfg.uid = pw->pw_uid;
    a->rcfg.gid = pw->pw_gid;
    return SET_OK;
}

#define AT(field) offsetof(struct runner_app, field)
#define STR(name, field)                                                                           \
    {                                                                                              \
        name, OPT_STR, AT(field), 0, 0, 0, NULL                                                    \
    }
#define NUM(name, kind, field, min, max, scale)                                                    \
    {                                                                                              \
        name, kind, AT(field), min, max, scale, NULL                                               \
    }
#define FN(name, fn)                                                                               \
    {                                                                                              \
        name, OPT_FN, 0, 0, 0, 0, fn                                                               \
    }

/* --proxy-listen: a loopback address only (agents of this sandbox, never
 * the network) */
static int set_proxy_listen(struct runner_app *a, const char *v)
{
    if (!runner_proxy_addr_ok(v)) {
        fprintf(stderr,
                "airlock-runner: --proxy-listen %s: give ADDR:PORT with a loopback address "
                "(127.0.0.1, [::1]); PORT 0 picks one\n",
                v);
        return SET_FAIL;
    }
    a->rcfg.proxy_listen = v;
    return SET_OK;
}

static int set_proxy_fwd(struct runner_app *a, const char *v)
{
    if (v[0] != '/') {
        fprintf(stderr, "airlock-runner: --agent-proxy-fwd %s: give an absolute path\n", v);
        return SET_FAIL;
    }
    a->jcfg.proxy_fwd = v;
    return SET_OK;
}

static int set_proxy_socket(struct runner_app *a, const char *v)
{
    if (v[0] != '/') {
        fprintf(stderr, "airlock-runner: --proxy-socket %s: give an absolute path\n", v);
        return SET_FAIL;
    }
    a->rcfg.proxy_socket = v;
    return SET_OK;
}

/* --identifier-from request: the identifier is the first upgrade's (a
 * platform that allocates a session per identifier on first use, where the
 * container cannot know its identifier before that request). */
static int set_identifier_from(struct runner_app *a, const char *v)
{
    if (strcmp(v, "request") != 0)
        return SET_BAD;
    a->identifier_from_request = 1;
    return SET_OK;
}

/* --log-format text|json (al_log.h) */
static int set_log_format(struct runner_app *a, const char *v)
{
    int f = al_log_format_of(v);
    if (f < 0)
        return SET_BAD;
    a->rcfg.log_format = f;
    return SET_OK;
}

static const struct opt opts[] = {
    STR("--listen", listen),
    STR("--connect", connect_url),
    STR("--identifier", identifier),
    FN("--identifier-from", set_identifier_from),
    STR("--jwks", jwks_path),
    STR("--token-file", token_file),
    STR("--token-header", token_header),
    NUM("--grace", OPT_U64, rcfg.grace_ms, 0, 30 * DAY_S, MS_PER_S),
    NUM("--ring", OPT_SIZE, rcfg.ring, 65536, 1u << 30, 1),
    NUM("--screen-budget", OPT_SIZE, rcfg.screen_budget, RUNNER_MIN_SCREEN_BUDGET, 1ull << 40, 1),
    NUM("--window", OPT_U32, rcfg.window, 1024, 1u << 30, 1),
    NUM("--ping-interval", OPT_U64, rcfg.ping_interval_ms, 0, 3600000, 1),
    NUM("--idle-timeout", OPT_U64, rcfg.idle_timeout_ms, 0, 3600000, 1),
    NUM("--max-age", OPT_U64, max_age_ms, 0, 30 * DAY_S, MS_PER_S),
    NUM("--leeway", OPT_I64, leeway, 0, TOK_LEEWAY_MAX, 1),
    FN("--env-allow", set_env_allow),
    FN("--agent-sandbox", set_sandbox),
    FN("--agent-network", set_network),
    FN("--cgroup-fd", set_cgroup_fd),
    NUM("--link-key-fd", OPT_INT, key_fd, 0, FD_MAX, 1),
    NUM("--max-procs", OPT_U64, max_procs, 1, 1u << 22, 1),
    NUM("--max-data", OPT_U64, rcfg.max_data, 1u << 24, 1ull << 44, 1),
    NUM("--nice", OPT_INT, nice, 0, 19, 1),
    FN("--workspace", set_workspace),
    FN("--agent-user", set_agent_user),
    FN("--proxy-listen", set_proxy_listen),
    FN("--proxy-socket", set_proxy_socket),
    FN("--log-format", set_log_format),
    FN("--agent-proxy-fwd", set_proxy_fwd),
};

static void usage(FILE *to)
{
    fputs("usage: airlock-runner --listen HOST:PORT --identifier ID --jwks FILE [options]\n"
          "       airlock-runner --connect URL --identifier ID --jwks FILE --token-file FILE "
          "[options]\n"
          "       airlock-runner --version\n"
          "\n"
          "Serves agents' terminals over one airlock.v1 WebSocket. Holds no secret: tokens\n"
          "are checked with the public keys of FILE (a JWKS).\n"
          "\n"
          "options:\n"
          "  --token-header NAME    header carrying 'Bearer <token>' (default Authorization)\n"
          "  --identifier-from request  instead of --identifier (--listen only): the identifier\n"
          "                         is that of the first upgrade whose runner:connect token is\n"
          "                         valid for it, and stays so (a platform allocating a\n"
          "                         session per identifier on first use)\n"
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
          "  --max-data BYTES       RLIMIT_DATA (heap and private mappings) of each agent\n"
          "                         process\n"
          "  --nice N               run us and our agents at nice N, 0..19\n"
          "  --link-key-fd N        --connect: read our key from descriptor N (else a random\n"
          "                         one); it goes with every dial, so that a copy of our token\n"
          "                         alone cannot take our place\n"
          "  --workspace DIR        with bwrap: the directory agents may write (the current\n"
          "                         directory)\n"
          "  --proxy-listen ADDR:PORT  the credential proxy's listener for agents, on a\n"
          "                         loopback address only (PORT 0: any); each connection\n"
          "                         is carried to airlockd, which answers it\n"
          "  --proxy-socket PATH    the same on a unix socket\n"
          "  --agent-proxy-fwd PATH  with bwrap and --agent-network none: the forwarder\n"
          "                         (airlock-proxy-fwd) each agent's jail starts with, so\n"
          "                         that its agents reach the proxy (--proxy-listen's port in\n"
          "                         their own loopback, carried to --proxy-socket)\n"
          "  --log-format text|json  log lines as text (default) or one JSON object each\n"
          "  -v, --verbose          debug log\n",
          to);
}

int runner_opts_u64(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-' || v > max)
        return -1;
    *out = v;
    return 0;
}

/* One option's value into a; a SET_* code. */
static int opt_set(struct runner_app *a, const struct opt *o, const char *v)
{
    void *dst = (char *)a + o->off;
    uint64_t n = 0;
    if (o->kind == OPT_FN)
        return o->fn(a, v);
    if (o->kind == OPT_STR) {
        *(const char **)dst = v;
        return SET_OK;
    }
    if (runner_opts_u64(v, o->max, &n) != 0 || n < o->min)
        return SET_BAD;
    switch (o->kind) {
    case OPT_U64:
        *(uint64_t *)dst = n * o->scale;
        break;
    case OPT_SIZE:
        *(size_t *)dst = (size_t)n;
        break;
    case OPT_U32:
        *(uint32_t *)dst = (uint32_t)n;
        break;
    case OPT_INT:
        *(int *)dst = (int)n;
        break;
    default: /* OPT_I64 */
        *(int64_t *)dst = (int64_t)n;
        break;
    }
    return SET_OK;
}

static void set_defaults(struct runner_app *a)
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
}

/* --token-header: Authorization, or a header name kept as "x-name:". */
static int token_header(struct runner_app *a)
{
    a->header_is_auth = !strcasecmp(a->token_header, "Authorization");
    if (a->header_is_auth)
        return 0;
    size_t n = strlen(a->token_header);
    if (n == 0 || n + 2 > sizeof a->token_header_lc) {
        fprintf(stderr, "airlock-runner: --token-header: bad header name\n");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = a->token_header[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-')) {
            fprintf(stderr, "airlock-runner: --token-header: bad header name\n");
            return -1;
        }
        a->token_header_lc[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    }
    a->token_header_lc[n] = ':';
    a->token_header_lc[n + 1] = 0;
    return 0;
}

/* What the options say together. */
static int check_all(struct runner_app *a)
{
    if (!!a->listen == !!a->connect_url) {
        fprintf(stderr, "airlock-runner: give exactly one of --listen or --connect\n");
        return -1;
    }
    if (a->identifier_from_request && (a->identifier || a->connect_url)) {
        fprintf(stderr, "airlock-runner: --identifier-from request goes with --listen and "
                        "without --identifier\n");
        return -1;
    }
    if (a->identifier_from_request) {
        a->identifier = ""; /* until the first valid upgrade (runner_listen.c) */
    } else if (!a->identifier || !*a->identifier) {
        fprintf(stderr, "airlock-runner: --identifier (or --identifier-from request) is "
                        "required\n");
        return -1;
    }
    if (!a->jwks_path) {
        fprintf(stderr, "airlock-runner: --jwks is required\n");
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
    /* agents with no network reach the proxy only through the forwarder:
     * a listener they cannot reach would be announced for nothing */
    int cut = a->jailed && a->jcfg.no_network;
    if (cut && a->rcfg.proxy_listen && (!a->jcfg.proxy_fwd || !a->rcfg.proxy_socket)) {
        fprintf(stderr, "airlock-runner: --proxy-listen with --agent-network none needs "
                        "--agent-proxy-fwd and --proxy-socket (its agents are in another "
                        "network namespace)\n");
        return -1;
    }
    if (a->jcfg.proxy_fwd && !(cut && a->rcfg.proxy_listen)) {
        fprintf(stderr, "airlock-runner: --agent-proxy-fwd goes with --agent-sandbox bwrap, "
                        "--agent-network none and --proxy-listen\n");
        return -1;
    }
    return token_header(a);
}

int runner_opts_parse(struct runner_app *a, int argc, char **argv)
{
    set_defaults(a);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(o, "--version")) {
            return al_version_print(stdout, "airlock-runner") == 0 ? 1 : -1;
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
        size_t k = 0;
        while (k < sizeof opts / sizeof opts[0] && strcmp(opts[k].name, o) != 0)
            k++;
        int rc = k < sizeof opts / sizeof opts[0] ? opt_set(a, &opts[k], v) : SET_BAD;
        if (rc == SET_BAD)
            fprintf(stderr, "airlock-runner: bad option or value: %s %s (see --help)\n", o, v);
        if (rc != SET_OK)
            return -1;
    }
    if (check_all(a) != 0)
        return -1;
    a->rcfg.identifier = a->identifier;
    a->rcfg.env_allow = a->env_allow;
    a->rcfg.leeway = a->leeway >= 0 ? a->leeway : TOK_LEEWAY_DEFAULT;
    return 0;
}
