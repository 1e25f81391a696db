/**
 * An in-memory tracer for the trace tests (Effect 4 only): every span Effect makes is a `NativeSpan` kept in the
 * order it started, so a test reads the tree (by parent span id), the attributes and the events.
 */
import { Effect, Fiber, Tracer } from "effect"
import { HttpClient, HttpClientResponse } from "effect/http"
import { TestClock } from "effect/testing"

export interface Recorded {
  readonly spans: Array<Tracer.NativeSpan>
  readonly tracer: Tracer.Tracer
}

export const recorder = (): Recorded => {
  const spans: Array<Tracer.NativeSpan> = []
  return {
    spans,
    tracer: Tracer.make({
      span(options) {
        const span = new Tracer.NativeSpan(options)
        spans.push(span)
        return span
      }
    })
  }
}

export const named = (recorded: Recorded, name: string) => recorded.spans.filter((s) => s.name === name)

export const childrenOf = (recorded: Recorded, parent: Tracer.Span) =>
  recorded.spans.filter((s) => s.parent._tag === "Some" && s.parent.value.spanId === parent.spanId)

export const eventsOf = (span: Tracer.NativeSpan) => span.events.map(([name, , attributes]) => ({ name, attributes }))

/** A backend that answers with `statuses` in turn (the last from then on), taking 50 ms of TestClock each. */
export const backend = (statuses: ReadonlyArray<number>, headers: Record<string, string> = {}) => {
  let n = 0
  return HttpClient.make((request) =>
    Effect.sleep("50 millis").pipe(
      Effect.as(HttpClientResponse.fromWeb(
        request,
        new Response(null, { status: statuses[Math.min(n++, statuses.length - 1)]!, headers })
      ))
    )
  )
}

/** Runs `effect` in a fiber and advances the TestClock until it ends. */
export const runTimed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.forkChild(effect)
    yield* TestClock.adjust("1 minute")
    return yield* Fiber.join(fiber)
  })
