/*
 * relay_int: what the relay's files share and nothing else includes. The
 * structures relay.h keeps opaque (its "Data model" says what each one
 * represents and who owns what), the limits only the relay uses, and the
 * functions one relay file calls in another, grouped by the file that
 * defines them: a function's prefix is its file's name.
 *
 *   relay.c           struct relay: start, stop, ticks, metrics; logging,
 *                     audit, wake and data-directory paths for the others
 *   relay_cred.c      runner:connect tokens minted and checked, runner keys
 *   relay_sandbox.c   struct rl_sbx: one per sandbox row, its tick
 *   relay_runner.c    a sandbox's link to its runner: the controller
 *                     endpoint's events, replaced links, redials
 *   relay_spawn.c     a local sandbox's runner process and its files
 *   relay_terminal.c  struct rl_term: open, adopt, exit, drop; its input
 *                     towards the runner; the API's terminal actions
 *   relay_output.c    a terminal's shared output log, its recording and
 *                     durable offsets, its snapshot cache
 *   relay_client.c    struct rl_client: attach, the writer and viewers,
 *                     what each client is sent
 *   relay_proxychan.c the proxy's path through a runner: each proxy
 *                     channel of a sandbox's link fed to a proxyconn
 *   relay_proxy.c     a terminal's proxy credential: minted with its
 *                     environment, bound to its row, revoked at its end
 *
 * Not for api.c or any other file: relay.h is the relay's interface.
 */
#ifndef AL_RELAY_INT_H
#define AL_RELAY_INT_H

#include "backoff.h"
#include "cast.h"
#include "endpoint.h"
#include "frame.h"
#include "proxy.h"
#include "proxyenv.h"
#include "ratelim.h"
#include "relay.h"
#include "ring.h"

struct ep;
struct ep_event;
struct cast;
struct lsbx_proc;
struct tok_keyset;

#define RL_IN_CAP ((size_t)2 * RL_CLIENT_WINDOW)
#define RL_IN_KEEP 4096 /* an input buffer this small is kept once empty; larger ones are freed */
#define RL_PATH_MAX 4096
#define RL_ACA_API_VERSION "2024-02-02-preview" /* the pool endpoint's api-version */
#define RL_HIST 32                              /* durable (offset, size) pairs kept */
#define RL_CLIENT_LAG (512u << 10) /* how far behind a client may hold the runner's ring */
/* Kept pairs lie at least this far apart (the newest excepted), so that
 * RL_HIST of them always reach back past RL_CLIENT_LAG and the credit can
 * move however small the syncs are. */
#define RL_HIST_STEP (RL_CLIENT_LAG / (RL_HIST / 2))
/* Liveness: with a client held back, the runner stops at (last ACK's
 * consumed) + window; the credit we can then pick lies within the lag, a
 * sync and a step of that, and must still be a quarter window past the
 * last ACK, or the endpoint sends none and nothing moves again. */
_Static_assert(RL_CLIENT_LAG + RL_SYNC_BYTES + RL_HIST_STEP + RL_RUNNER_WINDOW / 4 <
                   RL_RUNNER_WINDOW,
               "a client held at the lag must still let the runner's credit move");

struct rl_term;
struct rl_pxch;

struct rl_client {
    struct rl_term *t;
    struct rl_client *next;
    struct ep *ep;
    void *conn;
    char user[DB_NAME_MAX + 1];
    int may_write;   /* operator or admin, and not read-only */
    int wants_write; /* attached interactively */
    uint32_t ch;     /* the channel the client attached (0: not yet) */
    uint64_t cur[FR_NSTREAMS];
    int need_resync;
    int resynced;            /* at least once */
    uint64_t resync_at;      /* its stdout acknowledged offset then */
    int role_due;            /* send ROLE after this input */
    uint64_t role_wait_us;   /* the writer's own user attached again: its ROLE
                                waits until the writer goes, or until then
                                (RL_WRITER_RETURN_US), µs; 0: not waiting */
    struct ratelim snap_lim; /* its SNAPSHOT_REQs */
    uint64_t snap_due_us;    /* a deferred SNAPSHOT_REQ is served then (0: none) */
    int exit_sent;
    int gone;
};

