import * as attribution from "@effect-resilience/core/crashAttribution"
import { partitionOf } from "@effect-resilience/core/queueMessages"
import * as visibilityRules from "@effect-resilience/core/visibility"
import type { Scope } from "effect"
import { Cause, Clock, Effect, Exit, Fiber, Metric, Option, Queue, Semaphore } from "effect"
import type { Consumer, Options, Stats } from "../../../Consumer.js"
import type { Message, ReceiveOptions } from "../../../QueueSource.js"
import { isFatal } from "../../failure.js"
import { event } from "../../trace.js"
import { makeAcker } from "./acker.js"
import { compile, type Config } from "./config.js"
import { runDelivery } from "./renewal.js"
import { type Counters, makeCounters, makeSettler, warn } from "./settle.js"
import { makeSolo, type Solo } from "./solo.js"

const ACK = Symbol("ack")

/** The consumer's promise to its source (`QueueSource.ReceiveOptions`): it runs every suspect alone. */
const RUNS_SUSPECTS_ALONE: ReceiveOptions = { runsSuspectsAlone: true }

/** After the shutdown grace, how long closing waits for interrupted handlers before it abandons them. */
export const ABANDON_AFTER_MILLIS = 1_000

/**
 * The poller claims messages only while fewer than `bufferSize + concurrency` are held (buffered or
 * being handled): that bound is the backpressure, and it also keeps claimed messages from waiting in the
 * buffer long enough for their visibility timeout to run out. Workers take from one shared buffer, or,
 * with `orderedByKey`, each from its own partition so that one key is handled by one worker in order.
 * Each handler runs under its time limit while its message's visibility is extended (`runDelivery`).
 * A worker does not wait for the acknowledgement of the message it handled: it hands the message to the
 * acker and takes the next one, so acks are pipelined, and the acker sends the ones waiting together, in one
 * `ackMany` call, even at concurrency 1 (`makeAcker`). Only a message whose handler succeeded is ever
 * acknowledged. A message handed to the acker gives its slot back at once while fewer than `capacity` others
 * wait for their acknowledgement that way, so the next claim goes out while the acks are under way instead
 * of after them; past that bound it keeps its slot until the source answered (acks that do not answer hold
 * the poller back, at most `2 × capacity` messages in all).
 *
 * Shutdown (the scope closes): the poller stops, buffered messages are released unprocessed (their
 * receive is undone), and the consumer waits, for at most the shutdown grace, for the messages being handled
 * to finish and be settled (acknowledgements under way included); then it interrupts those handlers and
 * acknowledgements (their messages stay in flight, to come back after the visibility timeout) and waits at
 * most `ABANDON_AFTER_MILLIS` more.
 */
export const run = <A, E, R, R2>(
  options: Options<A, E, R, R2>
): Effect.Effect<Consumer, never, Scope.Scope | R | R2> => {
  const config = compile(options)
  return Effect.gen(function*() {
    const slots = yield* Semaphore.make(config.capacity)
    const buffers = yield* Effect.forEach(
      Array.from({ length: config.partitions }),
      () => Queue.unbounded<Message<A>>()
    )
    const stats = makeCounters()
    const held = { n: 0, stopped: false }
    const doneMany = (n: number) => Effect.suspend(() => (held.n -= n, slots.release(n)))
    const done = doneMany(1)
    // the acknowledgement of a handled message goes on without its worker, which takes the next message
    // meanwhile, grouped with the others waiting; its slot is freed at once while fewer than `capacity`
    // messages wait for their acks with their slot freed (`early`), else once the source answered
    const early = new Set<Message<A>>()
    const settled = (group: ReadonlyArray<Message<A>>) =>
      Effect.suspend(() => {
        let holding = 0
        for (const message of group) if (!early.delete(message)) holding++
        return holding === 0 ? Effect.void : doneMany(holding)
      })
    const acker = makeAcker(config, stats, settled, config.visibility, Math.max(1, Math.floor(config.capacity / 2)))
    const handOver = (message: Message<A>) => {
      if (early.size >= config.capacity) return acker.add(message)
      early.add(message)
      return Effect.andThen(acker.add(message), done)
    }
    const acking = acker.lanes
    const solo = makeSolo(acking)
    const process = processor(config, stats, () => held.stopped, solo)
    // without `Effect.forever`'s yield after every message: a worker gives way when its buffer is empty (the
    // take waits), when its handler waits, and when the runtime's budget of operations runs out
    // (a worker waits at the gate while a suspect runs alone: `solo`)
    const worker = (buffer: Queue.Queue<Message<A>>) => {
      const gate = solo.worker()
      return Effect.forever(
        Effect.flatMap(Queue.take(buffer), (message) =>
          Effect.uninterruptibleMask((restore) =>
            Effect.flatMap(
              Effect.exit(restore(Effect.andThen(gate.enter(message), process(message)))),
              (exit) =>
                Effect.andThen(
                  exit._tag === "Success" && exit.value === ACK ? handOver(message) : done,
                  gate.leave(message)
                )
            )
          )),
        { disableYield: true }
      )
    }
    const poller = Effect.forever(
      Effect.flatMap(
        pollOnce(config, stats, slots, buffers, held, solo),
        (n) => n === 0 ? Effect.sleep(config.pollInterval) : Effect.yieldNow
      )
    )
    // forking and registering the finalizer are one uninterruptible step: an interruption in between
    // would leave daemon fibers that nothing stops (the fibers themselves run interruptibly)
    yield* Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const workers = yield* Effect.forEach(
          Array.from({ length: config.concurrency }, (_, i) => i),
          (i) => Effect.forkDetach(restore(worker(buffers[i % config.partitions]!)))
        )
        const pollerFiber = yield* Effect.forkDetach(restore(poller))
        yield* Effect.addFinalizer(() =>
          shutdown(config, buffers, pollerFiber, workers, acking, done, () => void (held.stopped = true))
        )
      })
    )
    const snapshot: Effect.Effect<Stats> = Effect.sync(() => ({
      ...stats,
      buffered: buffers.reduce((sum, buffer) => sum + Math.max(0, Queue.sizeUnsafe(buffer)), 0)
    }))
    return { source: options.source.name, stats: snapshot } satisfies Consumer
  })
}

