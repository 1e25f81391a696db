import { FairQueue } from "@effect-resilience/core/fairQueue"
import type { Metric } from "effect"
import { Cause, Effect } from "effect"
import { monotonicMillis } from "./clock.js"
import { counterWith } from "./metrics.js"
import { resume } from "./resume.js"
import { event } from "./trace.js"

/**
 * Why a call did not get a slot: the queue was full, the wait too long, the slots closed, or (adaptive limiter
 * with criticality) the call's share of the limit was used up.
 */
export type RejectionReason = "queue-full" | "queue-timeout" | "closed" | "shed"

/**
 * A rejections counter per reason, built once with its attributes (`attributes` plus `reason`): the series that
 * `Metric.withAttributes(counter, { ...attributes, reason })` reads.
 */
export const reasonCounters = (
  counter: Metric.Counter<number>,
  attributes: Readonly<Record<string, string>>
): Record<RejectionReason, Metric.Counter<number>> => {
  const of = (reason: RejectionReason) => counterWith(counter, { ...attributes, reason })
  return {
    "queue-full": of("queue-full"),
    "queue-timeout": of("queue-timeout"),
    "closed": of("closed"),
    "shed": of("shed")
  }
}

export interface Config<Err extends { readonly reason: RejectionReason }> {
  /** The slots in force now; read on every admission and release, so it may change between calls. */
  readonly capacity: () => number
  readonly maxQueue: number
  readonly queueTimeout: number | undefined
  /** Builds the rejection (and counts it). */
  readonly reject: (reason: RejectionReason) => Err
  /** Gauge updates, by deltas. */
  readonly onActive: (delta: number) => void
  readonly onQueued: (delta: number) => void
  /** A queued call got its slot after waiting `millis` (the queue-wait histograms; not called for no wait). */
  readonly onWaited?: ((millis: number) => void) | undefined
  /** Span attributes: `${span}.queued_ms` and `${span}.rejected`. */
  readonly span: string
  /** Span events: `${module}.queued` (the wait) and `${module}.rejected` (the reason), with `labels`. */
  readonly module: string
  readonly labels: Readonly<Record<string, string>>
}

export interface Slots<Err> {
  /**
   * Runs `self` in a slot: at once when one is free, after the callers queued before it otherwise, or fails
   * with the rejection without running it. The slot is given back however `self` ends. With `share`, a call that
   * finds `share` or more slots taken is refused at once with reason `"shed"` (it neither runs nor queues):
   * the rest of the capacity is kept for calls with a larger share. With `partition`, waiters are served
   * round robin between the partitions that wait (`core/fairQueue.ts`), first in first out within each; a
   * full queue drops the newest waiter of its longest partition for a newcomer of a shorter one. Calls
   * without a partition share one. A partitioned call over its `share` is not refused at once but waits,
   * and is granted a slot only while fewer than `share` are taken: more critical waiters pass it.
   */
  readonly protect: <A, E, R>(
    self: Effect.Effect<A, E, R>,
    share?: number,
    partition?: string
  ) => Effect.Effect<A, E | Err, R>
  /** Calls holding a slot, and calls waiting. */
  readonly active: () => number
  readonly queued: () => number
  /** Rejects every waiter and every later call with reason `"closed"`; running calls finish. */
  readonly close: () => void
}

const WAITING = 0
const GRANTED = 1
const REJECTED = 2

/**
 * A queued caller. The slot may be granted (or the slots closed) before the caller's fiber has registered its
 * callback, so the outcome is recorded first and delivered on registration.
 */
class Waiter<Err> {
  state = WAITING
  resume: ((effect: Effect.Effect<void, Err>) => void) | undefined = undefined
  rejection: Err | undefined = undefined
  /** `share`: the waiter is granted a slot only while fewer than this many are taken (see `protect`). */
  constructor(readonly partition: string, readonly share: number | undefined) {}
}

/** Waits until the waiter is granted its slot or rejected, or `queueTimeout` (if any) passes. */
function wait<Err>(
  waiter: Waiter<Err>,
  queueTimeout: number | undefined,
  reject: (reason: RejectionReason) => Err
): Effect.Effect<void, Err> {
  const waiting = Effect.callback<void, Err>((wake) => {
    if (waiter.state === GRANTED) wake(Effect.void)
    else if (waiter.state === REJECTED) wake(Effect.fail(waiter.rejection!))
    else waiter.resume = wake
  })
  return queueTimeout === undefined
    ? waiting
    : Effect.timeoutOrElse(waiting, {
      duration: queueTimeout,
      orElse: () => Effect.fail(reject("queue-timeout"))
    })
}

const rejectedEvent = (config: Pick<Config<never>, "module" | "labels">, reason: string) =>
  event(`${config.module}.rejected`, () => ({ ...config.labels, reason }))

/**
 * Waits in the queue for the slot `waiter` was promised, then runs `inSlot`; a wait that ends without the slot
 * (interrupted, timed out, rejected) calls `abandon` and fails as it ended, with the reason on the span.
 */
