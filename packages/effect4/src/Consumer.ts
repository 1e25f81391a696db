/**
 * At-least-once consumers: pull messages from a {@link QueueSource}, run a handler under the library's
 * retry and deadline, acknowledge only after the handler returned, and move poison messages to the
 * dead-letter queue. Because every queue may deliver a message twice (a crash between the work and the
 * acknowledgement is enough), handlers must be idempotent: `idempotent` of the `effect-resilience/Consumer/Sql`
 * entry point records the message id in the same SQL transaction as the handler's writes, and
 * {@link idempotentMemory} keeps ids in memory.
 *
 * @since 1.0.0
 */
import type { Duration, Effect, Metric, Option, Scope } from "effect"
import * as idem from "./internal/queue/consumer/idempotent.js"
import * as internal from "./internal/queue/consumer/run.js"
import * as metrics from "./internal/queue/metrics.js"
import type { Message, QueueSource } from "./QueueSource.js"
import type * as Retry from "./Retry.js"

/**
 * @since 1.0.0
 * @category models
 */
export interface Options<A, E, R, R2 = never> {
  readonly source: QueueSource<A>
  /**
   * Handles one message. Its effect must be durable when it returns: the message is acknowledged then.
   * Fail with `Failure.Retryable` for what may work when tried again, `Failure.Fatal` for what never will.
   */
  readonly handler: (message: Message<A>) => Effect.Effect<unknown, E, R>
  /**
   * Receives after which a message that still fails goes to the dead-letter queue; an integer >= 1.
   * A message received more often than this (its consumers kept crashing while it ran alone) is dead-lettered
   * on receipt, without running the handler. A crash is charged only to a message running alone: one whose
   * previous delivery was lost with its consumer (`Message.suspect`) runs with no other handler beside it.
   */
  readonly maxReceiveCount: number
  /** Messages handled at once; an integer >= 1. Default: 1. */
  readonly concurrency?: number
  /** Retries of `Retryable` failures within one delivery (`Retry.retry`). Default: none. */
  readonly retry?: Retry.Options<R2>
  /**
   * The time limit of one delivery, retries included (`Deadline.within`): a handler still running then is
   * interrupted and fails with `DeadlineExceeded`, a failed delivery like any other. While the handler runs,
   * the consumer extends its message's visibility (`QueueSource.extend`) whenever a third of the visibility
   * timeout is left, so a limit longer than the visibility timeout does not let the message run twice.
   * Finite. Default: the source's visibility timeout. A source without `extend` refuses a longer limit.
   */
  readonly timeout?: Duration.Input
  /**
   * How long closing the consumer's scope waits for the handlers still running; then they are interrupted
   * (their messages are not acknowledged: they come back after the visibility timeout), and closing waits at
   * most one second more. Finite. Default: `timeout`, at most 10 seconds.
   */
  readonly shutdownGrace?: Duration.Input
  /**
   * How long a failed message stays invisible before it is received again. A function sees the message
   * (e.g. to back off by `receiveCount`). Default: 0.
   */
  readonly redeliveryDelay?: Duration.Input | ((message: Message<A>) => Duration.Input)
  /**
   * Messages claimed ahead of the workers; an integer >= 1. At most `bufferSize + concurrency` messages
   * are held at once (buffered or being handled; up to as many again may be waiting for their
   * acknowledgement); the poller claims no more until some finish. Default: `concurrency`.
   */
  readonly bufferSize?: number
  /** Messages claimed per `receive`. Default: `min(bufferSize + concurrency, 32)`. */
  readonly batchSize?: number
  /** How long the poller waits after finding the queue empty. Default: 100 ms. */
  readonly pollInterval?: Duration.Input
  /**
   * Hands every message of one key to the same worker, so messages of a key are handled one at a
   * time, in the order they were received. (A redelivered message can still overtake: order is best
   * effort under failures.) Default: false.
   */
  readonly orderedByKey?: boolean
  /** Called after a message was moved to the dead-letter queue, e.g. to alert. */
  readonly onDeadLetter?: (message: Message<A>, reason: string) => Effect.Effect<void>
}

/**
 * Counters of one consumer since it started.
 *
 * @since 1.0.0
 * @category models
 */
export interface Stats {
  readonly received: number
  /** Handled and acknowledged. */
  readonly processed: number
  /** Moved to the dead-letter queue. */
  readonly deadLettered: number
  /** Released for redelivery after a failure. */
  readonly released: number
  /**
   * Left in flight by an interrupted handler or acknowledgement (they come back after the visibility
   * timeout), or skipped unhandled because they waited in the buffer until their visibility timeout ran out.
   */
  readonly abandoned: number
  /** Visibility extensions made for handlers that were still running. */
  readonly extended: number
  /**
   * Suspects handled alone: messages whose previous delivery was lost with its consumer (`Message.suspect`), run
   * with no other handler beside them.
   */
  readonly ranAlone: number
  /** Being handled now. */
  readonly handling: number
  /** Claimed and waiting for a worker. */
  readonly buffered: number
}

/**
 * A running consumer.
 *
 * @since 1.0.0
 * @category models
 */
