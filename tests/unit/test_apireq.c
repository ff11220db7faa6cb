/*
 * Unit tests for apireq: airlockd's API request bodies.
 *
 * Data model: bodies are literal JSON texts, or built in a growing buffer
 * (struct buf) for the size limits. Each rule of apireq.h has a rejecting
 * case whose reason must name the field (a needle searched in err) and be
 * one line; a refused terminal leaves its struct zeroed. Accepted requests
 * are also checked downstream: they must be stored by db_terminal_add and
 * db_sandbox_add (SQLite in a mkdtemp directory), and a terminal at every
 * limit at once must encode as one OPEN frame. Allocation failure is
 * injected through jansson's allocator, which apireq uses for everything.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "al_err.h"
#include "al_limits.h"
#include "apireq.h"
#include "db.h"
#include "frame.h"
#include "testutil.h"

enum { ERR_CAP = APIREQ_ERR_MAX };

/* ---- helpers -------------------------------------------------------------- */

struct buf {
    char *p;
    size_t len, cap;
};

static void b_add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        assert_non_null(p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void b_str(struct buf *b, const char *s)
{
    b_add(b, s, strlen(s));
}

static void b_fmt(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void b_fmt(struct buf *b, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof tmp);
    b_add(b, tmp, (size_t)n);
}

/* n copies of c */
static void b_rep(struct buf *b, char c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_add(b, &c, 1);
}

static void b_free(struct buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static bool zeroed(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i])
            return false;
    return true;
}

