/**
 * Issue 33 item 6: what the library's telemetry costs, in one run. The pipeline of the `pipeline` suite
 * (`Retry.retry(limiter.tryAcquire *> breaker.protect(Deadline.timeout(call)))`) and a `ResilientHttpClient`
 * (retry, a breaker per origin, the default attempt timeout, over an in-process transport: no socket), each
 * with the telemetry as shipped (metrics recorded, the client's request and attempt spans in Effect's native
 * tracer) and with the library's telemetry off (`Telemetry.MetricsEnabled` false, `Effect.withTracerEnabled(false)`).
 * The transport's own span (Effect's `HttpClient`) is dropped in both (`HttpClient.TracerDisabledWhen`): it is not
 * the library's. Targets: default ≤ 1.3× off, and off ≤ 1.05× the pipeline before issue 33 — measured in the same
 * run when `--before <dist>` names a build of that commit (by default the one `bash bench/before.sh` makes, if it
 * did), else against cockatiel's pipeline: 0.12× of it was the pipeline's ratio before issue 33, so off ≤ 1.05 ×
 * 0.12× (a loaded machine slows the Effect side more than cockatiel's: prefer `--before`).
 *
 * Micro-cases, each as ns per operation over the `Effect.void` floor of the same loop (inside one span): a span
 * (`Effect.withSpan` around `Effect.void`, the native tracer: as the library makes them, with Effect's default
 * stack trace, and with the tracer disabled), an event on the current span (what the library's decisions add, by
 * the same path: the current span, the clock, `span.event`), a histogram sample (`Metric.update` of a histogram
 * with the library's 16 boundaries), and a library counter's update (by 0) with and without `MetricsEnabled`.
 */
