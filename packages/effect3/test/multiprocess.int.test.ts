import { expect, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { randomUUID } from "node:crypto"
import { eventually } from "./support/eventually.js"
import { type Answer, orderCount, postOrder, request, startServe } from "./support/serveProcess.js"
import { describeWith } from "./support/services.js"

// Several `npm run serve` processes sharing one store: the proof that claims and buckets are really shared.
// Needs the machine's PostgreSQL and Redis (DATABASE_URL, REDIS_URL); in CI a missing service fails here.

const startMany = (n: number, args: ReadonlyArray<string>) =>
  Effect.all(Array.from({ length: n }, () => startServe(args)), { concurrency: n })

const totalCount = (urls: ReadonlyArray<string>) =>
  Effect.map(
    Effect.forEach(urls, (url) => orderCount(url), { concurrency: urls.length }),
    (counts) => counts.reduce((a, b) => a + b, 0)
  )

for (const store of ["redis", "postgres"] as const) {
  describeWith([store], `three serve processes sharing ${store}`, () => {
    it.live(
      "100 concurrent POSTs with one key, spread across them, create exactly one order",
      () =>
        Effect.gen(function*() {
          const servers = yield* startMany(3, ["--store", store])
          const urls = servers.map((s) => s.url)
          const before = yield* totalCount(urls)
          const key = `mp-${randomUUID()}`
          const answers = yield* Effect.forEach(
            Array.from({ length: 100 }, (_, i) => urls[i % 3]!),
            (url) => postOrder(url, { key, body: { sku: "BOOK-1", qty: 1 } }),
            { concurrency: "unbounded" }
          )
          expect((yield* totalCount(urls)) - before).toBe(1)
          const statuses = new Set(answers.map((a) => a.status))
          for (const status of statuses) expect([201, 409]).toContain(status)
          const created = answers.filter((a) => a.status === 201)
          expect(created.length).toBeGreaterThanOrEqual(1)
          expect(new Set(created.map((a) => JSON.parse(a.body).id)).size).toBe(1)
        }).pipe(Effect.scoped),
      60_000
    )

    it.live(
      "a process killed while holding a claim: after the lease, a retry elsewhere completes exactly once",
      () =>
        Effect.gen(function*() {
          const servers = yield* startMany(3, ["--store", store, "--lease", "1500"])
          const key = `kill-${randomUUID()}`
          const order = { key, query: "?delayMs=4000", body: { sku: "BOOK-2" } }
          const before = yield* totalCount(servers.map((s) => s.url))
          // the same request to two processes at once: one claims the key (and sleeps 4 s), the other gets 409
          const [first, second] = yield* Effect.all([
            Effect.fork(postOrder(servers[0]!.url, order)),
            Effect.fork(postOrder(servers[1]!.url, order))
          ])
          const loser = yield* Effect.raceFirst(
            Effect.as(Effect.filterOrFail(Fiber.join(first), (a) => a.status === 409), 0),
            Effect.as(Effect.filterOrFail(Fiber.join(second), (a) => a.status === 409), 1)
          )
          const owner = servers[1 - loser]!
          const b = servers[loser]!
          const c = servers[2]!
          owner.child.kill("SIGKILL")
          yield* Effect.exit(Fiber.join(loser === 0 ? second : first))
          // retry on B until the dead owner's lease has run out and B takes the claim over
          let retry: Answer | undefined
          yield* eventually(
            Effect.map(postOrder(b.url, order), (answer) => (retry = answer).status !== 409),
            { every: "100 millis" }
          )
          expect(retry?.status).toBe(201)
          const replay = yield* postOrder(c.url, order)
          expect(replay.status).toBe(201)
          expect(replay.body).toBe(retry?.body)
          expect(replay.headers.get("idempotent-replayed")).toBe("true")
          expect((yield* totalCount([b.url, c.url])) - before).toBe(1)
        }).pipe(Effect.scoped),
      60_000
    )
  })
}

// the Redis script and the SQL upsert: one atomic decision per request, whichever process makes it
for (const store of ["redis", "postgres"] as const) {
  describeWith([store], `three serve processes sharing a token bucket in ${store}`, () => {
    it.live(
      "admit at most capacity + rate × elapsed, and all of it while they are kept busy",
      () =>
        Effect.gen(function*() {
          const capacity = 50
          const rate = 10
          const client = `bucket-${randomUUID()}` // a fresh bucket: a new customer, authenticated by its API key
          const servers = yield* startMany(3, [
            "--store",
            store,
            "--rate",
            `${capacity}:${rate}`,
            "--api-keys",
            `${client}=${client}`
          ])
          const urls = servers.map((s) => s.url)
          // Every decision happens between a request's sending and its answer, so the times the client
          // sees bound the bucket's own: its first decision came no later than the first answer, the last
          // admission no later than its answer, and a denial no earlier than its request was sent.
          const started = performance.now()
          const until = started + 3_000
          let admitted = 0
          let denied = 0
          let firstAnswer = Infinity
          let lastAdmittedAnswer = -Infinity
          let lastDeniedSent = -Infinity
          const worker = (url: string) =>
            Effect.gen(function*() {
              for (let i = 0; i < 2_000 && performance.now() < until; i++) {
                const sent = performance.now()
                const answer = yield* request(`${url}/orders`, {
                  method: "POST",
                  headers: { "content-type": "application/json", "x-api-key": client, "idempotency-key": randomUUID() },
                  body: "{}"
                })
                const answered = performance.now()
                firstAnswer = Math.min(firstAnswer, answered)
                if (answer.status === 201) {
                  admitted++
                  lastAdmittedAnswer = Math.max(lastAdmittedAnswer, answered)
                } else if (answer.status === 429) {
                  denied++
                  lastDeniedSent = Math.max(lastDeniedSent, sent)
                } else throw new Error(`unexpected status ${answer.status}: ${answer.body.slice(0, 300)}`)
              }
            })
          yield* Effect.forEach(Array.from({ length: 24 }, (_, i) => urls[i % 3]!), worker, {
            concurrency: "unbounded"
          })
          expect(denied).toBeGreaterThan(0)
          // never more than the bucket holds plus what it refilled (one token of rounding)
          expect(admitted).toBeLessThanOrEqual(capacity + rate * (lastAdmittedAnswer - started) / 1000 + 1)
          // 24 clients keep asking, so the bucket never idles the 5 s it takes to fill up and lose refills:
          // at the last denial every token made since the first decision had been handed out
          expect(admitted).toBeGreaterThanOrEqual(capacity + rate * (lastDeniedSent - firstAnswer) / 1000 - 1)
        }).pipe(Effect.scoped),
      60_000
    )
  })
}
