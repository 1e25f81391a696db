/**
 * The breaker suites' part of the Effect 3 edition's adapter (test/edition/): what the CircuitBreaker and
 * CircuitBreaker/Redis suites need that each edition spells or keeps differently. The Effect 4 edition's
 * test/edition/breaker.ts exports the same names.
 */
import { Chunk, Effect, Queue } from "effect"
import { effect3Replica } from "../../../contract/support/fleetProcesses.js"
import type { CircuitBreaker } from "../../src/CircuitBreaker.js"

/** What `breaker.subscribe` gives (Effect 3: a `Queue.Dequeue<Transition>`; Effect 4: a `PubSub.Subscription`). */
export type Subscription = Effect.Effect.Success<CircuitBreaker["subscribe"]>

/** The next transition of a subscription, waiting for one (Effect 3: `Queue.take`; Effect 4: `PubSub.take`). */
export const takeTransition = (subscription: Subscription) => Queue.take(subscription)

/** Every transition a subscription holds now (Effect 3: `Queue.takeAll`, a `Chunk`; Effect 4: `PubSub.takeAll`). */
export const takeAllTransitions = (subscription: Subscription) =>
  Effect.map(Queue.takeAll(subscription), Chunk.toReadonlyArray)

/** The fleet breaker's Redis names and its config as the edition resolves it (src/internal, alike in both). */
export { channelOf, keysOf, resolveFleet } from "../../src/internal/circuitBreaker/redis.js"

/** This edition's fleet replica process (Effect 3: examples/fleet/replica.ts through tsx; Effect 4: its own). */
export const ownReplica = effect3Replica

/** Redis for the integration suites: its URL, service gating, key prefixes and failing servers (test/support). */
export { blackHole, closedPort, deleteKeys, hashTag, REDIS_URL, uniquePrefix } from "../support/redis.js"
export { describeRedis } from "../support/services.js"

/** The shared vectors' loader and types (packages/contract/vectors/format.ts, the same for both editions). */
export { type Json, load, type Outcome, type Step, type Vector } from "../../../contract/vectors/format.js"

/** The fleet's processes and redis-server (packages/contract/support, Effect-free, the same for both editions). */
export * as fleetProcesses from "../../../contract/support/fleetProcesses.js"
export * as redisServer from "../../../contract/support/redisServer.js"