function waitForSlot<A, E, R, Err extends { readonly reason: RejectionReason }>(
  waiter: Waiter<Err>,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
  inSlot: Effect.Effect<A, E, R>,
  config: Config<Err>,
  abandon: () => void
): Effect.Effect<A, E | Err, R> {
  return Effect.clockWith((clock) => {
    const since = monotonicMillis(clock)
    return Effect.matchCauseEffect(restore(wait(waiter, config.queueTimeout, config.reject)), {
      onFailure: (cause) => {
        abandon()
        const failure = Cause.findErrorOption(cause)
        return failure._tag === "Some"
          ? Effect.annotateCurrentSpan(`${config.span}.rejected`, failure.value.reason).pipe(
            Effect.andThen(rejectedEvent(config, failure.value.reason)),
            Effect.andThen(Effect.failCause(cause))
          )
          : Effect.failCause(cause)
      },
      // drain() counted the slot it handed over in `active`: it is ours now
      onSuccess: () => {
        const waited = monotonicMillis(clock) - since
        config.onWaited?.(waited)
        return Effect.annotateCurrentSpan(`${config.span}.queued_ms`, waited).pipe(
          Effect.andThen(event(`${config.module}.queued`, () => ({ ...config.labels, "queue.wait_ms": waited }))),
          Effect.andThen(inSlot)
        )
      }
    })
  })
}

/** A refusal: the reason as an attribute and an event of the current span, then the call's failure. */
const rejecter = <Err extends { readonly reason: RejectionReason }>(config: Config<Err>) => {
  const rejectedAttr = `${config.span}.rejected`
  return (reason: RejectionReason): Effect.Effect<never, Err> =>
    Effect.annotateCurrentSpan(rejectedAttr, reason).pipe(
      Effect.andThen(rejectedEvent(config, reason)),
      Effect.andThen(Effect.fail(config.reject(reason)))
    )
}

/**
 * A first-in-first-out set of slots, shared by `Bulkhead` (fixed capacity) and `AdaptiveLimiter` (a capacity that
 * moves). The state is plain fields read and written synchronously inside `uninterruptibleMask`, so the
 * uncontended path is one mask and one match frame: no Ref, no Semaphore, no fork. A released slot goes straight
 * to the next waiter while the capacity allows it, so a newcomer never takes a slot a waiter was promised.
 * Waiters sit in a `FairQueue` (insertion-ordered sets per partition, O(1) delete) so an interrupted waiter
 * leaves the queue at once; with one partition (no call names one) it is first in, first out.
 */
export const make = <Err extends { readonly reason: RejectionReason }>(config: Config<Err>): Slots<Err> => {
  const { capacity, maxQueue, onActive, onQueued } = config
  const reject = rejecter(config)
  let active = 0
  let closed = false
  const queue = new FairQueue<Waiter<Err>>()

  const eligible = (waiter: Waiter<Err>) => waiter.share === undefined || active < waiter.share

  /**
   * Hands free slots to the oldest waiters while the capacity allows: one per release when it has not moved,
   * several after it grew, none after it shrank. Returns how many were handed over.
   */
  function drain(): number {
    let granted = 0
    while (queue.size > 0 && active < capacity()) {
      const waiter = queue.shiftWhere(eligible)
      if (waiter === undefined) break
      waiter.state = GRANTED
      active++
      granted++
      // Effect 4 runs the waiter on this stack: a chain of waiters handed slots one after another nests
      if (waiter.resume !== undefined) resume(waiter.resume, Effect.void)
    }
    if (granted > 0) onQueued(-granted)
    return granted
  }

  /** Gives a slot back (to the oldest waiter when the capacity allows). */
  function release(): void {
    active--
    const granted = drain()
    if (granted !== 1) onActive(granted - 1)
  }

  /** A waiter stopped waiting without running (interrupted, timed out, or rejected at close). */
  function abandon(waiter: Waiter<Err>): void {
    if (waiter.state === GRANTED) {
      // the slot arrived just as the wait ended: pass it on rather than leak it
      release()
    } else if (waiter.state === WAITING) {
      waiter.state = REJECTED
      queue.delete(waiter.partition, waiter)
      onQueued(-1)
    }
  }

  function close(): void {
    closed = true
    if (queue.size === 0) return
    const waiters = queue.drainAll()
    onQueued(-waiters.length)
    for (const waiter of waiters) {
      waiter.state = REJECTED
      waiter.rejection = config.reject("closed")
      if (waiter.resume !== undefined) resume(waiter.resume, Effect.fail(waiter.rejection))
    }
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

  /** Refuses a queued waiter with `reason` (it was dropped to make room for another partition's). */
  function drop(waiter: Waiter<Err>, reason: RejectionReason): void {
    waiter.state = REJECTED
    waiter.rejection = config.reject(reason)
    onQueued(-1)
    if (waiter.resume !== undefined) resume(waiter.resume, Effect.fail(waiter.rejection))
  }

  const protect = <A, E, R>(
    self: Effect.Effect<A, E, R>,
    share?: number,
    partition?: string
  ): Effect.Effect<A, E | Err, R> =>
    Effect.uninterruptibleMask((restore) => {
      if (closed) return reject("closed")
      const overShare = share !== undefined && active >= share
      if (overShare && partition === undefined) return reject("shed")
      // the capacity may have grown since the last release: waiters first
      if (queue.size > 0 && active < capacity()) onActive(drain())
      if (active < capacity() && queue.size === 0 && !overShare) {
        active++
        onActive(1)
        return run(restore(self))
      }
      if (queue.size >= maxQueue) {
        const evicted = maxQueue > 0 ? queue.evictFor(partition ?? "") : undefined
        if (evicted === undefined) return reject("queue-full")
        drop(evicted, "queue-full")
      }
      const waiter = new Waiter<Err>(partition ?? "", share)
      queue.push(waiter.partition, waiter)
      onQueued(1)
      // a free slot the waiters before it may not take (over their share) may be this one's
      if (active < capacity()) onActive(drain())
      return waitForSlot(waiter, restore, run(restore(self)), config, () => abandon(waiter))
    })

  return { protect, active: () => active, queued: () => queue.size, close }
}
