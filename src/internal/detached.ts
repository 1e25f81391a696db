import type { Context, Effect, Fiber, RuntimeFlags } from "effect"
import { FiberId, FiberRefs, Runtime } from "effect"

/*
 * Fibers that run an effect for a caller but are not its children (no one joins their FiberRefs back): the
 * work of `Deadline.timeout`/`within`, and the handlers the idempotency middleware admits. They start at once,
 * on the caller's stack, from the caller's context, FiberRefs and runtime flags — no scheduler round trip for
 * work that finishes without waiting — using only Effect's public API.
 */

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
const levels = new WeakMap<FiberId.FiberId, number>()

const collapse = (refs: FiberRefs.FiberRefs, id: FiberId.Runtime): FiberRefs.FiberRefs => {
  const locals = new Map<any, readonly [readonly [FiberId.Runtime, unknown]]>()
  for (const ref of FiberRefs.fiberRefs(refs)) locals.set(ref, [[id, FiberRefs.getOrDefault(refs, ref)]])
  return FiberRefs.unsafeMake(locals)
}

/** Starts `effect` in a fiber of its own, from `parent`'s context and FiberRefs and the given runtime flags. */
export const startFrom = <A, E, R>(
  parent: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags,
  effect: Effect.Effect<A, E, R>
): Fiber.RuntimeFiber<A, E> => {
  const runtime = Runtime.make({
    context: parent.currentContext as Context.Context<R>,
    fiberRefs: parent.getFiberRefs(),
    runtimeFlags
  })
  const level = (levels.get(parent.id()) ?? 0) + 1
  const immediate = syncDepth < MAX_SYNC_DEPTH
  syncDepth++
  try {
    return Runtime.runFork(runtime, effect, {
      immediate,
      // the child's id is known here, before it starts: record its level for the fibers started inside it
      updateRefs: (refs, id) => {
        levels.set(id, level)
        return level % COLLAPSE_EVERY === 0 ? collapse(refs, id) : refs
      }
    })
  } finally {
    syncDepth--
  }
}
