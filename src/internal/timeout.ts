import type { Clock, Context, FiberId } from "effect"
import { Duration, Effect, Exit, Fiber, FiberRefs, Runtime } from "effect"

/**
 * How many timed effects may start synchronously inside one another on one JavaScript stack. Deeper than
 * this, a child starts on the scheduler instead (as `Effect.fork` always does): nesting and recursion through
 * a timed effect then cost constant stack per level, at any depth.
 */
const MAX_SYNC_DEPTH = 64
let syncDepth = 0

/**
 * A fiber's FiberRefs keep, per FiberRef, a stack with one entry per fiber generation that set it (for
 * `join`); a fiber started from its parent's runtime pushes onto some of them, so without care every nesting
 * level would copy stacks as deep as the nesting. Timed fibers are never joined, so every `COLLAPSE_EVERY`
 * levels their stacks are cut down to their current values: stacks stay short and nesting stays linear.
 */
const COLLAPSE_EVERY = 16
const levels = new WeakMap<FiberId.FiberId, number>()

const collapse = (refs: FiberRefs.FiberRefs, id: FiberId.Runtime): FiberRefs.FiberRefs => {
  const locals = new Map<any, readonly [readonly [FiberId.Runtime, unknown]]>()
  for (const ref of FiberRefs.fiberRefs(refs)) locals.set(ref, [[id, FiberRefs.getOrDefault(refs, ref)]])
  return FiberRefs.unsafeMake(locals)
}

/**
 * Runs `self` until the absolute instant `at` (epoch milliseconds of `clock`), then interrupts it, waits for
 * its finalizers, and fails with `onTimeout()`. `self` runs in a fiber of its own, started from the caller's
 * runtime (its context, FiberRefs and interruptibility): like any forked fiber, its FiberRef changes stay
 * inside (`Effect.timeout` copies them back, at a cost).
 *
 * Effect's own `timeout` forks two fibers and costs a scheduler round trip even when `self` is synchronous.
 * Here `self` starts at once, on the caller's stack (`Runtime.runFork` starts fibers immediately), and when it
 * is already done on return — the common case for fast calls — no timer is ever armed. Otherwise the timer
 * is aimed at `at` as the clock reads *after* the synchronous start, so a blocking prefix is not given a
 * whole extra budget.
 */
export const timeoutWith = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2
): Effect.Effect<A, E | E2, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.withFiberRuntime<A, E | E2, R>((parent, status) => {
      const runtime = Runtime.make({
        context: parent.currentContext as Context.Context<R>,
        fiberRefs: parent.getFiberRefs(),
        runtimeFlags: status.runtimeFlags
      })
      const level = (levels.get(parent.id()) ?? 0) + 1
      const immediate = syncDepth < MAX_SYNC_DEPTH
      syncDepth++
      let child: Fiber.RuntimeFiber<A, E>
      try {
        child = Runtime.runFork(runtime, restore(self), {
          immediate,
          // the child's id is known here, before it starts: record its level for the timed effects inside it
          updateRefs: (refs, id) => {
            levels.set(id, level)
            return level % COLLAPSE_EVERY === 0 ? collapse(refs, id) : refs
          }
        })
      } finally {
        syncDepth--
      }
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
