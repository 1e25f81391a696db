import { Cause, Data, Duration, Effect, Fiber, Metric, Predicate, Pull, Result, Schedule } from "effect"
import type { Options, RetryEvent, StopReason } from "../Retry.js"
import type * as Api from "../Retry.js"
import type { Budget } from "../RetryBudget.js"
import { DeadlineExceeded, withDeadline } from "./deadline.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"
import { isFatal, isRetryable, type Retryable } from "./failure.js"
import * as Meter from "./metrics.js"
import { counterWith } from "./metrics.js"
import { fromContext } from "./retryBudget.js"
import { backoffDelay, secondsBoundaries } from "./telemetry.js"
import { errorTypeOf, event as spanEvent } from "./trace.js"
import * as validate from "./validate.js"

export class RetriesExhausted<E = unknown>
  extends Data.TaggedError("RetriesExhausted")<Fields<Api.RetriesExhausted<E>>>
{
  override get message(): string {
    return `gave up after ${this.attempts} attempt(s): ${this.reason}`
  }
}

export const retries = Meter.counter("effect_resilience_retries_total", {
  description: "retries scheduled by Retry.retry",
  incremental: true
})
export const exhausted = Meter.counter("effect_resilience_retries_exhausted_total", {
  description: "Retry.retry calls that gave up, tagged by reason",
  incremental: true
})

/**
 * The series one run of a policy counts in: `Retry.retry`'s own (no attributes but `reason`), or those of an HTTP
 * client and origin (`seriesWith`). Built once per attribute set, so an update allocates no attributes context.
 */
export interface Series {
  readonly retries: Metric.Counter<number>
  /** `effect_resilience_retry_backoff_seconds`: each delay chosen, with the same attributes. */
  readonly backoff: Metric.Histogram<number>
  readonly exhausted: Readonly<Record<StopReason, Metric.Counter<number>>>
}

/** The series labelled `attributes` (and `reason` for the give-ups). */
export const seriesWith = (attributes: Readonly<Record<string, string>>): Series => ({
  retries: counterWith(retries, attributes),
  backoff: Meter.histogram(backoffDelay.id, {
    description: backoffDelay.description,
    boundaries: secondsBoundaries,
    attributes
  }),
  exhausted: {
    "attempts": counterWith(exhausted, { ...attributes, reason: "attempts" }),
    "deadline": counterWith(exhausted, { ...attributes, reason: "deadline" }),
    "budget": counterWith(exhausted, { ...attributes, reason: "budget" }),
    "retry-after": counterWith(exhausted, { ...attributes, reason: "retry-after" })
  }
})

const plain: Series = seriesWith({})
const plainSeries = (): Series => plain

/**
 * The `Retry.backoff` event's attributes: the attempt that failed (1-based), the delay, where it came from
 * (`schedule`, the server's `retry-after`, or `in-progress`: a 409 saying the keyed request still runs) and the
 * failure's `error.type`.
 */
const backoffEvent = (attempts: number, delay: number, source: string, failure: Retryable<unknown>) => {
  const errorType = errorTypeOf(failure)
  return {
    "retry.attempt": attempts,
    "retry.delay_ms": delay,
    "retry.delay_source": errorType === "409" ? "in-progress" : source,
    "error.type": errorType
  }
}

/** A running schedule: Effect 4 keeps a schedule's state in the step function `Schedule.toStep` builds. */
type Step<R> = (now: number, input: unknown) => Pull.Pull<[unknown, Duration.Duration], never, unknown, R>

/**
 * Validates the options once and returns the combinator, which counts in the series `series()` gives when it
 * first retries or gives up (the HTTP client's, per client and origin). On the success path an application costs
 * one catch frame and a context lookup: the schedule is started (`Schedule.toStep`), and the deadline and the
 * budget are consulted, only after a `Retryable` failure.
 */
