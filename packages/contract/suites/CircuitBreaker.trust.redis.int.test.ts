import {
  channelOf,
  closedPort,
  counterValue,
  describeRedis,
  eventually,
  itRecording,
  keysOf,
  redisServer,
  TestClock,
  untilSleeping
} from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Clock, Effect, Exit } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
import { Redis, type RedisOptions } from "ioredis"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { isCircuitOpen } from "./breakerRedisSuite.js"

// What a fleet-breaker replica believes must be what Redis's state is, as the script replies it: whatever the
// replica believed before (Redis restored from an older snapshot: its epoch goes backwards) and whatever is said
// on the channel (anyone allowed to publish there can say anything). Each test runs a redis-server of its own,
// which it kills and restarts, or gives a user that may only publish and subscribe.

const prefix = "cbtrust:"
const boom = Effect.fail("boom")
const ok = Effect.succeed("ok")

let counter = 0
const fresh = (what: string) => `${what}-${process.pid}-${Date.now().toString(36)}-${++counter}`

/** A redis-server of this test's own, killed when the scope closes; `restart` kills it and starts it again. */
const ownRedis = (dir?: string) =>
  Effect.gen(function*() {
    const port = yield* Effect.promise(closedPort)
    const start = Effect.promise(() => redisServer.startRedisServer(port, dir === undefined ? {} : { dir }))
    let server = yield* start
    yield* Effect.addFinalizer(() => Effect.promise(() => redisServer.kill(server)))
    const url = `redis://127.0.0.1:${port}`
    const admin = yield* client(url)
    const restart = Effect.gen(function*() {
      yield* Effect.promise(() => redisServer.kill(server))
      server = yield* start
    })
    return { port, url, admin, restart }
  })

const client = (url: string, options: RedisOptions = {}) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const c = new Redis(url, options)
      c.on("error", () => {})
      return c
    }),
    (c) => Effect.sync(() => c.disconnect())
  )

/**
 * A client for one replica that counts the scripts it sends and the channel messages its subscriber (the
 * breaker's `duplicate` of it) receives — counted just before the breaker sees each.
 */
const replicaClient = (url: string) =>
  Effect.gen(function*() {
    const c = yield* client(url)
    const counts = { scripts: 0, heard: 0 }
    const evalsha = c.evalsha.bind(c)
    c.evalsha = ((...args: Parameters<typeof c.evalsha>) => {
      counts.scripts++
      return evalsha(...args)
    }) as typeof c.evalsha
    const duplicate = c.duplicate.bind(c)
    c.duplicate = ((...args: Parameters<typeof c.duplicate>) => {
      const subscriber = duplicate(...args)
      subscriber.on("message", () => counts.heard++)
      return subscriber
    }) as typeof c.duplicate
    return { client: c, counts }
  })

/** Moves TestClock by one flush interval and waits until `n` flush fibers sleep until the next one. */
const flushOnce = (n = 1) =>
  Effect.gen(function*() {
    yield* TestClock.adjust("100 millis")
    yield* untilSleeping((yield* Clock.currentTimeMillis) + 100, n)
  })

/**
 * A user of the test's Redis that may only publish and subscribe on the breakers' channels (ACL
 * `&cbtrust:* +publish +subscribe`): NOPERM on every key. It listens first, to learn what a real message
 * looks like (it carries the incarnation).
 */
const forger = (url: string, admin: Redis) =>
  Effect.gen(function*() {
    yield* Effect.promise(() =>
      admin.call("ACL", "SETUSER", "forger", "on", ">secret", "resetchannels", `&${prefix}*`, "+publish", "+subscribe")
    )
    const options = { username: "forger", password: "secret", enableReadyCheck: false }
    const publisher = yield* client(url, options)
    const listener = yield* client(url, options)
    const heard: Array<string> = []
    listener.on("message", (_channel: string, message: string) => heard.push(message))
    return { publisher, listener, heard }
  })

