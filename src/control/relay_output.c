/*
 * relay_output: a terminal's output, as the runner sends it, and what
 * makes it durable.
 *
 * Output path: runner DATA -> rl_term.log (ring, RL_LOG_BYTES per stream)
 * and the recording -> every client at its own cursor, copied into its host
 * endpoint as its ring has room. A client that stops reading only stops its
 * own cursor; when the log moves past it, it is resynced (GAP, then the
 * runner's screen snapshot at an offset the log still holds). The runner is
 * credited when bytes are durable, never when clients read them.
 *
 * Durability: the recording is synced (RL_SYNC_BYTES, RL_SYNC_US), then a
 * pair (stream offset, recording mark: its size, the time of its last
 * event and whether it holds the exit) no newer than any client's position
 * is persisted (rl_term.hist keeps recent durable pairs), then the runner
 * is credited with that offset (docs/recording.md). The mark lets a
 * restart resume the recording reading only its header and last line. A
 * failed recording is noted once; the terminal keeps running.
 *
 * Snapshots: one SNAPSHOT_REQ at a time per terminal (snap_asked); its
 * answer fills the cache (snap) that serves every client waiting
 * (need_resync) and later ones while the log still holds its offset. An
 * ERROR in answer, or no answer within RL_SNAP_TIMEOUT_US, ends the wait
 * (relay_output_snapshot_failed): those clients get the ERROR and a GAP to
 * the live output, and the next one asks the runner again.
 *
 * Not here: how each client is fed from the log (relay_client.c), the
 * terminal's exit and lifecycle (relay_terminal.c), the recording's format
 * (cast.c).
 */
#include "relay_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "al_err.h"
#include "al_limits.h"
#include "cast.h"
#include "endpoint.h"
#include "fsutil.h"

/* ---- the recording and durable offsets ----------------------------------------------- */

int relay_output_rec_open(struct rl_term *t, const struct db_terminal *row)
{
    struct relay *r = t->sb->r;
    char path[RL_PATH_MAX], why[256];
    int n = snprintf(path, sizeof path, "%s/%s.cast", r->cfg.rec_dir, t->id);
    if (n < 0 || (size_t)n >= sizeof path)
        return AL_E_TOOBIG;
    struct cast_header h;
    memset(&h, 0, sizeof h);
    h.cols = row->cols;
    h.rows = row->rows;
    h.term_type = "xterm-256color";
    h.timestamp = row->created_at / 1000;
    h.command = row->argv_json;
    /* a monotonic start consistent with created_at, so a resume continues */
    int64_t age_us = (relay_wall_ms() - row->created_at) * 1000;
    int64_t now = (int64_t)relay_now_us();
    h.start_us = age_us > 0 && age_us < now ? now - age_us : now;
    t->rec_base = row->out_offset;
    /* A row from before schema 8 has no time: the recording is then
     * checked whole, and the time it yields is persisted at once. */
    const struct cast_mark stored = {(int64_t)row->rec_bytes, row->rec_time_us, row->rec_exited};
    t->rec = stored;
    t->persisted.off = row->out_offset;
    t->persisted.rec = stored;
    /* No size stored: nothing of this recording was ever credited (a crash
     * right after creation, or no client ever acknowledged), so the runner
     * resends from out_offset and a file left behind is started afresh. */
    if (row->rec_bytes == 0 && unlink(path) == 0)
        relay_log(r, 1, "terminal %s: recording restarts (nothing of it was durable)", t->id);
    /* On a shared database the replica that wrote it may still hold it
     * open (frozen, cut off): go on in a copy of its durable prefix, so
     * what that one writes later reaches a file no name leads to. */
    int rc = AL_OK;
    if (r->cfg.rec_fenced && row->rec_bytes > 0)
        rc = fsutil_replace_prefix(path, (off_t)row->rec_bytes, why, sizeof why);
    if (rc == AL_OK)
        rc = cast_open(path, &h, &stored, &t->cast, why, sizeof why);
    if (rc == AL_OK) {
        rc = cast_sync(t->cast, &t->rec); /* writes nothing: the point resumed at */
        if (rc != AL_OK)
            relay_output_rec_fail(t, rc);
        else if (stored.size > 0 && stored.time_us < 0)
            t->sync_due_us = relay_now_us(); /* the time was not stored: store it now */
        return rc;
    }
    relay_log(r, 0, "terminal %s: recording %s: %s", t->id, path, why);
    t->cast = NULL;
    relay_output_rec_fail(t, rc);
    (void)snprintf(t->rec_error, sizeof t->rec_error, "%.120s", why);
    return rc;
}

