/*
 * relay: airlockd's live state. Sandboxes (one controller endpoint each,
 * towards its runner), terminals (a shared output log, the recording, the
 * runner's latest screen snapshot) and the clients attached to them (one
 * host endpoint each). No sockets here: the libwebsockets glue (api.c)
 * moves whole messages in and out and calls the wake function it registered
 * when a connection has something to send.
 *
 * Data model
 *   struct relay     the sandboxes (a list), the configuration, the clock.
 *   struct rl_sbx    a sandbox: kind, the controller endpoint that outlives
 *                    its links, the current link (opaque conn), link state
 *                    (up since, RTT), for local sandboxes the runner process,
 *                    for static ones the redial schedule; its terminals.
 *   struct rl_term   a terminal: its channel on the runner, a bounded log
 *                    per output stream shared by every client (each client
 *                    reads it at its own cursor), the recording (cast.c),
 *                    the durable offsets, the snapshot cache, the writer's
 *                    input waiting for room towards the runner, the clients.
 *   struct rl_client a client attached to one terminal: its host endpoint
 *                    (docs/protocol.md, "Relay sessions"), its cursors, its
 *                    role (writer or viewer).
 * Ownership: the relay owns everything; rl_* pointers handed out stay valid
 * until the matching *_gone / relay_free.
 *
 * Files: a function's prefix names the file that holds it (relay_int.h
 * maps them): relay.c (relay_new, relay_tick, ...), relay_cred.c,
 * relay_sandbox.c, relay_runner.c (the link), relay_spawn.c,
 * relay_terminal.c, relay_output.c, relay_client.c, relay_proxy.c (the
 * credential proxy's part in a terminal's life). Types keep rl_.
 *
 * Durability: output is acknowledged to the runner only once it is in the
 * recording and the pair (stream offset, recording size) is in the
 * database (docs/recording.md). After a crash airlockd adopts every live
 * terminal at those offsets and the runner resends the rest.
 */
#ifndef AL_RELAY_H
#define AL_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "apireq.h"
#include "db.h"
#include "signer.h"

#define RL_LOG_BYTES (4u << 20)          /* output log per stream and terminal */
#define RL_CLIENT_RING (256u << 10)      /* a client's unacknowledged output */
#define RL_CLIENT_WINDOW (64u << 10)     /* a writer's input credit */
#define RL_RUNNER_WINDOW (2u << 20)      /* output credit granted to a runner */
#define RL_SYNC_BYTES (512u << 10)       /* sync the recording after this much */
#define RL_SYNC_US 200000ull             /* ... or this long after the first byte */
#define RL_TOKEN_TTL_S 600               /* runner:connect tokens we mint */
#define RL_TOKEN_REFRESH_US 240000000ull /* a fresh one in band this often */
/* the ERROR (NO_CHANNEL) a client gets before the CLOSE of a terminal
 * its runner no longer has (the runner restarted, or ended it) */
#define RL_LOST_MSG "terminal lost: its runner no longer has it"
/* how long an interactive attach by the writer's own user waits for the
 * writer's connection to go before it is told it is a viewer: a writer that
 * reconnects is often attached again before airlockd has read its old
 * connection to the end (protocol.md §9) */
#define RL_WRITER_RETURN_US 3000000ull
#define RL_REDIAL_MIN_MS 250
#define RL_REDIAL_MAX_MS 30000
#define RL_MAX_CLIENTS 64 /* clients attached to one terminal (AL_MAX_VIEWERS) */
/* Fair shares of a terminal's attach slots: one user name holds at most
 * RL_MAX_CLIENTS_PER_USER of them, and the last RL_RESERVED_CLIENTS are
 * kept for admins and the terminal's creator, so that they can always
 * attach whatever others do. */
#define RL_MAX_CLIENTS_PER_USER 8
#define RL_RESERVED_CLIENTS 8
/* Snapshots one client may ask for (SNAPSHOT_REQ): a burst, then one per
 * interval. One over the rate is deferred (repeats coalesce) and served
 * when the interval has passed: late, never lost. */
#define RL_CLIENT_SNAP_BURST 4
#define RL_CLIENT_SNAP_INTERVAL_US 250000ull
/* How long a SNAPSHOT_REQ to the runner may go unanswered. Past it, or on
 * an ERROR in answer, the clients waiting for that snapshot get an ERROR
 * STATE saying why and a GAP to the live output (docs/protocol.md §9);
 * the next client that needs a snapshot asks again. Above the runner's
 * own worst deferral (AL_MAX_CHANNELS snapshots at RUNNER_SNAP_INTERVAL_US). */
