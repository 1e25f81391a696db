/**
 * `npm run demo` (until the full duplicate-order demo lands): one call to a flaky in-process service,
 * retried with full jitter under a 2-second deadline, with each attempt bounded by its own timeout.
 * The "service" fails with 503s (one with a Retry-After), hangs once past the attempt timeout, then answers.
 */
import { Duration, Effect, Random } from "effect"
import { Backoff, Deadline, Failure, Retry } from "../src/index.js"

const faults = ["503", "hang", "503 + Retry-After: 0.3 s", "ok"] as const

const makeService = () => {
  let calls = 0
  const started = Date.now()
  const log = (msg: string) => Effect.sync(() => console.log(`${String(Date.now() - started).padStart(5)} ms  ${msg}`))
  const call = Effect.suspend(() => {
    const fault = faults[Math.min(calls++, faults.length - 1)]!
    const attempt = calls
    switch (fault) {
      case "503":
        return Effect.zipRight(log(`attempt ${attempt}: 503 Service Unavailable`), Effect.fail(Failure.retryable(503)))
      case "hang":
        return Effect.zipRight(log(`attempt ${attempt}: no answer…`), Effect.never).pipe(
          Effect.onInterrupt(() => log(`attempt ${attempt}: interrupted by its 250 ms timeout`))
        )
      case "503 + Retry-After: 0.3 s":
        return Effect.zipRight(
          log(`attempt ${attempt}: 503 with Retry-After: 0.3 s`),
          Effect.fail(Failure.retryable(503, "300 millis"))
        )
      case "ok":
        return Effect.as(log(`attempt ${attempt}: 200 OK`), { orderId: "A-1001" })
    }
  })
  return { call, log }
}

const program = Effect.gen(function*() {
  const { call, log } = makeService()
  const result = yield* call.pipe(
    Deadline.timeout("250 millis"), // each attempt
    Effect.catchTag("AttemptTimeout", (e) => Effect.fail(Failure.retryable(e))), // a timeout may be retried
    Retry.retry({
      schedule: Backoff.fullJitter({ base: "100 millis", cap: "1 second" }),
      maxAttempts: 6,
      onRetry: (e) => log(`retrying in ${Duration.format(Duration.millis(Math.round(Duration.toMillis(e.delay))))}`)
    }),
    Deadline.within("2 seconds") // the whole operation
  )
  yield* log(`result: ${JSON.stringify(result)}`)
})

Effect.runPromise(program.pipe(Effect.withRandom(Random.make("demo")))).catch((e) => {
  console.error("failed:", e)
  process.exitCode = 1
})
