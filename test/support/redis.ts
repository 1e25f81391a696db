/**
 * The Redis the integration tests use: `REDIS_URL`, default `redis://127.0.0.1:6379`. Without a
 * reachable Redis the Redis tests are skipped locally (with a note) but fail in CI (`CI=true`).
 */
import { describe, it } from "@effect/vitest"
import { Redis } from "ioredis"
import { createServer } from "node:net"

export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

const probe = async (): Promise<boolean> => {
  const client = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 1000, maxRetriesPerRequest: 0 })
  client.on("error", () => {})
  try {
    await client.connect()
    return (await client.ping()) === "PONG"
  } catch {
    return false
  } finally {
    client.disconnect()
  }
}

export const redisAvailable = await probe()

/** A key prefix no other test run (or parallel test file) uses. */
export const uniquePrefix = (what: string) => `test:${what}:${process.pid}:${Date.now().toString(36)}:`

/** Registers `body` when Redis is reachable; otherwise skips it locally and fails it in CI. */
export const describeRedis = (name: string, body: () => void) => {
  if (redisAvailable) return describe(name, body)
  if (process.env.CI === "true" || process.env.CI === "1") {
    return describe(name, () => {
      it(`needs Redis at ${REDIS_URL} (CI=true: a missing service fails the run)`, () => {
        throw new Error(`Redis is not reachable at ${REDIS_URL}`)
      })
    })
  }
  console.warn(`[redis] ${name}: skipped — no Redis at ${REDIS_URL} (set REDIS_URL, or start redis-server)`)
  return describe.skip(name, body)
}

/** A TCP port nothing listens on: bound once by the OS, then closed. */
export const closedPort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 1
      server.close(() => resolve(port))
    })
  })

/** Deletes every key under `prefix` (SCAN, never KEYS). */
export const deleteKeys = async (prefix: string): Promise<void> => {
  const client = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
  client.on("error", () => {})
  try {
    let cursor = "0"
    do {
      const [next, keys] = await client.scan(cursor, "MATCH", `${prefix}*`, "COUNT", 1000)
      cursor = next
      if (keys.length > 0) await client.unlink(...keys)
    } while (cursor !== "0")
  } finally {
    client.disconnect()
  }
}
