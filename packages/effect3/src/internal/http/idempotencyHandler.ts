import * as decide from "@effect-resilience/core/idempotencyResponse"
import type { HttpApp } from "@effect/platform"
import type { HttpServerRequest } from "@effect/platform"
import { HttpServerResponse } from "@effect/platform"
import {
  Cause,
  Duration,
  Effect,
  Exit,
  Fiber,
  FiberRef,
  type FiberRefs,
  Option,
  Random,
  RuntimeFlags,
  Scope
} from "effect"
import type { ClaimRef, Store, StoredResponse } from "../../IdempotencyStore.js"
import { currentMonotonicMillis } from "../clock.js"
import { currentDeadline } from "../deadline.js"
import type { IdempotencyStoreError } from "../idempotencyStore/service.js"
import { captureBody, type Captured, capturedNow, pickHeaders, withBytes } from "./idempotencyHttp.js"

/** The idempotency middleware's options, validated, with their defaults filled in. */
export interface Settings {
  readonly methods: ReadonlySet<string>
  /** The key's header as configured, and in lower case. */
  readonly headerName: string
  readonly header: string
  readonly required: boolean
  readonly maxKeyLength: number
  readonly maxBodyBytes: number
  readonly maxResponseBytes: number
  readonly ttl: Duration.Duration
  readonly lease: Duration.Duration
  readonly leaseMillis: number
  readonly storeServerErrors: boolean
  readonly storeStatus: (status: number) => boolean
  readonly replayHeaders: ReadonlySet<string>
  /**
   * The pauses between attempts to record an answer: from 100 ms, doubling, to a second (`lease / 4` if
   * shorter); jittered by ±20 %, but never longer than that cap.
   */
  readonly retryFirstMillis: number
  readonly retryCapMillis: number
}

/**
 * The renewal of `ref`'s claim, run (by the middleware's `Leases`, see `idempotencyLeases.ts`) a third of a
 * lease after the claim, and after each renewal, while the claim is still ours and its handler runs: whether
 * the store says it still is (a failure counts as still owned, logged).
 */
export const renewal = (settings: Settings, store: Store, ref: ClaimRef): Effect.Effect<boolean> =>
  Effect.suspend(() =>
    Effect.catchAll(
      store.renew(ref, settings.lease),
      (e) => Effect.as(logStoreFailure("renew", e, decide.redactor(ref.key, ref.scope)), true)
    )
  )

/**
 * The admitted handler and everything after it, as one piece that no client can stop: once a handler has
 * started it may have had effects, so it runs to its end, and its answer is stored for the retry. The caller
 * runs {@link Handling.run} in a fiber of its own, with the request (its body read) in its context, and renews
 * its lease (see {@link renewal}) until that fiber ends: its answer has been read and stored.
 *
 * One object per admitted request, its steps methods of the class: a request costs this object instead of a
 * closure per step.
 */
export class Handling<E, R> {
  /** The client stopped waiting (it went away, or its deadline passed): failures are logged here. */
  gone = false
  /** The FiberRefs the handler's fiber started with, to tell whether a join would hand anything on. */
  private startRefs: FiberRefs.FiberRefs | undefined = undefined

  constructor(
    readonly settings: Settings,
    readonly store: Store,
    readonly later: Recorder,
    readonly ref: ClaimRef,
    readonly app: HttpApp.Default<E, R>
  ) {}

  /**
   * The handler's fiber: the app, its answer read (the body) and judged (is it kept?) inside the same exit, so
   * a failure while reading it, or in `storeStatus`, is the handler's defect, not a key left in progress; then
   * the answer stored, or the key released. The request's deadline is not the handler's: a client's short
   * Request-Timeout-Ms ends its wait, and must not make a deadline-aware call inside fail after the commit (a
   * typed failure releases the key); without a deadline there is no FiberRef to set and restore.
   */
  get run(): Effect.Effect<HttpServerResponse.HttpServerResponse, E, R | HttpServerRequest.HttpServerRequest> {
    return Effect.withFiberRuntime((fiber) => {
      this.startRefs = fiber.getFiberRefs()
      const app = fiber.getFiberRef(currentDeadline) === undefined
        ? this.app
        : Effect.locally(this.app, currentDeadline, undefined)
      return Effect.matchCauseEffect(Effect.flatMap(app, (response) => this.read(response)), this)
    })
  }

  /** The answer, its body captured and judged. */
  private read(response: HttpServerResponse.HttpServerResponse): Effect.Effect<Judged> {
    const { maxResponseBytes, storeServerErrors, storeStatus } = this.settings
    const known = capturedNow(response, maxResponseBytes)
    // a `storeStatus` that throws here is a defect of this step, as a throw in any continuation is
    if (known !== undefined) {
      return Effect.succeed(new Judged(response, known, decide.keeps(response.status, storeServerErrors, storeStatus)))
    }
    return Effect.flatMap(
      captureBody(response, maxResponseBytes),
      (captured) =>
        Effect.sync(() => new Judged(response, captured, decide.keeps(response.status, storeServerErrors, storeStatus)))
    )
  }