struct rl_term {
    struct rl_sbx *sb;
    struct rl_term *next;
    char id[DB_NAME_MAX + 1];
    uint32_t ch;
    uint8_t mode;
    uint16_t cols, rows;
    char creator[DB_NAME_MAX + 1]; /* "": none known */
    uint16_t prev_cols, prev_rows; /* the size before the last RESIZE sent */
    enum db_term_state state;
    int exited, exit_code, exit_signal;
    /* the runner said on the current link that it runs (OPENED, or ATTACHED
     * "running"); cleared when a link goes down or is replaced: the
     * credential proxy's liveness check (relay_proxy_live) */
    int confirmed;
    int closing;
    struct ring log[FR_NSTREAMS];
    /* durability */
    uint64_t consumed[FR_NSTREAMS]; /* credited to the runner */
    uint64_t rec_base;              /* stdout offset when the writer opened */
    struct cast *cast;
    int rec_failed;
    char rec_error[128];
    struct cast_mark rec; /* the recording's last durable point (its size,
                             time, exit), or the row's if it failed */
    struct rl_pair {
        uint64_t off;
        struct cast_mark rec;
    } hist[RL_HIST], persisted; /* recent durable (offset, recording) pairs */
    unsigned nhist;
    uint64_t unsynced;
    uint64_t sync_due_us; /* 0: nothing to sync */
    int record_input;
    /* snapshot cache */
    uint8_t *snap;
    size_t snap_len;
    uint64_t snap_off;
    uint16_t snap_cols, snap_rows;
    int snap_have, snap_asked;
    uint64_t snap_asked_us; /* when snap_asked was set */
    /* input */
    /* input not yet taken by the runner's stdin (taken at once, mostly):
     * allocated as it is needed, at most RL_IN_CAP, freed once empty if
     * larger than RL_IN_KEEP (an idle terminal holds none) */
    uint8_t *in;
    size_t in_cap;
    size_t in_len, in_owned; /* owned: the writer's bytes, at the tail */
    int in_eof, in_eof_sent; /* the writer closed stdin */
    struct rl_client *clients, *writer;
    unsigned nclients;
    int viewers_due;
};

struct rl_sbx {
    struct relay *r;
    struct rl_sbx *next;
    char id[DB_NAME_MAX + 1];
    enum db_sandbox_kind kind;
    enum db_sandbox_network network; /* local: as its row says (maybe the default) */
    char url[DB_SANDBOX_URL_MAX + 1];
    char platform[DB_PLATFORM_MAX + 1]; /* aca: its platform; "" otherwise */
    char ident[DB_IDENT_MAX + 1];       /* aca: its session identifier (our tokens' aud) */
    char link_error[RL_LINK_ERROR_MAX]; /* the last dial's failure; "" since a link came up */
    struct ep *ep;
    void *conn;     /* the current link */
    void *old_conn; /* a replaced link, to be closed */
    int old_lost;   /* ... because another replica owns the sandbox now */
    int up;
    int64_t since_ms; /* when up last changed */
    uint64_t token_due_us;
    uint64_t file_due_us; /* local: when the runner's token file is next rewritten */
    int64_t rtt_us;
    /* static and aca: redial */
    struct backoff redial; /* redials after a failure */
    uint64_t redial_us;    /* 0: none scheduled */
    int dialing;
    /* local: the runner process */
    struct lsbx_proc *proc; /* borrowed from lsbx until its exit callback */
    int proc_live;
    int pid;
    uint64_t proc_check_us;
    struct rl_term *terms;
    struct rl_pxch *pxchs; /* the proxy channels of the current link */
    /* the runner's proxy listener (its last PROXY_AT; "": none known):
     * the base its terminals get, docs/proxy.md */
    char proxy_at[AL_MAX_PROXY_URL + 1];
    int removed;
    /* the lease (relay_lease.c): this replica owns the sandbox's runner
     * link under fence; adopt_due: taken, its terminals loaded and its
     * runner dialed or started once its old link is gone; drop_due: lost,
     * given up at the next tick (not from inside an event) */
    int owned;
    int64_t fence;
    int adopt_due, drop_due;
    int ep_used; /* its endpoint served an earlier ownership: made anew */
    int renewed; /* seen in this beat's renewal */
    /* runner links refused for a key that is not the pinned one (an
     * impostor with a copied token), since airlockd started */
    uint64_t refused_links;
    int64_t refused_at_ms;
};

struct relay {
    struct relay_config cfg;
    char replica_id[DB_REPLICA_ID_LEN + 1]; /* "" until relay_lease_start */
    int64_t lease_ms, stale_ms;
    struct tok_keyset *keys;
    /* the other replicas' published keys (relay_peers.c) */
    struct tok_keyset **peer_keys;
    size_t n_peer_keys;
    uint64_t peer_refresh_tat_us; /* the on-demand reads' bucket (relay_peers_verify) */
    /* replicas' tokens used (relay_hop_user), RL_HOP_SEEN_MAX slots made
     * at the first; a slot is free when exp is 0 */
    struct rl_jti {
        char jti[RL_HOP_JTI_MAX + 1];
        int64_t exp;
    } * hop_seen;
    struct rl_sbx *sbxs;
    uint64_t bytes_out, bytes_in, resyncs, rec_errors;
};

