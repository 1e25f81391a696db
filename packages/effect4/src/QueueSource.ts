/**
 * Where a {@link Consumer} gets its messages: one small interface with an implementation per engine —
 * `QueueSource.memory` here, `PgQueue.make` (PostgreSQL) and `RedisStreamQueue.make` (Redis Streams), each
 * in an entry point of its own (`effect-resilience/PgQueue`, `effect-resilience/RedisStreamQueue`).
 *
 * Every source has the same at-least-once semantics, so a consumer (and its tests) do not care which runs:
 *
 * - `receive` claims visible messages and hides them for the visibility timeout; each claim adds one to
 *   the message's receive count. A message that is neither acknowledged nor released in time becomes
 *   visible again — that is how the work of a consumer that crashed is picked up by another. Its next claim
 *   marks it a suspect and, for a caller that runs suspects alone (`runsSuspectsAlone`, as `Consumer.run`
 *   does), gives that lost receive back unless its handler was running alone (`markAlone`).
 * - `ack` deletes a message (the work is done), `release` makes it visible again (after an optional
 *   delay), `deadLetter` moves it to the source's dead-letter queue with a reason, atomically.
 * - `extend` (as SQS's `ChangeMessageVisibility`) hides the message for one more visibility timeout from now:
 *   a consumer extends a message while its handler still runs, so a slow handler is not run twice.
 * - Each delivery carries a `receipt`; `ack`, `extend`, `release` and `deadLetter` do nothing (and answer
 *   `false`) when the message was claimed again since (a stale receipt), each in one atomic step, so a slow
 *   consumer cannot disturb the one that holds the message now.
 * - Sources never deduplicate: the same `id` sent twice is delivered twice. Consumers must be idempotent.
 *
 * @since 1.0.0
 */
import type { Cause, Duration, Effect } from "effect"
import type { DeadLetterQueue } from "./DeadLetter.js"
import type { Fields } from "./internal/errorFields.js"
import * as internal from "./internal/queue/queueSource.js"

/**
 * One delivery of a message.
 *
 * @since 1.0.0
 * @category models
 */
export interface Message<A = unknown> {
  /** The message's unique id, chosen by the sender: the key an idempotent consumer remembers. */
  readonly id: string
  /** The aggregate key (e.g. an order id) the message belongs to, when the sender gave one. */
  readonly key: string | undefined
  readonly body: A
  /**
   * How many times the message has been received, this delivery included (1 on the first) — not counting the
   * deliveries given back unprocessed (released with `undoReceive`), nor those lost with a consumer that died
   * while the message was not running alone in it (see `suspect`). `maxReceiveCount` bounds it.
   */
  readonly receiveCount: number
  /**
   * The message's previous delivery was lost with its consumer — the process died or the visibility timeout ran
   * out before an ack, release or dead-letter — so it may be what killed that process. `Consumer.run` runs a
   * suspect alone: once the handlers running have ended, with no other handler started and nothing more claimed
   * until it is settled, its source told so first (`markAlone`); lost again then, the delivery is charged to it.
   * Cleared once a handler of it returns. Absent on sources that do not track it (read as `false`).
   */
  readonly suspect?: boolean
  /** When the source first saw the message (epoch ms). */
  readonly enqueuedAt: number
  /** When this delivery was claimed (epoch ms, the consumer's `Clock`). */
  readonly receivedAt: number
  /** The error a consumer recorded when it last released the message, if any. */
  readonly lastError: string | undefined
  /** Identifies this delivery to `ack`, `extend`, `release` and `deadLetter`. Opaque. */
  readonly receipt: string
}

/**
 * A message to send.
 *
 * @since 1.0.0
 * @category models
 */
export interface Outgoing<A = unknown> {
  readonly id: string
  readonly body: A
  readonly key?: string
}

/**
 * @since 1.0.0
 * @category models
 */
export interface ReceiveOptions {
  /**
   * The caller promises to run every `Message.suspect` it receives alone — with no other handler running beside
   * it in its process, after `markAlone` — as `Consumer.run` does. Then a delivery it loses while merely holding
   * the message (buffered, or running beside other handlers: its process died and no one can tell which handler
   * killed it) is given back when the message is claimed again, instead of charged: a poison is caught when it
   * runs alone. Without it (a loop of your own), every lost delivery is charged. Default: false.
   */
  readonly runsSuspectsAlone?: boolean
}

/**
 * @since 1.0.0
 * @category models
 */
export interface ReleaseOptions {
  /** How long the message stays invisible before it may be received again. Default: 0. */
  readonly delay?: Duration.Input
  /** The error to remember with the message (it becomes `lastError` of the next delivery). */
  readonly error?: string
  /** Takes this delivery back off the receive count (for messages released unprocessed at shutdown). */
  readonly undoReceive?: boolean
}

/**
 * The engine behind a source failed (unreachable, timed out, corrupt data).
 *
 * `new QueueError({ … })` takes `Fields<QueueError>`: the fields that the interface {@link QueueError} declares,
 * without `_tag`.
 *
 * @since 1.0.0
 * @category errors
 */
export const QueueError: new(args: Fields<QueueError>) => QueueError = internal.QueueError

