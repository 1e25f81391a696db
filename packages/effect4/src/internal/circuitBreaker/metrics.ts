import * as Meter from "../metrics.js"

export const stateGauge = Meter.gauge("effect_resilience_breaker_state", {
  description: "circuit breaker state: 0 closed, 1 half-open, 2 open"
})

export const transitions = Meter.counter(
  "effect_resilience_breaker_transitions_total",
  { description: "circuit breaker state transitions", incremental: true }
)

export const rejections = Meter.counter(
  "effect_resilience_breaker_rejections_total",
  { description: "calls refused by an open circuit breaker", incremental: true }
)

export const fleetFallback = Meter.gauge("effect_resilience_breaker_fleet_fallback", {
  description: "1 while a fleet (Redis) circuit breaker runs on its local breaker because Redis failed, else 0"
})

export const fleetFallbacks = Meter.counter(
  "effect_resilience_breaker_fleet_fallbacks_total",
  { description: "times a fleet (Redis) circuit breaker fell back to its local breaker", incremental: true }
)
