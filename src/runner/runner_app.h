/*
 * runner_app: the airlock-runner process around runner.c: its context, and
 * what the process does once (confine itself, load the key set and the
 * jail, start its libwebsockets context, tear down). The glue is one file
 * per concept, each named after its function prefix:
 *
 *   runner_main.c    main(): the steps, in order, and their exit codes
 *   runner_opts.c    the command line: one table of options, then the
 *                    checks across options
 *   runner_conn.c    one connection, either direction: the lws callback,
 *                    messages in, frames out, the close
 *   runner_listen.c  --listen: the listening socket, the upgrade decision
 *                    (upgrade.c) and the plain HTTP answers
 *   runner_dial.c    --connect: the URL, the token and link key presented,
 *                    redials with backoff, --max-age
 *
 * The runner links src/common, src/ws and src/runner only: it holds and can
 * hold no signing code (tests/integration/boundary.sh checks).
 *
 * Data model: struct runner_app is the lws context's user data (no
 * globals): the options, the key set, the runner, the listening socket and
 * the dial state. The app owns everything it points to except the option
 * strings (argv's). Times are milliseconds unless named _s; token
 * expiries are Unix seconds.
 */
#ifndef AL_RUNNER_APP_H
#define AL_RUNNER_APP_H

#include <libwebsockets.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <uv.h>

#include "al_limits.h"
#include "backoff.h"
#include "jail.h"
#include "runner.h"
#include "token.h"

struct rprobe;

#define RUNNER_APP_ENV_ALLOW_MAX 64 /* names --env-allow may list */
#define RUNNER_APP_CGROUP_FDS_MAX 4 /* --cgroup-fd given this often at most */
#define RUNNER_APP_TOKEN_MAX 8192   /* bytes of a token file */
#define RUNNER_APP_HANDSHAKE_S 10   /* an upgrade, either direction */
#define RUNNER_APP_HEADER_MAX 8192  /* bytes of one request's headers */
#define RUNNER_APP_HOST_MAX 256     /* --listen's HOST */
#define RUNNER_APP_TOKEN_HEADER_MAX 128
#define RUNNER_MAX_PROBES 4 /* probe sessions at once (docs/protocol.md §13) */

struct runner_app {
    /* options (runner_opts.c) */
    const char *listen, *connect_url, *identifier, *jwks_path, *token_file;
    const char *token_header;
    int identifier_from_request;                       /* --identifier-from request */
    char identifier_pinned[256];                       /* then: the first valid upgrade's */
    char token_header_lc[RUNNER_APP_TOKEN_HEADER_MAX]; /* "x-name:" for custom headers */
    int header_is_auth;
    uint64_t max_age_ms;
    int64_t leeway;
    const char *env_allow[RUNNER_APP_ENV_ALLOW_MAX + 1];
    char *env_allow_mem;
    struct runner_config rcfg;
    int jailed;                                /* --agent-sandbox bwrap */
    int cgroup_fds[RUNNER_APP_CGROUP_FDS_MAX]; /* --cgroup-fd: cgroup.procs to join */
    int ncgroup_fds;
    uint64_t max_procs;      /* --max-procs: RLIMIT_NPROC (0: unchanged) */
    int nice;                /* --nice: the priority we and our agents run at (0: unchanged) */
    struct jail_config jcfg; /* its settings */
    int key_fd;              /* --link-key-fd: our key arrives there (-1: make one) */
    /* the process */
    struct jail *jail;
    char cwd[512]; /* the default workspace */
    uv_loop_t *loop;
    struct lws_context *ctx;
    struct tok_keyset *keys;
    struct runner *runner;
    struct lws *current; /* the connection the runner speaks on */
    uv_signal_t sigterm, sigint;
    int stopping;
    /* listening (runner_listen.c) */
    char l_host[RUNNER_APP_HOST_MAX];
    int l_port;
    int64_t pending_exp; /* token expiry learnt at the upgrade */
    struct lws *pending_wsi;
    struct rprobe *pending_probe; /* the upgrade opens a probe session (§13) */
    unsigned nprobes;             /* probe sessions open, ≤ RUNNER_MAX_PROBES */
    struct wsl *wsl;              /* the listening socket, the connection limits */
    /* dialing (runner_dial.c) */
    char url[2048];
    char parsed[2048]; /* lws_parse_uri cuts this one up */
    const char *d_addr;
    int d_port, d_tls;
    SSL_CTX *d_tls_ctx; /* wss://: the dials' TLS context (wsctls.h), owned */
    char d_path_full[2300];
    char token[RUNNER_APP_TOKEN_MAX];
    char link_key[AL_RUNNER_KEY_LEN + 1]; /* presented on every dial, never logged */
    int64_t token_exp;
    struct backoff redial_delay; /* after a failed or lost dial */
    uv_timer_t redial, max_age;
};

/* Join the control groups we were given, bound our process count, and
 * close every other inherited descriptor: nothing of whoever started us
 * stays open (an agent could otherwise reach it through us). 0, or -1
 * after one line on stderr. */
int runner_app_confine(struct runner_app *a);
/* The key set of --jwks and, with --agent-sandbox bwrap, the jail. 0, or
 * the exit code after one line on stderr. */
int runner_app_load(struct runner_app *a);
/* The runner, the lws context, the listening socket or the first dial,
 * the signals. 0, or the exit code after one line on stderr. */
int runner_app_start(struct runner_app *a);
/* Run until SIGTERM or SIGINT, then release everything. */
void runner_app_run(struct runner_app *a);

#endif
