import { Cause, Clock, Duration, Effect, Exit, Fiber, Random, type Result, Scope } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash } from "node:crypto"
import * as decide from "../../core/idempotencyResponse.js"
import { parseIdempotencyKey } from "../../core/structuredFields.js"
import type { Options } from "../../IdempotencyMiddleware.js"
import type { ClaimRef, ClaimResult, Store, StoredResponse } from "../../IdempotencyStore.js"
import { CurrentDeadline } from "../deadline.js"
import { IdempotencyStore, type IdempotencyStoreError, IdempotencyStoreFull } from "../idempotencyStore/service.js"
import * as validate from "../validate.js"
import { holdUntil, unsampled } from "./admission.js"
import { refuse, resolver } from "./clientScope.js"
import { captureBody, pickHeaders, replay, withBytes } from "./idempotencyHttp.js"
import { logStoreFailure, type Recorder, recorder } from "./idempotencyRecorder.js"
import { problem } from "./problem.js"
import { readBody, withBody } from "./requestBody.js"

export const defaultReplayHeaders = decide.defaultReplayHeaders

export const bodyOmittedHeader = decide.bodyOmittedHeader

export const replayedHeader = decide.replayedHeader

export { maxPendingRecordings, recorder } from "./idempotencyRecorder.js"

type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