static void check_reason(const char *err, const char *needle, const char *body)
{
    if (!strstr(err, needle))
        fail_msg("reason \"%s\" does not name \"%s\" (body %.200s)", err, needle, body);
    if (strchr(err, '\n') || strchr(err, '\r'))
        fail_msg("reason \"%s\" is not one line", err);
    for (const char *c = err; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
            fail_msg("reason \"%s\" holds a control character", err);
}

static int term_n(const char *body, size_t len, struct apireq_terminal *t, char *err)
{
    memset(t, 0xa5, sizeof *t); /* garbage in: the parser must overwrite it */
    return apireq_terminal(body, len, t, err, ERR_CAP);
}

static void term_ok(const char *body, struct apireq_terminal *t)
{
    char err[ERR_CAP];
    int rc = term_n(body, strlen(body), t, err);
    if (rc != AL_OK)
        fail_msg("refused (%s): %s; body %.200s", al_strerror(rc), err, body);
    assert_string_equal(err, "");
}

static void term_bad_n(const char *body, size_t len, int want, const char *needle)
{
    struct apireq_terminal t;
    char err[ERR_CAP];
    int rc = term_n(body, len, &t, err);
    if (rc != want)
        fail_msg("rc %d (%s), want %d; err \"%s\"; body %.200s", rc, al_strerror(rc), want, err,
                 body);
    check_reason(err, needle, body);
    assert_true(zeroed(&t, sizeof t));
    apireq_terminal_free(&t);
}

static void term_bad(const char *body, int want, const char *needle)
{
    term_bad_n(body, strlen(body), want, needle);
}

/* A terminal body with the given extra members (text after "argv"). */
static void term_bad_with(const char *members, int want, const char *needle)
{
    char body[1024];
    (void)snprintf(body, sizeof body, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"]%s}", members);
    term_bad(body, want, needle);
}

static void term_ok_with(const char *members, struct apireq_terminal *t)
{
    char body[1024];
    (void)snprintf(body, sizeof body, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"]%s}", members);
    term_ok(body, t);
}

static void check_defaults(const struct apireq_terminal *t)
{
    assert_string_equal(t->cwd, "");
    assert_string_equal(t->env_json, "{}");
    assert_int_equal(t->envc, 0);
    assert_non_null(t->env);
    assert_null(t->env[0]);
    assert_int_equal(t->cols, APIREQ_DEFAULT_COLS);
    assert_int_equal(t->rows, APIREQ_DEFAULT_ROWS);
    assert_int_equal(t->cols, 80);
    assert_int_equal(t->rows, 24);
    assert_int_equal(t->mode, DB_MODE_PTY);
    assert_string_equal(t->term, "xterm-256color");
    assert_true(t->record_input);
    assert_int_equal(t->nproxy, 0);
}

/* ---- a database to store what was accepted --------------------------------- */

struct dbfx {
    char dir[64];
    char path[128];
    char url[160];
    struct db *db;
};

static void db_up(struct dbfx *f)
{
    (void)snprintf(f->dir, sizeof f->dir, "/tmp/al-apireq.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    (void)snprintf(f->path, sizeof f->path, "%s/%s", f->dir, DB_FILE_NAME);
    (void)snprintf(f->url, sizeof f->url, "%s%s", DB_SQLITE_PREFIX, f->path);
    char err[DB_MSG_MAX];
    if (db_open(f->url, &f->db, err, sizeof err) != AL_OK)
        fail_msg("db_open: %s", err);
}

static void db_down(struct dbfx *f)
{
    assert_int_equal(db_close(f->db), AL_OK);
    static const char *const files[] = {"", "-wal", "-shm", "-journal"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[192];
        (void)snprintf(p, sizeof p, "%s%s", f->path, files[i]);
        (void)unlink(p);
    }
    assert_int_equal(rmdir(f->dir), 0);
}

/* The terminal is stored as it is, and reads back the same. */
static void store_terminal(struct dbfx *f, const struct apireq_terminal *t, uint32_t channel)
{
    struct db_terminal_spec spec = {
        .sandbox_id = t->sandbox,
        .channel = channel,
        .argv_json = t->argv_json,
        .cwd = t->cwd,
        .env_json = t->env_json,
        .cols = t->cols,
        .rows = t->rows,
        .mode = t->mode,
    };
    char id[DB_NAME_MAX + 1];
    if (db_terminal_add(f->db, &spec, id, sizeof id) != AL_OK)
        fail_msg("db_terminal_add: %s", db_errmsg(f->db));
    static struct db_terminal got;
    assert_int_equal(db_terminal_get(f->db, id, &got), AL_OK);
    assert_string_equal(got.argv_json, t->argv_json);
    assert_string_equal(got.env_json, t->env_json);
    assert_string_equal(got.cwd, t->cwd);
    assert_int_equal(got.cols, t->cols);
    assert_int_equal(got.rows, t->rows);
    assert_int_equal(got.mode, t->mode);
}

/* The terminal as an OPEN frame: it encodes, decodes, and carries the
 * same strings. */
static void check_open_frame(const struct apireq_terminal *t)
{
    struct fr_frame f, g;
    static uint8_t wire[AL_MAX_FRAME];
    memset(&f, 0, sizeof f);
    f.type = FR_OPEN;
    f.channel = 1;
    f.u.open.mode = t->mode == DB_MODE_PTY ? FR_MODE_PTY : FR_MODE_PIPES;
    f.u.open.cols = t->cols;
    f.u.open.rows = t->rows;
    f.u.open.term = (struct fr_str){t->term, (uint16_t)strlen(t->term)};
    f.u.open.cwd = (struct fr_str){t->cwd, (uint16_t)strlen(t->cwd)};
    f.u.open.argc = (uint16_t)t->argc;
    for (size_t i = 0; i < t->argc; i++)
        f.u.open.argv[i] = (struct fr_str){t->argv[i], (uint16_t)strlen(t->argv[i])};
    f.u.open.envc = (uint16_t)t->envc;
    for (size_t i = 0; i < t->envc; i++)
        f.u.open.env[i] = (struct fr_str){t->env[i], (uint16_t)strlen(t->env[i])};
    long n = fr_encode(&f, wire, sizeof wire);
    if (n <= 0)
        fail_msg("fr_encode: %s", al_strerror((int)n));
    assert_int_equal(fr_decode(wire, (size_t)n, &g), AL_OK);
    assert_int_equal(g.u.open.argc, t->argc);
    assert_int_equal(g.u.open.envc, t->envc);
    for (size_t i = 0; i < t->argc; i++)
        assert_memory_equal(g.u.open.argv[i].p, t->argv[i], strlen(t->argv[i]) + 0);
    for (size_t i = 0; i < t->envc; i++)
        assert_memory_equal(g.u.open.env[i].p, t->env[i], strlen(t->env[i]) + 0);
}

/* ---- terminals: accepted ----------------------------------------------------- */

static void test_terminal_full(void **state)
{
    (void)state;
    static const char body[] =
        "{\"sandbox\": \"box-1.a_b\",\n"
        " \"argv\": [\"bash\", \"-c\", \"echo \\\"hi\\\" /x \\u00e9\\t\", \"\"],\n"
        " \"cwd\": \"/home/agent/w \\u00e9\",\n"
        " \"env\": {\"LANG\": \"C.UTF-8\", \"_x\": \"\", \"a\": \"1=2\", \"B\": \"b\"},\n"
        " \"cols\": 132, \"rows\": 50, \"mode\": \"pipes\", \"term\": \"vt100\",\n"
        " \"record_input\": false}\n";
    struct apireq_terminal t;
    term_ok(body, &t);
    assert_string_equal(t.sandbox, "box-1.a_b");
    assert_string_equal(t.argv_json, "[\"bash\",\"-c\",\"echo \\\"hi\\\" /x \xc3\xa9\\t\",\"\"]");
    assert_int_equal(t.argc, 4);
    assert_string_equal(t.argv[0], "bash");
    assert_string_equal(t.argv[1], "-c");
    assert_string_equal(t.argv[2], "echo \"hi\" /x \xc3\xa9\t");
    assert_string_equal(t.argv[3], "");
    assert_null(t.argv[4]);
    assert_string_equal(t.cwd, "/home/agent/w \xc3\xa9");
    /* keys sorted by byte: "B" < "LANG" < "_x" < "a" */
    assert_string_equal(t.env_json, "{\"B\":\"b\",\"LANG\":\"C.UTF-8\",\"_x\":\"\",\"a\":\"1=2\"}");
    assert_int_equal(t.envc, 4);
    assert_string_equal(t.env[0], "B=b");
    assert_string_equal(t.env[1], "LANG=C.UTF-8");
    assert_string_equal(t.env[2], "_x=");
    assert_string_equal(t.env[3], "a=1=2");
    assert_null(t.env[4]);
    assert_int_equal(t.cols, 132);
    assert_int_equal(t.rows, 50);
    assert_int_equal(t.mode, DB_MODE_PIPES);
    assert_string_equal(t.term, "vt100");
    assert_false(t.record_input);
    check_open_frame(&t);

    struct dbfx f = {.db = NULL};
    db_up(&f);
    assert_int_equal(db_sandbox_add(f.db, "box-1.a_b", DB_SANDBOX_LOCAL, NULL), AL_OK);
    store_terminal(&f, &t, 1);
    db_down(&f);

    apireq_terminal_free(&t);
    assert_true(zeroed(&t, sizeof t));
    apireq_terminal_free(&t); /* twice is fine */
}

static void test_terminal_defaults(void **state)
{
    (void)state;
    struct apireq_terminal t;
    term_ok("{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}", &t);
    assert_string_equal(t.sandbox, "box1");
    assert_string_equal(t.argv_json, "[\"sh\"]");
    assert_int_equal(t.argc, 1);
    assert_string_equal(t.argv[0], "sh");
    assert_null(t.argv[1]);
    check_defaults(&t);
    apireq_terminal_free(&t);

    /* An empty env, and members in any order, with whitespace around. */
    term_ok(" \t\r\n{\"env\":{},\"argv\":[\"sh\"],\"sandbox\":\"box1\"} \n", &t);
    check_defaults(&t);
    apireq_terminal_free(&t);

    /* The defaults, given explicitly. */
    term_ok_with(",\"cwd\":\"\",\"cols\":80,\"rows\":24,\"mode\":\"pty\","
                 "\"term\":\"xterm-256color\",\"record_input\":true",
                 &t);
    check_defaults(&t);
    apireq_terminal_free(&t);

    /* Bounds of the integers. */
    term_ok_with(",\"cols\":1,\"rows\":4096", &t);
    assert_int_equal(t.cols, 1);
    assert_int_equal(t.rows, AL_MAX_ROWS);
    apireq_terminal_free(&t);
    term_ok_with(",\"cols\":4096,\"rows\":1", &t);
    assert_int_equal(t.cols, AL_MAX_COLS);
    assert_int_equal(t.rows, 1);
    apireq_terminal_free(&t);
}

static void test_terminal_free_safe(void **state)
{
    (void)state;
    struct apireq_terminal t;
    memset(&t, 0, sizeof t);
    apireq_terminal_free(&t);
    apireq_terminal_free(&t);
    apireq_terminal_free(NULL);
    assert_int_equal(apireq_terminal(NULL, 0, NULL, NULL, 0), AL_E_INVAL);
}

/* ---- terminals: refused ------------------------------------------------------ */

static void test_terminal_body(void **state)
{
    (void)state;
    /* not a JSON object */
    term_bad("[]", AL_E_INVAL, "JSON object");
    term_bad("[{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}]", AL_E_INVAL, "JSON object");
    term_bad("\"box1\"", AL_E_INVAL, "JSON object");
    term_bad("42", AL_E_INVAL, "JSON object");
    term_bad("null", AL_E_INVAL, "JSON object");
    term_bad("true", AL_E_INVAL, "JSON object");
    /* empty, blank, or not JSON */
    term_bad("", AL_E_INVAL, "request body is empty");
    term_bad_n(NULL, 0, AL_E_INVAL, "request body is empty");
    term_bad_n(NULL, 5, AL_E_INVAL, "request body");
    term_bad(" \n\t", AL_E_INVAL, "request body is empty");
    term_bad("{", AL_E_INVAL, "not valid JSON");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\"],}", AL_E_INVAL, "not valid JSON");
    term_bad("{'sandbox':'box1'}", AL_E_INVAL, "not valid JSON");
    /* trailing garbage */
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\"]} x", AL_E_INVAL, "not valid JSON");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}{}", AL_E_INVAL, "not valid JSON");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}]", AL_E_INVAL, "not valid JSON");
    /* a raw NUL after the object, or inside a string */
    static const char nul_after[] = "{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}\0";
    term_bad_n(nul_after, sizeof nul_after - 1, AL_E_INVAL, "not valid JSON");
    static const char nul_in[] = "{\"sandbox\":\"box1\",\"argv\":[\"s\0h\"]}";
    term_bad_n(nul_in, sizeof nul_in - 1, AL_E_INVAL, "not valid JSON");
    /* invalid UTF-8, a lone surrogate */
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"\xff\"]}", AL_E_INVAL, "not valid JSON");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"\\ud800\"]}", AL_E_INVAL, "not valid JSON");
    /* duplicates, at the top and inside env */
    term_bad("{\"sandbox\":\"box1\",\"sandbox\":\"box2\",\"argv\":[\"sh\"]}", AL_E_INVAL,
             "duplicate");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"argv\":[\"sh\"]}", AL_E_INVAL, "\"argv\"");
    term_bad_with(",\"env\":{\"A\":\"1\",\"A\":\"1\"}", AL_E_INVAL, "duplicate");
    /* unknown members, named (and shown safely) */
    term_bad_with(",\"bogus\":1", AL_E_INVAL, "\"bogus\": unknown member");
    term_bad_with(",\"Cols\":80", AL_E_INVAL, "\"Cols\": unknown member");
    term_bad("{\"x\\n\\u0001\\\"y\":1,\"sandbox\":\"box1\",\"argv\":[\"sh\"]}", AL_E_INVAL,
             "\"x??\"y\": unknown member");
    struct buf b = {0};
    b_str(&b, "{\"");
    b_rep(&b, 'k', 1000);
    b_str(&b, "\":1}");
    char want[APIREQ_SHOW_MAX + 32];
    memset(want, 'k', APIREQ_SHOW_MAX);
    memcpy(want + APIREQ_SHOW_MAX, "...\": unknown member", 21);
    term_bad(b.p, AL_E_INVAL, want);
    b_free(&b);
}

