import * as visibilityRules from "@effect-resilience/core/visibility"
import { Duration, Effect, Exit, Fiber, Metric } from "effect"
import type { Message, QueueError, QueueSource } from "../../../QueueSource.js"
import { currentMonotonicMillis, monotonicMillis, toMonotonic } from "../../clock.js"
import { CurrentDeadline, DeadlineExceeded } from "../../deadline.js"
import { timeoutWith } from "../../timeout.js"
import { event } from "../../trace.js"
import { labels } from "../metrics.js"
import type { Counters } from "./settle.js"
import { warn } from "./settle.js"

/**
 * Runs one delivery's handler (`effect`, retries included) under its time limit, while extending its
 * message's visibility, as SQS's `ChangeMessageVisibility`: whenever a third of the visibility timeout is
 * left, the consumer extends the message by one more timeout, for as long as the handler runs. At the limit
 * the handler is interrupted and the delivery fails with `DeadlineExceeded`; the handler sees the limit as its
 * deadline (`Deadline.remaining`), as under `Deadline.within`.
 *
 * The handler starts at once, on this stack: one that ends without waiting costs no timer and no renewer.
 * An extension is never cut short (it is uninterruptible), and none starts once the handler has ended, so the
 * message is settled only after the last one answered: a late extension cannot push out a message that was
 * released meanwhile. While no extension is under way, the renewer is stopped without waiting for it.
 *
 * An extension the source refuses (the receipt is stale: the message was delivered again) ends the renewal,
 * with a warning; the handler runs on, and its acknowledgement will be refused too. One that fails (the
 * engine did not answer) is tried again a tenth of the timeout later, while the message is still invisible.
 * `stopped` ends the renewal of handlers the consumer gave up on at shutdown.
 *
 * The time limit and the renewal's schedule live in this process: they are kept on the monotonic reading of the
 * `Clock` (`internal/clock.ts`), the delivery's `receivedAt` (epoch ms) converted once, here, so a step of the
 * consumer's wall clock neither stalls an extension nor moves the limit.
 */
export const runDelivery = <A, X, E, R>(
  source: QueueSource<A>,
  timeLimit: number,
  stats: Counters,
  stopped: () => boolean,
  message: Message<A>,
  effect: Effect.Effect<X, E, R>
): Effect.Effect<X, E | DeadlineExceeded, R> =>
  Effect.clockWith((clock) => {
    if (timeLimit <= 0) return Effect.fail(new DeadlineExceeded())
    const startedAt = monotonicMillis(clock)
    const limitAt = startedAt + timeLimit
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(detach(restore(Effect.provideService(effect, CurrentDeadline, limitAt))), (child) => {
        const done = child.pollUnsafe()
        if (done !== undefined) return done
        const state: RenewalState = { ended: false, extending: false }
        const renewer = renewerOf(source, stats, () => stopped() || state.ended, state, message, {
          startedAt,
          timeLimit,
          receivedAt: toMonotonic(clock, message.receivedAt)
        })
        return Effect.flatMap(renewer, (fiber) =>
          // the wait is as interruptible as the caller (a worker stopped at shutdown): `timeoutWith` waits with
          // its caller's interruptibility, so it runs inside `restore`
          restore(timeoutWith(Fiber.await(child), limitAt, clock, () => TIME_UP)).pipe(
            Effect.onInterrupt(() => Fiber.interrupt(child)),
            Effect.catch(() => Effect.andThen(Fiber.interrupt(child), Effect.fail(new DeadlineExceeded()))),
            Effect.ensuring(Effect.suspend(() => {
              state.ended = true
              if (fiber === undefined) return Effect.void
              if (state.extending) return Fiber.interrupt(fiber)
              fiber.interruptUnsafe()
              return Effect.void
            })),
            Effect.flatten
          ))
      })
    )
  })

const TIME_UP = Symbol("time up")

/**
 * Starts the handler in a fiber of its own at once, on the caller's stack, with the caller's interruptibility
 * (none, inside the mask; `restore` gives the handler its own): one that ends without waiting is done on return.
 */
const detach = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.forkDetach(effect, { startImmediately: true, uninterruptible: "inherit" })

/** Forks the renewal of a handler still running, unless the source cannot extend or it cannot need one. */
const renewerOf = <A>(
  source: QueueSource<A>,
  stats: Counters,
  over: () => boolean,
  state: RenewalState,
  message: Message<A>,
  /** The handler's start and the delivery's receipt (`message.receivedAt`), both on the monotonic reading. */
  times: { readonly startedAt: number; readonly timeLimit: number; readonly receivedAt: number }
): Effect.Effect<Fiber.Fiber<void> | undefined> => {
  const extend = source.extend
  const visibility = Duration.toMillis(source.visibilityTimeout)
  const visibleUntil = visibilityRules.invisibleUntil(times.receivedAt, visibility)
  if (
    extend === undefined || !visibilityRules.needsRenewal(times.startedAt, times.timeLimit, visibleUntil, visibility)
  ) {
    return Effect.succeed(undefined)
  }
  const loop = renewalLoop(source, extend, visibility, stats, over, state, message)
  return Effect.forkChild(Effect.interruptible(loop(visibleUntil)))
}

interface RenewalState {
  /** The handler has ended: no extension may start. */
  ended: boolean
  /** An extension is under way: the handler's end waits for it. */
  extending: boolean
}

const sleepUntil = (at: number) =>
  Effect.flatMap(currentMonotonicMillis, (now) => Effect.sleep(Duration.millis(Math.max(0, at - now))))

const renewalLoop = <A>(
  source: QueueSource<A>,
  extend: (message: Message<A>) => Effect.Effect<boolean, QueueError>,
  visibility: number,
  stats: Counters,
  over: () => boolean,
  state: RenewalState,
  message: Message<A>
) => {
  const extendOnce = Effect.uninterruptible(
    Effect.ensuring(extend(message), Effect.sync(() => void (state.extending = false)))
  )
  const attempt = (visibleUntil: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (over()) return Effect.void
      state.extending = true // in the same step as the check: the handler's end sees it
      return Effect.flatMap(currentMonotonicMillis, (before) =>
        Effect.flatMap(Effect.exit(extendOnce), (exit) => {
          if (Exit.isSuccess(exit)) {
            if (!exit.value) {
              return Effect.logWarning(
                `queue ${source.name}: the message was delivered again while its handler still runs (its ` +
                  `visibility could not be extended in time)`
              ).pipe(Effect.annotateLogs({ "message.id": message.id }))
            }
            stats.extended++
            const until = visibilityRules.extendedUntil(before, visibility)
            return Metric.update(labels(source.name).extended, 1).pipe(
              // on the delivery's `queue.handle` span (the renewer runs in a fiber of the handler's)
              Effect.andThen(event("queue.visibility_extended", () => ({ "queue.visibility_ms": visibility }))),
              Effect.andThen(
                loop(until)
              )
            )
          }
          return Effect.flatMap(currentMonotonicMillis, (now) => {
            const retryAt = visibilityRules.retryRenewAt(now, visibleUntil, visibility)
            const logged = warn(source.name, "extending the visibility", message)(exit.cause)
            return retryAt === undefined
              ? logged
              : Effect.andThen(logged, Effect.andThen(sleepUntil(retryAt), attempt(visibleUntil)))
          })
        }))
    })
  const loop = (visibleUntil: number): Effect.Effect<void> =>
    Effect.andThen(sleepUntil(visibilityRules.renewAt(visibleUntil, visibility)), attempt(visibleUntil))
  return loop
}
