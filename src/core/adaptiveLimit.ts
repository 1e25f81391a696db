/**
 * Concurrency limits that find themselves from latency and drops: AIMD, Vegas and Gradient2, after Netflix's
 * concurrency-limits. Plain functions of (config, state, sample) → state; randomness is an argument.
 *
 * A sample is one finished call: its round-trip time, how many calls were in flight when it started, and whether
 * it was dropped (timed out, or refused by the dependency as overloaded). Every algorithm keeps its estimate
 * between `minLimit` and `maxLimit`, and none grows the limit while the caller uses less than half of it
 * (an idle client must not talk itself into a limit it never tested).
 */

/** Limits every algorithm shares. Integers, `1 <= minLimit <= initialLimit <= maxLimit`. */
export interface Bounds {
  readonly minLimit: number
  readonly maxLimit: number
  readonly initialLimit: number
}

/** Additive increase, multiplicative decrease: +1 per good sample near the limit, `× backoffRatio` per drop. */
export interface Aimd {
  readonly _tag: "Aimd"
  /** In (0, 1). */
  readonly backoffRatio: number
  /** A sample slower than this counts as a drop. */
  readonly timeoutMillis: number
}

/**
 * TCP Vegas: estimates the queue as `limit × (1 − rttNoLoad / rtt)`, grows fast while it is small and shrinks
 * when it passes `beta`. `rttNoLoad` is the lowest RTT seen, re-probed every `probeMultiplier × limit` samples
 * (with jitter) so that it can rise again when the dependency gets slower for good.
 */
export interface Vegas {
  readonly _tag: "Vegas"
  /** In (0, 1]: how much of each change is applied. */
  readonly smoothing: number
  readonly probeMultiplier: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), below which the limit grows. */
  readonly alpha: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), above which the limit shrinks; > alpha. */
  readonly beta: number
}

/**
 * Gradient2: compares a short-term RTT (the last sample) with a long-term exponential average; the ratio,
 * bounded to [0.5, 1], scales the limit, and `queueSize` is added on top so the limit keeps probing upward.
 */
export interface Gradient2 {
  readonly _tag: "Gradient2"
  /** In (0, 1]. */
  readonly smoothing: number
  /** >= 1: how much slower than the long-term average a sample may be before the limit shrinks. */
  readonly rttTolerance: number
  /** Samples in the long-term average (its exponential factor is `2 / (longWindow + 1)`). */
  readonly longWindow: number
  /** Head-room added to the limit: calls allowed to queue at the dependency. */
  readonly queueSize: number
}

export type Algorithm = Aimd | Vegas | Gradient2

export interface Config {
  readonly bounds: Bounds
  readonly algorithm: Algorithm
}

export interface Sample {
  readonly rttMillis: number
  /** Calls in flight when this one started, itself included. */
  readonly inflight: number
  readonly dropped: boolean
}

export interface State {
  /** The estimate; the limit in force is {@link limitOf}. */
  readonly estimate: number
  /** Vegas: the lowest RTT seen since the last probe (`Infinity`: none yet). */
  readonly rttNoLoad: number
  /** Vegas: samples since the last probe, and the jitter of the next probe, in [0.5, 1). */
  readonly probeCount: number
  readonly probeJitter: number
  /** Gradient2: the long-term RTT average, and how many samples its warm-up has taken (up to 10). */
  readonly longRtt: number
  readonly warmup: number
}

export const defaults = {
  aimd: { _tag: "Aimd", backoffRatio: 0.9, timeoutMillis: 5_000 } as Aimd,
  vegas: { _tag: "Vegas", smoothing: 1, probeMultiplier: 30, alpha: 3, beta: 6 } as Vegas,
  gradient2: { _tag: "Gradient2", smoothing: 0.2, rttTolerance: 1.5, longWindow: 600, queueSize: 4 } as Gradient2
} as const

const WARMUP = 10

/** The starting state. `random` in [0, 1) seeds Vegas's first probe jitter. */
export const initial = (config: Config, random: number): State => ({
  estimate: config.bounds.initialLimit,
  rttNoLoad: Infinity,
  probeCount: 0,
  probeJitter: 0.5 + random / 2,
  longRtt: 0,
  warmup: 0
})