static void test_terminal_sandbox(void **state)
{
    (void)state;
    term_bad("{\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\": is required");
    term_bad("{\"sandbox\":\"Box1\",\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\": must be");
    term_bad("{\"sandbox\":\"\",\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    term_bad("{\"sandbox\":\"-x\",\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    term_bad("{\"sandbox\":\"a/b\",\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    term_bad("{\"sandbox\":7,\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    term_bad("{\"sandbox\":null,\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    term_bad("{\"sandbox\":\"box1\\u0000x\",\"argv\":[\"sh\"]}", AL_E_INVAL, "\"sandbox\"");
    struct buf b = {0};
    b_str(&b, "{\"argv\":[\"sh\"],\"sandbox\":\"");
    b_rep(&b, 'a', DB_NAME_MAX);
    b_str(&b, "\"}");
    struct apireq_terminal t;
    term_ok(b.p, &t);
    assert_int_equal(strlen(t.sandbox), DB_NAME_MAX);
    apireq_terminal_free(&t);
    b_free(&b);
    b_str(&b, "{\"argv\":[\"sh\"],\"sandbox\":\"");
    b_rep(&b, 'a', DB_NAME_MAX + 1);
    b_str(&b, "\"}");
    term_bad(b.p, AL_E_INVAL, "\"sandbox\"");
    b_free(&b);
}

static void test_terminal_argv(void **state)
{
    (void)state;
    term_bad("{\"sandbox\":\"box1\"}", AL_E_INVAL, "\"argv\": is required");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[]}", AL_E_INVAL,
             "\"argv\": must be a non-empty array of strings");
    term_bad("{\"sandbox\":\"box1\",\"argv\":\"sh\"}", AL_E_INVAL,
             "\"argv\": must be a non-empty array of strings");
    term_bad("{\"sandbox\":\"box1\",\"argv\":{\"0\":\"sh\"}}", AL_E_INVAL, "\"argv\": must be");
    term_bad("{\"sandbox\":\"box1\",\"argv\":null}", AL_E_INVAL, "\"argv\": must be");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[1]}", AL_E_INVAL, "\"argv\"[0]: must be a string");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\",null]}", AL_E_INVAL,
             "\"argv\"[1]: must be a string");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\",[\"x\"]]}", AL_E_INVAL,
             "\"argv\"[1]: must be a string");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"\"]}", AL_E_INVAL,
             "\"argv\"[0]: must not be empty");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"a\\u0000b\"]}", AL_E_INVAL,
             "\"argv\"[0]: must not contain a NUL byte");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"\\u0000\"]}", AL_E_INVAL, "\"argv\"[0]: must not");
    term_bad("{\"sandbox\":\"box1\",\"argv\":[\"sh\",\"x\",\"y\\u0000\"]}", AL_E_INVAL,
             "\"argv\"[2]: must not contain a NUL byte");
}

/* argv limits: entries, bytes per string, bytes of JSON. */
static void test_terminal_argv_limits(void **state)
{
    (void)state;
    struct apireq_terminal t;
    struct buf b = {0};
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"");
        for (int i = 1; i < AL_MAX_ARGV + extra; i++)
            b_str(&b, ",\"x\"");
        b_str(&b, "]}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(t.argc, AL_MAX_ARGV);
            assert_null(t.argv[AL_MAX_ARGV]);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"argv\": has 257 entries, at most 256");
        }
        b_free(&b);
    }
    /* AL_MAX_STR bytes in argv[0] and argv[1]; one more is too many */
    for (int i = 0; i < 2; i++) {
        for (int extra = 0; extra <= 1; extra++) {
            b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[");
            if (i == 1)
                b_str(&b, "\"sh\",");
            b_str(&b, "\"");
            b_rep(&b, 'a', AL_MAX_STR + (size_t)extra);
            b_str(&b, "\"]}");
            if (!extra) {
                term_ok(b.p, &t);
                assert_int_equal(strlen(t.argv[i]), AL_MAX_STR);
                apireq_terminal_free(&t);
            } else {
                term_bad(b.p, AL_E_TOOBIG,
                         i ? "\"argv\"[1]: is longer than 4096 bytes"
                           : "\"argv\"[0]: is longer than 4096 bytes");
            }
            b_free(&b);
        }
    }
    /* The compact JSON at DB_ARGV_JSON_MAX bytes exactly, then one more:
     * 3 strings of AL_MAX_STR bytes and one of `last`; the JSON is
     * 2 + 3 * (4096 + 2) + (last + 2) + 3 separators. */
    size_t last = DB_ARGV_JSON_MAX - (2 + 3 * (AL_MAX_STR + 2) + 2 + 3);
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[");
        for (int i = 0; i < 3; i++) {
            b_str(&b, "\"");
            b_rep(&b, 'a', AL_MAX_STR);
            b_str(&b, "\",");
        }
        b_str(&b, "\"");
        b_rep(&b, 'b', last + (size_t)extra);
        b_str(&b, "\"]}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(strlen(t.argv_json), DB_ARGV_JSON_MAX);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"argv\": is 16385 bytes as JSON, at most 16384");
        }
        b_free(&b);
    }
    /* Escapes count as JSON: 3000 quotes are 6000 bytes of JSON each. */
    b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"");
    for (int i = 0; i < 3; i++) {
        b_str(&b, ",\"");
        for (int k = 0; k < 3000; k++)
            b_str(&b, "\\\"");
        b_str(&b, "\"");
    }
    b_str(&b, "]}");
    term_bad(b.p, AL_E_TOOBIG, "\"argv\": is ");
    b_free(&b);
}

static void test_terminal_cwd(void **state)
{
    (void)state;
    term_bad_with(",\"cwd\":5", AL_E_INVAL, "\"cwd\": must be a string");
    term_bad_with(",\"cwd\":null", AL_E_INVAL, "\"cwd\": must be a string");
    term_bad_with(",\"cwd\":\"/a\\u0000b\"", AL_E_INVAL, "\"cwd\": must not contain a NUL byte");
    term_bad_with(",\"cwd\":\"/a\\nb\"", AL_E_INVAL, "\"cwd\": must not contain control");
    term_bad_with(",\"cwd\":\"/a\\u007f\"", AL_E_INVAL, "\"cwd\": must not contain control");
    term_bad_with(",\"cwd\":\"/a\\u0085\"", AL_E_INVAL, "\"cwd\": must not contain control");
    struct apireq_terminal t;
    term_ok_with(",\"cwd\":\"/a\\u00a0\\u00ff\"", &t); /* U+00A0 is not a control */
    assert_string_equal(t.cwd, "/a\xc2\xa0\xc3\xbf");
    apireq_terminal_free(&t);

    struct buf b = {0};
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"cwd\":\"/");
        b_rep(&b, 'd', AL_MAX_STR - 1 + (size_t)extra);
        b_str(&b, "\"}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(strlen(t.cwd), AL_MAX_STR);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"cwd\": is longer than 4096 bytes");
        }
        b_free(&b);
    }
}

