import { Clock, Duration, Effect } from "effect"
import type { TestClock } from "effect/testing"

/**
 * Effect 4's TestClock does not say who sleeps until when (Effect 3's had `TestClock.sleeps()`). Tests that must
 * wait until a fiber sleeps before they move the clock — a call that sleeps only after a store answered over the
 * network; moved earlier, the clock would make it sleep from the later time — run under `recordingSleeps`: the same
 * TestClock, whose sleeps are counted by the instant they end (and uncounted when they end or are interrupted).
 */
const registries = new WeakMap<Clock.Clock, Map<number, number>>()

/** Runs `effect` with the fiber's TestClock counting its sleeps (for `untilSleeping`). */
export const recordingSleeps = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.withFiber((fiber) => {
    const test = fiber.getRef(Clock.Clock) as TestClock.TestClock
    if (registries.has(test)) return effect
    const sleeping = new Map<number, number>()
    const count = (at: number, delta: number) => {
      const n = (sleeping.get(at) ?? 0) + delta
      if (n === 0) sleeping.delete(at)
      else sleeping.set(at, n)
    }
    // the TestClock's methods are closures: the copy adjusts the same clock, which `TestClock.adjust` finds here
    const clock: TestClock.TestClock = {
      ...test,
      sleep: (duration) =>
        Effect.suspend(() => {
          const at = test.currentTimeMillisUnsafe() + Duration.toMillis(duration)
          count(at, 1)
          return Effect.ensuring(test.sleep(duration), Effect.sync(() => count(at, -1)))
        })
    }
    registries.set(clock, sleeping)
    return Effect.provideService(effect, Clock.Clock, clock)
  })

/** How many fibers sleep until `wakeAt` (TestClock millis), under `recordingSleeps`. */
export const sleepersAt = (wakeAt: number): Effect.Effect<number> =>
  Effect.withFiber((fiber) => {
    const sleeping = registries.get(fiber.getRef(Clock.Clock))
    return sleeping === undefined
      ? Effect.die(new Error("untilSleeping needs the test to run under recordingSleeps"))
      : Effect.succeed(sleeping.get(wakeAt) ?? 0)
  })

/**
 * Waits until at least `n` fibers sleep until `wakeAt`, yielding to I/O between checks and never moving any clock;
 * dies after 30 s of real time.
 */
export const untilSleeping = (wakeAt: number, n = 1): Effect.Effect<void> =>
  Effect.gen(function*() {
    const started = performance.now()
    while ((yield* sleepersAt(wakeAt)) < n) {
      if (performance.now() - started > 30_000) {
        return yield* Effect.die(new Error(`fewer than ${n} fibers started sleeping until ${wakeAt} within 30 s`))
      }
      yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })

/** Forks `effect` and waits until one more fiber sleeps until `wakeAt` than before. */
export const forkUntilSleeping = <A, E, R>(effect: Effect.Effect<A, E, R>, wakeAt: number) =>
  Effect.gen(function*() {
    const before = yield* sleepersAt(wakeAt)
    const fiber = yield* Effect.forkChild(effect)
    yield* untilSleeping(wakeAt, before + 1)
    return fiber
  })
