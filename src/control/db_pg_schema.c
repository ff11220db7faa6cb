/*
 * db_pg_schema: the PostgreSQL backend's schema, as the list of its
 * migrations (db_pg.h): dbp_migrations[i] holds the statements that take
 * the schema from version i to i + 1, with the same name as the SQLite
 * backend's step (db_sqlite_schema.c), and dbp_version_table the table the
 * version lives in. Append only: a released migration never changes. Not
 * here: applying them (dbp_migrate_step, db_pg.c).
 */
#include "al_limits.h"
#include "db.h"
#include "db_pg.h"

#include <stddef.h>

/* Names and ids as db.c checks them. NO ACTION foreign key: deleting a
 * sandbox that terminals name fails with 23503. A channel is unique among
 * a sandbox's live terminals only (a partial unique index). Constraint
 * names are given where a violation is told apart by name. */
// clang-format off
#define DBP_NAME_CHECK(col) "CHECK (" col " ~ '^[a-z0-9][a-z0-9._-]{0,63}$')"
static const char *const dbp_schema_v1[] = {
    "CREATE TABLE schema_migrations ("
    "  version integer PRIMARY KEY,"
    "  name text NOT NULL,"
    "  applied_at bigint NOT NULL)",
    "CREATE TABLE users ("
    "  name text CONSTRAINT users_pkey PRIMARY KEY " DBP_NAME_CHECK("name") ","
    "  role text NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),"
    "  key_sha256 text NOT NULL CONSTRAINT users_key_sha256_key UNIQUE"
    "    CHECK (key_sha256 ~ '^[0-9a-f]{64}$'),"
    "  created_at bigint NOT NULL)",
    "CREATE TABLE sandboxes ("
    "  id text CONSTRAINT sandboxes_pkey PRIMARY KEY " DBP_NAME_CHECK("id") ","
    "  kind text NOT NULL CHECK (kind IN ('local', 'static', 'reverse')),"
    "  url text CHECK ((kind = 'static') = (url IS NOT NULL)),"
    "  created_at bigint NOT NULL,"
    "  link_up boolean NOT NULL DEFAULT false,"
    "  link_since bigint NOT NULL CHECK (link_since >= 0),"
    "  link_rtt_us bigint NOT NULL DEFAULT -1 CHECK (link_rtt_us >= -1))",
    "CREATE TABLE terminals ("
    "  seq bigint GENERATED ALWAYS AS IDENTITY CONSTRAINT terminals_seq_key UNIQUE,"
    "  id text CONSTRAINT terminals_pkey PRIMARY KEY " DBP_NAME_CHECK("id") ","
    "  sandbox_id text NOT NULL CONSTRAINT terminals_sandbox_fkey REFERENCES sandboxes (id),"
    "  channel bigint NOT NULL CHECK (channel BETWEEN 1 AND 4294967295),"
    "  argv text NOT NULL,"
    "  cwd text NOT NULL,"
    "  env text NOT NULL,"
    "  cols integer NOT NULL CHECK (cols BETWEEN 1 AND 4096),"
    "  rows integer NOT NULL CHECK (rows BETWEEN 1 AND 4096),"
    "  mode text NOT NULL CHECK (mode IN ('pty', 'pipes')),"
    "  state text NOT NULL"
    "    CHECK (state IN ('opening', 'running', 'exited', 'closed', 'lost')),"
    "  exit_code integer,"
    "  exit_signal integer,"
    "  created_at bigint NOT NULL,"
    "  ended_at bigint,"
    "  out_offset bigint NOT NULL DEFAULT 0 CHECK (out_offset >= 0),"
    "  err_offset bigint NOT NULL DEFAULT 0 CHECK (err_offset >= 0),"
    "  rec_bytes bigint NOT NULL DEFAULT 0 CHECK (rec_bytes >= 0),"
    "  CHECK ((exit_code IS NULL AND exit_signal IS NULL)"
    "    OR (exit_signal = 0 AND exit_code BETWEEN 0 AND 255)"
    "    OR (exit_signal BETWEEN 1 AND 127 AND exit_code = -1)))",
    "CREATE UNIQUE INDEX terminals_live_channel ON terminals (sandbox_id, channel)"
    "  WHERE state IN ('opening', 'running', 'exited')",
    "CREATE INDEX terminals_sandbox ON terminals (sandbox_id, created_at, seq)",
    "CREATE TABLE audit ("
    "  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
    "  at bigint NOT NULL CHECK (at >= 0),"
    "  actor text NOT NULL,"
    "  action text NOT NULL,"
    "  target text NOT NULL DEFAULT '',"
    "  detail text NOT NULL DEFAULT '{}')",
    "CREATE INDEX audit_at ON audit (at, id)",
    "CREATE INDEX audit_actor ON audit (actor, at)",
    "CREATE INDEX audit_action ON audit (action, at)",
    NULL,
};

