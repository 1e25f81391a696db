/**
 * The one way this library gives a combinator both forms, `f(self, options)` and `self.pipe(f(options))`, as
 * `effect/Function`'s `dual(2, …)` does, with one difference: `options` goes to `compile`, which validates it
 * and returns the combinator. The data-last form compiles at once, so bad options throw where the policy is
 * built and the function it returns validates nothing per application; the data-first form compiles and
 * applies in one go. The subject always comes first in the data-first form.
 */
export const compiled = (compile: (options: any) => (self: any) => any): any =>
  function(self: unknown, options?: unknown) {
    return arguments.length >= 2 ? compile(options)(self) : compile(self)
  }