/**
 * @since 1.0.0
 * @category errors
 */
export interface QueueError extends Cause.YieldableError {
  readonly _tag: "QueueError"
  /** The queue's name. */
  readonly queue: string
  /** What failed, e.g. `"receive"` or `"ack"`. */
  readonly operation: string
  /** The engine's error behind it. */
  readonly cause: unknown
}

/**
 * @since 1.0.0
 * @category models
 */
export interface QueueSource<A = unknown> {
  /** Names the queue in metrics, logs and errors. */
  readonly name: string
  /** How long a received message stays invisible to other receivers. */
  readonly visibilityTimeout: Duration.Duration
  /**
   * Enqueues the messages. The durable sources store bodies as JSON: a body `JSON.stringify` cannot
   * carry (`undefined`, a function, a cycle, a bigint) fails the whole call with a `QueueError` and
   * nothing is written.
   */
  readonly send: (messages: ReadonlyArray<Outgoing<A>>) => Effect.Effect<void, QueueError>
  /**
   * Claims up to `max` visible messages, oldest first; an empty array when there are none (never waits).
   * A durable source moves a claimed message whose stored body is not JSON straight to the dead-letter
   * queue (reason `corrupt body: <parse error>`, the raw text kept as the body) instead of returning it.
   */
  readonly receive: (max: number, options?: ReceiveOptions) => Effect.Effect<ReadonlyArray<Message<A>>, QueueError>
  /** Deletes the message; `false` when it was already gone or the receipt is stale. */
  readonly ack: (message: Message<A>) => Effect.Effect<boolean, QueueError>
  /**
   * Deletes several messages in one engine call, each fenced by its own receipt as `ack` is: whether each was
   * deleted, in order. Unlike `ack`, it never joins a transaction of the caller: `Consumer.run` acknowledges
   * the messages it handled with it, in groups. Optional: a source without it has them acknowledged with
   * `ack`, one call each. The library's sources hold it as a property that object spread does not copy: a
   * wrapper written `{ ...source, ack: counted }` is acknowledged through its own `ack`, never around it; to
   * keep grouped acks, a wrapper names `ackMany` itself (`ackMany: (ms) => counted(source.ackMany!(ms))`).
   */
  readonly ackMany?: (messages: ReadonlyArray<Message<A>>) => Effect.Effect<ReadonlyArray<boolean>, QueueError>
  /**
   * Hides the message for one more visibility timeout, counted from now (the receive count is unchanged);
   * `false` when the receipt is stale. Every source of this library has it; a source of your own may leave it
   * out, and then `Consumer.run` refuses a handler time limit longer than the visibility timeout.
   */
  readonly extend?: (message: Message<A>) => Effect.Effect<boolean, QueueError>
  /**
   * Records, fenced by the receipt as `extend` is, that the message's handler is about to run with no other
   * handler beside it in its process, and hides the message for one more visibility timeout from now: should
   * this delivery be lost (the process dies), it is charged to this message when it is claimed again, where a
   * delivery lost while merely claimed beside others is not. `false` when the receipt is stale. `Consumer.run`
   * calls it before it runs a `Message.suspect` alone. Optional: without it, `Consumer.run` still runs suspects
   * alone, and what is charged is the source's own business.
   */
  readonly markAlone?: (message: Message<A>) => Effect.Effect<boolean, QueueError>
  /**
   * Makes the message visible again; `false` when the receipt is stale. With a verdict (no `undoReceive`: its
   * handler returned) it clears `Message.suspect`; unprocessed (`undoReceive`) it keeps it.
   */
  readonly release: (message: Message<A>, options?: ReleaseOptions) => Effect.Effect<boolean, QueueError>
  /** Moves the message to the dead-letter queue, atomically; `false` when the receipt is stale. */
  readonly deadLetter: (message: Message<A>, reason: string) => Effect.Effect<boolean, QueueError>
  /** The dead-letter queue of this source. */
  readonly deadLetters: DeadLetterQueue<A>
}

/**
 * @since 1.0.0
 * @category models
 */
export interface MemoryOptions {
  /**
   * How long a received message stays invisible (measured with the `Clock`, so `TestClock` drives it).
   * At least 1 millisecond (rounded up to whole milliseconds).
   */
  readonly visibilityTimeout: Duration.Input
  /** Default: `"memory"`. */
  readonly name?: string
}

/**
 * A source in process memory, built on an Effect `Queue` of visible messages and a timer heap of the
 * invisible ones; visibility timeouts and delays use the `Clock`. For tests and single-process use: its
 * messages are lost with the process.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { QueueSource } from "effect-resilience"
 *
 * const program = Effect.gen(function*() {
 *   const source = yield* QueueSource.memory<{ readonly to: string }>({ visibilityTimeout: "30 seconds" })
 *   yield* source.send([{ id: "mail-1", body: { to: "ada@example.com" } }])
 *   const [message] = yield* source.receive(10)
 *   if (message !== undefined) yield* source.ack(message)
 * })
 * ```
 *
 * @since 1.0.0
 * @category constructors
 */
export const memory: <A = unknown>(options: MemoryOptions) => Effect.Effect<QueueSource<A>> = internal.memory
