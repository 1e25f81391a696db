/**
 * The five policies, built only from the library's public modules: each step adds one piece to the one before.
 *
 * | policy     | client                                                                         | server admission |
 * |------------|--------------------------------------------------------------------------------|------------------|
 * | `naive`    | 3 attempts, a fixed 100 ms between them, no budget                             | none: all queue  |
 * | `jitter`   | 3 attempts, full jitter (base 100 ms, cap 2 s)                                 | none             |
 * | `budget`   | + one `RetryBudget` per client (10 tokens, 0.1 per success)                    | none             |
 * | `throttle` | + one `AdaptiveThrottle` per client (k = 2, 1.5 s; only a success is accepted) | none             |
 * | `full`     | + retries sent as `sheddable`, first attempts as `default`                     | `AdaptiveLimiter` with shares, no queue: a refusal is a 503 with `Retry-After` |
 *
 * Every attempt has a client-side timeout (`Deadline.timeout`). A timeout and a 503 are `Retryable` (the 503
 * with the server's `Retry-After`); a call the throttle rejected locally is not retried: it was never sent, and
 * retrying it would only ask the throttle again.
 */
import { Data, Deferred, Duration, Effect, Random } from "effect"
import * as AdaptiveLimiter from "effect-resilience/AdaptiveLimiter"
import * as AdaptiveThrottle from "effect-resilience/AdaptiveThrottle"
import * as Backoff from "effect-resilience/Backoff"
import * as Criticality from "effect-resilience/Criticality"
import * as Deadline from "effect-resilience/Deadline"
import * as Failure from "effect-resilience/Failure"
import * as Retry from "effect-resilience/Retry"
import * as RetryBudget from "effect-resilience/RetryBudget"
import { type Policy, type Stats } from "../../../../examples/storm/figures.js"
import { Resource, type Scenario } from "../../../../examples/storm/model.js"
import type { Simulator } from "./engine.js"

export { emptyStats, policies, type Policy, type Stats } from "../../../../examples/storm/figures.js"

/** A 503: the server refused the request before doing any work. */
export class Overloaded extends Data.TaggedError("Overloaded")<{ readonly retryAfterMs: number }> {}

/** The server's admission limiter in `full`: see docs/overload.md, "The retry storm", for the choice. */
export const admissionOptions = (scenario: Scenario): AdaptiveLimiter.Options => ({
  algorithm: AdaptiveLimiter.windowedVegas(),
  minLimit: 1,
  maxLimit: 10 * scenario.concurrency,
  initialLimit: scenario.concurrency,
  maxQueue: 0,
  shares: { default: 0.9, sheddable: 0.7 }
})

/**
 * The server's endpoint as a client calls it: the request reaches the server, which answers when its
 * resource has served it (or at once with a 503 in `full`). The request's criticality travels with it,
 * as it would in the `Request-Criticality` header.
 */
const makeServer = (sim: Simulator, scenario: Scenario, policy: Policy) => {
  const resource = new Resource(sim, scenario)
  if (policy !== "full") {
    // no admission: everything queues; a client that gives up leaves its request in the queue
    return Effect.succeed(Effect.async<void, Overloaded>((resume) => {
      const job = resource.submit(() => resume(Effect.void))
      return Effect.sync(() => {
        job.done = undefined
      })
    }))
  }
  const refused = new Overloaded({ retryAfterMs: scenario.retryAfterMs })
  const work = Effect.async<void>((resume) => {
    resource.submit(() => resume(Effect.void))
  })
  return Effect.map(AdaptiveLimiter.make(admissionOptions(scenario)), (limiter) => {
    const handle = (level: Criticality.Criticality) =>
      limiter.protect(work).pipe(
        Criticality.withCriticality(level),
        Effect.catchTag("LimitExceeded", () => Effect.fail(refused))
      )
    // the handler runs in a fiber of its own, as a server's would: a client that stops waiting does not stop it
    return Effect.flatMap(
      Criticality.current,
      (level) =>
        Effect.flatMap(Deferred.make<void, Overloaded>(), (answer) =>
          Effect.zipRight(
            Effect.forkDaemon(Effect.intoDeferred(handle(level), answer)),
            Deferred.await(answer)
          ))
    )
  })
}

/** One client's logical request under `policy`: attempts, retries and the counting. */
const makeClient = (
  sim: Simulator,
  scenario: Scenario,
  policy: Policy,
  send: Effect.Effect<void, Overloaded>,
  stats: Stats
) =>
  Effect.gen(function*() {
    const budget = policy === "naive" || policy === "jitter"
      ? undefined
      : RetryBudget.unsafeMake({ maxTokens: 10, tokenRatio: 0.1 })
    const throttle = policy === "throttle" || policy === "full"
      ? yield* AdaptiveThrottle.make({
        k: 2,
        window: "1500 millis",
        ...(scenario.maxRejectionRate === undefined ? {} : { maxRejectionRate: scenario.maxRejectionRate })
      })
      : undefined
    const schedule = policy === "naive"
      ? Backoff.exponential({ base: "100 millis", cap: "100 millis" })
      : Backoff.fullJitter({ base: "100 millis", cap: "2 seconds" })
    const retry = Retry.retry(
      budget === undefined ? { schedule, maxAttempts: 3 } : { schedule, maxAttempts: 3, budget }
    )

    const sent = Effect.suspend(() => {
      stats.attempts++
      return send
    }).pipe(Deadline.timeout(Duration.millis(scenario.attemptTimeoutMs)))
    const guarded = throttle === undefined ? sent : throttle.protect(sent, "server")
    const first = policy === "full" ? guarded.pipe(Criticality.withCriticality("default")) : guarded
    const again = policy === "full" ? guarded.pipe(Criticality.withCriticality("sheddable")) : guarded

    return Effect.suspend(() => {
      const start = sim.now
      let attempt = 0
      stats.logical++
      return Effect.suspend(() => ++attempt === 1 ? first : again).pipe(
        Failure.classify((e) =>
          e._tag === "LocallyRejected"
            ? Failure.fatal(e)
            : Failure.retryable(e, e._tag === "Overloaded" ? Duration.millis(e.retryAfterMs) : undefined)
        ),
        retry,
        Effect.match({
          onFailure: () => {},
          onSuccess: () => {
            stats.successes++
            stats.latencies.push(sim.now - start)
            const bucket = Math.floor(sim.now / scenario.bucketMs)
            if (bucket < stats.buckets.length) stats.buckets[bucket]!++
          }
        })
      )
    })
  })

/**
 * The whole run: the server, then `clients` clients each sending `offered / clients` logical requests per
 * second, evenly spaced from a random phase, each arrival moved by a seeded jitter.
 */
export const program = (sim: Simulator, scenario: Scenario, policy: Policy, offered: number, stats: Stats) =>
  Effect.gen(function*() {
    const send = yield* makeServer(sim, scenario, policy)
    const interval = 1_000 * scenario.clients / offered
    for (let c = 0; c < scenario.clients; c++) {
      const logical = yield* makeClient(sim, scenario, policy, send, stats)
      const phase = (yield* Random.next) * interval
      const arrivals = Effect.gen(function*() {
        for (let k = 0;; k++) {
          const jitter = ((yield* Random.next) * 2 - 1) * scenario.arrivalJitter * interval
          const wait = phase + k * interval + jitter - sim.now
          if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
          yield* Effect.forkDaemon(logical)
        }
      })
      yield* Effect.forkDaemon(arrivals)
    }
    // not Effect.never: it holds a real interval open, which would keep the process alive after the run
    yield* Effect.sleep(Duration.millis(scenario.durationMs))
  }).pipe(Effect.scoped)
