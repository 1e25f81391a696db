import type { Clock } from "effect"
import { Duration, Effect, Exit, Fiber } from "effect"
import { forkDetached } from "./fastPath.js"

/**
 * Runs `self` until the absolute instant `at` (epoch milliseconds of `clock`), then interrupts it, waits for
 * its finalizers, and fails with `onTimeout()`. `self` runs in a fiber of its own, started from the caller's
 * runtime (its context, FiberRefs and interruptibility): like any forked fiber, its FiberRef changes stay
 * inside (`Effect.timeout` copies them back, at a cost).
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
      const left = at - clock.unsafeCurrentTimeMillis()
      if (left <= 0) return Effect.zipRight(Fiber.interrupt(child), Exit.fail(onTimeout()))
      return Effect.flatMap(
        Effect.fork(Effect.interruptible(clock.sleep(Duration.millis(left)))),
        (timer) =>
          Effect.flatMap(
            Effect.onInterrupt(restore(firstOf(child, timer)), () => Fiber.interrupt(child)),
            (exit): Effect.Effect<A, E | E2> => {
              if (exit !== undefined) return Effect.zipRight(Fiber.interruptFork(timer), exit)
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
const firstOf = <A, E>(
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
      return Effect.flatMap(
        Effect.fork(Effect.interruptible(clock.sleep(duration))),
        (timer) =>
          Effect.flatMap(
            Effect.onInterrupt(
              restore(firstOf(child, timer)),
              () => Effect.zipRight(Fiber.interruptFork(timer), Fiber.interruptFork(child))
            ),
            (exit): Effect.Effect<A, E | E2> => {
              if (exit !== undefined) return Effect.zipRight(Fiber.interruptFork(timer), exit)
              return Effect.zipRight(Fiber.interruptFork(child), Exit.fail(onTimeout()))
            }
          )
      )
    })
  )
