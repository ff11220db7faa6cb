/*
 * jail: the agent's own sandbox, inside the runner's. Sandbox side only.
 *
 * With a jail, every agent process is started through bubblewrap in a
 * user namespace nested in the runner's: its own uid (JAIL_AGENT_UID),
 * no capability (bounding set empty), no_new_privs, no further user
 * namespace, its own pid, IPC and UTS namespaces (it sees no process of
 * the runner's: it can neither signal, trace nor read one), optionally
 * its own network namespace with loopback only, and a seccomp filter
 * (jail.c, the table `denied`) refusing what agents never need. Its file
 * system is the system read-only (/usr, /etc, /opt and their links), a
 * private /tmp, /dev and /proc of its own, and the workspace: nothing of
 * the runner's (its token, its binary, its keys) is mounted.
 *
 * The credential proxy for a jail with no network (docs/proxy.md, "Agents
 * with no network"): the runner's listener is in another network
 * namespace, so the runner's proxy socket (a unix socket) is bound into
 * the jail at JAIL_PROXY_SOCKET and the jail's first command is the
 * forwarder (src/fwd, airlock-proxy-fwd, bound read-only at
 * JAIL_PROXY_FWD, not the runner's binary), which listens on
 * 127.0.0.1:PORT in the jail, PORT being the runner's own listener's (the
 * one the terminal's base URL names), then becomes the agent's command.
 *
 * Data model: a struct jail holds the configuration and the compiled
 * seccomp program (classic BPF, built once by libseccomp). Each spawn gets
 * a struct jail_cmd: the argv prefix to put before the agent's resolved
 * command and a fresh memfd holding the program, which bubblewrap reads
 * (--seccomp FD). The caller owns the jail_cmd and releases it with
 * jail_cmd_done once the child has started.
 */
#ifndef AL_JAIL_H
#define AL_JAIL_H

#include <stddef.h>

#define JAIL_BWRAP "/usr/bin/bwrap"
#define JAIL_SETSID "/usr/bin/setsid" /* util-linux: a session (and terminal) of its own */
#define JAIL_AGENT_UID 1000           /* the agent's uid and gid inside its namespace */
#define JAIL_MAX_ARGS 96              /* the argv prefix, NULL included */
#define JAIL_DEFAULT_HOME "/workspace"
#define JAIL_MAX_LINKS 8                            /* /bin, /lib ... copied as links */
#define JAIL_PROXY_SOCKET "/airlock/proxy.sock"     /* the runner's proxy socket, in the jail */
#define JAIL_PROXY_FWD "/airlock/airlock-proxy-fwd" /* the forwarder, in the jail */

struct jail;

struct jail_config {
    const char *workspace; /* the directory the agent may write (e.g. /workspace) */
    int no_network;        /* its own network namespace, loopback only */
    const char *proxy_fwd; /* with no_network: the forwarder's binary (NULL: none) */
};

/* The runner's credential proxy, for jail_cmd (NULL: it serves none). */
struct jail_proxy {
    const char *socket; /* its unix socket, as the runner sees it */
    int port;           /* its loopback listener's port */
};

struct jail_cmd {
    const char *argv[JAIL_MAX_ARGS]; /* bwrap ... -- (the command follows) */
    int fd;                          /* the seccomp program; the child keeps it */
    char fdtxt[16];
    char cwd[512];
    char links[JAIL_MAX_LINKS][128]; /* their targets */
    char porttxt[8];
};

/* Checks bubblewrap is there and compiles the filter. 0 or AL_E_*; err
 * says why (e.g. no bubblewrap, no libseccomp support for this arch). */
int jail_new(const struct jail_config *cfg, struct jail **out, char *err, size_t cap);
void jail_free(struct jail *j);

/* Whether jail_cmd puts the forwarder in front of agents given px: a jail
 * with no network and a forwarder, and a proxy with a socket and a port. */
int jail_forwards(const struct jail *j, const struct jail_proxy *px);

/* The prefix for one agent started in cwd (NULL: the workspace), on a
 * PTY (pty: the command takes it as its controlling terminal) or pipes,
 * with the runner's credential proxy px (NULL: none; see jail_forwards).
 * 0 or AL_E_IO / AL_E_TOOBIG with err. */
int jail_cmd(const struct jail *j, const char *cwd, int pty, const struct jail_proxy *px,
             struct jail_cmd *out, char *err, size_t cap);
void jail_cmd_done(struct jail_cmd *c);

#endif
