/**
 * The counters of a breaker's trip policy: consecutive failures, or the failure (and slow-call) rate over
 * the last N calls or the last T milliseconds. {@link record} is called once per call that finished while
 * the breaker was closed and says whether it should open.
 *
 * A window is a plain object that {@link record}, {@link reset} and {@link restore} update in place: a
 * breaker records every call, and copying a ring of a hundred outcomes per call would cost more than the
 * rest of the call. The caller owns the window and keeps it private; {@link snapshot} gives an immutable
 * copy as plain JSON. Time (for time windows) is an argument.
 */

/** A trip policy, decoded and validated (the breaker's `consecutive` / `failureRate` values). */
export type Trip =
  | { readonly _tag: "Consecutive"; readonly failures: number }
  | FailureRate

export interface FailureRate {
  readonly _tag: "FailureRate"
  readonly threshold: number
  readonly minimumCalls: number
  readonly window:
    | { readonly _tag: "Count"; readonly calls: number }
    | { readonly _tag: "Time"; readonly millis: number; readonly buckets: number }
  readonly slowCall: { readonly millis: number; readonly rateThreshold: number } | undefined
}

/** The counters as JSON (the breaker's `WindowSnapshot`). */
export type Snapshot =
  | { readonly _tag: "Consecutive"; readonly failures: number }
  | { readonly _tag: "Count"; readonly size: number; readonly outcomes: ReadonlyArray<number> }
  | {
    readonly _tag: "Time"
    readonly bucketMillis: number
    readonly buckets: ReadonlyArray<readonly [index: number, calls: number, failures: number, slow: number]>
  }

export interface ConsecutiveWindow {
  readonly _tag: "Consecutive"
  readonly threshold: number
  failures: number
}

/** The last `size` calls, in a ring of outcome bits with running totals. */
export interface CountWindow {
  readonly _tag: "Count"
  readonly policy: FailureRate
  readonly size: number
  readonly ring: Uint8Array
  next: number
  filled: number
  failures: number
  slow: number
}

/**
 * A duration split into `size` buckets of `bucketMillis`, as resilience4j and Polly do it. A bucket is
 * identified by its absolute index `floor(now / bucketMillis)`; moving forward clears the buckets that fell
 * out of the window (at most `size` of them), so a call costs O(1) amortised. The window therefore covers
 * between `duration - bucketMillis` and `duration` of history.
 */
export interface TimeWindow {
  readonly _tag: "Time"
  readonly policy: FailureRate
  readonly size: number
  readonly bucketMillis: number
  readonly index: Float64Array
  readonly calls: Float64Array
  readonly fails: Float64Array
  readonly slows: Float64Array
  head: number
  totalCalls: number
  totalFailures: number
  totalSlow: number
}

export type Window = ConsecutiveWindow | CountWindow | TimeWindow

// an outcome is two bits: 1 = failed, 2 = slow
const FAILED = 1
const SLOW = 2

/** An empty window for `trip`. */
export const make = (trip: Trip): Window => {
  if (trip._tag === "Consecutive") return { _tag: "Consecutive", threshold: trip.failures, failures: 0 }
  if (trip.window._tag === "Count") {
    const size = trip.window.calls
    return { _tag: "Count", policy: trip, size, ring: new Uint8Array(size), next: 0, filled: 0, failures: 0, slow: 0 }
  }
  const size = trip.window.buckets
  return {
    _tag: "Time",
    policy: trip,
    size,
    bucketMillis: trip.window.millis / size,
    index: new Float64Array(size).fill(-1),
    calls: new Float64Array(size),
    fails: new Float64Array(size),
    slows: new Float64Array(size),
    head: -1,
    totalCalls: 0,
    totalFailures: 0,
    totalSlow: 0
  }
}

/** Whether {@link record} needs the completion time (time windows). */
export const timed = (w: Window): boolean => w._tag === "Time"

/** Whether the rates in a window of `calls` calls say "open". Rates are compared with `>=`. */
export const exceeds = (policy: FailureRate, calls: number, failures: number, slow: number): boolean =>
  calls >= policy.minimumCalls &&
  (failures / calls >= policy.threshold ||
    (policy.slowCall !== undefined && slow / calls >= policy.slowCall.rateThreshold))

const recordConsecutive = (w: ConsecutiveWindow, failed: boolean): boolean => {
  if (!failed) {
    if (w.failures !== 0) w.failures = 0
    return false
  }
  return ++w.failures >= w.threshold
}

const push = (w: CountWindow, outcome: number): void => {
  if (w.filled === w.size) {
    const old = w.ring[w.next]!
    w.failures -= old & FAILED
    w.slow -= old >> 1
  } else {
    w.filled++
  }
  w.ring[w.next] = outcome
  w.failures += outcome & FAILED
  w.slow += outcome >> 1
  w.next = w.next + 1 === w.size ? 0 : w.next + 1
}

const recordCount = (w: CountWindow, failed: boolean, slow: boolean): boolean => {
  push(w, (failed ? FAILED : 0) | (slow ? SLOW : 0))
  return exceeds(w.policy, w.filled, w.failures, w.slow)
}

