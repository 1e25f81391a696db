/**
 * A circuit breaker shared by every replica of a service: the replicas that build a breaker with the same
 * `name` on the same Redis (or Redis Cluster) see one state. When the fleet's failures cross the trip policy,
 * every replica opens; in half-open at most `halfOpenPermits` trials run across the fleet, and their outcome
 * closes or reopens it for all. This entry point imports `ioredis` (an optional peer dependency); the
 * package root does not.
 *
 * A closed breaker pays no Redis round trip per call: each replica counts its calls and flushes the counts
 * every `flushInterval` (or after `flushEvery` calls) with one script that also answers the fleet's state,
 * and a replica's state is what those replies say, whatever it believed before (Redis restored from an older
 * snapshot included). A transition is published on a pub/sub channel, which makes every replica flush at once
 * — never believed itself, and rate-limited, so whoever may publish there can neither hold the fleet open nor
 * make replicas loop. When Redis fails or is slower than `timeout`, a replica runs on a local breaker with
 * the same options until Redis answers again. See `docs/distributed-breaker.md`.
 *
 * @since 0.1.0
 */
import type { Context, Duration, Effect, Layer, Metric, Scope } from "effect"
import type * as CircuitBreakerModule from "../CircuitBreaker.js"
import * as metrics from "../internal/circuitBreaker/metrics.js"
import * as internal from "../internal/circuitBreaker/redis.js"
import * as keyedInternal from "../internal/circuitBreaker/redisKeyed.js"
import type * as redisOptions from "../internal/redis/options.js"

/**
 * The options of `CircuitBreaker.make` (but `initialState`: the state lives in Redis and outlives every
 * replica), with a required `name`, and the rest below. `halfOpenTimeout` is fleet-wide: the half-open
 * period's deadline is kept in Redis, and the fleet reopens when its trials, on whichever replica, are still
 * running by then. So is `halfOpenFailureRate`: the period's sample is every replica's trials, counted in
 * Redis. `isIgnored` applies where each call ends. `CircuitOpen.lastFailure` is what this replica knows: set
 * when its own calls opened the fleet, absent when another replica's did.
 *
 * - `redis`: a client you own (`{ client }`, an ioredis `Redis` or `Cluster`, never closed by the breaker)
 *   or `{ url }` / `{ cluster }` (startup nodes) to connect to (closed with the breaker's scope;
 *   `redisOptions` / `clusterOptions` go to ioredis). Exactly one of the three. The breaker
 *   also opens one subscriber connection of its own (a `duplicate` of the client), closed with the scope.
 *
 * `consecutive(n)` counts fleet-wide in flush order: a replica's flush adds its failures to the fleet's run,
 * or restarts the run from the failures after its last success when it saw one. Replicas' calls between two
 * flushes are not ordered against each other, so it is an approximation of "n failures in a row";
 * `failureRate` with a time window is exact up to the flush interval (calls count in the bucket of the flush
 * that reports them), and a count window keeps the last `calls` calls in flush order.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends Omit<CircuitBreakerModule.Options, "name" | "initialState"> {
  /** The breaker's identity in the fleet (and its metrics' `breaker` label); required, non-empty. */
  readonly name: string
  readonly redis: redisOptions.Connection
  /** Put before every key and the channel (default `"cb:"`); must not contain `{` or `}`. */
  readonly prefix?: string
  /** How often a replica sends its counts and reads the fleet's state; default 100 ms. */
  readonly flushInterval?: Duration.DurationInput
  /** A replica also flushes after this many calls since its last flush; default 1,000. */
  readonly flushEvery?: number
  /**
   * A Redis call not answered by then counts as Redis failing: the replica falls back to its local breaker.
   * Default 500 ms. It is also the longest a half-open trial waits for its permit.
   */
  readonly timeout?: Duration.DurationInput
  /**
   * How long a half-open trial holds its permit in Redis within its period: the permit of a trial whose
   * replica died (and never reported) is given to another after it. Default 30 seconds; make it longer than
   * your slowest call. (`halfOpenTimeout`, by default shorter, reopens the fleet when a period's trials have
   * not all ended by then.)
   */
  readonly trialLease?: Duration.DurationInput
}

