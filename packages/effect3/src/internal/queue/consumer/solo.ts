import * as attribution from "@effect-resilience/core/crashAttribution"
import { Deferred, Effect, Exit, Fiber, FiberId } from "effect"
import type { Message } from "../../../QueueSource.js"

/**
 * How a consumer runs a suspect alone (core/crashAttribution.ts): a message whose previous delivery was lost with
 * its consumer may be what killed that process, so its handler runs with no other handler beside it — a crash
 * then is its own — and with no acknowledgement under way.
 *
 * A gate, as a lock for one writer and many readers that lets a waiting writer go first: a worker counts itself
 * running (`enter`) before it processes a message that is not a suspect, waiting while a suspect runs alone or
 * waits to; a suspect (`alone`) waits for its turn (suspects go in the order they came), closes the gate, waits
 * until no other worker runs and the acknowledgements under way have been answered, runs, and passes the gate to
 * the next suspect waiting, or opens it. From the moment a claimed batch
 * holds a suspect (`dispatched`) until every suspect it held is settled, the poller claims nothing (`claims`), so
 * that the messages held while a suspect runs alone are at most the other suspects of its batch (and, with
 * `orderedByKey`, the messages of other partitions, which wait at the gate): fewer messages to lose when it kills
 * the process, and those are not charged for it.
 */
export interface Solo {
  /** The poller dispatched `messages`: the suspects among them are held from now. */
  readonly dispatched: (messages: ReadonlyArray<Message<unknown>>) => void
  /** Waits (interruptibly) until no suspect is held: the poller's wait before it claims. */
  readonly claims: Effect.Effect<void>
  /** A worker's place at the gate. */
  readonly worker: () => WorkerGate
  /**
   * Runs `run` (a suspect's handler and its settling) alone, as interruptible as its caller while it waits; the
   * gate opens again however it ends.
   */
  readonly alone: <X, R>(run: Effect.Effect<X, never, R>) => Effect.Effect<X, never, R>
}

/** A worker's place at the gate. */
export interface WorkerGate {
  /**
   * Before the worker processes `message` (a suspect excepted: it runs with `alone`): waits (interruptibly) while a
   * suspect runs alone or waits to, then counts the worker running.
   */
  readonly enter: (message: Message<unknown>) => Effect.Effect<void>
  /** After the worker settled `message` or handed it to the acker, whether or not `enter` ended. */
  readonly leave: (message: Message<unknown>) => Effect.Effect<void>
}

export const makeSolo = (acking: ReadonlySet<Fiber.RuntimeFiber<void>>): Solo => {
  const gate = Effect.unsafeMakeLatch(true)
  const claims = Effect.unsafeMakeLatch(true)
  let closed = false
  let running = 0
  let suspects = 0
  let idle: Deferred.Deferred<void> | undefined
  // suspects waiting for their turn, in the order they came: the gate passes from one to the next
  const turns: Array<Deferred.Deferred<void>> = []
  const untilOpen: Effect.Effect<void> = Effect.suspend(() =>
    closed ? Effect.zipRight(gate.await, untilOpen) : Effect.void
  )
  const othersDone = Effect.suspend(() => {
    if (running === 0) return Effect.void
    idle = Deferred.unsafeMake<void>(FiberId.none)
    return Deferred.await(idle)
  })
  const prepare = Effect.zipRight(othersDone, Effect.suspend(() => Fiber.awaitAll([...acking])))
  const pass = () => {
    const next = turns.shift()
    if (next !== undefined) return void Deferred.unsafeDone(next, Exit.void)
    closed = false
    gate.unsafeOpen()
  }
  // in the same step as the check: no one else closes it in between
  const turn = Effect.suspend(() => {
    if (!closed) {
      closed = true
      gate.unsafeClose()
      return Effect.void
    }
    const mine = Deferred.unsafeMake<void>(FiberId.none)
    turns.push(mine)
    return Effect.onInterrupt(Deferred.await(mine), () =>
      Effect.sync(() => {
        const waiting = turns.indexOf(mine)
        // interrupted as its turn came: it passes the gate on
        if (waiting === -1) pass()
        else turns.splice(waiting, 1)
      }))
  })
  return {
    dispatched: (messages) => {
      for (const message of messages) if (attribution.mustRunAlone(message.suspect)) suspects++
      if (suspects > 0) claims.unsafeClose()
    },
    claims: claims.await,
    worker: () => {
      let counted = false
      // (no step between the last check of the gate and the count: nothing closes it in between)
      const enter = Effect.zipRight(
        untilOpen,
        Effect.sync(() => {
          running++
          counted = true
        })
      )
      const leave = Effect.sync(() => {
        if (!counted) return
        counted = false
        if (--running === 0 && idle !== undefined) {
          Deferred.unsafeDone(idle, Exit.void)
          idle = undefined
        }
      })
      const leaveSuspect = Effect.sync(() => {
        if (--suspects === 0) claims.unsafeOpen()
      })
      return {
        enter: (message) => attribution.mustRunAlone(message.suspect) ? Effect.void : enter,
        leave: (message) => attribution.mustRunAlone(message.suspect) ? leaveSuspect : leave
      }
    },
    alone: <X, R>(run: Effect.Effect<X, never, R>) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(
          restore(turn),
          () => Effect.zipRight(restore(prepare), restore(run)).pipe(Effect.ensuring(Effect.sync(pass)))
        )
      )
  }
}
