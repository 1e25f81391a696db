/**
 * Concurrency limits that find themselves from latency and drops: AIMD, Vegas and Gradient2, after Netflix's
 * concurrency-limits, its `WindowedLimit` in front of any of them, and the windowed Vegas `LoadShedMiddleware` uses.
 * Plain functions of (config, state, sample) → state; randomness is an argument.
 *
 * A sample is one finished call: its round-trip time, how many calls were in flight when it started, and whether
 * it was dropped (timed out, or refused by the dependency as overloaded). Every algorithm keeps its estimate
 * between `minLimit` and `maxLimit`, and none grows the limit while the caller uses less than half of it
 * (an idle client must not talk itself into a limit it never tested).
 */
import { clamp, log10Root } from "./clamp.js"
import * as RttWindow from "./rttWindow.js"
import * as VegasLimit from "./vegas.js"
import * as WindowedLimit from "./windowed.js"
import * as WindowedVegasLimit from "./windowedVegas.js"

export { log10Root }

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

/** TCP Vegas per sample, as Netflix's `VegasLimit`: see core/vegas.ts. */
export interface Vegas {
  readonly _tag: "Vegas"
  /** In (0, 1]: how much of each change is applied. */
  readonly smoothing: number
  /** Probes for the no-load RTT every `probeMultiplier × limit` samples (with jitter). */
  readonly probeMultiplier: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), below which the limit grows. */
  readonly alpha: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), above which the limit shrinks; > alpha. */
  readonly beta: number
}

/**
 * TCP Vegas over windows of samples sized to the traffic, with a probe that drains before it measures:
 * `LoadShedMiddleware`'s default (see core/windowedVegas.ts).
 */
export interface WindowedVegas {
  readonly _tag: "WindowedVegas"
  /** In (0, 1]: how much of each change is applied. */
  readonly smoothing: number
  readonly probeMultiplier: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), below which the limit grows. */
  readonly alpha: number
  /** Queued calls, as a multiple of `log10(limit)` (at least 1), above which the limit shrinks; > alpha. */
  readonly beta: number
  /** Samples in a window, at least; >= 10 (a tenth of its RTTs, at least one, is left out at each end). */
  readonly window: number
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

/** How a {@link Windowed} window's RTT is taken from its calls' (see core/windowed.ts). */
export type WindowSample =
  | { readonly _tag: "Average" }
  /** `percentile` in (0, 1); a window holds at most `capacity` samples. */
  | { readonly _tag: "Percentile"; readonly percentile: number; readonly capacity: number }
  /** `trim` in [0, 0.5): the share of the RTTs left out at each end. */
  | { readonly _tag: "TrimmedMean"; readonly trim: number }

/** A per-sample algorithm, one a {@link Windowed} may wrap. */
export type PerSample = Aimd | Vegas | WindowedVegas | Gradient2

/** Netflix's `WindowedLimit`: feeds `algorithm` one sample per window of samples (see core/windowed.ts). */
export interface Windowed {
  readonly _tag: "Windowed"
  readonly algorithm: PerSample
  /** A window lasts at least this long (and twice its lowest RTT), at most `maxWindowMillis`. */
  readonly minWindowMillis: number
  readonly maxWindowMillis: number
  /** The fewest samples a window needs to count; fewer, and it is dropped. */
  readonly windowSize: number
  /** Samples faster than this are ignored. */
  readonly minRttMillis: number
  readonly sample: WindowSample
}

export type Algorithm = PerSample | Windowed

export interface Config {
  readonly bounds: Bounds
  readonly algorithm: Algorithm
}

export interface Sample {
  readonly rttMillis: number
  /** Calls in flight when this one started, itself included. */
  readonly inflight: number
  readonly dropped: boolean
  /**
   * The limit in force when this call started (default: the one in force now). The windowed Vegas leaves out the
   * calls that started under a lower limit than today's: they saw less load than it lets in.
   */
  readonly limit?: number
  /** When the call started, in milliseconds on a monotonic clock: {@link Windowed} times its windows by it. */
  readonly startMillis?: number
}

export interface State {
  /** The estimate; the limit in force is {@link limitOf}. */
  readonly estimate: number
  /**
   * Vegas: the lowest RTT since the last probe, or the probe's; the windowed Vegas: the same of its windows'
   * RTTs (`Infinity`: none yet).
   */
  readonly rttNoLoad: number
  /**
   * Vegas: samples since the last probe, the jitter of the next probe, in [0.5, 1), and (the windowed Vegas) how
   * many times `probeMultiplier × limit` samples apart probes are now (1 to 4: each probe that found the no-load
   * RTT where it was doubles it, one that moved it starts over at 1).
   */
  readonly probeCount: number
  readonly probeJitter: number
  readonly probeSpacing: number
  /** The windowed Vegas: the window being filled. */
  readonly window: RttWindow.RttWindow
  /** The windowed Vegas: the probe under way, if any. */
  readonly probe: Probe | undefined
  /**
   * The windowed Vegas: no window has seen a queue or a drop yet, so the limit grows by half per window (TCP's
   * slow start).
   */
  readonly slowStart: boolean
  /** Windowed: the window being filled and when it may close (`undefined`: no sample yet). */
  readonly windowed: WindowedLimit.WindowedState | undefined
  /** Gradient2: the long-term RTT average, and how many samples its warm-up has taken (up to 10). */
  readonly longRtt: number
  readonly warmup: number
}

