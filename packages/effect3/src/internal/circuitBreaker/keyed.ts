import type { Scope } from "effect"
import { Effect } from "effect"
import type { Keyed, KeyedOptions } from "../../CircuitBreaker.js"
import { build } from "./breaker.js"
import { forKey, resolve } from "./policy.js"
import * as Registry from "./registry.js"
import { env } from "./shell.js"

/**
 * Local breakers, one per key (see `registry.ts`); with `keyLabel`, a dropped breaker's state gauge goes back
 * to closed.
 */
export const keyed = <K = string>(options: KeyedOptions): Effect.Effect<Keyed<K>, never, Scope.Scope> => {
  const { keyLabel, maxKeys } = Registry.registryOptions("CircuitBreaker.keyed", options)
  const config = resolve(options) // validated once, eagerly
  return Effect.flatMap(
    env,
    (e) => Registry.make<K>(maxKeys, e.runtime, (key) => build(forKey(config, key, keyLabel), e))
  )
}