static void test_terminal_env(void **state)
{
    (void)state;
    term_bad_with(",\"env\":[]", AL_E_INVAL, "\"env\": must be an object of strings");
    term_bad_with(",\"env\":\"A=1\"", AL_E_INVAL, "\"env\": must be an object of strings");
    term_bad_with(",\"env\":null", AL_E_INVAL, "\"env\": must be an object");
    term_bad_with(",\"env\":{\"1X\":\"a\"}", AL_E_INVAL,
                  "\"env\".\"1X\": name must match [A-Za-z_][A-Za-z0-9_]*");
    term_bad_with(",\"env\":{\"A-B\":\"a\"}", AL_E_INVAL, "\"env\".\"A-B\": name must match");
    term_bad_with(",\"env\":{\"A=B\":\"a\"}", AL_E_INVAL, "\"env\".\"A=B\": name must match");
    term_bad_with(",\"env\":{\"\":\"a\"}", AL_E_INVAL, "\"env\".\"\": name must match");
    term_bad_with(",\"env\":{\"A \":\"a\"}", AL_E_INVAL, "\"env\".\"A \": name must match");
    term_bad_with(",\"env\":{\"\\u00e9\":\"a\"}", AL_E_INVAL, "\"env\".\"??\": name must match");
    term_bad_with(",\"env\":{\"A\":1}", AL_E_INVAL, "\"env\".\"A\": must be a string");
    term_bad_with(",\"env\":{\"OK\":\"\",\"A\":null}", AL_E_INVAL,
                  "\"env\".\"A\": must be a string");
    term_bad_with(",\"env\":{\"A\":\"x\\u0000\"}", AL_E_INVAL,
                  "\"env\".\"A\": must not contain a NUL byte");
    /* NUL in a name: jansson refuses it while parsing */
    term_bad_with(",\"env\":{\"A\\u0000B\":\"x\"}", AL_E_INVAL, "not valid JSON");
}

static void test_terminal_env_limits(void **state)
{
    (void)state;
    struct apireq_terminal t;
    struct buf b = {0};
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"env\":{");
        for (int i = 0; i < AL_MAX_ENV + extra; i++)
            b_fmt(&b, "%s\"V%03d\":\"%d\"", i ? "," : "", AL_MAX_ENV - i, i);
        b_str(&b, "}}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(t.envc, AL_MAX_ENV);
            assert_null(t.env[AL_MAX_ENV]);
            assert_string_equal(t.env[0], "V001=255"); /* sorted */
            assert_string_equal(t.env[AL_MAX_ENV - 1], "V256=0");
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"env\": has 257 entries, at most 256");
        }
        b_free(&b);
    }
    /* "NAME=value" at AL_MAX_STR bytes, then one more */
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"env\":{\"NAME\":\"");
        b_rep(&b, 'v', AL_MAX_STR - 5 + (size_t)extra);
        b_str(&b, "\"}}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(strlen(t.env[0]), AL_MAX_STR);
            assert_memory_equal(t.env[0], "NAME=vvv", 8);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"env\".\"NAME\": \"NAME=value\" is longer than 4096");
        }
        b_free(&b);
    }
    /* The compact JSON at DB_ENV_JSON_MAX bytes exactly, then one more: A, B,
     * C of 4094-byte values and D of `last`; each member is
     * "K":"value" = value + 6, plus braces and 3 commas. */
    size_t vmax = AL_MAX_STR - 2;
    size_t last = DB_ENV_JSON_MAX - (2 + 3 + 3 * (vmax + 6) + 6);
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"env\":{");
        for (int i = 0; i < 3; i++) {
            b_fmt(&b, "\"%c\":\"", 'A' + i);
            b_rep(&b, 'v', vmax);
            b_str(&b, "\",");
        }
        b_str(&b, "\"D\":\"");
        b_rep(&b, 'w', last + (size_t)extra);
        b_str(&b, "\"}}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(strlen(t.env_json), DB_ENV_JSON_MAX);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"env\": is 16385 bytes as JSON, at most 16384");
        }
        b_free(&b);
    }
}

static void test_terminal_size_mode_term(void **state)
{
    (void)state;
    static const char *const bad_ints[] = {"0",   "-1",     "4097", "65536", "4294967297", "80.0",
                                           "8e1", "\"80\"", "true", "null",  "[80]",       "{}"};
    for (size_t i = 0; i < sizeof bad_ints / sizeof bad_ints[0]; i++) {
        char m[64];
        (void)snprintf(m, sizeof m, ",\"cols\":%s", bad_ints[i]);
        term_bad_with(m, AL_E_INVAL, "\"cols\": must be an integer from 1 to 4096");
        (void)snprintf(m, sizeof m, ",\"rows\":%s", bad_ints[i]);
        term_bad_with(m, AL_E_INVAL, "\"rows\": must be an integer from 1 to 4096");
    }
    /* an integer jansson cannot hold */
    term_bad_with(",\"cols\":99999999999999999999", AL_E_INVAL, "not valid JSON");

    term_bad_with(",\"mode\":\"tty\"", AL_E_INVAL, "\"mode\": must be \"pty\" or \"pipes\"");
    term_bad_with(",\"mode\":\"PTY\"", AL_E_INVAL, "\"mode\"");
    term_bad_with(",\"mode\":0", AL_E_INVAL, "\"mode\"");
    term_bad_with(",\"mode\":\"pty\\u0000\"", AL_E_INVAL, "\"mode\"");

    term_bad_with(",\"term\":\"\"", AL_E_INVAL, "\"term\": must not be empty");
    term_bad_with(",\"term\":\"xterm 256\"", AL_E_INVAL, "\"term\": must be printable ASCII");
    term_bad_with(",\"term\":\"xterm\\t\"", AL_E_INVAL, "\"term\": must be printable ASCII");
    term_bad_with(",\"term\":\"\\u00e9\"", AL_E_INVAL, "\"term\": must be printable ASCII");
    term_bad_with(",\"term\":\"x\\u007f\"", AL_E_INVAL, "\"term\": must be printable ASCII");
    term_bad_with(",\"term\":\"x\\u0000\"", AL_E_INVAL, "\"term\": must not contain a NUL");
    term_bad_with(",\"term\":1", AL_E_INVAL, "\"term\": must be a string");
    struct buf b = {0};
    struct apireq_terminal t;
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[\"sh\"],\"term\":\"");
        b_rep(&b, 't', AL_MAX_TERM + (size_t)extra);
        b_str(&b, "\"}");
        if (!extra) {
            term_ok(b.p, &t);
            assert_int_equal(strlen(t.term), AL_MAX_TERM);
            apireq_terminal_free(&t);
        } else {
            term_bad(b.p, AL_E_TOOBIG, "\"term\": is longer than 64 bytes");
        }
        b_free(&b);
    }
    term_ok_with(",\"term\":\"~!x-Y_z.0\"", &t);
    assert_string_equal(t.term, "~!x-Y_z.0");
    apireq_terminal_free(&t);

    term_bad_with(",\"record_input\":\"yes\"", AL_E_INVAL, "\"record_input\": must be true or");
    term_bad_with(",\"record_input\":1", AL_E_INVAL, "\"record_input\"");
    term_bad_with(",\"record_input\":null", AL_E_INVAL, "\"record_input\"");
}

/* "proxy": upstream names, in the order given, each once; the names are
 * only checked for form here (the relay knows which are configured). */
