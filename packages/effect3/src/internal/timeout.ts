import { Clock, Context, Duration, Effect, Exit, Fiber, FiberId, RuntimeFlags } from "effect"
import { monotonicMillis } from "./clock.js"
import { forkDetached, isActive, startFrom } from "./fastPath.js"

/**
 * Stops a fiber that no one waits for: the interruption is sent, not awaited (`Fiber.interruptFork` without the
 * fiber it forks to wait for it).
 */
const interruptLater = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Effect.Effect<void> =>
  Effect.sync(() => fiber.unsafeInterruptAsFork(FiberId.none))

/**
 * Runs `self` until the absolute instant `at` (of the monotonic reading of `clock`, `internal/clock.ts`, as
 * deadlines are), then interrupts it, waits for its finalizers, and fails with `onTimeout()`. `self` runs in a
 * fiber of its own, started from the caller's runtime (its context, FiberRefs and interruptibility): like any
 * forked fiber, its FiberRef changes stay inside (`Effect.timeout` copies them back, at a cost).
 *
 * Effect's own `timeout` forks two fibers and costs a scheduler round trip even when `self` is synchronous.
 * Here `self` starts at once, on the caller's stack (the fast path of `fastPath.forkDetached`), and when it is
 * already done on return — the common case for fast calls — no timer is ever armed. Otherwise the timer is
 * aimed at `at` as the clock reads *after* the synchronous start, so a blocking prefix is not given a whole
 * extra budget. (Under the fallback, `self` starts on the scheduler and always takes the timer's path.)
 */
export const timeoutWith = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2
): Effect.Effect<A, E | E2, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(forkDetached(restore(self)), (child): Effect.Effect<A, E | E2> => {
      const done = child.unsafePoll()
      if (done !== null) return done
      const left = at - monotonicMillis(clock)
      if (left <= 0) return Effect.zipRight(Fiber.interrupt(child), Exit.fail(onTimeout()))
      return Effect.flatMap(
        Effect.fork(Effect.interruptible(clock.sleep(Duration.millis(left)))),
        (timer) =>
          Effect.flatMap(
            Effect.onInterrupt(restore(firstOf(child, timer)), () => Fiber.interrupt(child)),
            (exit): Effect.Effect<A, E | E2> => {
              if (exit !== undefined) return Effect.zipRight(interruptLater(timer), exit)
              return Effect.zipRight(Fiber.interrupt(child), Exit.fail(onTimeout()))
            }
          )
      )
    })
  )

/**
 * Waits for the child's exit or the timer, whichever comes first (`undefined` for the timer). A plain
 * callback wait, so it is as interruptible as the caller and no third fiber is needed: the caller may be
 * uninterruptible (@effect/platform runs HTTP apps so) and the timer must still be able to end the wait.
 */
export const firstOf = <A, E>(
  child: Fiber.RuntimeFiber<A, E>,
  timer: Fiber.RuntimeFiber<void>
): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Effect.async((resume) => {
    const onChild = (exit: Exit.Exit<A, E>) => resume(Effect.succeed(exit))
    const onTimer = () => resume(Effect.succeed(undefined))
    child.addObserver(onChild)
    timer.addObserver(onTimer)
    return Effect.sync(() => {
      child.removeObserver(onChild)
      timer.removeObserver(onTimer)
    })
  })

/**
 * `Effect.disconnect` and `Effect.timeoutFail` in one, with one fiber for `self` (started at once, see
 * `timeoutWith`) and one for the timer, instead of three: `self` runs interruptibly in a fiber of its own;
 * after `duration` (of `clock`) it is interrupted in the background and the caller fails with `onTimeout()`
 * at once, without waiting for it (a query the driver cannot abort). A caller that is interrupted leaves it
 * the same way.
 */
export const timeoutDisconnected = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  duration: Duration.Duration,
  clock: Clock.Clock,
  onTimeout: () => E2
): Effect.Effect<A, E | E2, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(forkDetached(Effect.interruptible(self)), (child): Effect.Effect<A, E | E2> => {
      const done = child.unsafePoll()
      if (done !== null) return done
      return awaitWithTimer(child, duration, clock, onTimeout, restore)
    })
  )

