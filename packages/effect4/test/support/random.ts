import { Effect, Random } from "effect"

/**
 * A `Random` that returns `values` in turn, cycling (what Effect 3's `Random.fixed` did; Effect 4 has no such
 * constructor: a `Random` is any object with the two draws).
 */
export const fixed = (values: ReadonlyArray<number>): Random.Random => {
  let i = 0
  const next = () => values[i++ % values.length]!
  return { nextDoubleUnsafe: next, nextIntUnsafe: () => Math.floor(next() * Number.MAX_SAFE_INTEGER) }
}

/** Runs `effect` with `random` as its `Random`. */
export const withRandom = (random: Random.Random) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, Random.Random, random)
