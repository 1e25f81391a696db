import type { HttpApp } from "@effect/platform"
import { HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Clock, Duration, Effect, type Either, Exit, Fiber, Option, Random, Scope } from "effect"
import { createHash } from "node:crypto"
import * as decide from "../../core/idempotencyResponse.js"
import { parseIdempotencyKey } from "../../core/structuredFields.js"
import type { Options } from "../../IdempotencyMiddleware.js"
import type { ClaimRef, ClaimResult, Store, StoredResponse } from "../../IdempotencyStore.js"
import { currentDeadline } from "../deadline.js"
import * as fastPath from "../fastPath.js"
import { IdempotencyStore, type IdempotencyStoreError, IdempotencyStoreFull } from "../idempotencyStore/service.js"
import * as validate from "../validate.js"
import { holdUntil, unsampled } from "./admission.js"
import { refuse, resolver } from "./clientScope.js"
import { captureBody, pickHeaders, replay, withBytes } from "./idempotencyHttp.js"
import { problem } from "./problem.js"
import { readBody, withBody } from "./requestBody.js"

export const defaultReplayHeaders = decide.defaultReplayHeaders

export const bodyOmittedHeader = decide.bodyOmittedHeader

export const replayedHeader = decide.replayedHeader

export const make = <RS>(options: Options<RS> = {}) => {
  const methods = new Set((options.methods ?? ["POST", "PATCH"]).map((m) => m.toUpperCase()))
  const headerName = options.header ?? "Idempotency-Key"
  const header = headerName.toLowerCase()
  const required = options.required ?? true
  const maxKeyLength = validate.positiveInt("IdempotencyMiddleware maxKeyLength", options.maxKeyLength ?? 255)
  const maxBodyBytes = validate.positiveInt("IdempotencyMiddleware maxBodyBytes", options.maxBodyBytes ?? 1024 * 1024)
  const maxResponseBytes = validate.nonNegative(
    "IdempotencyMiddleware maxResponseBytes",
    options.maxResponseBytes ?? 64 * 1024
  )
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

  const withStore = (store: Store, later: Recorder) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | RS> =>
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

      const scope = yield* Effect.either(scopeOf(request))
      if (scope._tag === "Left") return yield* Effect.zipRight(unsampled, refuse("idempotency", scope.left))
      // the full original target: under HttpRouter.mount the url has lost its prefix, and two mounted
      // endpoints must not answer each other's keys
      const fingerprint = createHash("sha256").update(`${request.method} ${request.originalUrl}\n`).update(body)
        .digest("hex")
      const ref = { scope: scope.right, key }
      // From the claim to the handler's start, one uninterruptible step: a client that goes away right after
      // the claim must not leave the key in progress, with no handler, until the lease runs out.
      return yield* Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(Effect.either(store.claim({ ...ref, fingerprint, ttl, lease })), (claimed) => {
          if (claimed._tag === "Right" && claimed.right._tag === "Claimed") {
            const waiter = { gone: false }
            const settle = admitted(
              store,
              later,
              { ...ref, token: claimed.right.token },
              withBody(request, body),
              app,
              waiter
            )
            // The handler runs in a fiber of its own, with the request's context and interruptibility. The
            // request only waits for it: a client that goes away, or a deadline that passes, ends the wait,
            // never the handler. The load-shed slot, if any, is the handler's: it is held until the handler
            // ends, so work nobody waits for still counts against the server's capacity.
            return Effect.flatMap(detach(restore(settle)), (fiber) =>
              Effect.zipRight(
                holdUntil(fiber),
                Effect.onInterrupt(
                  Effect.interruptible(Fiber.join(fiber)),
                  () => Effect.sync(() => (waiter.gone = true))
                )
              ))
          }
          return Effect.zipRight(unsampled, refused(claimed, decide.redactor(key, scope.right)))
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
    app: HttpApp.Default<E, R>,
    waiter: { readonly gone: boolean }
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R> => {
    const redact = decide.redactor(ref.key, ref.scope)
    const release = Effect.catchAll(store.release(ref), (e) => logStoreFailure("release", e, redact))
    const heartbeat = store.renew(ref, lease).pipe(
      Effect.delay(Duration.millis(leaseMillis / 3)),
      Effect.catchAll((e) => Effect.as(logStoreFailure("renew", e, redact), true)),
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
      Effect.locally(
        Effect.provideService(app, HttpServerRequest.HttpServerRequest, request),
        currentDeadline,
        undefined
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
      if (Cause.isDie(cause)) {
        const store500 = decide.keepsDefect(storeServerErrors, storeStatus)
          ? complete({ status: 500, headers: {}, body: new Uint8Array(0) })
          : release
        return Effect.zipRight(Effect.zipRight(store500, unseen(cause)), Effect.failCause(cause))
      }
      // a typed failure reports that the handler did nothing: the key is free for a retry
      if (Cause.isFailure(cause)) {
        return Effect.zipRight(Effect.zipRight(release, unseen(cause)), Effect.failCause(cause))
      }
      // interrupted from inside: it may have committed, so the claim is left to run out its lease
      return Effect.zipRight(unseen(cause), Effect.failCause(cause))
    })
    return Effect.scoped(Effect.zipRight(
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
        yield* Effect.sleep(Duration.millis(Math.min(pause * (yield* Random.nextRange(0.8, 1.2)), retryCapMillis)))
        const result = yield* Effect.either(store.complete(ref, stored, ttl))
        if (result._tag === "Right") {
          return yield* result.right
            ? Effect.logInfo(`idempotency: a handler's answer was recorded at attempt ${attempt}`)
            : Effect.logWarning(
              "idempotency: the store refused a handler's answer: an earlier attempt whose reply was lost " +
                "recorded it, or the key was taken over"
            )
        }
        if ((yield* Clock.currentTimeMillis) + pause >= giveUpAt) {
          return yield* Effect.logError(
            `idempotency: a handler's answer could not be recorded within the ttl (${attempt} attempts); ` +
              `a retry with its key may run it again: ${redact(decide.describe(result.left))}`
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

/** Answers waiting to be recorded again in the background, at most (each holds up to `maxResponseBytes`). */
export const maxPendingRecordings = 1000

/**
 * Starts `recording` (the background recording of an answer whose `complete` failed with `error`), or says
 * why it is not started. Never fails.
 */
type Recorder = (
  recording: Effect.Effect<void>,
  error: unknown,
  redact: (text: string) => string
) => Effect.Effect<void>

/**
 * The owner of the background recordings of one middleware: at most {@link maxPendingRecordings} at a time
 * (one more is dropped, with an error log), each in a fiber of its own. When `make` runs in a scope (e.g.
 * `Layer.unwrapScoped`, `Effect.scoped`), closing it stops them, with one error log that counts the answers
 * never recorded, and no recording starts after it; without a scope they run until they end (recorded,
 * refused, or the ttl passed) or the process exits.
 */
export const recorder = (
  scope: Option.Option<Scope.Scope>,
  maxPending: number = maxPendingRecordings
): Effect.Effect<Recorder> =>
  Effect.gen(function*() {
    const pending = new Set<Fiber.RuntimeFiber<void>>()
    let closed = false
    if (Option.isSome(scope)) {
      yield* Scope.addFinalizer(
        scope.value,
        Effect.suspend(() => {
          closed = true
          const fibers = [...pending]
          if (fibers.length === 0) return Effect.void
          return Effect.zipRight(
            Effect.logError(
              `idempotency: ${fibers.length} handlers' answers were never recorded (the middleware's scope ` +
                "closed while the store failed); a retry with one of their keys may run its handler again once " +
                "its lease has run out"
            ),
            Fiber.interruptAll(fibers)
          )
        })
      )
    }
    return (recording, error, redact) =>
      Effect.suspend(() => {
        const failed = `idempotency: the store failed (complete): ${redact(decide.describe(error))}`
        if (closed) {
          return Effect.logError(
            `${failed}; not tried again: the middleware's scope has closed (a retry with its key may run the ` +
              "handler again once the lease has run out)"
          )
        }
        if (pending.size >= maxPending) {
          return Effect.logError(
            `${failed}; not tried again: ${maxPending} answers are already waiting to be recorded (a retry ` +
              "with its key may run the handler again once the lease has run out)"
          )
        }
        return Effect.zipRight(
          logStoreFailure("complete", error, redact, "; trying again until it is recorded"),
          // interruptible even when forked from a handler the server runs uninterruptibly: the scope stops it
          Effect.flatMap(Effect.forkDaemon(Effect.interruptible(recording)), (fiber) =>
            Effect.sync(() => {
              pending.add(fiber)
              fiber.addObserver(() => pending.delete(fiber))
            }))
        )
      })
  })

/** An answer of the middleware's own (the handler did not run): no sample of the server's work. */
const own = (response: HttpServerResponse.HttpServerResponse) => Effect.as(unsampled, response)

const takenOver = Effect.logWarning("idempotency: claim was taken over before completion")

/**
 * Runs `effect` in a fiber of its own that no one else holds (like `Effect.forkDaemon`), started at once on
 * the caller's stack where the runtime allows it: a handler that answers without waiting costs no extra
 * scheduler round trip.
 */
const detach = fastPath.forkDetached

/** The answer to a claim that did not admit the request: the store's refusal, or the key's state. */
const refused = (
  claimed: Either.Either<ClaimResult, IdempotencyStoreError | IdempotencyStoreFull>,
  redact: (text: string) => string
): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
  if (claimed._tag === "Left") {
    if (claimed.left instanceof IdempotencyStoreFull) {
      return Effect.as(
        Effect.logWarning(`idempotency: ${claimed.left.message}; a new key was refused`),
        problem(decide.storeFull)
      )
    }
    return Effect.as(logStoreFailure("claim", claimed.left, redact), problem(decide.storeUnavailable))
  }
  const claim = claimed.right
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

/** One log line per store failure, with its cause and without the key or the scope. */
const logStoreFailure = (
  operation: IdempotencyStoreError["operation"],
  error: unknown,
  redact: (text: string) => string,
  then = ""
) => Effect.logWarning(`idempotency: the store failed (${operation}): ${redact(decide.describe(error))}${then}`)
