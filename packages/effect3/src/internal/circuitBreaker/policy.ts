import type { Duration, Effect } from "effect"
import { Cause, Exit, FiberId, MetricLabel, Runtime, Schedule, ScheduleDecision, ScheduleIntervals } from "effect"
import type {
  Consecutive,
  FailureRate,
  FailureRateOptions,
  Options,
  Snapshot,
  State,
  Transition,
  TripPolicy
} from "../../CircuitBreaker.js"
import { isFatal } from "../failure.js"
import * as validate from "../validate.js"

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
  /**
   * The open time: the constant, or with `schedule` the delay its first step gave when probed (used only
   * should a later step fail).
   */
  readonly openForMillis: number
  readonly schedule: Schedule.Schedule<Duration.Duration, unknown> | undefined
  readonly permits: number
  /** The `halfOpenTimeout` option; `undefined`: each half-open period gets the `openFor` delay of its opening. */
  readonly halfOpenTimeoutMillis: number | undefined
  /** The `halfOpenFailureRate` option; `undefined`: any failed trial opens again. */
  readonly halfOpenFailureRate: number | undefined
  readonly isFailure: (error: unknown) => boolean
  readonly isIgnored: ((error: unknown) => boolean) | undefined
  readonly openForAtLeast: ((error: unknown) => Duration.Duration | undefined) | undefined
  readonly slowMillis: number | undefined
  readonly labels: ReadonlyArray<MetricLabel.MetricLabel>
  /**
   * The state gauge: `"on"`; `"off"` (keyed breakers without their own series: one gauge cannot hold
   * many states); `"release"` (a keyed breaker with a `key` label: set back to closed when it is dropped).
   */
  readonly gauge: "on" | "off" | "release"
  readonly initialState: Snapshot | undefined
  readonly onTransition: ((transition: Transition) => Effect.Effect<void>) | undefined
}

export type StepResult =
  | { readonly _tag: "Delay"; readonly state: unknown; readonly millis: number }
  | { readonly _tag: "Done" }
  | { readonly _tag: "Failed"; readonly reason: string }

/**
 * Steps a schedule synchronously at `now`. An asynchronous step is not waited for: its fiber is
 * interrupted and the step counts as failed.
 */
export const stepSync = (
  runtime: Runtime.Runtime<never>,
  schedule: Schedule.Schedule<unknown, unknown>,
  now: number,
  input: unknown,
  state: unknown
): StepResult => {
  const exit = Runtime.runSyncExit(runtime, schedule.step(now, input, state))
  if (Exit.isFailure(exit)) {
    const defect = Cause.dieOption(exit.cause)
    if (defect._tag === "Some" && Runtime.isAsyncFiberException(defect.value)) {
      defect.value.fiber.unsafeInterruptAsFork(FiberId.none)
      return { _tag: "Failed", reason: "is not synchronous" }
    }
    return { _tag: "Failed", reason: "failed" }
  }
  const [next, , decision] = exit.value
  if (ScheduleDecision.isDone(decision)) return { _tag: "Done" }
  return { _tag: "Delay", state: next, millis: Math.max(0, ScheduleIntervals.start(decision.intervals) - now) }
}

/**
 * The `openFor` delay of opening number `n` (1 for the first): the schedule stepped `n` times from its start
 * (at most 1,000; a step that ends or fails keeps the delay before it), or the constant `openFor`.
 */
export const delayAt = (runtime: Runtime.Runtime<never>, config: Config, n: number, at: number): number => {
  const schedule = config.schedule
  let delay = config.openForMillis
  if (schedule === undefined) return delay
  let state = schedule.initial
  for (let i = 1; i <= Math.min(n, 1000); i++) {
    const r = stepSync(runtime, schedule, at, i, state)
    if (r._tag !== "Delay") break
    state = r.state
    delay = r.millis
  }
  return delay
}

/**
 * An `openFor` schedule must give a delay at its first step, synchronously: one that is done at once,
 * fails or suspends would open the breaker for no time at all. It is probed once, at time 0, with
 * Effect's default services (so a jittered schedule draws from the default `Random`, not the caller's).
 */
const probe = (schedule: Schedule.Schedule<unknown, unknown>): number => {
  const r = stepSync(Runtime.defaultRuntime, schedule, 0, 0, schedule.initial)
  if (r._tag === "Delay") return r.millis
  return validate.invalid(
    r._tag === "Done"
      ? "CircuitBreaker openFor schedule is done at its first step: it must give at least one delay"
      : `CircuitBreaker openFor schedule ${r.reason} at its first step: it must be synchronous and not fail`
  )
}

const notFatal = (error: unknown): boolean => !isFatal(error)

const states: ReadonlyArray<State> = ["closed", "open", "half-open"]

export const resolve = (options: Options): Config => {
  const trip = options.trip
  if (trip?._tag !== "Consecutive" && trip?._tag !== "FailureRate") {
    validate.invalid("CircuitBreaker trip must be built by CircuitBreaker.consecutive or CircuitBreaker.failureRate")
  }
  const isSchedule = Schedule.isSchedule(options.openFor)
  const openForMillis = isSchedule
    ? probe(options.openFor as Schedule.Schedule<unknown, unknown>)
    : validate.millis("CircuitBreaker openFor", options.openFor as Duration.DurationInput, { finite: true })
  const permits = validate.positiveInt("CircuitBreaker halfOpenPermits", options.halfOpenPermits ?? 1)
  let halfOpenTimeoutMillis: number | undefined
  if (options.halfOpenTimeout !== undefined) {
    halfOpenTimeoutMillis = validate.millis("CircuitBreaker halfOpenTimeout", options.halfOpenTimeout, {
      finite: true
    })
    if (halfOpenTimeoutMillis <= 0) validate.invalid("CircuitBreaker halfOpenTimeout must be longer than zero")
  }
  const halfOpenFailureRate = options.halfOpenFailureRate === undefined
    ? undefined
    : rate("CircuitBreaker halfOpenFailureRate", options.halfOpenFailureRate)
  if (options.isFailure !== undefined && typeof options.isFailure !== "function") {
    validate.invalid("CircuitBreaker isFailure must be a function")
  }
  if (options.isIgnored !== undefined && typeof options.isIgnored !== "function") {
    validate.invalid("CircuitBreaker isIgnored must be a function")
  }
  if (options.openForAtLeast !== undefined && typeof options.openForAtLeast !== "function") {
    validate.invalid("CircuitBreaker openForAtLeast must be a function")
  }
  if (options.onTransition !== undefined && typeof options.onTransition !== "function") {
    validate.invalid("CircuitBreaker onTransition must be a function")
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
  const labels = options.name === undefined ? [] : [MetricLabel.make("breaker", options.name)]
  return {
    trip,
    openForMillis,
    schedule: isSchedule ? options.openFor as Schedule.Schedule<Duration.Duration, unknown> : undefined,
    permits,
    halfOpenTimeoutMillis,
    halfOpenFailureRate,
    isFailure: options.isFailure ?? notFatal,
    isIgnored: options.isIgnored,
    openForAtLeast: options.openForAtLeast,
    slowMillis: trip._tag === "FailureRate" ? trip.slowCall?.millis : undefined,
    labels,
    gauge: "on",
    initialState: s,
    onTransition: options.onTransition
  }
}

/** The config of one breaker of a keyed registry. */
export const forKey = (config: Config, key: unknown, keyLabel: boolean): Config =>
  keyLabel
    ? { ...config, labels: [...config.labels, MetricLabel.make("key", String(key))], gauge: "release" }
    : { ...config, gauge: "off" }
