/**
 * The SQL rate-limit store's statements (plain text and functions, shared by both editions), and the values each
 * decision binds: one `INSERT … ON CONFLICT DO UPDATE … RETURNING` per decision, the
 * arithmetic of `core/tokenBucket.ts` and `core/rateWindows.ts` restated in SQL (IEEE doubles in both
 * PostgreSQL and SQLite, the same operations in the same order). Keep the three in step.
 *
 * A row holds one limiter key: `at_ms` (the token bucket's `fullAt`, a window's start), `units` (the current
 * window's count) and `previous_units` (the sliding window's previous count); `NULL` is the fresh state. The
 * update computes from the row it locked whether the request is admitted (`admitted`), writes the new state
 * only then, and copies the state it found into `was_*`: `RETURNING` those lets the caller run the core on
 * exactly the state the database decided on, so the decision it reports is the core's, number for number.
 * A key the table does not hold yet is inserted with the core's decision on the fresh state, which the
 * caller computes: no statement reads a row before it writes it.
 *
 * Parameters are named `:x` in the text below and compiled per dialect: PostgreSQL `$n` (one per name),
 * SQLite `?` (one per use); numbers are cast to `DOUBLE PRECISION` (SQLite: REAL affinity), so no
 * arithmetic is done on integers. No statement needs `floor`, which not every SQLite build has: window
 * starts and indexes are computed by the caller.
 */
import { type Decision, EPS } from "./rateLimit.js"
import * as RateWindows from "./rateWindows.js"
import * as TokenBucket from "./tokenBucket.js"

export type Dialect = "pg" | "sqlite"
export type Algorithm = "tb" | "fw" | "sw"

export const defaultTable = "effect_resilience_rate_limits"

/** PostgreSQL truncates identifiers at 63 bytes; the index is named `<table>_expires_at`. */
const maxTableLength = 63 - "_expires_at".length

export const validTable = (table: string): boolean => /^[a-z_][a-z0-9_]*$/.test(table) && table.length <= maxTableLength

export const tableRule = `1 to ${maxTableLength} lower-case letters, digits or underscores`

/**
 * The table and its expiry index, as idempotent statements. On PostgreSQL the table is `UNLOGGED`: counters
 * need no write-ahead log (a decision then costs no WAL flush), and what a crash or a failover loses is
 * a few seconds of counting, after which every key starts fresh.
 */
export const schema = (dialect: Dialect, table: string): ReadonlyArray<string> => [
  `CREATE ${dialect === "pg" ? "UNLOGGED " : ""}TABLE IF NOT EXISTS ${table} (
  algorithm          TEXT             NOT NULL,
  name               TEXT             NOT NULL,
  key                TEXT             NOT NULL,
  at_ms              DOUBLE PRECISION,
  units              DOUBLE PRECISION,
  previous_units     DOUBLE PRECISION,
  was_at_ms          DOUBLE PRECISION,
  was_units          DOUBLE PRECISION,
  was_previous_units DOUBLE PRECISION,
  admitted           SMALLINT         NOT NULL,
  expires_at         DOUBLE PRECISION NOT NULL,
  PRIMARY KEY (algorithm, name, key)
)`,
  `CREATE INDEX IF NOT EXISTS ${table}_expires_at ON ${table} (expires_at)`
]

/** The names every decision binds. */
const common = ["algorithm", "name", "key", "ins_at", "ins_units", "ins_previous", "ins_admitted", "ins_expires"]

/** Text parameters (never cast); every other name is a number. */
const textNames = new Set(["algorithm", "name", "key"])

/** The token bucket on the locked row `r`; binds now, cost, capacity, cost × interval, tau, eps. */
const tokenBucket = (() => {
  const ahead = "(CASE WHEN r.at_ms > :now THEN r.at_ms - :now ELSE 0 END)"
  const after = `(${ahead} + :cost_interval)`
  const ok = `(:cost <= :capacity AND ${after} - :tau <= :eps)`
  return {
    names: ["now", "cost", "capacity", "cost_interval", "tau", "eps"],
    set: [
      `at_ms = CASE WHEN ${ok} THEN :now + ${after} ELSE r.at_ms END`,
      `expires_at = CASE WHEN ${ok} THEN :now + ${after} ELSE r.expires_at END`,
      `admitted = CASE WHEN ${ok} THEN 1 ELSE 0 END`
    ]
  }
})()

/** Window parts on the locked row `r`: the window start at now is `:start` (computed by the caller). */
const same = "r.at_ms >= :start"
const windowStart = `(CASE WHEN ${same} THEN r.at_ms ELSE :start END)`
const windowUnits = `(CASE WHEN ${same} THEN r.units ELSE 0 END)`