/**
 * Handles one claimed message: skipped when it waited past its visibility timeout, dead-lettered unrun when
 * it was received too often, otherwise run (retry, time limit, renewal) and settled. An interruption of the
 * worker (shutdown) while the handler runs leaves the message in flight, counted as abandoned. A handler
 * that succeeded is not acknowledged here: its acknowledgement is returned, for the worker to start without
 * waiting for it (only a message whose handler has ended is ever acknowledged).
 */
const processor = <A, E, R, R2>(
  config: Config<A, E, R, R2>,
  stats: Counters,
  stopped: () => boolean,
  solo: Solo
) => {
  const { handler, source } = config.options
  const settler = makeSettler(config, stats)
  /**
   * What the settler is going to do with a failed delivery, as an event of its `queue.handle` span (which ends
   * before the move): `queue.dead_letter` with its reason, or `queue.release` for a redelivery.
   */
  const fate = (message: Message<unknown>, exit: Exit.Exit<unknown, unknown>) => {
    if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return Effect.void
    const failure = Cause.findErrorOption(exit.cause)
    const fatal = Option.isSome(failure) && isFatal(failure.value)
    const next = visibilityRules.afterFailure(fatal, message.receiveCount, config.maxReceiveCount)
    return next === "Release"
      ? event("queue.release", () => ({ "message.receive_count": message.receiveCount }))
      : event("queue.dead_letter", () => ({
        "message.receive_count": message.receiveCount,
        reason: next === "DeadLetterFatal" ? "fatal" : "max-receives"
      }))
  }
  const handle = (message: Message<A>): Effect.Effect<unknown, unknown, R | R2> => {
    let effect: Effect.Effect<unknown, unknown, R | R2> = Effect.suspend(() => handler(message))
    if (config.withRetry !== undefined) effect = config.withRetry(effect)
    return runDelivery(source, config.timeLimit, stats, stopped, message, effect).pipe(
      Effect.onExit((exit) => fate(message, exit)),
      // no stack trace (Effect 4 takes it as the trace options, the third argument): it would point here, not
      // at the user's code, and capturing one costs more than the span
      Effect.withSpan("queue.handle", {
        attributes: {
          "queue.name": source.name,
          "message.id": message.id,
          "message.receive_count": message.receiveCount
        }
      }, { captureStackTrace: false })
    )
  }
  /** `ACK`: the handler succeeded, the message is the acker's; `undefined`: it was settled here. */
  type Later = typeof ACK | undefined
  const logFailure = Effect.catchCause((cause) =>
    Effect.as(Effect.logError(`queue ${source.name}: settling a message failed`, cause), undefined)
  )
  const abandoned = Effect.sync(() => void stats.abandoned++)
  /** Runs the handler and settles a failure; a success is acknowledged here (`ackHere`) or returned as `ACK`. */
  const run = (message: Message<A>, ackHere: boolean): Effect.Effect<Later, never, R | R2> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        stats.handling++
        return Effect.flatMap(Effect.exit(restore(handle(message))), (exit) => {
          stats.handling--
          // interrupted: a handler of its own accord, or the worker at shutdown: the message stays in flight
          if (exit._tag === "Failure" && Cause.hasInterruptsOnly(exit.cause)) return Effect.as(abandoned, undefined)
          if (exit._tag === "Success" && !ackHere) return Effect.succeed<Later>(ACK)
          // (`onInterrupt` outside `restore`: an interruption already pending counts too)
          return Effect.as(Effect.onInterrupt(restore(settler.settle(message, exit)), () => abandoned), undefined)
        })
      })
    )
  // a suspect, alone: its source records that first (and extends it: it may have waited), then it runs and is
  // settled, acknowledgement included, before the gate opens; a stale receipt means someone else holds it now
  const runAlone = (message: Message<A>): Effect.Effect<Later, never, R | R2> =>
    (source.markAlone === undefined ? Effect.succeed(true) : source.markAlone(message)).pipe(
      Effect.matchCauseEffect({
        onFailure: (cause) =>
          Effect.as(
            Effect.andThen(warn(source.name, "marking a suspect alone", message)(cause), settler.abandonStale(message)),
            undefined
          ),
        onSuccess: (marked) => {
          if (!marked) return Effect.as(abandoned, undefined)
          stats.ranAlone++
          return run(message, true)
        }
      })
    )
  const processFresh = (message: Message<A>): Effect.Effect<Later, never, R | R2> => {
    if (visibilityRules.overLimit(message.receiveCount, config.maxReceiveCount)) {
      return Effect.as(settler.overLimit(message), undefined)
    }
    if (attribution.mustRunAlone(message.suspect)) {
      // (interrupted while it waits: closing the consumer; the suspect stays in flight)
      return solo.alone(runAlone(message)).pipe(
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause) ? Effect.as(abandoned, undefined) : logFailure(Effect.failCause(cause))
        )
      )
    }
    return run(message, false).pipe(logFailure)
  }
  return (message: Message<A>): Effect.Effect<Later, never, R | R2> =>
    Effect.flatMap(
      Clock.currentTimeMillis,
      (now) =>
        visibilityRules.isExpired(message.receivedAt, config.visibility, now)
          ? Effect.as(settler.abandonStale(message), undefined)
          : processFresh(message)
    )
}

