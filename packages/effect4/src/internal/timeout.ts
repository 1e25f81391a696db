import type { Clock, Context } from "effect"
import { Duration, Effect, Exit, Fiber } from "effect"
import { monotonicMillis } from "./clock.js"
import { resume } from "./resume.js"

/**
 * How many timed children may start synchronously inside one another on one JavaScript stack. Deeper than this, a
 * child starts on the scheduler instead, so synchronous nesting costs constant stack per level at any depth.
 * (Effect 3 needed a whole fast path for the synchronous start; Effect 4 starts a fiber on the caller's stack.)
 */
const MAX_SYNC_DEPTH = 64
let syncDepth = 0

/**
 * Runs `self` until the absolute instant `at` (of the monotonic reading of `clock`, `internal/clock.ts`, as
 * deadlines are), then interrupts it, waits for its finalizers, and fails with `onTimeout()`.
 *
 * `self` runs in a fiber of its own with the caller's context and interruptibility, started at once on the caller's
 * stack (`Effect.runForkWith`, the cheapest start Effect 4 offers: no child registry, no scheduler task): when it is
 * already done on return (the common case for fast calls) no timer is ever armed. The fiber is started inside a mask
 * and, when still running, watched from inside it: should the caller be interrupted, the fiber is interrupted with
 * it, so it never runs on unwatched. Otherwise the timer is aimed at `at` as the clock reads *after* the synchronous
 * start, so a blocking prefix is not given a whole extra budget.
 */
export const timeoutWith = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2
): Effect.Effect<A, E | E2, R> =>
  Effect.uninterruptibleMask((restore): Effect.Effect<A, E | E2, R> =>
    startWatched(self, at, clock, onTimeout, restore)
  )

// an interruptible child is the default (no options to read)
const uninterruptibleChild = { uninterruptible: true } as const

/**
 * The body of {@link timeoutWith}, for a caller already inside `Effect.uninterruptibleMask` (`restore` is its
 * restore): `self` starts in a child with the current fiber's context (`parent`: the current fiber, when the
 * caller has it at hand), as interruptible as the caller was.
 */
export const startWatched = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>,
  parent: Fiber.Fiber<unknown, unknown> = Fiber.getCurrent()!
): Effect.Effect<A, E | E2, R> => {
  if (syncDepth >= MAX_SYNC_DEPTH) return scheduled(self, at, clock, onTimeout, restore)
  // the caller's interruptibility: an interruptible caller's mask restores with `Effect.interruptible` (known without
  // building an effect); otherwise restoring is a no-op (the same effect) for an uninterruptible caller
  const options = restore === Effect.interruptible || restore(self) !== self ? undefined : uninterruptibleChild
  syncDepth++
  let child: Fiber.Fiber<A, E>
  try {
    child = Effect.runForkWith(parent.context as Context.Context<R>)(self, options)
  } finally {
    syncDepth--
  }
  const done = child.pollUnsafe()
  return done !== undefined ? done : waitUntil(child, at, clock, onTimeout, restore)
}

/** Deep in synchronous nesting: the same, with `self` in a child fiber started from the scheduler. */
const scheduled = <A, E, R, E2>(
  self: Effect.Effect<A, E, R>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
): Effect.Effect<A, E | E2, R> =>
  Effect.flatMap(
    Effect.forkChild(restore(self), { startImmediately: false, uninterruptible: "inherit" }),
    (child) => waitUntil(child, at, clock, onTimeout, restore)
  )

/** The slow path: the child is still running. Arms the timer and waits for whichever comes first. */
const waitUntil = <A, E, E2>(
  child: Fiber.Fiber<A, E>,
  at: number,
  clock: Clock.Clock,
  onTimeout: () => E2,
  restore: <X, Y, Z>(effect: Effect.Effect<X, Y, Z>) => Effect.Effect<X, Y, Z>
): Effect.Effect<A, E | E2> => {
  const left = at - monotonicMillis(clock)
  if (left <= 0) return Effect.andThen(Fiber.interrupt(child), Exit.fail(onTimeout()))
  return Effect.flatMap(
    Effect.forkChild(clock.sleep(Duration.millis(left)), { startImmediately: true }),
    (timer) =>
      Effect.flatMap(
        Effect.onInterrupt(restore(firstOf(child, timer)), () => {
          timer.interruptUnsafe()
          return Fiber.interrupt(child)
        }),
        (exit): Effect.Effect<A, E | E2> => {
          if (exit !== undefined) {
            timer.interruptUnsafe()
            return exit
          }
          return Effect.andThen(Fiber.interrupt(child), Exit.fail(onTimeout()))
        }
      )
  )
}

/**
 * Waits for the child's exit or the timer, whichever comes first (`undefined` for the timer). A plain callback
 * wait, so it is as interruptible as the caller and no third fiber is needed: the caller may be uninterruptible
 * (HTTP servers run handlers so) and the timer must still be able to end the wait. Resumed through the depth
 * guard: nested timed calls finish inside one another.
 */
export const firstOf = <A, E>(
  child: Fiber.Fiber<A, E>,
  timer: Fiber.Fiber<void>
): Effect.Effect<Exit.Exit<A, E> | undefined> =>
  Effect.callback((wake) => {
    let settled = false
    let offChild = noop
    let offTimer = noop
    const settle = (value: Exit.Exit<A, E> | undefined) => {
      if (settled) return
      settled = true
      offChild()
      offTimer()
      resume(wake, Effect.succeed(value))
    }
    offChild = child.addObserver(settle)
    offTimer = timer.addObserver(() => settle(undefined))
    return Effect.sync(() => {
      offChild()
      offTimer()
    })
  })

const noop = () => {}