/** Binds cost, limit, start, window. */
const fixedWindow = (() => {
  const ok = `(${windowUnits} + :cost <= :limit)`
  return {
    names: ["cost", "limit", "start", "window"],
    set: [
      `at_ms = CASE WHEN ${ok} THEN ${windowStart} ELSE r.at_ms END`,
      `units = CASE WHEN ${ok} THEN ${windowUnits} + :cost ELSE r.units END`,
      `expires_at = CASE WHEN ${ok} THEN ${windowStart} + :window ELSE r.expires_at END`,
      `admitted = CASE WHEN ${ok} THEN 1 ELSE 0 END`
    ]
  }
})()

/**
 * Binds now, cost, limit, start, window, eps and `lo`/`hi`: the previous window is the stored one when
 * `Math.round(at_ms / window)` is the current index minus one, that is `lo <= at_ms / window < hi`.
 */
const slidingWindow = (() => {
  const previous = `(CASE WHEN ${same} THEN r.previous_units ` +
    `WHEN r.at_ms / :window >= :lo AND r.at_ms / :window < :hi THEN r.units ELSE 0 END)`
  const cur = windowUnits
  const wait = `(CASE WHEN ${cur} + :cost <= :limit THEN ` +
    `(CASE WHEN ${previous} = 0 THEN 0 ` +
    `ELSE ${windowStart} + :window * (1 - (:limit - ${cur} - :cost) / ${previous}) - :now END) ` +
    `ELSE ${windowStart} + :window + :window * (1 - (:limit - :cost) / ${cur}) - :now END)`
  const ok = `(:cost <= :limit AND ${wait} <= :eps)`
  return {
    names: ["now", "cost", "limit", "start", "window", "eps", "lo", "hi"],
    set: [
      `at_ms = CASE WHEN ${ok} THEN ${windowStart} ELSE r.at_ms END`,
      `units = CASE WHEN ${ok} THEN ${cur} + :cost ELSE r.units END`,
      `previous_units = CASE WHEN ${ok} THEN ${previous} ELSE r.previous_units END`,
      `expires_at = CASE WHEN ${ok} THEN ${windowStart} + 2 * :window ELSE r.expires_at END`,
      `admitted = CASE WHEN ${ok} THEN 1 ELSE 0 END`
    ]
  }
})()

const bodies = { tb: tokenBucket, fw: fixedWindow, sw: slidingWindow }

/** A statement in one dialect: its text and the parameter names in the order they are bound. */
export interface Compiled {
  readonly text: string
  readonly order: ReadonlyArray<string>
}

const compile = (text: string, dialect: Dialect): Compiled => {
  const order: Array<string> = []
  const out = text.replace(/:([a-z_]+)/g, (_, name: string) => {
    let placeholder: string
    if (dialect === "pg") {
      let index = order.indexOf(name)
      if (index < 0) index = order.push(name) - 1
      placeholder = `$${index + 1}`
    } else {
      order.push(name)
      placeholder = "?"
    }
    return textNames.has(name) ? placeholder : `CAST(${placeholder} AS DOUBLE PRECISION)`
  })
  return { text: out, order }
}

/**
 * The decision statement of one algorithm. The inserted row (`ins_*`, the core's step on the fresh state)
 * is bound by the caller; on a conflict the `SET` decides on the row held, and every `SET` expression
 * reads the row as it was before the statement (both dialects), so `was_*` is the state decided on.
 */
export const decide = (dialect: Dialect, table: string, algorithm: Algorithm): Compiled => {
  const body = bodies[algorithm]
  const text = `INSERT INTO ${table} AS r (algorithm, name, key, at_ms, units, previous_units,
  was_at_ms, was_units, was_previous_units, admitted, expires_at)
VALUES (:algorithm, :name, :key, :ins_at, :ins_units, :ins_previous, NULL, NULL, NULL, :ins_admitted, :ins_expires)
ON CONFLICT (algorithm, name, key) DO UPDATE SET
  ${["was_at_ms = r.at_ms", "was_units = r.units", "was_previous_units = r.previous_units", ...body.set].join(",\n  ")}
RETURNING admitted, was_at_ms, was_units, was_previous_units`
  // a fresh insert and an update both return `was_*`; an insert's are NULL, the fresh state, as wanted
  const compiled = compile(text, dialect)
  const expected = [...common, ...body.names]
  const unknown = compiled.order.filter((name) => !expected.includes(name))
  if (unknown.length > 0) throw new Error(`rate-limit statement binds unknown names: ${unknown.join(", ")}`)
  return compiled
}

