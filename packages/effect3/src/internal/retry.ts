import {
  Context,
  Data,
  Duration,
  Effect,
  Metric,
  MetricLabel,
  Predicate,
  ScheduleDecision,
  ScheduleIntervals
} from "effect"
import type { Options, RetryEvent, StopReason } from "../Retry.js"
import type * as Api from "../Retry.js"
import type { Budget } from "../RetryBudget.js"
import { DeadlineExceeded, withDeadline } from "./deadline.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"
import { isFatal, isRetryable, type Retryable } from "./failure.js"
import { RetryBudget } from "./retryBudget.js"
import * as validate from "./validate.js"

export class RetriesExhausted<E = unknown>
  extends Data.TaggedError("RetriesExhausted")<Fields<Api.RetriesExhausted<E>>>
{
  override get message(): string {
    return `gave up after ${this.attempts} attempt(s): ${this.reason}`
  }
}

export const retries = Metric.counter("effect_resilience_retries_total", {
  description: "retries scheduled by Retry.retry",
  incremental: true
})
export const exhausted = Metric.counter("effect_resilience_retries_exhausted_total", {
  description: "Retry.retry calls that gave up, tagged by reason",
  incremental: true
})

/**
 * The series one run of a policy counts in: `Retry.retry`'s own (no label but `reason`), or those of an HTTP
 * client and origin (`seriesWith`). Built once per label set.
 */
export interface Series {
  readonly retries: Metric.Metric.Counter<number>
  readonly exhausted: Readonly<Record<StopReason, Metric.Metric.Counter<number>>>
}

/**
 * The series labelled `attributes`, in their order (and `reason` last for the give-ups): Effect 3 tells series
 * apart by their labels in order, so `Metric.tagged` reads them in the same order.
 */
export const seriesWith = (attributes: Readonly<Record<string, string>>): Series => {
  const tags = Object.entries(attributes).map(([key, value]) => MetricLabel.make(key, value))
  const gaveUp = (reason: StopReason) =>
    Metric.taggedWithLabels(exhausted, [...tags, MetricLabel.make("reason", reason)])
  return {
    retries: tags.length === 0 ? retries : Metric.taggedWithLabels(retries, tags),
    exhausted: {
      "attempts": gaveUp("attempts"),
      "deadline": gaveUp("deadline"),
      "budget": gaveUp("budget"),
      "retry-after": gaveUp("retry-after")
    }
  }
}

const plain: Series = seriesWith({})
const plainSeries = (): Series => plain

const noBudget = (): Budget | undefined => undefined

/**
 * Validates the options once and returns the combinator, which counts in the series `series()` gives when it
 * first retries or gives up (the HTTP client's, per client and origin). On the success path an application
 * costs one catch frame and a context lookup: the schedule, the deadline and the budget are consulted only
 * after a `Retryable` failure.
 */
export const compileCounting = <R2>(options: Options<R2>) => {
  const maxAttempts = validate.positiveInt("Retry.retry maxAttempts", options.maxAttempts, { allowInfinity: true })
  const maxRetryAfter = options.maxRetryAfter === undefined
    ? 60_000
    : validate.millis("Retry.retry maxRetryAfter", options.maxRetryAfter)
  const { onRetry, schedule } = options
  const ownBudget = options.budget

  function stop(series: () => Series, reason: StopReason, attempts: number, last: Retryable<unknown>) {
    return Metric.increment(series().exhausted[reason]).pipe(
      Effect.zipRight(Effect.annotateCurrentSpan({ "retry.stop_reason": reason })),
      Effect.zipRight(Effect.fail(new RetriesExhausted({ attempts, reason, last: last.cause })))
    )
  }

  function attempt<A, E, R>(
    self: Effect.Effect<A, E, R>,
    series: () => Series,
    budget: Budget | undefined,
    state: unknown,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return Effect.matchEffect(self, {
      onSuccess: (a) => {
        budget?.unsafeRecordSuccess()
        return Effect.succeed(a)
      },
      onFailure: (e) => isRetryable(e) ? decide(self, series, budget, e, state, attempts) : Effect.fail(e)
    })
  }

  function decide<A, E, R>(
    self: Effect.Effect<A, E, R>,
    series: () => Series,
    budget: Budget | undefined,
    failure: Retryable<unknown>,
    state: unknown,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return withDeadline((deadline, now, clock) => {
      const budgetAllows = budget === undefined || budget.unsafeRecordFailure()
      if (attempts >= maxAttempts) return stop(series, "attempts", attempts, failure)
      // a schedule runs on the wall clock, as under `Effect.retry` (a cron schedule needs it); its delay is a
      // duration, held against the deadline on the monotonic reading
      const wall = clock.unsafeCurrentTimeMillis()
      return Effect.flatMap(schedule.step(wall, failure, state), ([next, _out, decision]) => {
        if (ScheduleDecision.isDone(decision)) return stop(series, "attempts", attempts, failure)
        let delay = Math.max(0, ScheduleIntervals.start(decision.intervals) - wall)
        if (failure.retryAfter !== undefined) {
          const hint = Duration.toMillis(failure.retryAfter)
          if (hint > maxRetryAfter) return stop(series, "retry-after", attempts, failure)
          if (hint > delay) delay = hint
        }
        if (deadline !== undefined && now + delay >= deadline) return stop(series, "deadline", attempts, failure)
        if (!budgetAllows) return stop(series, "budget", attempts, failure)
        const event: RetryEvent = { attempt: attempts, delay: Duration.millis(delay), failure }
        return Metric.increment(series().retries).pipe(
          Effect.zipRight(Effect.annotateCurrentSpan({ "retry.attempt": attempts + 1, "retry.delay_ms": delay })),
          Effect.zipRight(onRetry === undefined ? Effect.void : onRetry(event)),
          Effect.zipRight(Effect.sleep(Duration.millis(delay))),
          Effect.zipRight(attempt(self, series, budget, next, attempts + 1))
        )
      })
    })
  }

  return <A, E, R>(self: Effect.Effect<A, E, R>, series: () => Series): Effect.Effect<A, unknown, R | R2> =>
    Effect.withFiberRuntime((fiber) => {
      const budget: Budget | undefined = ownBudget ?? Context.getOrElse(fiber.currentContext, RetryBudget, noBudget)
      if (budget === undefined) {
        return Effect.catchAll(
          self,
          (e) => isRetryable(e) ? decide(self, series, undefined, e, schedule.initial, 1) : Effect.fail(e)
        )
      }
      return attempt(self, series, budget, schedule.initial, 1)
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