  /** The handler answered (see {@link run}): the answer is sent, and stored (or the key released). */
  onSuccess = ({ captured, kept, response }: Judged): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    const sent = captured.bytes === undefined ? response : withBytes(response, captured.bytes)
    if (!kept) return Effect.as(this.release, sent)
    const headers = pickHeaders(response, this.settings.replayHeaders)
    if (!captured.storable) {
      // answered in full, but only its status and headers can be replayed: say so, now and on replays
      headers[decide.bodyOmittedHeader] = "omitted"
      return Effect.as(
        this.complete({ status: response.status, headers, body: emptyBody }),
        HttpServerResponse.setHeader(sent, decide.bodyOmittedHeader, "omitted")
      )
    }
    return Effect.as(this.complete({ status: response.status, headers, body: captured.bytes! }), sent)
  }

  /** The handler (or the reading of its answer) failed. */
  onFailure = (cause: Cause.Cause<E>): Effect.Effect<never, E> => {
    const { storeServerErrors, storeStatus } = this.settings
    // a defect is answered 500 by the server: stored like a 500 answer (it may have committed first)
    if (Cause.isDie(cause)) {
      const store500 = decide.keepsDefect(storeServerErrors, storeStatus)
        ? this.complete({ status: 500, headers: {}, body: emptyBody })
        : this.release
      return Effect.zipRight(Effect.zipRight(store500, this.unseen(cause)), Effect.failCause(cause))
    }
    // a typed failure reports that the handler did nothing: the key is free for a retry
    if (Cause.isFailure(cause)) {
      return Effect.zipRight(Effect.zipRight(this.release, this.unseen(cause)), Effect.failCause(cause))
    }
    // interrupted from inside: it may have committed, so the claim is left to run out its lease
    return Effect.zipRight(this.unseen(cause), Effect.failCause(cause))
  }

  private get redact(): (text: string) => string {
    return decide.redactor(this.ref.key, this.ref.scope)
  }

  private get release(): Effect.Effect<void> {
    return Effect.catchAll(this.store.release(this.ref), (e) => logStoreFailure("release", e, this.redact))
  }

  /**
   * The handler has run: its answer must be recorded before anyone may take the key over, or a retry runs it
   * again. A store that fails now (down, restarting) is tried again in the background, while the client gets
   * its answer: see `recordLater` and `recorder`.
   */
  private complete(stored: StoredResponse): Effect.Effect<void> {
    return Effect.matchEffect(this.store.complete(this.ref, stored, this.settings.ttl), {
      onSuccess: (owned) => owned ? Effect.void : takenOver,
      onFailure: (e) => this.later(recordLater(this.settings, this.store, this.ref, stored), e, this.redact)
    })
  }

  /** No one else will see this failure when the client has gone: say it here (the cause, never the key). */
  private unseen(cause: Cause.Cause<unknown>): Effect.Effect<void> {
    return Effect.suspend(() =>
      this.gone ? Effect.logError("idempotency: a handler whose client had gone failed", cause) : Effect.void
    )
  }

  /**
   * The request's side of `fiber` (this handling's), ended with `exit`: as `Fiber.join` gives it, its FiberRef
   * changes handed on to the joiner, but without the join when the handler's fiber changed none (as most do):
   * then it has nothing to hand on.
   */
  joined(
    fiber: Fiber.RuntimeFiber<HttpServerResponse.HttpServerResponse, E>,
    exit: Exit.Exit<HttpServerResponse.HttpServerResponse, E>
  ): Effect.Effect<HttpServerResponse.HttpServerResponse, E> {
    if (Exit.isFailure(exit)) return exit
    return this.startRefs !== undefined && unchanged(this.startRefs, fiber.getFiberRefs())
      ? exit
      : Effect.as(fiber.inheritAll, exit.value)
  }
}

/** A handler's answer, its body captured, and whether it is kept. */
class Judged {
  constructor(
    readonly response: HttpServerResponse.HttpServerResponse,
    readonly captured: Captured,
    readonly kept: boolean
  ) {}
}

const emptyBody = new Uint8Array(0)

/** The runtime flags a join never hands on (`Fiber.inheritAll` excludes them); every fiber's end sets them. */
const notInherited = RuntimeFlags.Interruption | RuntimeFlags.WindDown

/**
 * Whether a fiber that started with `before` and ends with `after` holds the same value in every FiberRef
 * (its runtime flags but those a join never hands on): joining it would change nothing.
 */
const unchanged = (before: FiberRefs.FiberRefs, after: FiberRefs.FiberRefs): boolean => {
  if (before === after) return true
  if (before.locals.size !== after.locals.size) return false
  for (const [ref, stack] of after.locals) {
    const old = before.locals.get(ref)
    if (old === undefined) return false
    const was = old[0][1]
    const is = stack[0][1]
    if (was === is) continue
    if (ref !== FiberRef.currentRuntimeFlags || ((was ^ is) & ~notInherited) !== 0) return false
  }
  return true
}

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
const recordLater = (
  settings: Settings,
  store: Store,
  ref: ClaimRef,
  stored: StoredResponse
): Effect.Effect<void> =>
  Effect.gen(function*() {
    const { retryCapMillis, retryFirstMillis, ttl } = settings
    const redact = decide.redactor(ref.key, ref.scope)
    const giveUpAt = (yield* currentMonotonicMillis) + Duration.toMillis(ttl)
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
      if ((yield* currentMonotonicMillis) + pause >= giveUpAt) {
        return yield* Effect.logError(
          `idempotency: a handler's answer could not be recorded within the ttl (${attempt} attempts); ` +
            `a retry with its key may run it again: ${redact(decide.describe(result.left))}`
        )
      }
      pause = Math.min(pause * 2, retryCapMillis)
    }
  })

/** Answers waiting to be recorded again in the background, at most (each holds up to `maxResponseBytes`). */
export const maxPendingRecordings = 1000

/**
 * Starts `recording` (the background recording of an answer whose `complete` failed with `error`), or says
 * why it is not started. Never fails.
 */
export type Recorder = (
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

const takenOver = Effect.logWarning("idempotency: claim was taken over before completion")

/** One log line per store failure, with its cause and without the key or the scope. */
export const logStoreFailure = (
  operation: IdempotencyStoreError["operation"],
  error: unknown,
  redact: (text: string) => string,
  then = ""
) => Effect.logWarning(`idempotency: the store failed (${operation}): ${redact(decide.describe(error))}${then}`)
