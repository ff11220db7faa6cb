/*
 * db_sandbox: the sandboxes of the data layer (db.h "Sandboxes"): create
 * one with every setting in place (a static one's url, a local one's
 * network), get, list, keep its link state, set record_input, remove. Not
 * here: the live link (relay_runner.c), storing (the backends' sandbox_* calls).
 */
#include "db.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "al_err.h"
#include "db_backend.h"
#include "db_check.h"

#define IDENT_PREFIX "al-"
#define IDENT_RAW 16 /* random bytes: 128 bits, as hex */

/* A platform session identifier nobody can guess: "al-" + 32 hex. */
static int new_identifier(char out[DB_IDENT_MAX + 1])
{
    unsigned char raw[IDENT_RAW];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return AL_E_CRYPTO;
    size_t n = (size_t)snprintf(out, DB_IDENT_MAX + 1, "%s", IDENT_PREFIX);
    for (size_t i = 0; i < sizeof raw; i++)
        n += (size_t)snprintf(out + n, DB_IDENT_MAX + 1 - n, "%02x", raw[i]);
    return AL_OK;
}

/* [A-Za-z0-9_-]{4,128}: what the platform accepts. */
static int identifier_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < DB_IDENT_MIN || n > DB_IDENT_MAX)
        return 0;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

/* An aca sandbox's platform and identifier; nothing of either elsewhere. */
static int check_platform(struct db *db, struct db_sandbox_spec *sp, char *ident)
{
    const int aca = sp->kind == DB_SANDBOX_ACA;
    if (sp->platform && !sp->platform[0])
        sp->platform = NULL;
    if (!aca && (sp->platform || sp->identifier))
        return db_fail(db, AL_E_INVAL, "only an aca sandbox has a platform");
    if (!aca)
        return AL_OK;
    size_t pn = sp->platform ? strlen(sp->platform) : 0;
    if (!pn || pn > DB_PLATFORM_MAX ||
        strspn(sp->platform, "abcdefghijklmnopqrstuvwxyz0123456789_-") != pn)
        return db_fail(db, AL_E_INVAL,
                       "an aca sandbox needs a platform: a name of 1..%d of [a-z0-9_-]",
                       DB_PLATFORM_MAX);
    if (!sp->identifier) {
        int rc = new_identifier(ident);
        if (rc != AL_OK)
            return db_fail(db, rc, "cannot draw a session identifier");
        sp->identifier = ident;
    }
    if (!identifier_ok(sp->identifier))
        return db_fail(db, AL_E_INVAL, "a session identifier is 4..128 of [A-Za-z0-9_-]");
    return AL_OK;
}

int db_sandbox_create(struct db *db, const struct db_sandbox_spec *spec)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!spec)
        return db_fail(db, AL_E_INVAL, "no sandbox");
    struct db_sandbox_spec sp = *spec;
    if ((rc = db_check_name(db, "sandbox id", sp.id)) != AL_OK)
        return rc;
    if (!db_sandbox_kind_name(sp.kind))
        return db_fail(db, AL_E_INVAL, "sandbox kind must be local, static, reverse or aca");
    if (sp.url && sp.url[0] == '\0')
        sp.url = NULL;
    const int dialed = sp.kind == DB_SANDBOX_STATIC || sp.kind == DB_SANDBOX_ACA;
    if (dialed && !sp.url)
        return db_fail(db, AL_E_INVAL, "a %s sandbox needs a url", db_sandbox_kind_name(sp.kind));
    if (!dialed && sp.url)
        return db_fail(db, AL_E_INVAL, "only a static or aca sandbox has a url");
    if (sp.url && (rc = sp.kind == DB_SANDBOX_ACA ? db_check_endpoint(db, sp.url)
                                                  : db_check_url(db, sp.url)) != AL_OK)
        return rc;
    char ident[DB_IDENT_MAX + 1];
    if ((rc = check_platform(db, &sp, ident)) != AL_OK)
        return rc;
    if (!db_sandbox_network_name(sp.network))
        return db_fail(db, AL_E_INVAL, "sandbox network must be default, host or none");
    if (sp.kind != DB_SANDBOX_LOCAL && sp.network != DB_NETWORK_DEFAULT)
        return db_fail(db, AL_E_INVAL,
                       "only a local sandbox has a network setting (airlockd starts its runner)");
    int64_t now = 0;
    if ((rc = db_now_or_fail(db, &now)) != AL_OK)
        return rc;
    return db->be->sandbox_add(db, &sp, now);
}

int db_sandbox_add(struct db *db, const char *id, enum db_sandbox_kind kind, const char *url)
{
    const struct db_sandbox_spec sp = {.id = id, .kind = kind, .url = url};
    return db_sandbox_create(db, &sp);
}

int db_sandbox_get(struct db *db, const char *id, struct db_sandbox *out)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!out)
        return db_fail(db, AL_E_INVAL, "no output");
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_get(db, id, out);
}

int db_sandbox_list(struct db *db, db_sandbox_cb cb, void *ctx)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (!cb)
        return db_fail(db, AL_E_INVAL, "no callback");
    return db->be->sandbox_list(db, cb, ctx);
}

int db_sandbox_set_record_input(struct db *db, const char *id, bool on)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_set_record_input(db, id, on);
}

int db_sandbox_set_link(struct db *db, const char *id, bool up, int64_t since, int64_t rtt_us)
{
    return db_sandbox_set_link_fenced(db, id, up, since, rtt_us, DB_NO_FENCE);
}

int db_sandbox_set_link_fenced(struct db *db, const char *id, bool up, int64_t since,
                               int64_t rtt_us, int64_t fence)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if (fence < DB_NO_FENCE)
        return db_fail(db, AL_E_INVAL, "a fence is >= 0 (or none)");
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    if (since < 0)
        return db_fail(db, AL_E_INVAL, "link time must not be negative");
    if (rtt_us < -1)
        return db_fail(db, AL_E_INVAL, "rtt must be -1 (unknown) or more");
    return db->be->sandbox_set_link(db, id, up, since, rtt_us, fence);
}

int db_sandbox_remove(struct db *db, const char *id)
{
    int rc = db_begin(db);
    if (rc != AL_OK)
        return rc;
    if ((rc = db_check_name(db, "sandbox id", id)) != AL_OK)
        return rc;
    return db->be->sandbox_remove(db, id);
}
