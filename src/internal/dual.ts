/**
 * Like `effect/Function`'s `dual`, for combinators whose options are validated and compiled once:
 * `f(options)` compiles immediately (so bad options throw where the policy is built) and returns the
 * reusable combinator; `f(self, options)` compiles and applies in one go.
 */
export const compiled = <O, F extends (self: any) => any>(compile: (options: O) => F) =>
(
  ...args: [O] | [Parameters<F>[0], O]
): any => args.length === 1 ? compile(args[0]) : compile(args[1])(args[0])