/* ---- relay.c ------------------------------------------------------------------ */

__attribute__((format(printf, 3, 4))) void relay_log(const struct relay *r, int level,
                                                     const char *fmt, ...);
int64_t relay_wall_ms(void);
void relay_audit(struct relay *r, const char *actor, const char *action, const char *target,
                 const char *detail);
/* Ask the glue for a writable callback on conn (NULL: none). */
void relay_wake(struct relay *r, void *conn);
/* DATA_DIR/fmt... into out: AL_OK or AL_E_TOOBIG. */
int relay_path(const struct relay *r, char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The configured ping interval and idle timeout (--ping-interval,
 * --idle-timeout) on a link's endpoint; unset, it keeps its defaults. */
void relay_link_timers(const struct relay *r, struct ep *ep);

/* ---- relay_peers.c ------------------------------------------------------------ */

/* Publish this replica's public keys (its jwks.json) in its replicas row. */
int relay_peers_publish(struct relay *r);
/* Read every other replica's published keys again (the ones read last
 * stay if the database fails). */
int relay_peers_refresh(struct relay *r);
void relay_peers_free(struct relay *r);
/* tok_verify against our keys and every other replica's; a kid none of
 * them knows reads the keys again first (RL_PEER_REFRESH_BURST reads,
 * then one per RL_PEER_REFRESH_MIN_US). */
struct tok_verify_params;
struct tok_claims;
int relay_peers_verify(struct relay *r, const char *token, const struct tok_verify_params *p,
                       struct tok_claims *out, char *why, size_t cap);

/* ---- relay_cred.c ------------------------------------------------------------- */

/* Pin key (a local runner's, made by the relay) as the sandbox's, fenced:
 * only the owner (AL_E_PERM once another owns it; the sandbox is lost). */
int relay_cred_key_pin(struct rl_sbx *sb, const char *key);
/* Mint a runner:connect token for sb (its audience sandbox_id) through the
 * signer; `purpose` says why, in the audit (fenced). AL_E_STATE when sb is
 * not ours. */
int relay_cred_mint(struct rl_sbx *sb, const char *sandbox_id, const char *purpose, char *out,
                    size_t cap);

/* ---- relay_sandbox.c ---------------------------------------------------------- */

int relay_sandbox_new(struct relay *r, const struct db_sandbox *row, struct rl_sbx **out);
/* Spawn or dial at the next tick. */
void relay_sandbox_start(struct rl_sbx *sb);
/* A new controller endpoint for sb (relay_sandbox_new, and each adoption
 * after a loss: the old one's channels are stale). */
int relay_sandbox_ep(struct rl_sbx *sb);
/* Its live terminals from the database, adopted at their durable offsets. */
int relay_sandbox_load_terminals(struct rl_sbx *sb);

/* ---- relay_lease.c ------------------------------------------------------------ */

/* The fence sb's writes carry; its writes are made only while owned. */
int relay_lease_owned(const struct rl_sbx *sb);
/* After a fenced write about sb: AL_E_PERM means another replica owns it
 * now: sb is given up (logged once). rc is returned as is. */
int relay_lease_checked(struct rl_sbx *sb, int rc);
/* sb lost (why): no more writes; its links and terminals go at the next
 * tick. */
void relay_lease_lost(struct rl_sbx *sb, const char *why);
/* Each tick: a pending drop or adoption. */
void relay_lease_tick(struct rl_sbx *sb);
/* Take sb's lease if it is free (a sandbox the API just added here). */
int relay_lease_take(struct relay *r, struct rl_sbx *sb);
/* An audit row about sb (or one of its terminals), fenced; nothing when
 * sb is not ours. */
void relay_audit_sbx(struct rl_sbx *sb, const char *actor, const char *action, const char *target,
                     const char *detail);
void relay_sandbox_tick(struct rl_sbx *sb, uint64_t now);

/* ---- relay_runner.c ----------------------------------------------------------- */

/* The controller endpoint's events (its on_event, ud = the sandbox). */
void relay_runner_event(void *ud, const struct ep_event *ev);
/* The link's timers: the endpoint's, the in-band token refresh, a redial. */
void relay_runner_tick(struct rl_sbx *sb, uint64_t now);

/* ---- relay_spawn.c ------------------------------------------------------------ */

/* A local sandbox's runner: started again when gone, its token file kept fresh. */
void relay_spawn_tick(struct rl_sbx *sb, uint64_t now);

/* ---- relay_terminal.c --------------------------------------------------------- */

struct rl_term *relay_terminal_by_ch(const struct rl_sbx *sb, uint32_t ch);
struct rl_term *relay_terminal_by_id(const struct relay *r, const char *id);
/* A terminal from its row (created or adopted at start), with its recording. */
int relay_terminal_new(struct rl_sbx *sb, const struct db_terminal *row, struct rl_term **out);
void relay_terminal_free(struct rl_term *t);
void relay_terminal_state(struct rl_term *t, enum db_term_state s);
void relay_terminal_exit(struct rl_term *t, int code, int signo);
/* Forget a terminal whose channel is gone (its clients are told). */
void relay_terminal_drop(struct rl_term *t, enum db_term_state final);
/* The runner refused the last RESIZE (msg: its ERROR's text). */
void relay_terminal_resize_refused(struct rl_term *t, const uint8_t *msg, size_t len);
/* Move the writer's queued input towards the runner as its ring has room. */
void relay_terminal_flush_input(struct rl_term *t);
/* Room for n more input bytes in t->in: AL_OK, AL_E_LIMIT past RL_IN_CAP,
 * AL_E_NOMEM. */
int relay_terminal_in_room(struct rl_term *t, size_t n);
/* The terminal's merged input stream: where the next writer goes on. */
uint64_t relay_terminal_in_next(const struct rl_term *t);
/* Pump every client of t. */
void relay_terminal_pump(struct rl_term *t);
void relay_terminal_tick(struct rl_term *t, uint64_t now);

/* ---- relay_output.c ----------------------------------------------------------- */

/* Open (or resume) the terminal's recording as its row says. */
int relay_output_rec_open(struct rl_term *t, const struct db_terminal *row);
/* The recording failed with rc: noted once, the terminal keeps running. */
void relay_output_rec_fail(struct rl_term *t, int rc);
/* The runner's output: into the log and the recording, then to the clients. */
void relay_output_data(struct rl_term *t, unsigned s, uint64_t off, const uint8_t *p, size_t n);
void relay_output_gap(struct rl_term *t, unsigned s, uint64_t from, uint64_t to);
/* Durable, persisted, credited (see the file). */
void relay_output_sync(struct rl_term *t);
void relay_output_snapshot_want(struct rl_term *t);
void relay_output_snapshot_failed(struct rl_term *t, const char *why);
/* The snapshot the runner sent (ev: EP_EV_SNAPSHOT) becomes the cache. */
void relay_output_snapshot(struct rl_term *t, const struct ep_event *ev);
int relay_output_snapshot_usable(const struct rl_term *t, uint64_t cur);

/* ---- relay_proxychan.c --------------------------------------------------------- */

/* An event about a proxy channel (fr_is_proxy_channel) of sb's link. */
void relay_proxychan_event(struct rl_sbx *sb, const struct ep_event *ev);
/* Request heads that do not come in time. */
void relay_proxychan_tick(struct rl_sbx *sb, uint64_t now);
/* Free every proxy channel's state (airlockd stops). */
void relay_proxychan_free_all(struct rl_sbx *sb);
/* When the next request head is due on one of them (UINT64_MAX: none). */
uint64_t relay_proxychan_deadline(const struct rl_sbx *sb);

/* ---- relay_proxy.c ------------------------------------------------------------ */

/* The proxy's root for a terminal of sb, "http://.../v1/proxy": its
 * runner's listener for a local or reverse sandbox whose runner announced
 * one, else airlockd's direct path; 0 when there is neither. */
int relay_proxy_base(const struct relay *r, const struct rl_sbx *sb, char *out, size_t cap);
/* A create's proxy credential: the OPEN frame's variables (holding it)
 * and its hash, until the row is bound. */
struct rl_proxy_env {
    struct proxyenv env;
    char hash[PROXY_HASH_HEX + 1];
};
/* The checks of spec's "proxy" and, when it names any, a new credential
 * with its variables (*out NULL when it names none). AL_E_INVAL with why
 * (a 400) for an upstream airlockd does not have, a proxy it does not
 * serve, a sandbox its agents cannot reach it from, a variable the
 * request's env sets too; AL_E_TOOBIG past AL_MAX_ENV variables. */
int relay_proxy_prepare(struct relay *r, const struct apireq_terminal *spec,
                        const struct rl_sbx *sb, struct rl_proxy_env **out, char *why, size_t cap);
/* Store the credential's hash, bound to the terminal's row (audited). */
int relay_proxy_bind(struct relay *r, const struct rl_proxy_env *px,
                     const struct apireq_terminal *spec, const char *term_id, char *why,
                     size_t cap);
void relay_proxy_free(struct rl_proxy_env *px);
/* At start: revoke the credentials of terminals that ended meanwhile. */
int relay_proxy_start(struct relay *r);

/* ---- relay_client.c ----------------------------------------------------------- */

/* Fill the client's endpoint, and wake its connection if that queued anything. */
void relay_client_pump(struct rl_client *c);
void relay_client_tick(struct rl_client *c, uint64_t now);

#endif
