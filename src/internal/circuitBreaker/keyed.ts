import { Effect, ExecutionStrategy, Exit, Scope } from "effect"
import { dual } from "effect/Function"
import type { CircuitBreaker, CircuitOpen, Keyed, KeyedOptions } from "../../CircuitBreaker.js"
import * as validate from "../validate.js"
import { buildInternal, type Built } from "./breaker.js"
import { forKey, resolve } from "./policy.js"
import { env } from "./shell.js"

interface Entry extends Built {
  readonly scope: Scope.CloseableScope
}

/**
 * A `Map` kept in least-recently-used order (a hit moves its key to the end), bounded by `maxKeys`: the
 * first key is the one to drop. Each breaker lives in a child scope of the registry, closed when it is
 * dropped, so its timer and subscribers go with it (and, with `keyLabel`, its state gauge goes back to closed).
 */
export const keyed = <K = string>(options: KeyedOptions): Effect.Effect<Keyed<K>, never, Scope.Scope> => {
  const maxKeys = validate.positiveInt("CircuitBreaker.keyed maxKeys", options.maxKeys ?? 1_000, {
    allowInfinity: true
  })
  if (options.keyLabel !== undefined && typeof options.keyLabel !== "boolean") {
    validate.invalid("CircuitBreaker.keyed keyLabel must be a boolean")
  }
  const keyLabel = options.keyLabel === true
  const config = resolve(options) // validated once, eagerly
  return Effect.gen(function*() {
    const parent = yield* Effect.scope
    const e = yield* env
    const entries = new Map<K, Entry>()

    const create = (key: K): Effect.Effect<CircuitBreaker> =>
      Effect.gen(function*() {
        const scope = yield* Scope.fork(parent, ExecutionStrategy.sequential)
        const built = yield* Scope.extend(buildInternal(forKey(config, key, keyLabel), e), scope)
        const raced = entries.get(key)
        if (raced !== undefined) {
          // the breaker built in the race shares the key's series: give it back to the one that stays
          yield* Scope.close(scope, Exit.void)
          raced.publish()
          return raced.breaker
        }
        entries.set(key, { ...built, scope })
        if (entries.size > maxKeys) {
          const [oldest, entry] = entries.entries().next().value!
          entries.delete(oldest)
          yield* Scope.close(entry.scope, Exit.void)
        }
        return built.breaker
      })

    const get = (key: K): Effect.Effect<CircuitBreaker> =>
      Effect.suspend(() => {
        const hit = entries.get(key)
        if (hit === undefined) return create(key)
        entries.delete(key)
        entries.set(key, hit)
        return Effect.succeed(hit.breaker)
      })

    const protect: Keyed<K>["protect"] = dual(
      2,
      <A, E, R>(self: Effect.Effect<A, E, R>, key: K): Effect.Effect<A, E | CircuitOpen, R> =>
        Effect.flatMap(get(key), (breaker) => breaker.protect(self))
    )

    return { get, protect, keys: Effect.sync(() => Array.from(entries.keys())) }
  })
}
