import { Context, Data, Duration, Effect, Metric, ScheduleDecision, ScheduleIntervals } from "effect"
import type { Options, RetryEvent, StopReason } from "../Retry.js"
import type * as Api from "../Retry.js"
import type { Budget } from "../RetryBudget.js"
import { withDeadline } from "./deadline.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"
import { isRetryable, type Retryable } from "./failure.js"
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

const noBudget = (): Budget | undefined => undefined

/**
 * Validates the options once and returns the combinator. On the success path an application costs one
 * catch frame and a context lookup: the schedule, the deadline and the budget are consulted only after
 * a `Retryable` failure.
 */
export const compile = <R2>(options: Options<R2>) => {
  const maxAttempts = validate.positiveInt("Retry.retry maxAttempts", options.maxAttempts, { allowInfinity: true })
  const maxRetryAfter = options.maxRetryAfter === undefined
    ? 60_000
    : validate.millis("Retry.retry maxRetryAfter", options.maxRetryAfter)
  const { onRetry, schedule } = options
  const ownBudget = options.budget

  function stop(reason: StopReason, attempts: number, last: Retryable<unknown>) {
    return Effect.zipRight(
      Metric.increment(Metric.tagged(exhausted, "reason", reason)),
      Effect.fail(new RetriesExhausted({ attempts, reason, last: last.cause }))
    )
  }

  function attempt<A, E, R>(
    self: Effect.Effect<A, E, R>,
    budget: Budget | undefined,
    state: unknown,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return Effect.matchEffect(self, {
      onSuccess: (a) => {
        budget?.unsafeRecordSuccess()
        return Effect.succeed(a)
      },
      onFailure: (e) => isRetryable(e) ? decide(self, budget, e, state, attempts) : Effect.fail(e)
    })
  }

  function decide<A, E, R>(
    self: Effect.Effect<A, E, R>,
    budget: Budget | undefined,
    failure: Retryable<unknown>,
    state: unknown,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return withDeadline((deadline, now, clock) => {
      const budgetAllows = budget === undefined || budget.unsafeRecordFailure()
      if (attempts >= maxAttempts) return stop("attempts", attempts, failure)
      // a schedule runs on the wall clock, as under `Effect.retry` (a cron schedule needs it); its delay is a
      // duration, held against the deadline on the monotonic reading
      const wall = clock.unsafeCurrentTimeMillis()
      return Effect.flatMap(schedule.step(wall, failure, state), ([next, _out, decision]) => {
        if (ScheduleDecision.isDone(decision)) return stop("attempts", attempts, failure)
        let delay = Math.max(0, ScheduleIntervals.start(decision.intervals) - wall)
        if (failure.retryAfter !== undefined) {
          const hint = Duration.toMillis(failure.retryAfter)
          if (hint > maxRetryAfter) return stop("retry-after", attempts, failure)
          if (hint > delay) delay = hint
        }
        if (deadline !== undefined && now + delay >= deadline) return stop("deadline", attempts, failure)
        if (!budgetAllows) return stop("budget", attempts, failure)
        const event: RetryEvent = { attempt: attempts, delay: Duration.millis(delay), failure }
        return Metric.increment(retries).pipe(
          Effect.zipRight(Effect.annotateCurrentSpan({ "retry.attempt": attempts + 1, "retry.delay_ms": delay })),
          Effect.zipRight(onRetry === undefined ? Effect.void : onRetry(event)),
          Effect.zipRight(Effect.sleep(Duration.millis(delay))),
          Effect.zipRight(attempt(self, budget, next, attempts + 1))
        )
      })
    })
  }

  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R | R2> =>
    Effect.withFiberRuntime((fiber) => {
      const budget: Budget | undefined = ownBudget ?? Context.getOrElse(fiber.currentContext, RetryBudget, noBudget)
      if (budget === undefined) {
        return Effect.catchAll(
          self,
          (e) => isRetryable(e) ? decide(self, undefined, e, schedule.initial, 1) : Effect.fail(e)
        )
      }
      return attempt(self, budget, schedule.initial, 1)
    })
}

// the public module declares its overloads
export const retry = compiled(compile)
