/*
 * airlockd_user: `airlockd user add NAME --role ROLE | ls | rm NAME`, the
 * people who may use airlockd, with a table of its own actions
 * (user_cmds[], the shape of airlockd_main.c's). add creates DIR (0700)
 * and the SQLite database when missing and prints the new API key, once,
 * on stdout; the database keeps only its hash.
 *
 * The database is DIR/airlock.db (db.h), or the one --db names (a db.h
 * URL: postgres://... for PostgreSQL).
 */
#include "airlockd_user.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "al_err.h"
#include "db.h"

#define TIME_TEXT_MAX 32 /* "2025-01-31T23:59:59Z" */

static int user_add(const struct airlockd_cmd *self, int argc, char **argv);
static int user_ls(const struct airlockd_cmd *self, int argc, char **argv);
static int user_rm(const struct airlockd_cmd *self, int argc, char **argv);

static const struct airlockd_cmd user_cmds[] = {
    {"user add", "NAME --role admin|operator|viewer [--data DIR] [--db URL]",
     "add a user and print their API key on stdout (shown once; only its hash is kept)", user_add},
    {"user ls", "[--data DIR] [--db URL]", "list the users: name, role, creation time (UTC)",
     user_ls},
    {"user rm", "NAME [--data DIR] [--db URL]", "remove a user; their API key stops working",
     user_rm},
};
enum { NUSER_CMDS = sizeof user_cmds / sizeof user_cmds[0] };

/* Open the database --db names, else DIR/airlock.db. With create, DIR
 * (0700) and the database are made when missing; without, a missing
 * database file is an error (a read or a removal never leaves an empty
 * database behind). */
static int user_open_db(const char *cmd, const char *data, const char *db_url, bool create,
                        struct db **out)
{
    char path[DB_PATH_MAX + 1], url[DB_URL_MAX + 1], err[DB_MSG_MAX];
    if (db_url) {
        int rc = db_open(db_url, out, err, sizeof err); /* never echoes the URL */
        if (rc != AL_OK) {
            airlockd_cmd_err(cmd, "%s", err[0] ? err : al_strerror(rc));
            return AIRLOCKD_RC_FAIL;
        }
        return 0;
    }
    int n = snprintf(path, sizeof path, "%s/%s", data, DB_FILE_NAME);
    if (n < 0 || (size_t)n >= sizeof path) {
        airlockd_cmd_err(cmd, "--data path too long");
        return AIRLOCKD_RC_USAGE;
    }
    if (create && mkdir(data, AIRLOCKD_DATA_MODE) != 0 && errno != EEXIST) {
        airlockd_cmd_err(cmd, "cannot create data directory %s: %s", data, strerror(errno));
        return AIRLOCKD_RC_FAIL;
    }
    struct stat st;
    if (!create && stat(path, &st) != 0) {
        int e = errno;
        airlockd_cmd_err(cmd, "%s: %s%s", path, strerror(e),
                         e == ENOENT ? " (airlockd user add creates it)" : "");
        return AIRLOCKD_RC_FAIL;
    }
    (void)snprintf(url, sizeof url, "%s%s", DB_SQLITE_PREFIX, path); /* fits: see DB_URL_MAX */
    int rc = db_open(url, out, err, sizeof err);
    if (rc != AL_OK) {
        airlockd_cmd_err(cmd, "%s", err[0] ? err : al_strerror(rc));
        return AIRLOCKD_RC_FAIL;
    }
    return 0;
}

/* Close db; a failure is one error line and AIRLOCKD_RC_FAIL. */
static int user_close_db(const char *cmd, struct db *db)
{
    int rc = db_close(db);
    if (rc != AL_OK) {
        airlockd_cmd_err(cmd, "closing the database: %s", al_strerror(rc));
        return AIRLOCKD_RC_FAIL;
    }
    return 0;
}

/* NAME checks shared by add and rm: present and well-formed. */
static int user_check_name(const struct airlockd_cmd *c, const char *name)
{
    if (!name) {
        airlockd_cmd_err(c->name, "NAME is required (see airlockd %s --help)", c->name);
        return AIRLOCKD_RC_USAGE;
    }
    if (!db_name_valid(name)) {
        airlockd_cmd_err(
            c->name,
            "NAME must be 1 to %d of a-z 0-9 . _ - starting with a letter or digit, not '%s'",
            DB_NAME_MAX, name);
        return AIRLOCKD_RC_USAGE;
    }
    return 0;
}

