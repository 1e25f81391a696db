/**
 * Schedules of retry delays: plain exponential backoff and the three jittered variants from
 * Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015).
 *
 * Every schedule recurs forever (stop it with `Retry.retry`'s `maxAttempts` or `Schedule.upTo`), outputs
 * the delay it chose, and waits exactly that long, so it also works with `Effect.retry`/`Effect.repeat`.
 * With `n = 0` before the first retry, `c(n) = min(cap, base * 2^n)`, and `r` one draw of `Random.next`:
 *
 * | schedule             | delay n                                          |
 * |----------------------|--------------------------------------------------|
 * | `exponential`        | `c(n)` (no randomness)                           |
 * | `fullJitter`         | `r * c(n)`                                       |
 * | `equalJitter`        | `c(n)/2 + r * c(n)/2`                            |
 * | `decorrelatedJitter` | `s(n) = min(cap, base + r * (3*s(n-1) - base))`, `s(-1) = base` |
 *
 * Delays are milliseconds and may be fractional. Randomness comes from Effect's `Random` service, so
 * `Effect.withRandom(Random.fixed([...]))` or a seeded `Random.make(seed)` makes them reproducible.
 *
 * @since 0.1.0
 */
import type { Duration, Schedule } from "effect"
import * as internal from "./internal/backoff.js"

/**
 * `base` is the first delay's ceiling, `cap` the largest delay. Both must be finite, non-negative
 * and `cap >= base`; anything else throws `IllegalArgumentException` when the schedule is built.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly base: Duration.DurationInput
  readonly cap: Duration.DurationInput
}

/**
 * `min(cap, base * 2^n)` — no jitter. Clients that fail together retry together; prefer a jittered
 * schedule for anything shared.
 *
 * @since 0.1.0
 * @category constructors
 */
export const exponential: (options: Options) => Schedule.Schedule<Duration.Duration> = internal.exponential

/**
 * "Full jitter": uniform in `[0, c(n))`. The least total work under contention in Brooker's simulation.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, Retry } from "effect-resilience"
 *
 * declare const call: Effect.Effect<string, Error>
 *
 * const schedule = Backoff.fullJitter({ base: "100 millis", cap: "5 seconds" })
 * const program = Effect.retry(call, { schedule, times: 3 })
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fullJitter: (options: Options) => Schedule.Schedule<Duration.Duration> = internal.fullJitter

/**
 * "Equal jitter": half of `c(n)` plus a uniform draw over the other half. Never retries immediately.
 *
 * @since 0.1.0
 * @category constructors
 */
export const equalJitter: (options: Options) => Schedule.Schedule<Duration.Duration> = internal.equalJitter

/**
 * "Decorrelated jitter": each delay is drawn between `base` and three times the previous delay, capped:
 * `min(cap, base + r * (3 * previous - base))`, starting from `previous = base`. Always in `[base, cap]`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const decorrelatedJitter: (options: Options) => Schedule.Schedule<Duration.Duration> =
  internal.decorrelatedJitter
