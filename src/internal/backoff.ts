import { Duration, Effect, Random, Schedule, ScheduleDecision, ScheduleInterval } from "effect"
import * as validate from "./validate.js"

export interface Bounds {
  readonly base: number
  readonly cap: number
}

export const bounds = (name: string, options: {
  readonly base: Duration.DurationInput
  readonly cap: Duration.DurationInput
}): Bounds => {
  const base = validate.millis(`Backoff.${name} base`, options.base, { finite: true })
  const cap = validate.millis(`Backoff.${name} cap`, options.cap, { finite: true })
  if (cap < base) validate.invalid(`Backoff.${name}: cap (${cap} ms) must not be below base (${base} ms)`)
  return { base, cap }
}

/** `c(n) = min(cap, base * 2^n)`, safe for any n (2^n overflows to Infinity, which the cap absorbs). */
export const ceiling = ({ base, cap }: Bounds, n: number): number => base === 0 ? 0 : Math.min(cap, base * 2 ** n)

/**
 * A schedule that recurs forever. Its state is `(n, previous delay)`; `next` turns it and one draw of
 * `Random.next` (when `random` is set) into the delay in milliseconds. The output is that delay and the
 * decision waits exactly that long, so the schedule also works with `Effect.retry` and `Effect.repeat`.
 */
export const make = (
  initialPrevious: number,
  random: boolean,
  next: (n: number, previous: number, r: number) => number
): Schedule.Schedule<Duration.Duration> =>
  Schedule.makeWithState<readonly [number, number], unknown, Duration.Duration>(
    [0, initialPrevious],
    (now, _input, [n, previous]) => {
      const step = (r: number) => {
        const delay = next(n, previous, r)
        return [
          [n + 1, delay] as const,
          Duration.millis(delay),
          ScheduleDecision.continueWith(ScheduleInterval.after(now + delay))
        ] as const
      }
      return random ? Effect.map(Random.next, step) : Effect.sync(() => step(0))
    }
  )

export const exponential = (
  options: { readonly base: Duration.DurationInput; readonly cap: Duration.DurationInput }
): Schedule.Schedule<Duration.Duration> => {
  const b = bounds("exponential", options)
  return make(b.base, false, (n) => ceiling(b, n))
}

export const fullJitter = (
  options: { readonly base: Duration.DurationInput; readonly cap: Duration.DurationInput }
): Schedule.Schedule<Duration.Duration> => {
  const b = bounds("fullJitter", options)
  return make(b.base, true, (n, _previous, r) => r * ceiling(b, n))
}

export const equalJitter = (
  options: { readonly base: Duration.DurationInput; readonly cap: Duration.DurationInput }
): Schedule.Schedule<Duration.Duration> => {
  const b = bounds("equalJitter", options)
  return make(b.base, true, (n, _previous, r) => {
    const half = ceiling(b, n) / 2
    return half + r * half
  })
}

export const decorrelatedJitter = (
  options: { readonly base: Duration.DurationInput; readonly cap: Duration.DurationInput }
): Schedule.Schedule<Duration.Duration> => {
  const b = bounds("decorrelatedJitter", options)
  return make(b.base, true, (_n, previous, r) => Math.min(b.cap, b.base + r * (3 * previous - b.base)))
}
