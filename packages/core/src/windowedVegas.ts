/**
 * TCP Vegas over windows of samples sized to the traffic, with a probe that drains: `LoadShedMiddleware`'s default.
 * Not Netflix's `WindowedLimit` in front of its `VegasLimit` (that is core/windowed.ts around core/vegas.ts): the
 * window, the RTT it judges and the probe are all this algorithm's own, made for a mix of cheap and expensive calls.
 *
 * Vegas estimates the calls queued at the dependency as `limit × (1 − rttNoLoad / rtt)`, grows while that queue is
 * small and shrinks when it passes `beta`. Netflix's Vegas does that per call, with `rttNoLoad` the lowest RTT it
 * has seen; one answer far faster than the rest (a 400, a cache hit, a coarse clock's zero) then makes every normal
 * call look queued, and the limit falls to its floor until the next probe. Here:
 *
 * - `rtt` is a window's trimmed mean RTT (core/rttWindow.ts), and the limit moves once per window. By Little's
 *   law the mean is what concurrency is made of, so a steady mix of cheap and expensive calls has a steady mean
 *   that rises with the queue in front of the expensive ones; trimmed, no single call can move it outside the
 *   others' range. An RTT of zero is no RTT at all (Netflix refuses `rtt <= 0`).
 * - `rttNoLoad` is the lowest window RTT since the last probe.
 * - A window holds at least `window` samples and at least `limit` (about one round trip of traffic at the limit);
 *   more when its RTTs are spread (a mix), so that its mean can tell one queued call; it ends early when it already
 *   shows a long queue, or when its latest stretch shows the load moved (it then speaks for that stretch).
 * - Calls that started under a lower limit than the one in force are left out: they saw less load than it lets in,
 *   and would talk it into growing again before its last step was measured.
 * - Too much queued: the limit goes straight to where `beta` would be queued, at most halving per window.
 * - Every `probeMultiplier × limit` samples (with jitter) it measures `rttNoLoad` afresh, so that it can rise when
 *   the dependency got slower for good (or was caught low by a run of cheap calls). Netflix takes the next sample,
 *   taken under load, as the new floor, which lets the queue grow a step at each probe. Here the probe drains first:
 *   the limit drops to where the last window says nothing would queue (`limit × rttNoLoad / rtt`), only calls
 *   admitted under it count, and a window of them is the new `rttNoLoad`; then the limit goes back to where it was
 *   (as BBR's PROBE_RTT does). When the last window already saw no queue, it is the measure. While probes find
 *   the no-load RTT where it was, the next one waits twice as long, up to four times the interval.
 */
import type { Bounds, Probe, Sample, State, WindowedVegas } from "./adaptiveLimit.js"
import { clamp, log10Root } from "./clamp.js"
import * as RttWindow from "./rttWindow.js"

export const update = (bounds: Bounds, v: WindowedVegas, state: State, sample: Sample, random: number): State => {
  const rtt = sample.rttMillis
  // no time on the clock is no RTT: an instant answer must not become the no-load RTT (Netflix refuses rtt <= 0)
  if (!(rtt > 0) && !sample.dropped) return state
  // a call that started under a lower limit saw less load than this one lets in: it says nothing of it (unless it
  // is a drop)
  const earlier = sample.limit !== undefined && sample.limit < Math.floor(state.estimate)
  if (earlier && !sample.dropped) return { ...state, probeCount: state.probeCount + 1 }
  const probeCount = state.probeCount + 1
  const { probe } = state
  if (probe !== undefined) return probing(bounds, v, state, probe, sample, probeCount, random)
  const window = RttWindow.add(state.window, rtt > 0 && !earlier ? rtt : undefined, sample.inflight, sample.dropped)
  // a window ends once it holds enough samples, early on drops, or when the load moved within it
  const moved = changed(v, state.estimate, window)
  const full = moved || window.samples >= windowSize(v, state.estimate, state.rttNoLoad, window) ||
    (window.drops > 0 && window.samples >= v.window)
  if (!full) return { ...state, window, probeCount }

  // when the load moved within the window, its latest stretch is the present
  const windowRtt = RttWindow.trimmedMean(window, v.window, moved ? window.rttCount - least(v, state.estimate) : 0)
  const rttNoLoad = windowRtt === undefined ? state.rttNoLoad : Math.min(state.rttNoLoad, windowRtt)
  const decided = vegasDecision(v, state, rttNoLoad, windowRtt, window)
  const estimate = (1 - v.smoothing) * state.estimate +
    v.smoothing * clamp(decided.limit, bounds.minLimit, bounds.maxLimit)
  const closed: State = {
    ...state,
    estimate,
    rttNoLoad,
    probeCount,
    window: RttWindow.empty(),
    slowStart: state.slowStart && !decided.queued
  }
  if (state.probeSpacing * state.probeJitter * v.probeMultiplier * state.estimate > probeCount) return closed
  const next: State = { ...closed, probeCount: 0, probeJitter: 0.5 + random / 2 }
  if (windowRtt === undefined || rttNoLoad === Infinity) return next
  // time to measure the no-load RTT again, at a limit where this window says nothing would have queued
  const limit = Math.floor(state.estimate)
  const drained = Math.max(1, bounds.minLimit, Math.floor(state.estimate * rttNoLoad / windowRtt))
  if (drained >= limit - log10Root(limit)) return { ...next, rttNoLoad: windowRtt } // nothing queued: it is the measure
  return {
    ...next,
    // drain first, unless the caller did not go past that limit anyway
    estimate: window.maxInflight > drained ? Math.min(estimate, drained) : estimate,
    probe: {
      limit: drained,
      restore: estimate,
      // the calls admitted before the drain end first (they do not count); then a window of calls that do, as
      // long as the longest a window may be
      budget: Math.max(limit, window.maxInflight) + 32 * Math.max(v.window, drained)
    }
  }
}