static void test_terminal_proxy(void **state)
{
    (void)state;
    struct apireq_terminal t;
    term_ok_with(",\"proxy\":[]", &t);
    assert_int_equal(t.nproxy, 0);
    apireq_terminal_free(&t);
    term_ok_with(",\"proxy\":[\"anthropic\",\"git-hub_2\",\"0\"]", &t);
    assert_int_equal(t.nproxy, 3);
    assert_string_equal(t.proxy[0], "anthropic");
    assert_string_equal(t.proxy[1], "git-hub_2");
    assert_string_equal(t.proxy[2], "0");
    apireq_terminal_free(&t);
    assert_true(zeroed(&t, sizeof t));

    term_bad_with(",\"proxy\":\"anthropic\"", AL_E_INVAL, "\"proxy\": must be an array");
    term_bad_with(",\"proxy\":null", AL_E_INVAL, "\"proxy\": must be an array");
    term_bad_with(",\"proxy\":{}", AL_E_INVAL, "\"proxy\": must be an array");
    term_bad_with(",\"proxy\":[\"ok\",1]", AL_E_INVAL, "\"proxy\"[1]: must be 1 to 32");
    term_bad_with(",\"proxy\":[\"\"]", AL_E_INVAL, "\"proxy\"[0]");
    term_bad_with(",\"proxy\":[\"Anthropic\"]", AL_E_INVAL, "\"proxy\"[0]");
    term_bad_with(",\"proxy\":[\"a.b\"]", AL_E_INVAL, "\"proxy\"[0]");
    term_bad_with(",\"proxy\":[\"a\\u0000\"]", AL_E_INVAL, "\"proxy\"[0]");
    term_bad_with(",\"proxy\":[null]", AL_E_INVAL, "\"proxy\"[0]");
    term_bad_with(",\"proxy\":[\"a\",\"b\",\"a\"]", AL_E_INVAL, "\"proxy\"[2]: a is named twice");
    /* the longest name and the most names */
    char members[512];
    (void)snprintf(members, sizeof members, ",\"proxy\":[\"%032d\"]", 7);
    term_ok_with(members, &t);
    assert_int_equal(strlen(t.proxy[0]), DB_PROXY_NAME_MAX);
    apireq_terminal_free(&t);
    (void)snprintf(members, sizeof members, ",\"proxy\":[\"%033d\"]", 7);
    term_bad_with(members, AL_E_INVAL, "\"proxy\"[0]");
    for (int extra = 0; extra <= 1; extra++) {
        size_t o = (size_t)snprintf(members, sizeof members, ",\"proxy\":[");
        for (int i = 0; i < APIREQ_PROXY_MAX + extra; i++)
            o += (size_t)snprintf(members + o, sizeof members - o, "%s\"u%d\"", i ? "," : "", i);
        (void)snprintf(members + o, sizeof members - o, "]");
        if (!extra) {
            term_ok_with(members, &t);
            assert_int_equal(t.nproxy, APIREQ_PROXY_MAX);
            assert_string_equal(t.proxy[APIREQ_PROXY_MAX - 1], "u15");
            apireq_terminal_free(&t);
        } else {
            term_bad_with(members, AL_E_TOOBIG, "\"proxy\": has 17 entries, at most 16");
        }
    }
}

/* The body limit: exactly APIREQ_MAX_BODY bytes are parsed, one more is
 * refused before parsing (even if it is not JSON at all). */
static void test_terminal_body_limit(void **state)
{
    (void)state;
    static const char head[] = "{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}";
    char *body = malloc(APIREQ_MAX_BODY + 2);
    assert_non_null(body);
    memset(body, ' ', APIREQ_MAX_BODY + 1);
    memcpy(body, head, sizeof head - 1);
    body[APIREQ_MAX_BODY + 1] = '\0';
    struct apireq_terminal t;
    char err[ERR_CAP];
    assert_int_equal(term_n(body, APIREQ_MAX_BODY, &t, err), AL_OK);
    apireq_terminal_free(&t);
    term_bad_n(body, APIREQ_MAX_BODY + 1, AL_E_TOOBIG, "request body is larger than 65536 bytes");
    memset(body, 'x', APIREQ_MAX_BODY + 1);
    term_bad_n(body, APIREQ_MAX_BODY + 1, AL_E_TOOBIG, "request body is larger than 65536 bytes");
    free(body);
}

/* Everything at its limit at once: accepted, stored by db, and it fits one
 * OPEN frame. */
static void test_terminal_all_limits(void **state)
{
    (void)state;
    struct buf b = {0};
    b_str(&b, "{\"sandbox\":\"box1\",\"argv\":[");
    size_t last = DB_ARGV_JSON_MAX - (2 + 3 * (AL_MAX_STR + 2) + 2 + 3);
    for (int i = 0; i < 3; i++) {
        b_str(&b, "\"");
        b_rep(&b, 'a', AL_MAX_STR);
        b_str(&b, "\",");
    }
    b_str(&b, "\"");
    b_rep(&b, 'a', last);
    b_str(&b, "\"],\"env\":{");
    size_t vmax = AL_MAX_STR - 2;
    size_t elast = DB_ENV_JSON_MAX - (2 + 3 + 3 * (vmax + 6) + 6);
    for (int i = 0; i < 3; i++) {
        b_fmt(&b, "\"%c\":\"", 'A' + i);
        b_rep(&b, 'v', vmax);
        b_str(&b, "\",");
    }
    b_str(&b, "\"D\":\"");
    b_rep(&b, 'w', elast);
    b_str(&b, "\"},\"cwd\":\"/");
    b_rep(&b, 'c', AL_MAX_STR - 1);
    b_str(&b, "\",\"term\":\"");
    b_rep(&b, 't', AL_MAX_TERM);
    b_str(&b, "\",\"cols\":4096,\"rows\":4096}");
    assert_true(b.len <= APIREQ_MAX_BODY);
    struct apireq_terminal t;
    term_ok(b.p, &t);
    b_free(&b);
    check_open_frame(&t);
    struct dbfx f = {.db = NULL};
    db_up(&f);
    assert_int_equal(db_sandbox_add(f.db, "box1", DB_SANDBOX_LOCAL, NULL), AL_OK);
    store_terminal(&f, &t, 7);
    db_down(&f);
    apireq_terminal_free(&t);
}

/* Reasons: cut to cap and NUL-terminated; NULL err is fine. */
static void test_err_buffer(void **state)
{
    (void)state;
    struct apireq_terminal t;
    char small[8];
    memset(small, 'z', sizeof small);
    assert_int_equal(apireq_terminal("[]", 2, &t, small, sizeof small), AL_E_INVAL);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, "request", 7);
    assert_int_equal(apireq_terminal("[]", 2, &t, NULL, 0), AL_E_INVAL);
    assert_int_equal(apireq_terminal("[]", 2, &t, small, 0), AL_E_INVAL);
    const char *ok = "{\"sandbox\":\"box1\",\"argv\":[\"sh\"]}";
    assert_int_equal(apireq_terminal(ok, strlen(ok), &t, NULL, 0), AL_OK);
    apireq_terminal_free(&t);
    /* a JSON syntax error quoting body bytes stays one printable line */
    term_bad("{\"sandbox\":\"a\nb\"}", AL_E_INVAL, "not valid JSON");
    term_bad("{\"sandbox\":tr\x01\x7f}", AL_E_INVAL, "not valid JSON");
}

/* ---- sandboxes ------------------------------------------------------------- */

static void sb_ok(const char *body, struct apireq_sandbox *sb)
{
    char err[ERR_CAP];
    memset(sb, 0x5a, sizeof *sb);
    int rc = apireq_sandbox(body, strlen(body), sb, err, sizeof err);
    if (rc != AL_OK)
        fail_msg("refused: %s; body %.200s", err, body);
    assert_string_equal(err, "");
}

static void sb_bad_n(const char *body, size_t len, int want, const char *needle)
{
    struct apireq_sandbox sb;
    char err[ERR_CAP];
    memset(&sb, 0x5a, sizeof sb);
    int rc = apireq_sandbox(body, len, &sb, err, sizeof err);
    if (rc != want)
        fail_msg("rc %d, want %d; err \"%s\"; body %.200s", rc, want, err, body);
    check_reason(err, needle, body);
    assert_true(zeroed(&sb, sizeof sb));
}

static void sb_bad(const char *body, int want, const char *needle)
{
    sb_bad_n(body, strlen(body), want, needle);
}