/** The limit in force: the estimate rounded down, within the bounds. */
export const limitOf = (config: Config, state: State): number =>
  clamp(Math.floor(state.estimate), config.bounds.minLimit, config.bounds.maxLimit)

/**
 * The state after one sample. `random` in [0, 1) is used by Vegas only (the next probe's jitter). A sample with a
 * non-finite or negative RTT leaves the state unchanged.
 */
export const update = (config: Config, state: State, sample: Sample, random: number): State => {
  if (!(sample.rttMillis >= 0) || !Number.isFinite(sample.rttMillis)) return state
  const { algorithm } = config
  switch (algorithm._tag) {
    case "Aimd":
      return aimd(config.bounds, algorithm, state, sample)
    case "Vegas":
      return vegas(config.bounds, algorithm, state, sample, random)
    case "Gradient2":
      return gradient2(config.bounds, algorithm, state, sample)
  }
}

const clamp = (n: number, min: number, max: number) => Math.min(max, Math.max(min, n))

const aimd = (bounds: Bounds, a: Aimd, state: State, sample: Sample): State => {
  const limit = Math.floor(state.estimate)
  let next = limit
  if (sample.dropped || sample.rttMillis > a.timeoutMillis) next = Math.floor(limit * a.backoffRatio)
  else if (sample.inflight * 2 >= limit) next = limit + 1
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return next === state.estimate ? state : { ...state, estimate: next }
}

/** `max(1, floor(log10(n)))`: Vegas's thresholds grow slowly with the limit. */
export const log10Root = (n: number): number => Math.max(1, Math.floor(Math.log10(Math.max(1, n))))

const vegas = (bounds: Bounds, v: Vegas, state: State, sample: Sample, random: number): State => {
  const rtt = sample.rttMillis
  const probeCount = state.probeCount + 1
  if (state.probeJitter * v.probeMultiplier * state.estimate <= probeCount) {
    // re-measure the no-load RTT from this sample, so a dependency that got slower for good is learnt
    return { ...state, probeCount: 0, probeJitter: 0.5 + random / 2, rttNoLoad: rtt }
  }
  if (rtt < state.rttNoLoad) return { ...state, probeCount, rttNoLoad: rtt }
  const estimate = state.estimate
  let next: number
  if (sample.dropped) {
    next = estimate - log10Root(estimate)
  } else if (sample.inflight * 2 < estimate) {
    return { ...state, probeCount }
  } else {
    const queue = rtt === 0 ? 0 : Math.ceil(estimate * (1 - state.rttNoLoad / rtt))
    const size = Math.floor(estimate)
    const threshold = log10Root(size)
    const alpha = v.alpha * threshold
    const beta = v.beta * threshold
    if (queue <= threshold) next = estimate + beta
    else if (queue < alpha) next = estimate + log10Root(size)
    else if (queue > beta) next = estimate - log10Root(size)
    else return { ...state, probeCount }
  }
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return { ...state, probeCount, estimate: (1 - v.smoothing) * estimate + v.smoothing * next }
}

const gradient2 = (bounds: Bounds, g: Gradient2, state: State, sample: Sample): State => {
  const shortRtt = sample.rttMillis
  const warmup = Math.min(WARMUP, state.warmup + 1)
  let longRtt = state.warmup < WARMUP
    ? (state.longRtt * state.warmup + shortRtt) / (state.warmup + 1)
    : state.longRtt * (1 - 2 / (g.longWindow + 1)) + shortRtt * (2 / (g.longWindow + 1))
  // after a long overload the average lags far above the present: pull it down faster than smoothing would
  if (shortRtt > 0 && longRtt / shortRtt > 2) longRtt *= 0.95
  const estimate = state.estimate
  if (sample.inflight < estimate / 2) return { ...state, longRtt, warmup }
  // a drop is the strongest sign of queueing there is: treat it as the gradient's floor
  const gradient = sample.dropped || shortRtt === 0
    ? (sample.dropped ? 0.5 : 1)
    : clamp(g.rttTolerance * longRtt / shortRtt, 0.5, 1)
  let next = estimate * gradient + g.queueSize
  next = estimate * (1 - g.smoothing) + next * g.smoothing
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return { ...state, longRtt, warmup, estimate: next }
}