/** Binds `values` in the compiled order; a missing name is a bug, not a database error. */
export const bind = (compiled: Compiled, values: Readonly<Record<string, string | number | null>>) =>
  compiled.order.map((name) => {
    const value = values[name]
    if (value === undefined) throw new Error(`rate-limit statement: no value for :${name}`)
    return value
  })

/** What the upsert returns: the state it found (`was_*`) and whether it admitted. */
export interface Row {
  readonly admitted: unknown
  readonly was_at_ms: unknown
  readonly was_units: unknown
  readonly was_previous_units: unknown
}

/** A stored double, or `null` for the fresh state; drivers may hand back strings for numeric columns. */
export const stored = (value: unknown): number | null => {
  if (value === null || value === undefined) return null
  const n = Number(value)
  if (Number.isNaN(n)) throw new Error(`corrupt rate-limit row: ${String(value)}`)
  return n
}

/**
 * The core's decision on the state the statement found. Its `allowed` is the database's: they are the same
 * arithmetic on the same doubles, and should a database ever round otherwise, what it wrote is what counts.
 */
export const reconcile = (decision: Decision, admitted: boolean): Decision =>
  decision.allowed === admitted ? decision : {
    ...decision,
    allowed: admitted,
    retryAfterMillis: admitted ? 0 : Math.max(1, decision.retryAfterMillis)
  }

const windowState = (row: Row): RateWindows.State => {
  const start = stored(row.was_at_ms)
  return start === null
    ? RateWindows.fresh
    : { start, current: stored(row.was_units) ?? 0, previous: stored(row.was_previous_units) ?? 0 }
}

/**
 * The insert of a key never seen: the core's step on the fresh state. A denial stores the fresh state,
 * already expired (a row must exist for `RETURNING`; the sweep takes it).
 */
const inserted = (step: { readonly decision: Decision; readonly expiresAt: number }, now: number, state: {
  readonly at: number
  readonly units: number | null
  readonly previous: number | null
}) =>
  step.decision.allowed
    ? {
      ins_at: state.at,
      ins_units: state.units,
      ins_previous: state.previous,
      ins_admitted: 1,
      ins_expires: step.expiresAt
    }
    : { ins_at: null, ins_units: null, ins_previous: null, ins_admitted: 0, ins_expires: now }

/** One decision to send: its statement, its limit, the values it binds, and the core's decision on the row. */
export interface Call {
  readonly algorithm: Algorithm
  readonly limit: number
  readonly values: Readonly<Record<string, string | number | null>>
  readonly decision: (row: Row) => Decision
}

export const tokenBucketCall = (
  key: string,
  cost: number,
  params: { readonly name: string; readonly capacity: number; readonly refillPerSecond: number },
  nowMillis: number
): Call => {
  const core = { capacity: params.capacity, refillPerSecond: params.refillPerSecond }
  const interval = 1000 / params.refillPerSecond
  const first = TokenBucket.take(TokenBucket.fresh, cost, core, nowMillis)
  return {
    algorithm: "tb",
    limit: params.capacity,
    values: {
      algorithm: "tb",
      name: params.name,
      key,
      ...inserted(first, nowMillis, { at: first.state, units: null, previous: null }),
      now: nowMillis,
      cost,
      capacity: params.capacity,
      cost_interval: cost * interval,
      tau: params.capacity * interval,
      eps: EPS
    },
    decision: (row) => TokenBucket.take(stored(row.was_at_ms) ?? TokenBucket.fresh, cost, core, nowMillis).decision
  }
}

export const windowCall = (
  algorithm: "fw" | "sw",
  key: string,
  cost: number,
  params: { readonly name: string; readonly limit: number; readonly windowMillis: number },
  nowMillis: number
): Call => {
  const step = algorithm === "fw" ? RateWindows.fixedWindow : RateWindows.slidingWindow
  const core = { limit: params.limit, windowMillis: params.windowMillis }
  const w = params.windowMillis
  const start = Math.floor(nowMillis / w) * w
  const index = Math.round(start / w)
  const first = step(RateWindows.fresh, cost, core, nowMillis)
  const s = first.state
  return {
    algorithm,
    limit: params.limit,
    values: {
      algorithm,
      name: params.name,
      key,
      ...inserted(first, nowMillis, { at: s.start, units: s.current, previous: s.previous }),
      now: nowMillis,
      cost,
      limit: params.limit,
      start,
      window: w,
      eps: EPS,
      lo: index - 1.5,
      hi: index - 0.5
    },
    decision: (row) => step(windowState(row), cost, core, nowMillis).decision
  }
}
