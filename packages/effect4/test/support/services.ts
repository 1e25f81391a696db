/**
 * The machine's services for integration tests: PostgreSQL (`DATABASE_URL`) and Redis (`REDIS_URL`), with
 * the usual local defaults. Each is probed once per test file with a real query (`SELECT 1`, `PING`), so a
 * server that accepts connections but not ours (wrong database, wrong password) counts as missing.
 * Without a service its tests are skipped locally (with a note) but fail in CI (`CI=true`).
 */
import { describe, it } from "@effect/vitest"

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

export type Service = "postgres" | "redis"

/** Why the service cannot be used, or `undefined` when it answered. */
const probePostgres = async (): Promise<string | undefined> => {
  const [{ PgClient }, SqlClient, { Effect, Redacted }] = await Promise.all([
    import("@effect/sql-pg"),
    import("effect/sql/SqlClient"),
    import("effect")
  ])
  return Effect.runPromise(
    SqlClient.SqlClient.use((sql) => sql`SELECT 1`).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(DATABASE_URL), connectTimeout: "3 seconds" })),
      Effect.match({ onFailure: (e) => String(e), onSuccess: () => undefined })
    )
  )
}

const probeRedis = async (): Promise<string | undefined> => {
  const { Redis } = await import("ioredis")
  const client = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 0 })
  client.on("error", () => {})
  try {
    await client.connect()
    const pong = await client.ping()
    return pong === "PONG" ? undefined : `PING answered ${pong}`
  } catch (error) {
    return String(error)
  } finally {
    client.disconnect()
  }
}

const [postgresProblem, redisProblem] = await Promise.all([probePostgres(), probeRedis()])
const problems: Record<Service, string | undefined> = { postgres: postgresProblem, redis: redisProblem }

const urls: Record<Service, string> = { postgres: DATABASE_URL, redis: REDIS_URL }

export const available: Record<Service, boolean> = {
  postgres: problems.postgres === undefined,
  redis: problems.redis === undefined
}

export const inCI = process.env.CI === "true" || process.env.CI === "1"

/** Registers `body` when every named service answers; otherwise skips it locally and fails it in CI. */
export const describeWith = (services: ReadonlyArray<Service>, name: string, body: () => void) => {
  const missing = services.filter((s) => !available[s])
  if (missing.length === 0) return describe(name, body)
  const why = missing.map((s) => `${s} at ${urls[s]}: ${problems[s]}`).join("; ")
  // a unit file (./unitGuard.ts refused the probe's socket) can never reach a service: misnamed, so never a skip
  if ((globalThis as { unitGuard?: true }).unitGuard === true) {
    return describe(name, () => {
      it(`needs ${missing.join(" and ")}: this file runs as a unit test; name it *.int.test.ts`, () => {
        throw new Error(`a service-gated suite in a unit test file: rename it *.int.test.ts (${why})`)
      })
    })
  }
  if (inCI) {
    return describe(name, () => {
      it(`needs ${missing.join(" and ")} (CI=true: a missing service fails the run)`, () => {
        throw new Error(`not reachable: ${why} (set DATABASE_URL / REDIS_URL)`)
      })
    })
  }
  console.warn(`${name}: skipped — ${why} (see README, "Services")`)
  return describe.skip(name, body)
}

export const describePg = (name: string, body: () => void) => describeWith(["postgres"], name, body)
export const describeRedis = (name: string, body: () => void) => describeWith(["redis"], name, body)