/* Schema 2, as db_sqlite_schema.c's dbs_schema_v2. */
static const char *const dbp_schema_v2[] = {
    "ALTER TABLE sandboxes ADD COLUMN record_input boolean NOT NULL DEFAULT false",
    "ALTER TABLE terminals ADD COLUMN creator text NOT NULL DEFAULT ''",
    "ALTER TABLE terminals ADD COLUMN record_input boolean NOT NULL DEFAULT false",
    NULL,
};

/* Web sessions: the same table as db_sqlite_schema.c's dbs_schema_v3. */
#define DBP_HEX64_CHECK(col) "CHECK (" col " ~ '^[0-9a-f]{64}$')"
static const char *const dbp_schema_v3[] = {
    "CREATE TABLE sessions ("
    "  id_sha256 text CONSTRAINT sessions_pkey PRIMARY KEY " DBP_HEX64_CHECK("id_sha256") ","
    "  csrf_sha256 text NOT NULL " DBP_HEX64_CHECK("csrf_sha256") ","
    "  user_name text NOT NULL CONSTRAINT sessions_user_fkey REFERENCES users (name)"
    "    ON DELETE CASCADE,"
    "  created_at bigint NOT NULL CHECK (created_at >= 0),"
    "  last_seen bigint NOT NULL CHECK (last_seen >= created_at),"
    "  expires_at bigint NOT NULL CHECK (expires_at > created_at))",
    "CREATE INDEX sessions_user ON sessions (user_name)",
    "CREATE INDEX sessions_expires ON sessions (expires_at)",
    NULL,
};

/* Schema 4, as db_sqlite_schema.c's dbs_schema_v4. */
static const char *const dbp_schema_v4[] = {
    "ALTER TABLE sandboxes ADD COLUMN network text NOT NULL DEFAULT 'default'"
    "  CONSTRAINT sandboxes_network_check CHECK (network IN ('default', 'host', 'none'))",
    "ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_network_local_check"
    "  CHECK (network = 'default' OR kind = 'local')",
    NULL,
};

/* Schema 5: the same table as db_sqlite_schema.c's dbs_schema_v5. */
static const char *const dbp_schema_v5[] = {
    "CREATE TABLE proxy_credentials ("
    "  hash_sha256 text CONSTRAINT proxy_credentials_pkey PRIMARY KEY "
    DBP_HEX64_CHECK("hash_sha256") ","
    "  terminal_id text NOT NULL CONSTRAINT proxy_credentials_terminal_fkey"
    "    REFERENCES terminals (id) ON DELETE CASCADE,"
    "  upstreams text NOT NULL"
    "    CHECK (upstreams ~ '^[a-z0-9_-]+(,[a-z0-9_-]+)*$' AND length(upstreams) <= 527),"
    "  revoked boolean NOT NULL DEFAULT false,"
    "  revoked_at bigint CHECK (revoked = (revoked_at IS NOT NULL)),"
    "  created_at bigint NOT NULL CHECK (created_at >= 0))",
    "CREATE INDEX proxy_credentials_terminal ON proxy_credentials (terminal_id, created_at)",
    NULL,
};
/* Schema 6, as db_sqlite_schema.c's dbs_schema_v6 (PostgreSQL alters the
 * checks in place; their names are the ones it gave them in schema 1). */
static const char *const dbp_schema_v6[] = {
    "ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_kind_check,"
    "  DROP CONSTRAINT sandboxes_check",
    "ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_kind_check"
    "  CHECK (kind IN ('local', 'static', 'reverse', 'aca')),"
    "  ADD CONSTRAINT sandboxes_url_check CHECK ((kind IN ('static', 'aca')) = (url IS NOT NULL))",
    "ALTER TABLE sandboxes ADD COLUMN platform text"
    "  CONSTRAINT sandboxes_platform_check CHECK ((kind = 'aca') = (platform IS NOT NULL)"
    "    AND (platform IS NULL OR platform ~ '^[a-z0-9_-]{1,32}$')),"
    "  ADD COLUMN identifier text CONSTRAINT sandboxes_identifier_key UNIQUE"
    "  CONSTRAINT sandboxes_identifier_check CHECK ((kind = 'aca') = (identifier IS NOT NULL)"
    "    AND (identifier IS NULL OR identifier ~ '^[A-Za-z0-9_-]{4,128}$'))",
    NULL,
};
/* Schema 7, as db_sqlite_schema.c's dbs_schema_v7: the replicas serving
 * this database (db.h), their times from the database's clock. A step of
 * its own, touching no other table. */
