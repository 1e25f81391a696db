import { clientAddress, rememberedDigests } from "@effect-resilience/core/clientAddress"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import * as core from "@effect-resilience/core/idempotency"
import * as decide from "@effect-resilience/core/idempotencyResponse"
import { parseIdempotencyKey } from "@effect-resilience/core/structuredFields"
import { Context, Duration, Effect, Fiber, Metric, Option, Scope } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"
import { isIP } from "node:net"
import type { Options } from "../../IdempotencyMiddleware.js"
import type { ClaimRef, ClaimResult, Store } from "../../IdempotencyStore.js"
import { monotonicMillisOf } from "../clock.js"
import { IdempotencyStore, type IdempotencyStoreError, IdempotencyStoreFull } from "../idempotencyStore/service.js"
import { type IdempotencyOutcome, idempotencySeries } from "../telemetry.js"
import * as validate from "../validate.js"
import { CurrentAdmission, unsampled } from "./admission.js"
import { digester, NoClientIdentity, refuse, resolver } from "./clientScope.js"
import { type App, Handling, renewal, type Settings } from "./idempotencyHandler.js"
import { fingerprint, replay, sentTarget } from "./idempotencyHttp.js"
import { Leases } from "./idempotencyLeases.js"
import { logStoreFailure, type Recorder, recorder } from "./idempotencyRecorder.js"
import { problem } from "./problem.js"
import { type Body, readBodyNow, withBody } from "./requestBody.js"

export const defaultReplayHeaders = decide.defaultReplayHeaders

export const bodyOmittedHeader = decide.bodyOmittedHeader

export const replayedHeader = decide.replayedHeader

export { maxPendingRecordings, recorder } from "./idempotencyRecorder.js"

/** The options, validated (a mistake throws when the middleware is made), with their defaults. */
const settingsOf = <RS>(options: Options<RS>): Settings => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const headerName = options.header ?? HttpHeaders.spelled[HttpHeaders.idempotencyKey]
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const maxResponseBytes = validate.nonNegative(
    "IdempotencyMiddleware maxResponseBytes",
    options.maxResponseBytes ?? 64 * 1024
  )
  const ttl = Duration.millis(validate.millis("IdempotencyMiddleware ttl", options.ttl ?? "24 hours"))
  const leaseMillis = validate.millis("IdempotencyMiddleware lease", options.lease ?? "60 seconds")
  if (leaseMillis <= 0) validate.invalid("IdempotencyMiddleware lease must be > 0")
  // a claim is kept for at most its TTL: shorter than the lease, a live owner could lose it
  if (Duration.toMillis(ttl) <= leaseMillis) validate.invalid("IdempotencyMiddleware ttl must be longer than the lease")
  const storeStatus = options.storeStatus ?? (() => true)
  if (typeof storeStatus !== "function") validate.invalid("IdempotencyMiddleware storeStatus must be a function")
  const replayHeaders = new Set(defaultReplayHeaders)
  for (const name of options.replayHeaders ?? []) {
    const lower = name.toLowerCase()
    if (decide.neverReplayed.has(lower)) validate.invalid(`IdempotencyMiddleware never replays ${name}`)
    replayHeaders.add(lower)
  }
  const retryCapMillis = Math.max(1, Math.min(1000, leaseMillis / 4))
  return {
    methods,
    headerName,
    header: headerName.toLowerCase(),
    required: options.required ?? true,
    maxKeyLength,
    maxBodyBytes,
    maxResponseBytes,
    ttl,
    lease: Duration.millis(leaseMillis),
    leaseMillis,
    storeServerErrors: options.storeServerErrors ?? true,
    storeStatus,
    replayHeaders,
    retryFirstMillis: Math.min(100, retryCapMillis),
    retryCapMillis
  }
}

export const make = <RS>(options: Options<RS> = {}) => {
  const settings = settingsOf(options)
  const scopeOf = resolver(options.scope, options.scopeSecret)
  const scopeNow = options.scope === undefined ? addressNow(options.scopeSecret) : undefined
  return Effect.gen(function*() {
    const store = yield* IdempotencyStore
    const later = yield* recorder(yield* Effect.serviceOption(Scope.Scope))
    // every outcome's series at 0 from the start (`effect_resilience_idempotency_requests_total`)
    yield* Effect.forEach(Object.values(idempotencySeries), (series) => Metric.update(series, 0), { discard: true })
    return withStore(settings, scopeOf, scopeNow, store, new Leases(settings.leaseMillis / 3), later)
  })
}