static void test_sandbox(void **state)
{
    (void)state;
    static struct apireq_sandbox sb;
    struct dbfx f = {.db = NULL};
    db_up(&f);
    sb_ok("{\"id\":\"box1\",\"kind\":\"local\"}", &sb);
    assert_string_equal(sb.id, "box1");
    assert_int_equal(sb.kind, DB_SANDBOX_LOCAL);
    assert_string_equal(sb.url, "");
    assert_false(sb.record_input); /* off unless asked for */
    assert_int_equal(db_sandbox_add(f.db, sb.id, sb.kind, sb.url), AL_OK);
    sb_ok("{\"id\":\"box9\",\"kind\":\"local\",\"record_input\":true}", &sb);
    assert_true(sb.record_input);
    sb_ok("{\"id\":\"box9\",\"kind\":\"local\",\"record_input\":false}", &sb);
    assert_false(sb.record_input);
    sb_bad("{\"id\":\"box9\",\"kind\":\"local\",\"record_input\":1}", AL_E_INVAL,
           "\"record_input\": must be true or false");
    sb_ok("{\"kind\":\"reverse\",\"id\":\"r.2\"}", &sb);
    assert_string_equal(sb.id, "r.2");
    assert_int_equal(sb.kind, DB_SANDBOX_REVERSE);
    assert_string_equal(sb.url, "");
    assert_int_equal(db_sandbox_add(f.db, sb.id, sb.kind, sb.url), AL_OK);
    sb_ok("{\"id\":\"s1\",\"kind\":\"static\",\"url\":\"wss://h.example:7443/airlock?x=1\"}", &sb);
    assert_int_equal(sb.kind, DB_SANDBOX_STATIC);
    assert_string_equal(sb.url, "wss://h.example:7443/airlock?x=1");
    assert_int_equal(db_sandbox_add(f.db, sb.id, sb.kind, sb.url), AL_OK);
    sb_ok("{\"id\":\"s2\",\"kind\":\"static\",\"url\":\"ws://[::1]:80\"}", &sb);
    assert_string_equal(sb.url, "ws://[::1]:80");
    assert_int_equal(db_sandbox_add(f.db, sb.id, sb.kind, sb.url), AL_OK);

    /* the URL at DB_SANDBOX_URL_MAX bytes, then one more */
    struct buf b = {0};
    for (int extra = 0; extra <= 1; extra++) {
        b_str(&b, "{\"id\":\"s3\",\"kind\":\"static\",\"url\":\"ws://");
        b_rep(&b, 'h', DB_SANDBOX_URL_MAX - 5 + (size_t)extra);
        b_str(&b, "\"}");
        if (!extra) {
            sb_ok(b.p, &sb);
            assert_int_equal(strlen(sb.url), DB_SANDBOX_URL_MAX);
            assert_int_equal(db_sandbox_add(f.db, sb.id, sb.kind, sb.url), AL_OK);
        } else {
            sb_bad(b.p, AL_E_TOOBIG, "\"url\": is longer than 2048 bytes");
        }
        b_free(&b);
    }
    db_down(&f);

    sb_bad("[]", AL_E_INVAL, "JSON object");
    sb_bad("", AL_E_INVAL, "request body is empty");
    sb_bad("{\"id\":\"a\",\"kind\":\"local\"} 1", AL_E_INVAL, "not valid JSON");
    sb_bad("{\"id\":\"a\",\"id\":\"b\",\"kind\":\"local\"}", AL_E_INVAL, "duplicate");
    sb_bad("{\"id\":\"a\",\"kind\":\"local\",\"name\":\"x\"}", AL_E_INVAL,
           "\"name\": unknown member");
    sb_bad("{\"kind\":\"local\"}", AL_E_INVAL, "\"id\": is required");
    sb_bad("{\"id\":\"A\",\"kind\":\"local\"}", AL_E_INVAL, "\"id\": must be");
    sb_bad("{\"id\":\"..\",\"kind\":\"local\"}", AL_E_INVAL, "\"id\": must be");
    sb_bad("{\"id\":\"a\\u0000\",\"kind\":\"local\"}", AL_E_INVAL, "\"id\": must be");
    sb_bad("{\"id\":1,\"kind\":\"local\"}", AL_E_INVAL, "\"id\": must be");
    sb_bad("{\"id\":\"a\"}", AL_E_INVAL, "\"kind\": is required");
    sb_bad("{\"id\":\"a\",\"kind\":\"remote\"}", AL_E_INVAL,
           "\"kind\": must be \"local\", \"static\", \"reverse\" or \"aca\"");
    sb_bad("{\"id\":\"a\",\"kind\":\"LOCAL\"}", AL_E_INVAL, "\"kind\"");
    sb_bad("{\"id\":\"a\",\"kind\":\"local\\u0000\"}", AL_E_INVAL, "\"kind\"");
    sb_bad("{\"id\":\"a\",\"kind\":null}", AL_E_INVAL, "\"kind\"");
    sb_bad("{\"id\":\"a\",\"kind\":\"local\",\"url\":\"ws://h\"}", AL_E_INVAL,
           "\"url\": only a static or aca sandbox has a url");
    sb_bad("{\"id\":\"a\",\"kind\":\"reverse\",\"url\":\"\"}", AL_E_INVAL, "\"url\": only");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\"}", AL_E_INVAL,
           "\"url\": is required for a static sandbox");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":null}", AL_E_INVAL,
           "\"url\": must be a string");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"http://h\"}", AL_E_INVAL,
           "\"url\": must be ws://HOST... or wss://HOST...");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"WS://h\"}", AL_E_INVAL, "\"url\": must be");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://\"}", AL_E_INVAL, "\"url\": must be");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"wss://\"}", AL_E_INVAL, "\"url\": must be");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"\"}", AL_E_INVAL, "\"url\": must be");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://h /x\"}", AL_E_INVAL,
           "\"url\": must be printable ASCII without spaces");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://h\\t\"}", AL_E_INVAL,
           "\"url\": must be printable");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://h\\u007f\"}", AL_E_INVAL,
           "\"url\": must be printable");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://h\\u00e9\"}", AL_E_INVAL,
           "\"url\": must be printable");
    sb_bad("{\"id\":\"a\",\"kind\":\"static\",\"url\":\"ws://h\\u0000x\"}", AL_E_INVAL,
           "\"url\": must not contain a NUL byte");
    char *big = malloc(APIREQ_MAX_BODY + 1);
    assert_non_null(big);
    memset(big, ' ', APIREQ_MAX_BODY + 1);
    sb_bad_n(big, APIREQ_MAX_BODY + 1, AL_E_TOOBIG, "request body is larger than 65536 bytes");
    free(big);
    assert_int_equal(apireq_sandbox("{}", 2, NULL, NULL, 0), AL_E_INVAL);
}

/* "network": "host" or "none" for a local sandbox, absent the default; a
 * static or reverse sandbox has none (airlockd does not start its runner).
 * What the parser accepts the data layer stores as it is. */
