import type { Option } from "effect"
import { Deferred, Effect, Exit, FiberId } from "effect"
import type { Message } from "../../../QueueSource.js"

/**
 * Remembers ids in a `Set`. A second delivery of an id that is being handled waits for the first to
 * finish, then skips (or runs, if the first failed). The id is recorded in the same synchronous step in
 * which the handler's success is observed, so no interruption can fall between the two.
 */
export const idempotentMemory = <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options?: { readonly processed?: Set<string> }
): Effect.Effect<(message: Message<A>) => Effect.Effect<Option.Option<B>, E, R>> =>
  Effect.sync(() => store(handler, options))

const store = <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options?: { readonly processed?: Set<string> }
) => {
  const processed = options?.processed ?? new Set<string>()
  const running = new Map<string, Deferred.Deferred<void>>()
  const attempt = (message: Message<A>): Effect.Effect<Option.Option<B>, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        if (processed.has(message.id)) return Effect.succeedNone
        const busy = running.get(message.id)
        if (busy !== undefined) return Effect.zipRight(restore(Deferred.await(busy)), attempt(message))
        const gate = Deferred.unsafeMake<void>(FiberId.none)
        running.set(message.id, gate)
        return Effect.flatMap(Effect.exit(restore(Effect.suspend(() => handler(message)))), (exit) => {
          running.delete(message.id)
          if (Exit.isSuccess(exit)) processed.add(message.id)
          return Effect.zipRight(Deferred.done(gate, Exit.void), Effect.asSome(exit))
        })
      })
    )
  return attempt
}