/** The rest of {@link timeoutDisconnected} for a `child` that did not end at once: a timer fiber of its own. */
const awaitWithTimer = <A, E, E2>(
  child: Fiber.RuntimeFiber<A, E>,
  duration: Duration.Duration,
  clock: Clock.Clock,
  onTimeout: () => E2,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
): Effect.Effect<A, E | E2> =>
  Effect.flatMap(
    Effect.fork(Effect.interruptible(clock.sleep(duration))),
    (timer) =>
      Effect.flatMap(
        Effect.onInterrupt(
          restore(firstOf(child, timer)),
          () => Effect.zipRight(interruptLater(timer), interruptLater(child))
        ),
        (exit): Effect.Effect<A, E | E2> => {
          if (exit !== undefined) return Effect.zipRight(interruptLater(timer), exit)
          return Effect.zipRight(interruptLater(child), Exit.fail(onTimeout()))
        }
      )
  )

/** A caller of {@link DisconnectedTimeouts} waiting for its operation, in the list in the order of its deadline. */
class Waiter {
  prev: Waiter = this
  next: Waiter = this
  /** Ends the wait as timed out (set once the caller waits). */
  expire: (() => void) | undefined = undefined
  /** Its deadline has come (perhaps before the caller began to wait: then it does not wait at all). */
  expired = false
  constructor(
    /** `Clock.unsafeCurrentTimeNanos` when it times out. */
    readonly at: bigint
  ) {}
}

/**
 * {@link timeoutDisconnected} for many operations with one `duration`, as a service that makes many calls
 * (a store) uses it: the same results, but one sleeping fiber for all its operations in flight instead of a
 * timer fiber each (forking it, arming its timer, interrupting it and clearing the timer cost most of a fast
 * operation). The waiting callers are a list in the order of their deadlines (one duration: the order they
 * came in), so a caller joins it and leaves it in constant time. The sleeping fiber sleeps until the first
 * deadline, times out the callers whose deadline has come, and sleeps again; it ends when it wakes to find
 * none waiting (the next caller starts it again), or at {@link shutdown}.
 *
 * Deadlines are taken from `Clock.unsafeCurrentTimeNanos` (monotonic with the live clock) of the clock of the
 * caller that started the sleeping fiber, which sleeps on that clock; a caller with another clock (a test's
 * `TestClock` while the fiber sleeps on another's) gets a timer of its own, as {@link timeoutDisconnected}.
 */
export class DisconnectedTimeouts {
  private readonly nanos: bigint
  /** The list's sentinel: `head.next` is the first deadline, `head.prev` the last. */
  private readonly head = new Waiter(0n)
  /** The sleeping fiber, while it lives, and the clock it sleeps on. */
  private fiber: Fiber.RuntimeFiber<void> | undefined = undefined
  private clock: Clock.Clock | undefined = undefined
  /** A caller is starting the sleeping fiber (set at once, so that no other caller starts a second one). */
  private starting = false
  /** How many times the sleeping fiber was started (a diagnostic, read by the tests). */
  starts = 0

  constructor(readonly duration: Duration.Duration) {
    this.nanos = Duration.unsafeToNanos(duration)
  }

  /**
   * `timeoutDisconnected(self, this.duration, clock, onTimeout)`. A caller that cannot be interrupted (the
   * idempotency middleware's claim-to-completion region; @effect/platform runs every HTTP app so) takes a
   * shorter path with the same results: nothing can interrupt it between the fork and the wait, so it needs
   * no mask, no interruption handler and no canceler, only the fork and one callback wait. Each of those
   * layers cost a fast operation an allocation (Effect 3's run loop allocates per step), and the garbage of
   * a store operation was most of its CPU beyond the statement's own.
   */
  run<A, E, R, E2>(self: Effect.Effect<A, E, R>, clock: Clock.Clock, onTimeout: () => E2): Effect.Effect<A, E | E2, R> {
    return Effect.withFiberRuntime((parent, status) =>
      this.runFrom(parent, status.runtimeFlags, self, clock, onTimeout)
    )
  }

