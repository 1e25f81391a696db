/**
 * The deadline of every Redis call (`src/internal/redis/request.ts`, reached through the adapter): calls share one
 * interval timer per timeout instead of a timer each. These are real-time bounds on network I/O, so the test waits
 * in real time, on promises that never settle (no socket): a call that gets no reply fails with `RedisTimeout`,
 * never sooner than its timeout; a call that got its reply is not failed later; an interrupted call leaves nothing
 * behind that breaks the next ones.
 */
import { failureOf, fork, redisRequest as request, redisRequestOr as requestOr, RedisTimeout } from "#edition"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber } from "effect"

const never = () => new Promise<unknown>(() => {})
const identity = <A>(a: A) => a

describe("Redis request deadlines", () => {
  it.live("a call without a reply times out, not before its timeout", () =>
    Effect.gen(function*() {
      const started = Date.now()
      const results = yield* Effect.all(
        [30, 30, 60].map((ms) => Effect.exit(request(never, undefined, ms, identity, identity))),
        { concurrency: "unbounded" }
      )
      const elapsed = Date.now() - started + 1 // Date.now() truncates: allow the millisecond it may lose
      const errors = results.map(failureOf)
      for (const e of errors) expect(e).toBeInstanceOf(RedisTimeout)
      expect(errors.map((e) => (e as RedisTimeout).millis)).toEqual([30, 30, 60])
      expect(elapsed).toBeGreaterThanOrEqual(60)
    }))

  it.live("a reply settles the call once: the deadline does not fail it later", () =>
    Effect.gen(function*() {
      const values = yield* Effect.all(
        Array.from({ length: 50 }, (_, i) =>
          request(() => Promise.resolve(i), undefined, 20, (r) => Number(r) * 2, identity)),
        { concurrency: "unbounded" }
      )
      expect(values).toEqual(Array.from({ length: 50 }, (_, i) =>
        i * 2))
      // past every deadline, and a call made now still answers
      yield* Effect.sleep(Duration.millis(60))
      expect(yield* request(() => Promise.resolve("ok"), undefined, 20, identity, identity)).toBe("ok")
    }))

  it.live("errors and decode failures go through onError; a retry answers once", () =>
    Effect.gen(function*() {
      const recovered = yield* requestOr(
        () => Promise.reject(new Error("down")),
        undefined,
        1000,
        identity,
        (cause) => Effect.succeed(`fallback: ${(cause as Error).message}`)
      )
      expect(recovered).toBe("fallback: down")
      const rejected = yield* Effect.exit(request(
        () => Promise.reject(new Error("down")),
        undefined,
        1000,
        identity,
        (cause) => `failed: ${(cause as Error).message}`
      ))
      expect(failureOf(rejected)).toBe("failed: down")
      const badReply = yield* Effect.exit(request(() => Promise.resolve("x"), undefined, 1000, () => {
        throw new Error("bad reply")
      }, (cause) => (cause as Error).message))
      expect(failureOf(badReply)).toBe("bad reply")
      const retried = yield* request(
        () => Promise.reject(new Error("NOSCRIPT")),
        (error) => (error as Error).message === "NOSCRIPT" ? Promise.resolve("again") : undefined,
        1000,
        identity,
        identity
      )
      expect(retried).toBe("again")
      // a retry that declines (undefined) fails with the first error
      const declined = yield* Effect.exit(request(
        () => Promise.reject(new Error("WRONGTYPE")),
        () => undefined,
        1000,
        identity,
        (cause) => (cause as Error).message
      ))
      expect(failureOf(declined)).toBe("WRONGTYPE")
      const thrown = yield* Effect.exit(request(
        () => {
          throw new Error("sync")
        },
        undefined,
        1000,
        identity,
        (cause) => (cause as Error).message
      ))
      expect(failureOf(thrown)).toBe("sync")
    }))

  it.live("an interrupted call is dropped: its deadline passes without effect, later calls still time out", () =>
    Effect.gen(function*() {
      const fiber = yield* fork(request(never, undefined, 20, identity, identity))
      yield* Effect.sleep(Duration.millis(5))
      yield* Fiber.interrupt(fiber)
      expect((yield* Fiber.await(fiber))._tag).toBe("Failure")
      const late = yield* Effect.exit(request(never, undefined, 20, identity, identity))
      expect(Exit.isFailure(late)).toBe(true)
    }))
})
