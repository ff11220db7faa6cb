/*
 * db_sqlite_schema: the SQLite backend's schema, as the list of its
 * migrations (db_sqlite.h): dbs_migrations[i] is the SQL that takes the
 * schema from version i to i + 1. Append only: a released migration never
 * changes. Not here: applying them (dbs_migrate_step, db_sqlite.c).
 *
 * Tables are STRICT and repeat the rules of db_check.c as CHECK
 * constraints; the PostgreSQL backend keeps the same tables
 * (db_pg_schema.c).
 */
#include "al_limits.h"
#include "db.h"
#include "db_sqlite.h"

/* Names and ids as db.c checks them: [a-z0-9._-]{1,64}, first [a-z0-9].
 * A sandbox that terminals name cannot be deleted (foreign key, NO ACTION:
 * SQLite then reports SQLITE_CONSTRAINT_FOREIGNKEY). A channel number is
 * unique among a sandbox's live terminals only, so it is free again once
 * its terminal is closed or lost. */
// clang-format off
static const char dbs_schema_v1[] =
    "CREATE TABLE schema_migrations ("
    "  version INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  applied_at INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE users ("
    "  name TEXT PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 64"
    "    AND name GLOB '[a-z0-9]*' AND name NOT GLOB '*[^a-z0-9._-]*'),"
    "  role TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),"
    "  key_sha256 TEXT NOT NULL UNIQUE"
    "    CHECK (length(key_sha256) = 64 AND key_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  created_at INTEGER NOT NULL"
    ") STRICT;"
    "CREATE TABLE sandboxes ("
    "  id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64"
    "    AND id GLOB '[a-z0-9]*' AND id NOT GLOB '*[^a-z0-9._-]*'),"
    "  kind TEXT NOT NULL CHECK (kind IN ('local', 'static', 'reverse')),"
    "  url TEXT CHECK ((kind = 'static') = (url IS NOT NULL)),"
    "  created_at INTEGER NOT NULL,"
    "  link_up INTEGER NOT NULL DEFAULT 0 CHECK (link_up IN (0, 1)),"
    "  link_since INTEGER NOT NULL CHECK (link_since >= 0),"
    "  link_rtt_us INTEGER NOT NULL DEFAULT -1 CHECK (link_rtt_us >= -1)"
    ") STRICT;"
    "CREATE TABLE terminals ("
    "  id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64"
    "    AND id GLOB '[a-z0-9]*' AND id NOT GLOB '*[^a-z0-9._-]*'),"
    "  sandbox_id TEXT NOT NULL REFERENCES sandboxes (id),"
    "  channel INTEGER NOT NULL CHECK (channel BETWEEN 1 AND 4294967295),"
    "  argv TEXT NOT NULL,"
    "  cwd TEXT NOT NULL,"
    "  env TEXT NOT NULL,"
    "  cols INTEGER NOT NULL CHECK (cols BETWEEN 1 AND 4096),"
    "  rows INTEGER NOT NULL CHECK (rows BETWEEN 1 AND 4096),"
    "  mode TEXT NOT NULL CHECK (mode IN ('pty', 'pipes')),"
    "  state TEXT NOT NULL"
    "    CHECK (state IN ('opening', 'running', 'exited', 'closed', 'lost')),"
    "  exit_code INTEGER,"
    "  exit_signal INTEGER,"
    "  created_at INTEGER NOT NULL,"
    "  ended_at INTEGER,"
    "  out_offset INTEGER NOT NULL DEFAULT 0 CHECK (out_offset >= 0),"
    "  err_offset INTEGER NOT NULL DEFAULT 0 CHECK (err_offset >= 0),"
    "  rec_bytes INTEGER NOT NULL DEFAULT 0 CHECK (rec_bytes >= 0),"
    "  CHECK ((exit_code IS NULL AND exit_signal IS NULL)"
    "    OR (exit_signal = 0 AND exit_code BETWEEN 0 AND 255)"
    "    OR (exit_signal BETWEEN 1 AND 127 AND exit_code = -1))"
    ") STRICT;"
    "CREATE UNIQUE INDEX terminals_live_channel ON terminals (sandbox_id, channel)"
    "  WHERE state IN ('opening', 'running', 'exited');"
    "CREATE INDEX terminals_sandbox ON terminals (sandbox_id, created_at);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  at INTEGER NOT NULL CHECK (at >= 0),"
    "  actor TEXT NOT NULL,"
    "  action TEXT NOT NULL,"
    "  target TEXT NOT NULL DEFAULT '',"
    "  detail TEXT NOT NULL DEFAULT '{}'"
    ") STRICT;"
    "CREATE INDEX audit_at ON audit (at, id);"
    "CREATE INDEX audit_actor ON audit (actor, at);"
    "CREATE INDEX audit_action ON audit (action, at);"
    "PRAGMA application_id = 1098009707;"; /* DBS_APP_ID */

/* Schema 2: who made a terminal (its recording's reader, with admins), and
 * whether recordings keep input: per sandbox, off by default, and fixed on
 * each terminal when it is made. */
