/*
 * libFuzzer target for apireq: airlockd's API request bodies (untrusted).
 *
 * Fuzz targets link al_runner/al_common, not al_control, so the module is
 * compiled into this file, with db.c for db_name_valid and the enum
 * parsers. db.c's table of backends names db_sqlite_backend; an empty one
 * stands in for it here (no database is ever opened).
 *
 * Data model: the first input byte picks the parser (byte & 7), the rest
 * is the body:
 *   0 apireq_terminal   1 apireq_sandbox   2 apireq_resize
 *   3 apireq_signal     4 apireq_enroll    5..7 all five on the same body
 * Oracle: no crash, leak or hang; a refusal is AL_E_INVAL, AL_E_TOOBIG or
 * AL_E_NOMEM with a one-line printable reason and (terminal, sandbox) a
 * zeroed result; an accepted result obeys every rule of apireq.h, and an
 * accepted terminal, written back as JSON, parses to the same result.
 * Every allocation is freed before returning; nothing is kept between runs.
 */
#include "../src/control/apireq.c" // NOLINT(bugprone-suspicious-include)
#include "../src/control/db.c"     // NOLINT(bugprone-suspicious-include)

#include "frame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const struct db_backend db_sqlite_backend = {.scheme = "sqlite"};

static bool fz_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return false;
    return true;
}

/* A refusal: the right codes, a reason that is one printable line. */
static void fz_refused(int rc, const char *err)
{
    if (rc != AL_E_INVAL && rc != AL_E_TOOBIG && rc != AL_E_NOMEM)
        abort();
    size_t n = strlen(err);
    if (n == 0 || n + 1 >= APIREQ_ERR_MAX)
        abort(); /* a reason always fits APIREQ_ERR_MAX whole */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)err[i] < 0x20 || err[i] == 0x7f)
            abort();
}

static bool fz_str_ok(const char *s, size_t min, size_t max)
{
    size_t n = s ? strlen(s) : 0;
    return s && n >= min && n <= max;
}

/* Every rule of apireq.h on an accepted terminal. */
static void fz_check_terminal(const struct apireq_terminal *t)
{
    if (!db_name_valid(t->sandbox) || t->argc < 1 || t->argc > AL_MAX_ARGV ||
        t->envc > AL_MAX_ENV || !t->argv || !t->env || t->argv[t->argc] || t->env[t->envc])
        abort();
    if (!fz_str_ok(t->argv_json, 2, DB_ARGV_JSON_MAX) ||
        !fz_str_ok(t->env_json, 2, DB_ENV_JSON_MAX))
        abort();
    if (!fz_str_ok(t->cwd, 0, AL_MAX_STR) || !ar_no_controls(t->cwd, strlen(t->cwd)))
        abort();
    if (t->cols < 1 || t->cols > AL_MAX_COLS || t->rows < 1 || t->rows > AL_MAX_ROWS ||
        (t->mode != DB_MODE_PTY && t->mode != DB_MODE_PIPES) || !fz_str_ok(t->term, 1, AL_MAX_TERM))
        abort();
    for (size_t i = 0; t->term[i]; i++)
        if (t->term[i] <= 0x20 || t->term[i] >= 0x7f)
            abort();
    /* The JSON texts hold exactly the C strings, in the same order. */
    json_t *a = json_loads(t->argv_json, JSON_REJECT_DUPLICATES, NULL);
    json_t *e = json_loads(t->env_json, JSON_REJECT_DUPLICATES, NULL);
    if (!a || !e) {
        /* only allocation failure may get here */
        json_decref(a);
        json_decref(e);
        return;
    }
    if (json_array_size(a) != t->argc || json_object_size(e) != t->envc)
        abort();
    for (size_t i = 0; i < t->argc; i++) {
        const char *s = json_string_value(json_array_get(a, i));
        if (!s || strcmp(s, t->argv[i]) != 0 || strlen(s) > AL_MAX_STR || (i == 0 && !s[0]))
            abort();
    }
    static char name[AL_MAX_STR + 1], prev[AL_MAX_STR + 1];
    for (size_t i = 0; i < t->envc; i++) {
        const char *eq = strchr(t->env[i], '=');
        if (!eq || eq == t->env[i] || strlen(t->env[i]) > AL_MAX_STR)
            abort();
        memcpy(name, t->env[i], (size_t)(eq - t->env[i]));
        name[eq - t->env[i]] = '\0';
        const char *v = json_string_value(json_object_get(e, name));
        if (!ar_env_name_ok(name) || !v || strcmp(v, eq + 1) != 0 ||
            (i > 0 && strcmp(prev, name) >= 0))
            abort(); /* names valid, values the same, sorted and distinct */
        memcpy(prev, name, strlen(name) + 1);
    }
    json_decref(a);
    json_decref(e);
}

