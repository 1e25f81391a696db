/**
 * `make`: the client's options as one pipe of the combinators. That pipe is the one description of the order of
 * the layers; docs/http-client.md shows it, and test/contract/ResilientHttpClient.test.ts checks that the two agree.
 */
import { Cause, Context, Duration, Effect, Exit, Layer, Option, type Scope } from "effect"
import { identity } from "effect/Function"
import { HttpClient } from "effect/http"
import type { AdaptiveThrottle } from "../../../AdaptiveThrottle.js"
import type { Keyed } from "../../../CircuitBreaker.js"
import type { Options, ResilientHttpClient as Client } from "../../../ResilientHttpClient.js"
import type { Budget } from "../../../RetryBudget.js"
import * as throttles from "../../adaptiveThrottle.js"
import { keyed } from "../../circuitBreaker/keyed.js"
import { isFatal, isRetryable } from "../../failure.js"
import { make as makeBudget } from "../../retryBudget.js"
import * as validate from "../../validate.js"
import { ConnectFailed, NoResponse, StatusError } from "../httpErrors.js"
import { attemptTimeout } from "./attemptTimeout.js"
import { around } from "./client.js"
import { classifyTransportErrors } from "./errors.js"
import { adaptiveThrottle, circuitBreaker, isOutage, rateLimiter } from "./guards.js"
import { criticalityHeader, deadlineHeader } from "./headers.js"
import { idempotencyKeys } from "./idempotencyKeys.js"
import { defaultClientName, requestSpan, resolveRetry, retry } from "./retry.js"
import { sharedBackpressure } from "./sharedBackpressure.js"

export const ResilientHttpClient: Context.Service<Client, Client> = Context.Service<Client>(
  "effect-resilience/ResilientHttpClient"
)

/**
 * What trips `make`'s breakers: every failure but `Fatal` (the breaker's own default), and of the answers only
 * those that say the origin is down (never a 429: a throttling server is working as designed).
 */
const countsAsOutage = (error: unknown): boolean =>
  !isFatal(error) && !(isRetryable(error) && error.cause instanceof StatusError && !isOutage(error.cause.status))

/** The server's `Retry-After` on a failure the breaker counts, capped at a minute, so the breaker honours it too. */
const openForAtLeast = (error: unknown): Duration.Duration | undefined =>
  isRetryable(error) && error.retryAfter !== undefined ? Duration.min(error.retryAfter, Duration.minutes(1)) : undefined

/**
 * What `make`'s throttle counts as accepted: an answer, unless it refuses for load (429, 503); not a connection
 * failure or a timeout. A refusal by a policy inside it (the breaker) says nothing about the backend.
 */
const isAccepted = (exit: Exit.Exit<unknown, unknown>): boolean | undefined => {
  if (Exit.isSuccess(exit)) return true
  const failure = Cause.findErrorOption(exit.cause)
  if (Option.isNone(failure)) return undefined
  const error = isRetryable(failure.value) ? failure.value.cause : failure.value
  if (error instanceof StatusError) return error.status !== 429 && error.status !== 503
  return error instanceof ConnectFailed || error instanceof NoResponse ? false : undefined
}

const isKeyed = (u: unknown): u is Keyed<string> =>
  typeof u === "object" && u !== null && typeof (u as Keyed<string>).protect === "function" &&
  typeof (u as Keyed<string>).get === "function"

const isBudget = (u: unknown): u is Budget =>
  typeof u === "object" && u !== null && typeof (u as Budget).unsafeRecordFailure === "function"

type ClientLayer = <E, R>(self: HttpClient.HttpClient.With<E, R>) => HttpClient.HttpClient.With<any, R>

/**
 * Checks every option when `make` is called and compiles the layers. Nothing stateful is made here: what a layer
 * keeps is made when the client is built (`make`'s effect runs, the layer is built), one lifetime for all of it.
 */