#define RL_SNAP_TIMEOUT_US 20000000ull
/* A lease lasts this many heartbeats (docs/scale-out.md, "Leases"): the
 * owner renews it at each, so two beats may fail before it expires. */
#define RL_LEASE_BEATS 3
/* the ERROR (NO_CHANNEL) a client gets before the CLOSE of a terminal
 * whose sandbox another replica took over */
#define RL_MOVED_MSG "terminal moved: another replica owns its sandbox now"

struct relay;
struct lsbx;
struct proxy;
struct rl_sbx;
struct rl_client;

/* A connection has frames to send: the glue calls *_output when writable. */
typedef void rl_wake_fn(void *conn);
#define RL_LINK_ERROR_MAX 256 /* bytes of a sandbox's last dial failure */
/* Trust between replicas (relay_peers.c): the other replicas' keysets
 * kept at most, and how often a token with an unknown kid may make the
 * relay read them again between heartbeats. */
#define RL_PEER_KEYSETS_MAX 1000         /* DB_REPLICAS_LIST_MAX */
#define RL_PEER_REFRESH_MIN_US 100000ull /* on demand: 10 queries a second at most */
#define RL_PEER_REFRESH_BURST 10         /* ... after a burst of this many */
#define RL_HOP_SEEN_MAX 4096             /* replicas' tokens used in the last minute, at most */
#define RL_HOP_JTI_MAX 43                /* a jti's length: 32 random bytes in base64url, at most */

/* What a dial presents: the runner's URL and our runner:connect token;
 * for an aca sandbox also its platform, whose token goes in Authorization
 * while ours goes in AL_PLATFORM_TOKEN_HEADER (docs/aca.md). */
struct rl_dial {
    const char *url;
    const char *token;
    const char *platform; /* NULL: a static sandbox */
};

/* Dial a static or aca sandbox: the glue connects as d says and calls
 * relay_runner_up() when the WebSocket is established (or
 * relay_runner_dial_failed()). 0, or AL_E_* when it could not even start
 * (with a reason in why). */
typedef int rl_dial_fn(void *ud, struct rl_sbx *sb, const struct rl_dial *d, char *why, size_t cap);

struct relay_config {
    struct db *db;
    struct signer *signer; /* mints runner:connect tokens (the key is its own) */
    const char *data_dir;
    const char *rec_dir;  /* recordings: ID.cast */
    int rec_fenced;       /* a shared database: a recording taken over from another
                             replica is first replaced by a copy of its durable
                             prefix (docs/scale-out.md, "Recordings") */
    struct lsbx *lsbx;    /* starts local sandboxes' runners (borrowed) */
    const char *self_url; /* ws://host:port where local runners dial us */
    int no_network;       /* local sandboxes' agents get loopback only, unless the
                             sandbox's row says otherwise (its network) */
    int insecure_tls;     /* self_url is wss:// with a certificate runners cannot check */
    int log_level;
    int log_format;                    /* enum al_log_format */
    struct proxy *proxy;               /* the credential proxy (borrowed); NULL: no upstreams */
    const struct platforms *platforms; /* aca sandboxes' platforms (borrowed; pings) */
    const char *proxy_base;            /* its direct path as agents reach it
                                          ("http://ADDR:PORT/v1/proxy"); NULL: not served */
    int proxy_direct;                  /* the direct path only: local runners serve no
                                          proxy listener, PROXY_AT is not used */
    uint64_t ping_us, idle_us;         /* every link's ping interval and idle timeout
                                          (runners and clients); 0: the endpoint's default */
    uv_loop_t *loop;
    rl_wake_fn *wake;
    rl_dial_fn *dial;
    void *dial_ud;
};

int relay_new(const struct relay_config *cfg, struct relay **out, char *err, size_t cap);
/* Closes every link and client (terminals keep running in their runners). */
void relay_free(struct relay *r);

/* Timers (syncs, token refresh, redials, pings). Monotonic µs. */
void relay_tick(struct relay *r, uint64_t now_us);
uint64_t relay_next_deadline(const struct relay *r);
uint64_t relay_now_us(void);

/* ---- runners ---------------------------------------------------------------- */

