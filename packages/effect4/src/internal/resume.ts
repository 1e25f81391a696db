import { Effect } from "effect"

/*
 * Effect 4 resumes a fiber waiting in `Effect.callback` synchronously, inside `resume()`, on the stack of whoever
 * calls it (Effect 3 went through the scheduler). Library waits nest: a timed call inside a timed call, a bulkhead
 * slot handed from one finished call to the next waiter, a hedge inside a hedged page fetch. When the innermost
 * finishes, every level would resume inside the one below it, and a few thousand levels overflow the stack. Past
 * `MAX_RESUME_DEPTH` nested resumptions, a resumption goes through `Effect.yieldNow` instead: the waiter continues
 * from the scheduler, and the stack unwinds.
 */
const MAX_RESUME_DEPTH = 64
let depth = 0

/** Resumes a `callback` wait with `effect`, on this stack while that stays shallow, else from the scheduler. */
export const resume = <A, E, R>(resume: (effect: Effect.Effect<A, E, R>) => void, effect: Effect.Effect<A, E, R>) => {
  if (depth >= MAX_RESUME_DEPTH) {
    resume(Effect.andThen(Effect.yieldNow, effect))
    return
  }
  depth++
  try {
    resume(effect)
  } finally {
    depth--
  }
}
