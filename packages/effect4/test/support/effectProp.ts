import { it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"

/**
 * An effectful property over fast-check arbitraries, in the shape of the Effect 3 suite's `it.effect.prop(name,
 * { arbitraries }, (values) => effect)`: each sample runs in a scope of its own on a fresh `TestClock`, as
 * `it.effect` runs a test. (Effect 4's `it.effect.prop` takes Schema or `effect/Arbitrary` values instead, and
 * Effect 4 no longer ships fast-check.)
 */
export const effectProp = <const T extends Record<string, unknown>>(
  name: string,
  arbitraries: { readonly [K in keyof T]: fc.Arbitrary<T[K]> },
  body: (values: T) => Effect.Effect<unknown, unknown, Scope.Scope>,
  options?: { readonly fastCheck?: fc.Parameters<[T]>; readonly timeout?: number }
) =>
  it(name, { timeout: options?.timeout ?? 30_000 }, () =>
    fc.assert(
      fc.asyncProperty(
        fc.record(arbitraries as { [K in keyof T]: fc.Arbitrary<T[K]> }) as unknown as fc.Arbitrary<T>,
        (values) =>
          Effect.runPromise(Effect.scoped(Effect.asVoid(body(values))).pipe(Effect.provide(TestClock.layer())))
      ),
      options?.fastCheck
    ))
