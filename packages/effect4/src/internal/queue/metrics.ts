import { Effect, Metric } from "effect"
import * as Meter from "../metrics.js"
import { counterWith, gaugeWith } from "../metrics.js"

/** @internal */
export const dlqDepth = Meter.gauge("effect_resilience_queue_dlq_depth", {
  description: "messages in a dead-letter queue"
})
/** @internal */
export const processed = Meter.counter("effect_resilience_queue_processed_total", {
  description: "messages a consumer handled and acknowledged",
  incremental: true
})
/** @internal */
export const deadLettered = Meter.counter("effect_resilience_queue_dead_lettered_total", {
  description: "messages moved to the dead-letter queue, by reason",
  incremental: true
})
/** @internal */
export const released = Meter.counter("effect_resilience_queue_released_total", {
  description: "messages a consumer released for redelivery after a failure",
  incremental: true
})

/** @internal */
export const received = Meter.counter("effect_resilience_queue_received_total", {
  description: "messages a consumer received (each delivery, redeliveries included)",
  incremental: true
})
/** @internal */
export const extended = Meter.counter("effect_resilience_queue_visibility_extended_total", {
  description: "visibility extensions a consumer made while a handler still ran",
  incremental: true
})
/** @internal */
export const redriven = Meter.counter("effect_resilience_queue_redriven_total", {
  description: "messages moved from the dead-letter queue back to the queue",
  incremental: true
})

/** The series of one queue, built once per queue (`counterWith`: an update allocates no attributes context). */
export const labels = (queue: string) => {
  const base = { queue }
  const reason = (reason: string) => counterWith(deadLettered, { queue, reason })
  return {
    processed: counterWith(processed, base),
    released: counterWith(released, base),
    received: counterWith(received, base),
    extended: counterWith(extended, base),
    redriven: counterWith(redriven, base),
    depth: gaugeWith(dlqDepth, base),
    fatal: reason("fatal"),
    maxReceives: reason("max-receives"),
    /** dead-lettered by the source on receive: the stored body is not JSON */
    corrupt: reason("corrupt-body")
  }
}

/** Adds one to a counter series. */
export const count = (series: Metric.Counter<number>): Effect.Effect<void> => Metric.update(series, 1)

/** Sets the depth gauge series of a queue from a depth just observed. */
export const observeDepth = (depth: Metric.Gauge<number>) => (n: number): Effect.Effect<number> =>
  Effect.as(Metric.update(depth, n), n)
