import type { Context, Scope } from "effect"
import { Cause, Data, Effect, Layer, Metric, MetricLabel } from "effect"
import type { Bulkhead, Options, RejectionReason } from "../Bulkhead.js"
import * as validate from "./validate.js"

export class BulkheadFull extends Data.TaggedError("BulkheadFull")<{
  readonly reason: RejectionReason
  /** The bulkhead's name, when it has one. */
  readonly name: string | undefined
  readonly maxConcurrent: number
  readonly maxQueue: number
}> {
  override get message(): string {
    const which = this.name === undefined ? "bulkhead" : `bulkhead "${this.name}"`
    switch (this.reason) {
      case "queue-full":
        return `${which} is full: ${this.maxConcurrent} running and ${this.maxQueue} waiting`
      case "queue-timeout":
        return `${which}: waited too long for one of its ${this.maxConcurrent} slots`
      case "closed":
        return `${which} is closed`
    }
  }
}

// Gauges move by deltas (`unsafeModify`), so bulkheads sharing a label set add up instead of
// overwriting each other.
export const activeGauge = Metric.gauge("effect_resilience_bulkhead_active", {
  description: "calls holding a bulkhead slot"
})
export const queuedGauge = Metric.gauge("effect_resilience_bulkhead_queued", {
  description: "calls waiting for a bulkhead slot"
})
export const rejections = Metric.counter("effect_resilience_bulkhead_rejections_total", {
  description: "calls turned away by a bulkhead, by reason",
  incremental: true
})

const WAITING = 0
const GRANTED = 1
const REJECTED = 2

/**
 * A queued caller. The slot may be granted (or the bulkhead closed) before the caller's fiber has
 * registered its callback, so the outcome is recorded first and delivered on registration.
 */
class Waiter {
  state = WAITING
  resume: ((effect: Effect.Effect<void, BulkheadFull>) => void) | undefined = undefined
  rejection: BulkheadFull | undefined = undefined
}

/**
 * Builds the bulkhead. The state is two plain fields read and written synchronously inside
 * `uninterruptibleMask`, so the uncontended path is one mask and one match frame: no Ref, no
 * Semaphore, no fork. A released slot is handed straight to the oldest waiter (`active` does not
 * move), which is what makes the order strictly first-in-first-out: a newcomer can never take a slot
 * that a waiter was promised. Waiters sit in a `Set` (insertion-ordered, O(1) delete) so an interrupted
 * waiter leaves the queue at once.
 */
export const make = (options: Options): Effect.Effect<Bulkhead, never, Scope.Scope> => {
  const maxConcurrent = validate.positiveInt("Bulkhead maxConcurrent", options.maxConcurrent)
  if (!(Number.isInteger(options.maxQueue) && options.maxQueue >= 0)) {
    validate.invalid(`Bulkhead maxQueue must be an integer >= 0, got ${options.maxQueue}`)
  }
  const maxQueue = options.maxQueue
  const queueTimeout = options.queueTimeout === undefined
    ? undefined
    : validate.millis("Bulkhead queueTimeout", options.queueTimeout)
  const name = options.name
  return Effect.suspend(() => {
    const state = build(maxConcurrent, maxQueue, queueTimeout, name)
    return Effect.as(Effect.addFinalizer(() => Effect.sync(state.close)), state.bulkhead)
  })
}

