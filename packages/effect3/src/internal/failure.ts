import { Data, Duration, Effect } from "effect"
import type * as Api from "../Failure.js"
import { compiled } from "./dual.js"
import type { Fields } from "./errorFields.js"

export class Retryable<E = unknown> extends Data.TaggedError("Retryable")<Fields<Api.Retryable<E>>> {
  override get message(): string {
    return `retryable failure: ${describe(this.cause)}`
  }
}

export class Fatal<E = unknown> extends Data.TaggedError("Fatal")<Fields<Api.Fatal<E>>> {
  override get message(): string {
    return `fatal failure: ${describe(this.cause)}`
  }
}

export type Classified<E> = Retryable<E> | Fatal<E>

export const retryable = <E>(cause: E, retryAfter?: Duration.DurationInput): Retryable<E> =>
  retryAfter === undefined
    ? new Retryable({ cause })
    : new Retryable({ cause, retryAfter: Duration.decode(retryAfter) })

export const fatal = <E>(cause: E): Fatal<E> => new Fatal({ cause })

export const isRetryable = (u: unknown): u is Retryable<unknown> =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "Retryable"

export const isFatal = (u: unknown): u is Fatal<unknown> =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === "Fatal"

// the public module declares the overloads of these duals
export const classify = compiled(
  <E, E2 extends Retryable<any> | Fatal<any>>(f: (error: E) => E2) =>
  <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E2, R> => Effect.mapError(self, f)
)

export const retryWhen = compiled(<E>(predicate: (error: E) => boolean) => {
  const classifyOne = (e: E): Classified<E> => predicate(e) ? new Retryable({ cause: e }) : new Fatal({ cause: e })
  return <A, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, Classified<E>, R> => Effect.mapError(self, classifyOne)
})

const describe = (cause: unknown): string => {
  if (cause instanceof Error) return cause.message
  if (typeof cause === "object" && cause !== null && "_tag" in cause) return String((cause as { _tag: unknown })._tag)
  return String(cause)
}