  /** {@link run} on the caller's clock, with `self` made from it (one step fewer than `Effect.clockWith`). */
  runWithClock<A, E, R, E2>(
    self: (clock: Clock.Clock) => Effect.Effect<A, E, R>,
    onTimeout: () => E2
  ): Effect.Effect<A, E | E2, R> {
    return Effect.withFiberRuntime((parent, status) => {
      const clock = Context.get(parent.currentDefaultServices, Clock.Clock)
      return this.runFrom(parent, status.runtimeFlags, self(clock), clock, onTimeout)
    })
  }

  private runFrom<A, E, R, E2>(
    parent: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    self: Effect.Effect<A, E, R>,
    clock: Clock.Clock,
    onTimeout: () => E2
  ): Effect.Effect<A, E | E2, R> {
    return RuntimeFlags.interruptible(runtimeFlags) || !isActive() || (this.clock !== undefined && this.clock !== clock)
      ? this.runInterruptible(self, clock, onTimeout)
      : this.runUninterruptible(parent, runtimeFlags, self, clock, onTimeout)
  }

  /** {@link run} for a caller that may be interrupted while it waits: it leaves at once and interrupts `self`. */
  private runInterruptible<A, E, R, E2>(
    self: Effect.Effect<A, E, R>,
    clock: Clock.Clock,
    onTimeout: () => E2
  ): Effect.Effect<A, E | E2, R> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(forkDetached(Effect.interruptible(self)), (child): Effect.Effect<A, E | E2> => {
        const done = child.unsafePoll()
        if (done !== null) return done
        if (this.clock !== undefined && this.clock !== clock) {
          return awaitWithTimer(child, this.duration, clock, onTimeout, restore)
        }
        const waiter = new Waiter(clock.unsafeCurrentTimeNanos() + this.nanos)
        this.link(waiter)
        return Effect.zipRight(
          this.startIfIdle(clock),
          Effect.flatMap(
            Effect.onInterrupt(restore(this.wait(child, waiter)), () => interruptLater(child)),
            (exit): Effect.Effect<A, E | E2> => {
              if (exit !== undefined) return exit
              return Effect.zipRight(interruptLater(child), Exit.fail(onTimeout()))
            }
          )
        )
      })
    )
  }

  /**
   * {@link run} for a caller that cannot be interrupted (with the fast path of `fastPath.ts`, whose synchronous
   * start it uses directly): `self` starts at once in an interruptible fiber of its own, from the caller's
   * runtime, and the caller waits for its exit, or for its deadline (then `self` is interrupted in the
   * background and the caller fails with `onTimeout()`).
   */
  private runUninterruptible<A, E, R, E2>(
    parent: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    self: Effect.Effect<A, E, R>,
    clock: Clock.Clock,
    onTimeout: () => E2
  ): Effect.Effect<A, E | E2, R> {
    const flags = RuntimeFlags.enable(runtimeFlags, RuntimeFlags.Interruption)
    const child = startFrom(parent, flags, self)
    const done = child.unsafePoll()
    if (done !== null) return done
    const waiter = new Waiter(clock.unsafeCurrentTimeNanos() + this.nanos)
    return Effect.async<A, E | E2>((resume) => {
      const onChild = (exit: Exit.Exit<A, E>) => {
        this.unlink(waiter)
        resume(exit)
      }
      // set before the sleeping fiber may start (on this stack): a deadline already passed ends the wait at once
      waiter.expire = () => {
        child.removeObserver(onChild)
        child.unsafeInterruptAsFork(FiberId.none)
        resume(Exit.fail(onTimeout()))
      }
      // linked first: a child that has ended meanwhile (the caller yielded to the scheduler) leaves it at once
      this.link(waiter)
      child.addObserver(onChild)
      this.startNow(parent, flags, clock)
    })
  }

  /**
   * Stops the sleeping fiber if no caller waits (the service is closing: its fiber must not keep the process up
   * until its next deadline). With callers waiting it stays, to time them out, and ends when none is left.
   */
  get shutdown(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const fiber = this.fiber
      if (fiber === undefined || this.head.next !== this.head) return Effect.void
      this.fiber = undefined
      this.clock = undefined
      return Fiber.interrupt(fiber)
    })
  }

  /** Whether the sleeping fiber lives (a diagnostic, read by the tests). */
  get sleeping(): boolean {
    return this.fiber !== undefined
  }

  /** The child's exit, or `undefined` at the waiter's deadline; as interruptible as the caller (see `firstOf`). */
  private wait<A, E>(child: Fiber.RuntimeFiber<A, E>, waiter: Waiter): Effect.Effect<Exit.Exit<A, E> | undefined> {
    return Effect.async((resume) => {
      if (waiter.expired) return resume(Effect.succeed(undefined))
      const onChild = (exit: Exit.Exit<A, E>) => {
        this.unlink(waiter)
        resume(Effect.succeed(exit))
      }
      waiter.expire = () => {
        child.removeObserver(onChild)
        resume(Effect.succeed(undefined))
      }
      child.addObserver(onChild)
      return Effect.sync(() => {
        this.unlink(waiter)
        child.removeObserver(onChild)
      })
    })
  }

  private link(waiter: Waiter): void {
    const last = this.head.prev
    waiter.prev = last
    waiter.next = this.head
    last.next = waiter
    this.head.prev = waiter
  }

  private unlink(waiter: Waiter): void {
    waiter.prev.next = waiter.next
    waiter.next.prev = waiter.prev
    waiter.prev = waiter
    waiter.next = waiter
    waiter.expire = undefined
  }

  /**
   * Starts the sleeping fiber on `clock` unless it lives or is being started, interruptible even from an
   * uninterruptible caller. Which clock it sleeps on is decided here, at once: a caller that runs before the
   * fiber has started sees it, so deadlines of other clocks never join the list.
   */
  private startIfIdle(clock: Clock.Clock): Effect.Effect<void> {
    if (!this.claimStart(clock)) return Effect.void
    return Effect.map(forkDetached(Effect.interruptible(this.loop(clock))), (fiber) => this.started(fiber))
  }

  /** {@link startIfIdle} at once, from `parent`'s runtime with the (interruptible) `runtimeFlags`. */
  private startNow(
    parent: Fiber.RuntimeFiber<unknown, unknown>,
    runtimeFlags: RuntimeFlags.RuntimeFlags,
    clock: Clock.Clock
  ): void {
    if (this.claimStart(clock)) this.started(startFrom(parent, runtimeFlags, this.loop(clock)))
  }

  /** Whether the caller is the one to start the sleeping fiber on `clock` (then it is marked as starting). */
  private claimStart(clock: Clock.Clock): boolean {
    if (this.fiber !== undefined || this.starting) return false
    this.starting = true
    this.clock = clock
    this.starts++
    return true
  }

  private started(fiber: Fiber.RuntimeFiber<void>): void {
    this.starting = false
    // it may have ended already (nothing waiting: it cleared the clock), then a later caller starts another
    if (fiber.unsafePoll() === null) {
      this.fiber = fiber
    }
  }

  /** Times out the callers whose deadline has come, then sleeps until the next one's, or ends. */
  private loop(clock: Clock.Clock): Effect.Effect<void> {
    return Effect.suspend(() => {
      const now = clock.unsafeCurrentTimeNanos()
      let first = this.head.next
      while (first !== this.head && first.at <= now) {
        const expire = first.expire
        this.unlink(first)
        first.expired = true
        expire?.()
        first = this.head.next
      }
      if (first === this.head) {
        this.fiber = undefined
        this.clock = undefined
        return Effect.void
      }
      return Effect.zipRight(clock.sleep(Duration.nanos(first.at - now)), this.loop(clock))
    })
  }
}
