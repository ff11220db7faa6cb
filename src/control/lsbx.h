/*
 * lsbx: a local sandbox's runner process, started on this host under
 * bubblewrap. Control plane only.
 *
 * What the runner is given (docs/security.md has the whole model):
 *   - its own user namespace (uid LSBX_RUNNER_UID inside), pid, IPC, UTS
 *     and cgroup namespaces, no capability; when airlockd runs as root the
 *     whole sandbox runs as an unprivileged host user (the sandbox user),
 *     never as root;
 *   - the system read-only, a private /tmp, its own /dev and /proc, and
 *     the sandbox's own directories: its run directory read-only at
 *     /airlock/run (the public keys, its token file), the runner binary at
 *     /airlock/airlock-runner (as root, a copy in DATA/runner/ the sandbox
 *     user can reach) and the workspace at /workspace. As root, the data
 *     directory, DATA/sandboxes and DATA/runner become searchable (0711,
 *     never listable; every file of the data directory is 0600), and
 *     DATA/sandboxes/ID belongs to the sandbox user;
 *   - its key (rkey.h) on stdin, read once;
 *   - stdout and stderr on a pipe airlockd reads and logs one escaped,
 *     length-limited line at a time, prefixed with the sandbox (nothing of
 *     airlockd's own log file, nor any other descriptor of airlockd);
 *   - resource bounds (cgroup.h), or RLIMIT_NPROC where no cgroup is
 *     writable;
 *   - the order to start every agent in a jail of its own
 *     (airlock-runner --agent-sandbox bwrap): agents never see the runner;
 *     with no_network, a jail with its own network namespace, loopback
 *     only (--agent-network none), while the runner keeps its link; and
 *     with the proxy as well, the forwarder (airlock-proxy-fwd, next to
 *     the runner; as root a copy in DATA/runner/) at LSBX_FWD_PATH and a
 *     proxy socket in the runner's /tmp, which each jail gets.
 *
 * Data model: struct lsbx holds the configuration and the host check made
 * at start (lsbx_new): whether sandboxes can be started here, and if not,
 * why. Each started runner is a struct lsbx_proc, owned by lsbx until its
 * process has exited and its output pipe is closed; the caller holds a
 * borrowed pointer until the exit callback (or lsbx_proc_forget).
 */
#ifndef AL_LSBX_H
#define AL_LSBX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "cgroup.h"

#define LSBX_BWRAP "/usr/bin/bwrap"
#define LSBX_RUNNER_UID 1001                /* the runner's uid inside its namespace */
#define LSBX_DEFAULT_USER "airlock-sandbox" /* the host user when airlockd is root */
#define LSBX_LINE_MAX 1024                  /* a runner's log line, longer ones are cut */
#define LSBX_DEFAULT_MEMORY (4ull << 30)
#define LSBX_DEFAULT_PIDS 1024
#define LSBX_DEFAULT_CPU 100  /* percent of one core */
#define LSBX_FALLBACK_NICE 10 /* without a cpu group: the sandbox yields the CPU */
#define LSBX_MAX_ARGS 128
/* The runner's option that cuts its agents off, and how it reads in the
 * runner's /proc/PID/cmdline with its NULs as spaces (relay_spawn.c adopts a
 * runner from an earlier airlockd only if its agents' network is right). */
#define LSBX_PROXY_LISTEN "127.0.0.1:0" /* --proxy-listen of a local sandbox's runner */
/* Agents with no network reach the proxy through a forwarder in their
 * jail (docs/proxy.md, "Agents with no network"): the runner's proxy
 * socket, in its private /tmp, and the forwarder's binary, found next to
 * the runner's and bound read-only into the runner's sandbox. */
#define LSBX_PROXY_SOCKET "/tmp/airlock-proxy.sock"
#define LSBX_FWD_NAME "airlock-proxy-fwd"
#define LSBX_FWD_PATH "/airlock/airlock-proxy-fwd" /* in the runner's sandbox */
#define LSBX_FWD_OPT "--agent-proxy-fwd"
#define LSBX_NET_OPT "--agent-network"
#define LSBX_NET_NONE "none"
#define LSBX_NET_NONE_CMDLINE LSBX_NET_OPT " " LSBX_NET_NONE

struct lsbx;
struct lsbx_proc;

typedef void lsbx_log_fn(void *ud, int level, const char *line);
/* The runner exited (status, or the signal that ended it). */
typedef void lsbx_exit_fn(void *data, int64_t status, int signo);

struct lsbx_config {
    uv_loop_t *loop;
    const char *runner_bin; /* absolute path of airlock-runner */
    const char *data_dir;
    const char *user; /* the sandbox user when root (NULL: LSBX_DEFAULT_USER) */
    int unsafe;       /* --no-bwrap: runners as airlockd's own children, no sandbox */
    struct cg_limits limits;
    lsbx_log_fn *log;
    void *log_ud;
};

struct lsbx_spawn {
    const char *id;       /* the sandbox */
    const char *url;      /* where the runner dials */
    const char *run_dir;  /* the sandbox's run directory (jwks.json, token) */
    const char *work_dir; /* its workspace */
    int insecure_tls;
    int no_network;       /* agents get loopback only (refused with --no-bwrap:
                             no jail there to cut their network) */
    const char *link_key; /* the runner's key, handed over on its stdin */
    int proxy_listen;     /* the runner serves the credential proxy's listener
                             (LSBX_PROXY_LISTEN: loopback, a port of its choice) */
    lsbx_exit_fn *exit_cb;
    void *data;
};

/* Checks what this host can give (bubblewrap, user namespaces, the
 * sandbox user when root, cgroups). Never fails for an unusable host: it
 * records why, and lsbx_spawn then refuses with that reason. */
int lsbx_new(const struct lsbx_config *cfg, struct lsbx **out);
/* Runners keep running (they redial when airlockd comes back). */
void lsbx_free(struct lsbx *l);

/* NULL when local sandboxes can be started, else why not. */
const char *lsbx_unusable(const struct lsbx *l);

/* Prepare the directories (owned by the sandbox user when root) and start
 * the runner. 0 with *out and *pid, or AL_E_* with why. */
int lsbx_start(struct lsbx *l, const struct lsbx_spawn *s, struct lsbx_proc **out, int *pid,
               char *why, size_t cap);
/* Stop calling back about this runner (airlockd is stopping; it runs on). */
void lsbx_proc_forget(struct lsbx_proc *p);

/* Whether agents with no network can be served the credential proxy:
 * the forwarder is there (next to the runner). */
int lsbx_can_forward(const struct lsbx *l);

/* The host uid and gid sandboxes run as (airlockd's own when not root). */
void lsbx_owner(const struct lsbx *l, uid_t *uid, gid_t *gid);

/* The cgroup name of a sandbox (unique per data directory). */
int lsbx_cgroup_name(const struct lsbx *l, const char *id, char *out, size_t cap);

#endif