/* Write t back as a body: it must parse to the same terminal. */
static void fz_roundtrip(const struct apireq_terminal *t)
{
    json_t *a = json_loads(t->argv_json, 0, NULL);
    json_t *e = json_loads(t->env_json, 0, NULL);
    json_t *o =
        a && e ? json_pack("{s:s, s:O, s:s, s:O, s:i, s:i, s:s, s:s, s:b}", "sandbox", t->sandbox,
                           "argv", a, "cwd", t->cwd, "env", e, "cols", (int)t->cols, "rows",
                           (int)t->rows, "mode", db_term_mode_name(t->mode), "term", t->term,
                           "record_input", (int)t->record_input)
               : NULL;
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(a);
    json_decref(e);
    json_decref(o);
    if (!text)
        return;
    struct apireq_terminal u;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_terminal(text, strlen(text), &u, err, sizeof err);
    free(text);
    if (rc == AL_E_TOOBIG || rc == AL_E_NOMEM)
        return; /* written back compactly it may still exceed the body limit */
    if (rc != AL_OK || strcmp(u.sandbox, t->sandbox) != 0 ||
        strcmp(u.argv_json, t->argv_json) != 0 || strcmp(u.env_json, t->env_json) != 0 ||
        strcmp(u.cwd, t->cwd) != 0 || strcmp(u.term, t->term) != 0 || u.cols != t->cols ||
        u.rows != t->rows || u.mode != t->mode || u.record_input != t->record_input ||
        u.argc != t->argc || u.envc != t->envc)
        abort();
    apireq_terminal_free(&u);
}

static void fz_terminal(const char *p, size_t n)
{
    struct apireq_terminal t;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_terminal(p, n, &t, err, sizeof err);
    if (rc == AL_OK) {
        if (err[0])
            abort();
        fz_check_terminal(&t);
        fz_roundtrip(&t);
    } else {
        fz_refused(rc, err);
        if (!fz_zero(&t, sizeof t))
            abort();
    }
    apireq_terminal_free(&t);
    apireq_terminal_free(&t);
    if (!fz_zero(&t, sizeof t))
        abort();
}

static void fz_sandbox(const char *p, size_t n)
{
    struct apireq_sandbox sb;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_sandbox(p, n, &sb, err, sizeof err);
    if (rc != AL_OK) {
        fz_refused(rc, err);
        if (!fz_zero(&sb, sizeof sb))
            abort();
        return;
    }
    size_t ul = strnlen(sb.url, sizeof sb.url);
    if (!db_name_valid(sb.id) || ul > DB_SANDBOX_URL_MAX ||
        (sb.kind == DB_SANDBOX_STATIC) != (ul > 0) ||
        (ul > 0 && strncmp(sb.url, "ws://", 5) != 0 && strncmp(sb.url, "wss://", 6) != 0))
        abort();
    for (size_t i = 0; i < ul; i++)
        if (sb.url[i] <= 0x20 || sb.url[i] >= 0x7f)
            abort();
}

static void fz_resize(const char *p, size_t n)
{
    uint16_t c = 0, r = 0;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_resize(p, n, &c, &r, err, sizeof err);
    if (rc != AL_OK) {
        fz_refused(rc, err);
        if (c != 0 || r != 0)
            abort();
    } else if (c < 1 || c > AL_MAX_COLS || r < 1 || r > AL_MAX_ROWS) {
        abort();
    }
}

static void fz_signal(const char *p, size_t n)
{
    unsigned s = 0;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_signal(p, n, &s, err, sizeof err);
    if (rc != AL_OK) {
        fz_refused(rc, err);
        if (s != 0)
            abort();
    } else if (!fr_signal_ok(s)) {
        abort();
    }
}

static void fz_enroll(const char *p, size_t n)
{
    unsigned t = 0;
    char err[APIREQ_ERR_MAX];
    int rc = apireq_enroll(p, n, &t, err, sizeof err);
    if (rc != AL_OK) {
        fz_refused(rc, err);
        if (t != 0)
            abort();
    } else if (t < APIREQ_ENROLL_TTL_MIN || t > APIREQ_ENROLL_TTL_MAX) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* A copy without a terminator, so ASan sees any read past the end. */
    size_t n = size - 1;
    char *p = malloc(n ? n : 1);
    if (!p)
        return 0;
    memcpy(p, data + 1, n);
    switch (data[0] & 7) {
    case 0:
        fz_terminal(p, n);
        break;
    case 1:
        fz_sandbox(p, n);
        break;
    case 2:
        fz_resize(p, n);
        break;
    case 3:
        fz_signal(p, n);
        break;
    case 4:
        fz_enroll(p, n);
        break;
    default:
        fz_terminal(p, n);
        fz_sandbox(p, n);
        fz_resize(p, n);
        fz_signal(p, n);
        fz_enroll(p, n);
        break;
    }
    free(p);
    return 0;
}
