/**
 * The backoff formulas of Marc Brooker's "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015), as
 * plain functions of milliseconds. Randomness is an argument: `r` is one uniform draw in `[0, 1)`, so the
 * caller decides where it comes from (Effect's `Random` in the library, a seeded generator in a simulation).
 *
 * `n` counts retries from 0: `c(n) = min(cap, base * 2^n)` is the ceiling of the n-th delay.
 */

/** The first delay's ceiling and the largest delay, in milliseconds: finite, `0 <= base <= cap`. */
export interface Bounds {
  readonly base: number
  readonly cap: number
}

/** Why `base` and `cap` cannot make a schedule, or `undefined` when they can. */
export const checkBounds = (base: number, cap: number): string | undefined => {
  if (!(Number.isFinite(base) && base >= 0)) return `base must be a finite, non-negative duration, got ${base} ms`
  if (!(Number.isFinite(cap) && cap >= 0)) return `cap must be a finite, non-negative duration, got ${cap} ms`
  if (cap < base) return `cap (${cap} ms) must not be below base (${base} ms)`
  return undefined
}

/** `c(n) = min(cap, base * 2^n)`, for any n: `2^n` overflows to `Infinity`, which the cap absorbs. */
export const ceiling = ({ base, cap }: Bounds, n: number): number => base === 0 ? 0 : Math.min(cap, base * 2 ** n)

/** Plain exponential backoff: `c(n)`. */
export const exponential = (bounds: Bounds, n: number): number => ceiling(bounds, n)

/** Full jitter: `r * c(n)`, in `[0, c(n))`. */
export const fullJitter = (bounds: Bounds, n: number, r: number): number => r * ceiling(bounds, n)

/** Equal jitter: `c(n)/2 + r * c(n)/2`, in `[c(n)/2, c(n))`: never an immediate retry. */
export const equalJitter = (bounds: Bounds, n: number, r: number): number => {
  const half = ceiling(bounds, n) / 2
  return half + r * half
}

/**
 * Decorrelated jitter: `min(cap, base + r * (3 * previous - base))`, where `previous` is the delay before
 * (`base` before the first). No exponent: each delay grows from the last one. Always in `[base, cap]`.
 */
export const decorrelatedJitter = ({ base, cap }: Bounds, previous: number, r: number): number =>
  Math.min(cap, base + r * (3 * previous - base))

/** What a schedule remembers between delays: the retry count and the delay it chose last. */
export interface State {
  readonly n: number
  readonly previous: number
}

/** Before the first retry: `n = 0`, and `previous = base` (the start of decorrelated jitter). */
export const initial = ({ base }: Bounds): State => ({ n: 0, previous: base })

/** One of the four formulas, over the whole state, so a schedule can run any of them the same way. */
export type Formula = (bounds: Bounds, state: State, r: number) => number

/** The four formulas by name; `exponential` ignores `r`. */
export const formulas: {
  readonly exponential: Formula
  readonly fullJitter: Formula
  readonly equalJitter: Formula
  readonly decorrelatedJitter: Formula
} = {
  exponential: (bounds, { n }) => exponential(bounds, n),
  fullJitter: (bounds, { n }, r) => fullJitter(bounds, n, r),
  equalJitter: (bounds, { n }, r) => equalJitter(bounds, n, r),
  decorrelatedJitter: (bounds, { previous }, r) => decorrelatedJitter(bounds, previous, r)
}

/** The delay for `state` and the state after it. */
export const step = (formula: Formula, bounds: Bounds, state: State, r: number): readonly [number, State] => {
  const delay = formula(bounds, state, r)
  return [delay, { n: state.n + 1, previous: delay }]
}
