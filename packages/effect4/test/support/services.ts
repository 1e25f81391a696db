/**
 * The machine's services for integration tests: Redis (`REDIS_URL`, default `redis://127.0.0.1:6379`), probed once
 * per test file with a real `PING`. Without it its tests are skipped locally (with a note) but fail in CI
 * (`CI=true`). The root's test/support/services.ts does the same for the Effect 3 edition (and PostgreSQL).
 */
import { describe, it } from "@effect/vitest"
import { Redis } from "ioredis"

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

/** Why Redis cannot be used, or `undefined` when it answered. */
const probeRedis = async (): Promise<string | undefined> => {
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

const problem = await probeRedis()
const inCI = process.env.CI === "true" || process.env.CI === "1"

/** Registers `body` when Redis answers; otherwise skips it locally and fails it in CI. */
export const describeRedis = (name: string, body: () => void) => {
  if (problem === undefined) return describe(name, body)
  const why = `redis at ${REDIS_URL}: ${problem}`
  if (inCI) {
    return describe(name, () => {
      it("needs redis (CI=true: a missing service fails the run)", () => {
        throw new Error(`not reachable: ${why} (set REDIS_URL)`)
      })
    })
  }
  console.warn(`${name}: skipped — ${why}`)
  return describe.skip(name, body)
}
