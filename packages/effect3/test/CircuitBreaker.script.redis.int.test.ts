import type * as Fleet from "@effect-resilience/core/breakerFleet"
import * as Model from "@effect-resilience/core/breakerFleetModel"
import * as Protocol from "@effect-resilience/core/breakerFleetProtocol"
import type { Trip } from "@effect-resilience/core/breakerWindow"
import { afterAll, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { Redis } from "ioredis"
import { keysOf } from "../src/internal/circuitBreaker/redis.js"
import { fleetScript } from "../src/internal/circuitBreaker/redisScript.js"
import * as redisClient from "../src/internal/redis/client.js"
import { deleteKeys, REDIS_URL, uniquePrefix } from "./support/redis.js"
import { describeRedis } from "./support/services.js"

// The fleet breaker's Lua script against its TypeScript reference, core/breakerFleetModel.ts `step`: random
// histories of calls, each encoded by the protocol (core/breakerFleetProtocol.ts) and run on both, every reply
// compared.

const prefix = uniquePrefix("cbmodel")
const shared = new Redis(REDIS_URL, { lazyConnect: true })
shared.on("error", () => {})

let counter = 0
const fresh = () => `model-${process.pid}-${++counter}`

const trips: ReadonlyArray<Trip> = [
  { _tag: "Consecutive", failures: 3 },
  {
    _tag: "FailureRate",
    threshold: 0.5,
    minimumCalls: 5,
    window: { _tag: "Count", calls: 10 },
    slowCall: { millis: 100, rateThreshold: 0.6 }
  },
  {
    _tag: "FailureRate",
    threshold: 0.4,
    minimumCalls: 4,
    window: { _tag: "Time", millis: 1000, buckets: 4 },
    slowCall: undefined
  }
]

const deltasArb = fc.integer({ min: 0, max: 6 }).chain((calls) =>
  fc.integer({ min: 0, max: calls }).chain((failures) =>
    fc.record({
      calls: fc.constant(calls),
      failures: fc.constant(failures),
      slow: fc.integer({ min: 0, max: calls }),
      // a success among the calls iff not all failed; with none, every failure is after the last success
      trailing: calls > failures ? fc.integer({ min: 0, max: failures }) : fc.constant(failures),
      sawSuccess: fc.constant(calls > failures),
      asked: fc.constantFrom(0, 0, 700)
    })
  )
)

type Step = {
  readonly op: Protocol.Op
  readonly delay: number
  readonly epoch: "current" | "stale" | "unknown"
  readonly ownInc: boolean
  readonly ownSince: boolean
  readonly trialTimeout: number
  readonly deltas: Fleet.Deltas
}

const stepArb = (ops: ReadonlyArray<Protocol.Op>) =>
  fc.record<Step>({
    op: fc.constantFrom(...ops),
    // 250, 500 and 1000 hit the boundaries: a bucket, openFor, a trial's lease, a half-open timeout
    delay: fc.oneof(fc.constantFrom(0, 250, 300, 500, 1000), fc.integer({ min: 0, max: 700 })),
    epoch: fc.constantFrom("current", "current", "current", "stale", "unknown"),
    // the incarnation the caller's epoch belongs to: the state's, or another (the state was lost)
    ownInc: fc.constantFrom(true, true, true, false),
    // when the caller's period began: the state's, or another time (a period of the same number, set back)
    ownSince: fc.constantFrom(true, true, true, false),
    // the half-open period's timeout the caller passes (its option, or its opening's delay)
    trialTimeout: fc.constantFrom(250, 300, 1000),
    deltas: deltasArb
  })

/** How a half-open period is judged: its permits, and `halfOpenFailureRate` (none: the first failure reopens). */
interface Sample {
  readonly permits: number
  readonly failureRate: number | undefined
}

const sampleArb = fc.record<Sample>({
  permits: fc.integer({ min: 1, max: 4 }),
  // rates on the boundaries of 1..4 permits (1/3, 1/2, 2/3...) and one off them
  failureRate: fc.constantFrom(undefined, undefined, 1 / 3, 0.5, 2 / 3, 0.6, 1)
})

/** Runs `steps` on the script and on the model, from `start`, comparing every reply. */
const compare = (policy: Trip, sample: Sample, start: number, steps: ReadonlyArray<Step>) =>
  Effect.gen(function*() {
    const keys = keysOf(prefix, fresh(), policy)
    const model = Model.emptyShared()
    let now = start
    for (const { delay, deltas, epoch, op, ownInc, ownSince, trialTimeout } of steps) {
      now += delay
      const known = epoch === "unknown" ? -1 : epoch === "stale" ? model.epoch - 1 : model.epoch
      const inc = ownInc ? model.inc ?? "" : "elsewhere"
      const since = ownSince ? model.changedAt : model.changedAt - 1
      const call: Protocol.Call = {
        op,
        now,
        epoch: known,
        inc,
        since,
        token: "t0",
        delay: 500,
        asked: deltas.asked,
        trialTimeout,
        permits: sample.permits,
        failureRate: sample.failureRate,
        leaseMillis: 1000,
        trip: policy,
        deltas: { ...deltas }
      }
      const actual = yield* redisClient.runScript(
        shared,
        fleetScript,
        [keys.state, keys.window],
        Protocol.encode(call, keys.channel),
        false,
        5000,
        (reply) => reply,
        (e) => e
      )
      const { published: _, ...expected } = Model.step(model, call)
      expect(Protocol.decodeReply(actual)).toEqual(expected)
    }
    return model
  })

describeRedis("CircuitBreaker/Redis script and model", () => {
  afterAll(async () => {
    shared.disconnect()
    await deleteKeys(prefix)
  })

  it.effect.prop(
    "the script decides exactly as core/breakerFleetModel, call for call",
    {
      trip: fc.integer({ min: 0, max: trips.length - 1 }),
      sample: sampleArb,
      start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
      steps: fc.array(
        stepArb([
          "flush",
          "flush",
          "flush",
          "acquire",
          "acquire",
          "release",
          "success",
          "success",
          "failure",
          "isolate",
          "reset"
        ]),
        { minLength: 1, maxLength: 40 }
      )
    },
    ({ sample, start, steps, trip }) => Effect.asVoid(compare(trips[trip]!, sample, start, steps)),
    { fastCheck: { numRuns: 150 } }
  )

  it.effect.prop(
    "half-open histories too: permits, leases, deadlines, late reports, samples judged on a failure rate",
    {
      sample: sampleArb,
      start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
      steps: fc.array(stepArb(["flush", "acquire", "acquire", "acquire", "release", "success", "failure"]), {
        minLength: 1,
        maxLength: 40
      })
    },
    ({ sample, start, steps }) =>
      Effect.gen(function*() {
        // one failure opens: most histories spend their time open and half-open
        const open: Step = {
          op: "flush",
          delay: 0,
          epoch: "unknown",
          ownInc: true,
          ownSince: true,
          trialTimeout: 300,
          deltas: { calls: 1, failures: 1, slow: 0, trailing: 1, sawSuccess: false, asked: 0 }
        }
        yield* compare({ _tag: "Consecutive", failures: 1 }, sample, start, [open, ...steps])
      }),
    { fastCheck: { numRuns: 150 } }
  )
})
