import type { Cause } from "effect"

/**
 * What an error's constructor takes, read off its public interface `T`: the fields it declares, without `_tag`
 * (the class sets it) and without what every `Cause.YieldableError` has, with two exceptions: a `cause` the error
 * declares as required (`Error`'s is optional), and a `name` it declares as `string | undefined` (a bulkhead's
 * or a limiter's name, which has always taken the place of `Error`'s).
 *
 * The public modules write each error's fields once, with their docs, in its interface; the internal class takes
 * them from there (`Data.TaggedError("X")<Fields<X>>`) and the public constructor is typed with them.
 */
export type Fields<T> = Omit<
  T,
  | Exclude<keyof Cause.YieldableError, "cause" | "name">
  | "_tag"
  | ({} extends Pick<T, "cause" & keyof T> ? "cause" : never)
  | (undefined extends T["name" & keyof T] ? never : "name")
>