static void test_sandbox_network(void **state)
{
    (void)state;
    static struct apireq_sandbox sb;
    struct db_sandbox row;
    struct dbfx f = {.db = NULL};
    db_up(&f);
    sb_ok("{\"id\":\"n0\",\"kind\":\"local\"}", &sb);
    assert_int_equal(sb.network, DB_NETWORK_DEFAULT);
    sb_ok("{\"id\":\"n1\",\"kind\":\"local\",\"network\":\"none\"}", &sb);
    assert_int_equal(sb.network, DB_NETWORK_NONE);
    const struct db_sandbox_spec sp = {.id = sb.id, .kind = sb.kind, .network = sb.network};
    assert_int_equal(db_sandbox_create(f.db, &sp), AL_OK);
    assert_int_equal(db_sandbox_get(f.db, "n1", &row), AL_OK);
    assert_int_equal(row.network, DB_NETWORK_NONE);
    sb_ok("{\"network\":\"host\",\"id\":\"n2\",\"kind\":\"local\",\"record_input\":true}", &sb);
    assert_int_equal(sb.network, DB_NETWORK_HOST);
    assert_true(sb.record_input);
    db_down(&f);

    /* only "host" or "none", as strings, exactly */
    static const char *const bad_values[] = {
        "\"default\"", "\"None\"", "\"off\"",    "\"\"", "\"none\\u0000\"", "\"none \"", "null",
        "false",       "0",        "[\"none\"]", "{}",
    };
    struct buf b = {0};
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        b_str(&b, "{\"id\":\"n3\",\"kind\":\"local\",\"network\":");
        b_str(&b, bad_values[i]);
        b_str(&b, "}");
        sb_bad(b.p, AL_E_INVAL, "\"network\": must be \"host\" or \"none\"");
        b_free(&b);
    }
    /* static and reverse sandboxes: refused whatever the value */
    sb_bad("{\"id\":\"r1\",\"kind\":\"reverse\",\"network\":\"none\"}", AL_E_INVAL,
           "\"network\": only a local sandbox has one");
    sb_bad("{\"id\":\"r1\",\"kind\":\"reverse\",\"network\":\"host\"}", AL_E_INVAL,
           "\"network\": only a local sandbox");
    sb_bad("{\"id\":\"s1\",\"kind\":\"static\",\"url\":\"ws://h\",\"network\":\"none\"}",
           AL_E_INVAL, "\"network\": only a local sandbox");
    sb_bad("{\"id\":\"r1\",\"kind\":\"reverse\",\"network\":7}", AL_E_INVAL,
           "\"network\": only a local sandbox");
    sb_bad("{\"id\":\"n4\",\"kind\":\"local\",\"network\":\"none\",\"network\":\"host\"}",
           AL_E_INVAL, "duplicate");
    sb_bad("{\"id\":\"n4\",\"kind\":\"local\",\"networks\":\"none\"}", AL_E_INVAL,
           "\"networks\": unknown member");
}

/* ---- resize ------------------------------------------------------------------ */

static void rs_bad(const char *body, int want, const char *needle)
{
    uint16_t c = 11, r = 22;
    char err[ERR_CAP];
    int rc = apireq_resize(body, strlen(body), &c, &r, err, sizeof err);
    if (rc != want)
        fail_msg("rc %d, want %d; err \"%s\"; body %.200s", rc, want, err, body);
    check_reason(err, needle, body);
    assert_int_equal(c, 11); /* untouched */
    assert_int_equal(r, 22);
}

static void test_resize(void **state)
{
    (void)state;
    uint16_t c = 0, r = 0;
    char err[ERR_CAP];
    const char *b = "{\"cols\":120,\"rows\":40}";
    assert_int_equal(apireq_resize(b, strlen(b), &c, &r, err, sizeof err), AL_OK);
    assert_string_equal(err, "");
    assert_int_equal(c, 120);
    assert_int_equal(r, 40);
    b = " {\"rows\":4096,\"cols\":1}\n";
    assert_int_equal(apireq_resize(b, strlen(b), &c, &r, err, sizeof err), AL_OK);
    assert_int_equal(c, 1);
    assert_int_equal(r, AL_MAX_ROWS);

    rs_bad("{\"rows\":40}", AL_E_INVAL, "\"cols\": is required");
    rs_bad("{\"cols\":40}", AL_E_INVAL, "\"rows\": is required");
    rs_bad("{\"cols\":0,\"rows\":40}", AL_E_INVAL, "\"cols\": must be an integer from 1 to 4096");
    rs_bad("{\"cols\":4097,\"rows\":40}", AL_E_INVAL, "\"cols\": must be an integer");
    rs_bad("{\"cols\":80,\"rows\":4097}", AL_E_INVAL, "\"rows\": must be an integer");
    rs_bad("{\"cols\":80,\"rows\":-24}", AL_E_INVAL, "\"rows\": must be an integer");
    rs_bad("{\"cols\":\"80\",\"rows\":24}", AL_E_INVAL, "\"cols\": must be an integer");
    rs_bad("{\"cols\":80.5,\"rows\":24}", AL_E_INVAL, "\"cols\": must be an integer");
    rs_bad("{\"cols\":80,\"rows\":24,\"x\":0}", AL_E_INVAL, "\"x\": unknown member");
    rs_bad("{\"cols\":80,\"rows\":24,\"cols\":81}", AL_E_INVAL, "duplicate");
    rs_bad("{\"cols\":80,\"rows\":24}x", AL_E_INVAL, "not valid JSON");
    rs_bad("[80,24]", AL_E_INVAL, "JSON object");
    rs_bad("", AL_E_INVAL, "request body is empty");
    assert_int_equal(apireq_resize(b, strlen(b), NULL, &r, NULL, 0), AL_E_INVAL);
}

/* ---- signal ------------------------------------------------------------------ */

static void sg_bad(const char *body, int want, const char *needle)
{
    unsigned s = 77;
    char err[ERR_CAP];
    int rc = apireq_signal(body, strlen(body), &s, err, sizeof err);
    if (rc != want)
        fail_msg("rc %d, want %d; err \"%s\"; body %.200s", rc, want, err, body);
    check_reason(err, needle, body);
    assert_int_equal(s, 77);
}

static void test_signal(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        unsigned signo;
    } names[] = {
        {"HUP", 1},   {"INT", 2},   {"QUIT", 3},  {"KILL", 9},  {"USR1", 10},  {"USR2", 12},
        {"TERM", 15}, {"CONT", 18}, {"STOP", 19}, {"TSTP", 20}, {"WINCH", 28},
    };
    char err[ERR_CAP];
    unsigned s = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char body[64];
        (void)snprintf(body, sizeof body, "{\"signal\": \"%s\"}", names[i].name);
        assert_int_equal(apireq_signal(body, strlen(body), &s, err, sizeof err), AL_OK);
        assert_int_equal(s, names[i].signo);
        assert_true(fr_signal_ok(s));
    }
    /* exactly the protocol's list */
    size_t proto = 0;
    for (unsigned n = 0; n < 256; n++)
        proto += fr_signal_ok(n) ? 1 : 0;
    assert_int_equal(proto, sizeof names / sizeof names[0]);

    /* empty or absent: TERM */
    static const char *const term_bodies[] = {"", " \r\n\t", "{}", " { } "};
    for (size_t i = 0; i < sizeof term_bodies / sizeof term_bodies[0]; i++) {
        s = 0;
        assert_int_equal(apireq_signal(term_bodies[i], strlen(term_bodies[i]), &s, err, sizeof err),
                         AL_OK);
        assert_int_equal(s, 15);
        assert_int_equal(s, APIREQ_DEFAULT_SIGNAL);
    }
    s = 0;
    assert_int_equal(apireq_signal(NULL, 0, &s, err, sizeof err), AL_OK);
    assert_int_equal(s, 15);

    sg_bad("{\"signal\":\"SIGTERM\"}", AL_E_INVAL,
           "\"signal\": must be one of HUP INT QUIT KILL USR1 USR2 TERM CONT STOP TSTP WINCH");
    sg_bad("{\"signal\":\"term\"}", AL_E_INVAL, "\"signal\": must be one of");
    sg_bad("{\"signal\":\"SEGV\"}", AL_E_INVAL, "\"signal\": must be one of");
    sg_bad("{\"signal\":\"\"}", AL_E_INVAL, "\"signal\": must be one of");
    sg_bad("{\"signal\":15}", AL_E_INVAL, "\"signal\": must be one of");
    sg_bad("{\"signal\":null}", AL_E_INVAL, "\"signal\": must be one of");
    sg_bad("{\"signal\":\"TERM\\u0000\"}", AL_E_INVAL, "\"signal\"");
    sg_bad("{\"signal\":\"TERM\",\"signal\":\"KILL\"}", AL_E_INVAL, "duplicate");
    sg_bad("{\"signal\":\"TERM\",\"scope\":\"tree\"}", AL_E_INVAL, "\"scope\": unknown member");
    sg_bad("{\"signal\":\"TERM\"} {}", AL_E_INVAL, "not valid JSON");
    sg_bad("[\"TERM\"]", AL_E_INVAL, "JSON object");
    sg_bad("\"TERM\"", AL_E_INVAL, "JSON object");
    s = 77;
    assert_int_equal(apireq_signal(NULL, 3, &s, err, sizeof err), AL_E_INVAL);
    assert_int_equal(s, 77);
    char *big = malloc(APIREQ_MAX_BODY + 1);
    assert_non_null(big);
    memset(big, ' ', APIREQ_MAX_BODY + 1);
    assert_int_equal(apireq_signal(big, APIREQ_MAX_BODY, &s, err, sizeof err), AL_OK);
    assert_int_equal(apireq_signal(big, APIREQ_MAX_BODY + 1, &s, err, sizeof err), AL_E_TOOBIG);
    free(big);
    assert_int_equal(apireq_signal("", 0, NULL, NULL, 0), AL_E_INVAL);
}