static int user_add(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *name = NULL, *role_s = NULL, *data = NULL, *db_url = NULL;
    const struct airlockd_opt opts[] = {
        {NULL, &name, NULL},
        {"--role", &role_s, NULL},
        {"--data", &data, NULL},
        {"--db", &db_url, NULL},
    };
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if ((prc = user_check_name(self, name)) != 0)
        return prc;
    enum db_role role;
    if (!role_s || db_role_parse(role_s, &role) != AL_OK) {
        airlockd_cmd_err(self->name, "--role %s: admin, operator or viewer",
                         role_s ? "must be one of" : "is required");
        return AIRLOCKD_RC_USAGE;
    }
    if (!data)
        data = airlockd_cmd_data_dir();

    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, true, &db)) != 0)
        return prc;
    char key[DB_KEY_LEN + 1];
    int rc = db_user_add(db, name, role, key, sizeof key);
    if (rc != AL_OK) {
        airlockd_cmd_err(self->name, "%s", db_errmsg(db));
        (void)db_close(db); /* the add's error is the one to report */
        return rc == AL_E_INVAL ? AIRLOCKD_RC_USAGE : AIRLOCKD_RC_FAIL;
    }
    /* The user exists now: hand out the key even if closing fails. */
    int crc = user_close_db(self->name, db);
    int wrc = printf("%s\n", key);
    OPENSSL_cleanse(key, sizeof key);
    if (wrc < 0 || fflush(stdout) != 0) {
        airlockd_cmd_err(self->name,
                         "cannot write the API key to stdout (remove the user and add it again)");
        return AIRLOCKD_RC_FAIL;
    }
    return crc;
}

/* "2025-01-31T23:59:59Z" from Unix milliseconds. */
static void user_time_text(int64_t ms, char *buf, size_t cap)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        (void)snprintf(buf, cap, "%lld", (long long)ms);
}

static int user_print(void *ctx, const struct db_user *u)
{
    (void)ctx;
    char when[TIME_TEXT_MAX];
    user_time_text(u->created_at, when, sizeof when);
    return printf("%-16s %-8s %s\n", u->name, db_role_name(u->role), when) < 0 ? AL_E_IO : 0;
}

static int user_ls(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *data = NULL, *db_url = NULL;
    const struct airlockd_opt opts[] = {{"--data", &data, NULL}, {"--db", &db_url, NULL}};
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if (!data)
        data = airlockd_cmd_data_dir();
    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, false, &db)) != 0)
        return prc;
    int rc = db_user_list(db, user_print, NULL);
    if (rc == AL_E_IO && db_errmsg(db)[0] == '\0') {
        airlockd_cmd_err(self->name, "cannot write to stdout");
    } else if (rc != AL_OK) {
        airlockd_cmd_err(self->name, "%s", db_errmsg(db));
    }
    int crc = user_close_db(self->name, db);
    if (rc == AL_OK && fflush(stdout) != 0) {
        airlockd_cmd_err(self->name, "cannot write to stdout");
        rc = AL_E_IO;
    }
    return rc != AL_OK ? AIRLOCKD_RC_FAIL : crc;
}

static int user_rm(const struct airlockd_cmd *self, int argc, char **argv)
{
    const char *name = NULL, *data = NULL, *db_url = NULL;
    const struct airlockd_opt opts[] = {
        {NULL, &name, NULL}, {"--data", &data, NULL}, {"--db", &db_url, NULL}};
    int prc = airlockd_cmd_opts(self, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (prc != 0)
        return prc == 1 ? 0 : prc;
    if ((prc = user_check_name(self, name)) != 0)
        return prc;
    if (!data)
        data = airlockd_cmd_data_dir();
    struct db *db = NULL;
    if ((prc = user_open_db(self->name, data, db_url, false, &db)) != 0)
        return prc;
    int rc = db_user_remove(db, name);
    if (rc != AL_OK)
        airlockd_cmd_err(self->name, "%s", db_errmsg(db));
    int crc = user_close_db(self->name, db);
    if (rc != AL_OK)
        return AIRLOCKD_RC_FAIL;
    if (printf("removed user %s\n", name) < 0 || fflush(stdout) != 0)
        return AIRLOCKD_RC_FAIL;
    return crc;
}

int airlockd_user(const struct airlockd_cmd *self, int argc, char **argv)
{
    if (argc < 2) {
        airlockd_cmd_err(self->name, "missing action: add, ls or rm (see airlockd user --help)");
        return AIRLOCKD_RC_USAGE;
    }
    if (airlockd_cmd_is_help(argv[1])) {
        (void)fputs("usage:\n", stdout);
        for (size_t i = 0; i < NUSER_CMDS; i++)
            (void)fprintf(stdout, "  airlockd %s %s\n      %s\n", user_cmds[i].name,
                          user_cmds[i].synopsis, user_cmds[i].summary);
        return 0;
    }
    for (size_t i = 0; i < NUSER_CMDS; i++)
        if (strcmp(user_cmds[i].name + sizeof "user", argv[1]) == 0)
            return user_cmds[i].run(&user_cmds[i], argc - 1, argv + 1);
    airlockd_cmd_err(self->name, "unknown action '%s': add, ls or rm", argv[1]);
    return AIRLOCKD_RC_USAGE;
}