static const char *const dbp_schema_v7[] = {
    "CREATE TABLE replicas ("
    "  id text CONSTRAINT replicas_pkey PRIMARY KEY CHECK (id ~ '^r-[0-9a-f]{24}$'),"
    "  address text NOT NULL CHECK (length(address) BETWEEN 1 AND 256"
    "    AND address ~ '^wss?://[!-~]+$'),"
    "  started_at bigint NOT NULL CHECK (started_at >= 0),"
    "  beat_at bigint NOT NULL CHECK (beat_at >= 0),"
    "  stopped_at bigint CHECK (stopped_at >= 0))",
    "CREATE INDEX replicas_beat ON replicas (beat_at)",
    NULL,
};
/* Schema 8, as db_sqlite_schema.c's dbs_schema_v8. */
static const char *const dbp_schema_v8[] = {
    "ALTER TABLE terminals ADD COLUMN rec_time_us bigint"
    "  CONSTRAINT terminals_rec_time_us_check CHECK (rec_time_us >= 0),"
    "  ADD COLUMN rec_exited boolean NOT NULL DEFAULT false,"
    "  ADD CONSTRAINT terminals_rec_exited_check CHECK (NOT rec_exited OR rec_time_us IS NOT NULL)",
    NULL,
};
/* Schema 9, as db_sqlite_schema.c's dbs_schema_v9: each sandbox's lease. */
static const char *const dbp_schema_v9[] = {
    "ALTER TABLE sandboxes ADD COLUMN owner text"
    "  CONSTRAINT sandboxes_owner_check CHECK (owner ~ '^r-[0-9a-f]{24}$'),"
    "  ADD COLUMN fence bigint NOT NULL DEFAULT 0 CONSTRAINT sandboxes_fence_check CHECK (fence >= 0),"
    "  ADD COLUMN lease_until bigint CONSTRAINT sandboxes_lease_until_check CHECK (lease_until >= 0)",
    "CREATE INDEX sandboxes_owner ON sandboxes (owner)",
    NULL,
};
/* Schema 10, as db_sqlite_schema.c's dbs_schema_v10: each sandbox's
 * pinned runner key. */
static const char *const dbp_schema_v10[] = {
    "ALTER TABLE sandboxes ADD COLUMN runner_key text"
    "  CONSTRAINT sandboxes_runner_key_check " DBP_HEX64_CHECK("runner_key"),
    NULL,
};
/* Schema 11, as db_sqlite_schema.c's dbs_schema_v11: each replica's
 * public keys. */
static const char *const dbp_schema_v11[] = {
    "ALTER TABLE replicas ADD COLUMN jwks text"
    "  CONSTRAINT replicas_jwks_check CHECK (length(jwks) BETWEEN 1 AND 65536)",
    NULL,
};
// clang-format on

/* dbp_migrations[i] upgrades the schema from version i to i + 1, with the
 * same name as the SQLite backend's step. Append only. */
const struct dbp_migration dbp_migrations[] = {
    {"users, sandboxes, terminals, audit", dbp_schema_v1},
    {"terminal creator, record_input", dbp_schema_v2},
    {"web sessions", dbp_schema_v3},
    {"sandbox network", dbp_schema_v4},
    {"proxy credentials", dbp_schema_v5},
    {"sandboxes on a platform", dbp_schema_v6},
    {"replicas", dbp_schema_v7},
    {"recording time and exit", dbp_schema_v8},
    {"leases", dbp_schema_v9},
    {"runner keys", dbp_schema_v10},
    {"replica keys", dbp_schema_v11},
};

_Static_assert(sizeof dbp_migrations / sizeof dbp_migrations[0] == DB_SCHEMA_VERSION,
               "one migration per schema version");
_Static_assert(AL_MAX_COLS == 4096 && AL_MAX_ROWS == 4096, "the CHECKs on cols and rows");
_Static_assert(DB_PROXY_UPSTREAMS_TEXT_MAX == 527, "the CHECK on proxy_credentials.upstreams");
_Static_assert(DB_REPLICA_ADDR_MAX == 256 && DB_REPLICA_ID_LEN == 26, "the CHECKs on replicas");

/* Where the version lives; created with the first migration, in its
 * transaction. */
const char dbp_version_table[] = "CREATE TABLE schema_version ("
                                 "  app text PRIMARY KEY CHECK (app = 'airlock'),"
                                 "  version integer NOT NULL CHECK (version >= 0))";
