import type { Exit as ExitType } from "effect"
import { Deferred, Duration, Effect, Exit, FiberSet, Metric, Scope } from "effect"
import type { Options } from "../Hedge.js"
import type { Budget } from "../RetryBudget.js"
import { compiled } from "./dual.js"
import * as Meter from "./metrics.js"
import { resume } from "./resume.js"
import { fromContext } from "./retryBudget.js"
import { event } from "./trace.js"
import * as validate from "./validate.js"

export const hedges = Meter.counter("effect_resilience_hedges_total", {
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
  lastFailure: ExitType.Exit<A, E> | undefined = undefined
  /** Failures whose replacement copy has not been started yet. */
  pending = 0
  /** The attempt (from 1) that succeeded, 0 while none has. */
  winner = 0
  /** The result, once known, and the caller waiting for it. */
  outcome: ExitType.Exit<A, E> | undefined = undefined
  wake: ((exit: Effect.Effect<A, E>) => void) | undefined = undefined
  /** Completed by a failing copy to wake the driver before the delay is out. */
  kick: Deferred.Deferred<void> = Deferred.makeUnsafe()
  constructor(
    readonly self: Effect.Effect<A, E, R>,
    readonly maxAttempts: number,
    readonly delay: Duration.Duration,
    readonly set: FiberSet.FiberSet<unknown, never>,
    readonly budget: Budget | undefined
  ) {
    this.limit = maxAttempts
  }

  get done(): boolean {
    return this.outcome !== undefined
  }

  /**
   * The caller waits here. The copy that decides the result resumes it, on its own stack in Effect 4, so through
   * the depth guard: a hedged call inside a hedged call (a paginated fetch) would otherwise nest without bound.
   */
  readonly result: Effect.Effect<A, E> = Effect.callback((wake) => {
    if (this.outcome !== undefined) wake(this.outcome)
    else this.wake = wake
  })

  finish(exit: ExitType.Exit<A, E>): void {
    this.outcome = exit
    const wake = this.wake
    this.wake = undefined
    if (wake !== undefined) resume(wake, exit)
  }

  settle(attempt: number, exit: ExitType.Exit<A, E>): void {
    if (this.done) return
    if (Exit.isSuccess(exit)) {
      this.winner = attempt
      return this.finish(exit)
    }
    this.failed++
    this.lastFailure = exit
    if (this.failed === this.limit) return this.finish(exit)
    this.pending++
    Deferred.doneUnsafe(this.kick, Exit.void)
  }

  /**
   * A copy after the first costs one token of the budget, like a retry. When the budget refuses, no further
   * copy starts: the copies already running decide the result (the last failure, if all of them fail).
   */
  mayLaunch(): boolean {
    if (this.started === 0 || this.budget === undefined || this.budget.unsafeRecordFailure()) return true
    this.refused = true
    this.limit = this.started
    if (this.failed === this.limit) this.finish(this.lastFailure!)
    return false
  }
}

/**
 * Starts a copy. It settles the race from an observer of its fiber, once the fiber has ended and left the set:
 * had the copy settled from inside, the caller would close the scope while the winner still runs on the stack
 * below it, and wait for it in a resume of Effect's own, unguarded, at every level of a nested hedge.
 */
const launch = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> => {
  if (!race.mayLaunch()) return Effect.void
  const attempt = ++race.started
  const copy = Effect.map(FiberSet.run(race.set, Effect.exit(race.self)), (fiber) => {
    fiber.addObserver((exit) => race.settle(attempt, Exit.isSuccess(exit) ? exit.value : Exit.failCause(exit.cause)))
  })
  return attempt === 1
    ? copy
    : Metric.update(hedges, 1).pipe(
      Effect.andThen(event("Hedge.launched", () => ({ "hedge.copy": attempt, "hedge.failed": race.failed }))),
      Effect.andThen(copy)
    )
}

/** Starts the next copy when the delay is out or a copy has failed, whichever comes first. */
const drive = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    if (race.done || race.started >= race.limit) return Effect.void
    if (race.pending > 0) {
      race.pending--
      return Effect.andThen(launch(race), drive(race))
    }
    race.kick = Deferred.makeUnsafe()
    return Effect.andThen(
      Effect.race(Effect.sleep(race.delay), Deferred.await(race.kick)),
      Effect.suspend(() => {
        if (race.done) return Effect.void
        if (race.pending > 0) race.pending--
        return Effect.andThen(launch(race), drive(race))
      })
    )
  })

const annotate = (race: Race<any, any, any>) => {
  if (race.winner > 0) race.budget?.unsafeRecordSuccess()
  const copies: Record<string, unknown> = { "hedge.copies": race.started }
  if (race.winner > 0) copies["hedge.winner"] = race.winner
  if (race.refused) copies["hedge.budget_refused"] = true
  return Effect.andThen(Effect.annotateCurrentSpan(copies), event("Hedge.settled", () => copies))
}

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
          Scope.provide(FiberSet.make<unknown, never>(), scope),
          (set) =>
            Effect.withFiber<A, E, R>((fiber) => {
              const race = new Race(self, maxAttempts, delay, set, ownBudget ?? fromContext(fiber.context))
              return launch(race).pipe(
                Effect.andThen(FiberSet.run(set, drive(race))),
                Effect.andThen(race.result),
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