import { Clock, Context, Effect, Metric, References, Scope, Tracer } from "effect"
import * as Backoff from "effect-resilience/Backoff"
import * as CircuitBreaker from "effect-resilience/CircuitBreaker"
import * as Deadline from "effect-resilience/Deadline"
import type * as Failure from "effect-resilience/Failure"
import * as RateLimiter from "effect-resilience/RateLimiter"
import * as RateLimiterStore from "effect-resilience/RateLimiterStore"
import * as ResilientHttpClient from "effect-resilience/ResilientHttpClient"
import * as Retry from "effect-resilience/Retry"
import * as Telemetry from "effect-resilience/Telemetry"
import { HttpClient, HttpClientRequest, HttpClientResponse } from "effect/http"
import { existsSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { cockatielPipelineName, cockatielPipelineRound } from "../../../bench/cockatiel.js"
import { interleaved, pairedRatio } from "../../../bench/measure.js"
import { median, option, type Suite } from "../../../bench/report.js"

/** The modules a pipeline is built from: this build's, or those of `--before`'s dist. */
interface Modules {
  readonly Backoff: typeof Backoff
  readonly CircuitBreaker: typeof CircuitBreaker
  readonly Deadline: typeof Deadline
  readonly RateLimiter: typeof RateLimiter
  readonly RateLimiterStore: typeof RateLimiterStore
  readonly Retry: typeof Retry
}

const scope = Effect.runSync(Scope.make())

/** The `pipeline` suite's pipeline, from `m`: one operation per call. */
const pipelineOf = (m: Modules) => {
  const breaker = Effect.runSync(
    Scope.provide(scope)(m.CircuitBreaker.make({ trip: m.CircuitBreaker.consecutive(5), openFor: "10 seconds" }))
  )
  const limiter = Effect.runSync(
    m.RateLimiter.tokenBucket({ capacity: 1_000_000_000, refillPerSecond: 1_000_000_000 }).pipe(
      Effect.provideService(m.RateLimiterStore.RateLimiterStore, m.RateLimiterStore.unsafeMakeMemory())
    )
  )
  const retry = m.Retry.retry({
    schedule: m.Backoff.fullJitter({ base: "10 millis", cap: "1 second" }),
    maxAttempts: 3
  })
  const timeout = m.Deadline.timeout("1 second")
  const call = (i: number): Effect.Effect<number, Failure.Retryable> => Effect.succeed(i)
  return (i: number) => retry(Effect.andThen(limiter.tryAcquire("origin"), breaker.protect(timeout(call(i)))))
}

/** Turns the library's telemetry off: its metrics and every span. */
const off = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  self.pipe(Effect.provideService(Telemetry.MetricsEnabled, false), Effect.withTracerEnabled(false))

/** One round: `ops` operations in one fiber, the whole loop under `wrap`; ns per operation. */
const round = async (
  op: (i: number) => Effect.Effect<unknown, unknown, never>,
  ops: number,
  wrap: <A, E>(self: Effect.Effect<A, E>) => Effect.Effect<A, E> = (self) => self
): Promise<number> => {
  const loop = wrap(Effect.gen(function*() {
    for (let i = 0; i < ops; i++) yield* Effect.exit(op(i))
  }))
  const start = process.hrtime.bigint()
  await Effect.runPromise(loop)
  return Number(process.hrtime.bigint() - start) / ops
}

/** An in-process transport: every request is answered 200 at once (Effect's `HttpClient.make`, no socket). */
const transport = HttpClient.make((request) =>
  Effect.succeed(HttpClientResponse.fromWeb(request, new Response(null, { status: 200 })))
)
const client = Effect.runSync(
  Scope.provide(scope)(ResilientHttpClient.make({
    name: "bench",
    retry: { maxAttempts: 3 },
    breaker: { trip: CircuitBreaker.consecutive(5), openFor: "10 seconds" }
  })).pipe(Effect.provideService(HttpClient.HttpClient, transport))
)
const get = HttpClientRequest.get("http://127.0.0.1:8080/orders")
const request = () =>
  client.execute(get).pipe(Effect.provideService(HttpClient.TracerDisabledWhen, () => true), Effect.scoped)

/** The library's event path (internal/trace.ts): the current span, the clock if timing is on, `span.event`. */
const event = Effect.withFiber((fiber) => {
  const span = Context.getOrUndefined(fiber.context, Tracer.ParentSpan)
  if (span !== undefined && span._tag === "Span") {
    const time = fiber.getRef(References.TracerTimingEnabled)
      ? fiber.getRef(Clock.Clock).currentTimeNanosUnsafe()
      : BigInt(0)
    span.event("Bench.decision", time, { reason: "bench" })
  }
  return Effect.void
})
const inSpan = <A, E>(self: Effect.Effect<A, E>) => Effect.withSpan(self, "Bench.round")
/** A span as the library makes them: an attribute, no stack trace; and one with Effect's default stack trace. */
const span = Effect.void.pipe(
  Effect.withSpan("Bench.span", { attributes: { "http.request.method": "GET" } }, { captureStackTrace: false })
)
const spanWithStack = Effect.void.pipe(Effect.withSpan("Bench.span", { attributes: { "http.request.method": "GET" } }))
/** A histogram as the library's are made: seconds, OpenTelemetry's 16 boundaries for HTTP durations. */
const histogram = Metric.histogram("bench_telemetry_sample_seconds", {
  boundaries: [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60]
})
const sample = Metric.update(histogram, 0.02)
/** A library counter moved by 0 (its count stays), by the path every library update takes (the switch's check). */
const libraryUpdate = Metric.update(Retry.retriesTotal, 0)

const names = {
  pipelineDefault: "pipeline, telemetry as shipped",
  pipelineOff: "pipeline, library telemetry off",
  pipelineBefore: "pipeline before issue 33 (--before)",
  clientDefault: "ResilientHttpClient GET, telemetry as shipped",
  clientOff: "ResilientHttpClient GET, library telemetry off",
  floor: "Effect.void (the micro-cases' floor)",
  span: "a span (Effect.withSpan, native tracer, no stack trace)",
  spanWithStack: "a span with Effect's default stack trace",
  spanOff: "a span, tracer disabled (withTracerEnabled(false))",
  event: "an event on the current span",
  sample: "a histogram sample (Metric.update, 16 buckets)",
  update: "a library counter update",
  updateOff: "a library counter update, MetricsEnabled false"
}

/**
 * Loads `--before <dir>`'s modules (a built dist/ of the library), if given; by default the build
 * `bash bench/before.sh` makes of the last commit before issue 33, when it was made.
 */
const before = async (): Promise<Modules | undefined> => {
  const built = fileURLToPath(new URL("../.before/dfe94eb/dist/", import.meta.url))
  const dir = option("before", existsSync(built) ? built : "")
  if (dir === "") return undefined
  const load = async (name: string) => await import(new URL(`${name}.js`, `file://${dir.replace(/\/?$/, "/")}`).href)
  return {
    Backoff: await load("Backoff"),
    CircuitBreaker: await load("CircuitBreaker"),
    Deadline: await load("Deadline"),
    RateLimiter: await load("RateLimiter"),
    RateLimiterStore: await load("RateLimiterStore"),
    Retry: await load("Retry")
  }
}

export const suite: Suite = {
  name: "telemetry",
  run: async () => {
    const ops = 5_000
    const pipeline = pipelineOf({ Backoff, CircuitBreaker, Deadline, RateLimiter, RateLimiterStore, Retry })
    const old = await before()
    const oldPipeline = old === undefined ? undefined : pipelineOf(old)
    const [pDefault, pOff, cockatiel, pBefore] = await interleaved(
      [
        () => round(pipeline, ops),
        () => round(pipeline, ops, off),
        () => cockatielPipelineRound(ops),
        ...(oldPipeline === undefined ? [] : [() => round(oldPipeline, ops)])
      ],
      9,
      1
    )
    const [cDefault, cOff] = await interleaved([() => round(request, 2_000), () => round(request, 2_000, off)], 9, 1)
    const micro = 20_000
    const [floor, spanNs, spanWithStackNs, spanOffNs, eventNs, sampleNs, updateNs, updateOffNs] = await interleaved(
      [
        () => round(() => Effect.void, micro, inSpan),
        () => round(() => span, micro, inSpan),
        () => round(() => spanWithStack, micro, inSpan),
        () => round(() => span, micro, (self) => Effect.withTracerEnabled(inSpan(self), false)),
        () => round(() => event, micro, inSpan),
        () => round(() => sample, micro, inSpan),
        () => round(() => libraryUpdate, micro, inSpan),
        () =>
          round(
            () => libraryUpdate,
            micro,
            (self) => inSpan(Effect.provideService(self, Telemetry.MetricsEnabled, false))
          )
      ],
      9,
      1
    )
    const f = median(floor!)
    const over = (xs: ReadonlyArray<number>) => Math.max(0, median(xs) - f)
    const reference = pBefore === undefined
      ? {
        case: names.pipelineOff,
        baseline: cockatielPipelineName,
        kind: "time" as const,
        ratio: pairedRatio(pOff!, cockatiel!),
        target: { atMost: 1.05 * 0.12 },
        note: "no --before: the pipeline was 0.12× of cockatiel before issue 33; off within 1.05× of that"
      }
      : {
        case: names.pipelineOff,
        baseline: names.pipelineBefore,
        kind: "time" as const,
        ratio: pairedRatio(pOff!, pBefore),
        target: { atMost: 1.05 }
      }
    return {
      cases: {
        [names.pipelineDefault]: median(pDefault!),
        [names.pipelineOff]: median(pOff!),
        ...(pBefore === undefined ? {} : { [names.pipelineBefore]: median(pBefore) }),
        [cockatielPipelineName]: median(cockatiel!),
        [names.clientDefault]: median(cDefault!),
        [names.clientOff]: median(cOff!),
        [names.floor]: f,
        [names.span]: over(spanNs!),
        [names.spanWithStack]: over(spanWithStackNs!),
        [names.spanOff]: over(spanOffNs!),
        [names.event]: over(eventNs!),
        [names.sample]: over(sampleNs!),
        [names.update]: over(updateNs!),
        [names.updateOff]: over(updateOffNs!)
      },
      comparisons: [
        {
          case: names.pipelineDefault,
          baseline: names.pipelineOff,
          kind: "time",
          ratio: pairedRatio(pDefault!, pOff!),
          target: { atMost: 1.3 }
        },
        reference,
        {
          case: names.pipelineDefault,
          baseline: cockatielPipelineName,
          kind: "time",
          ratio: pairedRatio(pDefault!, cockatiel!)
        },
        {
          case: names.clientDefault,
          baseline: names.clientOff,
          kind: "time",
          ratio: pairedRatio(cDefault!, cOff!),
          target: { atMost: 1.3 }
        }
      ],
      notes: ["micro-cases are ns over the floor (each operation run as its own effect, inside one span)"]
    }
  }
}