void relay_output_rec_fail(struct rl_term *t, int rc)
{
    if (t->rec_failed)
        return;
    struct relay *r = t->sb->r;
    t->rec_failed = 1;
    r->rec_errors++;
    struct cast_status st;
    memset(&st, 0, sizeof st);
    if (t->cast)
        cast_status(t->cast, &st);
    (void)snprintf(t->rec_error, sizeof t->rec_error, "%s%s%s", al_strerror(rc),
                   st.sys_errno ? ": " : "", st.sys_errno ? strerror(st.sys_errno) : "");
    relay_log(r, 0, "terminal %s: recording failed (%s); the terminal keeps running", t->id,
              t->rec_error);
    char detail[512];
    (void)snprintf(detail, sizeof detail, "{\"error\":\"%.120s\"}", t->rec_error);
    relay_audit_sbx(t->sb, "system", "recording_failed", t->id, detail);
}

/*
 * The offset to persist and credit: the durable end, held back (by at most
 * RL_CLIENT_LAG) to the slowest attached client's acknowledged position, so
 * that after a crash the runner still holds what that client has not got
 * and resends it. A client further behind is resynced instead.
 */
static uint64_t term_floor(const struct rl_term *t, uint64_t durable)
{
    uint64_t floor = durable;
    for (const struct rl_client *c = t->clients; c; c = c->next) {
        struct ep_stream_info si;
        /* one waiting for a snapshot needs nothing the runner holds */
        if (!c->ch || c->gone || c->need_resync ||
            ep_stream_info(c->ep, c->ch, FR_STDOUT, &si) != AL_OK)
            continue;
        if (si.acked < floor)
            floor = si.acked;
    }
    return durable - floor > RL_CLIENT_LAG ? durable - RL_CLIENT_LAG : floor;
}

/*
 * Make the recording durable, persist a pair (stream offset, recording
 * size) no newer than every client's position, then credit the runner with
 * that offset. With a failed recording the offsets still move on (the
 * terminal keeps running); the size stays at the last good sync.
 */
void relay_output_sync(struct rl_term *t)
{
    struct relay *r = t->sb->r;
    struct rl_pair now = {t->log[FR_STDOUT].end, t->rec};
    if (t->cast && !t->rec_failed) {
        struct cast_mark m;
        int rc = cast_sync(t->cast, &m);
        if (rc != AL_OK) {
            relay_output_rec_fail(t, rc);
        } else {
            struct cast_status st;
            cast_status(t->cast, &st);
            t->rec = now.rec = m;
            now.off = t->rec_base + st.out_durable;
        }
    }
    /* The newest pair is replaced when it has the same offset (no new
     * output, but maybe more recording: a marker, a resize, the exit, which
     * a restart would cut off if it were not stored) or lies too close to
     * the one before. */
    const struct rl_pair *last = t->nhist ? &t->hist[t->nhist - 1] : NULL;
    if (last && (last->off == now.off ||
                 (t->nhist >= 2 && last->off - t->hist[t->nhist - 2].off < RL_HIST_STEP))) {
        t->hist[t->nhist - 1] = now;
    } else {
        if (t->nhist == RL_HIST) {
            memmove(t->hist, t->hist + 1, (RL_HIST - 1) * sizeof t->hist[0]);
            t->nhist--;
        }
        t->hist[t->nhist++] = now;
    }
    uint64_t target = term_floor(t, now.off);
    struct rl_pair pick = t->persisted;
    for (unsigned i = 0; i < t->nhist; i++)
        if (t->hist[i].off <= target && t->hist[i].off >= pick.off &&
            t->hist[i].rec.size >= pick.rec.size)
            pick = t->hist[i];
    uint64_t err_off = t->log[FR_STDERR].end;
    if (err_off < t->consumed[FR_STDERR])
        err_off = t->consumed[FR_STDERR];
    if (pick.off == t->persisted.off && pick.rec.size == t->persisted.rec.size &&
        pick.rec.time_us == t->persisted.rec.time_us && err_off == t->consumed[FR_STDERR] &&
        t->persisted.off == t->consumed[FR_STDOUT]) {
        /* held back and nothing new to store: look again later */
        t->unsynced = 0;
        t->sync_due_us = pick.off < now.off ? relay_now_us() + RL_SYNC_US : 0;
        return;
    }
    const struct db_term_offsets o = {.out_offset = pick.off,
                                      .err_offset = err_off,
                                      .rec_bytes = (uint64_t)pick.rec.size,
                                      .rec_time_us = pick.rec.time_us,
                                      .rec_exited = pick.rec.exited != 0};
    if (!relay_lease_owned(t->sb))
        return; /* another replica owns it: nothing written, no credit */
    int rc = relay_lease_checked(
        t->sb, db_terminal_set_offsets_fenced(r->cfg.db, t->id, &o, t->sb->fence));
    if (rc != AL_OK) {
        relay_log(r, 0, "terminal %s: persisting offsets: %s", t->id, db_errmsg(r->cfg.db));
        return; /* not durable: no credit; retried at the next sync */
    }
    t->persisted = pick;
    uint64_t off[FR_NSTREAMS] = {0, pick.off, err_off};
    for (unsigned s = FR_STDOUT; s <= FR_STDERR; s++) {
        if (off[s] > t->consumed[s] &&
            ep_consume(t->sb->ep, t->ch, s, (size_t)(off[s] - t->consumed[s])) == AL_OK)
            t->consumed[s] = off[s];
    }
    t->unsynced = 0;
    t->sync_due_us = pick.off < now.off ? relay_now_us() + RL_SYNC_US : 0;
    relay_wake(r, t->sb->conn);
}

