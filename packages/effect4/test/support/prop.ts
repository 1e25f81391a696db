import { it } from "@effect/vitest"
import * as fc from "fast-check"

/**
 * A synchronous property over fast-check arbitraries, in the shape of the Effect 3 suite's `it.prop(name, [arbitraries],
 * ([values]) => …)`: Effect 4's `it.prop` takes Schema or `effect/Arbitrary` values instead, and Effect 4 no longer
 * ships fast-check.
 */
export const prop = <const T extends ReadonlyArray<unknown>>(
  name: string,
  arbitraries: { readonly [K in keyof T]: fc.Arbitrary<T[K]> },
  body: (values: T) => void,
  options?: { readonly fastCheck?: fc.Parameters<[T]> }
) =>
  it(name, () => {
    fc.assert(
      fc.property(
        fc.tuple(...(arbitraries as unknown as Array<fc.Arbitrary<unknown>>)) as unknown as fc.Arbitrary<T>,
        (values) => {
          body(values)
        }
      ),
      options?.fastCheck
    )
  })
