/*
 * runner_app: see runner_app.h. This file: what the process does once,
 * before and after its loop runs: confinement, the key set and the jail,
 * the start (runner, lws context, listener or first dial, signals) and the
 * teardown.
 */
#include "runner_app.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "al_err.h"
#include "rprobe.h"
#include "runner_conn.h"
#include "runner_dial.h"
#include "runner_listen.h"
#include "wsctx.h"
#include "wslog.h"
#include "wslisten.h"

#define SWEEP_ROUNDS 100 /* loop turns to let lws and libuv finish closing */

int runner_app_confine(struct runner_app *a)
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
    /* the bounds where there is no control group (lsbx.c), inherited by
     * every agent: a table, one rlimit a row */
    const struct {
        const char *opt;
        int resource;
        uint64_t value;
    } limits[] = {
        {"--max-procs", RLIMIT_NPROC, a->max_procs},
        /* --max-data is set for each agent as it starts (proc_spec) */
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        struct rlimit rl = {(rlim_t)limits[i].value, (rlim_t)limits[i].value};
        if (limits[i].value && setrlimit(limits[i].resource, &rl) != 0) {
            fprintf(stderr, "airlock-runner: %s: %s\n", limits[i].opt, strerror(errno));
            return -1;
        }
    }
    if (a->nice && setpriority(PRIO_PROCESS, 0, a->nice) != 0) {
        fprintf(stderr, "airlock-runner: --nice: %s\n", strerror(errno));
        return -1;
    }
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
        long max = sysconf(_SC_OPEN_MAX);
        for (long fd = 3; fd < max && fd < 65536; fd++)
            (void)close((int)fd);
    }
    return 0;
}

int runner_app_load(struct runner_app *a)
{
    char why[TOK_REASON_MAX];
    int rc = tok_keyset_from_file(a->jwks_path, &a->keys, why, sizeof why);
    if (rc != AL_OK) {
        fprintf(stderr, "airlock-runner: cannot load --jwks %s: %s\n", a->jwks_path, why);
        return 1;
    }
    a->rcfg.keys = a->keys;
    if (!a->jailed)
        return 0;
    if (geteuid() == 0 && !a->rcfg.set_user) {
        /* uid 0 mapped into the agent's namespace owns root's files there */
        fprintf(stderr, "airlock-runner: --agent-sandbox bwrap as root needs --agent-user USER\n");
        return 2;
    }
    if (!a->jcfg.workspace && getcwd(a->cwd, sizeof a->cwd))
        a->jcfg.workspace = a->cwd;
    rc = jail_new(&a->jcfg, &a->jail, why, sizeof why);
    if (rc != AL_OK) {
        fprintf(stderr, "airlock-runner: --agent-sandbox bwrap: %s\n", why);
        return 1;
    }
    a->rcfg.jail = a->jail;
    return 0;
}

static void on_stop(uv_signal_t *h, int signum)
{
    struct runner_app *a = h->data;
    runner_log(a->runner, 1, "signal %d: stopping (terminals end with the runner)", signum);
    a->stopping = 1;
    uv_stop(a->loop);
}

int runner_app_start(struct runner_app *a)
{
    a->loop = uv_default_loop();
    int rc = runner_new(a->loop, &a->rcfg, &a->runner);
    if (rc != AL_OK) { /* the runner's log said why */
        fprintf(stderr, "airlock-runner: cannot start: %s\n", al_strerror(rc));
        return 1;
    }
    /* lws's own lines, rate-limited (wslog.h): a peer can repeat their
     * cause at will; AIRLOCK_LWS_DEBUG shows them all */
    wslog_init(getenv("AIRLOCK_LWS_DEBUG") ? 0xfff
               : a->rcfg.log_level >= 2    ? LLL_ERR | LLL_WARN | LLL_NOTICE
                                           : LLL_ERR,
               a->rcfg.log_format, "airlock-runner", "lws", getenv("AIRLOCK_LWS_DEBUG") != NULL);
    struct wsctx_config wc = {
        .loop = a->loop,
        .protocols = runner_conn_protocols,
        .user = a,
        .server = a->listen != NULL, /* wslisten.c accepts */
        /* no TLS through lws: a wss:// dial's is wsctls.c's; lws's would
         * load the system's CA store at every start (about 240 M
         * instructions, three quarters of a bench run's, callgrind) */
        .ssl = 0,
        .timeout_s = RUNNER_APP_HANDSHAKE_S,
        .max_header_data = RUNNER_APP_HEADER_MAX,
        .serv_buf_size = AL_MAX_FRAME + LWS_PRE + 1024,
    };
    if (a->listen && runner_listen_parse(a) != 0)
        return 2;
    a->ctx = wsctx_new(&wc);
    if (!a->ctx) {
        fprintf(stderr, "airlock-runner: cannot %s\n", a->listen ? "listen" : "start the client");
        return 1;
    }
    if (a->listen && runner_listen_start(a) != 0)
        return 1;
    (void)uv_timer_init(a->loop, &a->redial);
    (void)uv_timer_init(a->loop, &a->max_age);
    a->redial.data = a->max_age.data = a;
    (void)uv_signal_init(a->loop, &a->sigterm);
    (void)uv_signal_init(a->loop, &a->sigint);
    a->sigterm.data = a->sigint.data = a;
    (void)uv_signal_start(&a->sigterm, on_stop, SIGTERM);
    (void)uv_signal_start(&a->sigint, on_stop, SIGINT);
    if (a->listen)
        runner_listen_announce(a);
    else
        runner_dial_start(a);
    return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void runner_app_run(struct runner_app *a)
{
    uv_run(a->loop, UV_RUN_DEFAULT);

    a->stopping = 1; /* what lws closes from here on finds no runner */
    runner_free(a->runner);
    uv_close((uv_handle_t *)&a->redial, NULL);
    uv_close((uv_handle_t *)&a->max_age, NULL);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    lws_context_destroy(a->ctx);
    SSL_CTX_free(a->d_tls_ctx); /* after the context: its links are gone */
    a->d_tls_ctx = NULL;
    rprobe_free(a->pending_probe); /* an upgrade that never became a session */
    a->pending_probe = NULL;
    wsl_close(a->wsl); /* after the context: its wsis left their slots */
    a->wsl = NULL;
    /* let lws and libuv finish closing (bounded), then sweep what is left */
    for (int i = 0; i < SWEEP_ROUNDS && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    uv_walk(a->loop, close_walk, NULL);
    for (int i = 0; i < SWEEP_ROUNDS && uv_run(a->loop, UV_RUN_NOWAIT); i++)
        ;
    (void)uv_loop_close(a->loop);
    tok_keyset_free(a->keys);
    jail_free(a->jail);
    free(a->env_allow_mem);
}
