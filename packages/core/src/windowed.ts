/**
 * A window in front of any limit, exactly as Netflix's concurrency-limits `WindowedLimit` does it: the samples are
 * gathered into a window, and the limit behind it sees one sample per window — the window's RTT (its mean, a
 * percentile or a trimmed mean of the calls'), the most calls that were in flight, and whether any was dropped.
 *
 * - A sample faster than `minRttMillis` (default 0.1 ms) is ignored: a call that did no work says nothing.
 * - A window closes at the first sample that ends after `nextUpdate`; the next `nextUpdate` is that sample's end
 *   plus twice the window's lowest RTT, kept within [minWindowMillis, maxWindowMillis] (default 1 s and 1 s). The
 *   first sample closes the first window.
 * - A closed window reaches the limit behind only when it holds at least `windowSize` samples (default 10); a
 *   smaller one is dropped.
 * - A percentile window holds at most `capacity` samples; later ones (their in-flight count and drop included)
 *   are ignored until it closes, as Netflix's `ImmutablePercentileSampleWindow` does.
 *
 * Time is the samples' own: a sample ends at `startMillis + rttMillis`.
 */
import type { Bounds, Config, Sample, State, Windowed, WindowSample } from "./adaptiveLimit.js"

/** The window being filled. `rtts` is kept only for a percentile or a trimmed mean. */
export interface SampleWindow {
  readonly minRtt: number
  readonly sum: number
  readonly count: number
  readonly maxInflight: number
  readonly dropped: boolean
  /** The first `count` entries are this window's (shared with the window it came from; see core/rttWindow.ts). */
  readonly rtts: ReadonlyArray<number>
}

/** The window being filled, and when the next one may close (`-Infinity`: at the first sample). */
export interface WindowedState {
  readonly nextUpdateMillis: number
  readonly window: SampleWindow
}

export const empty = (): SampleWindow => ({
  minRtt: Infinity,
  sum: 0,
  count: 0,
  maxInflight: 0,
  dropped: false,
  rtts: []
})

/** The window with one more sample (unchanged when a percentile window is full). */
export const add = (
  window: SampleWindow,
  kind: WindowSample,
  rtt: number,
  inflight: number,
  dropped: boolean
): SampleWindow => {
  if (kind._tag === "Percentile" && window.count >= kind.capacity) return window
  let rtts = window.rtts as Array<number>
  if (kind._tag !== "Average") {
    // the array is this window's to append to only when no later window has appended to it yet
    if (rtts.length !== window.count) rtts = rtts.slice(0, window.count)
    rtts.push(rtt)
  }
  return {
    minRtt: Math.min(window.minRtt, rtt),
    sum: window.sum + rtt,
    count: window.count + 1,
    maxInflight: Math.max(window.maxInflight, inflight),
    dropped: window.dropped || dropped,
    rtts
  }
}

/**
 * The window's RTT: the mean (Netflix's `ImmutableAverageSampleWindow`), the RTT at `percentile` — the
 * `round(count × percentile)`-th fastest, at least the fastest (Netflix's `ImmutablePercentileSampleWindow`) —, or
 * the mean without the fastest and the slowest `floor(count × trim)`. Zero for an empty window.
 */
export const tracked = (window: SampleWindow, kind: WindowSample): number => {
  const n = window.count
  if (n === 0) return 0
  if (kind._tag === "Average") return window.sum / n
  const sorted = Float64Array.from(window.rtts.slice(0, n)).sort()
  if (kind._tag === "Percentile") return sorted[Math.max(0, Math.round(n * kind.percentile) - 1)]!
  const k = Math.floor(n * kind.trim)
  let sum = 0
  for (let i = k; i < n - k; i++) sum += sorted[i]!
  return sum / (n - 2 * k)
}

/** The state after one sample; `delegate` updates the limit behind the window (core/adaptiveLimit.ts's `update`). */
export const update = (
  bounds: Bounds,
  w: Windowed,
  state: State,
  sample: Sample,
  random: number,
  delegate: (config: Config, state: State, sample: Sample, random: number) => State
): State => {
  const rtt = sample.rttMillis
  if (rtt < w.minRttMillis) return state
  const start = sample.startMillis ?? 0
  const end = start + rtt
  const current = state.windowed ?? { nextUpdateMillis: -Infinity, window: empty() }
  const window = add(current.window, w.sample, rtt, sample.inflight, sample.dropped)
  if (!(end > current.nextUpdateMillis)) return { ...state, windowed: { ...current, window } }
  const nextUpdateMillis = end + Math.min(Math.max(window.minRtt * 2, w.minWindowMillis), w.maxWindowMillis)
  const closed: State = { ...state, windowed: { nextUpdateMillis, window: empty() } }
  if (!(window.minRtt < Infinity && window.count >= w.windowSize)) return closed
  return delegate(
    { bounds, algorithm: w.algorithm },
    closed,
    { rttMillis: tracked(window, w.sample), inflight: window.maxInflight, dropped: window.dropped, startMillis: start },
    random
  )
}
