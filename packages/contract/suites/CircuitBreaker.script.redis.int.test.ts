import { deleteKeys, describeRedis, fc, REDIS_URL, uniquePrefix } from "#edition"
import type * as Fleet from "@effect-resilience/core/breakerFleet"
import * as Model from "@effect-resilience/core/breakerFleetModel"
import * as Protocol from "@effect-resilience/core/breakerFleetProtocol"
import { fleetScriptSource } from "@effect-resilience/core/breakerFleetScript"
import type { Trip } from "@effect-resilience/core/breakerWindow"
import { afterAll, expect, it } from "@effect/vitest"
import { Redis } from "ioredis"

// The fleet breaker's Lua script against its TypeScript reference, core/breakerFleetModel.ts `step`: random
// histories of calls, each encoded by the protocol (core/breakerFleetProtocol.ts) and run on both, every reply
// compared. Script, model and protocol are the core's, and nothing here is an edition's (the script is run as it
// is, through ioredis): it needs a Redis, which the core's own tests may not use, so the contract runs it.

const prefix = uniquePrefix("cbmodel")
const shared = new Redis(REDIS_URL, { lazyConnect: true })
shared.on("error", () => {})

/** The script, sent by its SHA (ioredis loads it on NOSCRIPT). */
const fleet = (keys: ReadonlyArray<string>, argv: ReadonlyArray<string>): Promise<unknown> =>
  (shared as unknown as { fleet: (...args: Array<string>) => Promise<unknown> }).fleet(...keys, ...argv)
shared.defineCommand("fleet", { numberOfKeys: 2, lua: fleetScriptSource })

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
const compare = async (policy: Trip, sample: Sample, start: number, steps: ReadonlyArray<Step>) => {
  // the breaker's keys share one hash tag; the script is given its channel's name
  const base = `${prefix}{${fresh()}}`
  const keys = { state: `${base}:s`, window: `${base}:w`, channel: `${base}:events` }
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
    const actual = await fleet([keys.state, keys.window], Protocol.encode(call, keys.channel))
    const { published: _, ...expected } = Model.step(model, call)
    expect(Protocol.decodeReply(actual)).toEqual(expected)
  }
  return model
}

/** A property over `arbitraries`, each sample run by `body` (a promise), `numRuns` times. */
const property = <T>(
  name: string,
  arbitraries: { readonly [K in keyof T]: fc.Arbitrary<T[K]> },
  body: (values: T) => Promise<unknown>
) =>
  it(name, { timeout: 60_000 }, () =>
    fc.assert(
      fc.asyncProperty(fc.record(arbitraries) as unknown as fc.Arbitrary<T>, async (values) => {
        await body(values)
      }),
      { numRuns: 150 }
    ))

describeRedis("CircuitBreaker/Redis script and model", () => {
  afterAll(async () => {
    shared.disconnect()
    await deleteKeys(prefix)
  })

  property(
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
    ({ sample, start, steps, trip }) => compare(trips[trip]!, sample, start, steps)
  )

  property(
    "half-open histories too: permits, leases, deadlines, late reports, samples judged on a failure rate",
    {
      sample: sampleArb,
      start: fc.integer({ min: 0, max: 2_000_000_000_000 }),
      steps: fc.array(stepArb(["flush", "acquire", "acquire", "acquire", "release", "success", "failure"]), {
        minLength: 1,
        maxLength: 40
      })
    },
    ({ sample, start, steps }) => {
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
      return compare({ _tag: "Consecutive", failures: 1 }, sample, start, [open, ...steps])
    }
  )
})
