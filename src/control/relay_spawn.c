/*
 * relay_spawn: a local sandbox's runner process, on this host. Its files
 * live in DATA/sandboxes/ID/run (the token it dials with, rewritten every
 * RL_TOKEN_REFRESH_US whether linked or not; the public keys; its pid);
 * its workspace is DATA/sandboxes/ID/work. Each start pins a fresh runner
 * key (rkey.h) handed to the runner on its stdin. A runner left by an
 * earlier airlockd is kept when it dials the same address with the same
 * network for its agents (it redials by itself), else replaced.
 *
 * Not here: the bubblewrap command and what the runner is given in its
 * sandbox (lsbx.c, lsbx.h), the link once it dials (relay_runner.c).
 */
#include "relay_int.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "al_err.h"
#include "al_limits.h"
#include "fsutil.h"
#include "keys.h"
#include "lsbx.h"
#include "rkey.h"

#define RL_RESPAWN_MS 1000
#define RL_PROC_CHECK_US 1000000ull

static int write_token_file(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    char dir[RL_PATH_MAX], path[RL_PATH_MAX], tmp[RL_PATH_MAX], tok[AL_MAX_TOKEN];
    if (relay_path(r, dir, sizeof dir, "sandboxes/%s/run", sb->id) != AL_OK ||
        relay_path(r, path, sizeof path, "sandboxes/%s/run/token", sb->id) != AL_OK ||
        relay_path(r, tmp, sizeof tmp, "sandboxes/%s/run/token.tmp", sb->id) != AL_OK)
        return AL_E_TOOBIG;
    if (fsutil_mkdir_p(dir, 0700) != AL_OK)
        return AL_E_IO;
    int rc = relay_cred_mint(sb, sb->id, "token_file", tok, sizeof tok);
    if (rc != AL_OK)
        return rc;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return AL_E_IO;
    /* readable by the runner's host user alone (never by its agents: they
     * run in a jail that does not mount the run directory) */
    uid_t uid;
    gid_t gid;
    lsbx_owner(r->cfg.lsbx, &uid, &gid);
    size_t n = strlen(tok);
    int ok = (geteuid() != 0 || fchown(fd, uid, gid) == 0) && write(fd, tok, n) == (ssize_t)n;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        (void)unlink(tmp);
        return AL_E_IO;
    }
    return AL_OK;
}

static void on_proc_exit(void *data, int64_t status, int signo)
{
    struct rl_sbx *sb = data;
    relay_log(sb->r, 1, "sandbox %s: runner exited (status %lld, signal %d)", sb->id,
              (long long)status, signo);
    sb->proc_live = 0;
    sb->pid = 0;
    sb->proc_check_us = relay_now_us() + RL_RESPAWN_MS * 1000ull;
    sb->proc = NULL;
}

static int pid_file(struct rl_sbx *sb, char *path, size_t cap)
{
    return relay_path(sb->r, path, cap, "sandboxes/%s/run/runner.pid", sb->id);
}

/* A runner from an earlier airlockd may still run: it redials by itself. */
static int runner_alive(struct rl_sbx *sb)
{
    if (sb->proc_live)
        return 1;
    char path[RL_PATH_MAX], buf[32];
    if (pid_file(sb, path, sizeof path) != AL_OK || fsutil_read(path, buf, sizeof buf) <= 0)
        return 0;
    long pid = strtol(buf, NULL, 10);
    if (pid <= 1 || kill((pid_t)pid, 0) != 0)
        return 0;
    char cpath[64], cmd[4096];
    (void)snprintf(cpath, sizeof cpath, "/proc/%ld/cmdline", pid);
    ssize_t n = fsutil_read(cpath, cmd, sizeof cmd);
    if (n <= 0)
        return 0;
    for (ssize_t i = 0; i < n; i++)
        if (!cmd[i])
            cmd[i] = ' ';
    if (!strstr(cmd, "airlock-runner") && !strstr(cmd, "bwrap"))
        return 0;
    /* one dialing another address (airlockd moved or turned TLS on) is replaced */
    char want[DB_SANDBOX_URL_MAX + 128], got[DB_SANDBOX_URL_MAX + 128] = "";
    (void)snprintf(want, sizeof want, "%s/v1/runners/connect?identifier=%s", sb->r->cfg.self_url,
                   sb->id);
    /* and so is one whose agents have another network than the sandbox's
     * now (airlockd restarted with another --sandbox-network) */
    int cut = strstr(cmd, LSBX_NET_NONE_CMDLINE) != NULL;
    int want_cut = relay_sandbox_network(sb->r, sb->network) == DB_NETWORK_NONE;
    /* and so is a cut one that does (not) give its agents the proxy's
     * forwarder while airlockd serves (no longer serves) them through it */
    const struct relay *r = sb->r;
    int fwd = strstr(cmd, LSBX_FWD_OPT) != NULL;
    int want_fwd = want_cut && r->cfg.proxy && !r->cfg.proxy_direct && r->cfg.lsbx &&
                   lsbx_can_forward(r->cfg.lsbx);
    if (!strstr(cmd, want) || cut != want_cut || fwd != want_fwd) {
        (void)snprintf(got, sizeof got, "%.200s", cmd);
        relay_log(sb->r, 1, "sandbox %s: replacing runner pid %ld (%s%s)", sb->id, pid, got,
                  cut != want_cut   ? "; its agents' network differs"
                  : fwd != want_fwd ? "; its agents' proxy forwarder differs"
                                    : "");
        (void)kill((pid_t)-pid, SIGTERM);
        return 0;
    }
    sb->pid = (int)pid;
    return 1;
}

