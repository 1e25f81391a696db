import * as decide from "@effect-resilience/core/idempotencyResponse"
import { Effect, Fiber, Option, Scope } from "effect"
import type { IdempotencyStoreError } from "../idempotencyStore/service.js"

/**
 * The idempotency middleware's background recordings: answers of handlers that ran, whose `complete` failed,
 * recorded again until the store takes them (see `recordLater` in `idempotencyHandler.ts`).
 */

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
    const pending = new Set<Fiber.Fiber<void>>()
    let closed = false
    if (Option.isSome(scope)) {
      yield* Scope.addFinalizer(
        scope.value,
        Effect.suspend(() => {
          closed = true
          const fibers = [...pending]
          if (fibers.length === 0) return Effect.void
          return Effect.andThen(
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
        return Effect.andThen(
          logStoreFailure("complete", error, redact, "; trying again until it is recorded"),
          // interruptible even when forked from a handler the server runs uninterruptibly: the scope stops it
          Effect.flatMap(Effect.forkDetach(Effect.interruptible(recording)), (fiber) =>
            Effect.sync(() => {
              pending.add(fiber)
              fiber.addObserver(() => pending.delete(fiber))
            }))
        )
      })
  })

/** One log line per store failure, with its cause and without the key or the scope. */
export const logStoreFailure = (
  operation: IdempotencyStoreError["operation"],
  error: unknown,
  redact: (text: string) => string,
  then = ""
) => Effect.logWarning(`idempotency: the store failed (${operation}): ${redact(decide.describe(error))}${then}`)
