import { Clock, Duration, Effect } from "effect"

/**
 * Virtual time moved by hand, for tests that move it thousands of times. `TestClock.adjust` waits for every fiber
 * to suspend before and after waking each sleeper, which is most of such a test's run time. `advance` moves the
 * time and wakes every sleeper that is due; they continue from the scheduler (`yieldNow`: Effect 4 would otherwise
 * run them on the caller's stack). Provide it as the `Clock.Clock`: forked fibers share it.
 *
 * `stepWall` steps the wall clock alone (`currentTimeMillis`, `currentTimeNanos`), as an NTP step or a resumed VM
 * does: the monotonic reading (`monotonicTimeNanos`, `process.hrtime` on the live clock) and the sleepers keep
 * real time.
 */
export const handClock = () => {
  let now = 0
  let wallOffset = 0
  const sleepers = new Set<{ readonly at: number; readonly wake: () => void }>()
  const nanos = () => BigInt(now) * BigInt(1_000_000)
  const wallNanos = () => BigInt(now + wallOffset) * BigInt(1_000_000)
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: () => now + wallOffset,
    currentTimeMillis: Effect.sync(() => now + wallOffset),
    currentTimeNanosUnsafe: wallNanos,
    currentTimeNanos: Effect.sync(wallNanos),
    monotonicTimeNanosUnsafe: nanos,
    monotonicTimeNanos: Effect.sync(nanos),
    sleep: (duration) =>
      Effect.callback<void>((resume) => {
        const at = now + Duration.toMillis(duration)
        if (at <= now) return resume(Effect.void)
        const sleeper = { at, wake: () => resume(Effect.yieldNow) }
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
