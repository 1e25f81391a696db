import type { Duration } from "effect"
import { MetricLabel, Schedule } from "effect"
import type {
  Consecutive,
  FailureRate,
  FailureRateOptions,
  Options,
  Snapshot,
  State,
  TripPolicy
} from "../CircuitBreaker.js"
import { isFatal } from "../Failure.js"
import * as validate from "./validate.js"

export const consecutive = (n: number): Consecutive => ({
  _tag: "Consecutive",
  failures: validate.positiveInt("CircuitBreaker.consecutive(n)", n)
})

const rate = (name: string, n: number): number => {
  if (!(typeof n === "number" && n > 0 && n <= 1)) validate.invalid(`${name} must be in (0, 1], got ${n}`)
  return n
}

export const failureRate = (options: FailureRateOptions): FailureRate => {
  const threshold = rate("CircuitBreaker.failureRate threshold", options.threshold)
  const minimumCalls = validate.positiveInt("CircuitBreaker.failureRate minimumCalls", options.minimumCalls)
  const w = options.window as { readonly calls?: number; readonly duration?: Duration.DurationInput; buckets?: number }
  if (typeof w !== "object" || w === null || ("calls" in w) === ("duration" in w)) {
    return validate.invalid("CircuitBreaker.failureRate window must be { calls } or { duration, buckets? }")
  }
  let window: FailureRate["window"]
  if (w.calls !== undefined) {
    const calls = validate.positiveInt("CircuitBreaker.failureRate window.calls", w.calls)
    if (minimumCalls > calls) {
      validate.invalid(`CircuitBreaker.failureRate minimumCalls (${minimumCalls}) exceeds window.calls (${calls})`)
    }
    window = { _tag: "Count", calls }
  } else {
    const millis = validate.millis("CircuitBreaker.failureRate window.duration", w.duration!, { finite: true })
    if (millis <= 0) validate.invalid("CircuitBreaker.failureRate window.duration must be > 0")
    const buckets = validate.positiveInt("CircuitBreaker.failureRate window.buckets", w.buckets ?? 10)
    window = { _tag: "Time", millis, buckets }
  }
  const slowCall = options.slowCall === undefined ? undefined : {
    millis: validate.millis("CircuitBreaker.failureRate slowCall.duration", options.slowCall.duration, {
      finite: true
    }),
    rateThreshold: rate("CircuitBreaker.failureRate slowCall.rateThreshold", options.slowCall.rateThreshold)
  }
  return { _tag: "FailureRate", threshold, minimumCalls, window, slowCall }
}

/** The options of a breaker, validated and decoded once. */
export interface Config {
  readonly trip: TripPolicy
  /** A constant open time, or `undefined` when `schedule` is used. */
  readonly openForMillis: number | undefined
  readonly schedule: Schedule.Schedule<Duration.Duration, unknown> | undefined
  readonly permits: number
  readonly isFailure: (error: unknown) => boolean
  readonly slowMillis: number | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  readonly initialState: Snapshot | undefined
}

const notFatal = (error: unknown): boolean => !isFatal(error)

const states: ReadonlyArray<State> = ["closed", "open", "half-open"]

export const resolve = (options: Options, extraLabels: ReadonlyArray<MetricLabel.MetricLabel> = []): Config => {
  const trip = options.trip
  if (trip?._tag !== "Consecutive" && trip?._tag !== "FailureRate") {
    validate.invalid("CircuitBreaker trip must be built by CircuitBreaker.consecutive or CircuitBreaker.failureRate")
  }
  const isSchedule = Schedule.isSchedule(options.openFor)
  const openForMillis = isSchedule
    ? undefined
    : validate.millis("CircuitBreaker openFor", options.openFor as Duration.DurationInput, { finite: true })
  const permits = validate.positiveInt("CircuitBreaker halfOpenPermits", options.halfOpenPermits ?? 1)
  if (options.isFailure !== undefined && typeof options.isFailure !== "function") {
    validate.invalid("CircuitBreaker isFailure must be a function")
  }
  const s = options.initialState
  if (
    s !== undefined &&
    (typeof s !== "object" || s === null || !states.includes(s.state) || typeof s.isolated !== "boolean" ||
      !(s.openUntil === null || typeof s.openUntil === "number") || !Number.isInteger(s.openings) ||
      s.openings < 0 || (s.state === "open" && !s.isolated && s.openUntil === null))
  ) {
    validate.invalid("CircuitBreaker initialState is not a snapshot taken with breaker.snapshot")
  }
  const labels = options.name === undefined
    ? extraLabels
    : [MetricLabel.make("breaker", options.name), ...extraLabels]
  return {
    trip,
    openForMillis,
    schedule: isSchedule ? options.openFor as Schedule.Schedule<Duration.Duration, unknown> : undefined,
    permits,
    isFailure: options.isFailure ?? notFatal,
    slowMillis: trip._tag === "FailureRate" ? trip.slowCall?.millis : undefined,
    labels,
    initialState: s
  }
}
