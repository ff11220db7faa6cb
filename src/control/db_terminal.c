/*
 * db_terminal: the terminals of the data layer (db.h "Terminals"): add one
 * (its id: "t-" + 24 hex of random bytes), get, list, and move it through
 * its states (opening -> running -> exited -> closed, any live state ->
 * lost), checked here against the state read and applied by the backend
 * as a compare-and-set on it; the durable stream offsets; removal of a
 * finished one. Not here: what a terminal runs (the runner), storing (the
 * backends' terminal_* calls).
 *
 * States: the transitions listed in db.h (db_transition_ok), checked here
 * on the state db_term_read found and applied by the backend as a
 * compare-and-set on that state, so that a change made meanwhile is
 * AL_E_STATE, never lost.
 */
#include "db.h"

#include "al_err.h"
#include "al_limits.h"
#include "db_backend.h"
#include "db_check.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DB_TERM_ID_RANDOM = 12,   /* random bytes in a terminal id */
    DB_TERM_ID_PREFIX_LEN = 2 /* "t-" */
};

#define DB_TERM_ID_PREFIX "t-"

_Static_assert(DB_TERM_ID_PREFIX_LEN + 2 * DB_TERM_ID_RANDOM <= DB_NAME_MAX,
               "terminal ids are names");

static int db_check_spec(struct db *db, const struct db_terminal_spec *s)
{
    int rc = db_check_name(db, "sandbox id", s->sandbox_id);
    if (rc != AL_OK)
        return rc;
    if (s->channel == 0)
        return db_fail(db, AL_E_INVAL, "channel must be 1 or more");
    if ((rc = db_check_argv(db, s->argv_json)) != AL_OK)
        return rc;
    if (s->cwd && (rc = db_check_text(db, "cwd", s->cwd, DB_CWD_MAX)) != AL_OK)
        return rc;
    if (s->env_json && (rc = db_check_env(db, s->env_json)) != AL_OK)
        return rc;
    if (s->cols < 1 || s->cols > AL_MAX_COLS || s->rows < 1 || s->rows > AL_MAX_ROWS)
        return db_fail(db, AL_E_INVAL, "terminal size must be 1..%d columns and 1..%d rows",
                       AL_MAX_COLS, AL_MAX_ROWS);
    if (!db_term_mode_name(s->mode))
        return db_fail(db, AL_E_INVAL, "mode must be pty or pipes");
    return AL_OK;
}

int db_terminal_add(struct db *db, const struct db_terminal_spec *spec, char *id_out, size_t cap)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (id_out && cap > 0)
        id_out[0] = '\0';
    if (!spec)
        return db_fail(db, AL_E_INVAL, "no terminal");
    if (!id_out || cap < DB_NAME_MAX + 1)
        return db_fail(db, AL_E_INVAL, "no room for the terminal id (%d bytes)", DB_NAME_MAX + 1);
    if ((rc = db_check_spec(db, spec)) != AL_OK)
        return rc;
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;

    uint8_t raw[DB_TERM_ID_RANDOM];
    if (RAND_bytes(raw, (int)sizeof raw) != 1)
        return db_fail(db, AL_E_CRYPTO, "no random bytes for the terminal id");
    char id[DB_NAME_MAX + 1];
    static const char digits[] = "0123456789abcdef";
    memcpy(id, DB_TERM_ID_PREFIX, DB_TERM_ID_PREFIX_LEN);
    for (size_t i = 0; i < sizeof raw; i++) {
        id[DB_TERM_ID_PREFIX_LEN + 2 * i] = digits[raw[i] >> 4];
        id[DB_TERM_ID_PREFIX_LEN + 2 * i + 1] = digits[raw[i] & 0xf];
    }
    id[DB_TERM_ID_PREFIX_LEN + 2 * sizeof raw] = '\0';

    struct db_terminal_spec s = *spec;
    if (!s.cwd)
        s.cwd = "";
    if (!s.env_json)
        s.env_json = "{}";
    if (!s.creator)
        s.creator = "";
    else if (s.creator[0] && (rc = db_check_name(db, "creator", s.creator)) != AL_OK)
        return rc;
    rc = db->be->terminal_add(db, id, &s, now);
    if (rc == AL_OK)
        (void)snprintf(id_out, cap, "%s", id); /* fits: cap > DB_NAME_MAX */
    return rc;
}

int db_terminal_get(struct db *db, const char *id, struct db_terminal *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_name(db, "terminal id", id)) != AL_OK)
        return rc;
    return db->be->terminal_get(db, id, out);
}

int db_terminal_list(struct db *db, const char *sandbox_id, db_terminal_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    if (sandbox_id && (rc = db_check_name(db, "sandbox id", sandbox_id)) != AL_OK)
        return rc;
    return db->be->terminal_list(db, sandbox_id, cb, ctx);
}

static bool db_transition_ok(enum db_term_state from, enum db_term_state to)
{
    switch (to) {
    case DB_TERM_RUNNING:
        return from == DB_TERM_OPENING;
    case DB_TERM_EXITED:
        return from == DB_TERM_OPENING || from == DB_TERM_RUNNING;
    case DB_TERM_CLOSED:
        return from != DB_TERM_LOST && from != DB_TERM_CLOSED;
    case DB_TERM_LOST:
        return from != DB_TERM_CLOSED && from != DB_TERM_LOST;
    case DB_TERM_OPENING:
        break;
    }
    return false;
}

/* The current state (and exit status) of terminal id, read for a
 * compare-and-set. struct db_terminal is large (argv and env buffers), so
 * it lives on the heap for the read. */
