/**
 * An in-memory orders service that honours Idempotency-Key the way `IdempotencyMiddleware` does, for the client's
 * tests: the first request with a key runs; one that arrives while it runs gets the middleware's 409 "in progress"
 * problem with `Retry-After: 1`; one after it completed gets the stored answer. Each handler runs in a fiber of
 * its own (forked in the test's scope), so a client that stops waiting does not stop the work it started.
 * Query parameters: `delayMs` (answer and commit after it), `afterCommitMs` (commit at once, answer after it),
 * `fail=500` (answer 500 and create nothing).
 */
import { Effect, Fiber, Queue } from "effect"
import { HttpClient, HttpClientRequest } from "effect/http"
import { memoryResponse } from "./memoryHttp.js"

const inProgress = JSON.stringify({
  type: "urn:effect-resilience:problem:idempotency-key-in-progress",
  title: "A request with this Idempotency-Key is in progress",
  status: 409
})

export const keyedOrders = Effect.gen(function*() {
  const scope = yield* Effect.scope
  /** The key of each request as it arrives (undefined for none). */
  const arrivals = yield* Queue.unbounded<string | undefined>()
  const created: Array<string> = []
  const records = new Map<string, { done: boolean; body: string }>()

  const handle = (key: string | undefined, params: URLSearchParams) =>
    Effect.gen(function*() {
      const record = key === undefined ? undefined : records.get(key)
      if (record !== undefined && !record.done) {
        return {
          status: 409,
          headers: { "content-type": "application/problem+json", "retry-after": "1" },
          body: inProgress
        }
      }
      if (record !== undefined) return { status: 201, headers: { "idempotent-replayed": "true" }, body: record.body }
      if (params.get("fail") === "500") return { status: 500, headers: {}, body: "failed" }
      const entry = { done: false, body: "" }
      if (key !== undefined) records.set(key, entry)
      const commit = () => {
        const id = `order-${created.length + 1}`
        created.push(id)
        entry.body = JSON.stringify({ id })
      }
      const delay = Number(params.get("delayMs") ?? 0)
      const afterCommit = Number(params.get("afterCommitMs") ?? 0)
      if (delay > 0) yield* Effect.sleep(delay)
      commit()
      if (afterCommit > 0) yield* Effect.sleep(afterCommit)
      entry.done = true
      return { status: 201, headers: {}, body: entry.body }
    })

  const client = HttpClient.make((request, url) =>
    Effect.gen(function*() {
      const key = request.headers["idempotency-key"]
      yield* Queue.offer(arrivals, key)
      const served = yield* Effect.forkIn(handle(key, url.searchParams), scope, { startImmediately: true })
      const { body, headers, status } = yield* Fiber.join(served)
      return memoryResponse(request, status, { headers, body })
    })
  )
  /** The order request of the tests, against `origin`. */
  const order = (origin: string) =>
    HttpClientRequest.post(`${origin}/orders`).pipe(
      HttpClientRequest.bodyJsonUnsafe({ sku: "BOOK-1" })
    )
  return { client, arrivals, created: () => [...created], order }
})
