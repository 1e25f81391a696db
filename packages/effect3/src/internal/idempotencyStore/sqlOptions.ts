// No @effect/sql import here: the public module loads this eagerly to check options and print the schema.
import { Duration } from "effect"
import type { Options as SqlOptions } from "../../IdempotencyStore/Sql.js"
import * as validate from "../validate.js"

/** SQL options with defaults applied; checked eagerly so a bad table name fails where the layer is built. */
export interface ResolvedSqlOptions {
  readonly table: string
  readonly migrate: boolean
  readonly cleanup: boolean
  readonly cleanupInterval: Duration.Duration
  readonly cleanupBatch: number
  readonly timeout: Duration.Duration
}

export type SqlDialect = "sqlite" | "pg"

export const defaultTable = "effect_resilience_idempotency"

/** PostgreSQL truncates identifiers at 63 bytes; the index is named `<table>_expires_at`. */
const maxTableLength = 63 - "_expires_at".length

/**
 * Lower-case names only, so the unquoted names of the schema and the quoted ones of the queries are the same
 * identifier in both dialects (PostgreSQL folds unquoted names to lower case).
 */
const checkTable = (table: string): string =>
  /^[a-z_][a-z0-9_]*$/.test(table) && table.length <= maxTableLength
    ? table
    : validate.invalid(
      `IdempotencyStore SQL table must be 1 to ${maxTableLength} lower-case letters, digits or underscores, got ${
        JSON.stringify(table)
      }`
    )

/** The table and its expiry index, as idempotent statements. */
export const sqlSchema = (dialect: SqlDialect, table: string = defaultTable): ReadonlyArray<string> => {
  checkTable(table)
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (
  scope       TEXT     NOT NULL,
  key         TEXT     NOT NULL,
  fingerprint TEXT     NOT NULL,
  token       TEXT     NOT NULL,
  state       SMALLINT NOT NULL,
  status      INTEGER,
  headers     TEXT,
  body        ${dialect === "pg" ? "BYTEA" : "BLOB"},
  lease_until BIGINT   NOT NULL,
  expires_at  BIGINT   NOT NULL,
  PRIMARY KEY (scope, key)
)`,
    `CREATE INDEX IF NOT EXISTS ${table}_expires_at ON ${table} (expires_at)`
  ]
}

export const resolve = (options: SqlOptions = {}): ResolvedSqlOptions => {
  const table = checkTable(options.table ?? defaultTable)
  const interval = validate.millis(
    "IdempotencyStore/Sql cleanupInterval",
    options.cleanupInterval ?? "1 minute",
    { finite: true }
  )
  if (interval <= 0) validate.invalid("IdempotencyStore/Sql cleanupInterval must be > 0")
  const timeout = validate.millis("IdempotencyStore/Sql timeout", options.timeout ?? "2 seconds", { finite: true })
  if (timeout <= 0) validate.invalid("IdempotencyStore/Sql timeout must be > 0")
  return {
    timeout: Duration.millis(timeout),
    table,
    migrate: options.migrate ?? true,
    cleanup: options.cleanup ?? true,
    cleanupInterval: Duration.millis(interval),
    cleanupBatch: validate.positiveInt("IdempotencyStore/Sql cleanupBatch", options.cleanupBatch ?? 1000)
  }
}