const resolve = (options: Options) => {
  if (typeof options !== "object" || options === null) validate.invalid("ResilientHttpClient options must be an object")
  if ((options as { readonly connectTimeout?: unknown }).connectTimeout !== undefined) {
    validate.invalid("connectTimeout is an option of the Node transport's layer (ResilientHttpClient/Node)")
  }
  const off = (value: unknown) => value === false
  const keyOptions = options.idempotencyKeys === false ? undefined : options.idempotencyKeys
  const retryOptions = options.retry === false ? undefined : options.retry
  const budget = retryOptions?.budget
  const makeBudgetNow: Effect.Effect<Budget | undefined> = budget === undefined || isBudget(budget)
    ? Effect.succeed(budget)
    : makeBudget(budget) // checked now, made with the client
  const retryWith = (made: Budget | undefined): ClientLayer => {
    const compiled = { ...retryOptions, budget: made, idempotencyKeyHeader: keyOptions?.header, name: options.name }
    return off(options.retry) ? requestSpans(options.name ?? defaultClientName) : retry(compiled)
  }
  resolveRetry({ ...retryOptions, budget: isBudget(budget) ? budget : undefined, name: options.name })
  const breaker = options.breaker
  const backpressure = options.sharedBackpressure
  const layers: {
    readonly deadlineHeader: ClientLayer
    readonly criticalityHeader: ClientLayer
    readonly attemptTimeout: ClientLayer
    readonly breakers: Effect.Effect<Keyed<string> | undefined, never, Scope.Scope>
    readonly throttle: Effect.Effect<AdaptiveThrottle | undefined>
    readonly rateLimiter: ClientLayer
    readonly sharedBackpressure: ClientLayer
    readonly budget: Effect.Effect<Budget | undefined>
    readonly retry: (budget: Budget | undefined) => ClientLayer
    readonly idempotencyKeys: ClientLayer
  } = {
    deadlineHeader: off(options.deadlineHeader)
      ? identity
      : deadlineHeader({ header: options.deadlineHeader as string }),
    criticalityHeader: off(options.criticalityHeader)
      ? identity
      : criticalityHeader({ header: options.criticalityHeader as string }),
    attemptTimeout: attemptTimeout(options.attemptTimeout ?? "10 seconds") as ClientLayer,
    breakers: breaker === undefined
      ? Effect.succeed(undefined)
      : isKeyed(breaker)
      ? Effect.succeed(breaker)
      : keyed<string>({ isFailure: countsAsOutage, openForAtLeast, ...breaker }), // checks the options now
    throttle: options.throttle === undefined || options.throttle === false
      ? Effect.succeed(undefined)
      : throttles.make({ isAccepted, ...(options.throttle === true ? {} : options.throttle) }),
    rateLimiter: options.rateLimiter === undefined ? identity : rateLimiter(options.rateLimiter) as ClientLayer,
    sharedBackpressure: off(backpressure)
      ? identity
      : sharedBackpressure(backpressure === true ? undefined : backpressure),
    budget: makeBudgetNow,
    retry: retryWith,
    idempotencyKeys: off(options.idempotencyKeys) ? identity : idempotencyKeys(keyOptions)
  }
  return layers
}

/** Without the retry (which makes them with the attempts'), each request's `ResilientHttpClient.request` span. */
const requestSpans = (client: string): ClientLayer => (self) =>
  around(self, (request, execute) => requestSpan(client, request)(execute(request))) as any

const guardedBy = <A>(value: A | undefined, layer: (value: A) => ClientLayer): ClientLayer =>
  value === undefined ? identity : layer(value)

export const make = (options: Options = {}) => {
  const layers = resolve(options)
  return Effect.gen(function*() {
    const base = yield* HttpClient.HttpClient
    const breakers: Keyed<string> | undefined = yield* layers.breakers
    const throttle: AdaptiveThrottle | undefined = yield* layers.throttle
    const budget = yield* layers.budget
    // the layers, from the transport out: a request meets them from the last to the first
    const client = base.pipe(
      classifyTransportErrors as ClientLayer,
      layers.deadlineHeader,
      layers.criticalityHeader,
      layers.attemptTimeout,
      guardedBy(breakers, circuitBreaker),
      guardedBy(throttle, adaptiveThrottle),
      layers.rateLimiter,
      layers.sharedBackpressure,
      layers.retry(budget),
      layers.idempotencyKeys
    )
    return Object.assign(client, { breakers: Option.fromNullishOr(breakers) }) as Client
  })
}

export const layer = (options?: Options) => Layer.effect(ResilientHttpClient, make(options))
