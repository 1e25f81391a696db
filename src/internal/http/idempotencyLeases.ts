import { Clock, Context, Effect, type FiberRefs } from "effect"

/**
 * The lease renewals of one idempotency middleware's admitted handlers: one sleeping fiber for all of them,
 * not one per request. A handler's claim is renewed `every` ms (a third of the lease) after it was claimed,
 * then `every` ms after each renewal ended, while the store says the claim is still its own and until the
 * handler's answer is stored: the same schedule as a loop of `sleep`, `renew` per handler.
 *
 * The claims wait in a doubly-linked list in the order they are due (every claim waits the same `every`, so
 * the order they joined in; a due time never moves before the one ahead of it, even if the clock steps
 * back). One fiber sleeps until the first is due (on the `Clock` of the request that woke it, as the
 * per-request loop did), starts the renewals due, and sleeps again; it ends when nothing is waiting, and
 * the next claim starts it again. A handler that ends before its first renewal costs a link and an unlink.
 *
 * Each renewal runs in a fiber of its own, with the FiberRefs its handler had when its claim joined (its
 * `Clock`, log annotations and span, as a fiber forked from it would), so a slow store delays no other
 * claim's renewal. A renewal still running when its handler ends is not stopped (the store refuses it once
 * the claim is completed or released, as it refuses any late write of a lost owner), but the claim is not
 * renewed again.
 */
export class Lease {
  prev: Lease | undefined = undefined
  next: Lease | undefined = undefined
  due = 0
  /** Whether it waits in the list (not while its renewal runs, nor once it has ended). */
  listed = false
  /** The handler has ended: its claim is never renewed again. */
  ended = false

  constructor(
    /** Renews the claim: whether it is still this handler's (a failure counts as still owned, logged). */
    readonly renew: Effect.Effect<boolean>,
    readonly fiberRefs: FiberRefs.FiberRefs
  ) {}
}

export class Leases {
  private head: Lease | undefined = undefined
  private tail: Lease | undefined = undefined
  /** Whether the renewing fiber is alive (asleep until the head is due, or starting the renewals due). */
  private running = false

  constructor(readonly every: number) {}

  /** Runs `effect` (a handler and the storing of its answer) with its claim renewed by `renew` meanwhile. */
  renewing<A, E, R>(renew: Effect.Effect<boolean>, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> {
    return Effect.withFiberRuntime((fiber) => {
      const lease = new Lease(renew, fiber.getFiberRefs())
      const clock = Context.get(fiber.currentDefaultServices, Clock.Clock)
      // the finalizer first: a lease that joined the list always leaves it
      return Effect.ensuring(
        Effect.zipRight(Effect.suspend(() => this.enqueue(lease, clock.unsafeCurrentTimeMillis())), effect),
        Effect.sync(() => this.end(lease))
      )
    })
  }

  /** Puts `lease` at the end of the list, due `every` after `now`; starts the renewing fiber if there is none. */
  private enqueue(lease: Lease, now: number): Effect.Effect<void> {
    lease.due = this.tail === undefined ? now + this.every : Math.max(now + this.every, this.tail.due)
    lease.listed = true
    lease.prev = this.tail
    lease.next = undefined
    if (this.tail === undefined) this.head = lease
    else this.tail.next = lease
    this.tail = lease
    return this.running ? Effect.void : this.start
  }

  private readonly start: Effect.Effect<void> = Effect.uninterruptible(Effect.suspend(() => {
    if (this.running) return Effect.void
    this.running = true
    // interruptible even when started from a handler that the server runs uninterruptibly
    return Effect.asVoid(Effect.forkDaemon(Effect.interruptible(Effect.onInterrupt(
      this.loop,
      () => Effect.sync(() => (this.running = false))
    ))))
  }))

  private unlink(lease: Lease): void {
    if (!lease.listed) return
    lease.listed = false
    if (lease.prev === undefined) this.head = lease.next
    else lease.prev.next = lease.next
    if (lease.next === undefined) this.tail = lease.prev
    else lease.next.prev = lease.prev
    lease.prev = lease.next = undefined
  }

  private end(lease: Lease): void {
    lease.ended = true
    this.unlink(lease)
  }

  /** The renewing fiber: starts the renewals due, sleeps until the next one is, ends when none waits. */
  private readonly loop: Effect.Effect<void> = Clock.clockWith((clock) =>
    Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeMillis()
      const due: Array<Lease> = []
      while (this.head !== undefined && this.head.due <= now) {
        const lease = this.head
        this.unlink(lease)
        due.push(lease)
      }
      const next = this.head
      // nothing else waits: this fiber ends, and a renewal that keeps its claim starts one again
      if (next === undefined) this.running = false
      const started = Effect.forEach(due, (lease) => Effect.forkDaemon(this.renewal(lease)), { discard: true })
      return next === undefined
        ? started
        : Effect.zipRight(started, Effect.zipRight(Effect.sleep(next.due - now), this.loop))
    })
  )

  /** One renewal, in the FiberRefs of the lease's handler; the lease waits again if it is still owned. */
  private renewal(lease: Lease): Effect.Effect<void> {
    return Effect.zipRight(
      Effect.setFiberRefs(lease.fiberRefs),
      Effect.flatMap(
        lease.renew,
        (owned) =>
          Clock.clockWith((clock) =>
            Effect.suspend(() =>
              owned && !lease.ended ? this.enqueue(lease, clock.unsafeCurrentTimeMillis()) : Effect.void
            )
          )
      )
    )
  }
}