export const compileCounting = <R2>(options: Options<R2>) => {
  const maxAttempts = validate.positiveInt("Retry.retry maxAttempts", options.maxAttempts, { allowInfinity: true })
  const maxRetryAfter = options.maxRetryAfter === undefined
    ? 60_000
    : validate.millis("Retry.retry maxRetryAfter", options.maxRetryAfter)
  const { onRetry, schedule } = options
  const ownBudget = options.budget

  function stop(series: () => Series, reason: StopReason, attempts: number, last: Retryable<unknown>) {
    return Metric.update(series().exhausted[reason], 1).pipe(
      Effect.andThen(Effect.annotateCurrentSpan({ "retry.stop_reason": reason })),
      Effect.andThen(spanEvent("Retry.exhausted", () => ({
        "retry.stop_reason": reason,
        "retry.attempts": attempts,
        "error.type": errorTypeOf(last)
      }))),
      Effect.andThen(Effect.fail(new RetriesExhausted({ attempts, reason, last: last.cause })))
    )
  }

  function attempt<A, E, R>(
    self: Effect.Effect<A, E, R>,
    series: () => Series,
    budget: Budget | undefined,
    step: Step<R2> | undefined,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return Effect.matchEffect(self, {
      onSuccess: (a) => {
        budget?.unsafeRecordSuccess()
        return Effect.succeed(a)
      },
      onFailure: (e) => isRetryable(e) ? decide(self, series, budget, e, step, attempts) : Effect.fail(e)
    })
  }

  function decide<A, E, R>(
    self: Effect.Effect<A, E, R>,
    series: () => Series,
    budget: Budget | undefined,
    failure: Retryable<unknown>,
    step: Step<R2> | undefined,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return withDeadline((deadline, now, clock) => {
      const budgetAllows = budget === undefined || budget.unsafeRecordFailure()
      if (attempts >= maxAttempts) return stop(series, "attempts", attempts, failure)
      // a schedule runs on the wall clock, as under `Effect.retry` (a cron schedule needs it); its delay is a
      // duration, held against the deadline on the monotonic reading
      const next = (step: Step<R2>) =>
        Pull.matchEffect(step(clock.currentTimeMillisUnsafe(), failure), {
          onDone: () => stop(series, "attempts", attempts, failure),
          onFailure: Effect.failCause,
          onSuccess: ([, scheduled]) => {
            let delay = Math.max(0, Duration.toMillis(scheduled))
            let source: "schedule" | "retry-after" = "schedule"
            if (failure.retryAfter !== undefined) {
              const hint = Duration.toMillis(failure.retryAfter)
              if (hint > maxRetryAfter) return stop(series, "retry-after", attempts, failure)
              if (hint > delay) {
                delay = hint
                source = "retry-after"
              }
            }
            if (deadline !== undefined && now + delay >= deadline) return stop(series, "deadline", attempts, failure)
            if (!budgetAllows) return stop(series, "budget", attempts, failure)
            const event: RetryEvent = { attempt: attempts, delay: Duration.millis(delay), failure }
            const counted = series()
            return Metric.update(counted.retries, 1).pipe(
              Effect.andThen(Metric.update(counted.backoff, delay / 1000)),
              Effect.andThen(Effect.annotateCurrentSpan({ "retry.attempt": attempts + 1, "retry.delay_ms": delay })),
              Effect.andThen(spanEvent("Retry.backoff", () => backoffEvent(attempts, delay, source, failure))),
              Effect.andThen(onRetry === undefined ? Effect.void : onRetry(event)),
              Effect.andThen(Effect.sleep(Duration.millis(delay))),
              Effect.andThen(attempt(self, series, budget, step, attempts + 1))
            )
          }
        })
      return step === undefined ? Effect.flatMap(Schedule.toStep(schedule), next) : next(step)
    })
  }

  // The first attempt is one frame: the budget (the options' or the fiber's) is looked up only when the attempt
  // ends, on the fiber that ran it, which is the caller's context again by then.
  const budgetNow = (): Budget | undefined => ownBudget ?? fromContext(Fiber.getCurrent()!.context)
  const firstSucceeded = (a: unknown) => {
    budgetNow()?.unsafeRecordSuccess()
    return Effect.succeed(a)
  }

  return <A, E, R>(self: Effect.Effect<A, E, R>, series: () => Series): Effect.Effect<A, unknown, R | R2> =>
    Effect.matchCauseEffect(self, {
      onSuccess: firstSucceeded as (a: A) => Effect.Effect<A>,
      onFailure: (cause): Effect.Effect<A, unknown, R | R2> => {
        // as `Effect.catch`: a defect or an interruption is not handled; only a typed failure is looked at
        if (Cause.hasDies(cause)) return Effect.failCause(cause)
        const found = Cause.findError(cause)
        if (Result.isFailure(found) || !isRetryable(found.success)) return Effect.failCause(cause)
        return decide(self, series, budgetNow(), found.success, undefined, 1)
      }
    })
}

/** `Retry.retry`'s combinator: one argument (it may be handed to `Array.map`), counting in the plain series. */
export const compile = <R2>(options: Options<R2>) => {
  const run = compileCounting(options)
  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R | R2> => run(self, plainSeries)
}

// the public module declares its overloads
export const retry = compiled(compile)

const isExhausted = (u: unknown): u is Api.RetriesExhausted => Predicate.isTagged(u, "RetriesExhausted")

/** See `Retry.unwrap`: read by tag, as `Failure.isFatal` is, so errors of every copy of the library are unwrapped. */
const unwrapError = (error: unknown): unknown => {
  if (isFatal(error) || isRetryable(error)) return error.cause
  if (isExhausted(error)) return error.reason === "deadline" ? new DeadlineExceeded() : error.last
  return error
}

export const unwrap = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R> =>
  Effect.mapError(self, unwrapError)