/**
 * Builds a fleet breaker that lives as long as the scope: the same `CircuitBreaker` as `CircuitBreaker.make`
 * builds. Before returning it subscribes to the breaker's channel and reads the fleet's state (waiting at most
 * `timeout` for each; a Redis that does not answer makes it start on its local breaker). Throws `IllegalArgumentException` for invalid options, a missing
 * `name` or a missing `redis`.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { CircuitBreaker } from "effect-resilience"
 * import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
 *
 * declare const fetchPrices: Effect.Effect<ReadonlyArray<number>, Error>
 *
 * const options: CircuitBreaker.Options = {
 *   trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "10 seconds" } }),
 *   openFor: "30 seconds",
 *   name: "prices"
 * }
 *
 * const program = Effect.gen(function*() {
 *   // was: const breaker = yield* CircuitBreaker.make(options)
 *   const breaker = yield* CircuitBreakerRedis.make({ ...options, name: "prices", redis: { url: "redis://127.0.0.1:6379" } })
 *   return yield* breaker.protect(fetchPrices)
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: (options: Options) => Effect.Effect<CircuitBreakerModule.CircuitBreaker, never, Scope.Scope> =
  internal.make

/**
 * A layer building one fleet breaker for a tag of your choosing (as `CircuitBreaker.layer`).
 *
 * @example
 * ```ts
 * import { Context, Effect } from "effect"
 * import { CircuitBreaker } from "effect-resilience"
 * import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
 *
 * class PaymentsBreaker extends Context.Tag("PaymentsBreaker")<PaymentsBreaker, CircuitBreaker.CircuitBreaker>() {}
 *
 * const PaymentsBreakerLive = CircuitBreakerRedis.layer(PaymentsBreaker, {
 *   trip: CircuitBreaker.consecutive(3),
 *   openFor: "30 seconds",
 *   name: "payments",
 *   redis: { url: "redis://127.0.0.1:6379" }
 * })
 *
 * declare const charge: Effect.Effect<string, Error>
 *
 * const program = Effect.flatMap(PaymentsBreaker, (breaker) => breaker.protect(charge)).pipe(
 *   Effect.provide(PaymentsBreakerLive)
 * )
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: <I>(tag: Context.Tag<I, CircuitBreakerModule.CircuitBreaker>, options: Options) => Layer.Layer<I> =
  internal.layer

/**
 * The options of {@link keyed}: those of {@link make} (`name` names the registry; each key's breaker is
 * `name` and the key in Redis), and the registry's own, as in `CircuitBreaker.KeyedOptions`.
 *
 * @since 0.1.0
 * @category models
 */
export interface KeyedOptions extends Options {
  /**
   * Breakers kept at most in this replica; beyond it the least recently used one is dropped (its last counts
   * flushed; its state stays in Redis, so the key finds it again when it comes back). An integer >= 1 or
   * `Infinity`; default 1,000.
   */
  readonly maxKeys?: number
  /**
   * Label each breaker's metrics with its key (`key`), as `CircuitBreaker.KeyedOptions` says — for keys from
   * a small, known set only. Default `false`: the keys share the `breaker` label, the fallback gauge is 1 while
   * any key runs on its local breaker, and an outage is logged once, not once per key.
   */
  readonly keyLabel?: boolean
}

/**
 * Fleet breakers, one per key — per origin, per tenant —, the same `CircuitBreaker.Keyed<string>` as
 * `CircuitBreaker.keyed` builds: each key is a fleet breaker of its own, shared by every replica whose
 * registry has the same `name`. The keys share one Redis client and one pub/sub connection; a key's breaker
 * is built on its first use (one round trip to Redis, awaited by every caller of that key meanwhile), and one
 * that no call used since its last flush sends nothing. Throws `IllegalArgumentException` for invalid options.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { CircuitBreaker } from "effect-resilience"
 * import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
 *
 * declare const fetchUrl: (url: URL) => Effect.Effect<string, Error>
 *
 * const program = Effect.gen(function*() {
 *   const perOrigin = yield* CircuitBreakerRedis.keyed({
 *     trip: CircuitBreaker.failureRate({ threshold: 0.5, minimumCalls: 20, window: { duration: "10 seconds" } }),
 *     openFor: "30 seconds",
 *     name: "upstreams",
 *     redis: { url: "redis://127.0.0.1:6379" },
 *     maxKeys: 100
 *   })
 *   const url = new URL("https://api.example.com/prices")
 *   return yield* fetchUrl(url).pipe(perOrigin.protect(url.origin))
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const keyed: (options: KeyedOptions) => Effect.Effect<CircuitBreakerModule.Keyed<string>, never, Scope.Scope> =
  keyedInternal.keyed

/**
 * 1 while a replica's breaker runs on its local breaker because Redis failed or was slower than `timeout`,
 * 0 while it shares the fleet's state; labelled `breaker`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const fleetFallbackGauge: Metric.Metric.Gauge<number> = metrics.fleetFallback

/**
 * Times a replica's breaker fell back to its local breaker; labelled `breaker`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const fleetFallbacksTotal: Metric.Metric.Counter<number> = metrics.fleetFallbacks