static void en_bad(const char *body, int want, const char *needle)
{
    unsigned t = 77;
    char err[ERR_CAP];
    int rc = apireq_enroll(body, strlen(body), &t, err, sizeof err);
    if (rc != want)
        fail_msg("rc %d, want %d; err \"%s\"; body %.200s", rc, want, err, body);
    check_reason(err, needle, body);
    assert_int_equal(t, 77);
}

static void test_enroll(void **state)
{
    (void)state;
    char err[ERR_CAP];
    unsigned t = 0;
    static const char *const dflt[] = {"", " \n", "{}"};
    for (size_t i = 0; i < sizeof dflt / sizeof dflt[0]; i++) {
        t = 0;
        assert_int_equal(apireq_enroll(dflt[i], strlen(dflt[i]), &t, err, sizeof err), AL_OK);
        assert_int_equal(t, APIREQ_ENROLL_TTL_DEFAULT);
        assert_string_equal(err, "");
    }
    assert_int_equal(apireq_enroll("{\"ttl\":5}", 9, &t, err, sizeof err), AL_OK);
    assert_int_equal(t, 5);
    assert_int_equal(apireq_enroll("{\"ttl\":86400}", 13, &t, err, sizeof err), AL_OK);
    assert_int_equal(t, 86400);
    en_bad("{\"ttl\":4}", AL_E_INVAL, "\"ttl\": must be an integer from 5 to 86400");
    en_bad("{\"ttl\":86401}", AL_E_INVAL, "\"ttl\": must be an integer from 5 to 86400");
    en_bad("{\"ttl\":60.0}", AL_E_INVAL, "\"ttl\": must be an integer");
    en_bad("{\"ttl\":\"60\"}", AL_E_INVAL, "\"ttl\": must be an integer");
    en_bad("{\"ttl\":null}", AL_E_INVAL, "\"ttl\": must be an integer");
    en_bad("{\"ttl\":60,\"ttl\":70}", AL_E_INVAL, "duplicate");
    en_bad("{\"scope\":\"x\"}", AL_E_INVAL, "\"scope\": unknown member");
    en_bad("[60]", AL_E_INVAL, "JSON object");
    assert_int_equal(apireq_enroll("", 0, NULL, NULL, 0), AL_E_INVAL);
}

/* ---- allocation failure --------------------------------------------------------- */

/* jansson's allocator, failing the allocation numbered fail_at (from 0),
 * counting what is live. */
static long fault_n, fault_at, fault_live;

static void *fault_malloc(size_t n)
{
    if (fault_n++ == fault_at)
        return NULL;
    void *p = malloc(n);
    if (p)
        fault_live++;
    return p;
}

static void fault_free(void *p)
{
    if (p)
        fault_live--;
    free(p);
}

static void test_nomem(void **state)
{
    (void)state;
    static const char body[] = "{\"sandbox\":\"box1\",\"argv\":[\"bash\",\"-l\",\"x\"],"
                               "\"env\":{\"B\":\"2\",\"A\":\"1\",\"C\":\"3\"},\"cwd\":\"/w\","
                               "\"term\":\"vt100\",\"mode\":\"pipes\"}";
    /* How many allocations parsing alone makes: jansson 2.14 reports some
     * failures inside its lexer as syntax errors (lex_scan_string), so
     * there a refusal as invalid JSON is acceptable too. */
    json_set_alloc_funcs(fault_malloc, fault_free);
    fault_n = 0;
    fault_at = -1;
    json_error_t je;
    json_decref(json_loadb(body, sizeof body - 1, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je));
    long parse_allocs = fault_n;
    json_set_alloc_funcs(malloc, free);
    assert_true(parse_allocs > 5);

    int failures = 0;
    bool done = false;
    for (long k = 0; k < 10000 && !done; k++) {
        json_set_alloc_funcs(fault_malloc, fault_free);
        fault_n = 0;
        fault_at = k;
        fault_live = 0;
        struct apireq_terminal t;
        char err[ERR_CAP];
        int rc = apireq_terminal(body, sizeof body - 1, &t, err, sizeof err);
        bool is_zero = zeroed(&t, sizeof t);
        done = fault_n <= k; /* no allocation failed: every path seen */
        apireq_terminal_free(&t);
        json_set_alloc_funcs(malloc, free);
        if (fault_live != 0)
            fail_msg("allocation %ld failing leaked %ld blocks", k, fault_live);
        if (rc != AL_OK) {
            failures++;
            assert_true(is_zero);
            bool parse_syntax = k < parse_allocs && rc == AL_E_INVAL &&
                                strncmp(err, "request body is not valid JSON", 30) == 0;
            if (!parse_syntax && (rc != AL_E_NOMEM || strcmp(err, "out of memory") != 0))
                fail_msg("allocation %ld failing gave %d: %s", k, rc, err);
        } else {
            assert_true(done);
        }

        /* The other parsers allocate only while parsing. */
        static const char *const bodies[3] = {
            "{\"id\":\"s\",\"kind\":\"static\",\"url\":\"ws://h\"}",
            "{\"cols\":1,\"rows\":2}",
            "{\"signal\":\"KILL\"}",
        };
        for (int i = 0; i < 3; i++) {
            struct apireq_sandbox sb;
            uint16_t c, r;
            unsigned sig;
            json_set_alloc_funcs(fault_malloc, fault_free);
            fault_n = 0;
            fault_live = 0;
            size_t n = strlen(bodies[i]);
            rc = i == 0   ? apireq_sandbox(bodies[i], n, &sb, err, sizeof err)
                 : i == 1 ? apireq_resize(bodies[i], n, &c, &r, err, sizeof err)
                          : apireq_signal(bodies[i], n, &sig, err, sizeof err);
            json_set_alloc_funcs(malloc, free);
            if (fault_live != 0)
                fail_msg("allocation %ld failing leaked %ld blocks (parser %d)", k, fault_live, i);
            if (rc != AL_OK && rc != AL_E_NOMEM &&
                !(rc == AL_E_INVAL && strncmp(err, "request body is not valid JSON", 30) == 0))
                fail_msg("allocation %ld failing gave %d in parser %d: %s", k, rc, i, err);
        }
    }
    assert_true(done);
    assert_true(failures > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terminal_full),
        cmocka_unit_test(test_terminal_defaults),
        cmocka_unit_test(test_terminal_free_safe),
        cmocka_unit_test(test_terminal_body),
        cmocka_unit_test(test_terminal_sandbox),
        cmocka_unit_test(test_terminal_argv),
        cmocka_unit_test(test_terminal_argv_limits),
        cmocka_unit_test(test_terminal_cwd),
        cmocka_unit_test(test_terminal_env),
        cmocka_unit_test(test_terminal_env_limits),
        cmocka_unit_test(test_terminal_size_mode_term),
        cmocka_unit_test(test_terminal_proxy),
        cmocka_unit_test(test_terminal_body_limit),
        cmocka_unit_test(test_terminal_all_limits),
        cmocka_unit_test(test_err_buffer),
        cmocka_unit_test(test_sandbox),
        cmocka_unit_test(test_sandbox_network),
        cmocka_unit_test(test_resize),
        cmocka_unit_test(test_signal),
        cmocka_unit_test(test_enroll),
        cmocka_unit_test(test_nomem),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
