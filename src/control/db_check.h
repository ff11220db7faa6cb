/*
 * db_check: the input checks of the data layer's public calls
 * (db_check.c). Internal to the data layer: only its db*.c files include
 * it. Each returns AL_OK or a negative AL_E_* with db_errmsg() saying
 * which input (named by what) is wrong and why; none ever echoes a secret.
 */
#ifndef DB_CHECK_H
#define DB_CHECK_H

#include "db.h"

#include <stddef.h>

/* A user name, sandbox or terminal id: db_name_valid. */
int db_check_name(struct db *db, const char *what, const char *s);
/* At most max bytes of UTF-8 text without control characters. */
int db_check_text(struct db *db, const char *what, const char *s, size_t max);
/* A terminal's argv and env JSON, an audit detail (db.h's limits). */
int db_check_argv(struct db *db, const char *s);
int db_check_env(struct db *db, const char *s);
int db_check_detail(struct db *db, const char *s);
/* An audit action: [a-z][a-z0-9_]*, at most DB_ACTION_MAX. */
int db_check_action(struct db *db, const char *s);
/* A static sandbox's ws:// or wss:// URL. */
int db_check_url(struct db *db, const char *url);
/* An aca sandbox's pool endpoint: http(s)://HOST[/PATH], no query. */
int db_check_endpoint(struct db *db, const char *url);

#endif
