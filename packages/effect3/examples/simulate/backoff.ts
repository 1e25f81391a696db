/**
 * The five backoff algorithms of the post, expressed with this library's `Backoff` schedules, and two
 * ways to draw their delays inside the simulation: by stepping the `Schedule` itself (exact, slow: one
 * `Effect.runSync` per delay) or by a synchronous stepper over the same formulas (fast; the tests check
 * that both produce identical delays and identical simulations).
 */
import { type Duration, Effect, type Schedule, ScheduleDecision, ScheduleIntervals } from "effect"
// the public entry point, as a user imports it
import * as Backoff from "effect-resilience/Backoff"
import { toRandom, type Uniform } from "./prng.js"

/** The algorithms compared in the post, by their CSV names. */
export const algorithms = ["none", "exponential", "full", "equal", "decorrelated"] as const

export type Algorithm = typeof algorithms[number]

export const isAlgorithm = (s: string): s is Algorithm => (algorithms as ReadonlyArray<string>).includes(s)

/** The post's backoff parameters, in milliseconds. */
export interface PostParameters {
  readonly base: number
  readonly cap: number
}

/** Brooker's values: base 5 ms, cap 2000 ms. */
export const postParameters: PostParameters = { base: 5, cap: 2000 }

/**
 * The library options that reproduce the post's delays. The post counts attempts from 1 (the first
 * failure sleeps `min(cap, base * 2^1)`) while the library's `c(n) = min(cap, base * 2^n)` starts at
 * n = 0, so the exponential family gets `base * 2`. Decorrelated jitter has no exponent: the post's
 * `sleep = min(cap, uniform(base, 3 * sleep))` from `sleep = base` is the library's formula with the
 * same base. `none` has no schedule.
 */
export const libraryOptions = (algorithm: Exclude<Algorithm, "none">, post: PostParameters = postParameters) =>
  algorithm === "decorrelated" ? { base: post.base, cap: post.cap } : { base: 2 * post.base, cap: post.cap }

/** The library schedule for an algorithm, or `undefined` for `none` (retry immediately). */
export const schedule = (
  algorithm: Algorithm,
  post: PostParameters = postParameters
): Schedule.Schedule<Duration.Duration> | undefined => {
  switch (algorithm) {
    case "none":
      return undefined
    case "exponential":
      return Backoff.exponential(libraryOptions(algorithm, post))
    case "full":
      return Backoff.fullJitter(libraryOptions(algorithm, post))
    case "equal":
      return Backoff.equalJitter(libraryOptions(algorithm, post))
    case "decorrelated":
      return Backoff.decorrelatedJitter(libraryOptions(algorithm, post))
  }
}

/**
 * Per-client backoff state for one run. `next(i)` is the delay (ms) before client i's next retry; it
 * draws from the run's generator exactly as the library schedule would (none for `none` and
 * `exponential`, one `Random.next` otherwise).
 */
export interface Delays {
  readonly next: (client: number) => number
}

/** How a run obtains its delays: `(algorithm, clients, prng) => Delays`. */
export type Driver = (algorithm: Algorithm, clients: number, prng: Uniform, post?: PostParameters) => Delays

/**
 * Steps each client's library `Schedule` with `Effect.runSync`, the generator provided as `Random`.
 * The delay is the wait the schedule decides (its interval starts `delay` after `now = 0`); the
 * `Duration` it outputs is the same delay rounded to whole nanoseconds. Exactly the library's
 * behaviour, but tens of microseconds per delay: used to verify `fastDriver`.
 */
export const scheduleDriver: Driver = (algorithm, clients, prng, post = postParameters) => {
  const s = schedule(algorithm, post)
  if (s === undefined) return { next: () => 0 }
  const random = toRandom(prng)
  const states: Array<unknown> = Array.from({ length: clients }, () => s.initial)
  return {
    next: (client) => {
      const [state, , decision] = Effect.runSync(
        s.step(0, undefined, states[client]).pipe(Effect.withRandom(random))
      )
      states[client] = state
      if (!ScheduleDecision.isContinue(decision)) throw new Error("Backoff schedules recur forever")
      return ScheduleIntervals.start(decision.intervals)
    }
  }
}

/**
 * The same delays without the Effect runtime: each client's `(n, previous)` state, as the library's
 * schedules keep it, advanced with the formulas the `Backoff` module documents (the simulator sees only
 * the public API, so it restates them). `test/Simulation.test.ts` checks it against `scheduleDriver`
 * draw for draw, so a drift from the library fails there.
 */
export const fastDriver: Driver = (algorithm, clients, prng, post = postParameters) => {
  if (algorithm === "none") return { next: () => 0 }
  const b = libraryOptions(algorithm, post)
  const attempts = new Int32Array(clients)
  const previous = new Float64Array(clients).fill(b.base)
  const formula = formulas[algorithm]
  return {
    next: (client) => {
      const n = attempts[client]!
      const delay = formula(b, n, previous[client]!, prng)
      attempts[client] = n + 1
      previous[client] = delay
      return delay
    }
  }
}

/** `c(n) = min(cap, base * 2^n)`; 2^n overflows to Infinity for large n, which the cap absorbs. */
const ceiling = ({ base, cap }: PostParameters, n: number): number => base === 0 ? 0 : Math.min(cap, base * 2 ** n)

type Formula = (b: PostParameters, n: number, previous: number, prng: Uniform) => number

const formulas: Record<Exclude<Algorithm, "none">, Formula> = {
  exponential: (b, n) => ceiling(b, n),
  full: (b, n, _previous, prng) => prng.next() * ceiling(b, n),
  equal: (b, n, _previous, prng) => {
    const half = ceiling(b, n) / 2
    return half + prng.next() * half
  },
  decorrelated: (b, _n, previous, prng) => Math.min(b.cap, b.base + prng.next() * (3 * previous - b.base))
}
