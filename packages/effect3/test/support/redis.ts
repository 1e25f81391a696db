/**
 * Redis helpers for the integration tests (`REDIS_URL`, default `redis://127.0.0.1:6379`); the service
 * gating (`describeRedis`) lives in ./services.ts with PostgreSQL's.
 */
import { Effect } from "effect"
import { Redis } from "ioredis"
import { createServer, type Socket } from "node:net"
import { REDIS_URL } from "./services.js"

export { REDIS_URL } from "./services.js"

/** A key prefix no other test run (or parallel test file) uses. */
export const uniquePrefix = (what: string) => `test:${what}:${process.pid}:${Date.now().toString(36)}:`

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

/** Where Redis Cluster hashes a key: the text between the first `{` and the next `}`, if not empty. */
export const hashTag = (key: string): string => {
  const open = key.indexOf("{")
  const close = open === -1 ? -1 : key.indexOf("}", open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

/** A TCP server that accepts connections and never answers: a hung Redis. */
export const blackHole = Effect.acquireRelease(
  Effect.async<{ port: number; close: () => void }>((resume) => {
    const sockets = new Set<Socket>()
    const server = createServer((socket) => {
      sockets.add(socket)
      socket.on("error", () => {})
    })
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      resume(Effect.succeed({
        port: typeof address === "object" && address !== null ? address.port : 0,
        close: () => {
          for (const s of sockets) s.destroy()
          server.close()
        }
      }))
    })
  }),
  (hole) => Effect.sync(() => hole.close())
)
