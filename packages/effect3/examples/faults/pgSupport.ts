/**
 * What the PostgreSQL and queue-consumer faults share: the services' URLs, child processes whose output is
 * read line by line, waiting for a condition, and the terminator that kills PostgreSQL backends by
 * `application_name` while a scenario runs.
 */
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Duration, Effect, Fiber, Random, Redacted, type Scope } from "effect"
import { fileURLToPath } from "node:url"
import { type LineChild, spawnLines } from "../../../../examples/faults/lineChild.js"
import {
  databaseUrl,
  describeTerminations,
  redisUrl,
  runName,
  type Terminations,
  type TerminatorOptions,
  withApplicationName
} from "../../../../examples/faults/pgNames.js"

export {
  databaseUrl,
  describeTerminations,
  redisUrl,
  runName,
  type Terminations,
  type TerminatorOptions,
  withApplicationName
}

/** The fault's own connections (checks and the terminator), never terminated: a different application name. */
export const adminLayer = (url = databaseUrl()) =>
  PgClient.layer({ url: Redacted.make(url), connectTimeout: "5 seconds", maxConnections: 4 })

const root = fileURLToPath(new URL("../..", import.meta.url))

export interface Child extends LineChild {
  /** Waits for a stdout line matching `pattern` (one already written counts); fails if the child exits first. */
  readonly waitFor: (pattern: RegExp, within?: Duration.DurationInput) => Effect.Effect<string, Error>
  /** Waits for the child to exit by itself (or by a signal sent elsewhere). */
  readonly awaitExit: Effect.Effect<void>
  /** SIGKILLs the child (if still running) and waits for its exit. */
  readonly kill: Effect.Effect<void>
}

/**
 * Starts `<script> ...args` from the repository root, with tsx (lineChild.ts: one process, so a signal reaches the program
 * itself); the child is SIGKILLed when the scope closes.
 */
export const spawnScript = (
  label: string,
  script: string,
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Effect.Effect<Child, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync((): Child => {
      const lines = spawnLines(label, { cwd: root, nodeArgs: ["--import", "tsx"] }, script, args, env)
      const waitFor = (pattern: RegExp, within: Duration.DurationInput = "30 seconds") =>
        Effect.async<string, Error>((resume) => {
          const stop = lines.onceLine(pattern, (line) =>
            resume(typeof line === "string" ? Effect.succeed(line) : Effect.fail(line)))
          return Effect.sync(stop)
        }).pipe(Effect.timeoutFail({
          duration: within,
          onTimeout: () =>
            new Error(`${label} printed no ${pattern} within ${Duration.format(within)}`)
        }))
      const awaitExit = Effect.async<void>((resume) => {
        const stop = lines.onExit(() => resume(Effect.void))
        return Effect.sync(stop)
      })
      const kill = Effect.async<void>((resume) => {
        lines.onExit(() => resume(Effect.void))
        lines.child.kill("SIGKILL")
      })
      return { ...lines, waitFor, awaitExit, kill }
    }),
    (child) => child.kill
  )

/**
 * Waits until `condition` holds, checking it every `every` of real time; fails after `within` with `what`.
 * (The faults run in real time: there is no TestClock here.)
 */
export const waitUntil = <E, R>(
  what: string,
  condition: Effect.Effect<boolean, E, R>,
  options: { readonly every?: Duration.DurationInput; readonly within?: Duration.DurationInput } = {}
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const cap = Duration.toMillis(options.within ?? "45 seconds")
    const started = performance.now()
    for (;;) {
      if (yield* condition) return
      if (performance.now() - started > cap) {
        return yield* Effect.fail(new Error(`${what}: not so within ${cap} ms`))
      }
      yield* Effect.sleep(options.every ?? "100 millis")
    }
  })

/**
 * Terminates the backends named `applicationName` until interrupted, in rounds `pauseMillis` apart: every
 * other round locks one of `lockTables` for 50 to 150 ms and terminates the backends waiting on it (or on
 * anything else); the other rounds terminate every such backend, idle or not, which also hits statements
 * that have committed but whose answer is still on its way. Returns the counts so far.
 */
export const startTerminator = (options: TerminatorOptions) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const byKind: Record<string, number> = {}
    let total = 0
    let lockRounds = 0
    const count = (rows: ReadonlyArray<{ readonly state: string | null; readonly query: string | null }>) => {
      for (const row of rows) {
        const kind = row.state === "active"
          ? `mid-${options.classify(row.query ?? "")}`
          : row.state === "idle in transaction" || row.state === "idle in transaction (aborted)"
          ? "idle-in-tx"
          : "idle"
        byKind[kind] = (byKind[kind] ?? 0) + 1
        total++
      }
    }
    type Row = { readonly state: string | null; readonly query: string | null }
    const terminate = (onlyWaiting: boolean) =>
      sql<Row>`SELECT state, query FROM (
          SELECT state, query, pg_terminate_backend(pid) AS killed FROM pg_stat_activity
          WHERE application_name = ${options.applicationName} AND pid <> pg_backend_pid()
            ${onlyWaiting ? sql`AND state = 'active'` : sql``}
        ) t WHERE killed`
    const lockRound = (table: string, holdMillis: number) =>
      sql.withTransaction(
        Effect.gen(function*() {
          yield* sql`SET LOCAL lock_timeout = '500ms'`
          yield* sql`LOCK TABLE ${sql(table)} IN SHARE ROW EXCLUSIVE MODE`
          yield* Effect.sleep(holdMillis)
          count(yield* terminate(true))
          lockRounds++
        })
      )
    const round = (i: number) =>
      Effect.gen(function*() {
        if (i % 2 === 0 && options.lockTables.length > 0) {
          const table = options.lockTables[(i / 2) % options.lockTables.length]!
          yield* lockRound(table, yield* Random.nextIntBetween(50, 151))
        } else {
          count(yield* terminate(false))
        }
        const [min, max] = options.pauseMillis ?? [30, 120]
        yield* Effect.sleep(yield* Random.nextIntBetween(min, max + 1))
      }).pipe(
        // a lock that timed out (a long transaction of the processes under test) only skips the round
        Effect.catchAll(() => Effect.sleep(50))
      )
    let i = 0
    const fiber = yield* Effect.forkScoped(Effect.forever(Effect.suspend(() => round(i++))))
    const snapshot = (): Terminations => ({ byKind: { ...byKind }, total, lockRounds })
    return {
      snapshot,
      /** Stops terminating (waits for the round in progress to end) and returns the counts. */
      stop: Effect.as(Fiber.interrupt(fiber), undefined).pipe(Effect.map(() => snapshot()))
    }
  })
