/**
 * The fleet breaker: one breaker state shared by every replica that uses the same `name`, kept in Redis.
 *
 * - closed: calls run with no Redis round trip; their outcomes are counted locally (`core/breakerFleet.ts`
 *   deltas) and flushed every `flushInterval`, or after `flushEvery` calls, by one Lua script that adds them
 *   to the fleet's window, opens the fleet breaker when the policy says so and replies the fleet state;
 * - a replica takes the fleet state from the replies of its own script calls only, whatever it believed
 *   before; the pub/sub message the script publishes on a transition only makes it flush at once
 *   (rate-limited: a burst, then one per `flushInterval`), as anyone who may publish on the channel can send one;
 * - half-open: every trial takes a permit in Redis (one round trip) and reports its outcome (another);
 * - Redis failing or slower than `timeout`: the replica switches to a local breaker (same policy, on the same
 *   shell), seeded with the fleet state it last knew, and rejoins when a flush is answered again.
 */
import type { Context, Scope } from "effect"
import { Duration, Effect, Layer, Random, Schedule } from "effect"
import type { CircuitBreaker } from "../../CircuitBreaker.js"
import type { Options } from "../../CircuitBreaker/Redis.js"
import * as redis from "../redis/client.js"
import { FleetBreaker, type Resources } from "./fleetBreaker.js"
import { channelOf, type FleetConfig, keysOf, resolveFleet } from "./fleetConfig.js"
import { Outages } from "./fleetFallback.js"
import type { Config } from "./policy.js"
import { register } from "./probe.js"
import * as Shell from "./shell.js"
import * as Subscriber from "./subscriber.js"

export { channelOf, keysOf, resolveFleet } from "./fleetConfig.js"

/**
 * Builds one replica's fleet breaker (of `key`, in a keyed registry) on `resources`, in the current scope:
 * before returning it listens to the breaker's channel and reads the fleet's state (or falls back at once when
 * Redis does not answer).
 */
export const buildOn = (
  config: Config,
  fleet: FleetConfig,
  key: string | undefined,
  resources: Resources,
  e: Shell.Env
): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { channels, client, outages } = resources
    const keys = keysOf(fleet.prefix, fleet.name, config.trip, key)
    const names = { scriptKeys: [keys.state, keys.window], channel: channelOf(client, keys.channel) }
    const token = `${(yield* Random.nextInt).toString(36)}${(yield* e.clock.currentTimeMillis).toString(36)}`
    const shell = yield* Shell.make(config, e, "closed", "shared")
    const annotations = key === undefined ? {} : { key }
    const replica = new FleetBreaker(shell, fleet, client, names, token, outages, annotations)
    yield* channels.listen(names.channel, replica.onMessage)
    // learn the fleet's state before the first call (or fall back at once when Redis does not answer)
    yield* replica.flush
    // a flush every `flushInterval` from the last (a fixed rate, not a pause after each: the staleness bound
    // in docs/distributed-breaker.md); the first ran above
    // (interruptible even when built in an uninterruptible region: a keyed registry builds its breakers so)
    yield* Effect.schedule(replica.tick, Schedule.fixed(Duration.millis(fleet.flushIntervalMillis))).pipe(
      Effect.interruptible,
      Effect.forkScoped
    )
    // registered last, so it runs first: the last counts go before the channel, the shell and the client
    yield* Effect.addFinalizer(() => replica.close)
    return register({
      protect: replica.protect,
      state: Effect.sync(() => replica.state()),
      changes: shell.changes,
      subscribe: shell.subscribe,
      isolate: replica.control("isolate"),
      reset: replica.control("reset"),
      snapshot: Effect.sync(() => replica.snapshot())
    }, () => replica.trialsRunning())
  })

export const build = (
  config: Config,
  fleet: FleetConfig,
  connection: redis.ClientOptions,
  e: Shell.Env
): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.gen(function*() {
    const client = yield* redis.acquire(connection)
    const channels = yield* Subscriber.make(client, fleet.timeoutMillis)
    const outages = new Outages(fleet.name, config.attributes, e.context)
    return yield* buildOn(config, fleet, undefined, { client, channels, outages }, e)
  })

export const make = (options: Options): Effect.Effect<CircuitBreaker, never, Scope.Scope> => {
  const resolved = resolveFleet(options)
  return Effect.flatMap(Shell.env, (e) => build(resolved.config, resolved.fleet, options.redis, e))
}

export const layer = <I>(tag: Context.Key<I, CircuitBreaker>, options: Options): Layer.Layer<I> => {
  const resolved = resolveFleet(options)
  return Layer.effect(tag, Effect.flatMap(Shell.env, (e) => build(resolved.config, resolved.fleet, options.redis, e)))
}
