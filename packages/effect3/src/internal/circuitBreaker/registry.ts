/**
 * One breaker per key, built on first use, for the local keyed breaker (`keyed.ts`) and the fleet one
 * (`redisKeyed.ts`): a `Map` kept in least-recently-used order (a hit moves its key to the end), bounded by
 * `maxKeys` (the first key is the one to drop). Each breaker lives in a child scope of the registry, closed when
 * it is dropped, so its timer, subscription and subscribers go with it.
 */
import type { Scope as ScopeType } from "effect"
import { Deferred, Effect, ExecutionStrategy, Exit, Runtime, Scope } from "effect"
import { dual } from "effect/Function"
import type { CircuitBreaker, CircuitOpen, Keyed } from "../../CircuitBreaker.js"
import * as validate from "../validate.js"

/** The registry's own options, validated. */
export const registryOptions = (
  what: string,
  options: { readonly maxKeys?: number; readonly keyLabel?: boolean }
): { readonly maxKeys: number; readonly keyLabel: boolean } => {
  const maxKeys = validate.positiveInt(`${what} maxKeys`, options.maxKeys ?? 1_000, { allowInfinity: true })
  if (options.keyLabel !== undefined && typeof options.keyLabel !== "boolean") {
    validate.invalid(`${what} keyLabel must be a boolean`)
  }
  return { maxKeys, keyLabel: options.keyLabel === true }
}

interface Entry {
  readonly breaker: CircuitBreaker
  readonly scope: Scope.CloseableScope
}

/**
 * A registry in the current scope. `build` makes the breaker of a key in the scope it is given; the first
 * use of a key builds it once, however many callers ask for it meanwhile (a fleet breaker's build is a round
 * trip to Redis). It is built in a fiber of `runtime` (the registry's: its logger and services, whichever
 * caller came first), so no caller's interruption leaves the others waiting for a build nobody finishes.
 */
export const make = <K>(
  maxKeys: number,
  runtime: Runtime.Runtime<never>,
  build: (key: K) => Effect.Effect<CircuitBreaker, never, ScopeType.Scope>
): Effect.Effect<Keyed<K>, never, ScopeType.Scope> =>
  Effect.gen(function*() {
    const parent = yield* Effect.scope
    const entries = new Map<K, Entry>()
    const building = new Map<K, Deferred.Deferred<CircuitBreaker>>()

    const add = (key: K, entry: Entry): Effect.Effect<void> => {
      entries.set(key, entry)
      if (entries.size <= maxKeys) return Effect.void
      const [oldest, dropped] = entries.entries().next().value!
      entries.delete(oldest)
      return Scope.close(dropped.scope, Exit.void)
    }

    const create = (key: K, done: Deferred.Deferred<CircuitBreaker>): Effect.Effect<CircuitBreaker> => {
      const built = Effect.gen(function*() {
        const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
        const breaker = yield* Scope.extend(build(key), scope)
        yield* add(key, { breaker, scope })
        return breaker
      }).pipe(Effect.onExit((exit) =>
        Effect.suspend(() => {
          building.delete(key)
          return Deferred.done(done, exit)
        })
      ))
      Runtime.runFork(runtime, built)
      return Deferred.await(done)
    }

    const get = (key: K): Effect.Effect<CircuitBreaker> =>
      Effect.suspend(() => {
        const hit = entries.get(key)
        if (hit !== undefined) {
          entries.delete(key)
          entries.set(key, hit)
          return Effect.succeed(hit.breaker)
        }
        const pending = building.get(key)
        if (pending !== undefined) return Deferred.await(pending)
        return Effect.flatMap(Deferred.make<CircuitBreaker>(), (done) =>
          Effect.suspend(() => {
            // another fiber may have started it while this one made its deferred
            const raced = building.get(key)
            if (raced !== undefined) return Deferred.await(raced)
            building.set(key, done)
            return create(key, done)
          }))
      })

    const protect: Keyed<K>["protect"] = dual(
      2,
      <A, E, R>(self: Effect.Effect<A, E, R>, key: K): Effect.Effect<A, E | CircuitOpen, R> =>
        Effect.flatMap(get(key), (breaker) => breaker.protect(self))
    )

    return { get, protect, keys: Effect.sync(() => Array.from(entries.keys())) }
  })