struct rl_sbx *relay_sandbox(struct relay *r, const char *id);

/* ---- leases (relay_lease.c; docs/scale-out.md) ------------------------------- */

/* As relay_sandbox, and a sandbox another replica added since this one
 * started is learnt from the database (made here, not started: its lease
 * says who serves it). NULL when the database has no such sandbox. */
struct rl_sbx *relay_sandbox_known(struct relay *r, const char *id);

/* Serve as replica_id (registered): renew and take leases from now on,
 * each lease beat_ms * RL_LEASE_BEATS long, a replica gone once its beat
 * is stale_ms old; takes what is free at once. */
int relay_lease_start(struct relay *r, const char *replica_id, int64_t beat_ms, int64_t stale_ms);
/* At each heartbeat: renew every lease held (one statement), give up the
 * sandboxes lost, take and adopt those free (one statement). */
int relay_lease_beat(struct relay *r);
/* A runner dialed this replica for sb: the lease moves here (the old
 * owner fenced off). AL_E_AGAIN (why says so) while this replica still
 * gives up an earlier ownership; the runner dials again. */
int relay_lease_claim(struct relay *r, struct rl_sbx *sb, char *why, size_t cap);
/* A clean stop: every lease freed for the others at once. */
void relay_lease_release(struct relay *r);
/* The owner's id (or "none") in buf, for a refusal's message, when
 * sandbox id exists and another replica owns it (or none does); NULL
 * when this replica owns it or there is no such sandbox. */
const char *relay_sandbox_owner(const struct relay *r, const char *id, char *buf, size_t cap);
/* Whether a runner:connect bearer token is valid for this sandbox. */
int relay_cred_token_ok(struct relay *r, const char *sandbox_id, const char *token, char *why,
                        size_t cap);
/* Whether a dialing runner's key (AL_RUNNER_KEY_HEADER) is the sandbox's
 * pinned one (rkey.h), as the database holds it for every replica; the
 * first key of a sandbox without a pin is pinned. */
int relay_cred_key_ok(struct relay *r, const char *sandbox_id, const char *key, char *why,
                      size_t cap);
/* The user a replica's token (scope SIGNER_HOP_SCOPE for an attach,
 * SIGNER_FWD_SCOPE for an action) vouches for, checked with the registered
 * replicas' keys for this replica's id, and good once: with take, its jti
 * is kept until it expires, and a token whose jti was kept is refused
 * (take 0: checked, not used up, for a look before a request's body is
 * read). Its name into user (cap > DB_NAME_MAX); AL_E_* with why
 * otherwise. */
int relay_hop_user(struct relay *r, const char *token, const char *scope, int take, char *user,
                   size_t cap, char *why, size_t wcap);
/* Forget the pin (a reverse sandbox enrolled again), in the database and
 * any left in the data directory from before schema 10. */
int relay_cred_key_forget(struct relay *r, const char *sandbox_id);
/* A link to the sandbox's runner is up (dialed or accepted). A newer link
 * replaces an older one: the relay forgets it, and *replaced (when not
 * NULL) is set to it (or NULL) for the glue to close; every replaced link
 * is closed, however many replace each other before they get to write. */
int relay_runner_up(struct rl_sbx *sb, void *conn, void **replaced);
void relay_runner_down(struct rl_sbx *sb, void *conn);
void relay_runner_dial_failed(struct rl_sbx *sb, const char *why);
int relay_runner_input(struct rl_sbx *sb, void *conn, const uint8_t *msg, size_t len);
/* The WebSocket layer refused a message (wsg's WSG_REFUSED): fail the
 * link with ERROR code, then close (ep_fail). */
int relay_runner_refuse(struct rl_sbx *sb, void *conn, uint16_t code, const char *why);
long relay_runner_output(struct rl_sbx *sb, void *conn, uint8_t *buf, size_t cap);
/* Non-zero when conn must be closed (code, reason) once drained. */
int relay_runner_closing(struct rl_sbx *sb, void *conn, int *code, const char **reason);

/* ---- clients ---------------------------------------------------------------- */

struct rl_attach {
    const char *term_id;
    const char *user;
    enum db_role role;
    int read_only; /* asked for observation only */
    void *conn;
};
/* 0, AL_E_NOENT (no such live terminal), AL_E_LIMIT (no slot for this
 * user: RL_MAX_CLIENTS, RL_MAX_CLIENTS_PER_USER, RL_RESERVED_CLIENTS; why
 * says which). */
