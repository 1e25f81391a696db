import { serializeAll } from "@effect-resilience/core/queueMessages"
import * as visibility from "@effect-resilience/core/visibility"
import { Cause, type Duration, Effect, type MetricLabel, Option, Random } from "effect"
import type { ListOptions } from "../../DeadLetter.js"
import * as validate from "../validate.js"
import { deadLettered } from "./metrics.js"

/** The pure parts live in the core (shared by both editions); the sources import them from here. */
export {
  corruptReason,
  parseReceipt,
  serialize,
  serializeAll,
  splitReceipt,
  tryParse,
  withAckMany
} from "@effect-resilience/core/queueMessages"

export const listLimit = (options: ListOptions | undefined): number =>
  options?.limit === undefined ? 100 : validate.positiveInt("DeadLetterQueue.list limit", options.limit)

/** Table names are spliced into SQL: only plain identifiers are accepted. */
export const identifier = (what: string, name: string): string => {
  if (!/^[A-Za-z_][A-Za-z0-9_]{0,54}$/.test(name)) {
    validate.invalid(
      `${what} must be a plain SQL identifier (letters, digits, _; at most 55 characters), got "${name}"`
    )
  }
  return name
}

const MAX_REASON = 4000

/** Renders a failure as one line of text for a dead-letter entry: the error, not a stack trace. */
export const renderCause = (cause: Cause.Cause<unknown>): string => {
  const failure = Cause.failureOption(cause)
  let text: string
  if (Option.isSome(failure)) {
    text = describe(failure.value)
  } else {
    const defect = Cause.dieOption(cause)
    text = Option.isSome(defect)
      ? `defect: ${describe(defect.value)}`
      : Cause.isInterruptedOnly(cause)
      ? "interrupted"
      : Cause.pretty(cause)
  }
  return text.length > MAX_REASON ? `${text.slice(0, MAX_REASON)}…` : text
}

const describe = (error: unknown): string => {
  if (typeof error !== "object" || error === null) return String(error)
  const tag = "_tag" in error ? String((error as { _tag: unknown })._tag) : undefined
  const message = error instanceof Error || "message" in error ? String((error as { message: unknown }).message) : ""
  let text = tag === undefined
    ? (message === "" ? safeJson(error) : message)
    : message === ""
    ? tag
    : `${tag}: ${message}`
  // Retry gave up: say what the last attempt failed with
  if (tag === "RetriesExhausted" && "last" in error) text += `; last: ${describe((error as { last: unknown }).last)}`
  if ((tag === "Fatal" || tag === "Retryable") && "cause" in error) {
    const inner = (error as { cause: unknown }).cause
    if (typeof inner === "object" && inner !== null && !(inner instanceof Error)) text += ` ${safeJson(inner)}`
  }
  return text
}

const safeJson = (value: unknown): string => {
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/** A random 128-bit id in UUID form, from `Random` (so tests can seed it). */
export const randomId: Effect.Effect<string> = Effect.map(
  Effect.all(Array.from({ length: 8 }, () => Random.nextIntBetween(0, 0x10000))),
  (parts) => {
    const hex = parts.map((n) => n.toString(16).padStart(4, "0")).join("")
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
  }
)

/**
 * Dead-letters the messages of a received batch whose body cannot be read, counting each one `move`d (`move`
 * says whether it did); a move that fails is logged, and its message comes back later to be tried again.
 */
export const deadLetterCorrupt = <C>(
  name: string,
  corrupt: ReadonlyArray<C>,
  idOf: (c: C) => string,
  move: (c: C) => Effect.Effect<boolean, unknown>,
  counted: ReadonlyArray<MetricLabel.MetricLabel>
): Effect.Effect<void> =>
  Effect.forEach(corrupt, (c) =>
    move(c).pipe(
      Effect.tap((moved) => Effect.sync(() => moved && deadLettered.unsafeUpdate(1, counted))),
      Effect.catchAllCause((cause) =>
        Effect.logWarning(`queue ${name}: dead-lettering a corrupt message failed`, cause).pipe(
          Effect.annotateLogs({ "message.id": idOf(c) })
        )
      )
    ), { discard: true })

/**
 * Every message paired with its serialized body, or the first serialization error as `onError` makes it: a
 * batch with one body that cannot be written sends nothing.
 */
export const serializedPairs = <M extends { readonly body: unknown }, E>(
  messages: ReadonlyArray<M>,
  onError: (error: unknown) => E
): Effect.Effect<ReadonlyArray<readonly [M, string]>, E> =>
  Effect.suspend(() => {
    const serialized = serializeAll(messages)
    return serialized.ok
      ? Effect.succeed(messages.map((m, i) => [m, serialized.texts[i]!] as const))
      : Effect.fail(onError(serialized.error))
  })

/**
 * A source's visibility timeout in whole milliseconds (PostgreSQL stores `bigint` instants, `XAUTOCLAIM`
 * takes an integer idle time): finite and at least 1 ms, rounded up.
 */
export const visibilityMillis = (what: string, input: Duration.DurationInput): number => {
  const ms = validate.millis(`${what} visibilityTimeout`, input, { finite: true })
  if (ms < 1) validate.invalid(`${what} visibilityTimeout must be at least 1 millisecond, got ${ms}`)
  return visibility.visibilityMillis(ms)
}