export const make = <RS>(options: Options<RS> = {}) => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const headerName = options.header ?? "Idempotency-Key"
  const header = headerName.toLowerCase()
  const required = options.required ?? true
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const maxResponseBytes = options.maxResponseBytes ?? 64 * 1024
  if (!(typeof maxResponseBytes === "number" && Number.isFinite(maxResponseBytes) && maxResponseBytes >= 0)) {
    validate.invalid(`IdempotencyMiddleware maxResponseBytes must be a finite number >= 0, got ${maxResponseBytes}`)
  }
  const ttl = Duration.millis(validate.millis("IdempotencyMiddleware ttl", options.ttl ?? "24 hours"))
  const leaseMillis = validate.millis("IdempotencyMiddleware lease", options.lease ?? "60 seconds")
  if (leaseMillis <= 0) validate.invalid("IdempotencyMiddleware lease must be > 0")
  const lease = Duration.millis(leaseMillis)
  // a claim is kept for at most its TTL: shorter than the lease, a live owner could lose it
  if (Duration.toMillis(ttl) <= leaseMillis) validate.invalid("IdempotencyMiddleware ttl must be longer than the lease")
  const storeServerErrors = options.storeServerErrors ?? true
  const storeStatus = options.storeStatus ?? (() => true)
  if (typeof storeStatus !== "function") validate.invalid("IdempotencyMiddleware storeStatus must be a function")
  const replayHeaders = new Set(defaultReplayHeaders)
  for (const name of options.replayHeaders ?? []) {
    const lower = name.toLowerCase()
    if (decide.neverReplayed.has(lower)) validate.invalid(`IdempotencyMiddleware never replays ${name}`)
    replayHeaders.add(lower)
  }
  const scopeOf = resolver(options.scope, options.scopeSecret)

  const keeps = (status: number): boolean => decide.keeps(status, storeServerErrors, storeStatus)

  const withStore =
    (store: Store, later: Recorder) => <E, R>(app: App<E, R>): App<E, R | RS | HttpServerRequest.HttpServerRequest> =>
      Effect.gen(function*() {
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
        const fingerprint = createHash("sha256").update(`${request.method} ${request.originalUrl}\n`).update(body)
          .digest("hex")
        const ref = { scope: scope.success, key }
        // From the claim to the handler's start, one uninterruptible step: a client that goes away right after
        // the claim must not leave the key in progress, with no handler, until the lease runs out.
        return yield* Effect.uninterruptibleMask((restore) =>
          Effect.flatMap(Effect.result(store.claim({ ...ref, fingerprint, ttl, lease })), (claimed) => {
            if (claimed._tag === "Success" && claimed.success._tag === "Claimed") {
              const waiter = { gone: false }
              const settle = admitted(
                store,
                later,
                { ...ref, token: claimed.success.token },
                withBody(request, body),
                app,
                waiter
              )
              // The handler runs in a fiber of its own, with the request's context and interruptibility. The
              // request only waits for it: a client that goes away, or a deadline that passes, ends the wait,
              // never the handler. The load-shed slot, if any, is the handler's: it is held until the handler
              // ends, so work nobody waits for still counts against the server's capacity.
              return Effect.flatMap(detach(restore(settle)), (fiber) =>
                Effect.andThen(
                  holdUntil(fiber),
                  Effect.onInterrupt(
                    Effect.interruptible(Fiber.join(fiber)),
                    () => Effect.sync(() => (waiter.gone = true))
                  )
                ))
            }
            return Effect.andThen(unsampled, refused(claimed, decide.redactor(key, scope.success)))
          })
        )
      })

  /**
   * The admitted handler and everything after it, as one piece that no client can stop: once a handler has
   * started it may have had effects, so it runs to its end, and its answer is stored for the retry. Its lease
   * is renewed, and its scope stays open, until its answer is read and stored.
   */
  const admitted = <E, R>(
    store: Store,
    later: Recorder,
    ref: ClaimRef,
    request: HttpServerRequest.HttpServerRequest,
    app: App<E, R>,
    waiter: { readonly gone: boolean }
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, Exclude<R, HttpServerRequest.HttpServerRequest>> => {
    const redact = decide.redactor(ref.key, ref.scope)
    const release = Effect.catch(store.release(ref), (e) => logStoreFailure("release", e, redact))
    const heartbeat = store.renew(ref, lease).pipe(
      Effect.delay(Duration.millis(leaseMillis / 3)),
      Effect.catch((e) => Effect.as(logStoreFailure("renew", e, redact), true)),
      Effect.repeat({ while: (stillOwned) => stillOwned })
    )
    // The handler has run: its answer must be recorded before anyone may take the key over, or a retry
    // runs it again. A store that fails now (down, restarting) is tried again in the background, while the
    // client gets its answer: see `recordLater` and `recorder`.
    const complete = (stored: StoredResponse) =>
      Effect.matchEffect(store.complete(ref, stored, ttl), {
        onSuccess: (owned) => owned ? Effect.void : takenOver,
        onFailure: (e) => later(recordLater(store, ref, stored), e, redact)
      })
    /** No one else will see this failure when the client has gone: say it here (the cause, never the key). */
    const unseen = (cause: Cause.Cause<unknown>) =>
      waiter.gone ? Effect.logError("idempotency: a handler whose client had gone failed", cause) : Effect.void
    // The answer as the handler gave it, read (the body) and judged (is it kept?) inside the same exit: a
    // failure while reading it, or in `storeStatus`, is the handler's defect, not a key left in progress.
    // The request's deadline is not the handler's: a client's short Request-Timeout-Ms ends its wait, and must
    // not make a deadline-aware call inside fail after the commit (a typed failure releases the key).
    const answered = Effect.flatMap(
      app.pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, request),
        Effect.provideService(CurrentDeadline, undefined)
      ),
      (response) =>
        Effect.flatMap(
          captureBody(response, maxResponseBytes),
          (captured) => Effect.sync(() => ({ response, captured, kept: keeps(response.status) }))
        )
    )
    const settle = Effect.flatMap(Effect.exit(answered), (exit) => {
      if (Exit.isSuccess(exit)) {
        const { captured, kept, response } = exit.value
        const sent = captured.bytes === undefined ? response : withBytes(response, captured.bytes)
        if (!kept) return Effect.as(release, sent)
        const headers = pickHeaders(response, replayHeaders)
        if (!captured.storable) {
          // answered in full, but only its status and headers can be replayed: say so, now and on replays
          headers[decide.bodyOmittedHeader] = "omitted"
          return Effect.as(
            complete({ status: response.status, headers, body: new Uint8Array(0) }),
            HttpServerResponse.setHeader(sent, decide.bodyOmittedHeader, "omitted")
          )
        }
        return Effect.as(complete({ status: response.status, headers, body: captured.bytes! }), sent)
      }
      const cause = exit.cause
      // a defect is answered 500 by the server: stored like a 500 answer (it may have committed first)
      if (Cause.hasDies(cause)) {
        const store500 = decide.keepsDefect(storeServerErrors, storeStatus)
          ? complete({ status: 500, headers: {}, body: new Uint8Array(0) })
          : release
        return Effect.andThen(Effect.andThen(store500, unseen(cause)), Effect.failCause(cause))
      }
      // a typed failure reports that the handler did nothing: the key is free for a retry
      if (Cause.hasFails(cause)) {
        return Effect.andThen(Effect.andThen(release, unseen(cause)), Effect.failCause(cause))
      }
      // interrupted from inside: it may have committed, so the claim is left to run out its lease
      return Effect.andThen(unseen(cause), Effect.failCause(cause))
    })
    return Effect.scoped(Effect.andThen(
      Effect.forkScoped(Effect.interruptible(heartbeat)), // the server may run handlers uninterruptibly
      settle
    ))
  }

  /**
   * The pauses between attempts to record an answer: from 100 ms, doubling, to a second (`lease / 4` if
   * shorter); jittered by ±20 %, but never longer than that cap.
   */
  const retryCapMillis = Math.max(1, Math.min(1000, leaseMillis / 4))
  const retryFirstMillis = Math.min(100, retryCapMillis)

  /**
   * Records the answer of a handler that ran after `complete` failed: again and again, with a growing pause
   * (doubling from 100 ms, jittered by ±20 %, never more than a second, or `lease / 4` when shorter) from the
   * end of one attempt to the start of the next, until the store accepts it, says the claim was taken over,
   * or the record's `ttl` has passed (it would be gone). The stores accept the completion of the claim's
   * owner even after its lease lapsed, as long as no one took the key over. The lease is no longer renewed
   * here: it runs out one lease after the claim's last renewal (they are `lease / 3` apart while the handler
   * runs). A store back at least one pause plus one attempt before that records the answer before any retry
   * can take the key over; a store back later leaves a race with the first retry after it.
   */
  const recordLater = (store: Store, ref: ClaimRef, stored: StoredResponse): Effect.Effect<void> =>
    Effect.gen(function*() {
      const redact = decide.redactor(ref.key, ref.scope)
      const giveUpAt = (yield* Clock.currentTimeMillis) + Duration.toMillis(ttl)
      let pause = retryFirstMillis
      for (let attempt = 2;; attempt++) {
        yield* Effect.sleep(Duration.millis(Math.min(pause * (yield* Random.nextBetween(0.8, 1.2)), retryCapMillis)))
        const result = yield* Effect.result(store.complete(ref, stored, ttl))
        if (result._tag === "Success") {
          return yield* result.success
            ? Effect.logInfo(`idempotency: a handler's answer was recorded at attempt ${attempt}`)
            : Effect.logWarning(
              "idempotency: the store refused a handler's answer: an earlier attempt whose reply was lost " +
                "recorded it, or the key was taken over"
            )
        }
        if ((yield* Clock.currentTimeMillis) + pause >= giveUpAt) {
          return yield* Effect.logError(
            `idempotency: a handler's answer could not be recorded within the ttl (${attempt} attempts); ` +
              `a retry with its key may run it again: ${redact(decide.describe(result.failure))}`
          )
        }
        pause = Math.min(pause * 2, retryCapMillis)
      }
    })

  return Effect.gen(function*() {
    const store = yield* IdempotencyStore
    return withStore(store, yield* recorder(yield* Effect.serviceOption(Scope.Scope)))
  })
}

/** An answer of the middleware's own (the handler did not run): no sample of the server's work. */
const own = (response: HttpServerResponse.HttpServerResponse) => Effect.as(unsampled, response)

const takenOver = Effect.logWarning("idempotency: claim was taken over before completion")

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
