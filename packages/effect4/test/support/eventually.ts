import { Clock, Duration, Effect } from "effect"
import type { TestClock } from "effect/testing"

/** Sleeps `duration` of real time, under `TestClock` too (Effect 4's `TestClock.withLive` needs a `TestClock`). */
export const sleepLive = (duration: Duration.Input): Effect.Effect<void> =>
  Clock.clockWith((clock) =>
    "withLive" in clock ? (clock as TestClock.TestClock).withLive(Effect.sleep(duration)) : Effect.sleep(duration)
  )

/**
 * Waits until `condition` holds, for what real I/O makes true (a statement queued behind a lock, Redis
 * expiring a key): checks it, then sleeps `every` of real time (also under TestClock), and fails after
 * `within` of real time. The cap is generous on purpose: a slow, busy machine passes, a hang still fails.
 */
export const eventually = <E, R>(
  condition: Effect.Effect<boolean, E, R>,
  options: { readonly every?: Duration.Input; readonly within?: Duration.Input } = {}
): Effect.Effect<void, E | Error, R> =>
  Effect.gen(function*() {
    const every = sleepLive(options.every ?? "10 millis")
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
