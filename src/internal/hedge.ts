import { Deferred, Duration, Effect, Exit, FiberId, FiberSet, Metric, Scope } from "effect"
import type { Options } from "../Hedge.js"
import { compiled } from "./dual.js"
import * as validate from "./validate.js"

export const hedges = Metric.counter("effect_resilience_hedges_total", {
  description: "extra copies started by Hedge.hedge",
  incremental: true
})

/** The state of one hedged call. Fibers of one runtime never run at once, so plain fields do. */
class Race<A, E, R> {
  started = 0
  failed = 0
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
    readonly set: FiberSet.FiberSet<void, never>
  ) {}

  settle(attempt: number, exit: Exit.Exit<A, E>): void {
    if (this.done) return
    if (Exit.isSuccess(exit)) {
      this.done = true
      this.winner = attempt
      Deferred.unsafeDone(this.result, exit)
      return
    }
    this.failed++
    if (this.failed === this.maxAttempts) {
      this.done = true
      Deferred.unsafeDone(this.result, exit)
      return
    }
    this.pending++
    Deferred.unsafeDone(this.kick, Exit.void)
  }
}

const launch = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> => {
  const attempt = ++race.started
  const copy = FiberSet.run(race.set, Effect.map(Effect.exit(race.self), (exit) => race.settle(attempt, exit)))
  return attempt === 1 ? copy : Effect.zipRight(Metric.increment(hedges), copy)
}

/** Starts the next copy when the delay is out or a copy has failed, whichever comes first. */
const drive = <A, E, R>(race: Race<A, E, R>): Effect.Effect<void, never, R> =>
  Effect.suspend(() => {
    if (race.done || race.started >= race.maxAttempts) return Effect.void
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

const annotate = (race: Race<any, any, any>) =>
  Effect.annotateCurrentSpan(
    race.winner === 0
      ? { "hedge.copies": race.started }
      : { "hedge.copies": race.started, "hedge.winner": race.winner }
  )

/**
 * Validates once and returns the combinator. Each hedged call runs its copies and a driver fiber in a
 * `FiberSet` inside its own scope: once the result is known the scope closes, which interrupts the
 * losers and the driver together and waits for their finalizers before the result is returned.
 */
export const compile = (options: Options) => {
  const maxAttempts = validate.positiveInt("Hedge.hedge maxAttempts", options.maxAttempts)
  const delay = Duration.millis(validate.millis("Hedge.hedge delay", options.delay))
  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    maxAttempts === 1 ? self : Effect.acquireUseRelease(
      Scope.make(),
      // the scope holds the FiberSet only: it is not put in the context, so a `self` that needs a
      // `Scope` still gets the caller's
      (scope) =>
        Effect.flatMap(Scope.extend(FiberSet.make<void, never>(), scope), (set) => {
          const race = new Race(self, maxAttempts, delay, set)
          return launch(race).pipe(
            Effect.zipRight(FiberSet.run(set, drive(race))),
            Effect.zipRight(Deferred.await(race.result)),
            Effect.ensuring(Effect.suspend(() => annotate(race)))
          )
        }),
      (scope, exit) => Scope.close(scope, exit)
    )
}

export const hedge: {
  (options: Options): <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  <A, E, R>(self: Effect.Effect<A, E, R>, options: Options): Effect.Effect<A, E, R>
} = compiled(compile)
