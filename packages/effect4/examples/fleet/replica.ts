/**
 * One replica of a service that calls a dependency through a fleet circuit breaker
 * (`effect-resilience/CircuitBreaker/Redis`): the process the three-process test
 * (packages/contract/suites/CircuitBreaker.redis.fleet.int.test.ts) starts three times. The Effect 4 edition of
 * the Effect 3 edition's examples/fleet/replica.ts, with the same options, commands and events.
 *
 * `node --experimental-transform-types --import ./scripts/tsResolve.mjs examples/fleet/replica.ts
 *  --redis redis://127.0.0.1:6379 --name orders --dependency http://127.0.0.1:8080/call [--id r1]
 *  [--flush-interval 100] [--timeout 250] [--permits 2] [--open-for 1500] [--half-open-timeout 1500]
 *  [--minimum-calls 20] [--every 5]`
 *
 * Durations are milliseconds; without `--half-open-timeout`, the breaker's default (the `openFor` delay).
 *
 * While its load is on, it starts a call every `--every` ms (each in its own fiber, so slow calls overlap):
 * a GET of the dependency (2xx succeeds, anything else fails with `DependencyFailed`) through the breaker.
 *
 * Commands on stdin, one per line: `load on`, `load off` (acknowledged by a `load` event once no call is
 * running), `isolate`, `reset`, `stats <id>`.
 * Events on stdout, one JSON object per line: `ready`, `transition` (from, to, at), `fallback` (on, at: the
 * replica left or rejoined the fleet), `stats` (id and the counts of outcomes so far: ok, failed — the
 * dependency's failures —, open and halfOpen — `CircuitOpen` while open or half-open —, and other: any
 * other error, which the breaker must never cause).
 */
import { Cause, Data, Effect, Exit, Metric, Queue, Schedule, Stream } from "effect"
import { CircuitBreaker } from "effect-resilience"
import * as CircuitBreakerRedis from "effect-resilience/CircuitBreaker/Redis"
import { createInterface } from "node:readline"
import { parseReplicaArgs } from "../../../../examples/fleet/args.js"

const args = parseReplicaArgs()

class DependencyFailed extends Data.TaggedError("DependencyFailed")<{ readonly status: number }> {}

const emit = (event: Record<string, unknown>) => Effect.sync(() => process.stdout.write(`${JSON.stringify(event)}\n`))

const callDependency = Effect.tryPromise({
  try: (signal) => fetch(args.dependency, { signal }).then(async (r) => (await r.arrayBuffer(), r.status)),
  catch: () => new DependencyFailed({ status: 0 })
}).pipe(Effect.filterOrFail((status) => status >= 200 && status < 300, (status) => new DependencyFailed({ status })))

const counts = { ok: 0, failed: 0, open: 0, halfOpen: 0, other: 0, otherSample: "" }

const main = Effect.gen(function*() {
  const breaker = yield* CircuitBreakerRedis.make({
    trip: CircuitBreaker.failureRate({
      threshold: 0.5,
      minimumCalls: args.minimumCalls,
      window: { duration: "10 seconds" }
    }),
    openFor: args.openFor,
    halfOpenPermits: args.permits,
    ...(args.halfOpenTimeout === undefined ? {} : { halfOpenTimeout: args.halfOpenTimeout }),
    name: args.name,
    redis: { url: args.redisUrl },
    flushInterval: args.flushInterval,
    timeout: args.timeout
  })
  yield* breaker.changes.pipe(
    Stream.runForEach((t) => emit({ event: "transition", from: t.from, to: t.to, at: t.at })),
    Effect.forkScoped
  )
  // the fallback gauge, watched: one event per change
  const gauge = CircuitBreakerRedis.fleetFallbackGauge.pipe(Metric.withAttributes({ breaker: args.name }))
  let fallback = (yield* Metric.value(gauge)).value
  yield* emit({ event: "fallback", on: fallback === 1, at: Date.now() })
  yield* Metric.value(gauge).pipe(
    Effect.flatMap(({ value }) =>
      value === fallback ? Effect.void : Effect.andThen(
        Effect.sync(() => (fallback = value)),
        emit({ event: "fallback", on: value === 1, at: Date.now() })
      )
    ),
    Effect.andThen(Effect.sleep("5 millis")),
    Effect.forever,
    Effect.forkScoped
  )

  const one = Effect.gen(function*() {
    const state = yield* breaker.state
    const exit = yield* Effect.exit(breaker.protect(callDependency))
    if (Exit.isSuccess(exit)) return void counts.ok++
    // a Cause is a flat list of reasons in Effect 4: the call's one failure, if that is all it holds
    const failure = exit.cause.reasons.length === 1 && Cause.isFailReason(exit.cause.reasons[0]!)
      ? exit.cause.reasons[0].error
      : undefined
    if (failure instanceof DependencyFailed) return void counts.failed++
    if (failure instanceof CircuitBreaker.CircuitOpen) {
      if (state === "half-open") counts.halfOpen++
      else counts.open++
      return
    }
    counts.other++
    counts.otherSample = Cause.pretty(exit.cause)
  })

  let load = false
  let inFlight = 0
  const tracked = Effect.ensuring(one, Effect.sync(() => inFlight--))
  yield* Effect.suspend(() => {
    if (!load) return Effect.void
    inFlight++ // counted before the fiber starts, so `load off` waits for it
    return Effect.asVoid(Effect.forkChild(tracked))
  }).pipe(
    Effect.andThen(Effect.sleep(args.every)),
    Effect.forever,
    Effect.forkScoped
  )

  const lines = yield* Effect.acquireRelease(
    Effect.sync(() => createInterface({ input: process.stdin })),
    (rl) => Effect.sync(() => rl.close())
  )
  const commands = Stream.callback<string>((queue) =>
    Effect.sync(() => {
      lines.on("line", (line) => Queue.offerUnsafe(queue, line.trim()))
      lines.on("close", () => Queue.endUnsafe(queue))
    })
  )
  yield* emit({ event: "ready", pid: process.pid })
  yield* Stream.runForEach(commands, (line) => {
    const [command, arg] = line.split(/\s+/)
    switch (command) {
      case "load":
        // acknowledged once no call started before the command is still running
        return Effect.andThen(
          Effect.sync(() => (load = arg === "on")),
          Effect.andThen(
            Effect.sync(() => inFlight === 0).pipe(
              Effect.repeat({ until: (idle) => idle || load, schedule: Schedule.spaced("1 millis") })
            ),
            Effect.suspend(() => emit({ event: "load", on: load }))
          )
        )
      case "isolate":
        return breaker.isolate
      case "reset":
        return breaker.reset
      case "stats":
        return emit({ event: "stats", id: arg, ...counts })
      default:
        return emit({ event: "error", message: `unknown command ${line}` })
    }
  })
})

// stdin closed: the scope closes, the breaker flushes its last counts and disconnects
Effect.runPromise(Effect.scoped(main)).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
