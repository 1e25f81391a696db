import * as core from "@effect-resilience/core/backoff"
import { Duration, Effect, Random, Schedule, ScheduleDecision, ScheduleInterval } from "effect"
import * as validate from "./validate.js"

export type Bounds = core.Bounds

/** `c(n) = min(cap, base * 2^n)`: see `core/backoff.ts`. */
export const ceiling: (bounds: Bounds, n: number) => number = core.ceiling

type Options = { readonly base: Duration.DurationInput; readonly cap: Duration.DurationInput }

/** Decodes and checks the options of the schedule `name`; throws `IllegalArgumentException` when they cannot work. */
export const bounds = (name: string, options: Options): Bounds => {
  const base = validate.millis(`Backoff.${name} base`, options.base, { finite: true })
  const cap = validate.millis(`Backoff.${name} cap`, options.cap, { finite: true })
  const problem = core.checkBounds(base, cap)
  if (problem !== undefined) validate.invalid(`Backoff.${name}: ${problem}`)
  return { base, cap }
}

/**
 * A schedule that recurs forever over one of the core formulas. Each step takes one draw of `Random.next`
 * (when `random` is set) and outputs the delay it chose; the decision waits exactly that long, so the
 * schedule also works with `Effect.retry` and `Effect.repeat`.
 */
const make = (bounds: Bounds, formula: core.Formula, random: boolean): Schedule.Schedule<Duration.Duration> =>
  Schedule.makeWithState<core.State, unknown, Duration.Duration>(
    core.initial(bounds),
    (now, _input, state) => {
      const step = (r: number) => {
        const [delay, next] = core.step(formula, bounds, state, r)
        return [
          next,
          Duration.millis(delay),
          ScheduleDecision.continueWith(ScheduleInterval.after(now + delay))
        ] as const
      }
      return random ? Effect.map(Random.next, step) : Effect.sync(() => step(0))
    }
  )

export const exponential = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("exponential", options), core.formulas.exponential, false)

export const fullJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("fullJitter", options), core.formulas.fullJitter, true)

export const equalJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("equalJitter", options), core.formulas.equalJitter, true)

export const decorrelatedJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("decorrelatedJitter", options), core.formulas.decorrelatedJitter, true)
