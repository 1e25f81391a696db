/**
 * Fleet breakers, one per key: each a fleet breaker of its own in Redis (its name and key in the hash tag, so
 * keys spread over a Cluster's slots), all on one client and one pub/sub connection, in a registry bounded as
 * the local keyed breaker's is (`registry.ts`).
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import type { Keyed } from "../../CircuitBreaker.js"
import type { KeyedOptions } from "../../CircuitBreaker/Redis.js"
import * as redis from "../redis/client.js"
import { resolveFleet } from "./fleetConfig.js"
import { Outages } from "./fleetFallback.js"
import { forKey } from "./policy.js"
import { buildOn } from "./redis.js"
import * as Registry from "./registry.js"
import * as Shell from "./shell.js"
import * as Subscriber from "./subscriber.js"

export const keyed = (options: KeyedOptions): Effect.Effect<Keyed<string>, never, Scope.Scope> => {
  const { keyLabel, maxKeys } = Registry.registryOptions("CircuitBreaker/Redis keyed", options)
  const { maxKeys: _1, keyLabel: _2, ...single } = options
  const resolved = resolveFleet(single)
  const { config } = resolved
  // an idle key's breaker sends nothing: a registry costs script calls for the keys in use only
  const fleet = { ...resolved.fleet, skipIdle: true }
  return Effect.gen(function*() {
    const e = yield* Shell.env
    const client = yield* redis.acquire(options.redis)
    const channels = yield* Subscriber.make(client, fleet.timeoutMillis)
    // without a key label, the keys share one fallback gauge (and one log line per outage)
    const shared = keyLabel ? undefined : new Outages(fleet.name, config.labels)
    return yield* Registry.make<string>(maxKeys, e.runtime, (key) => {
      const keyConfig = forKey(config, key, keyLabel)
      const outages = shared ?? new Outages(fleet.name, keyConfig.labels)
      return buildOn(keyConfig, fleet, key, { client, channels, outages }, e)
    })
  })
}