/**
 * The default scope (`ClientScope.address()`: the connection's address, no proxies trusted), digested, without
 * an effect: it needs none, and it is read once a request. The same answers as `resolver(undefined, secret)`.
 */
const addressNow = (secret: Options["scopeSecret"]) => {
  const digest = rememberedDigests(digester(secret))
  return (request: HttpServerRequest.HttpServerRequest): string | NoClientIdentity => {
    const found = clientAddress(
      Option.getOrUndefined(request.remoteAddress),
      undefined,
      0,
      "x-forwarded-for",
      isIP
    )
    return found._tag === "Address" ? digest(found.address) : new NoClientIdentity({ reason: found.reason })
  }
}

const withStore = <RS>(
  settings: Settings,
  scopeOf: ReturnType<typeof resolver<RS>>,
  scopeNow: ((request: HttpServerRequest.HttpServerRequest) => string | NoClientIdentity) | undefined,
  store: Store,
  leases: Leases,
  later: Recorder
) =>
<E, R>(app: App<E, R>): App<E, R | RS | HttpServerRequest.HttpServerRequest> => {
  const { header, headerName, lease, maxBodyBytes, maxKeyLength, methods, required, ttl } = settings
  type Answer = App<E, R | RS | HttpServerRequest.HttpServerRequest>
  // One request's way through, as plain functions and continuations (no generator): every step here is paid
  // per request. Everything up to the claim is done without an effect when it can be (the body received
  // whole, the default scope): the claim is the first effect a guarded request runs.
  const guarded = (request: HttpServerRequest.HttpServerRequest): Answer => {
    if (!methods.has(request.method)) return app
    const raw = request.headers[header]
    if (raw === undefined || raw.trim() === "") {
      if (!required) return Effect.andThen(count("unkeyed"), app)
      return own(problem(decide.keyMissing(request.method, headerName)), "invalid")
    }
    const key = parseIdempotencyKey(raw, maxKeyLength)
    if (key === undefined) return own(problem(decide.keyInvalid(maxKeyLength)), "invalid")
    if (decide.declaredTooLarge(request.headers["content-length"], maxBodyBytes)) {
      return own(problem(decide.tooLarge(maxBodyBytes)), "too_large")
    }
    const body = readBodyNow(request, maxBodyBytes)
    return typeof body === "string" || body instanceof Uint8Array
      ? withBodyRead(request, key, body)
      : Effect.flatMap(body, (read) => withBodyRead(request, key, read))
  }

  const withBodyRead = (request: HttpServerRequest.HttpServerRequest, key: string, body: Body): Answer => {
    if (body === "too-large") return own(problem(decide.tooLarge(maxBodyBytes)), "too_large")
    if (body === "unreadable") return own(problem(decide.bodyUnreadable), "invalid")
    if (body === "consumed") return Effect.andThen(consumedLog, own(problem(decide.bodyConsumed), "invalid"))
    if (scopeNow !== undefined) {
      const scope = scopeNow(request)
      return typeof scope === "string"
        ? claimed(request, key, body, scope)
        : Effect.andThen(unsampled, refuse("idempotency", scope))
    }
    return Effect.matchEffect(scopeOf(request), {
      onFailure: (e) => Effect.andThen(unsampled, refuse("idempotency", e)),
      onSuccess: (scope) => claimed(request, key, body, scope)
    })
  }

  const claimed = (
    request: HttpServerRequest.HttpServerRequest,
    key: string,
    body: Uint8Array,
    scope: string
  ): Answer => {
    // the target as the client sent it (see sentTarget), never the url a router rewrote
    const claim = store.claim({
      scope,
      key,
      fingerprint: fingerprint(request.method, core.requestTarget(sentTarget(request)), body),
      ttl,
      lease
    })
    // From the claim to the handler's start, one uninterruptible step: a client that goes away right after
    // the claim must not leave the key in progress, with no handler, until the lease runs out.
    return Effect.uninterruptibleMask((restore) =>
      Effect.matchEffect(claim, {
        onFailure: (e) => Effect.andThen(unsampled, failed(e, decide.redactor(key, scope))),
        onSuccess: (claim) =>
          claim._tag === "Claimed"
            ? Effect.andThen(count("new"), run(restore, withBody(request, body), { scope, key, token: claim.token }))
            : Effect.andThen(unsampled, answer(claim))
      })
    )
  }

  const run = (
    restore: <A, E2, R2>(effect: Effect.Effect<A, E2, R2>) => Effect.Effect<A, E2, R2>,
    request: HttpServerRequest.HttpServerRequest,
    ref: ClaimRef
  ): Answer => {
    const handling = new Handling(settings, store, later, ref, request, app)
    // The handler runs in a fiber of its own, with the request's context and interruptibility. The request
    // only waits for it: a client that goes away, or a deadline that passes, ends the wait, never the handler.
    // The load-shed slot, if any, is the handler's: it is held until the handler ends, so work nobody waits
    // for still counts against the server's capacity.
    return Effect.flatMap(detach(restore(handling.run)), (fiber) =>
      Effect.withFiber((parent) => {
        parent.getRef(CurrentAdmission)?.holdUntil(fiber)
        // started on this stack, most handlers have answered (and their answer is stored) already: their exit
        // is the answer, with no wait and no lease to renew
        const done = fiber.pollUnsafe()
        if (done !== undefined) return done
        // its claim is renewed until the fiber ends: its answer is stored, or it failed or was interrupted
        const held = leases.join(renewal(settings, store, ref), parent.context, monotonicMillisOf(parent))
        fiber.addObserver(() => leases.end(held))
        return Effect.andThen(
          leases.started,
          Effect.onInterrupt(
            Effect.interruptible(Fiber.join(fiber)),
            () => Effect.sync(() => (handling.gone = true))
          )
        )
      }))
  }

  return Effect.withFiber((fiber) => guarded(Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)))
}

