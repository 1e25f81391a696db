import { Context, Deferred, Duration, Effect, Exit, FiberId, FiberSet, Metric, Scope } from "effect"
import type { Options } from "../Hedge.js"
import type { Budget } from "../RetryBudget.js"
import { compiled } from "./dual.js"
import { RetryBudget } from "./retryBudget.js"
import * as validate from "./validate.js"

export const hedges = Metric.counter("effect_resilience_hedges_total", {
  description: "extra copies started by Hedge.hedge",
  incremental: true
})

/** The state of one hedged call. Fibers of one runtime never run at once, so plain fields do. */
class Race<A, E, R> {
  started = 0
  failed = 0
  /** Copies that may start: `maxAttempts`, or the copies already started once the budget refused one. */
  limit: number
  refused = false
  lastFailure: Exit.Exit<A, E> | undefined = undefined
  /** Failures whose replacement copy has not been started yet. */
  pending = 0
  /** The attempt (from 1) that succeeded, 0 while none has. */
  winner = 0
  done = false
  readonly result: Deferred.Deferred<A, E> = Deferred.unsafeMake(FiberId.none)
  /** Completed by a failing copy to wake the driver before the delay is out. */
  kick: Deferred.Deferred<void> = Deferred.unsafeMake(FiberId.none)
  constructor(
    readonly self: Effect.Effect<A, E, R>,
    readonly maxAttempts: number,
    readonly delay: Duration.Duration,
    readonly set: FiberSet.FiberSet<void, never>,
    readonly budget: Budget | undefined
  ) {
    this.limit = maxAttempts
  }

  settle(attempt: number, exit: Exit.Exit<A, E>): void {
    if (this.done) return
    if (Exit.isSuccess(exit)) {
      this.done = true
      this.winner = attempt
      Deferred.unsafeDone(this.result, exit)
      return
    }
    this.failed++
    this.lastFailure = exit
    if (this.failed === this.limit) {
      this.done = true
      Deferred.unsafeDone(this.result, exit)
      return
    }
    this.pending++
    Deferred.unsafeDone(this.kick, Exit.void)
  }

  /**
   * A copy after the first costs one token of the budget, like a retry. When the budget refuses, no further
   * copy starts: the copies already running decide the result (the last failure, if all of them fail).
   */
  mayLaunch(): boolean {
    if (this.started === 0 || this.budget === undefined || this.budget.unsafeRecordFailure()) return true
    this.refused = true
    this.limit = this.started
    if (this.failed === this.limit) {
      this.done = true
      Deferred.unsafeDone(this.result, this.lastFailure!)
    }
    return false
  }
}

const launch = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> => {
  if (!race.mayLaunch()) return Effect.void
  const attempt = ++race.started
  const copy = FiberSet.run(race.set, Effect.map(Effect.exit(race.self), (exit) => race.settle(attempt, exit)))
  return attempt === 1 ? copy : Effect.zipRight(Metric.increment(hedges), copy)
}

/** Starts the next copy when the delay is out or a copy has failed, whichever comes first. */
const drive = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    if (race.done || race.started >= race.limit) return Effect.void
    if (race.pending > 0) {
      race.pending--
      return Effect.zipRight(launch(race), drive(race))
    }
    race.kick = Deferred.unsafeMake(FiberId.none)
    return Effect.zipRight(
      Effect.race(Effect.sleep(race.delay), Deferred.await(race.kick)),
      Effect.suspend(() => {
        if (race.done) return Effect.void
        if (race.pending > 0) race.pending--
        return Effect.zipRight(launch(race), drive(race))
      })
    )
  })

const annotate = (race: Race<any, any, any>) => {
  if (race.winner > 0) race.budget?.unsafeRecordSuccess()
  const copies: Record<string, unknown> = { "hedge.copies": race.started }
  if (race.winner > 0) copies["hedge.winner"] = race.winner
  if (race.refused) copies["hedge.budget_refused"] = true
  return Effect.annotateCurrentSpan(copies)
}

const noBudget = (): Budget | undefined => undefined

/**
 * Validates once and returns the combinator. Each hedged call runs its copies and a driver fiber in a
 * `FiberSet` inside its own scope: once the result is known the scope closes, which interrupts the
 * losers and the driver together and waits for their finalizers before the result is returned.
 */
export const compile = (options: Options) => {
  const maxAttempts = validate.positiveInt("Hedge.hedge maxAttempts", options.maxAttempts)
  const delay = Duration.millis(validate.millis("Hedge.hedge delay", options.delay))
  const ownBudget = options.budget
  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    maxAttempts === 1 ? self : Effect.acquireUseRelease(
      Scope.make(),
      // the scope holds the FiberSet only: it is not put in the context, so a `self` that needs a
      // `Scope` still gets the caller's
      (scope) =>
        Effect.flatMap(
          Scope.extend(FiberSet.make<void, never>(), scope),
          (set) =>
            Effect.withFiberRuntime<A, E, R>((fiber) => {
              const budget = ownBudget ?? Context.getOrElse(fiber.currentContext, RetryBudget, noBudget)
              const race = new Race(self, maxAttempts, delay, set, budget)
              return launch(race).pipe(
                Effect.zipRight(FiberSet.run(set, drive(race))),
                Effect.zipRight(Deferred.await(race.result)),
                Effect.ensuring(Effect.suspend(() => annotate(race)))
              )
            })
        ),
      (scope, exit) => Scope.close(scope, exit)
    )
}

export const hedge: {
  (options: Options): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, options: Options): Effect.Effect<A, E, R>
} = compiled(compile)