/**
 * A sample while probing: only calls admitted under the drained limit found no queue, and only they count. The
 * probe ends with a window of them (a drop counts as in any window), which is the no-load RTT from then on; the
 * limit goes back to where it was (as BBR's PROBE_RTT does), and the next window judges it by the new measure.
 */
const probing = (
  bounds: Bounds,
  v: WindowedVegas,
  state: State,
  probe: Probe,
  sample: Sample,
  probeCount: number,
  random: number
): State => {
  const counts = sample.rttMillis > 0 && sample.inflight <= probe.limit
  const window = RttWindow.add(state.window, counts ? sample.rttMillis : undefined, sample.inflight, sample.dropped)
  const fewest = least(v, probe.limit)
  const size = Math.min(16 * fewest, Math.max(fewest, RttWindow.needed(window, 1 / (2 * probe.limit))))
  if (window.rttCount < size && window.samples < probe.budget) return { ...state, window, probeCount }
  const measured = RttWindow.trimmedMean(window, v.window)
  // found where it was (within half of what one queued call adds): the next probe may wait twice as long
  const same = measured !== undefined && Math.abs(measured - state.rttNoLoad) <= state.rttNoLoad / (2 * probe.restore)
  const restore = window.drops > 0
    ? Math.max(probe.restore / 2, probe.restore - window.drops * log10Root(Math.floor(probe.restore)))
    : probe.restore
  return {
    ...state,
    estimate: clamp(restore, bounds.minLimit, bounds.maxLimit),
    rttNoLoad: measured ?? state.rttNoLoad,
    window: RttWindow.empty(),
    probe: undefined,
    probeCount: 0,
    probeJitter: 0.5 + random / 2,
    probeSpacing: same ? Math.min(4, 2 * state.probeSpacing) : 1
  }
}

/**
 * The samples a window takes: {@link least}, and as many as its mean needs to tell the queue it holds to within half
 * a call (one queued call adds about `1 / limit` to it) — many when cheap and expensive calls are mixed —, but at
 * most 16 times the least: a noisy window still ends. A window that already shows more than twice `beta` queued
 * needs to be less precise to say so, and not a round trip long: it ends as soon as its mean is sure of it.
 */
const windowSize = (v: WindowedVegas, estimate: number, rttNoLoad: number, window: RttWindow.RttWindow): number => {
  const limit = Math.max(1, estimate)
  const fewest = least(v, limit)
  const mean = window.rttCount === 0 ? 0 : window.rttSum / window.rttCount
  const queue = mean > rttNoLoad ? limit * (1 - rttNoLoad / mean) : 0
  const beta = v.beta * log10Root(Math.floor(limit))
  const needed = RttWindow.needed(window, Math.max(1, queue - beta) / (2 * limit))
  return queue > 2 * beta ? Math.max(v.window, needed) : Math.min(16 * fewest, Math.max(fewest, needed))
}

/** The fewest samples a window takes: `window`, and at least `limit` (about a round trip of traffic at the limit). */
const least = (v: WindowedVegas, estimate: number): number => Math.max(v.window, Math.floor(estimate))

/**
 * A window longer than {@link least} (a noisy one, waiting to be precise) also ends when its latest stretch of
 * that many samples shows the RTT moved: it must not average the load of before with the load of now. Checked every
 * quarter of that stretch.
 */
const changed = (v: WindowedVegas, estimate: number, window: RttWindow.RttWindow): boolean => {
  const stretch = least(v, estimate)
  const n = window.rttCount
  return n >= 1.5 * stretch && n % Math.ceil(stretch / 4) === 0 && RttWindow.shifted(window, stretch)
}

/**
 * Vegas's limit after a window, and whether the window saw a queue (or a drop); `windowRtt` is undefined when the
 * window had too few RTTs to tell.
 */
const vegasDecision = (
  v: WindowedVegas,
  state: State,
  rttNoLoad: number,
  windowRtt: number | undefined,
  window: RttWindow.RttWindow
): { readonly limit: number; readonly queued: boolean } => {
  const estimate = state.estimate
  const size = Math.floor(estimate)
  const threshold = log10Root(size)
  // a drop is the strongest sign there is; per drop, as Netflix's Vegas does per sample, at most halving
  if (window.drops > 0) return { limit: Math.max(estimate / 2, estimate - window.drops * threshold), queued: true }
  // prevent upward drift while the caller does not use the limit
  if (windowRtt === undefined || rttNoLoad === Infinity || window.maxInflight * 2 < estimate) {
    return { limit: estimate, queued: false }
  }
  const queue = Math.ceil(estimate * (1 - rttNoLoad / windowRtt))
  const alpha = v.alpha * threshold
  const beta = v.beta * threshold
  // nothing queued: grow by beta per window (Netflix adds it per sample), by half until a first queue is seen
  if (queue <= threshold) {
    return { limit: estimate + (state.slowStart ? Math.max(beta, estimate / 2) : beta), queued: false }
  }
  if (queue < alpha) return { limit: estimate + threshold, queued: true }
  // too much queued: straight to where `beta` would be queued (`estimate − queue + beta`), at most halving; one
  // step per window would take many windows of a long queue to get there
  if (queue > beta) return { limit: Math.max(estimate / 2, estimate * rttNoLoad / windowRtt + beta), queued: true }
  return { limit: estimate, queued: true }
}
