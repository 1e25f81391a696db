/**
 * A {@link QueueSource} on a Redis stream with a consumer group: `XREADGROUP` claims new entries,
 * `XAUTOCLAIM` takes over entries that stayed pending longer than the visibility timeout (their consumer
 * died or stalled), the delivery count comes from the pending entries list (`XPENDING`), and poison
 * messages go to the stream `<stream>:dlq` (indexed by message id in the hash `<stream>:dlq:ids`).
 * Errors recorded on release live in the hash `<stream>:errors`. Acknowledged entries are deleted from
 * the stream (`XACK` + `XDEL`): the stream is a work queue for one group.
 *
 * Time: visibility is Redis's own clock — the idle time of a pending entry is kept by the server and
 * `XAUTOCLAIM` compares it with the timeout — so it is immune to clock skew between consumers, but
 * `TestClock` cannot drive it: tests of it need short real timeouts. A release delay is capped at the
 * visibility timeout (it is applied by rewinding the entry's idle time).
 *
 * The caller owns the `ioredis` client (its connection and its lifetime). Every call goes through the
 * library's one Redis adapter, as the Redis stores' do: scripts run as `EVALSHA` (reloaded after a
 * `NOSCRIPT`) and every call has a deadline (`timeout`). This entry point
 * (`effect-resilience/RedisStreamQueue`) imports `ioredis` (an optional peer dependency); the package
 * root does not.
 *
 * Redis Cluster: pass a `Cluster` client. Scripts touch the stream and its derived keys together, so these
 * must share one slot, and they do by construction: a stream name with a hash tag (`{orders}`) keeps the
 * names above (`{orders}:dlq`, …); any other name `orders` gets `{orders}:dlq`, `{orders}:dlq:ids` and
 * `{orders}:errors` on a Cluster (the tag `{orders}` hashes as the whole key `orders` does). A name with a `}`
 * but no hash tag is rejected on a Cluster. On one node the names are always the ones above. See
 * docs/redis.md.
 *
 * @since 0.1.0
 */
import type { Duration, Effect } from "effect"
import type { Cluster, Redis } from "ioredis"
import * as internal from "./internal/queue/redisStreamQueue.js"
import type { QueueError, QueueSource } from "./QueueSource.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface RedisOptions {
  /** An `ioredis` client you own (not one in subscriber mode): a `Redis`, or a `Cluster`. */
  readonly redis: Redis | Cluster
  /** The stream key (not empty). */
  readonly stream: string
  /**
   * How long a delivered entry may stay pending before another consumer may take it over. At least
   * 1 millisecond (rounded up to whole milliseconds).
   */
  readonly visibilityTimeout: Duration.DurationInput
  /** The consumer group, created at the start of the stream if missing. Default: `"consumers"`. */
  readonly group?: string
  /** This consumer's name in the group. Default: `consumer-<random id>`. Give a stable one per process. */
  readonly consumer?: string
  /**
   * How often `receive` looks for entries to take over with `XAUTOCLAIM` (by the caller's `Clock`).
   * Default: half the visibility timeout, at most 5 seconds.
   */
  readonly reclaimInterval?: Duration.DurationInput
  /** Names the queue in metrics and errors. Default: the stream key. */
  readonly name?: string
  /**
   * A Redis call not answered by then fails with `QueueError` (the command may still run on the server).
   * Default: 5 seconds. Longer than zero.
   */
  readonly timeout?: Duration.DurationInput
  /**
   * `{ replicas, timeout }`: `send` waits (`WAIT`) until that many replicas have the new entries, and fails
   * with `QueueError` when fewer did within `timeout` (shorter than `timeout` above) — the entries are then
   * in the stream but a failover may lose them. Without it (the default) a master that dies right after
   * acknowledging a send may take the entries with it: Redis replicates asynchronously. Acknowledgements
   * and deliveries are not waited for: losing one redelivers the message, which at-least-once allows.
   * See docs/reliability.md.
   */
  readonly waitReplicas?: { readonly replicas: number; readonly timeout: Duration.DurationInput }
}

/**
 * Builds the source, creating the consumer group (`XGROUP CREATE ... MKSTREAM`) if it does not exist.
 *
 * Throws `IllegalArgumentException` when called with an empty stream name, a visibility timeout under a
 * millisecond, a malformed duration, a `waitReplicas` with fewer than one replica or a timeout not between
 * zero and `timeout`, or — on a `Cluster` client — a stream name whose keys cannot share a slot.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import type { Redis } from "ioredis"
 * import { Consumer } from "effect-resilience"
 * import * as RedisStreamQueue from "effect-resilience/RedisStreamQueue"
 *
 * declare const redis: Redis
 *
 * const program = Effect.gen(function*() {
 *   const source = yield* RedisStreamQueue.make<{ readonly sku: string }>({
 *     redis,
 *     stream: "stock-updates",
 *     visibilityTimeout: "30 seconds",
 *     consumer: "worker-1"
 *   })
 *   yield* Consumer.run({ source, handler: (m) => Effect.log(m.body.sku), maxReceiveCount: 5 })
 *   yield* Effect.never
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: <A = unknown>(options: RedisOptions) => Effect.Effect<QueueSource<A>, QueueError> = internal.make
