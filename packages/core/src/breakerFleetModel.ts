/**
 * The fleet breaker's state as the Lua script keeps it in Redis, and the script's semantics as a pure function
 * ({@link step}): the reference the script (`internal/circuitBreaker/redisScript.ts`) follows line for line, and
 * that the Redis tests compare it with, call for call. Mutable and used by the tests only; replicas never run it.
 */
import { halfOpenVerdict, type State } from "./breaker.js"
import type { Deltas, View } from "./breakerFleet.js"
import type { Call, Reply } from "./breakerFleetProtocol.js"
import type { Trip } from "./breakerWindow.js"

/** The fleet state in Redis: the state hash and the window of one trip policy. */
export interface Shared {
  inc: string | undefined
  epoch: number
  state: State
  openUntil: number
  isolated: boolean
  openings: number
  changedAt: number
  /**
   * Half-open permits taken (trials running or ended), trials succeeded and failed (with a
   * `halfOpenFailureRate`; without, a failure reopens), and when the last permit's lease ends.
   */
  taken: number
  succeeded: number
  failed: number
  lease: number
  /** The longest `openForAtLeast` the period's failed trials asked for. */
  failedAsked: number
  /**
   * The half-open period's deadline, set by a permit granted with no trial running, and the epoch it was set
   * in: a deadline of another epoch (one an older version of the script left behind) is none.
   */
  halfOpenUntil: number
  halfOpenEpoch: number
  /** consecutive: the run of failures; count window: chunks [calls, failures, slow], newest first; time: buckets. */
  run: number
  chunks: Array<[number, number, number]>
  buckets: Map<number, [number, number, number]>
}

export const emptyShared = (): Shared => ({
  inc: undefined,
  epoch: 0,
  state: "closed",
  openUntil: 0,
  isolated: false,
  openings: 0,
  changedAt: 0,
  taken: 0,
  succeeded: 0,
  failed: 0,
  lease: 0,
  failedAsked: 0,
  halfOpenUntil: 0,
  halfOpenEpoch: -1,
  run: 0,
  chunks: [],
  buckets: new Map()
})

export interface StepResult extends Reply {
  /** Whether the script publishes the view. */
  readonly published: boolean
}

const emptyWindow = (s: Shared) => {
  s.run = 0
  s.chunks = []
  s.buckets = new Map()
}

/** Adds a flush's counts to the window; true when the trip policy says open. */
const addCounts = (s: Shared, trip: Trip, d: Deltas, now: number): boolean => {
  if (trip._tag === "Consecutive") {
    s.run = d.sawSuccess ? d.trailing : s.run + d.trailing
    return s.run >= trip.failures
  }
  let c = 0
  let f = 0
  let sl = 0
  const w = trip.window
  if (w._tag === "Count") {
    s.chunks.unshift([d.calls, d.failures, d.slow])
    for (let i = 0; i < s.chunks.length; i++) {
      const [a, b, e] = s.chunks[i]!
      if (c + a >= w.calls) {
        const k = (w.calls - c) / a
        c = w.calls
        f += b * k
        sl += e * k
        s.chunks.length = i + 1
        break
      }
      c += a
      f += b
      sl += e
    }
  } else {
    const bucketMillis = w.millis / w.buckets
    const b = Math.floor(now / bucketMillis)
    const bucket = s.buckets.get(b) ?? [0, 0, 0]
    s.buckets.set(b, [bucket[0] + d.calls, bucket[1] + d.failures, bucket[2] + d.slow])
    for (const [index, [bc, bf, bs]] of s.buckets) {
      if (index <= b - w.buckets) {
        s.buckets.delete(index)
      } else {
        c += bc
        f += bf
        sl += bs
      }
    }
  }
  const slowRate = trip.slowCall?.rateThreshold ?? 0
  return c >= trip.minimumCalls && c > 0 && (f / c >= trip.threshold || (slowRate > 0 && sl / c >= slowRate))
}