static int db_term_read(struct db *db, const char *id, enum db_term_state *state, int *code,
                        int *signo)
{
    int rc = db_check_name(db, "terminal id", id);
    if (rc != AL_OK)
        return rc;
    struct db_terminal *t = malloc(sizeof *t);
    if (!t)
        return db_fail(db, AL_E_NOMEM, "out of memory");
    rc = db->be->terminal_get(db, id, t);
    if (rc == AL_OK) {
        *state = t->state;
        *code = t->exit_code;
        *signo = t->exit_signal;
    }
    free(t);
    return rc;
}

/* After a fenced write was refused (rc): AL_E_PERM if the fence of the
 * terminal's sandbox moved on, else rc as it was. */
static int db_term_fenced(struct db *db, const char *id, int64_t fence, int rc)
{
    if (rc == AL_OK || fence < 0)
        return rc;
    char keep[DB_MSG_MAX];
    (void)snprintf(keep, sizeof keep, "%s", db->msg);
    int64_t now_fence = 0;
    if (db->be->terminal_fence(db, id, &now_fence) == AL_OK && now_fence != fence)
        return db_fail(db, AL_E_PERM,
                       "terminal %s: its sandbox has another owner now (fence %lld, ours %lld)", id,
                       (long long)now_fence, (long long)fence);
    (void)snprintf(db->msg, sizeof db->msg, "%s", keep);
    return rc;
}

static int db_check_fence(struct db *db, int64_t fence)
{
    return fence >= DB_NO_FENCE ? AL_OK : db_fail(db, AL_E_INVAL, "a fence is >= 0 (or none)");
}

int db_terminal_set_state(struct db *db, const char *id, enum db_term_state state)
{
    return db_terminal_set_state_fenced(db, id, state, DB_NO_FENCE);
}

int db_terminal_set_state_fenced(struct db *db, const char *id, enum db_term_state state,
                                 int64_t fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_check_fence(db, fence)) != AL_OK)
        return rc;
    if (state != DB_TERM_RUNNING && state != DB_TERM_CLOSED && state != DB_TERM_LOST)
        return db_fail(db, AL_E_INVAL,
                       "a terminal can be set running, closed or lost (exited: "
                       "db_terminal_set_exit)");
    enum db_term_state from = DB_TERM_OPENING;
    int code = 0, signo = 0;
    if ((rc = db_term_read(db, id, &from, &code, &signo)) != AL_OK)
        return rc;
    if (from == state)
        return AL_OK;
    if (!db_transition_ok(from, state))
        return db_fail(db, AL_E_STATE, "terminal %s is %s and cannot become %s", id,
                       db_term_state_name(from), db_term_state_name(state));
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db_term_fenced(db, id, fence,
                          db->be->terminal_cas_state(db, id, from, state, now, fence));
}

int db_terminal_set_exit(struct db *db, const char *id, int code, int signo)
{
    return db_terminal_set_exit_fenced(db, id, code, signo, DB_NO_FENCE);
}

int db_terminal_set_exit_fenced(struct db *db, const char *id, int code, int signo, int64_t fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_check_fence(db, fence)) != AL_OK)
        return rc;
    if (!((signo == 0 && code >= 0 && code <= 255) || (signo >= 1 && signo <= 127 && code == -1)))
        return db_fail(db, AL_E_INVAL,
                       "exit status must be a code 0..255 without signal, or signal 1..127 "
                       "with code -1");
    enum db_term_state from = DB_TERM_OPENING;
    int had_code = 0, had_signo = 0;
    if ((rc = db_term_read(db, id, &from, &had_code, &had_signo)) != AL_OK)
        return rc;
    if (from == DB_TERM_EXITED && had_code == code && had_signo == signo)
        return AL_OK; /* a repeated EXIT after a resume */
    if (!db_transition_ok(from, DB_TERM_EXITED))
        return db_fail(db, AL_E_STATE, "terminal %s is %s%s and cannot exit again", id,
                       db_term_state_name(from),
                       from == DB_TERM_EXITED ? " with another status" : "");
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db_term_fenced(db, id, fence,
                          db->be->terminal_cas_exit(db, id, from, code, signo, now, fence));
}

int db_terminal_set_offsets(struct db *db, const char *id, const struct db_term_offsets *o)
{
    return db_terminal_set_offsets_fenced(db, id, o, DB_NO_FENCE);
}

int db_terminal_set_offsets_fenced(struct db *db, const char *id, const struct db_term_offsets *o,
                                   int64_t fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK || (rc = db_check_fence(db, fence)) != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "terminal id", id)) != AL_OK)
        return rc;
    if (!o)
        return db_fail(db, AL_E_INVAL, "no offsets");
    if (o->out_offset > INT64_MAX || o->err_offset > INT64_MAX || o->rec_bytes > INT64_MAX)
        return db_fail(db, AL_E_TOOBIG, "offsets are limited to 2^63-1");
    if (o->rec_time_us < -1)
        return db_fail(db, AL_E_INVAL, "a recording's time is >= 0, or -1 when not known");
    if (o->rec_exited && o->rec_time_us < 0)
        return db_fail(db, AL_E_INVAL, "a recording's exit is stored with its time");
    return db_term_fenced(db, id, fence, db->be->terminal_set_offsets(db, id, o, fence));
}

int db_terminal_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    enum db_term_state from = DB_TERM_OPENING;
    int code = 0, signo = 0;
    if ((rc = db_term_read(db, id, &from, &code, &signo)) != AL_OK)
        return rc;
    if (from != DB_TERM_CLOSED && from != DB_TERM_LOST)
        return db_fail(db, AL_E_STATE, "terminal %s is %s: close it before removing it", id,
                       db_term_state_name(from));
    return db->be->terminal_cas_remove(db, id, from);
}
