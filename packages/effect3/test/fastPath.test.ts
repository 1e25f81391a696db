import { describe, expect, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Fiber, FiberRef, Option, Ref, TestClock } from "effect"
import { readFileSync } from "node:fs"
import { Deadline } from "../src/index.js"
import * as fastPath from "../src/internal/fastPath.js"

/** The installed Effect, as `major.minor`. */
const effectVersion = (): string => {
  const { version } = JSON.parse(readFileSync("node_modules/effect/package.json", "utf8")) as { version: string }
  return version.split(".").slice(0, 2).join(".")
}

/** Runs `effect` with `implementation` in use, restoring the probe's choice afterwards. */
const using = <A, E, R>(implementation: fastPath.Implementation, effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => fastPath.unsafeUse(implementation)),
    () => effect,
    () => Effect.sync(() => fastPath.unsafeUse(undefined))
  )

const ref = FiberRef.unsafeMake(0)

class Name extends Context.Tag("test/Name")<Name, string>() {}
class Other extends Context.Tag("test/Other")<Other, number>() {}

/**
 * What a caller can observe of Deadline's timed work, in one plain object: values, errors, the deadline seen
 * inside, FiberRef isolation, finalizers and interruption. Both implementations must produce the same.
 */
const observe = Effect.gen(function*() {
  const finalized = yield* Ref.make<Array<string>>([])
  const note = (what: string) => Ref.update(finalized, (xs) => [...xs, what])
  const succeeded = yield* Effect.exit(Deadline.timeout(Effect.succeed(1), "1 second"))
  const failed = yield* Effect.exit(Deadline.timeout(Effect.fail("boom"), "1 second"))
  const died = yield* Effect.exit(Deadline.timeout(Effect.die("defect"), "1 second"))
  const seen = yield* Deadline.within(
    Effect.map(Deadline.remaining, Option.map((d) => d.toJSON())),
    "2 seconds"
  )
  const isolated = yield* Deadline.timeout(FiberRef.set(ref, 7), "1 second").pipe(Effect.zipRight(FiberRef.get(ref)))
  const inherited = yield* Deadline.timeout(FiberRef.get(ref), "1 second").pipe(Effect.locally(ref, 3))
  // work that waits: the timer ends it, its finalizer runs before the failure is seen
  const slow = yield* Effect.fork(Effect.exit(Deadline.timeout(
    Effect.onInterrupt(Effect.sleep("10 seconds"), () => note("slow")),
    "1 second"
  )))
  yield* TestClock.adjust("1 second")
  const timedOut = yield* Fiber.join(slow)
  const late = yield* Effect.fork(Effect.exit(Deadline.within(
    Effect.onInterrupt(Effect.sleep("10 seconds"), () => note("late")),
    "500 millis"
  )))
  yield* TestClock.adjust("500 millis")
  const exceeded = yield* Fiber.join(late)
  // interrupting the caller interrupts the work
  const caller = yield* Effect.fork(Deadline.timeout(
    Effect.onInterrupt(Effect.never, () => note("caller")),
    "1 minute"
  ))
  yield* TestClock.adjust("1 millis")
  const interrupted = yield* Fiber.interrupt(caller)
  const nested = yield* Deadline.within(
    Deadline.timeout(Deadline.timeout(Effect.succeed("deep"), "1 second"), "2 seconds"),
    "3 seconds"
  )
  return {
    succeeded,
    failed,
    died,
    seen,
    isolated,
    inherited,
    timedOut,
    exceeded,
    interrupted: Exit.isInterrupted(interrupted),
    nested,
    finalized: yield* Ref.get(finalized)
  }
})

describe("fastPath", () => {
  it("is active on the Effect versions it was checked on", () => {
    const version = effectVersion()
    // outside these versions, measure `npm run bench` with and without the fast path (fastPath.unsafeUse),
    // run this file, and add the version to `checkedOn` — or drop the trick if it no longer pays
    expect(fastPath.checkedOn, `effect ${version} was not checked`).toContain(version)
    expect(fastPath.isActive()).toBe(true)
  })

  it("starts detached work on the caller's stack (fast) or on the scheduler (fallback)", () => {
    const poll = (implementation: fastPath.Implementation) =>
      Effect.runSync(Effect.map(implementation.forkDetached(Effect.succeed(1)), (fiber) => fiber.unsafePoll()))
    expect(poll(fastPath.fast)).toStrictEqual(Exit.succeed(1))
    expect(poll(fastPath.fallback)).toBeNull()
  })

  it.effect("forkDetachedWith: the fiber's context is the caller's with the service; the caller's stays as it was", () =>
    Effect.gen(function*() {
      for (const implementation of [fastPath.fast, fastPath.fallback]) {
        const read = Effect.all([Name, Other])
        const fiber = yield* implementation.forkDetachedWith(read, Name, "child")
        expect(yield* Fiber.await(fiber)).toStrictEqual(Exit.succeed(["child", 7]))
        expect(yield* Name).toBe("caller")
      }
    }).pipe(Effect.provideService(Name, "caller"), Effect.provideService(Other, 7)))

  it.effect("the fallback gives the same results as the fast path", () =>
    Effect.gen(function*() {
      const fast = yield* using(fastPath.fast, observe)
      const fallback = yield* using(fastPath.fallback, observe)
      expect(fast.succeeded).toStrictEqual(Exit.succeed(1))
      expect(fast.timedOut).toStrictEqual(Exit.fail(new Deadline.AttemptTimeout({ timeout: Duration.seconds(1) })))
      expect(fast.exceeded).toStrictEqual(Exit.fail(new Deadline.DeadlineExceeded()))
      expect(fast.isolated).toBe(0)
      expect(fast.inherited).toBe(3)
      expect(fast.seen).toStrictEqual(Option.some({ _id: "Duration", _tag: "Millis", millis: 2000 }))
      expect(fast.finalized).toEqual(["slow", "late", "caller"])
      expect(fast.interrupted).toBe(true)
      expect(fast.nested).toBe("deep")
      expect(fallback).toStrictEqual(fast)
    }))
})
