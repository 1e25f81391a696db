/**
 * Dead-letter queues: where a {@link Consumer} puts poison messages — those whose handler failed `Fatal`,
 * or that were received `maxReceiveCount` times — with the reason, instead of dropping them or retrying
 * them forever. Every source has one; a message there means a person must look: list and inspect the
 * entries, fix the cause, then redrive them back to the source or purge them.
 *
 * @since 0.1.0
 */
import type { Effect, Metric, Option } from "effect"
import * as metrics from "./internal/queue/metrics.js"
import type { QueueError } from "./QueueSource.js"

/**
 * A dead-lettered message and why it is there.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeadLetter<A = unknown> {
  readonly id: string
  readonly key: string | undefined
  readonly body: A
  /** Why: the handler's last error rendered as text, and the receive count when the limit was reached. */
  readonly reason: string
  /** How many times the message had been received. */
  readonly receiveCount: number
  /** When the source first saw the message (epoch ms). */
  readonly firstSeenAt: number
  /** When the message was last received (epoch ms). */
  readonly lastSeenAt: number
  /** When it was moved to the dead-letter queue (epoch ms). */
  readonly deadLetteredAt: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface ListOptions {
  /** At most this many entries, oldest first. Default: 100. */
  readonly limit?: number
}

/**
 * The operations on a dead-letter queue. A message id appears at most once: dead-lettering an id that
 * is already there replaces the entry.
 *
 * Every operation that changes the queue also sets the `effect_resilience_queue_dlq_depth` gauge.
 *
 * @since 0.1.0
 * @category models
 */
export interface DeadLetterQueue<A = unknown> {
  /** The oldest entries. */
  readonly list: (options?: ListOptions) => Effect.Effect<ReadonlyArray<DeadLetter<A>>, QueueError>
  /** One entry by message id. */
  readonly inspect: (id: string) => Effect.Effect<Option.Option<DeadLetter<A>>, QueueError>
  /**
   * Moves entries back to the source as new messages (receive count 0), the given ids or every entry.
   * Returns how many moved.
   */
  readonly redrive: (ids?: ReadonlyArray<string>) => Effect.Effect<number, QueueError>
  /** Deletes entries, the given ids or every entry. Returns how many were deleted. */
  readonly purge: (ids?: ReadonlyArray<string>) => Effect.Effect<number, QueueError>
  /** How many entries there are; also sets the depth gauge. */
  readonly depth: Effect.Effect<number, QueueError>
}

/**
 * The number of messages in a dead-letter queue (`effect_resilience_queue_dlq_depth`), labelled `queue`.
 * Alarm on it: anything above zero needs a person.
 *
 * @since 0.1.0
 * @category metrics
 */
export const depthGauge: Metric.Metric.Gauge<number> = metrics.dlqDepth

/**
 * Messages moved to a dead-letter queue (`effect_resilience_queue_dead_lettered_total`), labelled `queue`
 * and `reason`: `"fatal"` or `"max-receives"` (by a consumer), or `"corrupt-body"` (by a durable source's
 * `receive`, for a stored body that is not JSON).
 *
 * @since 0.1.0
 * @category metrics
 */
export const deadLetteredTotal: Metric.Metric.Counter<number> = metrics.deadLettered
