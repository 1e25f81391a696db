import * as core from "@effect-resilience/core/backoff"
import { Duration, Effect, Random, Schedule } from "effect"
import * as validate from "./validate.js"

export type Bounds = core.Bounds

/** `c(n) = min(cap, base * 2^n)`: see `core/backoff.ts`. */
export const ceiling: (bounds: Bounds, n: number) => number = core.ceiling

type Options = { readonly base: Duration.Input; readonly cap: Duration.Input }

/** Decodes and checks the options of the schedule `name`; throws `IllegalArgumentError` when they cannot work. */
export const bounds = (name: string, options: Options): Bounds => {
  const base = validate.millis(`Backoff.${name} base`, options.base, { finite: true })
  const cap = validate.millis(`Backoff.${name} cap`, options.cap, { finite: true })
  const problem = core.checkBounds(base, cap)
  if (problem !== undefined) validate.invalid(`Backoff.${name}: ${problem}`)
  return { base, cap }
}

/**
 * A schedule that recurs forever over one of the core formulas. Effect 4 schedules keep their state in the
 * closure of the step function that each run of the schedule builds (`Schedule.toStep` "starts over"), so two
 * retries driven by one schedule value never share a count. Each step takes one draw of `Random.next` (when
 * `random` is set) and outputs the delay it chose, which is also the delay it waits.
 */
const make = (bounds: Bounds, formula: core.Formula, random: boolean): Schedule.Schedule<Duration.Duration> =>
  Schedule.fromStep(Effect.sync(() => {
    let state = core.initial(bounds)
    const advance = (r: number): [Duration.Duration, Duration.Duration] => {
      const [delay, next] = core.step(formula, bounds, state, r)
      state = next
      const duration = Duration.millis(delay)
      return [duration, duration]
    }
    return random
      ? (_now: number, _input: unknown) => Effect.map(Random.next, advance)
      : (_now: number, _input: unknown) => Effect.sync(() => advance(0))
  }))

export const exponential = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("exponential", options), core.formulas.exponential, false)

export const fullJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("fullJitter", options), core.formulas.fullJitter, true)

export const equalJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("equalJitter", options), core.formulas.equalJitter, true)

export const decorrelatedJitter = (options: Options): Schedule.Schedule<Duration.Duration> =>
  make(bounds("decorrelatedJitter", options), core.formulas.decorrelatedJitter, true)