int relay_client_attach(struct relay *r, const struct rl_attach *a, struct rl_client **out,
                        char *why, size_t cap);
void relay_client_gone(struct rl_client *c);
int relay_client_input(struct rl_client *c, const uint8_t *msg, size_t len);
/* As relay_runner_refuse, for a client's link. */
int relay_client_refuse(struct rl_client *c, uint16_t code, const char *why);
long relay_client_output(struct rl_client *c, uint8_t *buf, size_t cap);
int relay_client_closing(struct rl_client *c, int *code, const char **reason);

/* ---- the API's actions -------------------------------------------------------- */

/* What a local sandbox's agents get, DB_NETWORK_HOST or DB_NETWORK_NONE:
 * its own setting, else (DB_NETWORK_DEFAULT) the server-wide no_network.
 * Applied whenever its runner is started or a running one adopted. */
enum db_sandbox_network relay_sandbox_network(const struct relay *r, enum db_sandbox_network n);
/* How many runner links of sandbox id were refused since airlockd started
 * because their key was not the pinned one, and when the last was (ms). */
/* Why the last dial of a static or aca sandbox failed (the front's or
 * the runner's answer, told apart), NULL when none has since its link was
 * last up. Valid until the next tick. */
const char *relay_sandbox_link_error(const struct relay *r, const char *id);
void relay_sandbox_refused(const struct relay *r, const char *id, uint64_t *count,
                           int64_t *last_ms);
/* Start what a sandbox row needs (local: spawn its runner; static: dial). */
int relay_sandbox_added(struct relay *r, const char *id, char *why, size_t cap);
/* Stop its link and its runner (local). The row is the caller's. */
void relay_sandbox_removed(struct relay *r, const char *id);
/* Open a terminal for creator (a user name); its id goes to id_out (cap >
 * DB_NAME_MAX). Its recording keeps input only if both the sandbox's and
 * spec's record_input say so. */
int relay_terminal_create(struct relay *r, const struct apireq_terminal *spec, const char *creator,
                          char *id_out, size_t cap, char *why, size_t why_cap);
int relay_terminal_signal(struct relay *r, const char *id, unsigned signo);
int relay_terminal_resize(struct relay *r, const char *id, uint16_t cols, uint16_t rows);
/* Close the channel on the runner and forget the terminal (the recording stays). */
int relay_terminal_close(struct relay *r, const char *id);
/* Revoke the terminal's proxy credentials (relay_proxy.c): in the database
 * (none is fine), and the proxy's limits for it forgotten. */
int relay_proxy_revoke(struct relay *r, const char *term_id);
/* 1 when the terminal is confirmed to run now (relay_proxy.c): known to
 * the relay, not exited, its sandbox's runner linked and its OPENED or
 * ATTACHED "running" received on that link. Its credential opens its
 * upstreams only then: after airlockd's start (or a link's loss), a
 * terminal that ended meanwhile is known to have ended only once its
 * runner answers the re-attach; until then it is not taken as running
 * (docs/proxy.md). A terminal this replica does not serve is live when
 * the database says it runs and another replica holds its sandbox's
 * lease with the runner linked (docs/scale-out.md). */
int relay_proxy_live(const struct relay *r, const char *term_id);

struct rl_term_info {
    int live; /* known to the relay (else only the row exists) */
    unsigned clients;
    char writer[DB_NAME_MAX + 1];
    const char *names[RL_MAX_CLIENTS]; /* valid until the next relay call */
    uint8_t roles[RL_MAX_CLIENTS];     /* FR_WRITER / FR_VIEWER */
    uint64_t out_end, rec_bytes;
    uint16_t cols, rows; /* the live size */
    int rec_failed;
    char rec_error[128];
};
void relay_terminal_info(struct relay *r, const char *id, struct rl_term_info *out);

struct rl_metrics {
    unsigned sandboxes, links_up, terminals, clients;
    uint64_t bytes_out, bytes_in, resyncs, rec_errors;
};
void relay_metrics(const struct relay *r, struct rl_metrics *m);
/* Each sandbox's link: up or not, and its last measured round trip
 * (microseconds; negative when none was measured yet). */
typedef void rl_link_fn(void *ud, const char *sandbox, int up, int64_t rtt_us);
void relay_each_link(const struct relay *r, rl_link_fn *fn, void *ud);

#endif
