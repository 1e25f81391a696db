import { Clock, Duration, Effect, Fiber, type Result, Scope } from "effect"
import { HttpServerRequest, type HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import * as core from "../../core/idempotency.js"
import * as decide from "../../core/idempotencyResponse.js"
import { parseIdempotencyKey } from "../../core/structuredFields.js"
import type { Options } from "../../IdempotencyMiddleware.js"
import type { ClaimResult, Store } from "../../IdempotencyStore.js"
import { IdempotencyStore, type IdempotencyStoreError, IdempotencyStoreFull } from "../idempotencyStore/service.js"
import * as validate from "../validate.js"
import { holdUntil, unsampled } from "./admission.js"
import { refuse, resolver } from "./clientScope.js"
import { admitted, type App, renewal, type Settings } from "./idempotencyHandler.js"
import { replay } from "./idempotencyHttp.js"
import { Leases } from "./idempotencyLeases.js"
import { logStoreFailure, type Recorder, recorder } from "./idempotencyRecorder.js"
import { problem } from "./problem.js"
import { readBody, withBody } from "./requestBody.js"

export const defaultReplayHeaders = decide.defaultReplayHeaders

export const bodyOmittedHeader = decide.bodyOmittedHeader

export const replayedHeader = decide.replayedHeader

export { maxPendingRecordings, recorder } from "./idempotencyRecorder.js"

/** The options, validated (a mistake throws when the middleware is made), with their defaults. */
const settingsOf = <RS>(options: Options<RS>): Settings => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const headerName = options.header ?? "Idempotency-Key"
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024
  if (!(typeof maxResponseBytes === "number" && Number.isFinite(maxResponseBytes) && maxResponseBytes >= 0)) {
    validate.invalid(`IdempotencyMiddleware maxResponseBytes must be a finite number >= 0, got ${maxResponseBytes}`)
  }
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
  return Effect.gen(function*() {
    const store = yield* IdempotencyStore
    const later = yield* recorder(yield* Effect.serviceOption(Scope.Scope))
    return withStore(settings, scopeOf, store, new Leases(settings.leaseMillis / 3), later)
  })
}

const withStore = <RS>(
  settings: Settings,
  scopeOf: ReturnType<typeof resolver<RS>>,
  store: Store,
  leases: Leases,
  later: Recorder
) =>
<E, R>(app: App<E, R>): App<E, R | RS | HttpServerRequest.HttpServerRequest> =>
  Effect.gen(function*() {
    const { header, headerName, lease, maxBodyBytes, maxKeyLength, methods, required, ttl } = settings
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!methods.has(request.method)) return yield* app
    const raw = request.headers[header]
    if (raw === undefined || raw.trim() === "") {
      if (!required) return yield* app
      return yield* own(problem(decide.keyMissing(request.method, headerName)))
    }
    const key = parseIdempotencyKey(raw, maxKeyLength)
    if (key === undefined) return yield* own(problem(decide.keyInvalid(maxKeyLength)))
    if (decide.declaredTooLarge(request.headers["content-length"], maxBodyBytes)) {
      return yield* own(problem(decide.tooLarge(maxBodyBytes)))
    }
    const body = yield* readBody(request, maxBodyBytes)
    if (body === "too-large") return yield* own(problem(decide.tooLarge(maxBodyBytes)))
    if (body === "unreadable") return yield* own(problem(decide.bodyUnreadable))

    const scope = yield* Effect.result(scopeOf(request))
    if (scope._tag === "Failure") return yield* Effect.andThen(unsampled, refuse("idempotency", scope.failure))
    // the full original target: under HttpRouter.mount the url has lost its prefix, and two mounted
    // endpoints must not answer each other's keys
    const fingerprint = createHash("sha256").update(`${request.method} ${core.requestTarget(request.originalUrl)}\n`)
      .update(body)
      .digest("hex")
    const ref = { scope: scope.success, key }
    // From the claim to the handler's start, one uninterruptible step: a client that goes away right after
    // the claim must not leave the key in progress, with no handler, until the lease runs out.
    return yield* Effect.uninterruptibleMask((restore) =>
      Effect.flatMap(Effect.result(store.claim({ ...ref, fingerprint, ttl, lease })), (claimed) => {
        if (claimed._tag === "Success" && claimed.success._tag === "Claimed") {
          const waiter = { gone: false }
          const owner = { ...ref, token: claimed.success.token }
          const settle = admitted(settings, store, later, owner, withBody(request, body), app, waiter)
          // The handler runs in a fiber of its own, with the request's context and interruptibility. The
          // request only waits for it: a client that goes away, or a deadline that passes, ends the wait,
          // never the handler. The load-shed slot, if any, is the handler's: it is held until the handler
          // ends, so work nobody waits for still counts against the server's capacity.
          return Effect.flatMap(detach(restore(settle)), (fiber) =>
            Effect.andThen(
              holdUntil(fiber),
              Effect.withFiber((parent) => {
                // started on this stack, most handlers have answered (and their answer is stored) already:
                // their exit is the answer, with no wait and no lease to renew
                const done = fiber.pollUnsafe()
                if (done !== undefined) return done
                // its claim is renewed until the fiber ends: its answer is stored, or it failed or was interrupted
                const held = leases.join(
                  renewal(settings, store, owner),
                  parent.context,
                  parent.getRef(Clock.Clock).currentTimeMillisUnsafe()
                )
                fiber.addObserver(() => leases.end(held))
                return Effect.andThen(
                  leases.started,
                  Effect.onInterrupt(
                    Effect.interruptible(Fiber.join(fiber)),
                    () => Effect.sync(() => (waiter.gone = true))
                  )
                )
              })
            ))
        }
        return Effect.andThen(unsampled, refused(claimed, decide.redactor(key, scope.success)))
      })
    )
  })

/** An answer of the middleware's own (the handler did not run): no sample of the server's work. */
const own = (response: HttpServerResponse.HttpServerResponse) => Effect.as(unsampled, response)

/**
 * Runs `effect` in a fiber of its own that no one else holds, started at once on the caller's stack: a handler
 * that answers without waiting costs no extra scheduler round trip. It inherits the caller's interruptibility
 * (here: none, inside the claim's mask), and `restore` gives the handler the request's.
 */
const detach = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.forkDetach(effect, { startImmediately: true, uninterruptible: "inherit" })

/** The answer to a claim that did not admit the request: the store's refusal, or the key's state. */
const refused = (
  claimed: Result.Result<ClaimResult, IdempotencyStoreError | IdempotencyStoreFull>,
  redact: (text: string) => string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (claimed._tag === "Failure") {
    if (claimed.failure instanceof IdempotencyStoreFull) {
      return Effect.as(
        Effect.logWarning(`idempotency: ${claimed.failure.message}; a new key was refused`),
        problem(decide.storeFull)
      )
    }
    return Effect.as(logStoreFailure("claim", claimed.failure, redact), problem(decide.storeUnavailable))
  }
  const claim = claimed.success
  switch (claim._tag) {
    case "Mismatch":
      return Effect.succeed(problem(decide.mismatch))
    case "InProgress":
      return Effect.succeed(problem(decide.inProgress))
    case "Completed":
      return Effect.succeed(replay(claim.response))
    case "Claimed":
      return Effect.die(new Error("a claimed key is admitted, not refused"))
  }
}
