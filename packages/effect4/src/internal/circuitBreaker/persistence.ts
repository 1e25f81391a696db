/**
 * Our breakers as Effect 4's own breaker service (`CircuitBreaker` of `effect/persistence`): `execute` runs the
 * call through the breaker of its key, judged by Effect's `classify` (`verdict`), and answers a refusal with
 * Effect's `CircuitBreakerError`; `state` and `transitions` read our breakers.
 */
import type { Scope } from "effect"
import { Cause, Duration, Effect, Exit, Layer, PubSub, Scope as Scopes, Stream } from "effect"
import { dual } from "effect/Function"
import * as Persisted from "effect/persistence/CircuitBreaker"
import type { CircuitBreaker, CircuitOpen, Keyed, KeyedOptions, State, Transition } from "../../CircuitBreaker.js"
import type { Options } from "../../CircuitBreaker/Persistence.js"
import * as validate from "../validate.js"
import { keyed as makeKeyed } from "./keyed.js"
import { probing } from "./probe.js"
import type * as Shell from "./shell.js"
import { VerdictTypeId } from "./shell.js"

type Classify<A, E, R2> = (exit: Exit.Exit<A, E>) => Persisted.Outcome | Effect.Effect<Persisted.Outcome, never, R2>

/** A call judged by Effect's `classify`: what our breaker records (`Shell.Verdict`), and the call's own exit. */
class Verdict<A, E> implements Shell.Verdict {
  readonly [VerdictTypeId] = true as const
  constructor(
    readonly outcome: "failure" | "ignored",
    readonly askedMillis: number,
    readonly exit: Exit.Exit<A, E>
  ) {}
}

const maxOpenOf = (options: Options | undefined): number => {
  if (options?.maxOpenDuration === undefined) return 3_600_000
  const ms = validate.millis("CircuitBreaker/Persistence maxOpenDuration", options.maxOpenDuration)
  if (ms <= 0) validate.invalid("CircuitBreaker/Persistence maxOpenDuration must be longer than zero")
  return ms
}

/**
 * Runs `self` to its exit and judges it as Effect's own breaker does: only interruptions are ignored, without
 * `classify` a success is a success and any failure a failure; a `classify` that fails or dies ignores the call and
 * adds its cause to the call's. Inside `protect`, a call judged a success succeeds with its exit (even a failed one)
 * and any other fails with a `Verdict` holding it.
 */
const judged = <A, E, R, R2>(
  self: Effect.Effect<A, E, R>,
  classify: Classify<A, E, R2> | undefined,
  maxOpenMillis: number
): Effect.Effect<Exit.Exit<A, E>, Verdict<A, E>, R | R2> =>
  Effect.flatMap(Effect.exit(self), (exit) => {
    if (Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) return Effect.fail(new Verdict("ignored", 0, exit))
    if (classify === undefined) {
      return Exit.isSuccess(exit) ? Effect.succeed(exit) : Effect.fail(new Verdict("failure", 0, exit))
    }
    return Effect.flatMap(
      Effect.exit(Effect.suspend(() => {
        const outcome = classify(exit)
        return Effect.isEffect(outcome) ? outcome : Effect.succeed(outcome)
      })),
      (classified): Effect.Effect<Exit.Exit<A, E>, Verdict<A, E>> => {
        if (Exit.isFailure(classified)) {
          const cause = Exit.isFailure(exit) ? Cause.combine(exit.cause, classified.cause) : classified.cause
          return Effect.fail(new Verdict("ignored", 0, Exit.failCause(cause)))
        }
        const outcome = classified.value
        if (outcome._tag === "Success") return Effect.succeed(exit)
        if (outcome._tag === "Ignored") return Effect.fail(new Verdict("ignored", 0, exit))
        const asked = outcome.retryAfter === undefined ? 0 : Duration.toMillis(outcome.retryAfter)
        const millis = Number.isFinite(asked) && asked > 0 ? Math.min(asked, maxOpenMillis) : 0
        return Effect.fail(new Verdict("failure", millis, exit))
      }
    )
  })

const persistedState = (s: State): "Closed" | "Open" | "HalfOpen" =>
  s === "closed" ? "Closed" : s === "open" ? "Open" : "HalfOpen"

/** Effect's view of one of our breakers now. */
const stateOf = (key: string, breaker: CircuitBreaker): Effect.Effect<Persisted.State> =>
  Effect.gen(function*() {
    const state = yield* breaker.state
    if (state === "closed") return { _tag: "Closed", key }
    const snapshot = yield* breaker.snapshot
    if (state === "half-open") {
      return { _tag: "HalfOpen", key, probing: probing(breaker), consecutiveOpenings: snapshot.openings }
    }
    const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
    const retryAfter = snapshot.isolated || snapshot.openUntil === null
      ? Duration.infinity
      : Duration.millis(Math.max(0, snapshot.openUntil - now))
    return { _tag: "Open", key, retryAfter, consecutiveOpenings: snapshot.openings }
  })

