/**
 * The idempotency suites (Idempotency*.test.ts, idempotency*.test.ts): the middleware's and the stores' internals
 * they reach, and what Effect 3 and Effect 4 spell differently around them (a fiber-local value, the SQL clients).
 */
import { Context, Duration, Effect } from "effect"

/** The request fingerprint the stores are given (internal in both editions). */
export { fingerprint } from "../../src/internal/http/idempotencyHttp.js"

/** The middleware's lease renewals, one fiber for all claims (internal in both editions). */
export { Leases } from "../../src/internal/http/idempotencyLeases.js"

/**
 * A value a fiber carries and its children inherit, `initial` until `locally` sets it (Effect 3: a `FiberRef` and
 * `Effect.locally`; Effect 4: a `Context.Reference` and `Effect.provideService`).
 */
export const fiberLocal = <A>(key: string, initial: A) => {
  const reference = Context.Reference<A>(key, { defaultValue: () => initial })
  return {
    get: Effect.service(reference) as Effect.Effect<A>,
    locally: (value: A) => <B, E, R>(self: Effect.Effect<B, E, R>): Effect.Effect<B, E, R> =>
      Effect.provideService(self, reference, value)
  }
}

/** A `Duration` from any input Duration functions accept (Effect 3: `Duration.decode`). */
export const durationOf = (input: Duration.Input): Duration.Duration => Duration.fromInputUnsafe(input)
