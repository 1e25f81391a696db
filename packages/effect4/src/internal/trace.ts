import { Clock, Context, Effect, References, Tracer } from "effect"

/**
 * The library's span events (issue 33): a decision is an event on the CURRENT span — the caller's, or the HTTP
 * client's attempt or request span — named `Module.decision`, so a hot path (`Retry.retry`, a breaker, a
 * limiter around any effect) makes no span of its own. docs/observability.md lists every event and attribute.
 */

/** The current span, if the fiber has one of its own that is still open (an external parent takes no event). */
const currentSpan = (context: Context.Context<never>): Tracer.Span | undefined => {
  const span = Context.getOrUndefined(context, Tracer.ParentSpan)
  return span !== undefined && span._tag === "Span" && span.status._tag !== "Ended" ? span : undefined
}

/** Adds the event `name` with `attributes()` (built only when there is a span) to the current span. */
export const event = (name: string, attributes: () => Record<string, unknown>): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    const span = currentSpan(fiber.context)
    if (span !== undefined) {
      const time = fiber.getRef(References.TracerTimingEnabled)
        ? fiber.getRef(Clock.Clock).currentTimeNanosUnsafe()
        : BigInt(0)
      span.event(name, time, attributes())
    }
    return Effect.void
  })

/** `event` for code that is not an effect (a breaker's transition, recorded synchronously), on `context`'s span. */
export const eventUnsafe = (
  context: Context.Context<never>,
  name: string,
  attributes: () => Record<string, unknown>
): void => {
  const span = currentSpan(context)
  if (span === undefined) return
  const clock = Context.get(context, Clock.Clock)
  const timing = Context.get(context, References.TracerTimingEnabled)
  span.event(name, timing ? clock.currentTimeNanosUnsafe() : BigInt(0), attributes())
}

/**
 * OpenTelemetry's `error.type` of a failure the library classified: an HTTP status (`StatusError`), else the
 * error's tag, else `_OTHER`. Looks through a `Retryable` to its cause.
 */
export const errorTypeOf = (error: unknown): string => {
  let e = error as { readonly _tag?: unknown; readonly cause?: unknown; readonly status?: unknown } | null
  if (typeof e === "object" && e !== null && e._tag === "Retryable") e = e.cause as typeof e
  if (typeof e !== "object" || e === null) return "_OTHER"
  if (e._tag === "StatusError" && typeof e.status === "number") return String(e.status)
  return typeof e._tag === "string" ? e._tag : "_OTHER"
}