/**
 * Claims as many messages as there is room for (at least `claimAtLeast` slots, waited for interruptibly) and
 * hands them to the workers' buffers. Receive-and-dispatch is uninterruptible: a claimed message is never
 * lost between the two. Returns how many messages came.
 */
const pollOnce = <A, E, R, R2>(
  config: Config<A, E, R, R2>,
  stats: Counters,
  slots: Semaphore.Semaphore,
  buffers: ReadonlyArray<Queue.Queue<Message<A>>>,
  held: { n: number },
  solo: Solo
): Effect.Effect<number> => {
  const { source } = config.options
  return Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      // nothing is claimed while a suspect is held: it runs alone once the others are done (`solo`)
      yield* restore(solo.claims)
      const first = config.claimAtLeast
      yield* restore(slots.take(first))
      const extra = Math.min(config.batchSize - first, config.capacity - held.n - first)
      if (extra > 0) yield* slots.take(extra)
      held.n += first + extra
      const wanted = first + extra
      const messages = yield* source.receive(wanted, RUNS_SUSPECTS_ALONE).pipe(
        Effect.catchCause((cause) =>
          Effect.as(Effect.logWarning(`queue ${source.name}: receive failed`, cause), [] as ReadonlyArray<Message<A>>)
        )
      )
      stats.received += messages.length
      if (messages.length > 0) yield* Metric.update(config.tags.received, messages.length)
      // suspects last (core/crashAttribution.ts)
      const ordered = attribution.handlingOrder(messages)
      solo.dispatched(ordered)
      for (const message of ordered) {
        Queue.offerUnsafe(buffers[partitionOf(config.partitions, message.id, message.key)]!, message)
      }
      const unused = wanted - messages.length
      if (unused > 0) {
        held.n -= unused
        yield* slots.release(unused)
      }
      return messages.length
    })
  )
}

const shutdown = <A, E, R, R2>(
  config: Config<A, E, R, R2>,
  buffers: ReadonlyArray<Queue.Queue<Message<A>>>,
  pollerFiber: Fiber.Fiber<never>,
  workers: ReadonlyArray<Fiber.Fiber<never>>,
  acking: ReadonlySet<Fiber.Fiber<void>>,
  done: Effect.Effect<void>,
  stop: () => void
): Effect.Effect<void> => {
  const { source } = config.options
  // the waits run interruptibly (a finalizer does not), so that their timeouts can end them: the workers,
  // then the acknowledgements they left under way (once the workers ended, no more start)
  const awaitWorkers = (millis: number) =>
    Effect.interruptible(Effect.andThen(Fiber.awaitAll(workers), Effect.suspend(() => Fiber.awaitAll([...acking]))))
      .pipe(Effect.timeoutOption(millis), Effect.map(Option.isSome))
  return Effect.gen(function*() {
    yield* Fiber.interrupt(pollerFiber)
    for (const buffer of buffers) {
      const left = yield* Queue.clear(buffer)
      yield* Effect.forEach(left, (message) =>
        source.release(message, { undoReceive: true }).pipe(
          Effect.catchCause(warn(source.name, "releasing at shutdown", message)),
          Effect.andThen(done)
        ), { discard: true })
    }
    yield* Effect.forEach(buffers, Queue.shutdown, { discard: true })
    if (yield* awaitWorkers(config.shutdownGrace)) return
    yield* Effect.logWarning(
      `queue ${source.name}: handlers still running ${config.shutdownGrace} ms after close: interrupting them ` +
        `(their messages come back after the visibility timeout)`
    )
    for (const fiber of [...workers, ...acking]) fiber.interruptUnsafe()
    if (yield* awaitWorkers(ABANDON_AFTER_MILLIS)) return
    stop()
    yield* Effect.logWarning(
      `queue ${source.name}: handlers that do not end when interrupted were abandoned; their messages ` +
        `are left in flight`
    )
  })
}