/* The runner, in its sandbox (lsbx.h says what it gets). */
static int spawn_runner(struct rl_sbx *sb)
{
    struct relay *r = sb->r;
    char run[RL_PATH_MAX], work[RL_PATH_MAX], url[DB_SANDBOX_URL_MAX + 128];
    char jwks_src[RL_PATH_MAX], why[512];
    if (relay_path(r, run, sizeof run, "sandboxes/%s/run", sb->id) != AL_OK ||
        relay_path(r, work, sizeof work, "sandboxes/%s/work", sb->id) != AL_OK ||
        relay_path(r, jwks_src, sizeof jwks_src, "%s", KEYS_JWKS_FILE) != AL_OK)
        return AL_E_TOOBIG;
    const char *unusable = lsbx_unusable(r->cfg.lsbx);
    if (unusable) {
        relay_log(r, 0, "sandbox %s: not started: %s", sb->id, unusable);
        return AL_E_PERM;
    }
    if (fsutil_mkdir_p(run, 0700) != AL_OK || fsutil_mkdir_p(work, 0755) != AL_OK)
        return AL_E_IO;
    /* the runner reads the public keys from its own directory */
    char jwks_dst[RL_PATH_MAX + 16];
    (void)snprintf(jwks_dst, sizeof jwks_dst, "%s/jwks.json", run);
    if (fsutil_copy(jwks_src, jwks_dst) != AL_OK)
        return AL_E_IO;
    int rc = write_token_file(sb);
    if (rc == AL_OK)
        sb->file_due_us = relay_now_us() + RL_TOKEN_REFRESH_US;
    if (rc != AL_OK)
        return rc;
    (void)snprintf(url, sizeof url, "%s/v1/runners/connect?identifier=%s", r->cfg.self_url, sb->id);
    /* a fresh key for this runner, pinned before it dials: only it can link */
    char key[AL_RUNNER_KEY_LEN + 1];
    if (rkey_new(key) != AL_OK)
        return AL_E_IO;
    rc = relay_cred_key_pin(sb, key); /* in the database, fenced: only the owner */
    if (rc != AL_OK) {
        OPENSSL_cleanse(key, sizeof key);
        return rc;
    }
    struct lsbx_spawn sp = {
        .link_key = key,
        .id = sb->id,
        .url = url,
        .run_dir = run,
        .work_dir = work,
        .insecure_tls = r->cfg.insecure_tls,
        .no_network = relay_sandbox_network(r, sb->network) == DB_NETWORK_NONE,
        .proxy_listen = r->cfg.proxy && !r->cfg.proxy_direct, /* the path through the runner */
        .exit_cb = on_proc_exit,
        .data = sb,
    };
    why[0] = 0;
    rc = lsbx_start(r->cfg.lsbx, &sp, &sb->proc, &sb->pid, why, sizeof why);
    OPENSSL_cleanse(key, sizeof key);
    if (rc != AL_OK) {
        relay_log(r, 0, "sandbox %s: cannot start its runner: %s", sb->id, why);
        return rc;
    }
    sb->proc_live = 1;
    char pidp[RL_PATH_MAX], pidtxt[32];
    if (pid_file(sb, pidp, sizeof pidp) == AL_OK) {
        int fd = open(pidp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            int m = snprintf(pidtxt, sizeof pidtxt, "%d\n", sb->pid);
            if (write(fd, pidtxt, (size_t)m) != m)
                relay_log(r, 0, "sandbox %s: cannot write %s", sb->id, pidp);
            (void)close(fd);
        }
    }
    return AL_OK;
}

void relay_spawn_tick(struct rl_sbx *sb, uint64_t now)
{
    struct relay *r = sb->r;
    if (!relay_lease_owned(sb))
        return; /* another replica runs it */
    if (sb->kind == DB_SANDBOX_LOCAL && !sb->removed && sb->proc_check_us &&
        now >= sb->proc_check_us) {
        sb->proc_check_us = now + RL_PROC_CHECK_US;
        if (!runner_alive(sb) && spawn_runner(sb) != AL_OK)
            sb->proc_check_us = now + RL_RESPAWN_MS * 5000ull;
    }
    /* a local runner redials with its token file: keep it fresh, linked or not
     * (after airlockd was down longer than a token lives, its first write
     * lets the waiting runner in) */
    if (sb->kind == DB_SANDBOX_LOCAL && !sb->removed && now >= sb->file_due_us) {
        sb->file_due_us = now + RL_TOKEN_REFRESH_US;
        if (write_token_file(sb) != AL_OK)
            relay_log(r, 0, "sandbox %s: cannot refresh the runner's token file", sb->id);
    }
}