export interface Consumer {
  /** The source's name. */
  readonly source: string
  readonly stats: Effect.Effect<Stats>
}

/**
 * Runs a consumer for as long as the scope lives.
 *
 * What happens to a message whose handler did not succeed:
 * - `Retryable` failures are retried within the delivery by `retry` (when given);
 * - a `Fatal` failure moves the message to the dead-letter queue at once: trying again cannot help;
 * - any other outcome — retries exhausted, another typed error, a defect, the time limit (`timeout`,
 *   by default the visibility timeout) — releases the message for redelivery after `redeliveryDelay`,
 *   until it was received `maxReceiveCount` times; then it is dead-lettered with the last error as its reason;
 * - an interrupted handler leaves the message in flight, as a crash would: it comes back after the
 *   source's visibility timeout.
 *
 * A process that dies holds messages it never settles. Their next claim charges that lost delivery only to a
 * message that was running alone; the others get their receive back, and every one of them comes back a
 * suspect (`Message.suspect`), which the consumer runs alone: once the handlers running have ended, with no
 * other handler started and nothing more claimed until it is settled. So a healthy message is never charged for
 * a crash beside it, and a poison is dead-lettered after `maxReceiveCount` crashes of its own.
 *
 * A failing or hanging message never blocks the ones behind it: it is released or dead-lettered, at the
 * latest when its time limit runs out, and the workers move on. While a handler runs, its message's
 * visibility is extended, so a slow handler within its limit is not handed to a second worker. When the scope
 * closes, the consumer stops claiming, releases the messages it buffered, waits up to `shutdownGrace` for the
 * ones being handled, then interrupts them (they are not acknowledged) and waits at most one second more.
 *
 * Metrics (label `queue`): `effect_resilience_queue_received_total`, `effect_resilience_queue_processed_total`,
 * `effect_resilience_queue_dead_lettered_total` (label `reason`), `effect_resilience_queue_released_total`,
 * `effect_resilience_queue_visibility_extended_total`, and the source's `effect_resilience_queue_dlq_depth` and
 * `effect_resilience_queue_redriven_total` (docs/observability.md). Each handler runs in a `queue.handle` span.
 *
 * Throws `IllegalArgumentError` when a count is not an integer >= 1, a duration is invalid, or `timeout`
 * is longer than the visibility timeout of a source that cannot extend it (no `extend`).
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Backoff, Consumer, Failure, QueueSource } from "effect-resilience"
 *
 * declare const sendEmail: (to: string) => Effect.Effect<void, { readonly status: number }>
 *
 * const program = Effect.gen(function*() {
 *   const source = yield* QueueSource.memory<{ readonly to: string }>({ visibilityTimeout: "30 seconds" })
 *   yield* Consumer.run({
 *     source,
 *     handler: (message) => sendEmail(message.body.to).pipe(Failure.retryWhen((e) => e.status >= 500)),
 *     concurrency: 8,
 *     maxReceiveCount: 5,
 *     retry: { schedule: Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" }), maxAttempts: 3 },
 *     timeout: "10 seconds"
 *   })
 *   yield* Effect.never
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const run: <A, E, R, R2 = never>(
  options: Options<A, E, R, R2>
) => Effect.Effect<Consumer, never, Scope.Scope | R | R2> = internal.run

/**
 * The in-memory counterpart of `idempotent` (entry point `effect-resilience/Consumer/Sql`), for tests and
 * handlers whose effects live in the same process: ids are kept in a `Set` (pass your own to share or inspect
 * it). Two deliveries of one id never run at once: the second waits, then skips.
 *
 * Building it is an effect, run once where the consumer is built: each run makes a new store, so a store
 * built per message would remember nothing. (That is why it is not a plain function: written inside a
 * handler, `Consumer.idempotentMemory(f)(message)` does not compile.)
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { Consumer, QueueSource } from "effect-resilience"
 *
 * const totals = new Map<string, number>()
 * const program = Effect.gen(function*() {
 *   const source = yield* QueueSource.memory<{ readonly amount: number }>({ visibilityTimeout: "30 seconds" })
 *   const handler = yield* Consumer.idempotentMemory((message: QueueSource.Message<{ readonly amount: number }>) =>
 *     Effect.sync(() => totals.set(message.id, message.body.amount))
 *   )
 *   yield* Consumer.run({ source, handler, maxReceiveCount: 5 })
 *   yield* Effect.never
 * }).pipe(Effect.scoped)
 * ```
 *
 * @since 1.0.0
 * @category combinators
 */
export const idempotentMemory: <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options?: { readonly processed?: Set<string> }
) => Effect.Effect<(message: Message<A>) => Effect.Effect<Option.Option<B>, E, R>> = idem.idempotentMemory

/**
 * Messages handled and acknowledged (`effect_resilience_queue_processed_total`), labelled `queue`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const processedTotal: Metric.Counter<number> = metrics.processed

/**
 * Messages released for redelivery after a failure (`effect_resilience_queue_released_total`), labelled `queue`.
 *
 * @since 1.0.0
 * @category metrics
 */
export const releasedTotal: Metric.Counter<number> = metrics.released
