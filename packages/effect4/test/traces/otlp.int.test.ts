/**
 * Issue 33 item 5 (Effect 4 only): traces on the wire. Effect's `OtlpTracer`, with the JSON serialization
 * (`OtlpSerialization.layerJson`: OTLP/HTTP, `application/json`, the OTLP/JSON mapping of the protobuf messages),
 * exports the spans of a retried request to a receiver of the test's own: a node:http server on 127.0.0.1 that
 * also plays the origin (503, 503, then 200). The test reads the tree back from what was exported: one request
 * span, one attempt span per attempt with its resend count, the transport's span under each, and the retry's
 * decisions as events. Real sockets and real time: the test waits for the export, never a fixed time.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { HttpClientRequest } from "effect/http"
import { OtlpSerialization, OtlpTracer } from "effect/observability"
import { createServer, type IncomingMessage, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Deadline, ResilientHttpClient } from "../../src/index.js"

/** An OTLP/JSON `AnyValue`, as Effect writes it. */
interface AnyValue {
  readonly stringValue?: string
  readonly intValue?: number | string
  readonly boolValue?: boolean
  readonly doubleValue?: number
}
interface KeyValue {
  readonly key: string
  readonly value: AnyValue
}
interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly attributes: ReadonlyArray<KeyValue>
  readonly events?: ReadonlyArray<{ readonly name: string; readonly attributes: ReadonlyArray<KeyValue> }>
}
interface ExportTraceServiceRequest {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<KeyValue> }
    readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

const valueOf = (v: AnyValue): unknown =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : undefined) ?? v.boolValue ?? v.doubleValue

const attributes = (kvs: ReadonlyArray<KeyValue> | undefined) =>
  Object.fromEntries((kvs ?? []).map(({ key, value }) => [key, valueOf(value)]))

const bodyOf = (request: IncomingMessage) =>
  new Promise<Buffer>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

/** The receiver (POST /v1/traces) and the origin (GET /orders: 503, 503, 200), on one port. */
const start = () =>
  Effect.acquireRelease(
    Effect.callback<{ server: Server; base: string; exports: Array<unknown>; traceparents: Array<string> }>(
      (resume) => {
        const exports: Array<unknown> = []
        const traceparents: Array<string> = []
        let orders = 0
        const server = createServer((request, response) => {
          if (request.method === "POST" && request.url === "/v1/traces") {
            void bodyOf(request).then((body) => {
              // Effect's JSON serialization; a protobuf body (layerProtobuf) would not parse, and is refused
              if (request.headers["content-type"] !== "application/json") {
                response.writeHead(415).end()
                return
              }
              exports.push(JSON.parse(body.toString("utf8")))
              response.writeHead(200, { "content-type": "application/json" }).end("{}")
            })
            return
          }
          if (request.url === "/orders") {
            traceparents.push(String(request.headers.traceparent))
            const status = ++orders < 3 ? 503 : 200
            response.writeHead(status, { "content-type": "text/plain" }).end(status === 200 ? "ok" : "busy")
            return
          }
          response.writeHead(404).end()
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resume(Effect.succeed({ server, base: `http://127.0.0.1:${port}`, exports, traceparents }))
        })
      }
    ),
    ({ server }) => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
  )

/** Waits, in real time, until `done` holds (the exporter posts in the background), for at most `tries` polls. */
const waitFor = (done: () => boolean, tries = 200) =>
  Effect.gen(function*() {
    for (let i = 0; i < tries && !done(); i++) yield* Effect.sleep("25 millis")
    expect(done()).toBe(true)
  })

describe("traces on the wire (OTLP/HTTP JSON)", () => {
  it.live("a retried request exports one request span, one attempt span per attempt and the backoffs", () =>
    Effect.gen(function*() {
      const { base, exports, traceparents } = yield* start()
      const tracing = OtlpTracer.layer({
        url: `${base}/v1/traces`,
        resource: { serviceName: "effect-resilience-traces" },
        exportInterval: "50 millis"
      }).pipe(Layer.provide(OtlpSerialization.layerJson))
      // the app: a client that retries the 503s after 20 ms, under a 10 s deadline, in a span of the caller's
      const response = yield* Effect.gen(function*() {
        const client = yield* ResilientHttpClient.make({
          name: "otlp",
          retry: { schedule: Schedule.spaced("20 millis"), maxAttempts: 3 }
        })
        return yield* client.execute(HttpClientRequest.get(`${base}/orders`)).pipe(
          Deadline.within("10 seconds"),
          Effect.withSpan("checkout")
        )
      }).pipe(Effect.provide(tracing)) // the layer's end flushes what is left
      expect(response.status).toBe(200)

      const spans = () =>
        (exports as ReadonlyArray<ExportTraceServiceRequest>).flatMap((e) =>
          e.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))
        )
      yield* waitFor(() => spans().some((s) => s.name === "checkout"))
      const all = spans()
      const resource = attributes((exports[0] as ExportTraceServiceRequest).resourceSpans[0]!.resource.attributes)
      expect(resource["service.name"]).toBe("effect-resilience-traces")

      const checkout = all.find((s) => s.name === "checkout")!
      const requests = all.filter((s) => s.name === "ResilientHttpClient.request")
      expect(requests).toHaveLength(1)
      const request = requests[0]!
      expect(request.parentSpanId).toBe(checkout.spanId)
      expect(all.every((s) => s.traceId === checkout.traceId)).toBe(true)
      expect(attributes(request.attributes)).toMatchObject({
        "http.request.method": "GET",
        client: "otlp",
        origin: base,
        "http.response.status_code": 200
      })

      // one child per attempt, the resends counted 1..n (absent on the first send, as OpenTelemetry says)
      const attempts = all.filter((s) => s.parentSpanId === request.spanId)
      expect(attempts.map((s) => s.name)).toEqual(Array(3).fill("ResilientHttpClient.attempt"))
      const attemptAttributes = attempts.map((s) => attributes(s.attributes))
      expect(attemptAttributes.map((a) => a["http.request.resend_count"] ?? 0)).toEqual([0, 1, 2])
      expect(attemptAttributes.map((a) => a["error.type"])).toEqual(["503", "503", undefined])
      expect(attemptAttributes.map((a) => a["http.response.status_code"])).toEqual([503, 503, 200])
      for (const a of attemptAttributes) {
        expect(a["deadline.remaining_ms"]).toBeGreaterThan(0)
        expect(a["deadline.remaining_ms"]).toBeLessThanOrEqual(10_000)
      }

      // the transport's client span (SpanKind CLIENT = 3) under each attempt, and its id on the wire
      const transports = attempts.map((attempt) => all.filter((s) => s.parentSpanId === attempt.spanId))
      expect(transports.map((t) => t.map((s) => [s.name, s.kind]))).toEqual(Array(3).fill([["GET", 3]]))
      expect(traceparents).toEqual(transports.map(([t]) => `00-${t!.traceId}-${t!.spanId}-01`))

      // the decisions: a backoff event per retry on the request's span
      expect((request.events ?? []).map((e) => ({ name: e.name, ...attributes(e.attributes) }))).toEqual([1, 2].map((
        attempt
      ) => ({
        name: "Retry.backoff",
        "retry.attempt": attempt,
        "retry.delay_ms": 20,
        "retry.delay_source": "schedule",
        "error.type": "503"
      })))
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))
})
