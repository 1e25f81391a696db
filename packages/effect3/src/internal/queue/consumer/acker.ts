import { Cause, Duration, Effect, Exit, type Fiber } from "effect"
import type { Message, QueueError, QueueSource } from "../../../QueueSource.js"
import { forkDetached } from "../../fastPath.js"
import { timeoutDisconnected } from "../../timeout.js"
import { processed } from "../metrics.js"
import type { Config } from "./config.js"
import type { Counters } from "./settle.js"

/**
 * Groups in flight at once: a group whose call hangs leaves the other lane to the acks behind it, until its
 * time limit fails it. The second lane starts only once half the consumer's capacity waits (see `makeAcker`).
 */
export const ACK_LANES = 2
/** At most this many messages per group. */
export const ACK_GROUP = 128

/** The acknowledgement of the messages whose handlers succeeded, in groups. */
export interface Acker<A> {
  /** Hands over a handled message: it is acknowledged with the others that wait, at once if a lane is free. */
  readonly add: (message: Message<A>) => Effect.Effect<void>
  /** The lanes under way (closing waits for them: they end once no message waits). */
  readonly lanes: ReadonlySet<Fiber.RuntimeFiber<void>>
}

/**
 * The consumer's own acknowledgements: a handled message waits until a lane is free, then goes with every
 * message waiting with it in one call (`QueueSource.ackMany`: one statement, one commit or one script for
 * the group, each message still fenced by its own receipt), so sixteen workers share a round trip, and one
 * worker handles the next messages while its acks are under way. While one lane is busy, the other starts
 * only once `secondLaneAt` messages wait (half the consumer's capacity): the groups stay large (one call,
 * one commit, for more messages), and a lane whose call hangs still leaves the other to the acks behind it. A
 * source without `ackMany` acks each of a group's messages on its own, all at once. `ackMany` runs outside any transaction: the handlers ended before.
 *
 * Each call is bounded by `limitMillis` (the visibility timeout, after which the receipts are stale anyway):
 * one that takes longer, or fails, leaves its messages unacknowledged — they come back after their
 * visibility timeout and are handled again (at least once), logged as a warning; it neither blocks the other
 * lane nor holds its messages' slots any longer. Interrupted (the consumer's shutdown gave up), a group's
 * messages are left in flight, counted as abandoned. `done(group)` frees the slots the settled messages of `group` still hold.
 */
export const makeAcker = <A, E, R, R2>(
  config: Config<A, E, R, R2>,
  stats: Counters,
  done: (group: ReadonlyArray<Message<A>>) => Effect.Effect<void>,
  limitMillis: number,
  secondLaneAt: number
): Acker<A> => {
  const { source } = config.options
  const send = sendOf(source)
  const limit = Duration.millis(limitMillis)
  let pending: Array<Message<A>> = []
  let running = 0
  const lanes = new Set<Fiber.RuntimeFiber<void>>()

  const settle = (group: ReadonlyArray<Message<A>>, exit: Exit.Exit<ReadonlyArray<boolean>, unknown>) => {
    if (Exit.isSuccess(exit)) {
      let acked = 0
      for (const answer of exit.value) if (answer) acked++
      stats.processed += acked
      if (acked > 0) processed.unsafeUpdate(acked, config.tags.base)
      return done(group)
    }
    if (Cause.isInterruptedOnly(exit.cause)) {
      stats.abandoned += group.length
      return done(group)
    }
    return Effect.zipRight(
      Effect.logWarning(
        `queue ${source.name}: acknowledging ${group.length} message(s) failed; they come back after the ` +
          `visibility timeout`,
        exit.cause
      ).pipe(Effect.annotateLogs({ "message.ids": group.map((m) => m.id).join(",") })),
      done(group)
    )
  }

  // the call runs in a fiber of its own, awaited for at most `limitMillis` of the `Clock`: a call that does
  // not end when interrupted cannot hold the lane either (`timeoutDisconnected`)
  const bounded = (group: ReadonlyArray<Message<A>>): Effect.Effect<ReadonlyArray<boolean>, unknown> =>
    Effect.clockWith((clock) =>
      // interruptible (the lane is not): closing the consumer can give up on a call that does not answer
      Effect.interruptible(timeoutDisconnected(
        send(group),
        limit,
        clock,
        () => new Cause.TimeoutException(`no answer within ${limitMillis} ms`)
      ))
    )

  // uninterruptible but for the calls: every group taken is settled, and a lane ends only with nothing waiting
  const lane: Effect.Effect<void> = Effect.suspend(() => {
    if (pending.length === 0) {
      running--
      return Effect.void
    }
    const group = pending.length <= ACK_GROUP ? pending : pending.slice(0, ACK_GROUP)
    pending = pending.length <= ACK_GROUP ? [] : pending.slice(ACK_GROUP)
    return Effect.flatMap(Effect.exit(bounded(group)), (exit) => Effect.zipRight(settle(group, exit), lane))
  })

  // a lane lets the fibers ready to run go first before it takes its first group: the workers resumed with
  // it (a claimed batch being handled) add their messages to that group instead of one going out alone
  const start = Effect.flatMap(
    forkDetached(Effect.uninterruptible(Effect.zipRight(Effect.yieldNow(), lane))),
    (fiber) =>
      Effect.sync(() => {
        if (fiber.unsafePoll() !== null) return
        lanes.add(fiber)
        fiber.addObserver(() => lanes.delete(fiber))
      })
  )

  return {
    add: (message) =>
      Effect.suspend(() => {
        pending.push(message)
        if (running >= ACK_LANES || (running > 0 && pending.length < secondLaneAt)) return Effect.void
        running++
        return start
      }),
    lanes
  }
}

/** `ackMany`, or else each message's `ack` at once, a failed one answering `false` (logged). */
const sendOf = <A>(
  source: QueueSource<A>
): (group: ReadonlyArray<Message<A>>) => Effect.Effect<ReadonlyArray<boolean>, QueueError> => {
  if (source.ackMany !== undefined) return source.ackMany
  return (group) =>
    Effect.forEach(group, (message) =>
      source.ack(message).pipe(
        Effect.catchAll((error) =>
          Effect.as(
            Effect.logWarning(`queue ${source.name}: acknowledging failed`, error).pipe(
              Effect.annotateLogs({ "message.id": message.id })
            ),
            false
          )
        )
      ), { concurrency: "unbounded" })
}
