import { identifier } from "./shared.js"

/** The DDL of a PostgreSQL queue (no `@effect/sql` import: `PgQueue.migrations` exposes it statically). */
export const tableStatements = (table: string): ReadonlyArray<string> => {
  const t = identifier("PgQueue table", table)
  return [
    `CREATE TABLE IF NOT EXISTS "${t}" (
      seq BIGSERIAL PRIMARY KEY,
      id TEXT NOT NULL,
      key TEXT,
      body TEXT NOT NULL,
      enqueued_at BIGINT NOT NULL,
      visible_at BIGINT NOT NULL,
      receive_count INTEGER NOT NULL DEFAULT 0,
      token INTEGER NOT NULL DEFAULT 0,
      last_received_at BIGINT,
      last_error TEXT,
      delivery_state SMALLINT NOT NULL DEFAULT 0,
      suspect BOOLEAN NOT NULL DEFAULT false
    )`,
    // the crash attribution's columns (core/crashAttribution.ts) on a table an earlier version made; looked up
    // first, because ALTER TABLE locks the table even when there is nothing to add
    `DO $$ BEGIN
      IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('"${t}"') AND attname = 'suspect'
        AND NOT attisdropped) THEN
        ALTER TABLE "${t}" ADD COLUMN IF NOT EXISTS delivery_state SMALLINT NOT NULL DEFAULT 0,
          ADD COLUMN IF NOT EXISTS suspect BOOLEAN NOT NULL DEFAULT false;
      END IF;
    END $$`,
    `CREATE INDEX IF NOT EXISTS "${t}_visible" ON "${t}" (visible_at, seq)`,
    `CREATE TABLE IF NOT EXISTS "${t}_dlq" (
      id TEXT PRIMARY KEY,
      key TEXT,
      body TEXT NOT NULL,
      reason TEXT NOT NULL,
      receive_count INTEGER NOT NULL,
      first_seen_at BIGINT NOT NULL,
      last_seen_at BIGINT NOT NULL,
      dead_lettered_at BIGINT NOT NULL,
      dlq_seq BIGSERIAL
    )`
  ]
}
