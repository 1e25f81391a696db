/**
 * `prop(name, [arbitraries], check)`: a property test on plain vitest and fast-check, the shape `it.prop` of
 * `@effect/vitest` has (the core has no Effect, so its tests do not need it). `check` gets the generated values as
 * one tuple and fails by throwing (an `expect`) or by returning `false`.
 */
import fc from "fast-check"
import { it } from "vitest"

type Values<Arbs extends ReadonlyArray<fc.Arbitrary<unknown>>> = {
  -readonly [K in keyof Arbs]: Arbs[K] extends fc.Arbitrary<infer T> ? T : never
}

export const prop = <const Arbs extends ReadonlyArray<fc.Arbitrary<unknown>>>(
  name: string,
  arbitraries: Arbs,
  check: (values: Values<Arbs>) => boolean | void,
  options?: { readonly fastCheck?: fc.Parameters<Values<Arbs>> }
): void => {
  it(name, () => {
    fc.assert(
      fc.property(...(arbitraries as unknown as [fc.Arbitrary<unknown>]), (...values) => check(values as Values<Arbs>)),
      options?.fastCheck as fc.Parameters<[unknown]> | undefined
    )
  })
}