const build = (maxConcurrent: number, maxQueue: number, queueTimeout: number | undefined, name: string | undefined) => {
  // label arrays are built once: the metric hook cache is keyed by array identity
  const tags: ReadonlyArray<MetricLabel.MetricLabel> = name === undefined ? [] : [MetricLabel.make("bulkhead", name)]
  const reasonTags = (reason: RejectionReason) => [...tags, MetricLabel.make("reason", reason)]
  const rejectionTags: Record<RejectionReason, ReadonlyArray<MetricLabel.MetricLabel>> = {
    "queue-full": reasonTags("queue-full"),
    "queue-timeout": reasonTags("queue-timeout"),
    "closed": reasonTags("closed")
  }

  let active = 0
  let closed = false
  const queue = new Set<Waiter>()

  function rejection(reason: RejectionReason): BulkheadFull {
    rejections.unsafeUpdate(1, rejectionTags[reason])
    return new BulkheadFull({ reason, name, maxConcurrent, maxQueue })
  }

  function reject(reason: RejectionReason): Effect.Effect<never, BulkheadFull> {
    return Effect.zipRight(
      Effect.annotateCurrentSpan("bulkhead.rejected", reason),
      Effect.fail(rejection(reason))
    )
  }

  /** Gives a slot back: to the oldest waiter if there is one, else to the pool. */
  function release(): void {
    if (queue.size > 0) {
      const waiter = queue.values().next().value!
      queue.delete(waiter)
      queuedGauge.unsafeModify(-1, tags)
      waiter.state = GRANTED
      if (waiter.resume !== undefined) waiter.resume(Effect.void)
      return
    }
    active--
    activeGauge.unsafeModify(-1, tags)
  }

  /** A waiter stopped waiting without running (interrupted, timed out, or rejected at close). */
  function abandon(waiter: Waiter): void {
    if (waiter.state === GRANTED) {
      // the slot arrived just as the wait ended: pass it on rather than leak it
      release()
    } else if (waiter.state === WAITING) {
      waiter.state = REJECTED
      queue.delete(waiter)
      queuedGauge.unsafeModify(-1, tags)
    }
  }

  function close(): void {
    closed = true
    if (queue.size === 0) return
    const waiters = Array.from(queue)
    queue.clear()
    queuedGauge.unsafeModify(-waiters.length, tags)
    for (const waiter of waiters) {
      waiter.state = REJECTED
      waiter.rejection = rejection("closed")
      if (waiter.resume !== undefined) waiter.resume(Effect.fail(waiter.rejection))
    }
  }

  function wait(waiter: Waiter): Effect.Effect<void, BulkheadFull> {
    const waiting = Effect.async<void, BulkheadFull>((resume) => {
      if (waiter.state === GRANTED) resume(Effect.void)
      else if (waiter.state === REJECTED) resume(Effect.fail(waiter.rejection!))
      else waiter.resume = resume
    })
    return queueTimeout === undefined
      ? waiting
      : Effect.timeoutFail(waiting, { duration: queueTimeout, onTimeout: () => rejection("queue-timeout") })
  }

  // built once: handlers created per call would cost an allocation each
  const giveBack = {
    onFailure: (cause: Cause.Cause<unknown>) => {
      release()
      return Effect.failCause(cause)
    },
    onSuccess: (a: unknown) => {
      release()
      return Effect.succeed(a)
    }
  }

  /** Runs `effect` in a slot already taken, giving it back however `effect` ends. */
  function run<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.matchCauseEffect(effect, giveBack) as Effect.Effect<A, E, R>
  }

  const protect = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E | BulkheadFull, R> =>
    Effect.uninterruptibleMask((restore) => {
      if (active < maxConcurrent && !closed) {
        // a free slot implies an empty queue: releases hand slots to waiters first
        active++
        activeGauge.unsafeModify(1, tags)
        return run(restore(self))
      }
      if (closed) return reject("closed")
      if (queue.size >= maxQueue) return reject("queue-full")
      const waiter = new Waiter()
      queue.add(waiter)
      queuedGauge.unsafeModify(1, tags)
      return Effect.clockWith((clock) => {
        const since = clock.unsafeCurrentTimeMillis()
        return Effect.matchCauseEffect(restore(wait(waiter)), {
          onFailure: (cause) => {
            abandon(waiter)
            const failure = Cause.failureOption(cause)
            return failure._tag === "Some"
              ? Effect.zipRight(
                Effect.annotateCurrentSpan("bulkhead.rejected", failure.value.reason),
                Effect.failCause(cause)
              )
              : Effect.failCause(cause)
          },
          // the slot was handed over with `active` unchanged: it is ours now
          onSuccess: () =>
            Effect.zipRight(
              Effect.annotateCurrentSpan("bulkhead.queued_ms", clock.unsafeCurrentTimeMillis() - since),
              run(restore(self))
            )
        })
      })
    })

  const bulkhead: Bulkhead = {
    maxConcurrent,
    maxQueue,
    protect,
    stats: Effect.sync(() => ({ active, queued: queue.size }))
  }
  return { bulkhead, close }
}

export const layer = <I>(tag: Context.Tag<I, Bulkhead>, options: Options): Layer.Layer<I> =>
  Layer.scoped(tag, make(options))
