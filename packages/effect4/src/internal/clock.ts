import { Clock, Effect, type Fiber } from "effect"

/**
 * Which reading of Effect's `Clock` each kind of time takes.
 *
 * - **Durations that live in one process** — leases, TTLs and buckets of the memory stores, windows, timers,
 *   timeouts and deadlines — are measured on the monotonic reading, {@link monotonicMillis}: a step of the wall
 *   clock (an NTP step, a VM resumed) moves none of them. On Effect 4 it is `Clock.monotonicTimeNanos`, which the
 *   live clock takes from `process.hrtime` (an arbitrary origin) and `TestClock` moves with `adjust` and with a
 *   `setTime` forward (a `setTime` back moves the wall clock alone, as a step back does).
 * - **Instants that leave the process** — written to a shared store, compared with other processes' — and calendar
 *   dates (an HTTP-date) are wall-clock time, `Clock.currentTimeMillis`.
 *
 * The two readings never meet in one subtraction; {@link toMonotonic} and {@link toWall} convert an instant
 * where an API hands out or takes epoch milliseconds (`Deadline`).
 */

const NANOS_PER_MILLI = BigInt(1_000_000)

/** The monotonic reading of `clock`, in whole milliseconds (the resolution of `currentTimeMillis`). */
export const monotonicMillis = (clock: Clock.Clock): number =>
  Number(clock.monotonicTimeNanosUnsafe() / NANOS_PER_MILLI)

/** {@link monotonicMillis} of the clock of `fiber`, with no effect of its own. */
export const monotonicMillisOf = (fiber: Fiber.Fiber<unknown, unknown>): number =>
  monotonicMillis(fiber.getRef(Clock.Clock))

/** {@link monotonicMillis} of the running fiber's clock. */
export const currentMonotonicMillis: Effect.Effect<number> = Effect.withFiber((fiber) =>
  Effect.succeed(monotonicMillisOf(fiber))
)

/** The wall-clock instant `epochMillis` on the monotonic reading of `clock`. */
export const toMonotonic = (clock: Clock.Clock, epochMillis: number): number =>
  monotonicMillis(clock) + (epochMillis - clock.currentTimeMillisUnsafe())

/** The monotonic instant `at` (of {@link monotonicMillis}) as epoch milliseconds of `clock`'s wall clock now. */
export const toWall = (clock: Clock.Clock, at: number): number =>
  clock.currentTimeMillisUnsafe() + (at - monotonicMillis(clock))