static const char dbs_schema_v2[] =
    "ALTER TABLE sandboxes ADD COLUMN record_input INTEGER NOT NULL DEFAULT 0"
    "  CHECK (record_input IN (0, 1));"
    "ALTER TABLE terminals ADD COLUMN creator TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE terminals ADD COLUMN record_input INTEGER NOT NULL DEFAULT 0"
    "  CHECK (record_input IN (0, 1));";

/* Web sessions (db.h): only hashes of the secrets; a user's removal
 * removes their sessions. */
static const char dbs_schema_v3[] =
    "CREATE TABLE sessions ("
    "  id_sha256 TEXT PRIMARY KEY"
    "    CHECK (length(id_sha256) = 64 AND id_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  csrf_sha256 TEXT NOT NULL"
    "    CHECK (length(csrf_sha256) = 64 AND csrf_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  user_name TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,"
    "  created_at INTEGER NOT NULL CHECK (created_at >= 0),"
    "  last_seen INTEGER NOT NULL CHECK (last_seen >= created_at),"
    "  expires_at INTEGER NOT NULL CHECK (expires_at > created_at)"
    ") STRICT;"
    "CREATE INDEX sessions_user ON sessions (user_name);"
    "CREATE INDEX sessions_expires ON sessions (expires_at);";

/* Schema 4: a local sandbox's agents' network; rows from before follow
 * the server-wide setting, as they did. */
static const char dbs_schema_v4[] =
    "ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT 'default'"
    "  CHECK (network IN ('default', 'host', 'none')"
    "    AND (network = 'default' OR kind = 'local'));";

/* Schema 5: the credential proxy's credentials (db.h): only the SHA-256 of
 * each, the terminal it belongs to (removing the terminal removes it), the
 * upstreams it opens ("a,b": names of [a-z0-9_-], 1..16 of them), whether
 * and when it was revoked. */
static const char dbs_schema_v5[] =
    "CREATE TABLE proxy_credentials ("
    "  hash_sha256 TEXT PRIMARY KEY"
    "    CHECK (length(hash_sha256) = 64 AND hash_sha256 NOT GLOB '*[^0-9a-f]*'),"
    "  terminal_id TEXT NOT NULL REFERENCES terminals (id) ON DELETE CASCADE,"
    "  upstreams TEXT NOT NULL CHECK (length(upstreams) BETWEEN 1 AND 527"
    "    AND upstreams GLOB '[a-z0-9_-]*' AND upstreams NOT GLOB '*[^a-z0-9_,-]*'"
    "    AND upstreams NOT GLOB '*,' AND upstreams NOT GLOB '*,,*'),"
    "  revoked INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1)),"
    "  revoked_at INTEGER CHECK ((revoked = 1) = (revoked_at IS NOT NULL)),"
    "  created_at INTEGER NOT NULL CHECK (created_at >= 0)"
    ") STRICT;"
    "CREATE INDEX proxy_credentials_terminal ON proxy_credentials (terminal_id, created_at);";
/* Schema 6: sandboxes on a managed platform (kind 'aca'): the pool's
 * endpoint in url, the platform (airlockd's --config names its token) and
 * the session identifier airlockd generated. A CHECK on kind cannot be
 * altered in SQLite: the table is rebuilt as SQLite's documentation says
 * (a new table, filled, the old one dropped, the new one renamed), with
 * foreign keys off during the step and checked before it commits
 * (dbs_migrate_step): the terminals' REFERENCES names "sandboxes". */
static const char dbs_schema_v6[] =
    "CREATE TABLE sandboxes_v6 ("
    "  id TEXT PRIMARY KEY CHECK (length(id) BETWEEN 1 AND 64"
    "    AND id GLOB '[a-z0-9]*' AND id NOT GLOB '*[^a-z0-9._-]*'),"
    "  kind TEXT NOT NULL CHECK (kind IN ('local', 'static', 'reverse', 'aca')),"
    "  url TEXT CHECK ((kind IN ('static', 'aca')) = (url IS NOT NULL)),"
    "  created_at INTEGER NOT NULL,"
    "  link_up INTEGER NOT NULL DEFAULT 0 CHECK (link_up IN (0, 1)),"
    "  link_since INTEGER NOT NULL CHECK (link_since >= 0),"
    "  link_rtt_us INTEGER NOT NULL DEFAULT -1 CHECK (link_rtt_us >= -1),"
    "  record_input INTEGER NOT NULL DEFAULT 0 CHECK (record_input IN (0, 1)),"
    "  network TEXT NOT NULL DEFAULT 'default'"
    "  CHECK (network IN ('default', 'host', 'none')"
    "    AND (network = 'default' OR kind = 'local')),"
    "  platform TEXT CHECK ((kind = 'aca') = (platform IS NOT NULL)"
    "    AND (platform IS NULL OR (length(platform) BETWEEN 1 AND 32"
    "      AND platform NOT GLOB '*[^a-z0-9_-]*'))),"
    "  identifier TEXT UNIQUE CHECK ((kind = 'aca') = (identifier IS NOT NULL)"
    "    AND (identifier IS NULL OR (length(identifier) BETWEEN 4 AND 128"
    "      AND identifier NOT GLOB '*[^A-Za-z0-9_-]*')))"
    ") STRICT;"
    "INSERT INTO sandboxes_v6 (id, kind, url, created_at, link_up, link_since, link_rtt_us,"
    "  record_input, network)"
    "  SELECT id, kind, url, created_at, link_up, link_since, link_rtt_us, record_input,"
    "  network FROM sandboxes;"
    "DROP TABLE sandboxes;"
    "ALTER TABLE sandboxes_v6 RENAME TO sandboxes;";
