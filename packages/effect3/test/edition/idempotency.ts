/**
 * The idempotency suites (Idempotency*.test.ts, idempotency*.test.ts): the middleware's and the stores' internals
 * they reach, and what Effect 3 and Effect 4 spell differently around them (a fiber-local value, the SQL clients).
 */
import { HttpServerError, HttpServerRequest, type HttpServerResponse } from "@effect/platform"
import { type Cause, Duration, Effect, FiberRef } from "effect"

/** The request fingerprint the stores are given (internal in both editions). */
export { fingerprint } from "../../src/internal/http/idempotencyHttp.js"

/** The middleware's lease renewals, one fiber for all claims (internal in both editions). */
export { Leases } from "../../src/internal/http/idempotencyLeases.js"

/**
 * A value a fiber carries and its children inherit, `initial` until `locally` sets it (Effect 3: a `FiberRef` and
 * `Effect.locally`; Effect 4: a `Context.Reference` and `Effect.provideService`).
 */
export const fiberLocal = <A>(_key: string, initial: A) => {
  const ref = FiberRef.unsafeMake(initial)
  return {
    get: FiberRef.get(ref) as Effect.Effect<A>,
    locally: (value: A) => <B, E, R>(self: Effect.Effect<B, E, R>): Effect.Effect<B, E, R> =>
      Effect.locally(self, ref, value)
  }
}

/** A `Duration` from any input Duration functions accept (Effect 4: `Duration.fromInputUnsafe`). */
export const durationOf = (input: Duration.DurationInput): Duration.Duration => Duration.decode(input)

/**
 * The request a server hands the app for the web request `web`, from the client address `from` (`null`: none)
 * (Effect 3: `fromWeb(web).modify({ remoteAddress: from })`; Effect 4: `remoteAddress` is an `Option`).
 */
export const serverRequestFrom = (web: Request, from: string | null): HttpServerRequest.HttpServerRequest => {
  const request = HttpServerRequest.fromWeb(web)
  return from === null ? request : request.modify({ remoteAddress: from })
}

/** The response a server gives for a handler's failure (both: `HttpServerError.causeResponse`, then its response). */
export const causeResponse = <E>(cause: Cause.Cause<E>): Effect.Effect<HttpServerResponse.HttpServerResponse> =>
  Effect.map(HttpServerError.causeResponse(cause), ([response]) => response)

/** The Redis key of one record (internal in both editions). */
export { keyOf as redisKeyOf } from "../../src/internal/idempotencyStore/redis.js"
