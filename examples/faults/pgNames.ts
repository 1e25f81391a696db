/**
 * The Effect-free part of what the PostgreSQL and queue-consumer faults share, in both editions: the services'
 * URLs, run-unique names, and what the backend terminator is told and reports.
 */
export const databaseUrl = (): string => process.env["DATABASE_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"
export const redisUrl = (): string => process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"

/** The same database, with every connection made through this URL named `name` in `pg_stat_activity`. */
export const withApplicationName = (url: string, name: string): string => {
  const parsed = new URL(url)
  parsed.searchParams.set("application_name", name)
  return parsed.toString()
}

let names = 0
/** A lower-case identifier no other run uses: table names, stream names, application names, keys. */
export const runName = (what: string): string =>
  `fault_${what}_${process.pid.toString(36)}${Date.now().toString(36)}_${++names}`

export interface TerminatorOptions {
  /** The `application_name` of the backends to terminate (the processes under test connect with it). */
  readonly applicationName: string
  /**
   * Tables to lock now and then (`SHARE ROW EXCLUSIVE`, which blocks inserts, updates and deletes but not
   * reads) so that the statements touching them queue up; the backends waiting are then terminated, each
   * one certainly in the middle of its statement (its transaction, if any, open).
   */
  readonly lockTables: ReadonlyArray<string>
  /** Names what a backend was doing from its current (or, when idle, last) statement. */
  readonly classify: (query: string) => string
  /** The pause between rounds, in milliseconds: drawn from [min, max]. Default: [30, 120]. */
  readonly pauseMillis?: readonly [number, number]
}

export interface Terminations {
  /** Backends terminated, by what they were doing: `mid-<kind>` for a running statement, `idle`, `idle-in-tx`. */
  readonly byKind: Readonly<Record<string, number>>
  readonly total: number
  /** Rounds that locked a table first. */
  readonly lockRounds: number
}

/** `mid-claim 12, idle 40, ...`, largest first. */
export const describeTerminations = (t: Terminations): string =>
  `${t.total} backends terminated (${
    Object.entries(t.byKind).sort(([, a], [, b]) => b - a).map(([k, n]) => `${k} ${n}`).join(", ")
  })`
