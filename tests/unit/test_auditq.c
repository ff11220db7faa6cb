/*
 * Unit tests for auditq (src/control/auditq.c): audit rows queued in
 * memory and written in one transaction per flush. The queue's triggers
 * (the interval, the count, the bound) are checked with the time passed
 * in, no database; the flush over a real SQLite database in a fresh
 * mkdtemp directory: every row in order with every field, one
 * transaction (a row the database refuses leaves none of the batch), a
 * failed flush returns its error, empties the queue and leaks nothing
 * (ASan), and the next flush works.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "al_err.h"
#include "auditq.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { T0 = 5000 }; /* the caller's clock at the first row, ms */

struct fx {
    char dir[64];
    char path[128];
    struct db *db;
    struct auditq *q;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    (void)snprintf(f->dir, sizeof f->dir, "/tmp/al-auditq.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    (void)snprintf(f->path, sizeof f->path, "%s/airlock.db", f->dir);
    char url[160], err[DB_MSG_MAX];
    (void)snprintf(url, sizeof url, "sqlite:%s", f->path);
    assert_int_equal(db_open(url, &f->db, err, sizeof err), AL_OK);
    assert_int_equal(auditq_new(&f->q), AL_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    auditq_free(f->q);
    assert_int_equal(db_close(f->db), AL_OK);
    char p[160];
    static const char *const files[] = {"airlock.db", "airlock.db-wal", "airlock.db-shm"};
    for (size_t i = 0; i < 3; i++) {
        (void)snprintf(p, sizeof p, "%s/%s", f->dir, files[i]);
        (void)unlink(p);
    }
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

/* The rows of the audit table (newest first), at most max kept. */
struct rows {
    unsigned n, max;
    struct db_audit *r;
};

static int collect(void *ctx, const struct db_audit *a)
{
    struct rows *l = ctx;
    if (l->n < l->max)
        l->r[l->n] = *a;
    l->n++;
    return 0;
}

static unsigned read_rows(struct fx *f, struct db_audit *out, unsigned max)
{
    struct rows l = {0, max, out};
    const struct db_audit_filter flt = {.limit = DB_AUDIT_LIMIT_MAX};
    assert_int_equal(db_audit_query(f->db, &flt, collect, &l), AL_OK);
    return l.n;
}

/* Rows whose time is since or later (at most DB_AUDIT_LIMIT_MAX). */
static unsigned count_since(struct fx *f, int64_t since)
{
    struct rows l = {0, 0, NULL};
    const struct db_audit_filter flt = {.since = since, .limit = DB_AUDIT_LIMIT_MAX};
    assert_int_equal(db_audit_query(f->db, &flt, collect, &l), AL_OK);
    return l.n;
}

static unsigned count_rows(struct fx *f)
{
    return count_since(f, 0);
}

static void add_n(struct auditq *q, unsigned n, uint64_t now)
{
    for (unsigned i = 0; i < n; i++) {
        const struct db_audit_row r = {1000 + i, "system", "proxy_call", "t-1", "{}"};
        assert_int_equal(auditq_add(q, &r, now), AL_OK);
    }
}

/* Rows queued are written by one flush, in the order queued, with every
 * field as given (the event's time, not the flush's), and the queue is
 * then empty; a flush with nothing queued writes nothing. */
static void test_flush_in_order(void **state)
{
    struct fx *f = *state;
    const struct db_audit_row rows[] = {
        {1111, "system", "proxy_call", "t-aaa", "{\"status\":200,\"path\":\"/v1/x\"}"},
        {1111, "alice", "attach", "t-bbb", "{\"writer\":true}"},
        {999, "system", "proxy_call", "", "{\"status\":401}"},
        {2222, "bob", "kill", NULL, NULL},
    };
    size_t n = sizeof rows / sizeof rows[0];
    for (size_t i = 0; i < n; i++)
        assert_int_equal(auditq_add(f->q, &rows[i], T0 + i), AL_OK);
    assert_int_equal(auditq_count(f->q), n);
    assert_int_equal(count_rows(f), 0); /* queued, not written */
    unsigned done = 0;
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    assert_int_equal(done, n);
    assert_int_equal(auditq_count(f->q), 0);
    assert_int_equal(auditq_due_in(f->q, T0), AUDITQ_IDLE);
    struct db_audit got[8];
    assert_int_equal(read_rows(f, got, 8), n);
    /* by id: the order queued (the audit query orders by time first) */
    struct db_audit *byid = got;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (byid[j].id < byid[i].id) {
                struct db_audit t = byid[i];
                byid[i] = byid[j];
                byid[j] = t;
            }
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(byid[i].at, rows[i].at);
        assert_string_equal(byid[i].actor, rows[i].actor);
        assert_string_equal(byid[i].action, rows[i].action);
        assert_string_equal(byid[i].target, rows[i].target ? rows[i].target : "");
        assert_string_equal(byid[i].detail, rows[i].detail_json ? rows[i].detail_json : "{}");
        if (i)
            assert_true(byid[i].id == byid[i - 1].id + 1);
    }
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    assert_int_equal(done, 0);
    assert_int_equal(count_rows(f), n);
}

/* The interval: a flush is due AUDITQ_FLUSH_MS after the oldest row was
 * queued, whatever was queued since; an empty queue has nothing due, and
 * after a flush the next row starts a new interval. */
static void test_interval_trigger(void **state)
{
    struct fx *f = *state;
    assert_int_equal(auditq_due_in(f->q, T0), AUDITQ_IDLE);
    add_n(f->q, 1, T0);
    assert_int_equal(auditq_due_in(f->q, T0), AUDITQ_FLUSH_MS);
    add_n(f->q, 1, T0 + 40); /* a later row does not push the flush back */
    assert_int_equal(auditq_due_in(f->q, T0 + 40), AUDITQ_FLUSH_MS - 40);
    assert_int_equal(auditq_due_in(f->q, T0 + AUDITQ_FLUSH_MS - 1), 1);
    assert_int_equal(auditq_due_in(f->q, T0 + AUDITQ_FLUSH_MS), 0);
    assert_int_equal(auditq_due_in(f->q, T0 + 10 * AUDITQ_FLUSH_MS), 0);
    assert_int_equal(auditq_flush(f->q, f->db, NULL), AL_OK);
    assert_int_equal(auditq_due_in(f->q, T0 + 10 * AUDITQ_FLUSH_MS), AUDITQ_IDLE);
    add_n(f->q, 1, T0 + 1000);
    assert_int_equal(auditq_due_in(f->q, T0 + 1000), AUDITQ_FLUSH_MS);
    assert_int_equal(auditq_flush(f->q, f->db, NULL), AL_OK);
    assert_int_equal(count_rows(f), 3);
}

/* The count: once AUDITQ_BATCH_ROWS are queued a flush is due at once,
 * however young the oldest row. */
static void test_count_trigger(void **state)
{
    struct fx *f = *state;
    add_n(f->q, AUDITQ_BATCH_ROWS - 1, T0);
    assert_int_equal(auditq_due_in(f->q, T0), AUDITQ_FLUSH_MS);
    add_n(f->q, 1, T0);
    assert_int_equal(auditq_count(f->q), AUDITQ_BATCH_ROWS);
    assert_int_equal(auditq_due_in(f->q, T0), 0);
    unsigned done = 0;
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    assert_int_equal(done, AUDITQ_BATCH_ROWS);
    assert_int_equal(count_rows(f), AUDITQ_BATCH_ROWS);
}

/* The bound: a full queue refuses the row (AL_E_LIMIT) without losing
 * one already queued; the caller flushes (all of them, one transaction)
 * and the row then goes in. Rows longer than the database takes are
 * refused at the door, not in the batch they would fail. */
static void test_full_queue(void **state)
{
    struct fx *f = *state;
    add_n(f->q, AUDITQ_MAX_ROWS, T0);
    const struct db_audit_row last = {7777, "system", "proxy_call", "t-last", "{}"};
    assert_int_equal(auditq_add(f->q, &last, T0), AL_E_LIMIT);
    assert_int_equal(auditq_count(f->q), AUDITQ_MAX_ROWS);
    unsigned done = 0;
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    assert_int_equal(done, AUDITQ_MAX_ROWS);
    assert_int_equal(count_rows(f), AUDITQ_MAX_ROWS); /* all written (no more than a query shows) */
    assert_int_equal(auditq_add(f->q, &last, T0), AL_OK);
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    /* the full queue's last row (at 1000 + MAX - 1) and the one that waited */
    assert_int_equal(count_since(f, 1000 + AUDITQ_MAX_ROWS - 1), 2);
    _Static_assert(1000 + AUDITQ_MAX_ROWS - 1 < 7777, "the row that waited is the newest");

    char big[DB_DETAIL_MAX + 2];
    memset(big, ' ', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    const struct db_audit_row bad[] = {
        {1, NULL, "proxy_call", "", "{}"},
        {1, "system", NULL, "", "{}"},
        {1, "system", "proxy_call", "", big},
    };
    assert_int_equal(auditq_add(f->q, &bad[0], T0), AL_E_INVAL);
    assert_int_equal(auditq_add(f->q, &bad[1], T0), AL_E_INVAL);
    assert_int_equal(auditq_add(f->q, &bad[2], T0), AL_E_TOOBIG);
    assert_int_equal(auditq_count(f->q), 0);
}

/* Make the database refuse rows whose target is "boom", as a full disk or
 * a lost connection would refuse a write: through the back door, a second
 * connection. */
static void add_refusal(struct fx *f)
{
    sqlite3 *h = NULL;
    assert_int_equal(sqlite3_open_v2(f->path, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(h,
                          "CREATE TRIGGER boom BEFORE INSERT ON audit WHEN NEW.target = 'boom'"
                          " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
                          NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("trigger: %s", msg ? msg : "?");
    sqlite3_free(msg);
    assert_int_equal(sqlite3_close(h), SQLITE_OK);
}

/* A flush the database refuses returns the error with its message, says
 * how many rows it handed on (lost), writes none of them (one
 * transaction: the rows before the refused one are rolled back too),
 * empties the queue, and the next flush writes. No database at all is an
 * error too, not a crash. */
static void test_flush_failure(void **state)
{
    struct fx *f = *state;
    add_refusal(f);
    add_n(f->q, 3, T0);
    const struct db_audit_row boom = {1, "system", "proxy_call", "boom", "{}"};
    assert_int_equal(auditq_add(f->q, &boom, T0), AL_OK);
    add_n(f->q, 1, T0);
    unsigned done = 0;
    int rc = auditq_flush(f->q, f->db, &done);
    assert_int_not_equal(rc, AL_OK);
    assert_int_equal(done, 5);
    assert_non_null(strstr(db_errmsg(f->db), "refused by the test"));
    assert_int_equal(auditq_count(f->q), 0);
    assert_int_equal(count_rows(f), 0);
    /* the next flush works: the failed transaction was rolled back */
    add_n(f->q, 2, T0);
    assert_int_equal(auditq_flush(f->q, f->db, &done), AL_OK);
    assert_int_equal(done, 2);
    assert_int_equal(count_rows(f), 2);
    /* no database */
    add_n(f->q, 2, T0);
    assert_int_equal(auditq_flush(f->q, NULL, &done), AL_E_INVAL);
    assert_int_equal(done, 2);
    assert_int_equal(auditq_count(f->q), 0);
    /* rows still queued at free are freed with the queue (ASan: no leak) */
    add_n(f->q, 3, T0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flush_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interval_trigger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_trigger, setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flush_failure, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
