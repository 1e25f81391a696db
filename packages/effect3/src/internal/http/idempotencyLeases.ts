import { LeaseLink, LeaseQueue } from "@effect-resilience/core/leaseQueue"
import { Clock, Effect, type FiberRefs } from "effect"
import { monotonicMillis, monotonicMillisOf } from "../clock.js"

/**
 * The lease renewals of one idempotency middleware's admitted handlers: one sleeping fiber for all of them,
 * not one per request. A handler's claim is renewed `every` ms (a third of the lease) after it was claimed,
 * then `every` ms after each renewal ended, while the store says the claim is still its own and until the
 * handler's answer is stored: the same schedule as a loop of `sleep`, `renew` per handler.
 *
 * The claims wait in a {@link LeaseQueue} (`core/leaseQueue.ts`), in the order they are due. One fiber
 * sleeps until the first is due (on the `Clock` of the request that woke it, as the per-request loop did; due
 * times are on its monotonic reading, so a step of the wall clock neither delays nor hurries a renewal),
 * starts the renewals due, and sleeps again; it ends when it wakes to find nothing waiting (or, just started,
 * after one more period), and the next claim starts it
 * again. A handler that ends before its first renewal costs a link and an unlink.
 *
 * Each renewal runs in a fiber of its own, with the FiberRefs its handler had when its claim joined (its
 * `Clock`, log annotations and span, as a fiber forked from it would), so a slow store delays no other
 * claim's renewal. A renewal still running when its handler ends is not stopped (the store refuses it once
 * the claim is completed or released, as it refuses any late write of a lost owner), but the claim is not
 * renewed again.
 */
export class Lease extends LeaseLink {
  constructor(
    /** Renews the claim: whether it is still this handler's (a failure counts as still owned, logged). */
    readonly renew: Effect.Effect<boolean>,
    readonly fiberRefs: FiberRefs.FiberRefs
  ) {
    super()
  }
}

export class Leases {
  private readonly queue: LeaseQueue<Lease>
  /** Whether the renewing fiber is alive (asleep until the first is due, or starting the renewals due). */
  private running = false
  /** How many times the renewing fiber was started (a diagnostic, read by the tests). */
  starts = 0

  constructor(readonly every: number) {
    this.queue = new LeaseQueue(every)
  }

  /** Runs `effect` (a handler and the storing of its answer) with its claim renewed by `renew` meanwhile. */
  renewing<A, E, R>(renew: Effect.Effect<boolean>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.withFiberRuntime((fiber) => {
      const lease = new Lease(renew, fiber.getFiberRefs())
      // the finalizer first: a lease that joined the list always leaves it
      return Effect.ensuring(
        Effect.zipRight(Effect.suspend(() => this.enqueue(lease, monotonicMillisOf(fiber))), effect),
        Effect.sync(() => this.queue.end(lease))
      )
    })
  }

  /**
   * The parts of {@link renewing} for a caller that holds the handler's fiber itself (the middleware): puts a
   * claim, renewed by `renew` with `fiberRefs`, at the end of the list, and returns its lease. The caller
   * runs {@link started} next, and {@link end}s the lease when the handler's fiber ends. `now` is the monotonic
   * reading of the handler's clock (`internal/clock.ts`).
   */
  join(renew: Effect.Effect<boolean>, fiberRefs: FiberRefs.FiberRefs, now: number): Lease {
    const lease = new Lease(renew, fiberRefs)
    this.queue.push(lease, now)
    return lease
  }

  /** Starts the renewing fiber if there is none (after a {@link join}). */
  get started(): Effect.Effect<void> {
    return this.running ? Effect.void : this.start
  }

  /** The handler of `lease` has ended: its claim is never renewed again. */
  end(lease: Lease): void {
    this.queue.end(lease)
  }

  /** Puts `lease` at the end of the list; starts the renewing fiber if there is none. */
  private enqueue(lease: Lease, now: number): Effect.Effect<void> {
    this.queue.push(lease, now)
    return this.started
  }

  private readonly start: Effect.Effect<void> = Effect.uninterruptible(Effect.suspend(() => {
    if (this.running) return Effect.void
    this.running = true
    this.starts++
    // interruptible even when started from a handler that the server runs uninterruptibly
    return Effect.asVoid(Effect.forkDaemon(Effect.interruptible(Effect.onInterrupt(
      this.loop(true),
      () => Effect.sync(() => (this.running = false))
    ))))
  }))

  /**
   * The renewing fiber: starts the renewals due, sleeps until the next one is, ends when it wakes and none
   * waits. Just started (`fresh`) with none waiting (the handler that started it has already answered, as
   * most do), it sleeps one period first: a claim that joins meanwhile is due no sooner than that, and a
   * stream of quick handlers then starts one fiber a period instead of one each.
   */
  private loop(fresh: boolean): Effect.Effect<void> {
    return Clock.clockWith((clock) =>
      Effect.suspend(() => {
        const now = monotonicMillis(clock)
        const due = this.queue.takeDue(now)
        const next = this.queue.first
        // nothing else waits: this fiber ends, and a renewal that keeps its claim starts one again
        if (next === undefined && !fresh) this.running = false
        const started = Effect.forEach(due, (lease) => Effect.forkDaemon(this.renewal(lease)), { discard: true })
        if (next === undefined && !fresh) return started
        const pause = next === undefined ? this.every : next.due - now
        return Effect.zipRight(started, Effect.zipRight(Effect.sleep(pause), this.loop(false)))
      })
    )
  }

  /** One renewal, in the FiberRefs of the lease's handler; the lease waits again if it is still owned. */
  private renewal(lease: Lease): Effect.Effect<void> {
    return Effect.zipRight(
      Effect.setFiberRefs(lease.fiberRefs),
      Effect.flatMap(
        lease.renew,
        (owned) =>
          Clock.clockWith((clock) =>
            Effect.suspend(() =>
              this.queue.renewed(lease, owned, monotonicMillis(clock))
                ? (this.running ? Effect.void : this.start)
                : Effect.void
            )
          )
      )
    )
  }
}
