import { Cause, Data, Duration, Effect, Fiber, Metric, Pull, Result, Schedule } from "effect"
import type { Options, RetryEvent, StopReason } from "../Retry.js"
import type * as Api from "../Retry.js"
import type { Budget } from "../RetryBudget.js"
import { withDeadline } from "./deadline.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"
import { isRetryable, type Retryable } from "./failure.js"
import { counterWith } from "./metrics.js"
import { fromContext } from "./retryBudget.js"
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

const exhaustedBy: Record<StopReason, Metric.Counter<number>> = {
  "attempts": counterWith(exhausted, { reason: "attempts" }),
  "deadline": counterWith(exhausted, { reason: "deadline" }),
  "budget": counterWith(exhausted, { reason: "budget" }),
  "retry-after": counterWith(exhausted, { reason: "retry-after" })
}

/** A running schedule: Effect 4 keeps a schedule's state in the step function `Schedule.toStep` builds. */
type Step<R> = (now: number, input: unknown) => Pull.Pull<[Duration.Duration, Duration.Duration], never, unknown, R>

/**
 * Validates the options once and returns the combinator. On the success path an application costs one
 * catch frame and a context lookup: the schedule is started (`Schedule.toStep`), and the deadline and the budget
 * are consulted, only after a `Retryable` failure.
 */
export const compile = <R2>(options: Options<R2>) => {
  const maxAttempts = validate.positiveInt("Retry.retry maxAttempts", options.maxAttempts, { allowInfinity: true })
  const maxRetryAfter = options.maxRetryAfter === undefined
    ? 60_000
    : validate.millis("Retry.retry maxRetryAfter", options.maxRetryAfter)
  const { onRetry, schedule } = options
  const ownBudget = options.budget

  function stop(reason: StopReason, attempts: number, last: Retryable<unknown>) {
    return Effect.andThen(
      Metric.update(exhaustedBy[reason], 1),
      Effect.fail(new RetriesExhausted({ attempts, reason, last: last.cause }))
    )
  }

  function attempt<A, E, R>(
    self: Effect.Effect<A, E, R>,
    budget: Budget | undefined,
    step: Step<R2> | undefined,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return Effect.matchEffect(self, {
      onSuccess: (a) => {
        budget?.unsafeRecordSuccess()
        return Effect.succeed(a)
      },
      onFailure: (e) => isRetryable(e) ? decide(self, budget, e, step, attempts) : Effect.fail(e)
    })
  }

  function decide<A, E, R>(
    self: Effect.Effect<A, E, R>,
    budget: Budget | undefined,
    failure: Retryable<unknown>,
    step: Step<R2> | undefined,
    attempts: number
  ): Effect.Effect<A, unknown, R | R2> {
    return withDeadline((deadline, now, clock) => {
      const budgetAllows = budget === undefined || budget.unsafeRecordFailure()
      if (attempts >= maxAttempts) return stop("attempts", attempts, failure)
      // a schedule runs on the wall clock, as under `Effect.retry` (a cron schedule needs it); its delay is a
      // duration, held against the deadline on the monotonic reading
      const next = (step: Step<R2>) =>
        Pull.matchEffect(step(clock.currentTimeMillisUnsafe(), failure), {
          onDone: () => stop("attempts", attempts, failure),
          onFailure: Effect.failCause,
          onSuccess: ([, scheduled]) => {
            let delay = Math.max(0, Duration.toMillis(scheduled))
            if (failure.retryAfter !== undefined) {
              const hint = Duration.toMillis(failure.retryAfter)
              if (hint > maxRetryAfter) return stop("retry-after", attempts, failure)
              if (hint > delay) delay = hint
            }
            if (deadline !== undefined && now + delay >= deadline) return stop("deadline", attempts, failure)
            if (!budgetAllows) return stop("budget", attempts, failure)
            const event: RetryEvent = { attempt: attempts, delay: Duration.millis(delay), failure }
            return Metric.update(retries, 1).pipe(
              Effect.andThen(Effect.annotateCurrentSpan({ "retry.attempt": attempts + 1, "retry.delay_ms": delay })),
              Effect.andThen(onRetry === undefined ? Effect.void : onRetry(event)),
              Effect.andThen(Effect.sleep(Duration.millis(delay))),
              Effect.andThen(attempt(self, budget, step, attempts + 1))
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

  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, unknown, R | R2> =>
    Effect.matchCauseEffect(self, {
      onSuccess: firstSucceeded as (a: A) => Effect.Effect<A>,
      onFailure: (cause): Effect.Effect<A, unknown, R | R2> => {
        // as `Effect.catch`: a defect or an interruption is not handled; only a typed failure is looked at
        if (Cause.hasDies(cause)) return Effect.failCause(cause)
        const found = Cause.findError(cause)
        if (Result.isFailure(found) || !isRetryable(found.success)) return Effect.failCause(cause)
        return decide(self, budgetNow(), found.success, undefined, 1)
      }
    })
}

// the public module declares its overloads
export const retry = compiled(compile)
