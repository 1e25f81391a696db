/**
 * A window of consecutive samples, summarised when it closes: the RTT as a trimmed mean, the largest number of
 * calls in flight, and the drops. The windowed Vegas (core/windowedVegas.ts) moves its limit once per window, as Netflix's
 * `WindowedLimit` feeds its delegate one sample per window, instead of once per call.
 *
 * Why a mean: by Little's law, calls in flight = throughput × mean RTT, so the mean is the RTT that concurrency
 * is made of — a steady mix of cheap and expensive calls has a steady mean, which rises with the queue in front of
 * the expensive ones. Why trimmed (the lowest and the highest tenth left out): one sample, however fast or slow,
 * cannot move the window's RTT outside the range of the others.
 *
 * A window is immutable to its readers. Appending writes into an array shared with the window it came from when
 * that one was the last to append, and copies otherwise, so an older window never sees a later sample.
 */

export interface RttWindow {
  /** The RTTs counted so far; the first `rttCount` entries are this window's. */
  readonly rtts: ReadonlyArray<number>
  readonly rttCount: number
  /** The sum of the RTTs and of their squares: how spread they are. */
  readonly rttSum: number
  readonly rttSquares: number
  /** Every sample added, with or without an RTT that counts. */
  readonly samples: number
  readonly maxInflight: number
  readonly drops: number
}

/** A fresh, empty window. */
export const empty = (): RttWindow => ({
  rtts: [],
  rttCount: 0,
  rttSum: 0,
  rttSquares: 0,
  samples: 0,
  maxInflight: 0,
  drops: 0
})

/** The window with one more sample; `rtt` undefined: the sample has no RTT that counts (it still counts). */
export const add = (
  window: RttWindow,
  rtt: number | undefined,
  inflight: number,
  dropped: boolean
): RttWindow => {
  // the array is this window's to append to only when no later window has appended to it yet
  let rtts = window.rtts as Array<number>
  if (rtt !== undefined) {
    if (rtts.length !== window.rttCount) rtts = rtts.slice(0, window.rttCount)
    rtts.push(rtt)
  }
  return {
    rtts,
    rttCount: rtt === undefined ? window.rttCount : window.rttCount + 1,
    rttSum: rtt === undefined ? window.rttSum : window.rttSum + rtt,
    rttSquares: rtt === undefined ? window.rttSquares : window.rttSquares + rtt * rtt,
    samples: window.samples + 1,
    maxInflight: Math.max(window.maxInflight, inflight),
    drops: dropped ? window.drops + 1 : window.drops
  }
}

/**
 * How many RTTs the window needs for its mean to be known within `precision` (a fraction of it, one standard
 * error): `(cv / precision)²`, where `cv` is the RTTs' coefficient of variation so far. RTTs that are all alike
 * need few; a mix of cheap and expensive calls needs many.
 */
export const needed = (window: RttWindow, precision: number): number => {
  const n = window.rttCount
  if (n < 2 || window.rttSum <= 0) return 0
  const mean = window.rttSum / n
  const variance = Math.max(0, window.rttSquares / n - mean * mean)
  return Math.ceil(variance / (mean * mean) / (precision * precision))
}

/**
 * Whether the last `segment` RTTs have a mean that differs from the earlier ones' by more than three standard
 * errors: the load changed while the window was filling, and its earlier part describes the past. A steady mix of
 * cheap and expensive calls is noisy but does not shift, so its window goes on until it is precise.
 */
export const shifted = (window: RttWindow, segment: number): boolean => {
  const n = window.rttCount
  const earlier = n - segment
  if (segment < 2 || earlier < 2) return false
  let sum = 0
  let squares = 0
  for (let i = earlier; i < n; i++) {
    const rtt = window.rtts[i]!
    sum += rtt
    squares += rtt * rtt
  }
  const lateMean = sum / segment
  const lateVariance = Math.max(0, squares / segment - lateMean * lateMean)
  const earlyMean = (window.rttSum - sum) / earlier
  const earlyVariance = Math.max(0, (window.rttSquares - squares) / earlier - earlyMean * earlyMean)
  const error = Math.sqrt(lateVariance / segment + earlyVariance / earlier)
  return Math.abs(lateMean - earlyMean) > 3 * error
}

/** The share of the RTTs left out at each end by {@link trimmedMean}. */
export const trim = 0.1

/**
 * The mean of the window's RTTs from the `from`-th on, without the lowest and the highest `floor(n × trim)` of
 * them; `undefined` for fewer than `minCount` RTTs (at least 10, so that at least one is left out at each end).
 */
export const trimmedMean = (window: RttWindow, minCount: number, from = 0): number | undefined => {
  const start = Math.max(0, from)
  const n = window.rttCount - start
  if (n < Math.max(10, minCount)) return undefined
  const sorted = Float64Array.from(window.rtts.slice(start, window.rttCount)).sort()
  const k = Math.floor(n * trim)
  let sum = 0
  for (let i = k; i < n - k; i++) sum += sorted[i]!
  return sum / (n - 2 * k)
}
