import { Clock, Duration, Effect } from "effect"

/**
 * Virtual time moved by hand, for tests that move it thousands of times. `TestClock.adjust` waits for
 * every fiber to suspend (several real timer ticks) before and after waking each sleeper, which is most
 * of such a test's run time. `advance` moves the time and wakes every sleeper that is due; they run when
 * the caller next yields. Provide it with `Effect.withClock(hand.clock)`: forked fibers inherit it.
 *
 * `stepWall` steps the wall clock alone (`currentTimeMillis`), as an NTP step or a resumed VM does: the monotonic
 * reading (`currentTimeNanos`, `process.hrtime` on the live clock) and the sleepers keep real time.
 */
export const handClock = () => {
  let now = 0
  let wallOffset = 0
  const sleepers = new Set<{ readonly at: number; readonly wake: () => void }>()
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => now + wallOffset,
    unsafeCurrentTimeNanos: () => BigInt(now) * BigInt(1_000_000),
    currentTimeMillis: Effect.sync(() => now + wallOffset),
    currentTimeNanos: Effect.sync(() => BigInt(now) * BigInt(1_000_000)),
    sleep: (duration) =>
      Effect.async<void>((resume) => {
        const at = now + Duration.toMillis(duration)
        if (at <= now) return resume(Effect.void)
        const sleeper = { at, wake: () => resume(Effect.void) }
        sleepers.add(sleeper)
        return Effect.sync(() => void sleepers.delete(sleeper))
      })
  }
  const advance = (millis: number) =>
    Effect.sync(() => {
      now += millis
      const due = [...sleepers].filter((s) => s.at <= now).sort((a, b) => a.at - b.at)
      for (const s of due) {
        sleepers.delete(s)
        s.wake()
      }
    })
  /** Steps the wall clock by `millis` (negative: back), and nothing else. */
  const stepWall = (millis: number) => Effect.sync(() => void (wallOffset += millis))
  /** Sets the time back to 0, for a fresh sample of a property (no sleeper may be waiting). */
  const reset = Effect.sync(() => {
    if (sleepers.size > 0) throw new Error("handClock.reset with sleepers waiting")
    now = 0
    wallOffset = 0
  })
  return { clock, advance, stepWall, reset }
}
