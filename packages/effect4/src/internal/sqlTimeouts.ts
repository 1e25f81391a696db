import { Cause, type Clock, Duration, Effect, Exit, Fiber, Option } from "effect"
import { resume } from "./resume.js"

/**
 * Runs `effect` in a fiber of its own that the caller's interruption does not wait for (Effect 3's
 * `Effect.disconnect`): a driver call that cannot be aborted must not hold a timed-out caller. A statement whose
 * own fiber was interrupted (a client whose pool was shut down interrupts its waiters) fails instead: a store
 * operation ends in its value or an error, never in an interruption the caller did not ask for.
 */
export const disconnect = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | Error, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Effect.forkDetach(Effect.interruptible(effect)), (fiber) =>
      Effect.onInterrupt(
        Effect.flatMap(restore(Fiber.await(fiber)), (exit): Effect.Effect<A, E | Error> =>
          Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)
            ? Effect.fail(interruptedStatement())
            : exit),
        () =>
          Effect.sync(() =>
            fiber.interruptUnsafe()
          )
      ))
  )

/** The failure of a statement whose own fiber was interrupted (see `disconnect`). */
const interruptedStatement = () => new Error("the statement was interrupted: is the database client closed?")

/** A caller of {@link Timeouts} waiting for its statement, in the list in the order of its deadline. */
class Waiter {
  prev: Waiter = this
  next: Waiter = this
  /** Ends the wait as timed out (set once the caller waits). */
  expire: (() => void) | undefined = undefined
  /** Its deadline has come (perhaps before the caller began to wait: then it does not wait at all). */
  expired = false
  constructor(
    /** `Clock.monotonicTimeNanosUnsafe` when it times out. */
    readonly at: bigint
  ) {}
}

/**
 * `disconnect` and a timeout of `duration` in one, for all of a store's operations: one sleeping fiber times
 * them all out, instead of a timer fiber raced against each (forking, arming, interrupting it cost most of a
 * fast statement). `run`'s effect starts at once in a fiber of its own, interruptible (the timeout works even
 * where the caller runs uninterruptibly: the middleware's claim-to-completion region); the caller waits for it
 * in a list in the order of the deadlines (one duration: the order they came in), joined and left in constant
 * time. The sleeping fiber sleeps until the first deadline, fails the callers whose deadline has come (their
 * statements are interrupted in the background, not waited for: a query the driver cannot abort), sleeps again,
 * and ends when it wakes to find none waiting, or at `shutdown` when none waits.
 *
 * Deadlines are `Clock.monotonicTimeNanosUnsafe` of the clock of the caller that started the sleeping fiber,
 * which sleeps on it; a caller with another clock (a test's `TestClock` while the fiber sleeps on another's)
 * waits with a timer of its own.
 */
export class Timeouts {
  private readonly nanos: bigint
  /** The list's sentinel: `head.next` is the first deadline, `head.prev` the last. */
  private readonly head = new Waiter(0n)
  /** The sleeping fiber, while it lives, and the clock it sleeps on. */
  private fiber: Fiber.Fiber<void> | undefined = undefined
  private clock: Clock.Clock | undefined = undefined
  /** A caller is starting the sleeping fiber (set at once, so that no other caller starts a second one). */
  private starting = false
  /** How many times the sleeping fiber was started (a diagnostic, read by the tests). */
  starts = 0

  constructor(readonly duration: Duration.Duration) {
    this.nanos = Duration.toNanosUnsafe(duration)
  }

  /** `disconnect(effect)`, failing with `onTimeout()` after the duration (of `clock`). */
  run<A, E, R, E2>(
    effect: Effect.Effect<A, E, R>,
    clock: Clock.Clock,
    onTimeout: () => E2
  ): Effect.Effect<A, E | E2 | Error, R> {
    return Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(
        Effect.forkDetach(effect, { startImmediately: true, uninterruptible: false }),
        (child): Effect.Effect<A, E | E2 | Error> => {
          const done = child.pollUnsafe()
          if (done !== undefined) return settled(done)
          if (this.clock !== undefined && this.clock !== clock) {
            return Effect.flatMap(
              restore(Effect.timeoutOption(Effect.interruptible(Fiber.await(child)), this.duration)),
              (exit): Effect.Effect<A, E | E2 | Error> => {
                if (Option.isSome(exit)) return settled(exit.value)
                child.interruptUnsafe()
                return Effect.fail(onTimeout())
              }
            ).pipe(Effect.onInterrupt(() => Effect.sync(() => child.interruptUnsafe())))
          }
          const waiter = new Waiter(clock.monotonicTimeNanosUnsafe() + this.nanos)
          this.link(waiter)
          return Effect.andThen(
            this.startIfIdle(clock),
            Effect.flatMap(
              Effect.onInterrupt(restore(this.wait(child, waiter)), () => Effect.sync(() => child.interruptUnsafe())),
              (exit): Effect.Effect<A, E | E2 | Error> => {
                if (exit !== undefined) return settled(exit)
                child.interruptUnsafe()
                return Effect.fail(onTimeout())
              }
            )
          )
        }
      )
    )
  }

  /**
   * Stops the sleeping fiber if no caller waits (the store is closing: its fiber must not keep the process up
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

  /** The child's exit, or `undefined` at the waiter's deadline; as interruptible as the caller. */
  private wait<A, E>(child: Fiber.Fiber<A, E>, waiter: Waiter): Effect.Effect<Exit.Exit<A, E> | undefined> {
    return Effect.callback((wake) => {
      if (waiter.expired) return resume(wake, Effect.succeed(undefined))
      const offChild = child.addObserver((exit) => {
        this.unlink(waiter)
        resume(wake, Effect.succeed(exit))
      })
      waiter.expire = () => {
        offChild()
        resume(wake, Effect.succeed(undefined))
      }
      return Effect.sync(() => {
        this.unlink(waiter)
        offChild()
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
    if (this.fiber !== undefined || this.starting) return Effect.void
    this.starting = true
    this.clock = clock
    this.starts++
    return Effect.map(
      Effect.forkDetach(this.loop(clock), { startImmediately: true, uninterruptible: false }),
      (fiber) => {
        this.starting = false
        // it may have ended already (nothing waiting: it cleared the clock), then a later caller starts another
        if (fiber.pollUnsafe() === undefined) {
          this.fiber = fiber
        }
      }
    )
  }

  /** Times out the callers whose deadline has come, then sleeps until the next one's, or ends. */
  private loop(clock: Clock.Clock): Effect.Effect<void> {
    return Effect.suspend(() => {
      const now = clock.monotonicTimeNanosUnsafe()
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
      return Effect.andThen(clock.sleep(Duration.nanos(first.at - now)), this.loop(clock))
    })
  }
}

/** A statement's exit as the caller sees it: an interruption of its own fiber is a failure (see `disconnect`). */
const settled = <A, E>(exit: Exit.Exit<A, E>): Effect.Effect<A, E | Error> =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? Effect.fail(interruptedStatement()) : exit