/** Says, to whoever runs the server, why a request got 500 `body-consumed`: a composition to change. */
const consumedLog = Effect.logError(
  "idempotency: the request body was read before this middleware, and the request it was handed keeps nothing of " +
    "it (read as a stream, or copied with request.modify since); the request was refused with 500. Read the body " +
    "inside IdempotencyMiddleware, or before any copy of the request (docs/idempotency.md)"
)

/**
 * Counts a decision in `effect_resilience_idempotency_requests_total`, and says it on the request's span
 * (`idempotency.outcome`).
 */
const count = (outcome: IdempotencyOutcome) =>
  Effect.andThen(
    Effect.annotateCurrentSpan("idempotency.outcome", outcome),
    Metric.update(idempotencySeries[outcome], 1)
  )

/** An answer of the middleware's own (the handler did not run): no sample of the server's work. */
const own = (response: HttpServerResponse.HttpServerResponse, outcome: IdempotencyOutcome) =>
  Effect.andThen(count(outcome), Effect.as(unsampled, response))

/**
 * Runs `effect` in a fiber of its own that no one else holds, started at once on the caller's stack: a handler
 * that answers without waiting costs no extra scheduler round trip. It inherits the caller's interruptibility
 * (here: none, inside the claim's mask), and `restore` gives the handler the request's.
 */
const detach = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.forkDetach(effect, { startImmediately: true, uninterruptible: "inherit" })

/** The answer to a claim the store failed (full, or unreachable): the handler did not run. */
const failed = (
  error: IdempotencyStoreError | IdempotencyStoreFull,
  redact: (text: string) => string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (error instanceof IdempotencyStoreFull) {
    return Effect.as(
      Effect.andThen(count("store_full"), Effect.logWarning(`idempotency: ${error.message}; a new key was refused`)),
      problem(decide.storeFull)
    )
  }
  return Effect.as(
    Effect.andThen(count("store_error"), logStoreFailure("claim", error, redact)),
    problem(decide.storeUnavailable)
  )
}

/** The answer to a claim that did not admit the request: the key's state. */
const answer = (claim: ClaimResult): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  switch (claim._tag) {
    case "Mismatch":
      return Effect.as(count("mismatch"), problem(decide.mismatch))
    case "InProgress":
      return Effect.as(count("in_progress"), problem(decide.inProgress))
    case "Completed":
      return Effect.as(count("replay"), replay(claim.response))
    case "Claimed":
      return Effect.die(new Error("a claimed key is admitted, not refused"))
  }
}