/* Schema 7: the replicas serving this database (db.h); with SQLite there
 * is one, but the table and its calls are the same. A step of its own,
 * touching no other table. */
static const char dbs_schema_v7[] =
    "CREATE TABLE replicas ("
    "  id TEXT PRIMARY KEY CHECK (length(id) = 26 AND id GLOB 'r-*'"
    "    AND substr(id, 3) NOT GLOB '*[^0-9a-f]*'),"
    "  address TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 256"
    "    AND (address GLOB 'ws://?*' OR address GLOB 'wss://?*')),"
    "  started_at INTEGER NOT NULL CHECK (started_at >= 0),"
    "  beat_at INTEGER NOT NULL CHECK (beat_at >= 0),"
    "  stopped_at INTEGER CHECK (stopped_at >= 0)"
    ") STRICT;"
    "CREATE INDEX replicas_beat ON replicas (beat_at);";
/* Schema 8: beside its durable size, the time of the recording's last
 * event within it (µs since its start; NULL: not stored, rows from before,
 * whose recording is then read whole on resume) and whether its exit event
 * is among them, so that a resume reads only the header and the last
 * line (docs/recording.md). */
static const char dbs_schema_v8[] =
    "ALTER TABLE terminals ADD COLUMN rec_time_us INTEGER CHECK (rec_time_us >= 0);"
    "ALTER TABLE terminals ADD COLUMN rec_exited INTEGER NOT NULL DEFAULT 0"
    "  CHECK (rec_exited IN (0, 1) AND (rec_exited = 0 OR rec_time_us IS NOT NULL));";
/* Schema 9: each sandbox's lease (db.h "leases"): the replica owning its
 * runner link, its fencing token, until when (the database's clock). */
static const char dbs_schema_v9[] =
    "ALTER TABLE sandboxes ADD COLUMN owner TEXT CHECK (owner IS NULL OR (length(owner) = 26"
    "  AND owner GLOB 'r-*' AND substr(owner, 3) NOT GLOB '*[^0-9a-f]*'));"
    "ALTER TABLE sandboxes ADD COLUMN fence INTEGER NOT NULL DEFAULT 0 CHECK (fence >= 0);"
    "ALTER TABLE sandboxes ADD COLUMN lease_until INTEGER CHECK (lease_until >= 0);"
    "CREATE INDEX sandboxes_owner ON sandboxes (owner);";
/* Schema 10: each sandbox's pinned runner key (db.h "runner keys"), the
 * hex SHA-256 of the key, beside its lease. */
static const char dbs_schema_v10[] =
    "ALTER TABLE sandboxes ADD COLUMN runner_key TEXT CHECK (runner_key IS NULL OR"
    "  (length(runner_key) = 64 AND runner_key NOT GLOB '*[^0-9a-f]*'));";
/* Schema 11: each replica's public keys (db.h "replicas"), a JWKS. */
static const char dbs_schema_v11[] =
    "ALTER TABLE replicas ADD COLUMN jwks TEXT CHECK (length(jwks) BETWEEN 1 AND 65536);";
// clang-format on

/* dbs_migrations[i] upgrades the schema from version i to i + 1. Append
 * only: a released migration never changes. */
const struct dbs_migration dbs_migrations[] = {
    {"users, sandboxes, terminals, audit", dbs_schema_v1},
    {"terminal creator, record_input", dbs_schema_v2},
    {"web sessions", dbs_schema_v3},
    {"sandbox network", dbs_schema_v4},
    {"proxy credentials", dbs_schema_v5},
    {"sandboxes on a platform", dbs_schema_v6},
    {"replicas", dbs_schema_v7},
    {"recording time and exit", dbs_schema_v8},
    {"leases", dbs_schema_v9},
    {"runner keys", dbs_schema_v10},
    {"replica keys", dbs_schema_v11},
};

_Static_assert(sizeof dbs_migrations / sizeof dbs_migrations[0] == DB_SCHEMA_VERSION,
               "one migration per schema version");
_Static_assert(DBS_APP_ID == 1098009707, "the application_id in dbs_schema_v1");
_Static_assert(AL_MAX_COLS == 4096 && AL_MAX_ROWS == 4096, "the CHECKs on cols and rows");
_Static_assert(DB_PROXY_UPSTREAMS_TEXT_MAX == 527, "the CHECK on proxy_credentials.upstreams");
_Static_assert(DB_REPLICA_ADDR_MAX == 256 && DB_REPLICA_ID_LEN == 26, "the CHECKs on replicas");