/** Our transition as Effect's, when its type has one (ours also has open → closed, by `reset`). */
const transitionOf = (
  key: string,
  breaker: CircuitBreaker,
  t: Transition
): Effect.Effect<Persisted.Transition | undefined> => {
  const from = persistedState(t.from)
  const to = persistedState(t.to)
  if (to === "Open" && from !== "Open") {
    return Effect.map(breaker.snapshot, (s) => ({
      key,
      from,
      to,
      retryAfter: s.isolated || s.openUntil === null
        ? Duration.infinity
        : Duration.millis(Math.max(0, s.openUntil - t.at)),
      consecutiveOpenings: s.openings
    }))
  }
  if (from === "Open" && to === "HalfOpen") return Effect.succeed({ key, from, to })
  if (from === "HalfOpen" && to === "Closed") return Effect.succeed({ key, from, to })
  return Effect.succeed(undefined)
}

export const fromKeyed = (
  keyed: Keyed<string>,
  options?: Options
): Effect.Effect<Persisted.CircuitBreaker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const maxOpenMillis = maxOpenOf(options)
    const scope = yield* Effect.scope
    // as Effect's own: the last 128 transitions for a slow reader, then the oldest are dropped
    const hub = yield* PubSub.sliding<Persisted.Transition>(128)
    yield* Scopes.addFinalizer(scope, PubSub.shutdown(hub))
    const watched = new WeakSet<CircuitBreaker>()

    // the first call of a breaker subscribes to its transitions (before the call runs: none is missed), in a scope
    // of its own, closed when the breaker is (a dropped key's), so a registry's churn leaves nothing behind
    const watch = (key: string, breaker: CircuitBreaker): Effect.Effect<void> => {
      if (watched.has(breaker)) return Effect.void
      watched.add(breaker)
      return Effect.gen(function*() {
        const own = yield* Scopes.fork(scope, "sequential")
        const subscription = yield* Scopes.provide(own)(breaker.subscribe)
        const loop = PubSub.take(subscription).pipe(
          Effect.flatMap((t) => transitionOf(key, breaker, t)),
          Effect.flatMap((t) => t === undefined ? Effect.void : PubSub.publish(hub, t)),
          Effect.forever,
          Effect.ensuring(Scopes.close(own, Exit.void))
        )
        yield* Effect.forkIn(Effect.interruptible(loop), scope)
      })
    }

    const refused = (key: string, breaker: CircuitBreaker, open: CircuitOpen) =>
      Effect.flatMap(breaker.state, (state) =>
        Effect.fail(
          new Persisted.CircuitBreakerError({
            reason: state === "half-open"
              ? new Persisted.CircuitHalfOpen({ key })
              : new Persisted.CircuitOpen({ key, retryAfter: open.retryAfter })
          })
        ))

    const execute = <A, E, R, R2>(
      self: Effect.Effect<A, E, R>,
      { classify, key }: { readonly key: string; readonly classify?: Classify<A, E, R2> | undefined }
    ): Effect.Effect<A, E | Persisted.CircuitBreakerError, R | R2> =>
      Effect.flatMap(keyed.get(key), (breaker) =>
        Effect.andThen(
          watch(key, breaker),
          Effect.matchEffect(breaker.protect(judged(self, classify, maxOpenMillis)), {
            onSuccess: (exit): Effect.Effect<A, E | Persisted.CircuitBreakerError> => exit,
            onFailure: (error): Effect.Effect<A, E | Persisted.CircuitBreakerError> =>
              error instanceof Verdict ? error.exit : refused(key, breaker, error)
          })
        ))

    const state = (key: string): Effect.Effect<Persisted.State, Persisted.CircuitBreakerError> =>
      // a key without a breaker is closed: asking builds none
      Effect.flatMap(keyed.keys, (keys) =>
        keys.includes(key) ?
          Effect.flatMap(keyed.get(key), (b) => stateOf(key, b)) :
          Effect.succeed({
            _tag: "Closed",
            key
          }))

    return Persisted.CircuitBreaker.of({
      [Persisted.TypeId]: Persisted.TypeId,
      execute: dual(2, execute),
      state,
      transitions: Stream.fromPubSub(hub)
    })
  })

export const make = (options: KeyedOptions & Options): Effect.Effect<Persisted.CircuitBreaker, never, Scope.Scope> => {
  const { maxOpenDuration, ...breakers } = options
  const bridge = maxOpenDuration === undefined ? {} : { maxOpenDuration }
  maxOpenOf(bridge) // validated eagerly, as the breakers' options are
  return Effect.flatMap(makeKeyed<string>(breakers), (keyed) => fromKeyed(keyed, bridge))
}

export const layer = (options: KeyedOptions & Options): Layer.Layer<Persisted.CircuitBreaker> =>
  Layer.effect(Persisted.CircuitBreaker, make(options))
