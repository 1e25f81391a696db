/**
 * This library's circuit breakers presented as Effect 4's own breaker service (`CircuitBreaker` of
 * `effect/persistence`), so that `HttpClient.withCircuitBreaker` and anything else written against Effect's service
 * run on our breakers: every trip policy (time windows and slow calls included), `halfOpenPermits`,
 * `halfOpenTimeout`, metrics, `isolate`/`reset` and snapshots — or a fleet breaker shared through Redis
 * (`CircuitBreakerRedis.keyed`, on ioredis).
 *
 * Effect's service is keyed (`execute(self, { key, classify })`), so the bridge is built over a keyed registry of
 * ours, `CircuitBreaker.keyed` or `CircuitBreakerRedis.keyed`: one breaker per key, with the registry's options.
 *
 * - **Outcomes.** Effect's `classify` judges each call (by default: a success is a success, a failure a failure,
 *   an interruption ignored; `HttpClient.withCircuitBreaker` passes its HTTP classifier), and what it says is what
 *   the breaker records: the registry's `isFailure` and `isIgnored` are not asked. A `Failure` outcome's
 *   `retryAfter` (capped at `maxOpenDuration`) keeps the breaker open at least that long, as `openForAtLeast` does.
 *   A `classify` that fails or dies ignores the call, whose failure then carries both causes, as Effect's does.
 * - **Refusals** fail with Effect's `CircuitBreakerError`: reason `CircuitOpen` (`key`, our `retryAfter`) while
 *   open, `CircuitHalfOpen` (`key`) when every half-open permit is taken. Our breaker admits `halfOpenPermits`
 *   trials where Effect's admits one probe.
 * - **`state(key)`**: `Closed` for a key that has no breaker (asking builds none); `Open` with the time left and
 *   the openings since it last closed (`consecutiveOpenings`; infinite while isolated); `HalfOpen` with `probing`
 *   while trials run.
 * - **`transitions`**: every transition of every key's breaker since its first call through the bridge, as
 *   Effect's type has them (closed or half-open → open, open → half-open, half-open → closed; a `reset` of an open
 *   breaker is not in it), the last 128 kept for a slow reader as Effect's own do.
 *
 * There is no store to fail: a local breaker decides in memory, and a fleet breaker on Redis falls back to its local
 * breaker when Redis fails, so `CircuitBreakerStoreError` never occurs.
 *
 * This is its own entry point because `effect/persistence` loads Effect's Schema: the package root does not.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Layer, Scope } from "effect"
import type { CircuitBreaker as Persisted } from "effect/persistence"
import type { Keyed, KeyedOptions } from "../CircuitBreaker.js"
import * as internal from "../internal/circuitBreaker/persistence.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options {
  /**
   * The longest a `Failure` outcome's `retryAfter` keeps a breaker open (a hint from the dependency, such as a
   * 503's `Retry-After`); default 1 hour, as Effect's own breaker. A positive duration.
   */
  readonly maxOpenDuration?: Duration.Input
}

/**
 * Effect's `CircuitBreaker` service over one of our keyed registries, local or fleet. Its transitions are read for
 * as long as the scope lasts. Throws `IllegalArgumentError` for a `maxOpenDuration` that is not positive.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { HttpClient, HttpClientRequest } from "effect/http"
 * import { CircuitBreaker } from "effect-resilience"
 * import * as CircuitBreakerPersistence from "effect-resilience/CircuitBreaker/Persistence"
 *
 * const program = Effect.gen(function*() {
 *   const perOrigin = yield* CircuitBreaker.keyed<string>({
 *     trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "10 seconds" } }),
 *     openFor: "30 seconds",
 *     halfOpenPermits: 3,
 *     name: "upstreams"
 *   })
 *   const client = (yield* HttpClient.HttpClient).pipe(
 *     HttpClient.withCircuitBreaker({ breaker: yield* CircuitBreakerPersistence.fromKeyed(perOrigin) })
 *   )
 *   return yield* client.execute(HttpClientRequest.get("https://partner.example/orders"))
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const fromKeyed: (
  keyed: Keyed<string>,
  options?: Options
) => Effect.Effect<Persisted.CircuitBreaker, never, Scope.Scope> = internal.fromKeyed

/**
 * Builds a local keyed registry (`CircuitBreaker.keyed`) and presents it as Effect's `CircuitBreaker` service.
 * Throws `IllegalArgumentError` for invalid options.
 *
 * @since 1.0.0
 * @category constructors
 */
export const make: (
  options: KeyedOptions & Options
) => Effect.Effect<Persisted.CircuitBreaker, never, Scope.Scope> = internal.make

/**
 * {@link make} as a layer of Effect's `CircuitBreaker` service, for code that takes it from the context.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { CircuitBreaker as EffectCircuitBreaker } from "effect/persistence"
 * import { CircuitBreaker } from "effect-resilience"
 * import * as CircuitBreakerPersistence from "effect-resilience/CircuitBreaker/Persistence"
 *
 * declare const charge: Effect.Effect<string, Error>
 *
 * const program = Effect.gen(function*() {
 *   const breaker = yield* EffectCircuitBreaker.CircuitBreaker
 *   return yield* breaker.execute(charge, { key: "payments" })
 * }).pipe(
 *   Effect.provide(CircuitBreakerPersistence.layer({ trip: CircuitBreaker.consecutive(5), openFor: "30 seconds" }))
 * )
 * ```
 *
 * @since 1.0.0
 * @category layers
 */
export const layer: (options: KeyedOptions & Options) => Layer.Layer<Persisted.CircuitBreaker> = internal.layer
