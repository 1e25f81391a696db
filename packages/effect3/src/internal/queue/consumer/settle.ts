import * as visibilityRules from "@effect-resilience/core/visibility"
import { Cause, Effect, Exit, Option } from "effect"
import type { Message, QueueError } from "../../../QueueSource.js"
import { isFatal } from "../../failure.js"
import { deadLettered, processed, released } from "../metrics.js"
import { renderCause } from "../shared.js"
import type { Config } from "./config.js"

const NO_ERROR = "none recorded (the consumer stopped before it finished: a crash or a visibility timeout)"

/** The counters of `Consumer.Stats` but `buffered` (read from the buffers). */
export interface Counters {
  received: number
  processed: number
  deadLettered: number
  released: number
  abandoned: number
  extended: number
  ranAlone: number
  handling: number
}

export const makeCounters = (): Counters => ({
  received: 0,
  processed: 0,
  deadLettered: 0,
  released: 0,
  abandoned: 0,
  extended: 0,
  ranAlone: 0,
  handling: 0
})

/** Logs a failed source call about one message, and moves on. */
export const warn = (queue: string, what: string, message: Message<unknown>) => (cause: Cause.Cause<QueueError>) =>
  Effect.logWarning(`queue ${queue}: ${what} failed`, cause).pipe(Effect.annotateLogs({ "message.id": message.id }))

/** What the consumer does with a message once its handler has ended, or without running it. */
export interface Settler<A> {
  /** Acknowledges, releases or dead-letters the message after its handler's `exit`. */
  readonly settle: (message: Message<A>, exit: Exit.Exit<unknown, unknown>) => Effect.Effect<void>
  /** Dead-letters a message received more often than allowed, without running it. */
  readonly overLimit: (message: Message<A>) => Effect.Effect<void>
  /**
   * A message that waited in the buffer until its visibility timeout ran out has been made visible again
   * by the source (someone else may be handling it now): it is not run and not acked. Its claim is given
   * back with the receive undone when the receipt is still current, so waiting does not count towards
   * `maxReceiveCount`; a stale receipt is refused by the source's fencing.
   */
  readonly abandonStale: (message: Message<A>) => Effect.Effect<void>
}

export const makeSettler = <A, E, R, R2>(config: Config<A, E, R, R2>, stats: Counters): Settler<A> => {
  const { maxReceiveCount, tags } = config
  const { onDeadLetter, source } = config.options

  const toDeadLetter = (message: Message<A>, fatal: boolean, reason: string) =>
    source.deadLetter(message, reason).pipe(
      Effect.flatMap((moved) => {
        if (!moved) return Effect.void
        stats.deadLettered++
        deadLettered.unsafeUpdate(1, fatal ? tags.fatal : tags.maxReceives)
        return onDeadLetter === undefined ? Effect.void : onDeadLetter(message, reason)
      }),
      Effect.catchAllCause(warn(source.name, "dead-lettering", message))
    )

  const exhausted = (message: Message<A>, error: string) =>
    `received ${message.receiveCount} times (maxReceiveCount ${maxReceiveCount}); last error: ${error}`

  const ack = (message: Message<A>) =>
    source.ack(message).pipe(
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
          : warn(source.name, "acknowledging", message)(cause)
      )
    )

  const release = (message: Message<A>, error: string) =>
    source.release(message, { delay: config.redeliveryDelayOf(message), error }).pipe(
      Effect.flatMap((done) =>
        Effect.sync(() => {
          if (!done) return
          stats.released++
          released.unsafeUpdate(1, tags.base)
        })
      ),
      Effect.catchAllCause(warn(source.name, "releasing", message))
    )

  const settle = (message: Message<A>, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> => {
    if (Exit.isSuccess(exit)) return ack(message)
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
        return toDeadLetter(message, false, exhausted(message, error))
      case "Release":
        return release(message, error)
    }
  }

  return {
    settle,
    overLimit: (message) => toDeadLetter(message, false, exhausted(message, message.lastError ?? NO_ERROR)),
    abandonStale: (message) =>
      source.release(message, { undoReceive: true }).pipe(
        Effect.catchAllCause(warn(source.name, "releasing an expired message", message)),
        Effect.zipRight(Effect.sync(() => void stats.abandoned++))
      )
  }
}
