import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Option } from "effect"
import { Deferred, Effect, Exit, FiberId } from "effect"
import type { Message } from "../../queue/QueueSource.js"
import { identifier } from "./shared.js"

type SqlModule = typeof import("./idempotentSql.js")

let sqlModule: SqlModule | undefined
/** The SQL half is imported on first use and kept: one async step once, none per message after. */
const loadSql: Effect.Effect<SqlModule> = Effect.suspend(() =>
  sqlModule !== undefined
    ? Effect.succeed(sqlModule)
    : Effect.map(Effect.promise(() => import("./idempotentSql.js")), (m) => (sqlModule = m))
)

export const idempotent = <A, B, E, R>(
  handler: (message: Message<A>) => Effect.Effect<B, E, R>,
  options: { readonly table: string }
) => {
  const table = identifier("Consumer.idempotent table", options.table)
  return (message: Message<A>): Effect.Effect<Option.Option<B>, E | SqlError, R | SqlClient> =>
    Effect.flatMap(loadSql, (m) => m.runOnce(table, handler, message))
}

export const createProcessedTable = (table: string): Effect.Effect<void, SqlError, SqlClient> => {
  const name = identifier("Consumer.createProcessedTable table", table)
  return Effect.flatMap(loadSql, (m) => m.createProcessedTable(name))
}

/**
 * Remembers ids in a `Set`. A second delivery of an id that is being handled waits for the first to
 * finish, then skips (or runs, if the first failed). The id is recorded in the same synchronous step in
 * which the handler's success is observed, so no interruption can fall between the two.
 */
export const idempotentMemory = <A, B, E, R>(
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
