import type { Fiber, RuntimeFlags } from "effect"
import { Context, Effect, FiberId, FiberRefs, Runtime } from "effect"

/*
 * The one place where this library leans on how Effect's runtime behaves rather than only on what its API
 * promises. Each trick here has a plain-Effect fallback with the same results; the fast one is used when a
 * probe of the runtime confirms its premise. test/fastPath.test.ts pins the Effect versions it was checked on
 * and runs both. docs/conventions.md ("Fast paths") says what each trick buys, measured on the built dist/.
 *
 * The trick: a fiber that runs work for a caller but is not joined back (Deadline's timed work, the
 * handlers the idempotency middleware admits, the SQL stores' operations in `timeout.ts`'s
 * `DisconnectedTimeouts`, which calls `startFrom` itself only while `isActive()`) starts at once, on the
 * caller's stack, from the caller's context, FiberRefs and runtime flags (`Runtime.runFork` with `immediate`),
 * instead of on the scheduler as `Effect.forkDaemon` starts it. Work that finishes without waiting is then done
 * before the caller looks, and `Deadline.timeout` arms no timer and waits no scheduler round trip for it.
 */

/** The Effect versions the fast paths were checked on, as `major.minor` (the test fails outside them). */
export const checkedOn: ReadonlyArray<string> = ["3.22"]

/**
 * How many such fibers may start synchronously inside one another on one JavaScript stack. Deeper than
 * this, a child starts on the scheduler instead (as `Effect.fork` always does): nesting and recursion through
 * them then cost constant stack per level, at any depth.
 */
const MAX_SYNC_DEPTH = 64
let syncDepth = 0

/**
 * A fiber's FiberRefs keep, per FiberRef, a stack with one entry per fiber generation that set it (for
 * `join`); a fiber started from its parent's runtime pushes onto some of them, so without care every nesting
 * level would copy stacks as deep as the nesting. These fibers are never joined, so every `COLLAPSE_EVERY`
 * levels their stacks are cut down to their current values: stacks stay short and nesting stays linear.
 */
const COLLAPSE_EVERY = 16
/**
 * The nesting level of a fiber started here, kept on its id (known before it starts, see `updateRefs`): a
 * property of one more hidden class instead of an entry per fiber in a WeakMap (slower to set, and traced
 * again by every garbage collection while the fiber lives).
 */
const level = Symbol.for("effect-resilience/fastPath/level")
const levelOf = (id: FiberId.FiberId): number => (id as { [level]?: number })[level] ?? 0

const collapse = (refs: FiberRefs.FiberRefs, id: FiberId.Runtime): FiberRefs.FiberRefs => {
  const locals = new Map<any, readonly [readonly [FiberId.Runtime, unknown]]>()
  for (const ref of FiberRefs.fiberRefs(refs)) locals.set(ref, [[id, FiberRefs.getOrDefault(refs, ref)]])
  return FiberRefs.unsafeMake(locals)
}

/**
 * Starts `effect` in a fiber of its own, from `parent`'s context (or `context`, when given) and FiberRefs and
 * the given runtime flags.
 */
export const startFrom = <A, E, R>(
  parent: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
  effect: Effect.Effect<A, E, R>,
  context: Context.Context<never> = parent.currentContext
): Fiber.RuntimeFiber<A, E> => {
  const runtime = Runtime.make({
    context: context as Context.Context<R>,
    fiberRefs: parent.getFiberRefs(),
    runtimeFlags
  })
  const depth = levelOf(parent.id()) + 1
  const immediate = syncDepth < MAX_SYNC_DEPTH
  syncDepth++
  try {
    return Runtime.runFork(runtime, effect, {
      immediate,
      // the child's id is known here, before it starts: record its level for the fibers started inside it
      updateRefs: (refs, id) => {
        ;(id as { [level]?: number })[level] = depth
        return depth % COLLAPSE_EVERY === 0 ? collapse(refs, id) : refs
      }
    })
  } finally {
    syncDepth--
  }
}

/** The operations with a fast path, each in both implementations. */
export interface Implementation {
  /**
   * Runs `effect` in a fiber that no one else holds (as `Effect.forkDaemon` does: it outlives the caller
   * unless interrupted) and returns it. Its FiberRef changes stay inside it.
   */
  readonly forkDetached: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R>
  /**
   * {@link forkDetached} with `service` provided to `effect` as `tag`. With the fast path the fiber starts with
   * it in its context (no `provideService` to set it and restore it), so a join that inherits the fiber's
   * FiberRefs (`Fiber.join`, `inheritAll`) hands it on to the joiner's context too. No caller relies on that:
   * the idempotency middleware inherits only from a handler fiber that changed a FiberRef, and the fallback
   * implementation never hands it on.
   */
  readonly forkDetachedWith: <A, E, R, I, S>(
    effect: Effect.Effect<A, E, R>,
    tag: Context.Tag<I, S>,
    service: NoInfer<S>
  ) => Effect.Effect<Fiber.RuntimeFiber<A, E>, never, Exclude<R, I>>
}

export const fast: Implementation = {
  forkDetached: (effect) =>
    Effect.withFiberRuntime((parent, status) => Effect.succeed(startFrom(parent, status.runtimeFlags, effect))),
  forkDetachedWith: (effect, tag, service) =>
    Effect.withFiberRuntime((parent, status) =>
      Effect.succeed(
        startFrom(parent, status.runtimeFlags, effect, Context.add(parent.currentContext, tag, service))
      )
    )
}

export const fallback: Implementation = {
  forkDetached: Effect.forkDaemon,
  forkDetachedWith: (effect, tag, service) => Effect.forkDaemon(Effect.provideService(effect, tag, service))
}

/** The premise of the fast path: a fiber started with `immediate` has run synchronously when `runFork` returns. */
const probe = (): boolean => {
  try {
    return Runtime.runFork(Runtime.defaultRuntime, Effect.void, { immediate: true }).unsafePoll() !== null
  } catch {
    return false
  }
}

let chosen: Implementation | undefined

/** The implementation in use: `fast` when the probe confirms its premise (checked once), else `fallback`. */
export const current = (): Implementation => chosen ??= probe() ? fast : fallback

/** Whether the fast path is in use. */
export const isActive = (): boolean => current() === fast

/** For tests: use `implementation` from now on (`undefined`: probe again). */
export const unsafeUse = (implementation: Implementation | undefined): void => {
  chosen = implementation
}

/** See {@link Implementation.forkDetached}. */
export const forkDetached = <A, E, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, R> => current().forkDetached(effect)

/** See {@link Implementation.forkDetachedWith}. */
export const forkDetachedWith = <A, E, R, I, S>(
  effect: Effect.Effect<A, E, R>,
  tag: Context.Tag<I, S>,
  service: NoInfer<S>
): Effect.Effect<Fiber.RuntimeFiber<A, E>, never, Exclude<R, I>> => current().forkDetachedWith(effect, tag, service)
