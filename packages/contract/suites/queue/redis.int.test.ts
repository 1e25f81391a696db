/**
 * `RedisStreamQueue` on one Redis node (`REDIS_URL`): the contract suite (./redisSuite.ts, also run on a
 * Redis Cluster by each edition's test/redisCluster.int.test.ts), and what only a single-node client shows (a server that never
 * answers). Every test uses its own keys; they are deleted at the end.
 */
import { callback, deleteKeys, describeRedis, IoRedis as Redis, REDIS_URL, uniquePrefix } from "#edition"
import { afterAll, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
import { type AddressInfo, createServer, type Socket } from "node:net"
import { redisStreamQueueSuite } from "./redisSuite.js"

const prefix = uniquePrefix("queue")
let streams = 0
const freshStream = () => `${prefix}stream-${++streams}`

afterAll(async () => {
  await deleteKeys(prefix).catch(() => {})
})

describeRedis("RedisStreamQueue", () => {
  redisStreamQueueSuite("redis", {
    connect: Effect.acquireRelease(
      Effect.sync(() => new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })),
      (redis) => Effect.promise(() => redis.quit())
    ),
    freshStream,
    soakMessages: Number(process.env.SOAK_N ?? 10_000)
  })

  it.live("every call has a deadline: a server that never answers fails the call with QueueError", () =>
    Effect.gen(function*() {
      // accepts connections and never replies, so only the call's own timeout can end the wait
      const sockets: Array<Socket> = []
      const server = createServer((socket) => void sockets.push(socket))
      const port = yield* callback<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as AddressInfo).port)))
      })
      yield* Effect.addFinalizer(() =>
        callback<void>((resume) => {
          for (const socket of sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
      )
      const redis = yield* Effect.acquireRelease(
        Effect.sync(() => new Redis(`redis://127.0.0.1:${port}`, { maxRetriesPerRequest: 1 })),
        (r) => Effect.sync(() => r.disconnect())
      )
      redis.on("error", () => {})
      const error = yield* Effect.flip(
        RedisStreamQueue.make({ redis, stream: freshStream(), visibilityTimeout: "1 second", timeout: "200 millis" })
      )
      expect(error._tag).toBe("QueueError")
      expect(error.operation).toBe("create group")
      expect(String(error.cause)).toMatch(/did not answer within 200 ms/)
      expect(() => RedisStreamQueue.make({ redis, stream: "s", visibilityTimeout: "1 second", timeout: 0 })).toThrow(
        /timeout must be longer than zero/
      )
    }).pipe(Effect.scoped))
})
