import type { Consecutive, FailureRate, TripPolicy, WindowSnapshot } from "../../CircuitBreaker.js"

/**
 * What a trip policy keeps between calls. `record` is called once per finished call while the breaker is
 * closed and says whether the breaker should open. Everything is synchronous and allocation-free on the
 * hot path; the state is plain numbers so it can be snapshotted as JSON.
 */
export interface Recorder {
  /** Whether `record` needs the completion time (time windows). */
  readonly timed: boolean
  record(failed: boolean, slow: boolean, now: number): boolean
  reset(): void
  snapshot(): WindowSnapshot
  /**
   * Restores a snapshot taken with the same policy; anything else is ignored (the window starts empty), and
   * so are malformed entries (snapshots usually come from `JSON.parse`).
   */
  restore(snapshot: WindowSnapshot): void
}

export const makeRecorder = (policy: TripPolicy): Recorder => {
  if (policy._tag === "Consecutive") return new ConsecutiveRecorder(policy)
  return policy.window._tag === "Count"
    ? new CountRecorder(policy, policy.window.calls)
    : new TimeRecorder(policy, policy.window.millis, policy.window.buckets)
}

class ConsecutiveRecorder implements Recorder {
  readonly timed = false
  failures = 0
  constructor(readonly policy: Consecutive) {}
  record(failed: boolean): boolean {
    if (!failed) {
      this.failures = 0
      return false
    }
    return ++this.failures >= this.policy.failures
  }
  reset(): void {
    this.failures = 0
  }
  snapshot(): WindowSnapshot {
    return { kind: "consecutive", failures: this.failures }
  }
  restore(s: WindowSnapshot): void {
    if (s.kind === "consecutive" && Number.isInteger(s.failures) && s.failures >= 0) this.failures = s.failures
  }
}

// an outcome is two bits: 1 = failed, 2 = slow
const FAILED = 1
const SLOW = 2

/** Whether the rates in a window of `calls` calls say "open". Rates are compared with `>=`. */
const exceeds = (policy: FailureRate, calls: number, failures: number, slow: number): boolean =>
  calls >= policy.minimumCalls &&
  (failures / calls >= policy.threshold ||
    (policy.slowCall !== undefined && slow / calls >= policy.slowCall.rateThreshold))

/** The last `size` calls, in a ring of outcome bits with running totals. */
class CountRecorder implements Recorder {
  readonly timed = false
  readonly ring: Uint8Array
  next = 0
  filled = 0
  failures = 0
  slow = 0
  constructor(readonly policy: FailureRate, readonly size: number) {
    this.ring = new Uint8Array(size)
  }
  record(failed: boolean, slow: boolean): boolean {
    this.push((failed ? FAILED : 0) | (slow ? SLOW : 0))
    return exceeds(this.policy, this.filled, this.failures, this.slow)
  }
  push(outcome: number): void {
    if (this.filled === this.size) {
      const old = this.ring[this.next]!
      this.failures -= old & FAILED
      this.slow -= old >> 1
    } else {
      this.filled++
    }
    this.ring[this.next] = outcome
    this.failures += outcome & FAILED
    this.slow += outcome >> 1
    this.next = this.next + 1 === this.size ? 0 : this.next + 1
  }
  reset(): void {
    this.ring.fill(0)
    this.next =
      this.filled =
      this.failures =
      this.slow =
        0
  }
  snapshot(): WindowSnapshot {
    const outcomes: Array<number> = []
    const start = this.filled === this.size ? this.next : 0
    for (let i = 0; i < this.filled; i++) outcomes.push(this.ring[(start + i) % this.size]!)
    return { kind: "count", size: this.size, outcomes }
  }
  restore(s: WindowSnapshot): void {
    if (s.kind !== "count" || s.size !== this.size || !Array.isArray(s.outcomes) || s.outcomes.length > this.size) {
      return
    }
    this.reset()
    for (const o of s.outcomes) this.push(typeof o === "number" ? o & (FAILED | SLOW) : 0)
  }
}

/**
 * A duration split into `size` buckets of `bucketMillis`, as resilience4j and Polly do it. A bucket is
 * identified by its absolute index `floor(now / bucketMillis)`; moving forward clears the buckets that fell
 * out of the window (at most `size` of them), so a call costs O(1) amortised. The window therefore covers
 * between `duration - bucketMillis` and `duration` of history.
 */
class TimeRecorder implements Recorder {
  readonly timed = true
  readonly bucketMillis: number
  readonly index: Float64Array
  readonly calls: Float64Array
  readonly fails: Float64Array
  readonly slows: Float64Array
  head = -1
  totalCalls = 0
  totalFailures = 0
  totalSlow = 0
  constructor(readonly policy: FailureRate, readonly duration: number, readonly size: number) {
    this.bucketMillis = duration / size
    this.index = new Float64Array(size).fill(-1)
    this.calls = new Float64Array(size)
    this.fails = new Float64Array(size)
    this.slows = new Float64Array(size)
  }
  /** The slot of the bucket `now` falls in, after expiring what left the window. */
  advance(now: number): number {
    const b = Math.floor(now / this.bucketMillis)
    if (b > this.head) {
      for (let i = Math.max(this.head + 1, b - this.size + 1, 0); i <= b; i++) {
        const s = i % this.size
        this.totalCalls -= this.calls[s]!
        this.totalFailures -= this.fails[s]!
        this.totalSlow -= this.slows[s]!
        this.index[s] = i
        this.calls[s] = this.fails[s] = this.slows[s] = 0
      }
      this.head = b
    }
    // a clock that went backwards records into the newest bucket
    return this.head % this.size
  }
  record(failed: boolean, slow: boolean, now: number): boolean {
    const s = this.advance(now)
    this.calls[s]!++
    this.totalCalls++
    if (failed) {
      this.fails[s]!++
      this.totalFailures++
    }
    if (slow) {
      this.slows[s]!++
      this.totalSlow++
    }
    return exceeds(this.policy, this.totalCalls, this.totalFailures, this.totalSlow)
  }
  reset(): void {
    this.index.fill(-1)
    this.calls.fill(0)
    this.fails.fill(0)
    this.slows.fill(0)
    this.head = -1
    this.totalCalls = this.totalFailures = this.totalSlow = 0
  }
  snapshot(): WindowSnapshot {
    const buckets: Array<[number, number, number, number]> = []
    for (let s = 0; s < this.size; s++) {
      if (this.calls[s]! > 0) buckets.push([this.index[s]!, this.calls[s]!, this.fails[s]!, this.slows[s]!])
    }
    buckets.sort((a, b) => a[0] - b[0])
    return { kind: "time", bucketMillis: this.bucketMillis, buckets }
  }
  restore(s: WindowSnapshot): void {
    if (s.kind !== "time" || s.bucketMillis !== this.bucketMillis || !Array.isArray(s.buckets)) return
    this.reset()
    for (const bucket of s.buckets) {
      if (!Array.isArray(bucket) || !bucket.every(Number.isInteger)) continue
      const [i, calls, fails, slows] = bucket
      if (i < 0 || !(calls >= fails && calls >= slows && fails >= 0 && slows >= 0)) continue
      if (i > this.head) this.advance((i + 0.5) * this.bucketMillis) // mid-bucket: immune to rounding
      if (i <= this.head - this.size) continue
      const slot = i % this.size
      if (this.index[slot] !== i) continue
      this.calls[slot]! += calls
      this.fails[slot]! += fails
      this.slows[slot]! += slows
      this.totalCalls += calls
      this.totalFailures += fails
      this.totalSlow += slows
    }
  }
}