/** A windowed Vegas probe: the limit drained to, the one to restore, and how many more samples it may take. */
export interface Probe {
  readonly limit: number
  readonly restore: number
  readonly budget: number
}

export const defaults = {
  aimd: { _tag: "Aimd", backoffRatio: 0.9, timeoutMillis: 5_000 } as Aimd,
  /** Netflix's `VegasLimit` defaults. */
  vegas: { _tag: "Vegas", smoothing: 1, probeMultiplier: 30, alpha: 3, beta: 6 } as Vegas,
  windowedVegas: {
    _tag: "WindowedVegas",
    smoothing: 1,
    probeMultiplier: 30,
    alpha: 3,
    beta: 6,
    window: 10
  } as WindowedVegas,
  gradient2: { _tag: "Gradient2", smoothing: 0.2, rttTolerance: 1.5, longWindow: 600, queueSize: 4 } as Gradient2,
  /** Netflix's `WindowedLimit` defaults (its delegate is the caller's). */
  windowed: {
    minWindowMillis: 1_000,
    maxWindowMillis: 1_000,
    windowSize: 10,
    minRttMillis: 0.1,
    sample: { _tag: "Average" } as WindowSample
  }
} as const

/** Whether the algorithm draws on `random` (Vegas's probe jitter): callers need not draw one otherwise. */
export const usesRandom = (algorithm: Algorithm): boolean =>
  algorithm._tag === "Windowed"
    ? usesRandom(algorithm.algorithm)
    : algorithm._tag === "Vegas" || algorithm._tag === "WindowedVegas"

const WARMUP = 10

/** The starting state. `random` in [0, 1) seeds Vegas's first probe jitter. */
export const initial = (config: Config, random: number): State => ({
  estimate: config.bounds.initialLimit,
  rttNoLoad: Infinity,
  probeCount: 0,
  probeJitter: 0.5 + random / 2,
  probeSpacing: 1,
  window: RttWindow.empty(),
  probe: undefined,
  slowStart: true,
  longRtt: 0,
  warmup: 0,
  windowed: undefined
})

/** The limit in force: the estimate rounded down, within the bounds. */
export const limitOf = (config: Config, state: State): number =>
  clamp(Math.floor(state.estimate), config.bounds.minLimit, config.bounds.maxLimit)

/**
 * The state after one sample. `random` in [0, 1) is used by Vegas only (the next probe's jitter). A sample with a
 * non-finite or negative RTT leaves the state unchanged; one of zero (an instant call, a coarse clock) is no RTT:
 * Vegas refuses it (as Netflix's does), the windowed Vegas and Gradient2 count it only when it is a drop, and a
 * {@link Windowed} ignores it unless its `minRttMillis` is zero.
 */
export const update = (config: Config, state: State, sample: Sample, random: number): State => {
  if (!(sample.rttMillis >= 0) || !Number.isFinite(sample.rttMillis)) return state
  const { algorithm } = config
  switch (algorithm._tag) {
    case "Aimd":
      return aimd(config.bounds, algorithm, state, sample)
    case "Vegas":
      return VegasLimit.update(config.bounds, algorithm, state, sample, random)
    case "WindowedVegas":
      return WindowedVegasLimit.update(config.bounds, algorithm, state, sample, random)
    case "Windowed":
      return WindowedLimit.update(config.bounds, algorithm, state, sample, random, update)
    case "Gradient2":
      return gradient2(config.bounds, algorithm, state, sample)
  }
}

const aimd = (bounds: Bounds, a: Aimd, state: State, sample: Sample): State => {
  const limit = Math.floor(state.estimate)
  let next = limit
  if (sample.dropped || sample.rttMillis > a.timeoutMillis) next = Math.floor(limit * a.backoffRatio)
  else if (sample.inflight * 2 >= limit) next = limit + 1
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return next === state.estimate ? state : { ...state, estimate: next }
}

const gradient2 = (bounds: Bounds, g: Gradient2, state: State, sample: Sample): State => {
  const shortRtt = sample.rttMillis
  // no time on the clock is no RTT: it must not pull the long-term average down (a drop still counts)
  const timed = shortRtt > 0
  if (!timed && !sample.dropped) return state
  let { longRtt, warmup } = state
  if (timed) {
    longRtt = warmup < WARMUP
      ? (longRtt * warmup + shortRtt) / (warmup + 1)
      : longRtt * (1 - 2 / (g.longWindow + 1)) + shortRtt * (2 / (g.longWindow + 1))
    warmup = Math.min(WARMUP, warmup + 1)
    // after a long overload the average lags far above the present: pull it down faster than smoothing would
    if (longRtt / shortRtt > 2) longRtt *= 0.95
  }
  const estimate = state.estimate
  if (sample.inflight < estimate / 2) return { ...state, longRtt, warmup }
  // a drop is the strongest sign of queueing there is: treat it as the gradient's floor
  const gradient = sample.dropped ? 0.5 : clamp(g.rttTolerance * longRtt / shortRtt, 0.5, 1)
  let next = estimate * gradient + g.queueSize
  next = estimate * (1 - g.smoothing) + next * g.smoothing
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return { ...state, longRtt, warmup, estimate: next }
}
