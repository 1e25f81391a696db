import { Clock, Duration, Effect } from "effect"
import type { TestClock } from "effect/testing"

/**
 * Waits until `condition` holds, for what real I/O makes true (Redis expiring a key): checks it, then sleeps `every`
 * of real time (also under a TestClock), and fails after `within` of real time. The cap is generous on purpose: a
 * slow, busy machine passes, a hang still fails.
 */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  options: { readonly every?: Duration.Input; readonly within?: Duration.Input } = {}
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const sleep = Effect.sleep(options.every ?? "10 millis")
    const every = Effect.withFiber((fiber) => {
      const clock = fiber.getRef(Clock.Clock) as Partial<TestClock.TestClock>
      return clock.withLive === undefined ? sleep : clock.withLive(sleep)
    })
    const cap = Duration.toMillis(Duration.fromInputUnsafe(options.within ?? "30 seconds"))
    const started = performance.now()
    for (;;) {
      if (yield* condition) return
      if (performance.now() - started > cap) {
        return yield* Effect.fail(new Error(`the condition did not hold within ${cap} ms of real time`))
      }
      yield* every
    }
  })