/** The trials of the half-open period that have not ended. */
const running = (s: Shared): number =>
  s.state === "half-open" && s.halfOpenEpoch === s.epoch ? s.taken - s.succeeded - s.failed : 0

/** One run of the script on `s` (updated in place). */
export const step = (s: Shared, input: Call): StepResult => {
  const { now } = input
  // each creation of the state is an incarnation of its own, even by the same replica: its epochs start over
  if (s.inc === undefined) s.inc = `${input.token}.${now}`
  // an epoch of another incarnation is no epoch of this one
  const known = input.epoch !== -1 && input.inc !== s.inc ? -1 : input.epoch
  let published = false
  let granted = false
  // this call's counts or report opened the breaker (not a deadline, nor isolate)
  let opened = false
  const enter = (to: State, at: number) => {
    s.epoch++
    s.state = to
    s.changedAt = at
    s.taken =
      s.succeeded =
      s.failed =
      s.lease =
      s.failedAsked =
        0
    published = true
  }
  const open = (at: number, asked: number) => {
    enter("open", at)
    s.openings++
    s.openUntil = at + Math.max(input.delay, asked)
    emptyWindow(s)
  }
  const close = () => {
    enter("closed", now)
    s.openings = 0
    s.isolated = false
    emptyWindow(s)
  }
  const lazyHalfOpen = () => {
    if (s.state === "open" && !s.isolated && now >= s.openUntil) enter("half-open", now)
  }
  // a trial of the period ended: the sample's verdict (core/breaker.ts halfOpenVerdict)
  const decide = () => {
    const verdict = halfOpenVerdict(input.permits, s.succeeded, s.failed, input.failureRate)
    if (verdict === "close") close()
    else if (verdict === "open") {
      open(now, s.failedAsked)
      opened = true
    }
  }
  lazyHalfOpen()
  // a half-open period whose trials have not all ended by its deadline opens again, as of that deadline
  if (running(s) > 0 && now >= s.halfOpenUntil) {
    open(s.halfOpenUntil, 0)
    lazyHalfOpen()
  }
  // the caller's epoch names this period only if the period began when the caller's did
  const current = known === s.epoch && input.since === s.changedAt
  switch (input.op) {
    case "flush":
      if (s.state === "closed" && input.deltas.calls > 0 && (known === -1 || current)) {
        if (addCounts(s, input.trip, input.deltas, now)) {
          open(now, input.asked)
          opened = true
        }
      }
      break
    case "acquire":
      if (s.state === "half-open") {
        // permits of trials that never reported (their replica died) are freed when their lease runs out
        if (s.taken >= input.permits && now >= s.lease) s.taken = s.succeeded + s.failed
        if (s.taken < input.permits) {
          // the period's clock starts with a trial granted while none of the period's runs
          if (running(s) === 0 || s.halfOpenEpoch !== s.epoch) {
            s.halfOpenUntil = now + input.trialTimeout
            s.halfOpenEpoch = s.epoch
          }
          s.taken++
          s.lease = now + input.leaseMillis
          granted = true
        }
      }
      break
    case "release":
      if (s.state === "half-open" && current && s.taken > s.succeeded + s.failed) s.taken--
      break
    case "success":
      if (s.state === "half-open" && current) {
        s.succeeded++
        decide()
      }
      break
    case "failure":
      if (s.state === "half-open" && current) {
        s.failed++
        s.failedAsked = Math.max(s.failedAsked, input.asked)
        decide()
      }
      break
    case "isolate":
      if (!s.isolated) {
        if (s.state !== "open") enter("open", now)
        s.isolated = true
        published = true
      }
      break
    case "reset":
      close()
  }
  return { granted, opened, published, view: viewOf(s) }
}

const viewOf = (s: Shared): View => ({
  inc: s.inc!,
  epoch: s.epoch,
  state: s.state,
  openUntil: s.openUntil,
  isolated: s.isolated,
  openings: s.openings,
  changedAt: s.changedAt,
  halfOpenUntil: running(s) > 0 ? s.halfOpenUntil : 0
})