describeRedis("CircuitBreaker/Redis trusts Redis's state, not the channel", () => {
  describe("Redis restarted from an older snapshot (same incarnation, an earlier epoch)", () => {
    it.live(
      "the replica converges to the restored state: closed, though it knew the fleet open",
      () =>
        Effect.gen(function*() {
          const dir = mkdtempSync(join(tmpdir(), "cb-snapshot-"))
          yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
          const redis = yield* ownRedis(dir)
          const name = fresh("restored")
          const trip = CircuitBreaker.consecutive(1)
          const breaker = yield* CircuitBreakerRedis.make({
            trip,
            openFor: "1 minute",
            name,
            prefix,
            // commands wait for the reconnect instead of failing: the replica never falls back, so only the
            // replies can tell it what happened
            redis: { url: redis.url, redisOptions: { maxRetriesPerRequest: null } },
            flushInterval: "100 millis",
            timeout: "20 seconds"
          })
          const state = keysOf(prefix, name, trip).state
          // the state exists (the breaker's first flush made it), closed: an operator's snapshot
          expect(yield* Effect.promise(() => redis.admin.hmget(state, "state", "epoch"))).toEqual(["closed", "0"])
          yield* Effect.promise(() => redis.admin.save())
          yield* Effect.exit(breaker.protect(boom))
          yield* eventually(Effect.map(breaker.state, (s) => s === "open"))
          expect(yield* Effect.promise(() => redis.admin.hmget(state, "state", "epoch"))).toEqual(["open", "1"])

          // SIGKILL, and back from the snapshot: closed at epoch 0, the incarnation the replica knows
          yield* redis.restart
          expect(yield* Effect.promise(() => redis.admin.hmget(state, "state", "epoch"))).toEqual(["closed", "0"])
          const restarted = performance.now()
          let refused = 0
          yield* eventually(
            Effect.map(breaker.protect(ok).pipe(Effect.exit), (exit) => {
              if (Exit.isSuccess(exit)) return true
              if (isCircuitOpen(exit)) refused++
              return false
            }),
            { every: "50 millis", within: "15 seconds" }
          )
          console.log(
            `restored snapshot: the replica ran calls again ${Math.round(performance.now() - restarted)} ms after ` +
              `Redis was back, ${refused} calls refused meanwhile (redis-server: ${redisServer.REDIS_SERVER})`
          )
          expect(yield* breaker.state).toBe("closed")
          expect(yield* counterValue(CircuitBreakerRedis.fleetFallbacksTotal, { breaker: name })).toBe(0)
          // and it shares the fleet's state again: its next failure opens the restored state
          yield* Effect.exit(breaker.protect(boom))
          yield* eventually(Effect.map(breaker.state, (s) => s === "open"))
          expect(yield* Effect.promise(() => redis.admin.hget(state, "state"))).toBe("open")
        }).pipe(Effect.scoped),
      60_000
    )
  })

  describe("a client that may only publish on the channel", () => {
    itRecording(
      "a forged message (the heard incarnation, a far-future epoch) holds no replica open; reset works",
      () =>
        Effect.gen(function*() {
          const redis = yield* ownRedis()
          const { heard, listener, publisher } = yield* forger(redis.url, redis.admin)
          const name = fresh("forged")
          const trip = CircuitBreaker.consecutive(1)
          const [ra, rb] = [yield* replicaClient(redis.url), yield* replicaClient(redis.url)]
          const options = (c: Redis): CircuitBreakerRedis.Options => ({
            trip,
            openFor: "1 minute",
            name,
            prefix,
            redis: { client: c }
          })
          const a = yield* CircuitBreakerRedis.make(options(ra.client))
          const b = yield* CircuitBreakerRedis.make(options(rb.client))
          const keys = keysOf(prefix, name, trip)
          const channel = channelOf(ra.client, keys.channel)
          // the forger may touch no key
          const denied = yield* Effect.promise(() => publisher.hgetall(keys.state).then(() => "", (e) => String(e)))
          expect(denied).toMatch(/NOPERM/)
          yield* Effect.promise(() => listener.subscribe(channel))

          // a real transition, which the forger hears
          yield* Effect.exit(a.protect(boom))
          yield* flushOnce(2)
          yield* eventually(Effect.sync(() => heard.length >= 1))
          yield* eventually(Effect.map(b.state, (s) => s === "open"))
          yield* a.reset
          yield* eventually(Effect.map(b.state, (s) => s === "closed"))

          // the forgery: what it heard, but open, isolated, far ahead of Redis's epoch and for ever
          const fields = heard[0]!.split("|")
          fields[1] = "999999999"
          fields[2] = "open"
          fields[3] = String(Date.now() + 1e12)
          fields[4] = "1"
          const before = [ra.counts.heard, rb.counts.heard]
          expect(yield* Effect.promise(() => publisher.publish(channel, fields.join("|")))).toBe(3)
          yield* eventually(Effect.sync(() => ra.counts.heard > before[0]! && rb.counts.heard > before[1]!))
          // both heard it; Redis holds closed, and so do they
          for (const r of [a, b]) {
            expect(yield* r.state).toBe("closed")
            expect(yield* r.protect(ok)).toBe("ok")
          }
          expect(yield* Effect.promise(() => redis.admin.hget(keys.state, "state"))).toBe("closed")

          // the fleet still works both ways: a real opening reaches both, and reset closes both
          yield* Effect.exit(b.protect(boom))
          yield* flushOnce(2)
          for (const r of [a, b]) yield* eventually(Effect.map(r.state, (s) => s === "open"))
          yield* a.reset
          for (const r of [a, b]) yield* eventually(Effect.map(r.state, (s) => s === "closed"))
          expect(yield* b.protect(ok)).toBe("ok")
        }),
      60_000
    )

    itRecording(
      "a flood of messages costs a bounded number of scripts: a burst, then one per flushInterval",
      () =>
        Effect.gen(function*() {
          const redis = yield* ownRedis()
          const { heard, listener, publisher } = yield* forger(redis.url, redis.admin)
          const name = fresh("flood")
          const trip = CircuitBreaker.consecutive(1)
          const r = yield* replicaClient(redis.url)
          const breaker = yield* CircuitBreakerRedis.make({
            trip,
            openFor: "1 minute",
            name,
            prefix,
            redis: { client: r.client }
          })
          const channel = channelOf(r.client, keysOf(prefix, name, trip).channel)
          yield* Effect.promise(() => listener.subscribe(channel))
          yield* breaker.isolate
          yield* eventually(Effect.sync(() => heard.length >= 1))
          yield* breaker.reset
          const template = heard[0]!.split("|")
          /** Message `i`: what the forger heard, with another epoch, half of them of another incarnation. */
          const message = (i: number) =>
            [i % 2 === 0 ? template[0] : `elsewhere.${i}`, String(1000 + i), ...template.slice(2)].join("|")

          const batches = 50
          const size = 400
          const stepMillis = 20
          const scriptsBefore = r.counts.scripts
          const heardBefore = r.counts.heard
          const t0 = yield* Clock.currentTimeMillis
          for (let batch = 0; batch < batches; batch++) {
            const pipeline = publisher.pipeline()
            for (let i = 0; i < size; i++) pipeline.publish(channel, message(batch * size + i))
            yield* Effect.promise(() => pipeline.exec())
            yield* eventually(Effect.sync(() => r.counts.heard >= heardBefore + (batch + 1) * size))
            yield* TestClock.adjust(`${stepMillis} millis`)
          }
          // every message heard; the flushes they prompted and the periodic ones answered
          const elapsed = (yield* Clock.currentTimeMillis) - t0
          yield* untilSleeping(t0 + Math.ceil(elapsed / 100) * 100 + 100)
          const scripts = r.counts.scripts - scriptsBefore
          console.log(`message flood: ${batches * size} messages over ${elapsed} ms of Clock, ${scripts} script calls`)
          // periodic flushes: elapsed / 100; prompted: a burst of 3, then one per 100 ms
          expect(scripts).toBeLessThanOrEqual(3 + 2 * (elapsed / 100) + 1)
          expect(yield* breaker.state).toBe("closed")
          expect(yield* breaker.protect(ok)).toBe("ok")
        }),
      60_000
    )
  })
})