/* ---- the log -------------------------------------------------------------------- */

void relay_output_data(struct rl_term *t, unsigned s, uint64_t off, const uint8_t *p, size_t n)
{
    struct relay *r = t->sb->r;
    struct ring *l = &t->log[s];
    if (off != l->end) /* the endpoint delivers in order: cannot happen */
        ring_reset(l, off);
    if (ring_append(l, p, n) != AL_OK) {
        relay_log(r, 0, "terminal %s: out of memory for the log", t->id);
        return;
    }
    r->bytes_out += n;
    uint64_t now = relay_now_us();
    if (s == FR_STDOUT && t->cast && !t->rec_failed) {
        int rc = cast_output(t->cast, (int64_t)now, p, n);
        if (rc != AL_OK)
            relay_output_rec_fail(t, rc);
    }
    t->unsynced += n;
    if (!t->sync_due_us)
        t->sync_due_us = now + RL_SYNC_US;
    if (t->unsynced >= RL_SYNC_BYTES)
        relay_output_sync(t);
    relay_terminal_pump(t);
}

/* The runner's bytes [from, to) are gone: the log and the record skip them. */
void relay_output_gap(struct rl_term *t, unsigned s, uint64_t from, uint64_t to)
{
    struct relay *r = t->sb->r;
    relay_log(r, 0, "terminal %s: the runner lost %llu bytes of output", t->id,
              (unsigned long long)(to - from));
    if (s == FR_STDOUT && t->cast && !t->rec_failed) {
        char label[64];
        (void)snprintf(label, sizeof label, "output lost: %llu bytes",
                       (unsigned long long)(to - from));
        (void)cast_marker(t->cast, (int64_t)relay_now_us(), label);
        relay_output_sync(t);
        t->rec_base += to - from;
    }
    ring_reset(&t->log[s], to);
    t->consumed[s] = to; /* the endpoint counts the gap as delivered */
    relay_terminal_pump(t);
}

/* ---- snapshots ------------------------------------------------------------------ */

void relay_output_snapshot_want(struct rl_term *t)
{
    if (t->snap_asked || t->mode != FR_MODE_PTY || !t->sb->up)
        return;
    if (ep_request_snapshot(t->sb->ep, t->ch) == AL_OK) {
        t->snap_asked = 1;
        t->snap_asked_us = relay_now_us();
        relay_wake(t->sb->r, t->sb->conn);
    }
}

/*
 * The runner answered the snapshot request with an ERROR, or not in time:
 * every client waiting for it learns why (ERROR STATE on its channel) and
 * goes on live, after a GAP to the log's end, as it would on a terminal
 * with no screen. Nothing is cached, so the next client asks again (and
 * is served once the runner can make one).
 */
void relay_output_snapshot_failed(struct rl_term *t, const char *why)
{
    struct relay *r = t->sb->r;
    t->snap_asked = 0;
    char msg[AL_MAX_ERRMSG + 1];
    (void)snprintf(msg, sizeof msg, "no screen snapshot (%s): output goes on live after the gap",
                   why);
    for (struct rl_client *c = t->clients; c; c = c->next) {
        if (!c->ch || c->gone || !c->need_resync)
            continue;
        uint64_t to = t->log[FR_STDOUT].end;
        if (to < c->cur[FR_STDOUT])
            to = c->cur[FR_STDOUT];
        (void)ep_send_error(c->ep, c->ch, FR_ERR_STATE, msg);
        if (ep_resync(c->ep, c->ch, to, 0, 0, NULL, 0) == AL_OK) {
            c->cur[FR_STDOUT] = to;
            c->resynced = 1;
            c->resync_at = to;
        }
        c->need_resync = 0;
        relay_log(r, 1, "terminal %s: %s: %s", t->id, c->user, msg);
        relay_client_pump(c);
        relay_wake(r, c->conn);
    }
}

void relay_output_snapshot(struct rl_term *t, const struct ep_event *ev)
{
    uint8_t *p = malloc(ev->len ? ev->len : 1);
    if (!p)
        return;
    if (ev->len)
        memcpy(p, ev->data, ev->len);
    free(t->snap);
    t->snap = p;
    t->snap_len = ev->len;
    t->snap_off = ev->offset;
    t->snap_cols = ev->cols;
    t->snap_rows = ev->rows;
    t->snap_have = 1;
    t->snap_asked = 0;
    relay_terminal_pump(t);
}

/* The cached snapshot can serve a client whose cursor is at cur. */
int relay_output_snapshot_usable(const struct rl_term *t, uint64_t cur)
{
    const struct ring *l = &t->log[FR_STDOUT];
    return t->snap_have && t->snap_off >= l->base && t->snap_off <= l->end && t->snap_off >= cur &&
           t->snap_cols == t->cols && t->snap_rows == t->rows; /* not from before a resize */
}
