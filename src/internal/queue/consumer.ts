import type { Scope } from "effect"
import { Cause, Clock, Duration, Effect, Exit, Fiber, Option, Queue } from "effect"
import type { Consumer, Options, Stats } from "../../Consumer.js"
import * as visibilityRules from "../../core/visibility.js"
import type { Message, QueueError } from "../../QueueSource.js"
import * as deadline from "../deadline.js"
import { isFatal } from "../failure.js"
import * as retry from "../retry.js"
import * as validate from "../validate.js"
import { deadLettered, labels, processed, released } from "./metrics.js"
import { renderCause } from "./shared.js"

const NO_ERROR = "none recorded (the consumer stopped before it finished: a crash or a visibility timeout)"

/**
 * The poller claims messages only while fewer than `bufferSize + concurrency` are held (buffered or
 * being handled): that bound is the backpressure, and it also keeps claimed messages from waiting in the
 * buffer long enough for their visibility timeout to run out. Workers take from one shared buffer, or,
 * with `orderedByKey`, each from its own partition so that one key is handled by one worker in order.
 *
 * Shutdown (the scope closes): the poller stops, buffered messages are released unprocessed (their
 * receive is undone), and the consumer waits for the messages being handled to finish and be settled.
 */
export const run = <A, E, R, R2>(
  options: Options<A, E, R, R2>
): Effect.Effect<Consumer, never, Scope.Scope | R | R2> => {
  const concurrency = validate.positiveInt("Consumer.run concurrency", options.concurrency ?? 1)
  const maxReceiveCount = validate.positiveInt("Consumer.run maxReceiveCount", options.maxReceiveCount)
  const bufferSize = options.bufferSize === undefined
    ? concurrency
    : validate.positiveInt("Consumer.run bufferSize", options.bufferSize)
  const batchSize = options.batchSize === undefined
    ? Math.min(bufferSize + concurrency, 32)
    : validate.positiveInt("Consumer.run batchSize", options.batchSize)
  const pollInterval = Duration.millis(
    validate.millis("Consumer.run pollInterval", options.pollInterval ?? "100 millis", { finite: true })
  )
  const timeout = options.timeout === undefined
    ? undefined
    : validate.millis("Consumer.run timeout", options.timeout, { finite: true })
  const redeliveryDelay = options.redeliveryDelay
  if (redeliveryDelay !== undefined && typeof redeliveryDelay !== "function") {
    validate.millis("Consumer.run redeliveryDelay", redeliveryDelay)
  }
  const withRetry = options.retry === undefined ? undefined : retry.compile(options.retry)
  const withDeadline = timeout === undefined ? undefined : deadline.withinOf(timeout)
  const { handler, onDeadLetter, source } = options
  const partitions = options.orderedByKey === true ? concurrency : 1
  const capacity = bufferSize + concurrency
  const visibility = Duration.toMillis(source.visibilityTimeout)
  const tags = labels(source.name)

  const handle = (message: Message<A>): Effect.Effect<unknown, unknown, R | R2> => {
    let effect: Effect.Effect<unknown, unknown, R | R2> = Effect.suspend(() => handler(message))
    if (withRetry !== undefined) effect = withRetry(effect)
    if (withDeadline !== undefined) effect = withDeadline(effect)
    return effect
  }

  return Effect.gen(function*() {
    const slots = yield* Effect.makeSemaphore(capacity)
    const buffers = yield* Effect.forEach(Array.from({ length: partitions }), () => Queue.unbounded<Message<A>>())
    const stats = { received: 0, processed: 0, deadLettered: 0, released: 0, abandoned: 0, handling: 0 }
    let held = 0

    const warn = (what: string, message: Message<A>) => (cause: Cause.Cause<QueueError>) =>
      Effect.logWarning(`queue ${source.name}: ${what} failed`, cause).pipe(
        Effect.annotateLogs({ "message.id": message.id })
      )

    const toDeadLetter = (message: Message<A>, fatal: boolean, reason: string) =>
      source.deadLetter(message, reason).pipe(
        Effect.flatMap((moved) => {
          if (!moved) return Effect.void
          stats.deadLettered++
          deadLettered.unsafeUpdate(1, fatal ? tags.fatal : tags.maxReceives)
          return onDeadLetter === undefined ? Effect.void : onDeadLetter(message, reason)
        }),
        Effect.catchAllCause(warn("dead-lettering", message))
      )

    const overLimit = (message: Message<A>, error: string) =>
      `received ${message.receiveCount} times (maxReceiveCount ${maxReceiveCount}); last error: ${error}`

    const settle = (message: Message<A>, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> => {
      if (Exit.isSuccess(exit)) {
        return source.ack(message).pipe(
          Effect.flatMap((acked) =>
            Effect.sync(() => {
              if (!acked) return
              stats.processed++
              processed.unsafeUpdate(1, tags.base)
            })
          ),
          // an interrupted ack is a crash after the effect: the message comes back and is skipped then
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause)
              ? Effect.sync(() => void stats.abandoned++)
              : warn("acknowledging", message)(cause)
          )
        )
      }
      const cause = exit.cause
      // interrupted (a crash, simulated or real): leave the message in flight, it comes back after the timeout
      if (Cause.isInterruptedOnly(cause)) return Effect.sync(() => void stats.abandoned++)
      const error = renderCause(cause)
      const failure = Cause.failureOption(cause)
      const fatal = Option.isSome(failure) && isFatal(failure.value)
      switch (visibilityRules.afterFailure(fatal, message.receiveCount, maxReceiveCount)) {
        case "DeadLetterFatal":
          return toDeadLetter(message, true, error)
        case "DeadLetterExhausted":
          return toDeadLetter(message, false, overLimit(message, error))
        case "Release":
          break
      }
      const delay = redeliveryDelay === undefined
        ? 0
        : typeof redeliveryDelay === "function"
        ? redeliveryDelay(message)
        : redeliveryDelay
      return source.release(message, { delay, error }).pipe(
        Effect.flatMap((done) =>
          Effect.sync(() => {
            if (!done) return
            stats.released++
            released.unsafeUpdate(1, tags.base)
          })
        ),
        Effect.catchAllCause(warn("releasing", message))
      )
    }

    /**
     * A message that waited in the buffer until its visibility timeout ran out has been made visible
     * again by the source (someone else may be handling it now): it is not run and not acked. Its claim
     * is given back with the receive undone when the receipt is still current, so waiting does not count
     * towards `maxReceiveCount`; a stale receipt is refused by the source's fencing.
     */
    const abandonStale = (message: Message<A>) =>
      source.release(message, { undoReceive: true }).pipe(
        Effect.catchAllCause(warn("releasing an expired message", message)),
        Effect.zipRight(Effect.sync(() => void stats.abandoned++))
      )

    const process = (message: Message<A>): Effect.Effect<void, never, R | R2> =>
      Effect.flatMap(
        Clock.currentTimeMillis,
        (now) =>
          visibilityRules.isExpired(message.receivedAt, visibility, now)
            ? abandonStale(message)
            : processFresh(message)
      )

    const processFresh = (message: Message<A>): Effect.Effect<void, never, R | R2> => {
      if (visibilityRules.overLimit(message.receiveCount, maxReceiveCount)) {
        return toDeadLetter(message, false, overLimit(message, message.lastError ?? NO_ERROR))
      }
      stats.handling++
      return handle(message).pipe(
        Effect.withSpan("queue.handle", {
          attributes: {
            "queue.name": source.name,
            "message.id": message.id,
            "message.receive_count": message.receiveCount
          }
        }),
        Effect.exit,
        Effect.flatMap((exit) => {
          stats.handling--
          return settle(message, exit)
        }),
        Effect.catchAllCause((cause) => Effect.logError(`queue ${source.name}: settling a message failed`, cause))
      )
    }

    const done = Effect.zipRight(Effect.sync(() => held--), slots.release(1))

    const worker = (buffer: Queue.Queue<Message<A>>) =>
      Effect.forever(Effect.flatMap(Queue.take(buffer), (message) => Effect.ensuring(process(message), done)))

    const partitionOf = (message: Message<A>): number => {
      if (partitions === 1 || message.key === undefined) return partitions === 1 ? 0 : hash(message.id) % partitions
      return hash(message.key) % partitions
    }

    // waiting for room is interruptible; receive-and-dispatch is not: a claimed message is never lost
    // between the two
    const pollOnce = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        yield* restore(slots.take(1))
        const extra = Math.min(batchSize - 1, capacity - held - 1)
        if (extra > 0) yield* slots.take(extra)
        held += 1 + extra
        const wanted = 1 + extra
        const messages = yield* source.receive(wanted).pipe(
          Effect.catchAllCause((cause) =>
            Effect.as(Effect.logWarning(`queue ${source.name}: receive failed`, cause), [] as ReadonlyArray<Message<A>>)
          )
        )
        stats.received += messages.length
        for (const message of messages) buffers[partitionOf(message)]!.unsafeOffer(message)
        const unused = wanted - messages.length
        if (unused > 0) {
          held -= unused
          yield* slots.release(unused)
        }
        return messages.length
      })
    )

    const poller = Effect.forever(
      Effect.flatMap(pollOnce, (n) => n === 0 ? Effect.sleep(pollInterval) : Effect.yieldNow())
    )

    // forking and registering the finalizer are one uninterruptible step: an interruption in between
    // would leave daemon fibers that nothing stops (the fibers themselves run interruptibly)
    yield* Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const workers = yield* Effect.forEach(
          Array.from({ length: concurrency }, (_, i) => i),
          (i) => Effect.forkDaemon(restore(worker(buffers[i % partitions]!)))
        )
        const pollerFiber = yield* Effect.forkDaemon(restore(poller))
        yield* Effect.addFinalizer(() => shutdown(pollerFiber, workers))
      })
    )

    function shutdown(pollerFiber: Fiber.RuntimeFiber<never>, workers: ReadonlyArray<Fiber.RuntimeFiber<never>>) {
      return Effect.gen(function*() {
        yield* Fiber.interrupt(pollerFiber)
        for (const buffer of buffers) {
          const left = yield* Queue.takeAll(buffer)
          yield* Effect.forEach(left, (message) =>
            source.release(message, { undoReceive: true }).pipe(
              Effect.catchAllCause(warn("releasing at shutdown", message)),
              Effect.zipRight(done)
            ), { discard: true })
        }
        yield* Effect.forEach(buffers, Queue.shutdown, { discard: true })
        yield* Fiber.awaitAll(workers)
      })
    }

    // `unsafeSize` is none once the buffers are shut down (where `Queue.size` would interrupt), and
    // negative while workers wait on an empty buffer
    const snapshot: Effect.Effect<Stats> = Effect.sync(() => ({
      ...stats,
      buffered: buffers.reduce((sum, buffer) => sum + Math.max(0, Option.getOrElse(buffer.unsafeSize(), () => 0)), 0)
    }))
    return { source: source.name, stats: snapshot } satisfies Consumer
  })
}

/** FNV-1a: spreads keys over partitions. */
const hash = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return h >>> 0
}