/**
 * The slot of the bucket `now` falls in, after expiring what left the window. A time before the epoch, or not
 * finite, counts as the epoch: it must never index a slot of its own.
 */
const advance = (w: TimeWindow, now: number): number => {
  const b = Math.floor((now > 0 && Number.isFinite(now) ? now : 0) / w.bucketMillis)
  if (b > w.head) {
    for (let i = Math.max(w.head + 1, b - w.size + 1, 0); i <= b; i++) {
      const s = i % w.size
      w.totalCalls -= w.calls[s]!
      w.totalFailures -= w.fails[s]!
      w.totalSlow -= w.slows[s]!
      w.index[s] = i
      w.calls[s] = w.fails[s] = w.slows[s] = 0
    }
    w.head = b
  }
  // a clock that went backwards records into the newest bucket
  return w.head % w.size
}

const recordTime = (w: TimeWindow, failed: boolean, slow: boolean, now: number): boolean => {
  const s = advance(w, now)
  w.calls[s]!++
  w.totalCalls++
  if (failed) {
    w.fails[s]!++
    w.totalFailures++
  }
  if (slow) {
    w.slows[s]!++
    w.totalSlow++
  }
  return exceeds(w.policy, w.totalCalls, w.totalFailures, w.totalSlow)
}

/** Counts a call that ended at `now` (read by time windows only); true when the breaker should open. */
export const record = (w: Window, failed: boolean, slow: boolean, now: number): boolean =>
  w._tag === "Consecutive"
    ? recordConsecutive(w, failed)
    : w._tag === "Count"
    ? recordCount(w, failed, slow)
    : recordTime(w, failed, slow, now)

/** Forgets every call (the breaker opened, closed or was reset). */
export const reset = (w: Window): void => {
  switch (w._tag) {
    case "Consecutive":
      w.failures = 0
      return
    case "Count":
      w.ring.fill(0)
      w.next =
        w.filled =
        w.failures =
        w.slow =
          0
      return
    case "Time":
      w.index.fill(-1)
      w.calls.fill(0)
      w.fails.fill(0)
      w.slows.fill(0)
      w.head = -1
      w.totalCalls = w.totalFailures = w.totalSlow = 0
  }
}

/** The counters as JSON-able data, oldest first. */
export const snapshot = (w: Window): Snapshot => {
  switch (w._tag) {
    case "Consecutive":
      return { _tag: "Consecutive", failures: w.failures }
    case "Count": {
      const outcomes: Array<number> = []
      const start = w.filled === w.size ? w.next : 0
      for (let i = 0; i < w.filled; i++) outcomes.push(w.ring[(start + i) % w.size]!)
      return { _tag: "Count", size: w.size, outcomes }
    }
    case "Time": {
      const buckets: Array<[number, number, number, number]> = []
      for (let s = 0; s < w.size; s++) {
        if (w.calls[s]! > 0) buckets.push([w.index[s]!, w.calls[s]!, w.fails[s]!, w.slows[s]!])
      }
      buckets.sort((a, b) => a[0] - b[0])
      return { _tag: "Time", bucketMillis: w.bucketMillis, buckets }
    }
  }
}

const restoreTime = (w: TimeWindow, buckets: ReadonlyArray<unknown>): void => {
  reset(w)
  for (const bucket of buckets) {
    if (!Array.isArray(bucket) || !bucket.every(Number.isInteger)) continue
    const [i, calls, fails, slows] = bucket as [number, number, number, number]
    if (i < 0 || !(calls >= fails && calls >= slows && fails >= 0 && slows >= 0)) continue
    if (i > w.head) advance(w, (i + 0.5) * w.bucketMillis) // mid-bucket: immune to rounding
    if (i <= w.head - w.size) continue
    const slot = i % w.size
    if (w.index[slot] !== i) continue
    w.calls[slot]! += calls
    w.fails[slot]! += fails
    w.slows[slot]! += slows
    w.totalCalls += calls
    w.totalFailures += fails
    w.totalSlow += slows
  }
}

/**
 * Restores a snapshot taken with the same policy. Anything else — another policy, a malformed snapshot or
 * malformed entries (snapshots usually come from `JSON.parse`) — is ignored: the window stays as it is.
 */
export const restore = (w: Window, input: unknown): void => {
  if (typeof input !== "object" || input === null) return
  const s = input as Record<string, unknown>
  if (s._tag !== w._tag) return
  switch (w._tag) {
    case "Consecutive": {
      const failures = s.failures
      if (typeof failures === "number" && Number.isInteger(failures) && failures >= 0) w.failures = failures
      return
    }
    case "Count": {
      const outcomes = s.outcomes
      if (s.size !== w.size || !Array.isArray(outcomes) || outcomes.length > w.size) return
      reset(w)
      for (const o of outcomes) push(w, typeof o === "number" ? o & (FAILED | SLOW) : 0)
      return
    }
    case "Time":
      if (s.bucketMillis === w.bucketMillis && Array.isArray(s.buckets)) restoreTime(w, s.buckets)
  }
}
