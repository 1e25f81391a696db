/**
 * TCP Vegas per sample, exactly as Netflix's concurrency-limits `VegasLimit` does it.
 *
 * Each sample is judged on its own. The no-load RTT is the lowest RTT seen; every `probeJitter × probeMultiplier ×
 * limit` samples (jitter in [0.5, 1), from `random`) the next sample is taken as the no-load RTT instead, so that a
 * dependency that got slower for good is learnt. Otherwise the queue at the dependency is estimated as
 * `ceil(limit × (1 − rttNoLoad / rtt))`, and with `threshold = log10Root(limit)`, `alpha × threshold` and
 * `beta × threshold`:
 *
 * - a drop: `limit − threshold`;
 * - fewer than half the limit in flight: no change (no upward drift while the caller does not use the limit);
 * - queue <= threshold: `limit + beta × threshold`; queue < alpha: `limit + threshold`; queue > beta:
 *   `limit − threshold`; otherwise no change.
 *
 * The new limit is kept within the bounds, then smoothed: `(1 − smoothing) × old + smoothing × new`. A sample whose
 * RTT is not above zero is refused (Netflix throws on it), and counts for nothing, not even the probe's count.
 *
 * Netflix feeds it one window of samples at a time through its `WindowedLimit` (core/windowed.ts); on its own it
 * moves on every call.
 */
import type { Bounds, Sample, State, Vegas } from "./adaptiveLimit.js"
import { clamp, log10Root } from "./clamp.js"

export const update = (bounds: Bounds, v: Vegas, state: State, sample: Sample, random: number): State => {
  const rtt = sample.rttMillis
  if (!(rtt > 0)) return state
  const probeCount = state.probeCount + 1
  // time to probe: this sample is the no-load RTT from now on
  if (state.probeJitter * v.probeMultiplier * state.estimate <= probeCount) {
    return { ...state, probeCount: 0, probeJitter: 0.5 + random / 2, rttNoLoad: rtt }
  }
  // a new lowest RTT (or the first): it is the no-load RTT, and the limit stays
  if (rtt < state.rttNoLoad) return { ...state, probeCount, rttNoLoad: rtt }
  const estimate = state.estimate
  const threshold = log10Root(Math.floor(estimate))
  let next: number
  if (sample.dropped) {
    next = estimate - threshold
  } else if (sample.inflight * 2 < estimate) {
    return { ...state, probeCount }
  } else {
    const queue = Math.ceil(estimate * (1 - state.rttNoLoad / rtt))
    if (queue <= threshold) next = estimate + v.beta * threshold
    else if (queue < v.alpha * threshold) next = estimate + threshold
    else if (queue > v.beta * threshold) next = estimate - threshold
    else return { ...state, probeCount }
  }
  next = clamp(next, bounds.minLimit, bounds.maxLimit)
  return { ...state, probeCount, estimate: (1 - v.smoothing) * estimate + v.smoothing * next }
}
